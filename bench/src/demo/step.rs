//! One step at one rate, every component fresh: the engine (the step's faults, a sent log the
//! load writes and the engine reads), the SOCKS5 proxies for the proxied share of the pool, the
//! relay with every pair up (bundle-relay connects eagerly; the baseline lazily), then the
//! open-loop load, the relay left to settle, and the measured window turned into a
//! [`StepReport`]. A step never sees another step's traffic, so its row stands alone.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::config::{STORM_FRACTION_DEFAULT, STORM_RETRY_MS_DEFAULT};
use super::host::{EngineThread, ProxyThread, start_engine, start_proxies};
use super::measure::{Measured, Monitor, Watched};
use super::relay::{RelaySetup, RelayStats};
use super::relay_run::{RelayProbe, RelayRun, wait_pairs_up};
use super::results::StepReport;
use super::{DemoConfig, RelayKind};
use crate::engine::{EngineConfig, EngineStats, FaultSpec};
use crate::load::{self, LoadConfig, LoadReport, LoadSummary};
use crate::sentlog::SentLog;
use crate::txgen::GeneratedBundle;

/// After the load ends, how long to wait for the relay's in-flight bundles to end before
/// shutting it down (its own max age is 2 s; this leaves room for the last answer).
const SETTLE_MAX: Duration = Duration::from_secs(5);
const SETTLE_POLL: Duration = Duration::from_millis(20);
/// How long the load waits for one answer before counting it a timeout.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// The engine numbers the run in its sent log; each step has a fresh engine and log.
const RUN_ID: u32 = 1;

/// Runs one step at `rate` on the first rate x duration of `all`.
pub(super) fn run_step(
    cfg: &DemoConfig,
    rate: f64,
    all: &[GeneratedBundle],
) -> Result<StepReport, String> {
    let count = ((rate * cfg.duration_s).ceil() as usize).min(all.len());
    let bundles = &all[..count];
    let sent_log = SentLogFile::create(rate, count)?;
    let faults = step_faults(cfg);
    let engine = start_engine(engine_config(cfg, &faults, &sent_log.path)?)?;
    let (proxies, relay) = match start_relay(cfg, &engine) {
        Ok(started) => started,
        Err(e) => {
            let _ = engine.stop();
            return Err(e);
        }
    };
    let targets = load_targets(cfg, &relay);
    if cfg.progress {
        announce(cfg, rate, &relay, targets[0]);
    }
    let probe = relay.probe();
    let monitor = Monitor::start(Watched {
        relay_pid: relay.pid(),
        engine: engine.handle.clone(),
        relay: probe.clone(),
        rate_per_s: rate,
        progress: cfg.progress,
    })?;
    // Both relays connected every pair before serving; the engine's accept loop may count the
    // last few a moment later. Waited for (bounded), so the window starts with none pending.
    let pairs = cfg.pairs() as u64;
    let until = Instant::now() + Duration::from_secs(5);
    while engine.handle.stats().connections_accepted < pairs && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let connected = engine.handle.stats().connections_accepted;
    let window = monitor.open_window();
    let load_result = run_load(cfg, rate, targets, &sent_log.path, bundles);
    settle(&probe);
    let measured = monitor.close(window);
    drop(probe);

    let relay_result = relay.stop();
    let engine_stats = engine.stop()?;
    let relay_stats = relay_result?;
    drop(proxies);
    drop(sent_log);
    let load = load_result.map_err(|e| format!("load: {e}"))?.summary;
    let mut report = step_report(
        cfg,
        rate,
        faults,
        load,
        relay_stats,
        engine_stats,
        &measured,
    );
    report.engine_connections_before_load = connected;
    Ok(report)
}

/// The step's sent log in the temp dir, removed when the step ends.
pub(crate) struct SentLogFile {
    pub(crate) path: PathBuf,
}

impl SentLogFile {
    /// Creates a log for `count` bundles; the engine maps it when it starts and the load
    /// re-creates it with the same size.
    pub(crate) fn create(rate: f64, count: usize) -> Result<SentLogFile, String> {
        // Unique per step, so steps run at once in one process (tests) never share a log.
        static STEP: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "bench-demo-sent-{}-{}-{}",
            std::process::id(),
            rate as u64,
            STEP.fetch_add(1, Ordering::Relaxed)
        ));
        SentLog::create(&path, count.max(1))
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(SentLogFile { path })
    }
}

impl Drop for SentLogFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The default storm, half the step's duration after its engine starts: the relay's start
/// and its pairs' connects come first (about a second for 2,048 pairs here), so the storm
/// lands that much before the middle of the load.
fn storm_spec(duration_s: f64) -> String {
    let ms = (duration_s * 500.0).round() as u64;
    format!("storm@{ms}ms:fraction={STORM_FRACTION_DEFAULT},retry_ms={STORM_RETRY_MS_DEFAULT}")
}

/// The step's engine faults as given: `--fault`s, then the mid-run storm when on.
fn step_faults(cfg: &DemoConfig) -> Vec<String> {
    let mut faults = cfg.faults.clone();
    if cfg.storm {
        faults.push(storm_spec(cfg.duration_s));
    }
    faults
}

fn engine_config(
    cfg: &DemoConfig,
    faults: &[String],
    sent_log: &std::path::Path,
) -> Result<EngineConfig, String> {
    let faults = faults
        .iter()
        .map(|f| f.parse::<FaultSpec>().map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(EngineConfig {
        interval_ms: cfg.interval_ms,
        faults,
        seed: cfg.seed,
        sent_log: Some(sent_log.to_path_buf()),
        run_id: Some(RUN_ID),
        stats_addr: None,
        // Ephemeral ports on the usual per-region addresses: no clash with other tools.
        port: 0,
        tls: cfg.tls,
        ..EngineConfig::default()
    })
}

/// The proxies and the relay, and for bundle-relay every pair up; on failure what started is
/// stopped again (but the engine, which the caller stops).
fn start_relay(cfg: &DemoConfig, engine: &EngineThread) -> Result<(ProxyThread, RelayRun), String> {
    // The last `socks5` egress addresses are the proxies' outbound sources.
    let direct = cfg.egress.len() - cfg.socks5;
    let proxies = start_proxies(&cfg.egress[direct..])?;
    let setup = RelaySetup {
        regions: engine.handle.region_addrs(),
        egress: cfg.egress[..direct].to_vec(),
        socks5: proxies.addrs.clone(),
        tls_ca_pem: engine.handle.ca_pem().map(str::to_string),
        interval_ms: cfg.interval_ms,
        threads: cfg.relay_threads,
        in_flight_max: cfg.in_flight_max,
        metrics: cfg.metrics,
        tuning: None,
        bad_tls_regions: Vec::new(),
        admin: false,
        handoffs: cfg.handoffs,
        tenants: cfg.tenants,
        reload_every_ms: cfg.reload_every_ms,
        egress_cut_at_ms: cfg.egress_cut_at_s.map_or(0, |s| (s * 1000.0) as u64),
        leader: cfg.leader,
        reactor_poll: cfg.reactor_poll,
        cpus: if cfg.pin_relay {
            crate::affinity::relay_cores(cfg.relay_threads)
        } else {
            Vec::new()
        },
        ping_idle_ms: None,
        tcp_user_timeout_ms: None,
    };
    let relay = RelayRun::start(cfg, setup)?;
    if cfg.relay == RelayKind::BundleRelay
        && let Err(e) = wait_pairs_up(&relay.probe(), cfg.pairs() as u64)
    {
        let _ = relay.stop();
        return Err(e);
    }
    Ok((proxies, relay))
}

/// The rotating port, then (with `--pinned`) every pinned one.
fn load_targets(cfg: &DemoConfig, relay: &RelayRun) -> Vec<SocketAddr> {
    let mut targets = vec![relay.rotating_addr()];
    if cfg.pinned {
        targets.extend(relay.pinned_addrs());
    }
    targets
}

/// The step's set-up, one line on stderr.
fn announce(cfg: &DemoConfig, rate: f64, relay: &RelayRun, rotating: SocketAddr) {
    eprintln!(
        "bench-demo: step {rate}/s for {} s: engine {} regions (interval {} ms), {} relay{} rotating {} \
         with {} egress x {} regions = {} pairs{}, in-flight cap {}{}",
        cfg.duration_s,
        cfg.regions(),
        cfg.interval_ms,
        cfg.relay,
        relay
            .pid()
            .map_or(String::new(), |p| format!(" (process {p})")),
        rotating,
        cfg.egress.len(),
        cfg.regions(),
        cfg.pairs(),
        if cfg.socks5 > 0 {
            format!(" ({} addresses via SOCKS5)", cfg.socks5)
        } else {
            String::new()
        },
        cfg.in_flight_max,
        if cfg.tls { ", TLS to the engines" } else { "" },
    );
}

/// The open-loop load on a thread of its own (`demo-load`), until every bundle was sent.
pub(crate) fn run_load(
    cfg: &DemoConfig,
    rate: f64,
    targets: Vec<SocketAddr>,
    sent_log: &std::path::Path,
    bundles: &[GeneratedBundle],
) -> Result<LoadReport, String> {
    let load_cfg = LoadConfig {
        targets,
        rate_per_s: rate,
        duration: Some(Duration::from_secs_f64(cfg.duration_s)),
        requests: Some(bundles.len() as u64),
        connections: cfg.connections,
        pipeline_depth: 1,
        threads: 1,
        timeout: ANSWER_TIMEOUT,
        sent_log: Some(sent_log.to_path_buf()),
        hlog: None,
        progress: cfg.progress,
    };
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("demo-load".into())
            .spawn_scoped(s, || load::run(&load_cfg, bundles))
            .expect("spawning the load thread")
            .join()
            .expect("the load thread panicked")
    })
    .map_err(|e| e.to_string())
}

/// Lets the relay finish what it holds, for at most [`SETTLE_MAX`].
fn settle(probe: &RelayProbe) {
    let start = Instant::now();
    while probe.stats().is_ok_and(|s| s.in_flight > 0) && start.elapsed() < SETTLE_MAX {
        std::thread::sleep(SETTLE_POLL);
    }
}

fn step_report(
    cfg: &DemoConfig,
    rate: f64,
    faults: Vec<String>,
    load: LoadSummary,
    relay_stats: RelayStats,
    engine: EngineStats,
    measured: &Measured,
) -> StepReport {
    let answered_ok = load.result_ids_matching;
    let undelivered = relay_stats.admitted.saturating_sub(relay_stats.delivered);
    let errors = load.scheduled.saturating_sub(answered_ok) + undelivered;
    StepReport {
        rate_per_s: rate,
        duration_s: cfg.duration_s,
        relay: cfg.relay,
        egress_addresses: cfg.egress.len(),
        pairs: cfg.pairs(),
        interval_ms: cfg.interval_ms,
        in_flight_max: cfg.in_flight_max,
        fds_needed: cfg.fds_needed(),
        faults,
        answered_ok,
        errors,
        undelivered,
        error_fraction: errors as f64 / load.scheduled.max(1) as f64,
        delivered_per_s: engine.accepted as f64 / load.elapsed_s.max(1e-9),
        accounting_holds: relay_stats.identity_holds(),
        storm_told: engine.faults.get("storm").copied().unwrap_or(0),
        cpu: measured.cpu(relay_stats.delivered),
        memory: measured.memory.clone(),
        load,
        relay_stats,
        engine,
        engine_connections_before_load: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_storm_falls_mid_run() {
        assert_eq!(
            storm_spec(10.0),
            "storm@5000ms:fraction=0.25,retry_ms=30000"
        );
        storm_spec(10.0).parse::<FaultSpec>().unwrap();
    }
}
