//! What a step and a whole run found ([`StepReport`], [`DemoReport`], serialised as the JSON
//! `--json` writes) and their verdicts: a step fails on broken relay accounting or an early send
//! at the engine; a rate is sustained under [`SUSTAINED_ERROR_FRACTION_MAX`] errors and sent at
//! [`SUSTAINED_SEND_FRACTION_MIN`] of its offered rate. Not how they are printed (`render.rs`).

use serde::Serialize;

use super::RelayKind;
use super::config::{SUSTAINED_ERROR_FRACTION_MAX, SUSTAINED_SEND_FRACTION_MIN};
use super::relay::RelayStats;
use crate::engine::EngineStats;
use crate::load::LoadSummary;
use crate::report;

/// CPU time of one component over a step.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CpuFigures {
    pub relay_us: u64,
    pub engine_us: u64,
    pub load_us: u64,
    pub relay_us_per_delivered: f64,
    pub engine_us_per_delivered: f64,
    pub load_us_per_delivered: f64,
    /// The measured window: from the load's start until the relay settled.
    pub window_us: u64,
    /// CPU over the window in cores (1.0 = one core busy throughout).
    pub relay_cores: f64,
    pub engine_cores: f64,
    pub load_cores: f64,
    /// Whether the relay's figure is its own process's (`relay_exe`), not its threads'.
    pub relay_in_own_process: bool,
}

/// A relay process's memory over one step.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RelayMemory {
    pub pid: u32,
    /// VmRSS when the load started (after every pair was up).
    pub rss_kb_at_load_start: u64,
    /// Largest VmRSS sampled while the load ran and the relay settled.
    pub rss_kb_max: u64,
    /// VmHWM (peak RSS over the process's life) at the step's end.
    pub hwm_kb: u64,
}

/// One step's results.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    pub rate_per_s: f64,
    pub duration_s: f64,
    pub relay: RelayKind,
    pub egress_addresses: usize,
    pub pairs: usize,
    pub interval_ms: u64,
    pub in_flight_max: u32,
    pub fds_needed: usize,
    pub faults: Vec<String>,
    /// Requests answered with the expected bundle id.
    pub answered_ok: u64,
    /// Requests not answered with the expected bundle id (errors, timeouts, unsent, refusals)
    /// plus admitted bundles the relay did not deliver (rejected, expired, failed, in flight).
    pub errors: u64,
    /// Admitted bundles the relay did not deliver.
    pub undelivered: u64,
    pub error_fraction: f64,
    /// Bundles the engine accepted per second of load.
    pub delivered_per_s: f64,
    pub load: LoadSummary,
    pub relay_stats: RelayStats,
    pub accounting_holds: bool,
    pub engine: EngineStats,
    /// Connections the engine had accepted when the load began: every pair for a relay that
    /// connected them all before it (both relays do), so no handshake falls in the window.
    #[serde(default)]
    pub engine_connections_before_load: u64,
    pub storm_told: u64,
    pub cpu: CpuFigures,
    /// The relay process's memory; `None` when the relay ran on this process's threads.
    pub memory: Option<RelayMemory>,
}

impl StepReport {
    /// What must hold for the step to pass: the relay accounts for every bundle and the
    /// engine saw no early send.
    pub fn failures(&self) -> Vec<String> {
        verdicts(self.rate_per_s, &self.relay_stats, &self.engine)
    }
}

/// Why a step failed: broken relay accounting or early sends seen by the engine.
pub fn verdicts(rate_per_s: f64, relay: &RelayStats, engine: &EngineStats) -> Vec<String> {
    let mut f = Vec::new();
    if !relay.identity_holds() {
        f.push(format!(
            "relay accounting broken at {rate_per_s}/s: admitted {} != {}",
            relay.admitted,
            report::bundle_ends(relay)
        ));
    }
    if engine.early_sends > 0 {
        f.push(format!(
            "the engine saw {} early sends at {rate_per_s}/s (by source: {:?})",
            engine.early_sends, engine.early_sends_by_source
        ));
    }
    f
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct DemoReport {
    pub generated_bundles: u64,
    pub generation_bundles_per_s: f64,
    pub steps: Vec<StepReport>,
    /// The highest rate whose errors stayed under `SUSTAINED_ERROR_FRACTION_MAX` and whose
    /// requests went out at `SUSTAINED_SEND_FRACTION_MIN` of the offered rate or better.
    pub sustained_rate_per_s: Option<f64>,
}

impl DemoReport {
    pub fn failures(&self) -> Vec<String> {
        self.steps.iter().flat_map(|s| s.failures()).collect()
    }
}

/// The highest rate up to which every step's errors stayed under
/// [`SUSTAINED_ERROR_FRACTION_MAX`] and its load went out at [`SUSTAINED_SEND_FRACTION_MIN`] of
/// the offered rate or better: a rate that passed above one that failed is not sustained (a
/// relay that failed at 8,000/s and passed at 10,000/s by luck sustains 6,000/s).
pub fn sustained_rate(steps: &[StepReport]) -> Option<f64> {
    let mut by_rate: Vec<&StepReport> = steps.iter().collect();
    by_rate.sort_by(|a, b| a.rate_per_s.total_cmp(&b.rate_per_s));
    by_rate
        .into_iter()
        .take_while(|s| {
            s.error_fraction < SUSTAINED_ERROR_FRACTION_MAX
                && s.load.achieved_rate_per_s >= SUSTAINED_SEND_FRACTION_MIN * s.rate_per_s
        })
        .map(|s| s.rate_per_s)
        .last()
}

/// Step reports for the report builders' tests.
#[cfg(test)]
pub(crate) mod test_steps {
    use super::{CpuFigures, RelayKind, RelayMemory, RelayStats, StepReport};
    use crate::engine::EngineStats;
    use crate::load::{Counts, LoadSummary};
    use crate::report::Percentiles;

    fn lat(p50: f64, p99: f64) -> Percentiles {
        Percentiles {
            count: 1000,
            p50_us: p50,
            p90_us: p50,
            p99_us: p99,
            p999_us: p99 * 2.0,
            p9999_us: p99 * 2.0,
            max_us: p99 * 3.0,
            mean_us: p50,
        }
    }

    /// A step at `rate` with `errors`, answer p99 `p99_us`, relay CPU `cpu_us` per bundle.
    pub(crate) fn step(
        relay: RelayKind,
        rate: f64,
        errors: u64,
        p99_us: f64,
        cpu_us: f64,
    ) -> StepReport {
        let scheduled = (rate * 3.0) as u64;
        StepReport {
            rate_per_s: rate,
            duration_s: 3.0,
            relay,
            egress_addresses: 256,
            pairs: 2048,
            interval_ms: 10,
            in_flight_max: 4096,
            fds_needed: 0,
            faults: Vec::new(),
            answered_ok: scheduled - errors,
            errors,
            undelivered: 0,
            error_fraction: errors as f64 / scheduled as f64,
            delivered_per_s: rate,
            load: LoadSummary {
                targets: Vec::new(),
                rate_per_s_requested: rate,
                connections: 16,
                pipeline_depth: 1,
                threads: 1,
                scheduled,
                counts: Counts::default(),
                unsent: 0,
                elapsed_s: 3.0,
                achieved_rate_per_s: rate,
                rate_over_s: 3.0,
                by_status: Default::default(),
                by_rpc_error: Default::default(),
                result_ids_matching: scheduled - errors,
                result_ids_differing: 0,
                latency: lat(p99_us / 10.0, p99_us),
            },
            relay_stats: RelayStats::default(),
            accounting_holds: true,
            engine: EngineStats::default(),
            engine_connections_before_load: 2048,
            storm_told: 0,
            cpu: CpuFigures {
                relay_us_per_delivered: cpu_us,
                ..CpuFigures::default()
            },
            memory: Some(RelayMemory {
                pid: 1,
                rss_kb_at_load_start: 10_000,
                rss_kb_max: 10_500,
                hwm_kb: 11_000,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bundle_relay::metrics::accounting::Totals;

    fn balanced() -> RelayStats {
        RelayStats::of(Totals {
            admitted: 10,
            delivered: 6,
            rejected: 1,
            expired: 1,
            failed: 1,
            in_flight: 1,
            ..Totals::default()
        })
    }

    #[test]
    fn a_rate_that_passed_above_one_that_failed_is_not_sustained() {
        use crate::demo::RelayKind;
        use crate::demo::test_steps::step;
        let steps: Vec<StepReport> = [(8000.0, 900), (2000.0, 0), (10_000.0, 0), (4000.0, 0)]
            .into_iter()
            .map(|(rate, errors)| step(RelayKind::Baseline, rate, errors, 100.0, 100.0))
            .collect();
        assert_eq!(sustained_rate(&steps), Some(4000.0));
        assert_eq!(sustained_rate(&steps[..1]), None);
    }

    #[test]
    fn a_balanced_relay_and_no_early_sends_pass() {
        assert!(verdicts(100.0, &balanced(), &EngineStats::default()).is_empty());
    }

    #[test]
    fn a_bundle_missing_from_the_relay_accounting_fails_the_step() {
        let relay = RelayStats::of(Totals {
            delivered: 5,
            ..balanced().totals
        });
        let v = verdicts(100.0, &relay, &EngineStats::default());
        assert_eq!(v.len(), 1);
        assert!(v[0].contains("admitted 10 != delivered 5"), "{v:?}");
    }

    #[test]
    fn one_early_send_fails_the_step_and_names_its_source() {
        let mut engine = EngineStats {
            early_sends: 1,
            ..EngineStats::default()
        };
        engine.early_sends_by_source.insert("127.1.0.7".into(), 1);
        let v = verdicts(100.0, &balanced(), &engine);
        assert_eq!(v.len(), 1);
        assert!(
            v[0].contains("1 early sends") && v[0].contains("127.1.0.7"),
            "{v:?}"
        );
    }
}
