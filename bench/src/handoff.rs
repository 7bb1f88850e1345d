//! bench-demo `--handoffs`: does one connection reach the whole egress pool? The same engine
//! set-up and pre-generated bundles at about 90% of the pool's capacity (Jito's 1 s interval),
//! each step a fresh engine and a fresh relay process:
//! 1. 64 connections over 2 reactor threads: the reference (the kernel spreads connections
//!    over the threads' listeners, so every thread's pool sees load);
//! 2. one connection over 2 threads: every bundle is read by one thread;
//! 3. one connection over 4 threads, more than this machine's cores, with a pool that does not
//!    divide evenly among them (255 addresses);
//! 4. the same as 3 with handoffs off: what one connection reached before bundles could move.
//!
//! The targets: with one connection at least 99% of the bundles delivered, no early send at
//! the engine, answer p99 within 1.5× of the 64-connection step's; with 4 threads every
//! thread's pairs carry bundles (each thread's count in the table).

use serde::Serialize;

use crate::demo::{self, DemoConfig, StepReport};
use crate::report::{Align, Table, check_mark, ratio, times, us};

/// Share of the pool's capacity offered.
pub const LOAD_SHARE: f64 = 0.9;
/// One connection must deliver at least this share of what it sent.
pub const DELIVERED_SHARE_MIN: f64 = 0.99;
/// One connection's answer p99 may be at most this multiple of 64 connections'.
pub const ANSWER_P99_RATIO_MAX: f64 = 1.5;
/// A pool of 255 addresses: 2 and 4 threads split it unevenly.
pub const UNEVEN_EGRESS: &str = "127.1.0.0/25,127.1.0.128/26,127.1.0.192/27,127.1.0.224/28,127.1.0.240/29,127.1.0.248/30,127.1.0.252/31,127.1.0.254/32";

/// What `--handoffs` runs; `base` gives the egress (256 addresses by default), duration,
/// mixes, seed and the relay executable.
#[derive(Clone, Debug)]
pub struct HandoffConfig {
    pub base: DemoConfig,
}

/// One step: what it ran and what it found.
#[derive(Clone, Debug, Serialize)]
pub struct HandoffStep {
    pub name: String,
    pub connections: usize,
    pub threads: usize,
    pub handoffs: bool,
    pub report: StepReport,
}

impl HandoffStep {
    /// Distinct bundles the engine took over what the load was to send: a request the load
    /// never sent (it fell behind) is one not delivered, and one taken twice counts once.
    pub fn delivered_share(&self) -> f64 {
        let e = &self.report.engine;
        let scheduled = self.report.load.scheduled.max(1);
        e.accepted.saturating_sub(e.duplicates) as f64 / scheduled as f64
    }

    /// Bundles read on one thread and sent from another, over those admitted.
    pub fn handed_share(&self) -> f64 {
        let t = &self.report.relay_stats;
        t.handoffs_out as f64 / t.admitted.max(1) as f64
    }

    /// Each reactor thread's delivered bundles.
    pub fn per_thread_delivered(&self) -> Vec<u64> {
        self.report
            .relay_stats
            .threads
            .iter()
            .map(|t| t.delivered)
            .collect()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct HandoffReport {
    pub rate_per_s: f64,
    pub capacity_per_s: f64,
    pub steps: Vec<HandoffStep>,
    /// (target, met, what was measured).
    pub verdicts: Vec<(String, bool, String)>,
}

impl HandoffReport {
    /// Broken accounting or early sends in any step, and targets missed.
    pub fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .steps
            .iter()
            .flat_map(|s| s.report.failures())
            .collect();
        f.extend(
            self.verdicts
                .iter()
                .filter(|(_, met, _)| !met)
                .map(|(t, _, got)| format!("{t}: {got}")),
        );
        f
    }
}

impl HandoffConfig {
    pub fn new(base: DemoConfig) -> HandoffConfig {
        HandoffConfig { base }
    }

    fn capacity_per_s(&self) -> f64 {
        (self.base.egress.len() * self.base.regions()) as f64 * 1000.0
            / self.base.interval_ms.max(1) as f64
    }

    fn rate_per_s(&self) -> f64 {
        (LOAD_SHARE * self.capacity_per_s()).floor()
    }

    fn step(&self, connections: usize, threads: usize, uneven: bool, handoffs: bool) -> DemoConfig {
        let egress = if uneven {
            demo::parse_egress(UNEVEN_EGRESS).expect("literal")
        } else {
            self.base.egress.clone()
        };
        DemoConfig {
            rates_per_s: vec![self.rate_per_s()],
            connections,
            relay_threads: threads,
            egress,
            handoffs,
            storm: false,
            faults: Vec::new(),
            ..self.base.clone()
        }
    }

    /// (name, connections, threads, uneven pool, handoffs) of every step, in order.
    fn plan() -> [(&'static str, usize, usize, bool, bool); 4] {
        [
            ("64 connections, 2 threads", 64, 2, false, true),
            ("1 connection, 2 threads", 1, 2, false, true),
            ("1 connection, 4 threads, 255 addresses", 1, 4, true, true),
            (
                "1 connection, 4 threads, 255 addresses, handoffs off",
                1,
                4,
                true,
                false,
            ),
        ]
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.base.relay_exe.is_none() {
            return Err("--handoffs runs the relay in a process of its own".into());
        }
        for (_, c, t, uneven, h) in Self::plan() {
            self.step(c, t, uneven, h).validate()?;
        }
        Ok(())
    }
}

/// Runs every step on one set of generated bundles.
pub fn run(cfg: &HandoffConfig) -> Result<HandoffReport, String> {
    cfg.validate()?;
    let rate = cfg.rate_per_s();
    let load = demo::generate(&cfg.base, (rate * cfg.base.duration_s).ceil() as u64)?;
    let mut steps = Vec::new();
    for (name, connections, threads, uneven, handoffs) in HandoffConfig::plan() {
        if cfg.base.progress {
            eprintln!("bench-demo: --handoffs: {name}");
        }
        let step = cfg.step(connections, threads, uneven, handoffs);
        let report = demo::run_with(&step, &load)?.steps.remove(0);
        steps.push(HandoffStep {
            name: name.into(),
            connections,
            threads,
            handoffs,
            report,
        });
    }
    let verdicts = verdicts(&steps);
    Ok(HandoffReport {
        rate_per_s: rate,
        capacity_per_s: cfg.capacity_per_s(),
        steps,
        verdicts,
    })
}

/// The targets, judged on the steps of [`HandoffConfig::plan`].
pub fn verdicts(steps: &[HandoffStep]) -> Vec<(String, bool, String)> {
    let mut v = Vec::new();
    let [many, one, four, _off] = steps else {
        return v;
    };
    for s in [one, four] {
        let share = s.delivered_share();
        v.push((
            format!("{}: ≥ 99% of the bundles delivered", s.name),
            share >= DELIVERED_SHARE_MIN,
            format!("{:.2}%", 100.0 * share),
        ));
    }
    for s in [many, one, four] {
        v.push((
            format!("{}: no early send", s.name),
            s.report.engine.early_sends == 0,
            s.report.engine.early_sends.to_string(),
        ));
    }
    let r = ratio(
        one.report.load.latency.p99_us,
        many.report.load.latency.p99_us,
    );
    v.push((
        "1 connection's answer p99 within 1.5× of 64 connections'".into(),
        r.is_some_and(|r| r <= ANSWER_P99_RATIO_MAX),
        format!(
            "{} against {} ({})",
            us(one.report.load.latency.p99_us),
            us(many.report.load.latency.p99_us),
            times(r)
        ),
    ));
    let per_thread = four.per_thread_delivered();
    v.push((
        format!("{}: every thread's pairs carry bundles", four.name),
        per_thread.len() == four.threads && per_thread.iter().all(|&d| d > 0),
        format!("{per_thread:?}"),
    ));
    v
}

/// CPU per bundle kept (the 64-connection step, where nothing moves) beside CPU per bundle
/// handed to another thread, from each one-connection step's share handed off: the extra CPU
/// per bundle over the kept figure, divided by that share.
pub fn handoff_cpu(steps: &[HandoffStep]) -> Option<String> {
    let kept = steps.first()?;
    let base = kept.report.cpu.relay_us_per_delivered;
    let mut parts = Vec::new();
    for s in steps.iter().skip(1).filter(|s| s.handoffs) {
        let share = s.handed_share();
        if share <= 0.0 {
            continue;
        }
        let extra = (s.report.cpu.relay_us_per_delivered - base) / share;
        parts.push(format!(
            "{}: {} per bundle with {:.0}% handed, so {} per handed-off bundle",
            s.name,
            us(s.report.cpu.relay_us_per_delivered),
            100.0 * share,
            us(base + extra)
        ));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "relay CPU per bundle kept: {} ({}); {}",
            us(base),
            kept.name,
            parts.join("; ")
        )
    })
}

/// The table, the per-thread counts and the verdicts.
pub fn render(r: &HandoffReport) -> String {
    let mut t = Table::aligned(&[
        ("step", Align::Left),
        ("delivered", Align::Right),
        ("expired", Align::Right),
        ("refused (429)", Align::Right),
        ("early sends", Align::Right),
        ("answer p50 / p99", Align::Right),
        ("delivery p99", Align::Right),
        ("relay CPU/bundle", Align::Right),
        ("handed to another thread", Align::Right),
        ("delivered by thread", Align::Left),
    ]);
    for s in &r.steps {
        let rep = &s.report;
        t.push(vec![
            s.name.clone(),
            format!("{:.2}%", 100.0 * s.delivered_share()),
            rep.relay_stats.expired.to_string(),
            (rep.relay_stats.refused_cap + rep.relay_stats.refused_backlog).to_string(),
            rep.engine.early_sends.to_string(),
            format!(
                "{} / {}",
                us(rep.load.latency.p50_us),
                us(rep.load.latency.p99_us)
            ),
            us(rep.engine.latency.percentiles.p99_us),
            us(rep.cpu.relay_us_per_delivered),
            format!("{:.1}%", 100.0 * s.handed_share()),
            format!("{:?}", s.per_thread_delivered()),
        ]);
    }
    let mut out = format!(
        "One connection against the whole pool: {:.0} bundles/s offered, {:.0}% of the pool's {:.0}/s\n\n",
        r.rate_per_s,
        100.0 * LOAD_SHARE,
        r.capacity_per_s
    );
    out.push_str(&t.render());
    out.push('\n');
    if let Some(line) = handoff_cpu(&r.steps) {
        out.push_str(&line);
        out.push('\n');
    }
    for (target, met, got) in &r.verdicts {
        out.push_str(&format!("{} {target}: {got}\n", check_mark(*met)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::RelayKind;
    use crate::demo::test_steps::step;

    fn handoff_step(scheduled: u64, sent: u64, accepted: u64, duplicates: u64) -> HandoffStep {
        let mut report = step(RelayKind::BundleRelay, 100.0, 0, 500.0, 50.0);
        report.load.scheduled = scheduled;
        report.load.counts.sent = sent;
        report.engine.accepted = accepted;
        report.engine.duplicates = duplicates;
        HandoffStep {
            name: "one connection".into(),
            connections: 1,
            threads: 2,
            handoffs: true,
            report,
        }
    }

    #[test]
    fn the_delivered_share_counts_what_was_scheduled_and_each_bundle_once() {
        assert_eq!(handoff_step(100, 100, 100, 0).delivered_share(), 1.0);
        assert_eq!(
            handoff_step(100, 50, 50, 0).delivered_share(),
            0.5,
            "half never sent"
        );
        assert_eq!(
            handoff_step(100, 100, 100, 5).delivered_share(),
            0.95,
            "5 taken twice"
        );
    }
}
