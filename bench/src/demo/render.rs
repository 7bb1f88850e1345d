//! The demo's plain-text report: one block of labelled lines per step, then (for `--rates`) one
//! table of every step with the sustained rate marked, then the throughput verdict; and
//! [`cpu_note`], the line `--compare` and the switch-cost modes print about who used the CPU.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::config::FDS_PROCESS_MAX;
use super::results::{DemoReport, StepReport};
use crate::report::{self, Align, Table, mib, us};

/// A process set whose CPU reaches this share of the machine's cores had no CPU to spare: the
/// step's rate was bound by the CPU of all three processes together.
const SATURATED_SHARE: f64 = 0.85;

/// The plain-text report.
pub fn render(report: &DemoReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "generated {} bundles at {:.0} bundles/s",
        report.generated_bundles, report.generation_bundles_per_s
    );
    for s in &report.steps {
        step_lines(&mut o, s);
    }
    if report.steps.len() > 1 {
        let _ = write!(o, "\n{}", steps_table(report).render());
    }
    match report.sustained_rate_per_s {
        Some(r) => {
            let _ = writeln!(o, "\nthroughput at <0.1% errors: {r:.0} req/s");
        }
        None => {
            let _ = writeln!(
                o,
                "\nthroughput at <0.1% errors: no rate stayed under 0.1% errors"
            );
        }
    }
    o
}

/// One step's block: set-up, throughput, answers, latency, outcomes, accounting, engine, CPU
/// and memory.
fn step_lines(o: &mut String, s: &StepReport) {
    let l = &s.load.latency;
    let d = &s.engine.latency.percentiles;
    let r = &s.relay_stats;
    let _ = writeln!(
        o,
        "\n=== {} relay, {} req/s for {} s ===",
        s.relay, s.rate_per_s, s.duration_s
    );
    let _ = writeln!(
        o,
        "setup              {} egress x 8 regions = {} pairs, interval {} ms, in-flight cap {}, {} of {FDS_PROCESS_MAX} fds budgeted",
        s.egress_addresses, s.pairs, s.interval_ms, s.in_flight_max, s.fds_needed
    );
    let _ = writeln!(
        o,
        "faults             {}",
        if s.faults.is_empty() {
            "none".to_string()
        } else {
            s.faults.join("; ")
        }
    );
    let _ = writeln!(
        o,
        "throughput         offered {:.0}/s, sent {:.0}/s, engine accepted {:.0}/s",
        s.rate_per_s, s.load.achieved_rate_per_s, s.delivered_per_s
    );
    let _ = writeln!(
        o,
        "answers            {} of {} OK with the expected bundle id; errors {} ({:.3}%, {} of them admitted but not delivered)",
        s.answered_ok,
        s.load.scheduled,
        s.errors,
        s.error_fraction * 100.0,
        s.undelivered
    );
    let _ = writeln!(
        o,
        "answer latency     p50 {}  p99 {}  p99.9 {}  max {}",
        us(l.p50_us),
        us(l.p99_us),
        us(l.p999_us),
        us(l.max_us)
    );
    let _ = writeln!(
        o,
        "delivery latency   p50 {}  p99 {}  p99.9 {}  max {}  ({} measured)",
        us(d.p50_us),
        us(d.p99_us),
        us(d.p999_us),
        us(d.max_us),
        d.count
    );
    let _ = writeln!(
        o,
        "outcomes           HTTP {:?}  JSON-RPC errors {:?}  load errors {} timeouts {} unsent {}",
        s.load.by_status,
        s.load.by_rpc_error,
        s.load.counts.errors,
        s.load.counts.timeouts,
        s.load.unsent
    );
    let _ = writeln!(
        o,
        "relay accounting   admitted {} = {}: {}",
        r.admitted,
        report::bundle_ends(r),
        if s.accounting_holds {
            "holds"
        } else {
            "BROKEN"
        }
    );
    let _ = writeln!(
        o,
        "relay              retries {} cooldowns {} refused at cap {} refused for the backlog {} bad requests {}",
        r.retries, r.cooldowns, r.refused_cap, r.refused_backlog, r.bad_requests
    );
    let faults: BTreeMap<&String, &u64> = s.engine.faults.iter().filter(|(_, v)| **v > 0).collect();
    let rejected: BTreeMap<&String, &u64> =
        s.engine.rejected.iter().filter(|(_, v)| **v > 0).collect();
    let _ = writeln!(
        o,
        "engine             accepted {} early sends {} duplicates {} rejected {:?} faults {:?}",
        s.engine.accepted, s.engine.early_sends, s.engine.duplicates, rejected, faults
    );
    let _ = writeln!(
        o,
        "CPU per delivered  relay {:.1} µs  engine {:.1} µs  load {:.1} µs  (totals {} / {} / {} µs)",
        s.cpu.relay_us_per_delivered,
        s.cpu.engine_us_per_delivered,
        s.cpu.load_us_per_delivered,
        s.cpu.relay_us,
        s.cpu.engine_us,
        s.cpu.load_us
    );
    let _ = writeln!(
        o,
        "CPU busy           relay {:.2} cores{}  engine {:.2}  load {:.2}  over {:.1} s",
        s.cpu.relay_cores,
        if s.cpu.relay_in_own_process {
            " (its own process)"
        } else {
            " (threads of this process)"
        },
        s.cpu.engine_cores,
        s.cpu.load_cores,
        s.cpu.window_us as f64 / 1e6
    );
    if let Some(m) = &s.memory {
        let _ = writeln!(
            o,
            "relay memory       RSS {} at load start, {} max during the step, peak (VmHWM) {}",
            mib(m.rss_kb_at_load_start),
            mib(m.rss_kb_max),
            mib(m.hwm_kb)
        );
    }
}

/// Every step in one row, the sustained rate marked `<`.
fn steps_table(report: &DemoReport) -> Table {
    let mut t = Table::aligned(&[
        ("rate/s", Align::Right),
        ("sent/s", Align::Right),
        ("accept/s", Align::Right),
        ("errors%", Align::Right),
        ("ans p50", Align::Right),
        ("ans p99", Align::Right),
        ("dlv p99", Align::Right),
        ("early", Align::Right),
        ("relay µs", Align::Right),
        ("engine µs", Align::Right),
        ("", Align::Left),
    ]);
    for s in &report.steps {
        let sustained = Some(s.rate_per_s) == report.sustained_rate_per_s;
        t.push(vec![
            format!("{:.0}", s.rate_per_s),
            format!("{:.0}", s.load.achieved_rate_per_s),
            format!("{:.0}", s.delivered_per_s),
            format!("{:.3}", s.error_fraction * 100.0),
            us(s.load.latency.p50_us),
            us(s.load.latency.p99_us),
            us(s.engine.latency.percentiles.p99_us),
            s.engine.early_sends.to_string(),
            format!("{:.1}", s.cpu.relay_us_per_delivered),
            format!("{:.1}", s.cpu.engine_us_per_delivered),
            if sustained { "<" } else { "" }.to_string(),
        ]);
    }
    t
}

/// A step's errors, answer p99 and relay CPU, the end of each step's line under a `--compare`
/// or switch-cost table.
pub fn step_figures(s: &StepReport) -> String {
    format!(
        "errors {:.3}%, answer p99 {}, relay CPU {:.1} µs/bundle ({:.2} cores)",
        s.error_fraction * 100.0,
        us(s.load.latency.p99_us),
        s.cpu.relay_us_per_delivered,
        s.cpu.relay_cores
    )
}

/// Each process's CPU over a step in cores and whether the machine had any to spare, so a
/// reader knows when the bench tools, not the relay, set the ceiling; `label` names the run.
pub fn cpu_note(label: &str, s: &StepReport, cores: usize) -> String {
    let c = &s.cpu;
    let total = c.relay_cores + c.engine_cores + c.load_cores;
    let mut note = format!(
        "{label} at {:.0}/s offered ({:.0}/s sent): relay {:.2} cores, engine {:.2}, load {:.2}; {:.2} of {cores} cores busy",
        s.rate_per_s,
        s.load.achieved_rate_per_s,
        c.relay_cores,
        c.engine_cores,
        c.load_cores,
        total
    );
    if total >= SATURATED_SHARE * cores as f64 && c.relay_cores < 0.5 * total {
        let _ = write!(
            note,
            " — the machine was saturated and the relay used {:.0}% of it: the bench tools (engine + load), not the relay, bound this rate",
            100.0 * c.relay_cores / total
        );
    } else if total >= SATURATED_SHARE * cores as f64 {
        let _ = write!(
            note,
            " — the machine was saturated, the relay the largest user"
        );
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::RelayKind;
    use crate::demo::test_steps::step;

    #[test]
    fn a_sweep_prints_one_row_a_step_with_the_sustained_rate_marked() {
        let steps = vec![
            step(RelayKind::BundleRelay, 500.0, 0, 900.0, 40.0),
            step(RelayKind::BundleRelay, 1000.0, 30, 2000.0, 40.0),
        ];
        let report = DemoReport {
            generated_bundles: 3000,
            generation_bundles_per_s: 1.0,
            sustained_rate_per_s: crate::demo::sustained_rate(&steps),
            steps,
        };
        let text = render(&report);
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(rows.len(), 3, "header and one row a step:\n{text}");
        assert!(
            rows[1].starts_with("|    500 |") && rows[1].ends_with("| < |"),
            "{text}"
        );
        assert!(rows[2].ends_with("|   |"), "{text}");
        assert!(
            text.contains("throughput at <0.1% errors: 500 req/s"),
            "{text}"
        );
    }
}
