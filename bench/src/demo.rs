//! bench-demo: the whole measurement in one process on loopback: the synthetic block engine,
//! a relay (the conventional baseline for now) and the open-loop load, with a live progress line
//! and a final report of throughput, answer and delivery latency, outcomes, relay accounting,
//! engine pacing verdicts and CPU per delivered bundle for each component.
//!
//! Threads: the engine runs on its own current-thread tokio runtime on a thread named
//! `demo-engine` (one core at most, as `bench-engine` runs it); the relay on its own
//! multi-thread runtime whose threads are all named `demo-relay`; the load on `load::run`'s
//! threads (`load-N`) driven from a thread named `demo-load`. CPU per component is read from
//! `/proc/self/task/*/stat` (utime + stime in clock ticks, grouped by thread name) by a sampler
//! thread that keeps each thread's latest figure, so nothing is lost when a thread exits
//! between samples except its last sampling period. The load's CPU is the process's CPU over
//! the run (which includes exited threads) less the engine's, the relay's and the sampler's.
//!
//! `--rates` runs one fresh engine and relay per rate (fresh limiter state, fresh duplicate
//! set, a fresh storm at each step's middle), reusing one pre-generated set of bundles: a step
//! never sees another step's traffic, so its row stands alone.
//!
//! Measured (`cargo run --release -p bundle-relay-bench --bin bench-demo`, 2 cores shared with
//! other builds): 10,000 bundles generated at ~7,800/s; 1,000 req/s for 10 s through the
//! baseline with 2,048 pairs and a 25% storm at 5 s: all answered with their ids, all 10,000
//! delivered, answer p50 0.28 ms / p99 4.6 ms, delivery p50 0.5 ms / p99 9.5 ms, 552 storm
//! back-offs honoured, no early send; CPU per delivered bundle: relay ~450 µs (lazy connection
//! set-up of the 2,048 pairs included), engine ~155 µs, load ~95 µs. `--rates
//! 500,1000,1500,2000,3000 --duration-s 5`: throughput at < 0.1% errors 1,500 req/s; at 2,000/s
//! the storm leaves ~1,540 pairs/s and the relay expires 0.95%.
//!
//! A second relay kind plugs in as a variant of [`RelayKind`] and [`RunningRelay`].

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::baseline::config::{self as bconfig, BaselineConfig};
use crate::baseline::{Baseline, BaselineHandle};
use crate::engine::{Engine, EngineConfig, EngineHandle, EngineStats, FaultSpec};
use crate::load::{self, LoadConfig, LoadSummary};
use crate::txgen::{self, GeneratedBundle, TxGenConfig};

/// The most open files one process may hold (the host's rule for every bench process).
pub const FDS_PROCESS_MAX: usize = 20_000;
/// Files besides connections: std streams, listeners (8 engine regions, 9 relay intakes),
/// epoll and timer fds, the sent log, /proc reads.
pub const FDS_RESERVE: usize = 256;
/// Default egress range: 256 addresses, so 2,048 (address, region) pairs over 8 regions.
pub const EGRESS_DEFAULT: &str = "127.1.0.0/24";
/// Default storm: a quarter of the sources are told to back off 30 s, mid-run. A quarter
/// leaves the default 2,048 pairs about 1,500 sends/s, so the default 1,000/s stays inside
/// capacity and the report shows the back-off honoured rather than an overload; half
/// (`--no-storm --fault storm@5s:fraction=0.5,retry_ms=30000`) leaves ~900/s, below 1,000/s,
/// and the relay then expires bundles.
pub const STORM_FRACTION_DEFAULT: f64 = 0.25;
pub const STORM_RETRY_MS_DEFAULT: u64 = 30_000;
/// A run's errors must stay below this fraction of its requests for its rate to count as
/// sustained ("throughput at < 0.1% errors").
pub const SUSTAINED_ERROR_FRACTION_MAX: f64 = 0.001;
/// A run must also have sent at this share of its offered rate: past saturation the open-loop
/// sender itself falls behind (every request still answered, but late), and that rate was not
/// sustained either.
pub const SUSTAINED_SEND_FRACTION_MIN: f64 = 0.99;
/// How often the CPU sampler reads /proc: short, so a thread that exits loses little.
const CPU_SAMPLE_PERIOD: Duration = Duration::from_millis(50);
/// After the load ends, how long to wait for the relay's in-flight bundles to end before
/// shutting it down (its own max age is 2 s; this leaves room for the last answer).
const SETTLE_MAX: Duration = Duration::from_secs(5);

/// Which relay sits between the load and the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RelayKind {
    /// The conventional relay, `crate::baseline`.
    Baseline,
}

impl std::str::FromStr for RelayKind {
    type Err = String;
    fn from_str(s: &str) -> Result<RelayKind, String> {
        match s {
            "baseline" => Ok(RelayKind::Baseline),
            other => Err(format!("unknown relay `{other}` (known: baseline)")),
        }
    }
}

/// A relay's counters in one shape for every kind.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct RelayStats {
    pub admitted: u64,
    pub delivered: u64,
    pub rejected: u64,
    pub expired: u64,
    pub failed: u64,
    pub in_flight: u64,
    pub retries: u64,
    pub cooldowns: u64,
    pub refused_cap: u64,
    pub bad_requests: u64,
}

impl RelayStats {
    /// admitted = delivered + rejected + expired + failed + in flight.
    pub fn identity_holds(&self) -> bool {
        self.admitted
            == self.delivered + self.rejected + self.expired + self.failed + self.in_flight
    }
}

/// A started relay of any kind.
pub enum RunningRelay {
    Baseline(BaselineHandle),
}

impl RunningRelay {
    async fn start(kind: RelayKind, setup: &RelaySetup) -> Result<RunningRelay, String> {
        match kind {
            RelayKind::Baseline => {
                let cfg = BaselineConfig {
                    rotating_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                    pinned_base: SocketAddr::from(([127, 0, 0, 1], 0)),
                    admin_addr: None,
                    regions: setup.regions.clone(),
                    egress: setup.egress.clone(),
                    interval_ms: setup.interval_ms,
                    ..BaselineConfig::default()
                };
                Baseline::start(cfg)
                    .await
                    .map(RunningRelay::Baseline)
                    .map_err(|e| format!("baseline relay: {e}"))
            }
        }
    }

    pub fn rotating_addr(&self) -> SocketAddr {
        match self {
            RunningRelay::Baseline(h) => h.rotating_addr(),
        }
    }

    pub fn pinned_addrs(&self) -> Vec<SocketAddr> {
        match self {
            RunningRelay::Baseline(h) => h.pinned_addrs().into_iter().map(|(_, a)| a).collect(),
        }
    }

    pub fn stats(&self) -> RelayStats {
        match self {
            RunningRelay::Baseline(h) => {
                let s = h.stats();
                RelayStats {
                    admitted: s.admitted,
                    delivered: s.delivered,
                    rejected: s.rejected,
                    expired: s.expired,
                    failed: s.failed,
                    in_flight: s.in_flight,
                    retries: s.retries,
                    cooldowns: s.cooldowns,
                    refused_cap: s.refused_cap,
                    bad_requests: s.bad_requests,
                }
            }
        }
    }

    async fn shutdown(self) -> RelayStats {
        match self {
            RunningRelay::Baseline(h) => {
                let s = h.shutdown().await;
                RelayStats {
                    admitted: s.admitted,
                    delivered: s.delivered,
                    rejected: s.rejected,
                    expired: s.expired,
                    failed: s.failed,
                    in_flight: s.in_flight,
                    retries: s.retries,
                    cooldowns: s.cooldowns,
                    refused_cap: s.refused_cap,
                    bad_requests: s.bad_requests,
                }
            }
        }
    }
}

/// What a relay needs to know about the engine and its egress.
struct RelaySetup {
    regions: Vec<(String, SocketAddr)>,
    egress: Vec<IpAddr>,
    interval_ms: u64,
}

/// The demo's configuration; `Default` is the no-argument run.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    pub relay: RelayKind,
    /// Requests per second, one step per rate.
    pub rates_per_s: Vec<f64>,
    pub duration_s: f64,
    pub egress: Vec<IpAddr>,
    pub interval_ms: u64,
    /// A storm at each step's middle (`STORM_FRACTION_DEFAULT`, `STORM_RETRY_MS_DEFAULT`).
    pub storm: bool,
    /// Further engine faults, `KIND@START[+DURATION][:k=v,...]`, times from engine start.
    pub faults: Vec<String>,
    pub connections: usize,
    /// Also spread the load's connections over the relay's pinned ports.
    pub pinned: bool,
    pub txs_mix: Vec<(u8, u32)>,
    pub encoding_mix: Vec<(bundle_relay::wire::Encoding, u32)>,
    pub relay_threads: usize,
    pub seed: u64,
    /// Print the live progress lines.
    pub progress: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            relay: RelayKind::Baseline,
            rates_per_s: vec![1000.0],
            duration_s: 10.0,
            egress: bconfig::parse_egress(EGRESS_DEFAULT).expect("the default egress parses"),
            interval_ms: crate::engine::INTERVAL_MS_DEFAULT,
            storm: true,
            faults: Vec::new(),
            connections: 16,
            pinned: false,
            txs_mix: txgen::parse_txs_mix("1:20,3:60,5:20").expect("literal"),
            encoding_mix: txgen::parse_encoding_mix("base64:50,base58:50").expect("literal"),
            relay_threads: 2,
            seed: 1,
            progress: true,
        }
    }
}

impl DemoConfig {
    pub fn regions(&self) -> usize {
        crate::engine::MAINNET_REGIONS.len()
    }

    /// Open files the whole process needs: both ends of every (egress, region) connection
    /// (relay and engine share the process), both ends of every load connection, a reserve.
    pub fn fds_needed(&self) -> usize {
        2 * self.egress.len() * self.regions() + 2 * self.connections + FDS_RESERVE
    }

    /// Refuses what cannot run, with the reason.
    pub fn validate(&self) -> Result<(), String> {
        if self.rates_per_s.is_empty() || self.rates_per_s.iter().any(|r| r.is_nan() || *r <= 0.0) {
            return Err("rates must be positive".into());
        }
        if self.duration_s.is_nan() || self.duration_s <= 0.0 {
            return Err("duration must be positive".into());
        }
        if self.egress.is_empty() {
            return Err("no egress addresses".into());
        }
        for f in &self.faults {
            f.parse::<FaultSpec>().map_err(|e| e.to_string())?;
        }
        if self.connections == 0 {
            return Err("at least one load connection is needed".into());
        }
        let need = self.fds_needed();
        let limit = raise_nofile().min(FDS_PROCESS_MAX);
        if need > limit {
            let per_addr = 2 * self.regions();
            let max_egress = (limit.saturating_sub(2 * self.connections + FDS_RESERVE)) / per_addr;
            return Err(format!(
                "{} egress addresses x {} regions need {need} open files in this process \
                 (2 x {} relay-engine pairs + 2 x {} load connections + {FDS_RESERVE} reserve), \
                 over the limit of {limit}: use at most {max_egress} egress addresses",
                self.egress.len(),
                self.regions(),
                self.egress.len() * self.regions(),
                self.connections
            ));
        }
        Ok(())
    }
}

/// Raises the soft RLIMIT_NOFILE toward the hard one (capped at the host rule); returns it.
fn raise_nofile() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        let want = lim.rlim_max.min(FDS_PROCESS_MAX as u64);
        if lim.rlim_cur < want {
            let raised = libc::rlimit {
                rlim_cur: want,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = want;
            }
        }
    }
    lim.rlim_cur as usize
}

/// CPU time of one component over a step.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CpuFigures {
    pub relay_us: u64,
    pub engine_us: u64,
    pub load_us: u64,
    pub relay_us_per_delivered: f64,
    pub engine_us_per_delivered: f64,
    pub load_us_per_delivered: f64,
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
    pub storm_told: u64,
    pub cpu: CpuFigures,
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
            "relay accounting broken at {rate_per_s}/s: admitted {} != delivered {} + rejected {} + expired {} + failed {} + in flight {}",
            relay.admitted, relay.delivered, relay.rejected, relay.expired, relay.failed, relay.in_flight
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

/// Runs every step and returns the report (the caller prints it and decides the exit code).
pub fn run(cfg: &DemoConfig) -> Result<DemoReport, String> {
    cfg.validate()?;
    let max_rate = cfg.rates_per_s.iter().cloned().fold(0.0, f64::max);
    let count = (max_rate * cfg.duration_s).ceil() as u64;
    let gen_cfg = TxGenConfig {
        seed: cfg.seed,
        run_id: 1,
        txs_mix: cfg.txs_mix.clone(),
        encoding_mix: cfg.encoding_mix.clone(),
        host: "127.0.0.1".into(),
        ..TxGenConfig::default()
    };
    if cfg.progress {
        eprintln!("bench-demo: generating {count} signed bundles ...");
    }
    let (bundles, generated) = generate_with_progress(gen_cfg, count, cfg.progress)?;
    if cfg.progress {
        eprintln!(
            "bench-demo: generated {} bundles ({} transactions) in {:.2} s: {:.0} bundles/s",
            generated.0,
            generated.1,
            generated.2,
            generated.0 as f64 / generated.2.max(1e-9)
        );
    }
    let mut steps = Vec::new();
    for &rate in &cfg.rates_per_s {
        steps.push(run_step(cfg, rate, &bundles)?);
    }
    let sustained_rate_per_s = steps
        .iter()
        .filter(|s| {
            s.error_fraction < SUSTAINED_ERROR_FRACTION_MAX
                && s.load.achieved_rate_per_s >= SUSTAINED_SEND_FRACTION_MIN * s.rate_per_s
        })
        .map(|s| s.rate_per_s)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    Ok(DemoReport {
        generated_bundles: generated.0,
        generation_bundles_per_s: generated.0 as f64 / generated.2.max(1e-9),
        steps,
        sustained_rate_per_s,
    })
}

/// Bundles, transactions, seconds.
type GenTotals = (u64, u64, f64);

/// Generates in chunks so the rate can be shown while it runs. Returns (bundles,
/// transactions, seconds).
fn generate_with_progress(
    cfg: TxGenConfig,
    count: u64,
    progress: bool,
) -> Result<(Vec<GeneratedBundle>, GenTotals), String> {
    // About one progress line per chunk; generation runs on every core within a chunk.
    let chunk = 2_000u64;
    let start = Instant::now();
    let mut all = Vec::with_capacity(count as usize);
    let mut txs = 0;
    let mut first = 0;
    while first < count {
        let n = chunk.min(count - first);
        let (part, stats) = txgen::generate(cfg.clone(), first, n).map_err(|e| e.to_string())?;
        txs += stats.transactions;
        all.extend(part);
        first += n;
        if progress {
            let s = start.elapsed().as_secs_f64();
            eprintln!(
                "bench-demo: generated {first}/{count} bundles, {:.0} bundles/s",
                first as f64 / s.max(1e-9)
            );
        }
    }
    Ok((all, (count, txs, start.elapsed().as_secs_f64())))
}

/// Per-thread CPU ticks by tid, latest seen, with the thread's name.
#[derive(Default)]
struct CpuSampler {
    ticks: HashMap<u32, (String, u64)>,
}

impl CpuSampler {
    fn sample(&mut self) {
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((name, t)) = read_stat(&e.path().join("stat")) {
                let entry = self.ticks.entry(tid).or_insert((name.clone(), 0));
                entry.0 = name;
                entry.1 = entry.1.max(t);
            }
        }
    }

    fn by_prefix(&self, prefix: &str) -> u64 {
        self.ticks
            .values()
            .filter(|(n, _)| n.starts_with(prefix))
            .map(|(_, t)| t)
            .sum()
    }
}

/// (comm, utime + stime) from a /proc stat file.
fn read_stat(path: &std::path::Path) -> Option<(String, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text[open + 1..close].to_string();
    // After ") ": state is field 3; utime and stime are fields 14 and 15.
    let rest: Vec<&str> = text[close + 2..].split_whitespace().collect();
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

fn process_ticks() -> u64 {
    read_stat(std::path::Path::new("/proc/self/stat")).map_or(0, |(_, t)| t)
}

fn tick_us() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1e6 / if hz > 0 { hz as f64 } else { 100.0 }
}

const ENGINE_THREAD: &str = "demo-engine";
const RELAY_THREAD: &str = "demo-relay";
const SAMPLER_THREAD: &str = "demo-cpu";

struct EngineThread {
    handle: Arc<EngineHandle>,
    stop: tokio::sync::oneshot::Sender<()>,
    join: std::thread::JoinHandle<EngineStats>,
}

fn start_engine(cfg: EngineConfig) -> Result<EngineThread, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let join = std::thread::Builder::new()
        .name(ENGINE_THREAD.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(async move {
                let handle = match Engine::start(cfg).await {
                    Ok(h) => Arc::new(h),
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("engine: {e}")));
                        return EngineStats::default();
                    }
                };
                let _ = ready_tx.send(Ok(handle.clone()));
                let _ = stop_rx.await;
                sole_owner(handle).await.shutdown().await
            })
        })
        .map_err(|e| format!("spawning the engine thread: {e}"))?;
    let handle = ready_rx
        .recv()
        .map_err(|_| "the engine thread died".to_string())??;
    Ok(EngineThread { handle, stop, join })
}

/// Waits until `shared` is the last reference, then takes it: shutting a handle down needs it
/// by value, and the caller drops its clones before signalling the stop.
async fn sole_owner<T>(mut shared: Arc<T>) -> T {
    loop {
        match Arc::try_unwrap(shared) {
            Ok(owned) => return owned,
            Err(still_shared) => {
                shared = still_shared;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

struct RelayThread {
    handle: Arc<RunningRelay>,
    stop: tokio::sync::oneshot::Sender<()>,
    join: std::thread::JoinHandle<RelayStats>,
}

fn start_relay(kind: RelayKind, setup: RelaySetup, threads: usize) -> Result<RelayThread, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let join = std::thread::Builder::new()
        .name(RELAY_THREAD.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads.max(1))
                .thread_name(RELAY_THREAD)
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(async move {
                let handle = match RunningRelay::start(kind, &setup).await {
                    Ok(h) => Arc::new(h),
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return RelayStats::default();
                    }
                };
                let _ = ready_tx.send(Ok(handle.clone()));
                let _ = stop_rx.await;
                sole_owner(handle).await.shutdown().await
            })
        })
        .map_err(|e| format!("spawning the relay thread: {e}"))?;
    let handle = ready_rx
        .recv()
        .map_err(|_| "the relay thread died".to_string())??;
    Ok(RelayThread { handle, stop, join })
}

/// The default storm, at the middle of a step (engine start is the load's start to within the
/// relay's start-up).
fn storm_spec(duration_s: f64) -> String {
    let ms = (duration_s * 500.0).round() as u64;
    format!("storm@{ms}ms:fraction={STORM_FRACTION_DEFAULT},retry_ms={STORM_RETRY_MS_DEFAULT}")
}

fn run_step(cfg: &DemoConfig, rate: f64, all: &[GeneratedBundle]) -> Result<StepReport, String> {
    let count = ((rate * cfg.duration_s).ceil() as usize).min(all.len());
    let bundles = &all[..count];
    let sent_log = std::env::temp_dir().join(format!(
        "bench-demo-sent-{}-{}",
        std::process::id(),
        rate as u64
    ));
    // The engine maps the log when it starts; the load re-creates it with the same size.
    crate::sentlog::SentLog::create(&sent_log, count.max(1))
        .map_err(|e| format!("creating {}: {e}", sent_log.display()))?;

    let mut faults = cfg.faults.clone();
    if cfg.storm {
        faults.push(storm_spec(cfg.duration_s));
    }
    let parsed = faults
        .iter()
        .map(|f| f.parse::<FaultSpec>().map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let fault_names = faults;
    let engine_cfg = EngineConfig {
        interval_ms: cfg.interval_ms,
        faults: parsed,
        seed: cfg.seed,
        sent_log: Some(sent_log.clone()),
        run_id: Some(1),
        stats_addr: None,
        // Ephemeral ports on the usual per-region addresses: no clash with other tools.
        port: 0,
        ..EngineConfig::default()
    };
    let engine = start_engine(engine_cfg)?;
    let regions: Vec<(String, SocketAddr)> = engine.handle.region_addrs();
    let relay = match start_relay(
        cfg.relay,
        RelaySetup {
            regions,
            egress: cfg.egress.clone(),
            interval_ms: cfg.interval_ms,
        },
        cfg.relay_threads,
    ) {
        Ok(r) => r,
        Err(e) => {
            let _ = engine.stop.send(());
            return Err(e);
        }
    };
    let mut targets = vec![relay.handle.rotating_addr()];
    if cfg.pinned {
        targets.extend(relay.handle.pinned_addrs());
    }
    if cfg.progress {
        eprintln!(
            "bench-demo: step {rate}/s for {} s: engine {} regions (interval {} ms), relay {:?} rotating {} \
             with {} egress x {} regions = {} pairs, {} of {FDS_PROCESS_MAX} open files budgeted",
            cfg.duration_s,
            cfg.regions(),
            cfg.interval_ms,
            cfg.relay,
            targets[0],
            cfg.egress.len(),
            cfg.regions(),
            cfg.egress.len() * cfg.regions(),
            cfg.fds_needed()
        );
    }

    // CPU sampler and progress printer.
    let sampler = Arc::new(Mutex::new(CpuSampler::default()));
    let done = Arc::new(AtomicBool::new(false));
    let monitor = {
        let sampler = sampler.clone();
        let done = done.clone();
        let eh = engine.handle.clone();
        let rh = relay.handle.clone();
        let progress = cfg.progress;
        std::thread::Builder::new()
            .name(SAMPLER_THREAD.into())
            .spawn(move || {
                let start = Instant::now();
                let mut next_print = Duration::from_secs(1);
                while !done.load(Ordering::Relaxed) {
                    sampler.lock().expect("sampler").sample();
                    if progress && start.elapsed() >= next_print {
                        let r = rh.stats();
                        let e = eh.stats();
                        eprintln!(
                            "[demo {:>3}s] offered {rate:.0}/s | relay admitted {} delivered {} in flight {} retries {} | engine accepted {} early sends {} storm {}",
                            next_print.as_secs(),
                            r.admitted,
                            r.delivered,
                            r.in_flight,
                            r.retries,
                            e.accepted,
                            e.early_sends,
                            e.faults.get("storm").copied().unwrap_or(0)
                        );
                        next_print += Duration::from_secs(1);
                    }
                    std::thread::sleep(CPU_SAMPLE_PERIOD);
                }
                sampler.lock().expect("sampler").sample();
            })
            .map_err(|e| format!("spawning the sampler: {e}"))?
    };

    sampler.lock().expect("sampler").sample();
    let ticks_before = process_ticks();
    let (relay_before, engine_before, sampler_before) = {
        let s = sampler.lock().expect("sampler");
        (
            s.by_prefix(RELAY_THREAD),
            s.by_prefix(ENGINE_THREAD),
            s.by_prefix(SAMPLER_THREAD),
        )
    };

    let load_cfg = LoadConfig {
        targets,
        rate_per_s: rate,
        duration: Some(Duration::from_secs_f64(cfg.duration_s)),
        requests: Some(count as u64),
        connections: cfg.connections,
        pipeline_depth: 1,
        threads: 1,
        timeout: Duration::from_secs(5),
        sent_log: Some(sent_log.clone()),
        hlog: None,
        progress: cfg.progress,
    };
    let load_result = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("demo-load".into())
            .spawn_scoped(s, || load::run(&load_cfg, bundles))
            .expect("spawning the load thread")
            .join()
            .expect("the load thread panicked")
    });

    // Let the relay finish what it holds.
    let settle_start = Instant::now();
    while relay.handle.stats().in_flight > 0 && settle_start.elapsed() < SETTLE_MAX {
        std::thread::sleep(Duration::from_millis(20));
    }
    sampler.lock().expect("sampler").sample();
    let ticks_after = process_ticks();
    done.store(true, Ordering::Relaxed);
    let _ = monitor.join();
    let (relay_ticks, engine_ticks, sampler_ticks) = {
        let s = sampler.lock().expect("sampler");
        (
            s.by_prefix(RELAY_THREAD) - relay_before,
            s.by_prefix(ENGINE_THREAD) - engine_before,
            s.by_prefix(SAMPLER_THREAD).saturating_sub(sampler_before),
        )
    };
    let load_ticks =
        (ticks_after - ticks_before).saturating_sub(relay_ticks + engine_ticks + sampler_ticks);

    let RelayThread {
        handle: rh,
        stop: rstop,
        join: rjoin,
    } = relay;
    drop(rh);
    let _ = rstop.send(());
    let relay_stats = rjoin.join().map_err(|_| "the relay thread panicked")?;
    let EngineThread {
        handle: eh,
        stop: estop,
        join: ejoin,
    } = engine;
    drop(eh);
    let _ = estop.send(());
    let engine_stats = ejoin.join().map_err(|_| "the engine thread panicked")?;
    let _ = std::fs::remove_file(&sent_log);
    let report = load_result.map_err(|e| format!("load: {e}"))?;
    let summary = report.summary;

    let us = tick_us();
    let delivered = relay_stats.delivered.max(1) as f64;
    let cpu = CpuFigures {
        relay_us: (relay_ticks as f64 * us) as u64,
        engine_us: (engine_ticks as f64 * us) as u64,
        load_us: (load_ticks as f64 * us) as u64,
        relay_us_per_delivered: relay_ticks as f64 * us / delivered,
        engine_us_per_delivered: engine_ticks as f64 * us / delivered,
        load_us_per_delivered: load_ticks as f64 * us / delivered,
    };
    let answered_ok = summary.result_ids_matching;
    let undelivered = relay_stats.admitted.saturating_sub(relay_stats.delivered);
    let errors = summary.scheduled.saturating_sub(answered_ok) + undelivered;
    Ok(StepReport {
        rate_per_s: rate,
        duration_s: cfg.duration_s,
        relay: cfg.relay,
        egress_addresses: cfg.egress.len(),
        pairs: cfg.egress.len() * cfg.regions(),
        interval_ms: cfg.interval_ms,
        fds_needed: cfg.fds_needed(),
        faults: fault_names,
        answered_ok,
        errors,
        undelivered,
        error_fraction: errors as f64 / summary.scheduled.max(1) as f64,
        delivered_per_s: engine_stats.accepted as f64 / summary.elapsed_s.max(1e-9),
        accounting_holds: relay_stats.identity_holds(),
        storm_told: engine_stats.faults.get("storm").copied().unwrap_or(0),
        load: summary,
        relay_stats,
        engine: engine_stats,
        cpu,
    })
}

fn fmt_us(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// The plain-text report.
pub fn render(report: &DemoReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "generated {} bundles at {:.0} bundles/s",
        report.generated_bundles, report.generation_bundles_per_s
    );
    for s in &report.steps {
        let l = &s.load.latency;
        let d = &s.engine.latency;
        let r = &s.relay_stats;
        let _ = writeln!(
            o,
            "\n=== {:?} relay, {} req/s for {} s ===",
            s.relay, s.rate_per_s, s.duration_s
        );
        let _ = writeln!(
            o,
            "setup              {} egress x 8 regions = {} pairs, interval {} ms, {} of {FDS_PROCESS_MAX} fds budgeted",
            s.egress_addresses, s.pairs, s.interval_ms, s.fds_needed
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
            fmt_us(l.p50_us),
            fmt_us(l.p99_us),
            fmt_us(l.p999_us),
            fmt_us(l.max_us)
        );
        let _ = writeln!(
            o,
            "delivery latency   p50 {}  p99 {}  p99.9 {}  max {}  ({} measured)",
            fmt_us(d.p50_us),
            fmt_us(d.p99_us),
            fmt_us(d.p999_us),
            fmt_us(d.max_us),
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
            "relay accounting   admitted {} = delivered {} + rejected {} + expired {} + failed {} + in flight {}: {}",
            r.admitted,
            r.delivered,
            r.rejected,
            r.expired,
            r.failed,
            r.in_flight,
            if s.accounting_holds {
                "holds"
            } else {
                "BROKEN"
            }
        );
        let _ = writeln!(
            o,
            "relay              retries {} cooldowns {} refused at cap {} bad requests {}",
            r.retries, r.cooldowns, r.refused_cap, r.bad_requests
        );
        let faults: BTreeMap<&String, &u64> =
            s.engine.faults.iter().filter(|(_, v)| **v > 0).collect();
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
    }
    if report.steps.len() > 1 {
        let _ = writeln!(
            o,
            "\n{:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9}",
            "rate/s",
            "sent/s",
            "accept/s",
            "errors%",
            "ans p50",
            "ans p99",
            "dlv p99",
            "early",
            "relay µs",
            "engine µs"
        );
        for s in &report.steps {
            let mark = if Some(s.rate_per_s) == report.sustained_rate_per_s {
                " <"
            } else {
                ""
            };
            let _ = writeln!(
                o,
                "{:>10.0} {:>10.0} {:>10.0} {:>9.3} {:>10} {:>10} {:>10} {:>8} {:>9.1} {:>9.1}{mark}",
                s.rate_per_s,
                s.load.achieved_rate_per_s,
                s.delivered_per_s,
                s.error_fraction * 100.0,
                fmt_us(s.load.latency.p50_us),
                fmt_us(s.load.latency.p99_us),
                fmt_us(s.engine.latency.p99_us),
                s.engine.early_sends,
                s.cpu.relay_us_per_delivered,
                s.cpu.engine_us_per_delivered
            );
        }
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

/// Parses `--egress` text (addresses and CIDR ranges, comma-separated).
pub fn parse_egress(s: &str) -> Result<Vec<IpAddr>, String> {
    bconfig::parse_egress(s).map_err(|e| e.to_string())
}

/// Where `--json` writes.
pub fn write_json(report: &DemoReport, path: &std::path::Path) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, json + "\n").map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balanced() -> RelayStats {
        RelayStats {
            admitted: 10,
            delivered: 6,
            rejected: 1,
            expired: 1,
            failed: 1,
            in_flight: 1,
            ..RelayStats::default()
        }
    }

    #[test]
    fn a_balanced_relay_and_no_early_sends_pass() {
        assert!(verdicts(100.0, &balanced(), &EngineStats::default()).is_empty());
    }

    #[test]
    fn a_bundle_missing_from_the_relay_accounting_fails_the_step() {
        let relay = RelayStats {
            delivered: 5,
            ..balanced()
        };
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

    #[test]
    fn open_files_count_both_ends_of_every_connection() {
        let cfg = DemoConfig::default();
        assert_eq!(cfg.egress.len(), 256);
        assert_eq!(cfg.fds_needed(), 2 * 2048 + 2 * 16 + FDS_RESERVE);
        assert!(cfg.fds_needed() <= FDS_PROCESS_MAX);
    }

    #[test]
    fn the_default_storm_falls_mid_run() {
        assert_eq!(
            storm_spec(10.0),
            "storm@5000ms:fraction=0.25,retry_ms=30000"
        );
        storm_spec(10.0).parse::<FaultSpec>().unwrap();
    }

    #[test]
    fn thread_stat_lines_yield_name_and_ticks() {
        let dir = std::env::temp_dir().join(format!("demo-stat-{}", std::process::id()));
        std::fs::write(
            &dir,
            "123 (demo relay) S 1 2 3 4 5 6 7 8 9 10 40 2 0 0 20 0 1 0\n",
        )
        .unwrap();
        assert_eq!(read_stat(&dir), Some(("demo relay".to_string(), 42)));
        std::fs::remove_file(&dir).unwrap();
    }
}
