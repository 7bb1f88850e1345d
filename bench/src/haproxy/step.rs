//! One step: one shape at one rate, every process fresh. The engine on a thread of this
//! process (a fresh pacing ledger and duplicate set, so a step sees no other step's sends);
//! the relay processes, each with all its pairs up; for the HAProxy shape HAProxy in front of
//! them; then the open-loop load at the front, the window left open until the engine stops
//! receiving, HAProxy's stats read, and everything stopped.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bundle_relay::metrics::accounting::Totals;
use serde::Serialize;

use super::HaproxyConfig;
use super::measure::{Pids, ShapeCpu, Window};
use super::proxy::{Proxy, ServerStat};
use super::relay_proc::{RelayPlan, RelayProc};
use crate::demo::{RelayStats, SentLogFile, run_load, start_engine};
use crate::engine::{EngineConfig, EngineStats};
use crate::load::LoadSummary;
use crate::txgen::GeneratedBundle;

/// After the load ends, how long the engine may keep receiving (a relay's bundle max age is
/// 2 s; this leaves room for its last send).
const SETTLE_MAX: Duration = Duration::from_secs(5);
/// The engine has received everything once its count stood still this long.
const SETTLE_QUIET: Duration = Duration::from_millis(300);
const SETTLE_POLL: Duration = Duration::from_millis(20);
/// The engine numbers the run in its sent log; each step has a fresh engine and log.
const RUN_ID: u32 = 1;

/// What carries the load: one relay owning the whole list, or N relays each owning a slice
/// behind HAProxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Shape {
    OneRelay,
    Haproxy { relays: usize },
}

impl Shape {
    pub fn label(&self) -> String {
        match self {
            Shape::OneRelay => "1 relay".into(),
            Shape::Haproxy { relays } => format!("HAProxy + {relays} relays"),
        }
    }
}

/// One step's results.
#[derive(Clone, Debug, Serialize)]
pub struct ShapeStep {
    pub shape: Shape,
    pub rate_per_s: f64,
    pub duration_s: f64,
    /// Each relay's reactor threads.
    pub relay_threads: usize,
    pub load: LoadSummary,
    /// Each relay's accounting from its exit line, in slice order.
    pub relays: Vec<Totals>,
    pub engine: EngineStats,
    /// HAProxy's view of each relay; empty for one relay.
    pub servers: Vec<ServerStat>,
    pub cpu: ShapeCpu,
}

impl ShapeStep {
    /// Every relay's accounting together.
    pub fn relay_totals(&self) -> Totals {
        let mut t = Totals::default();
        for r in &self.relays {
            t.merge(r);
        }
        t
    }

    /// Requests answered with their own bundle id.
    pub fn answered_ok(&self) -> u64 {
        self.load.result_ids_matching
    }

    /// Requests not answered with their bundle id, plus admitted bundles not delivered.
    pub fn errors(&self) -> u64 {
        let t = self.relay_totals();
        self.load.scheduled.saturating_sub(self.answered_ok())
            + t.admitted.saturating_sub(t.delivered)
    }

    /// HAProxy's and the relays' CPU per bundle the relays delivered, µs.
    pub fn front_us_per_delivered(&self) -> f64 {
        (self.cpu.haproxy_us + self.cpu.relays_us) as f64
            / self.relay_totals().delivered.max(1) as f64
    }

    /// Broken accounting or early sends at the engine.
    pub fn failures(&self) -> Vec<String> {
        crate::demo::verdicts(
            self.rate_per_s,
            &RelayStats::of(self.relay_totals()),
            &self.engine,
        )
        .into_iter()
        .map(|f| format!("{}: {f}", self.shape.label()))
        .collect()
    }
}

/// A loopback port nothing listens on now (HAProxy's config needs the relays' ports up front).
fn free_port() -> Result<SocketAddr, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("finding a free loopback port: {e}"))
}

/// The step's files (configs, HAProxy's socket), removed when it ends.
struct StepDir(PathBuf);

impl StepDir {
    fn create(rate: f64, shape: Shape) -> Result<StepDir, String> {
        let tag = match shape {
            Shape::OneRelay => 1,
            Shape::Haproxy { relays } => relays,
        };
        let dir = std::env::temp_dir().join(format!(
            "bench-demo-haproxy-{}-{}-{tag}",
            std::process::id(),
            rate as u64
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(StepDir(dir))
    }
}

impl Drop for StepDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `shape` at `rate` on the first rate x duration of `all`.
pub(super) fn run_step(
    cfg: &HaproxyConfig,
    shape: Shape,
    rate: f64,
    all: &[GeneratedBundle],
) -> Result<ShapeStep, String> {
    let count = ((rate * cfg.duration_s).ceil() as usize).min(all.len());
    let bundles = &all[..count];
    let dir = StepDir::create(rate, shape)?;
    let sent_log = SentLogFile::create(rate, count)?;
    let engine = start_engine(EngineConfig {
        interval_ms: cfg.base.interval_ms,
        seed: cfg.base.seed,
        sent_log: Some(sent_log.path.clone()),
        run_id: Some(RUN_ID),
        stats_addr: None,
        port: 0,
        ..EngineConfig::default()
    })?;
    let regions = engine.handle.region_addrs();
    let (n, threads) = match shape {
        Shape::OneRelay => (1, cfg.relays),
        Shape::Haproxy { relays } => (relays, 1),
    };
    let started = start_front(cfg, shape, &dir.0, &regions, n, threads);
    let (relays, proxy) = match started {
        Ok(s) => s,
        Err(e) => {
            let _ = engine.stop();
            return Err(e);
        }
    };
    let target = proxy.as_ref().map_or(relays[0].intake, |p| p.front);
    if cfg.base.progress {
        eprintln!(
            "bench-demo --haproxy: {} at {rate}/s for {} s, load at {target}, {} egress x {} regions at {} ms, {threads} reactor thread(s) a relay",
            shape.label(),
            cfg.duration_s,
            cfg.base.egress.len(),
            regions.len(),
            cfg.base.interval_ms
        );
    }
    let window = Window::open(
        Pids {
            haproxy: proxy.as_ref().map(Proxy::pid),
            relays: relays.iter().map(RelayProc::pid).collect(),
        },
        engine.handle.clone(),
        format!("{} at {rate}/s", shape.label()),
        cfg.base.progress,
    )?;
    let load_cfg = crate::demo::DemoConfig {
        duration_s: cfg.duration_s,
        ..cfg.base.clone()
    };
    let load_result = run_load(&load_cfg, rate, vec![target], &sent_log.path, bundles);
    settle(
        &engine.handle,
        load_result
            .as_ref()
            .map_or(0, |l| l.summary.result_ids_matching),
    );
    let cpu = window.close();
    let servers = match &proxy {
        Some(p) => p.servers(),
        None => Ok(Vec::new()),
    };
    drop(proxy);
    let totals: Vec<Result<Totals, String>> = relays.into_iter().map(RelayProc::stop).collect();
    let engine_stats = engine.stop()?;
    drop(sent_log);
    let load = load_result.map_err(|e| format!("load: {e}"))?.summary;
    Ok(ShapeStep {
        shape,
        rate_per_s: rate,
        duration_s: cfg.duration_s,
        relay_threads: threads,
        load,
        relays: totals.into_iter().collect::<Result<_, _>>()?,
        engine: engine_stats,
        servers: servers?,
        cpu,
    })
}

/// The relays (all pairs up), then HAProxy in front of them for that shape.
fn start_front(
    cfg: &HaproxyConfig,
    shape: Shape,
    dir: &Path,
    regions: &[(String, SocketAddr)],
    n: usize,
    threads: usize,
) -> Result<(Vec<RelayProc>, Option<Proxy>), String> {
    let mut relays = Vec::with_capacity(n);
    for index in 1..=n {
        let plan = RelayPlan {
            binary: &cfg.relay_bin,
            dir,
            index,
            slice_of: matches!(shape, Shape::Haproxy { .. }).then_some(n),
            intake: free_port()?,
            regions,
            egress: &cfg.base.egress,
            interval_ms: cfg.base.interval_ms,
            threads,
            in_flight_max: cfg.base.in_flight_max,
        };
        relays.push(plan.start()?);
    }
    let proxy = match shape {
        Shape::OneRelay => None,
        Shape::Haproxy { .. } => {
            let intakes: Vec<SocketAddr> = relays.iter().map(|r| r.intake).collect();
            Some(Proxy::start(&cfg.haproxy_bin, dir, free_port()?, &intakes)?)
        }
    };
    Ok((relays, proxy))
}

/// Waits until the engine holds what was answered, or its count stood still for
/// [`SETTLE_QUIET`], for at most [`SETTLE_MAX`].
fn settle(engine: &crate::engine::EngineHandle, answered: u64) {
    let start = Instant::now();
    let (mut seen, mut since) = (engine.stats().accepted, Instant::now());
    while start.elapsed() < SETTLE_MAX {
        std::thread::sleep(SETTLE_POLL);
        let now = engine.stats().accepted;
        if now >= answered {
            return;
        }
        if now != seen {
            (seen, since) = (now, Instant::now());
        } else if since.elapsed() >= SETTLE_QUIET {
            return;
        }
    }
}
