//! bench-demo: the whole measurement on loopback: the synthetic block engine, a relay
//! (bundle-relay by default, or the conventional baseline; on threads of this process or, with
//! `relay_exe`, in a process of its own) and the open-loop load, with a live progress line
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
//! A relay process (`bench-demo --serve-relay KIND --spec JSON`, [`serve_relay`]) writes one
//! JSON line when it listens ([`RelayLine::Ready`]), answers `stats` on stdin, and on stdin's
//! end or SIGTERM/SIGINT shuts down and writes its final counters; its CPU is read from
//! /proc/<pid>/stat (utime + stime, exited threads included) and its memory from
//! /proc/<pid>/status (VmRSS sampled every 50 ms, VmHWM). For bundle-relay the step waits until
//! every (egress, region) pair is connected ([`PAIRS_UP_WAIT_MAX`]) before the load starts.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bundle_relay::egress::transport::TlsTarget;
use bundle_relay::metrics::accounting::Totals;
use bundle_relay::relay::{RegionSpec, Spec};
use bundle_relay::runtime::Relay;
use serde::{Deserialize, Serialize};

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

/// How long a relay may take to bring every (egress, region) pair up before the load starts:
/// 2,048 loopback connections take well under a second; this leaves room for a loaded machine.
pub const PAIRS_UP_WAIT_MAX: Duration = Duration::from_secs(30);
/// How long shutdown lets a relay's bundles in flight end (both relays' max age is 2 s).
const RELAY_DRAIN: Duration = Duration::from_secs(2);
/// How long a relay process may take to exit after its stdin closes before it is killed: its
/// drain plus closing thousands of connections.
const RELAY_EXIT_MAX: Duration = Duration::from_secs(15);
/// Default in-flight cap, the same for both relays: bundle-relay's arena slots, the baseline's
/// semaphore. 4,096 holds two seconds (the max age) of 2,000 bundles/s.
pub const IN_FLIGHT_MAX_DEFAULT: u32 = 4096;
/// The hidden first argument that makes bench-demo serve one relay as a child process.
pub const SERVE_RELAY_ARG: &str = "--serve-relay";

/// Which relay sits between the load and the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelayKind {
    /// The io_uring relay, `bundle_relay::relay`.
    BundleRelay,
    /// The conventional relay, `crate::baseline`.
    Baseline,
}

impl RelayKind {
    /// The name `--relay` takes.
    pub fn name(self) -> &'static str {
        match self {
            RelayKind::BundleRelay => "bundle-relay",
            RelayKind::Baseline => "baseline",
        }
    }
}

impl std::fmt::Display for RelayKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RelayKind {
    type Err = String;
    fn from_str(s: &str) -> Result<RelayKind, String> {
        match s {
            "bundle-relay" => Ok(RelayKind::BundleRelay),
            "baseline" => Ok(RelayKind::Baseline),
            other => Err(format!(
                "unknown relay `{other}` (known: bundle-relay, baseline)"
            )),
        }
    }
}

/// A relay's counters in one shape for every kind: bundle-relay's own totals, the baseline's
/// mapped onto them.
pub type RelayStats = Totals;

/// A started relay of any kind.
pub enum RunningRelay {
    BundleRelay(Relay),
    Baseline(BaselineHandle),
}

impl RunningRelay {
    async fn start(kind: RelayKind, setup: &RelaySetup) -> Result<RunningRelay, String> {
        match kind {
            RelayKind::BundleRelay => {
                let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
                let tls = match &setup.tls_ca_pem {
                    Some(pem) => Some(
                        bundle_relay::tls::client_config_from_pem(pem.as_bytes())
                            .map_err(|e| format!("bundle-relay: engine CA: {e}"))?,
                    ),
                    None => None,
                };
                let regions = setup
                    .regions
                    .iter()
                    .map(|(name, addr)| {
                        // The production host name: the bench certificate covers it.
                        let host = format!("{name}.{}", bundle_relay::jito::MAINNET_DOMAIN);
                        RegionSpec {
                            interval_ms: setup.interval_ms,
                            pinned: Some(any_port),
                            tls: tls.clone().map(|config| TlsTarget {
                                config,
                                sni: host.as_str().into(),
                            }),
                            authority: if tls.is_some() {
                                host.clone()
                            } else {
                                addr.to_string()
                            },
                            ..RegionSpec::plain(name, *addr)
                        }
                    })
                    .chain(setup.bad_tls_regions.iter().map(|(name, addr)| RegionSpec {
                        interval_ms: setup.interval_ms,
                        pinned: Some(any_port),
                        tls: tls.clone().map(|config| TlsTarget {
                            config,
                            sni: "not-this-engine.example".into(),
                        }),
                        ..RegionSpec::plain(name, *addr)
                    }))
                    .collect();
                let mut spec = Spec::local(regions, setup.egress.clone());
                if let Some(t) = &setup.tuning {
                    spec.upstream_timeout_ms = t.upstream_timeout_ms;
                    spec.ping_timeout_ms = t.ping_timeout_ms;
                    spec.connect_timeout_ms = t.connect_timeout_ms;
                    spec.reconnect_max_ms = t.reconnect_max_ms;
                    spec.head_timeout_ms = t.head_timeout_ms;
                    spec.send_timeout_ms = t.send_timeout_ms;
                    spec.intake_conns_max = t.intake_conns_max;
                    spec.intake_per_source_max = t.intake_per_source_max;
                    spec.bundle_max_age_ms = t.bundle_max_age_ms;
                }
                spec.sources.extend(
                    setup
                        .socks5
                        .iter()
                        .map(|&proxy| bundle_relay::config::Source::Socks5 { proxy, auth: None }),
                );
                spec.threads = setup.threads.max(1);
                spec.arena_slots = setup.in_flight_max;
                spec.metrics = setup.metrics;
                Relay::start(spec)
                    .map(RunningRelay::BundleRelay)
                    .map_err(|e| format!("bundle-relay: {e}"))
            }
            RelayKind::Baseline => {
                if setup.tls_ca_pem.is_some() || !setup.socks5.is_empty() {
                    return Err("the baseline relay speaks neither TLS nor SOCKS5".into());
                }
                let cfg = BaselineConfig {
                    rotating_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                    pinned_base: SocketAddr::from(([127, 0, 0, 1], 0)),
                    admin_addr: None,
                    regions: setup.regions.clone(),
                    egress: setup.egress.clone(),
                    interval_ms: setup.interval_ms,
                    max_in_flight: setup.in_flight_max as usize,
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
            RunningRelay::BundleRelay(r) => r
                .rotating_addr()
                .expect("the demo's bundle-relay spec has a rotating port"),
            RunningRelay::Baseline(h) => h.rotating_addr(),
        }
    }

    pub fn pinned_addrs(&self) -> Vec<SocketAddr> {
        match self {
            RunningRelay::BundleRelay(r) => r.pinned_addrs().iter().map(|(_, a)| *a).collect(),
            RunningRelay::Baseline(h) => h.pinned_addrs().into_iter().map(|(_, a)| a).collect(),
        }
    }

    pub fn stats(&self) -> RelayStats {
        match self {
            RunningRelay::BundleRelay(r) => r.totals(),
            RunningRelay::Baseline(h) => h.totals(),
        }
    }

    async fn shutdown(self) -> RelayStats {
        match self {
            RunningRelay::BundleRelay(r) => {
                // Joins the reactor threads: blocking, on this runtime's only busy thread.
                r.shutdown(RELAY_DRAIN)
            }
            RunningRelay::Baseline(h) => h.shutdown().await.totals,
        }
    }
}

/// What a relay needs to know about the engine and its egress; sent as JSON to a relay process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelaySetup {
    pub regions: Vec<(String, SocketAddr)>,
    pub egress: Vec<IpAddr>,
    /// Further sources: SOCKS5 proxies (no authentication) the relay connects through.
    #[serde(default)]
    pub socks5: Vec<SocketAddr>,
    /// The engines speak TLS with a certificate from this CA (PEM); `None`: plaintext.
    #[serde(default)]
    pub tls_ca_pem: Option<String>,
    pub interval_ms: u64,
    /// bundle-relay's reactor threads; the baseline's runtime worker threads.
    pub threads: usize,
    pub in_flight_max: u32,
    /// bundle-relay records metrics (`Spec::metrics`); the baseline ignores it.
    #[serde(default = "metrics_on")]
    pub metrics: bool,
    /// bundle-relay's deadlines and limits, when a run sets them (the fault matrix).
    #[serde(default)]
    pub tuning: Option<RelayTuning>,
    /// Further bundle-relay regions at these engines whose TLS name is wrong: every one of
    /// their pairs fails its handshake (the fault matrix).
    #[serde(default)]
    pub bad_tls_regions: Vec<(String, SocketAddr)>,
    /// Serve bundle-relay's admin endpoints (`/metrics`) on an ephemeral loopback port.
    #[serde(default)]
    pub admin: bool,
}

/// bundle-relay settings a run may change from [`Spec::local`]'s.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayTuning {
    pub upstream_timeout_ms: u64,
    pub ping_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    pub reconnect_max_ms: u64,
    pub head_timeout_ms: u64,
    pub send_timeout_ms: u64,
    pub intake_conns_max: u32,
    pub intake_per_source_max: u32,
    pub bundle_max_age_ms: u64,
}

fn metrics_on() -> bool {
    true
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
    /// The relay's in-flight cap (bundle-relay's arena slots, the baseline's semaphore).
    pub in_flight_max: u32,
    pub seed: u64,
    /// Print the live progress lines.
    pub progress: bool,
    /// Run the relay as a child process of this executable (`bench-demo`, which serves it
    /// under [`SERVE_RELAY_ARG`]), so its CPU time and memory are its own; `None` runs it on
    /// threads of this process.
    pub relay_exe: Option<std::path::PathBuf>,
    /// TLS between relay and engine (the engine's own CA, production host names as SNI).
    pub tls: bool,
    /// This many of the egress addresses leave through SOCKS5 proxies (run in this process,
    /// each bound to one of those addresses) rather than from the relay directly.
    pub socks5: usize,
    /// bundle-relay records metrics (the default); off, its request path skips them.
    pub metrics: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            relay: RelayKind::BundleRelay,
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
            in_flight_max: IN_FLIGHT_MAX_DEFAULT,
            seed: 1,
            progress: true,
            relay_exe: None,
            tls: false,
            socks5: 0,
            metrics: true,
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
        // A proxied pair adds the proxy's two ends (relay side and engine side).
        2 * self.egress.len() * self.regions()
            + 2 * self.socks5 * self.regions()
            + 2 * self.connections
            + FDS_RESERVE
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
        if self.in_flight_max == 0 {
            return Err("the in-flight cap must be at least 1".into());
        }
        if (self.tls || self.socks5 > 0) && self.relay != RelayKind::BundleRelay {
            return Err("--tls and --socks5 need bundle-relay: the baseline speaks neither".into());
        }
        if self.socks5 >= self.egress.len() {
            return Err(format!(
                "--socks5 {} leaves no egress address for the relay's own sources ({} in all)",
                self.socks5,
                self.egress.len()
            ));
        }
        if self.relay == RelayKind::BundleRelay && self.egress.len() < self.relay_threads.max(1) {
            return Err(format!(
                "bundle-relay shares egress addresses between its {} threads: give at least {} \
                 addresses or fewer --relay-threads",
                self.relay_threads, self.relay_threads
            ));
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
    /// The measured window: from the load's start until the relay settled.
    pub window_us: u64,
    /// CPU over the window in cores (1.0 = one core busy throughout).
    pub relay_cores: f64,
    pub engine_cores: f64,
    pub load_cores: f64,
    /// Whether the relay's figure is its own process's (`relay_exe`), not its threads'.
    pub relay_in_own_process: bool,
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
    let load = generate(cfg, (max_rate * cfg.duration_s).ceil() as u64)?;
    run_with(cfg, &load)
}

/// Pre-generated, really signed bundles, reusable by any number of runs.
pub struct PreparedLoad {
    pub bundles: Vec<GeneratedBundle>,
    pub transactions: u64,
    pub seconds: f64,
}

/// Generates `count` bundles with `cfg`'s seed and mixes.
pub fn generate(cfg: &DemoConfig, count: u64) -> Result<PreparedLoad, String> {
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
    Ok(PreparedLoad {
        bundles,
        transactions: generated.1,
        seconds: generated.2,
    })
}

/// Runs every step of `cfg` on already generated bundles (a step uses the first rate x
/// duration of them, so `load` must hold at least that many).
pub fn run_with(cfg: &DemoConfig, load: &PreparedLoad) -> Result<DemoReport, String> {
    cfg.validate()?;
    let mut steps = Vec::new();
    for &rate in &cfg.rates_per_s {
        steps.push(run_step(cfg, rate, &load.bundles)?);
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

/// The highest rate whose errors stayed under [`SUSTAINED_ERROR_FRACTION_MAX`] and whose load
/// went out at [`SUSTAINED_SEND_FRACTION_MIN`] of the offered rate or better.
pub fn sustained_rate(steps: &[StepReport]) -> Option<f64> {
    steps
        .iter()
        .filter(|s| {
            s.error_fraction < SUSTAINED_ERROR_FRACTION_MAX
                && s.load.achieved_rate_per_s >= SUSTAINED_SEND_FRACTION_MIN * s.rate_per_s
        })
        .map(|s| s.rate_per_s)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))))
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

    /// The relay's threads: its holder runtime (`demo-relay`) and bundle-relay's reactors
    /// (`relay-N`).
    fn relay_ticks(&self) -> u64 {
        self.by_prefix(RELAY_THREAD) + self.by_prefix(REACTOR_THREAD)
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
/// bundle-relay names its reactor threads `relay-N`.
const REACTOR_THREAD: &str = "relay-";

pub(crate) struct EngineThread {
    pub(crate) handle: Arc<EngineHandle>,
    pub(crate) stop: tokio::sync::oneshot::Sender<()>,
    pub(crate) join: std::thread::JoinHandle<EngineStats>,
}

/// A thread named `name` running `f` on a single-threaded tokio runtime of its own.
fn on_own_runtime<R: Send + 'static>(
    name: &str,
    f: impl FnOnce(tokio::runtime::Runtime) -> R + Send + 'static,
) -> Result<std::thread::JoinHandle<R>, String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            f(rt)
        })
        .map_err(|e| format!("spawning the {name} thread: {e}"))
}

pub(crate) fn start_engine(cfg: EngineConfig) -> Result<EngineThread, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let join = on_own_runtime(ENGINE_THREAD, move |rt| {
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
    })?;
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

/// SOCKS5 proxies on a runtime of their own, one per outbound source address.
struct ProxyThread {
    addrs: Vec<SocketAddr>,
    _stop: Option<tokio::sync::oneshot::Sender<()>>,
}

fn start_proxies(outbound: &[IpAddr]) -> Result<ProxyThread, String> {
    if outbound.is_empty() {
        return Ok(ProxyThread {
            addrs: Vec::new(),
            _stop: None,
        });
    }
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let outbound = outbound.to_vec();
    on_own_runtime("demo-socks5", move |rt| {
        rt.block_on(async move {
            let mut handles = Vec::new();
            for ip in outbound {
                let cfg = crate::socks5::ProxyConfig {
                    listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                    outbound_source: Some(ip),
                    ..crate::socks5::ProxyConfig::default()
                };
                match crate::socks5::Socks5Proxy::start(cfg).await {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("SOCKS5 proxy: {e}")));
                        return;
                    }
                }
            }
            let _ = ready_tx.send(Ok(handles.iter().map(|h| h.local_addr()).collect()));
            // Dropping the sender (the step ended) stops the proxies.
            let _ = stop_rx.await;
            for h in handles {
                h.shutdown().await;
            }
        })
    })?;
    let addrs = ready_rx
        .recv()
        .map_err(|_| "the SOCKS5 proxies' thread died".to_string())??;
    Ok(ProxyThread {
        addrs,
        _stop: Some(stop),
    })
}

pub(crate) struct RelayThread {
    handle: Arc<RunningRelay>,
    stop: tokio::sync::oneshot::Sender<()>,
    join: std::thread::JoinHandle<RelayStats>,
}

impl RelayThread {
    fn stop(self) -> Result<RelayStats, String> {
        let RelayThread { handle, stop, join } = self;
        drop(handle);
        let _ = stop.send(());
        join.join()
            .map_err(|_| "the relay thread panicked".to_string())
    }
}

fn start_relay(kind: RelayKind, setup: RelaySetup) -> Result<RelayThread, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // bundle-relay runs its own reactor threads; the runtime only holds its handle.
    let workers = match kind {
        RelayKind::BundleRelay => 1,
        RelayKind::Baseline => setup.threads.max(1),
    };
    let join = std::thread::Builder::new()
        .name(RELAY_THREAD.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
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

/// One line a relay process writes on its stdout.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelayLine {
    /// Started: where it listens.
    Ready {
        rotating: SocketAddr,
        pinned: Vec<SocketAddr>,
        /// The admin listener, when the setup asked for one.
        #[serde(default)]
        admin: Option<SocketAddr>,
    },
    /// The answer to a `stats` line on stdin.
    Stats(RelayStats),
    /// After stdin closed or SIGTERM/SIGINT: the counters after shutdown; the process then exits 0.
    Final(RelayStats),
    /// It could not start.
    Error(String),
}

static SERVE_STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn serve_stop_on_signal(_: libc::c_int) {
    SERVE_STOP.store(true, Ordering::Relaxed);
}

/// The relay-process side (`bench-demo --serve-relay KIND --spec JSON`): starts the relay,
/// writes [`RelayLine::Ready`], answers each `stats` line on `input` with [`RelayLine::Stats`],
/// and on end of input or SIGTERM/SIGINT shuts down and writes [`RelayLine::Final`].
pub fn serve_relay(
    kind: RelayKind,
    setup_json: &str,
    input: impl std::io::BufRead + Send + 'static,
    out: &mut impl std::io::Write,
) -> Result<(), String> {
    let mut emit = |line: &RelayLine| -> Result<(), String> {
        let text = serde_json::to_string(line).map_err(|e| e.to_string())?;
        writeln!(out, "{text}")
            .and_then(|_| out.flush())
            .map_err(|e| format!("writing to the demo: {e}"))
    };
    let setup: RelaySetup = match serde_json::from_str(setup_json) {
        Ok(s) => s,
        Err(e) => {
            let e = format!("--spec: {e}");
            emit(&RelayLine::Error(e.clone()))?;
            return Err(e);
        }
    };
    raise_nofile();
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let handler = serve_stop_on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
    let want_admin = setup.admin;
    let relay = match start_relay(kind, setup) {
        Ok(r) => r,
        Err(e) => {
            emit(&RelayLine::Error(e.clone()))?;
            return Err(e);
        }
    };
    let admin = match &*relay.handle {
        RunningRelay::BundleRelay(r) if want_admin => Some(
            bundle_relay::admin::Admin::start(
                SocketAddr::from(([127, 0, 0, 1], 0)),
                r.metrics(),
                r.pairs_fn(),
            )
            .map_err(|e| format!("admin listener: {e}"))?,
        ),
        _ => None,
    };
    emit(&RelayLine::Ready {
        rotating: relay.handle.rotating_addr(),
        pinned: relay.handle.pinned_addrs(),
        admin: admin.as_ref().map(|a| a.local_addr()),
    })?;
    let (tx, rx) = std::sync::mpsc::channel::<bool>();
    std::thread::Builder::new()
        .name("relay-stdin".into())
        .spawn(move || {
            for line in input.lines() {
                match line {
                    Ok(l) if l.trim() == "stats" => {
                        if tx.send(true).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(false);
        })
        .map_err(|e| format!("spawning the stdin reader: {e}"))?;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(true) => emit(&RelayLine::Stats(relay.handle.stats()))?,
            Ok(false) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if SERVE_STOP.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
    }
    if let Some(a) = admin {
        a.shutdown();
    }
    let last = relay.stop()?;
    emit(&RelayLine::Final(last))
}

/// The demo's side of a relay process.
pub(crate) struct RelayChild {
    child: std::process::Child,
    io: Arc<Mutex<ChildIo>>,
    rotating: SocketAddr,
    pinned: Vec<SocketAddr>,
    admin: Option<SocketAddr>,
}

pub(crate) struct ChildIo {
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl ChildIo {
    fn read_line(&mut self) -> Result<RelayLine, String> {
        use std::io::BufRead;
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("the relay process closed its output".into()),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| format!("the relay process wrote `{}`: {e}", line.trim())),
            Err(e) => Err(format!("reading from the relay process: {e}")),
        }
    }

    fn stats(&mut self) -> Result<RelayStats, String> {
        use std::io::Write;
        let stdin = self.stdin.as_mut().ok_or("the relay process is stopping")?;
        writeln!(stdin, "stats")
            .and_then(|_| stdin.flush())
            .map_err(|e| format!("writing to the relay process: {e}"))?;
        match self.read_line()? {
            RelayLine::Stats(s) => Ok(s),
            other => Err(format!("the relay process answered {other:?} to `stats`")),
        }
    }
}

impl RelayChild {
    fn spawn(
        exe: &std::path::Path,
        kind: RelayKind,
        setup: &RelaySetup,
    ) -> Result<RelayChild, String> {
        use std::process::{Command, Stdio};
        let spec = serde_json::to_string(setup).map_err(|e| e.to_string())?;
        let mut child = Command::new(exe)
            .arg(SERVE_RELAY_ARG)
            .arg(kind.name())
            .arg("--spec")
            .arg(spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the relay process {}: {e}", exe.display()))?;
        let mut io = ChildIo {
            stdin: child.stdin.take(),
            stdout: std::io::BufReader::new(child.stdout.take().expect("piped")),
        };
        let ready = io.read_line();
        let (rotating, pinned, admin) = match ready {
            Ok(RelayLine::Ready {
                rotating,
                pinned,
                admin,
            }) => (rotating, pinned, admin),
            other => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(match other {
                    Ok(RelayLine::Error(e)) => e,
                    Ok(line) => format!("the relay process began with {line:?}"),
                    Err(e) => e,
                });
            }
        };
        Ok(RelayChild {
            child,
            io: Arc::new(Mutex::new(io)),
            rotating,
            pinned,
            admin,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes its stdin, reads its final counters, waits for it to exit (killing it after
    /// [`RELAY_EXIT_MAX`]).
    fn stop(mut self) -> Result<RelayStats, String> {
        let last = {
            let mut io = self.io.lock().expect("relay io");
            io.stdin = None;
            loop {
                match io.read_line() {
                    Ok(RelayLine::Final(s)) => break Ok(s),
                    Ok(_) => continue,
                    Err(e) => break Err(e),
                }
            }
        };
        let deadline = Instant::now() + RELAY_EXIT_MAX;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => break,
                Ok(Some(status)) => return Err(format!("the relay process exited with {status}")),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(format!(
                        "the relay process did not exit within {} s of its stdin closing",
                        RELAY_EXIT_MAX.as_secs()
                    ));
                }
                Err(e) => return Err(format!("waiting for the relay process: {e}")),
            }
        }
        last
    }
}

impl Drop for RelayChild {
    fn drop(&mut self) {
        // Never leave a relay process behind when a step fails part-way.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A relay started for one step: on threads of this process or as a process of its own.
pub(crate) enum RelayRun {
    Thread(RelayThread),
    Child(RelayChild),
}

/// Reads a running relay's counters from any thread.
#[derive(Clone)]
pub(crate) enum RelayProbe {
    Thread(Arc<RunningRelay>),
    Child(Arc<Mutex<ChildIo>>),
}

impl RelayProbe {
    pub(crate) fn stats(&self) -> Result<RelayStats, String> {
        match self {
            RelayProbe::Thread(h) => Ok(h.stats()),
            RelayProbe::Child(io) => io.lock().expect("relay io").stats(),
        }
    }
}

impl RelayRun {
    pub(crate) fn start(cfg: &DemoConfig, setup: RelaySetup) -> Result<RelayRun, String> {
        match &cfg.relay_exe {
            Some(exe) => RelayChild::spawn(exe, cfg.relay, &setup).map(RelayRun::Child),
            None => start_relay(cfg.relay, setup).map(RelayRun::Thread),
        }
    }

    pub(crate) fn probe(&self) -> RelayProbe {
        match self {
            RelayRun::Thread(t) => RelayProbe::Thread(t.handle.clone()),
            RelayRun::Child(c) => RelayProbe::Child(c.io.clone()),
        }
    }

    pub(crate) fn rotating_addr(&self) -> SocketAddr {
        match self {
            RelayRun::Thread(t) => t.handle.rotating_addr(),
            RelayRun::Child(c) => c.rotating,
        }
    }

    pub(crate) fn pinned_addrs(&self) -> Vec<SocketAddr> {
        match self {
            RelayRun::Thread(t) => t.handle.pinned_addrs(),
            RelayRun::Child(c) => c.pinned.clone(),
        }
    }

    /// The relay process's admin listener, when its setup asked for one.
    pub(crate) fn admin_addr(&self) -> Option<SocketAddr> {
        match self {
            RelayRun::Thread(_) => None,
            RelayRun::Child(c) => c.admin,
        }
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            RelayRun::Thread(_) => None,
            RelayRun::Child(c) => Some(c.pid()),
        }
    }

    pub(crate) fn stop(self) -> Result<RelayStats, String> {
        match self {
            RelayRun::Thread(t) => t.stop(),
            RelayRun::Child(c) => c.stop(),
        }
    }
}

/// Waits until every (egress, region) pair of a bundle-relay is connected.
pub(crate) fn wait_pairs_up(probe: &RelayProbe, want: u64) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let s = probe.stats()?;
        if s.pairs_up >= want {
            return Ok(());
        }
        if start.elapsed() >= PAIRS_UP_WAIT_MAX {
            return Err(format!(
                "bundle-relay: only {} of {want} (egress, region) pairs connected after {} s; \
                 is every egress address routable on loopback and the engine listening?",
                s.pairs_up,
                PAIRS_UP_WAIT_MAX.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A relay process's memory, from /proc/<pid>/status: (VmRSS, VmHWM) in KiB.
pub fn read_mem_kb(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_mem_kb(&text)
}

/// (VmRSS, VmHWM) in KiB from the text of a /proc status file.
pub fn parse_mem_kb(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
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

/// The default storm, at the middle of a step (engine start is the load's start to within the
/// relay's start-up).
fn storm_spec(duration_s: f64) -> String {
    let ms = (duration_s * 500.0).round() as u64;
    format!("storm@{ms}ms:fraction={STORM_FRACTION_DEFAULT},retry_ms={STORM_RETRY_MS_DEFAULT}")
}

fn run_step(cfg: &DemoConfig, rate: f64, all: &[GeneratedBundle]) -> Result<StepReport, String> {
    let count = ((rate * cfg.duration_s).ceil() as usize).min(all.len());
    let bundles = &all[..count];
    // Unique per step, so steps run at once in one process (tests) never share a log.
    static STEP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let sent_log = std::env::temp_dir().join(format!(
        "bench-demo-sent-{}-{}-{}",
        std::process::id(),
        rate as u64,
        STEP.fetch_add(1, Ordering::Relaxed)
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
        tls: cfg.tls,
        ..EngineConfig::default()
    };
    let engine = start_engine(engine_cfg)?;
    let regions: Vec<(String, SocketAddr)> = engine.handle.region_addrs();
    // The last `socks5` egress addresses are the proxies' outbound sources.
    let direct = cfg.egress.len() - cfg.socks5;
    let proxies = start_proxies(&cfg.egress[direct..])?;
    let setup = RelaySetup {
        regions,
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
    };
    let stop_engine = |engine: EngineThread| {
        drop(engine.handle);
        let _ = engine.stop.send(());
        engine.join.join()
    };
    let relay = match RelayRun::start(cfg, setup) {
        Ok(r) => r,
        Err(e) => {
            let _ = stop_engine(engine);
            return Err(e);
        }
    };
    let probe = relay.probe();
    let pairs = (cfg.egress.len() * cfg.regions()) as u64;
    if cfg.relay == RelayKind::BundleRelay
        && let Err(e) = wait_pairs_up(&probe, pairs)
    {
        let _ = relay.stop();
        let _ = stop_engine(engine);
        return Err(e);
    }
    let relay_pid = relay.pid();
    let mut targets = vec![relay.rotating_addr()];
    if cfg.pinned {
        targets.extend(relay.pinned_addrs());
    }
    if cfg.progress {
        eprintln!(
            "bench-demo: step {rate}/s for {} s: engine {} regions (interval {} ms), {} relay{} rotating {} \
             with {} egress x {} regions = {pairs} pairs{}, in-flight cap {}{}",
            cfg.duration_s,
            cfg.regions(),
            cfg.interval_ms,
            cfg.relay,
            relay_pid.map_or(String::new(), |p| format!(" (process {p})")),
            targets[0],
            cfg.egress.len(),
            cfg.regions(),
            if cfg.socks5 > 0 {
                format!(" ({} addresses via SOCKS5)", cfg.socks5)
            } else {
                String::new()
            },
            cfg.in_flight_max,
            if cfg.tls { ", TLS to the engines" } else { "" },
        );
    }

    // CPU sampler, relay memory sampler and progress printer.
    let sampler = Arc::new(Mutex::new(CpuSampler::default()));
    let rss_max_kb = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let monitor = {
        let sampler = sampler.clone();
        let rss_max_kb = rss_max_kb.clone();
        let done = done.clone();
        let eh = engine.handle.clone();
        let probe = probe.clone();
        let progress = cfg.progress;
        std::thread::Builder::new()
            .name(SAMPLER_THREAD.into())
            .spawn(move || {
                let start = Instant::now();
                let mut next_print = Duration::from_secs(1);
                while !done.load(Ordering::Relaxed) {
                    sampler.lock().expect("sampler").sample();
                    if let Some((rss, _)) = relay_pid.and_then(read_mem_kb) {
                        rss_max_kb.fetch_max(rss, Ordering::Relaxed);
                    }
                    if progress && start.elapsed() >= next_print {
                        let e = eh.stats();
                        let relay_line = match probe.stats() {
                            Ok(r) => format!(
                                "relay admitted {} delivered {} in flight {} retries {} refused {}",
                                r.admitted, r.delivered, r.in_flight, r.retries, r.refused_cap
                            ),
                            Err(e) => format!("relay: {e}"),
                        };
                        let rss = relay_pid
                            .and_then(read_mem_kb)
                            .map_or(String::new(), |(rss, _)| format!(" rss {} MiB", rss / 1024));
                        eprintln!(
                            "[demo {:>3}s] offered {rate:.0}/s | {relay_line}{rss} | engine accepted {} early sends {} storm {}",
                            next_print.as_secs(),
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
    let window_start = Instant::now();
    let ticks_before = process_ticks();
    let relay_proc_before = relay_pid.map_or(0, pid_ticks);
    let rss_kb_at_load_start = relay_pid.and_then(read_mem_kb).map_or(0, |(r, _)| r);
    let (relay_before, engine_before, sampler_before) = {
        let s = sampler.lock().expect("sampler");
        (
            s.relay_ticks(),
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
    while probe.stats().is_ok_and(|s| s.in_flight > 0) && settle_start.elapsed() < SETTLE_MAX {
        std::thread::sleep(Duration::from_millis(20));
    }
    sampler.lock().expect("sampler").sample();
    let ticks_after = process_ticks();
    let relay_proc_after = relay_pid.map_or(0, pid_ticks);
    let window_us = window_start.elapsed().as_secs_f64() * 1e6;
    let memory = relay_pid.map(|pid| {
        let (rss, hwm) = read_mem_kb(pid).unwrap_or((0, 0));
        RelayMemory {
            pid,
            rss_kb_at_load_start,
            rss_kb_max: rss_max_kb.load(Ordering::Relaxed).max(rss),
            hwm_kb: hwm,
        }
    });
    done.store(true, Ordering::Relaxed);
    let _ = monitor.join();
    let (relay_thread_ticks, engine_ticks, sampler_ticks) = {
        let s = sampler.lock().expect("sampler");
        (
            s.relay_ticks() - relay_before,
            s.by_prefix(ENGINE_THREAD) - engine_before,
            s.by_prefix(SAMPLER_THREAD).saturating_sub(sampler_before),
        )
    };
    // In a process of its own the relay's CPU is the whole process's; on threads of this
    // process it is its threads' and comes out of this process's total.
    let (relay_ticks, relay_in_this_process) = match relay_pid {
        Some(_) => (relay_proc_after.saturating_sub(relay_proc_before), 0),
        None => (relay_thread_ticks, relay_thread_ticks),
    };
    let load_ticks = (ticks_after - ticks_before)
        .saturating_sub(relay_in_this_process + engine_ticks + sampler_ticks);

    drop(probe);
    let relay_result = relay.stop();
    let engine_stats = stop_engine(engine).map_err(|_| "the engine thread panicked")?;
    let relay_stats = relay_result?;
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
        window_us: window_us as u64,
        relay_cores: relay_ticks as f64 * us / window_us.max(1.0),
        engine_cores: engine_ticks as f64 * us / window_us.max(1.0),
        load_cores: load_ticks as f64 * us / window_us.max(1.0),
        relay_in_own_process: relay_pid.is_some(),
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
        in_flight_max: cfg.in_flight_max,
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
        memory,
    })
}

/// A process set whose CPU reaches this share of the machine's cores had no CPU to spare: the
/// step's rate was bound by the CPU of all three processes together.
const SATURATED_SHARE: f64 = 0.85;

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

/// utime + stime of a whole process (its exited threads included), in clock ticks.
fn pid_ticks(pid: u32) -> u64 {
    read_stat(std::path::Path::new(&format!("/proc/{pid}/stat"))).map_or(0, |(_, t)| t)
}

fn mib(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

fn fmt_us(us: f64) -> String {
    crate::table::us(us)
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
                "relay memory       RSS {} MiB at load start, {} MiB max during the step, peak (VmHWM) {} MiB",
                mib(m.rss_kb_at_load_start),
                mib(m.rss_kb_max),
                mib(m.hwm_kb)
            );
        }
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
/// Any report as pretty JSON in `path` (the demo's, `--compare`'s, the switch-cost runs').
pub fn write_json(report: &impl Serialize, path: &std::path::Path) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, json + "\n").map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Step reports for the report builders' tests.
#[cfg(test)]
pub(crate) mod test_steps {
    use super::{CpuFigures, RelayKind, RelayMemory, RelayStats, StepReport};
    use crate::engine::EngineStats;
    use crate::load::{Counts, LatencySummary, LoadSummary};

    fn lat(p50: f64, p99: f64) -> LatencySummary {
        LatencySummary {
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
                by_status: Default::default(),
                by_rpc_error: Default::default(),
                result_ids_matching: scheduled - errors,
                result_ids_differing: 0,
                latency: lat(p99_us / 10.0, p99_us),
            },
            relay_stats: RelayStats::default(),
            accounting_holds: true,
            engine: EngineStats::default(),
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
    fn proc_status_yields_rss_and_its_high_water_mark_in_kib() {
        let text =
            "Name:\tbench-demo\nVmPeak:\t  900000 kB\nVmHWM:\t   212000 kB\nVmRSS:\t   61000 kB\n";
        assert_eq!(parse_mem_kb(text), Some((61_000, 212_000)));
        assert_eq!(parse_mem_kb("Name:\tx\nVmRSS:\t 5 kB\n"), None, "no VmHWM");
    }

    #[test]
    fn relay_names_parse_both_ways() {
        for k in [RelayKind::BundleRelay, RelayKind::Baseline] {
            assert_eq!(k.name().parse::<RelayKind>(), Ok(k));
        }
        assert!(
            "nginx"
                .parse::<RelayKind>()
                .unwrap_err()
                .contains("known: bundle-relay, baseline")
        );
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
