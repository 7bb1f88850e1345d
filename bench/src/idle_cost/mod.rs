//! bench-demo `--idle-cost`: what bundle-relay costs with every pair up and nothing to send
//! (issue 18: "an idle relay with 16,384 pairs uses under 1% of a core: no periodic work
//! proportional to the pool"). For each pool, twice: keepalive PINGs at `ping_idle_ms` (30 s,
//! the default) and keepalive off (`ping_idle_ms = 0`). Each measurement is a fresh engine
//! (8 regions on loopback, on a thread of this process, which holds the engine's end of
//! every connection) and a fresh relay process (the demo's, `bench-demo --serve-relay`,
//! connecting eagerly): once every pair is up and a settle time has passed, the relay
//! process's threads are read from /proc over the window (CPU ns from `schedstat`, context
//! switches as wake-ups), then its RSS. Nothing in this process talks to the relay during
//! the window.
//!
//! The window (40 s by default) holds exactly one keepalive round when the PINGs are on: a
//! pair's first PING is due `ping_idle_ms` after its engine's last frame (its set-up), the
//! second one period later. [`pings_in_window`] counts the rounds from the earliest and
//! latest moment a pair can have come up; the CPU a PING costs is the keepalive row's
//! relay CPU less the keepalive-off row's, over the PINGs in the window.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | what a run is ([`IdleConfig`]), one measurement, the report and its verdicts |
//! | `threads.rs` | another process's threads from /proc: CPU ns, wake-ups, by role |
//! | `render.rs` | the table |

pub mod net;
mod render;
pub mod threads;

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use net::NetCounters;
pub use render::{TARGET_LABEL, render, thousands};
use threads::{Role, Snapshot, ThreadFigure, open_files, sum};

use crate::demo::{
    DemoConfig, FDS_PROCESS_MAX, FDS_RESERVE, IN_FLIGHT_MAX_DEFAULT, RelayKind, RelayProbe,
    RelayRun, RelaySetup, RelayStats, read_mem_kb, start_engine,
};
use crate::engine::{EngineConfig, MAINNET_REGIONS};

/// Issue 18's pool: 2,048 egress addresses x 8 regions.
pub const SOURCES_DEFAULT: usize = 2_048;
/// The pool issue 18's target names.
pub const TARGET_PAIRS: usize = 16_384;
/// Issue 18's bound: an idle relay uses under 1% of a core.
pub const CPU_SHARE_MAX: f64 = 0.01;
/// Long enough to hold one keepalive round at the 30 s default, with room for the spread of
/// the pairs' set-up times.
pub const WINDOW_S_DEFAULT: f64 = 40.0;
/// After the last pair came up: its set-up's frames and the start-up log lines have passed.
pub const SETTLE_S_DEFAULT: f64 = 2.0;
/// How long a pool may take to come all up: 16,384 loopback connections take a few seconds
/// on two shared cores; this leaves room for a loaded machine.
pub const UP_WAIT_S_DEFAULT: f64 = 120.0;
/// The engine's first region address (region i on .131 + i): clear of the demo's .11–.18.
pub const ENGINE_BASE_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 131);
/// The egress pool: addresses from here up, one per source (2,048 is 127.1.0.0/21).
pub const EGRESS_BASE: Ipv4Addr = Ipv4Addr::new(127, 1, 0, 0);
/// How often the wait for the pool reads the relay's counters (before the window only).
const UP_POLL: Duration = Duration::from_millis(20);
/// How often the live lines report while a pool comes up and during the window.
const UP_PROGRESS: Duration = Duration::from_secs(2);
const WINDOW_PROGRESS: Duration = Duration::from_secs(10);

/// What `--idle-cost` runs.
#[derive(Clone, Debug)]
pub struct IdleConfig {
    /// This executable: the relay runs as `EXE --serve-relay bundle-relay --spec JSON`.
    pub relay_exe: PathBuf,
    /// Egress addresses per pool, smallest first; each pool is measured with keepalive on
    /// and off.
    pub pools: Vec<usize>,
    pub relay_threads: usize,
    /// The keepalive rows' `ping_idle_ms`.
    pub ping_idle_ms: u64,
    pub settle_s: f64,
    pub window_s: f64,
    pub up_wait_s: f64,
    /// The relay's `tcp_user_timeout_ms`; `None`: its default (5 s), and with PINGs off the
    /// least the relay accepts then (13 s: the kernel's keepalive probes must fit in it).
    pub tcp_user_timeout_ms: Option<u64>,
    pub egress_base: Ipv4Addr,
    pub engine_base_ip: Ipv4Addr,
    pub progress: bool,
}

impl IdleConfig {
    /// The `tcp_user_timeout_ms` a row with `ping_idle_ms` runs with.
    fn user_timeout_ms(&self, ping_idle_ms: u64) -> Option<u64> {
        match (self.tcp_user_timeout_ms, ping_idle_ms) {
            (None, 0) => Some(bundle_relay::config::KEEPALIVE_USER_TIMEOUT_MS_MIN),
            (t, _) => t,
        }
    }

    /// The defaults: 2,048 sources (16,384 pairs), 2 reactor threads, a 40 s window.
    pub fn new(relay_exe: PathBuf) -> IdleConfig {
        IdleConfig {
            relay_exe,
            pools: vec![SOURCES_DEFAULT],
            relay_threads: 2,
            ping_idle_ms: bundle_relay::config::PING_IDLE_MS_DEFAULT,
            settle_s: SETTLE_S_DEFAULT,
            window_s: WINDOW_S_DEFAULT,
            up_wait_s: UP_WAIT_S_DEFAULT,
            tcp_user_timeout_ms: None,
            egress_base: EGRESS_BASE,
            engine_base_ip: ENGINE_BASE_IP,
            progress: true,
        }
    }

    pub fn regions() -> usize {
        MAINNET_REGIONS.len()
    }

    /// Open files each process needs for a pool of `pairs`: the relay process one socket per
    /// pair, this process the engine's accepted end of each; the reserve covers listeners,
    /// std streams, the ring and /proc reads.
    pub fn fds_needed(pairs: usize) -> usize {
        pairs + FDS_RESERVE
    }

    /// Refuses what cannot run, with the reason.
    pub fn validate(&self) -> Result<(), String> {
        if self.pools.is_empty() {
            return Err("no pool to measure".into());
        }
        if self.ping_idle_ms == 0 {
            return Err("the keepalive rows need a ping_idle_ms above 0".into());
        }
        if let Some(why) = self
            .tcp_user_timeout_ms
            .and_then(|t| bundle_relay::config::keepalive_timeout_conflict(0, t))
        {
            return Err(format!(
                "--idle-tcp-user-timeout-ms, for the rows without PINGs: {why}"
            ));
        }
        let limit = crate::fds::raise_nofile().min(FDS_PROCESS_MAX);
        let max_sources = limit.saturating_sub(FDS_RESERVE) / Self::regions();
        for &n in &self.pools {
            if n < self.relay_threads.max(1) {
                return Err(format!(
                    "a pool of {n} sources cannot be shared by {} reactor threads",
                    self.relay_threads
                ));
            }
            if n > max_sources {
                return Err(format!(
                    "{n} sources x {} regions need {} open files in the relay process and as \
                     many in this one (one per pair + {FDS_RESERVE} reserve), over the limit of \
                     {limit}: use at most {max_sources} sources",
                    Self::regions(),
                    Self::fds_needed(n * Self::regions())
                ));
            }
        }
        for (what, s) in [
            ("settle", self.settle_s),
            ("window", self.window_s),
            ("wait for the pool", self.up_wait_s),
        ] {
            if !(s.is_finite() && s > 0.0) {
                return Err(format!("the {what} must be a positive number of seconds"));
            }
        }
        Ok(())
    }

    /// A pool's egress addresses.
    fn egress(&self, sources: usize) -> Vec<IpAddr> {
        (0..sources as u32)
            .map(|i| IpAddr::V4(Ipv4Addr::from(u32::from(self.egress_base) + i)))
            .collect()
    }
}

/// One measurement: a pool with keepalive on or off.
#[derive(Clone, Debug, Serialize)]
pub struct IdleRow {
    pub sources: usize,
    pub pairs: usize,
    /// 0: keepalive off.
    pub ping_idle_ms: u64,
    pub measured: Option<Measured>,
    /// Why there is no measurement (the pool never came all up, the relay process died).
    pub failure: Option<String>,
}

/// What a row's window found.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    /// Seconds from the relay's start until every pair was seen up.
    pub all_up_s: f64,
    pub window_s: f64,
    pub cpu_ns: u64,
    pub reactor_ns: u64,
    pub log_ns: u64,
    pub rest_ns: u64,
    /// Context switches of every thread (voluntary + involuntary): wake-ups.
    pub switches: u64,
    pub reactor_switches: u64,
    pub threads: Vec<ThreadFigure>,
    /// PINGs sent in the window: whole rounds of the pool when exact.
    pub pings: f64,
    pub pings_exact: bool,
    pub rss_kb: u64,
    pub relay_fds: usize,
    pub bench_fds: usize,
    /// Pairs up after the window, and connections opened and lost over it.
    pub pairs_up_end: u64,
    pub connects: u64,
    pub disconnects: u64,
    /// The machine's loopback drops and keepalive aborts over the window.
    pub net: NetCounters,
}

impl Measured {
    /// Share of one core.
    pub fn share(&self, ns: u64) -> f64 {
        ns as f64 / (self.window_s * 1e9)
    }

    pub fn per_s(&self, n: u64) -> f64 {
        n as f64 / self.window_s
    }
}

impl IdleRow {
    pub fn keepalive(&self) -> bool {
        self.ping_idle_ms > 0
    }

    /// pairs / ping_idle: the steady rate of keepalive PINGs.
    pub fn pings_per_s(&self) -> f64 {
        if self.keepalive() {
            self.pairs as f64 * 1000.0 / self.ping_idle_ms as f64
        } else {
            0.0
        }
    }

    /// Issue 18's verdict: under [`CPU_SHARE_MAX`] of a core.
    pub fn target_met(&self) -> Option<bool> {
        let m = self.measured.as_ref()?;
        Some(m.share(m.cpu_ns) < CPU_SHARE_MAX)
    }
}

/// Every row, in run order.
#[derive(Clone, Debug, Serialize)]
pub struct IdleReport {
    pub relay_threads: usize,
    pub ping_idle_ms: u64,
    pub settle_s: f64,
    pub window_s: f64,
    pub rows: Vec<IdleRow>,
}

impl IdleReport {
    /// Pools that never came all up (or whose relay process died).
    pub fn failures(&self) -> Vec<String> {
        self.rows.iter().filter_map(|r| r.failure.clone()).collect()
    }

    /// CPU µs per PING for the pool of `pairs`: (keepalive on - off) / the PINGs in the on
    /// row's window.
    pub fn per_ping_us(&self, pairs: usize) -> Option<f64> {
        let measured = |on: bool| {
            self.rows
                .iter()
                .find(|r| r.pairs == pairs && r.keepalive() == on && r.failure.is_none())
                .and_then(|r| r.measured.as_ref())
        };
        let (on, off) = (measured(true)?, measured(false)?);
        if on.pings <= 0.0 {
            return None;
        }
        // Per second of window, so two windows of different lengths compare.
        let extra_ns_per_s = on.cpu_ns as f64 / on.window_s - off.cpu_ns as f64 / off.window_s;
        Some(extra_ns_per_s * on.window_s / on.pings / 1e3)
    }
}

/// Measures every pool with keepalive on, then off.
pub fn run(cfg: &IdleConfig) -> Result<IdleReport, String> {
    cfg.validate()?;
    let mut pools = cfg.pools.clone();
    pools.sort_unstable();
    pools.dedup();
    if cfg.progress {
        let pairs = pools.iter().max().copied().unwrap_or(0) * IdleConfig::regions();
        eprintln!(
            "bench-demo --idle-cost: open files for {} pairs: the relay process {} (one \
             socket per pair + {FDS_RESERVE}), this process as many (the engine's end of each), \
             each of {} allowed per process",
            thousands(pairs as u64),
            thousands(IdleConfig::fds_needed(pairs) as u64),
            thousands(FDS_PROCESS_MAX as u64)
        );
    }
    let mut rows = Vec::new();
    for &sources in &pools {
        for ping_idle_ms in [cfg.ping_idle_ms, 0] {
            rows.push(measure(cfg, sources, ping_idle_ms)?);
        }
    }
    Ok(IdleReport {
        relay_threads: cfg.relay_threads,
        ping_idle_ms: cfg.ping_idle_ms,
        settle_s: cfg.settle_s,
        window_s: cfg.window_s,
        rows,
    })
}

/// `30 s` or `off`.
pub fn keepalive_label(ping_idle_ms: u64) -> String {
    match ping_idle_ms {
        0 => "off".into(),
        ms if ms % 1000 == 0 => format!("{} s", ms / 1000),
        ms => format!("{ms} ms"),
    }
}

/// One row: a fresh engine and relay process, every pair up, settle, the window.
fn measure(cfg: &IdleConfig, sources: usize, ping_idle_ms: u64) -> Result<IdleRow, String> {
    let pairs = sources * IdleConfig::regions();
    let label = format!(
        "{} pairs, keepalive {}",
        thousands(pairs as u64),
        keepalive_label(ping_idle_ms)
    );
    let engine = start_engine(EngineConfig {
        base_ip: cfg.engine_base_ip,
        ip_step: 1,
        port: 0,
        stats_addr: None,
        ..EngineConfig::default()
    })?;
    let setup = RelaySetup {
        ping_idle_ms: Some(ping_idle_ms),
        tcp_user_timeout_ms: cfg.user_timeout_ms(ping_idle_ms),
        ..RelaySetup::plain(
            engine.handle.region_addrs(),
            cfg.egress(sources),
            cfg.relay_threads,
            crate::engine::INTERVAL_MS_DEFAULT,
            IN_FLIGHT_MAX_DEFAULT,
        )
    };
    let relay_cfg = DemoConfig {
        relay: RelayKind::BundleRelay,
        relay_exe: Some(cfg.relay_exe.clone()),
        ..DemoConfig::default()
    };
    let start = Instant::now();
    let relay = match RelayRun::start(&relay_cfg, setup) {
        Ok(r) => r,
        Err(e) => {
            let _ = engine.stop();
            return Err(e);
        }
    };
    let pid = relay.pid().expect("the idle relay runs as a process");
    let probe = relay.probe();
    let result = window(cfg, &label, pairs, ping_idle_ms, pid, &probe, start);
    drop(probe);
    let stopped = relay.stop();
    let _ = engine.stop();
    let (measured, failure) = match result {
        Ok(m) => (Some(m), None),
        Err(e) => (None, Some(format!("{label}: {e}"))),
    };
    if let Err(e) = stopped
        && failure.is_none()
    {
        eprintln!("bench-demo --idle-cost: {label}: stopping the relay: {e}");
    }
    Ok(IdleRow {
        sources,
        pairs,
        ping_idle_ms,
        measured,
        failure,
    })
}

/// Waits for every pair, settles, and reads the relay process over the window.
fn window(
    cfg: &IdleConfig,
    label: &str,
    pairs: usize,
    ping_idle_ms: u64,
    pid: u32,
    probe: &RelayProbe,
    start: Instant,
) -> Result<Measured, String> {
    let (up_lo, up_hi) = wait_all_up(cfg, label, probe, pairs as u64, start)?;
    if cfg.progress {
        eprintln!(
            "  {label}: all up after {up_hi:.1} s; settling {} s, then a {} s window",
            cfg.settle_s, cfg.window_s
        );
    }
    std::thread::sleep(Duration::from_secs_f64(cfg.settle_s));
    let before = probe.stats()?;
    let net_before = NetCounters::now();
    let first = Snapshot::of(pid)?;
    let opened = Instant::now();
    let window = Duration::from_secs_f64(cfg.window_s);
    loop {
        let left = window.saturating_sub(opened.elapsed());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(WINDOW_PROGRESS));
        if cfg.progress && !window.saturating_sub(opened.elapsed()).is_zero() {
            let so_far = Snapshot::of(pid)?.since(&first);
            let (cpu, switches) = sum(&so_far, None);
            let s = opened.elapsed().as_secs_f64();
            eprintln!(
                "  {label}: {s:>3.0}/{:.0} s: relay {:.3}% of a core, {:.0} wake-ups/s so far",
                cfg.window_s,
                100.0 * cpu as f64 / (s * 1e9),
                switches as f64 / s
            );
        }
    }
    let last = Snapshot::of(pid)?;
    let closed = Instant::now();
    let net = NetCounters::now().since(&net_before);
    let (rss_kb, _) = read_mem_kb(pid).unwrap_or((0, 0));
    let relay_fds = open_files(&pid.to_string()).unwrap_or(0);
    let bench_fds = open_files("self").unwrap_or(0);
    let after = probe.stats()?;
    let threads = last.since(&first);
    let (cpu_ns, switches) = sum(&threads, None);
    let (reactor_ns, reactor_switches) = sum(&threads, Some(Role::Reactor));
    let at = |t: Instant| t.duration_since(start).as_secs_f64();
    let (pings, pings_exact) = pings_in_window(
        pairs,
        (up_lo, up_hi),
        (at(opened), at(closed)),
        ping_idle_ms,
    );
    let m = Measured {
        all_up_s: up_hi,
        window_s: closed.duration_since(opened).as_secs_f64(),
        cpu_ns,
        reactor_ns,
        log_ns: sum(&threads, Some(Role::Log)).0,
        rest_ns: sum(&threads, Some(Role::Rest)).0,
        switches,
        reactor_switches,
        threads,
        pings,
        pings_exact,
        rss_kb,
        relay_fds,
        bench_fds,
        pairs_up_end: after.pairs_up,
        connects: after.connects.saturating_sub(before.connects),
        disconnects: after.disconnects.saturating_sub(before.disconnects),
        net,
    };
    if cfg.progress {
        eprintln!(
            "  {label}: relay {:.3}% of a core (reactors {:.3}%), {:.0} wake-ups/s, RSS {:.1} \
             MiB, open files: relay {relay_fds}, this process {bench_fds}; {} connections \
             lost and redone (machine-wide: {} packets dropped on the input backlog, {} TCP \
             aborts on timeout)",
            100.0 * m.share(m.cpu_ns),
            100.0 * m.share(m.reactor_ns),
            m.per_s(m.switches),
            m.rss_kb as f64 / 1024.0,
            m.disconnects,
            m.net.backlog_drops,
            m.net.aborts_on_timeout
        );
    }
    Ok(m)
}

/// Waits until `want` pairs are up; returns the bounds of the pairs' set-up times in seconds
/// from `start`: the last read that saw none up, and the read that saw them all.
fn wait_all_up(
    cfg: &IdleConfig,
    label: &str,
    probe: &RelayProbe,
    want: u64,
    start: Instant,
) -> Result<(f64, f64), String> {
    let mut none_up_at = 0.0;
    let mut next_line = UP_PROGRESS;
    loop {
        let asked = start.elapsed();
        let s: RelayStats = probe.stats()?;
        let answered = start.elapsed();
        if s.pairs_up == 0 {
            none_up_at = asked.as_secs_f64();
        }
        if s.pairs_up >= want {
            return Ok((none_up_at, answered.as_secs_f64()));
        }
        if answered.as_secs_f64() >= cfg.up_wait_s {
            return Err(format!(
                "the pool never came all up: {} of {want} pairs after {:.0} s",
                s.pairs_up, cfg.up_wait_s
            ));
        }
        if cfg.progress && answered >= next_line {
            eprintln!(
                "  {label}: {} of {want} pairs up after {:.0} s",
                s.pairs_up,
                answered.as_secs_f64()
            );
            next_line += UP_PROGRESS;
        }
        std::thread::sleep(UP_POLL);
    }
}

/// PINGs a pool sends in the window `(open, close)` when each pair came up within `up` (all
/// in seconds from one origin) and PINGs every `ping_idle_ms` after its last frame: whole
/// rounds of the pool when the earliest and the latest pair see the same number of their
/// due times in the window (exact, `true`), else the steady rate over the window.
pub fn pings_in_window(
    pairs: usize,
    up: (f64, f64),
    window: (f64, f64),
    ping_idle_ms: u64,
) -> (f64, bool) {
    if ping_idle_ms == 0 {
        return (0.0, true);
    }
    let period = ping_idle_ms as f64 / 1000.0;
    // Due times up + k x period, k >= 1, inside the window.
    let rounds = |up_s: f64| {
        let first = ((window.0 - up_s) / period).ceil().max(1.0);
        let last = ((window.1 - up_s) / period).floor();
        (last - first + 1.0).max(0.0)
    };
    let (early, late) = (rounds(up.0), rounds(up.1));
    if early == late {
        (pairs as f64 * early, true)
    } else {
        (pairs as f64 * (window.1 - window.0) / period, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_window_holds_one_keepalive_round_of_the_whole_pool() {
        // Pairs up between 0.2 s and 6 s, 2 s of settling, 40 s window, PINGs every 30 s.
        assert_eq!(
            pings_in_window(16_384, (0.2, 6.0), (8.0, 48.0), 30_000),
            (16_384.0, true)
        );
        // Keepalive off sends none.
        assert_eq!(
            pings_in_window(16_384, (0.2, 6.0), (8.0, 48.0), 0),
            (0.0, true)
        );
    }

    #[test]
    fn a_spread_that_splits_the_rounds_falls_back_to_the_rate() {
        // The earliest pair's second PING (at 60.2 s) falls in the window, the latest's not.
        let (n, exact) = pings_in_window(100, (0.2, 25.0), (27.0, 67.0), 30_000);
        assert!(!exact);
        assert!((n - 100.0 * 40.0 / 30.0).abs() < 1e-9, "{n}");
    }

    #[test]
    fn a_short_period_counts_every_round_in_the_window() {
        assert_eq!(
            pings_in_window(64, (0.05, 0.3), (0.7, 2.7), 1_000),
            (128.0, true)
        );
    }

    #[test]
    fn pools_over_the_open_file_rule_are_refused_with_the_most_that_fits() {
        let mut cfg = IdleConfig::new("bench-demo".into());
        cfg.pools = vec![4_096];
        let e = cfg.validate().unwrap_err();
        assert!(e.contains("use at most"), "{e}");
        cfg.pools = vec![1];
        assert!(cfg.validate().unwrap_err().contains("2 reactor threads"));
    }

    #[test]
    fn the_default_pool_fits_the_open_file_rule_in_both_processes() {
        assert_eq!(SOURCES_DEFAULT * IdleConfig::regions(), TARGET_PAIRS);
        assert!(IdleConfig::fds_needed(TARGET_PAIRS) < FDS_PROCESS_MAX);
    }

    #[test]
    fn keepalive_reads_as_seconds_or_off() {
        assert_eq!(keepalive_label(30_000), "30 s");
        assert_eq!(keepalive_label(1_500), "1500 ms");
        assert_eq!(keepalive_label(0), "off");
    }
}
