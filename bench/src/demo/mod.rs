//! bench-demo: the whole measurement on loopback: the synthetic block engine, a relay
//! (bundle-relay by default, or the conventional baseline; on threads of this process or, with
//! `relay_exe`, in a process of its own) and the open-loop load, with a live progress line
//! and a final report of throughput, answer and delivery latency, outcomes, relay accounting,
//! engine pacing verdicts and CPU per delivered bundle for each component.
//!
//! `--rates` runs one fresh engine and relay per rate (fresh limiter state, fresh duplicate
//! set, a fresh storm at each step's middle), reusing one pre-generated set of bundles.
//!
//! | file | job |
//! |---|---|
//! | `config.rs` | what a run is: [`DemoConfig`], [`RelayKind`], the open-file budget |
//! | `bundles.rs` | the signed bundles every step reuses, generated once |
//! | `relay.rs` | a relay of either kind started from a [`RelaySetup`]; its counters as `Totals` |
//! | `host.rs` | engine, relay and SOCKS5 proxies each on a thread with a runtime of its own |
//! | `child.rs` | the relay as a process of its own: both sides of its stdin/stdout protocol |
//! | `relay_run.rs` | a step's relay, on threads or in a process, behind one interface |
//! | `procfs.rs` | CPU readers (ticks per thread, a process's exact CPU clock) and RSS |
//! | `measure.rs` | the sampler thread, the live progress line, a step's CPU window |
//! | `step.rs` | one step: engine, relay, load, settle, measure |
//! | `results.rs` | what a step and a run found, and their verdicts |
//! | `render.rs` | the plain-text report |
//!
//! Measured (`cargo run --release -p bundle-relay-bench --bin bench-demo -- --relay
//! baseline`, 2 cores shared with other builds): 10,000 bundles generated at ~7,800/s; 1,000 req/s for 10 s through the
//! baseline with 2,048 pairs and a 25% storm at 5 s: all answered with their ids, all 10,000
//! delivered, answer p50 0.28 ms / p99 4.6 ms, delivery p50 0.5 ms / p99 9.5 ms, 552 storm
//! back-offs honoured, no early send; CPU per delivered bundle: relay ~450 µs (with its 2,048
//! pairs then connected lazily inside the window; each step now connects them first), engine
//! ~155 µs, load ~95 µs. `--rates 500,1000,1500,2000,3000 --duration-s 5`: throughput at < 0.1% errors 1,500 req/s; at 2,000/s
//! the storm leaves ~1,540 pairs/s and the relay expires 0.95%.

mod bundles;
mod child;
mod config;
mod host;
mod measure;
pub(crate) mod procfs;
mod relay;
mod relay_run;
mod render;
mod results;
mod step;

pub use bundles::{PreparedLoad, generate};
pub use child::{RelayLine, SERVE_RELAY_ARG, serve_relay};
pub use config::{
    DemoConfig, EGRESS_DEFAULT, FDS_PROCESS_MAX, FDS_RESERVE, IN_FLIGHT_MAX_DEFAULT, RelayKind,
    STORM_FRACTION_DEFAULT, STORM_RETRY_MS_DEFAULT, SUSTAINED_ERROR_FRACTION_MAX,
    SUSTAINED_SEND_FRACTION_MIN, parse_egress,
};
pub(crate) use host::{ENGINE_THREAD, EngineThread, start_engine};
pub(crate) use procfs::{CpuSampler, pid_ticks, process_ticks, tick_us};
pub use procfs::{parse_mem_kb, read_mem_kb};
pub use relay::{RelaySetup, RelayStats, RelayTuning, RunningRelay};
pub use relay_run::PAIRS_UP_WAIT_MAX;
pub(crate) use relay_run::{RelayProbe, RelayRun, wait_pairs_up};
pub use render::{cpu_note, render, step_figures};
#[cfg(test)]
pub(crate) use results::test_steps;
pub use results::{CpuFigures, DemoReport, RelayMemory, StepReport, sustained_rate, verdicts};
pub(crate) use step::{SentLogFile, run_load};

/// Runs every step and returns the report (the caller prints it and decides the exit code).
pub fn run(cfg: &DemoConfig) -> Result<DemoReport, String> {
    cfg.validate()?;
    let max_rate = cfg.rates_per_s.iter().cloned().fold(0.0, f64::max);
    let load = generate(cfg, (max_rate * cfg.duration_s).ceil() as u64)?;
    run_with(cfg, &load)
}

/// Runs every step of `cfg` on already generated bundles (a step uses the first rate x
/// duration of them, so `load` must hold at least that many).
pub fn run_with(cfg: &DemoConfig, load: &PreparedLoad) -> Result<DemoReport, String> {
    cfg.validate()?;
    let mut steps = Vec::new();
    for &rate in &cfg.rates_per_s {
        steps.push(step::run_step(cfg, rate, &load.bundles)?);
    }
    let sustained_rate_per_s = sustained_rate(&steps);
    let generated = load.bundles.len() as u64;
    Ok(DemoReport {
        generated_bundles: generated,
        generation_bundles_per_s: generated as f64 / load.seconds.max(1e-9),
        steps,
        sustained_rate_per_s,
    })
}
