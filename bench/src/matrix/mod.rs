//! The fault matrix: bundle-relay (a process of its own) through bench-engine over TLS with
//! every fault at once, one per region, under load near the pool's capacity, while abusive
//! clients do their worst on the intake. Then the verdicts a searcher and an operator care
//! about: every bundle accounted for exactly, nothing sent early, bundles lost only where an
//! engine went silent and no more than it held at that instant, every legitimate client
//! answered (with its bundle's id, or refused at once with 429 where a fault stopped or slowed
//! a region's sending so that its queue outgrew what the pool sends within the max age), and
//! the relay's open files and memory back where they started.
//!
//! | region | fault |
//! |---|---|
//! | amsterdam | black hole: nothing read or written, no RST, no GOAWAY |
//! | dublin | every third call stalled (no answer) for the window |
//! | frankfurt | every fourth call refused with RST_STREAM REFUSED_STREAM |
//! | london | graceful GOAWAY on every connection |
//! | ny | every connection closed, no GOAWAY, new ones refused: down, then up |
//! | slc | every third call: RESOURCE_EXHAUSTED "globally rate limited" |
//! | singapore | Retry-After storm: half the sources told to wait 2 s |
//! | tokyo | every answer 20 ms late |
//! | badtls | a region whose TLS name is wrong: every handshake fails |
//!
//! Clients: pipelining clients that never read, clients trickling a head a byte at a time,
//! clients that half-close after sending their bundles, clients that half-close in the middle
//! of a bundle's body, and a flood of connections from one address.
//!
//! Run: `cargo run --release -p bundle-relay-bench --bin bench-demo -- --faults`.

mod clients;
mod observe;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Serialize;

use crate::demo::{self, DemoConfig, RelayRun, RelaySetup, RelayStats, RelayTuning};
use crate::engine::{EngineConfig, EngineStats, FaultSpec, MAINNET_REGIONS};
use crate::load::{self, LoadConfig, LoadSummary};
use crate::report::{self, Table, mib};
use crate::txgen::GeneratedBundle;

/// The region whose TLS name is wrong.
const BAD_TLS_REGION: &str = "badtls";
/// Engine time by which every pair must be up; faults are scheduled from here.
const LEAD_MS: u64 = 6_000;
/// The relay's memory may end this much above where it started (allocator noise: TLS records,
/// log lines) and still count as back.
const RSS_SLACK_KB: u64 = 4 * 1024;

/// One matrix run.
#[derive(Clone, Debug)]
pub struct MatrixConfig {
    pub duration_s: f64,
    pub rate_per_s: f64,
    pub egress: Vec<IpAddr>,
    pub interval_ms: u64,
    pub relay_threads: usize,
    /// `bench-demo`, which serves the relay in a process of its own.
    pub relay_exe: std::path::PathBuf,
    pub seed: u64,
    pub slow_readers: usize,
    pub tricklers: usize,
    pub half_closers: usize,
    /// Bundles each half-closing client sends before shutting its write side.
    pub half_close_bundles: usize,
    /// Clients that half-close in the middle of a bundle's body.
    pub cut_short: usize,
    pub flood_connections: usize,
    pub progress: bool,
}

impl MatrixConfig {
    pub fn new(relay_exe: std::path::PathBuf) -> MatrixConfig {
        MatrixConfig {
            duration_s: 12.0,
            rate_per_s: 500.0,
            egress: demo::parse_egress("127.1.90.0/27").expect("literal"),
            interval_ms: 400,
            relay_threads: 2,
            relay_exe,
            seed: 7,
            slow_readers: 4,
            tricklers: 4,
            half_closers: 8,
            half_close_bundles: 20,
            cut_short: 4,
            flood_connections: 300,
            progress: true,
        }
    }

    /// (source, region) pairs per region.
    fn pairs_per_region(&self) -> u64 {
        self.egress.len() as u64
    }
}

/// One fault, its region, what the relay did, and what became of the region's bundles.
#[derive(Clone, Debug, Serialize)]
pub struct FaultRow {
    pub fault: String,
    pub region: String,
    pub relay_did: String,
    pub delivered: u64,
    pub expired: u64,
    pub failed: u64,
    /// Bundles the fault could cost at most: the calls in flight when the engine went
    /// silent. `Some(0)` where nothing may be lost.
    pub lost_max: u64,
    /// Rotating-port bundles that waited here and moved to another region: a loss there is
    /// counted here, where they were admitted, so each may add one to what the row loses.
    pub rerouted: u64,
    /// Bundles refused 429 for the region's backlog.
    pub refused: u64,
    /// Refusals the fault may cause: none where it leaves the region's pace whole;
    /// `u64::MAX` where it stops or slows the region's sending, so that what waits can
    /// outgrow what the pool sends within the max age.
    pub refused_max: u64,
}

/// One abusive client kind and how the relay met it.
#[derive(Clone, Debug, Serialize)]
pub struct ClientRow {
    pub clients: String,
    pub relay_did: String,
    pub ok: bool,
}

/// A verdict.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub what: String,
    pub ok: bool,
    pub detail: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct MatrixReport {
    pub faults: Vec<FaultRow>,
    pub clients: Vec<ClientRow>,
    pub checks: Vec<Check>,
    pub relay: RelayStats,
    pub engine: EngineStats,
    pub load: LoadSummary,
    pub fds_start: u64,
    pub fds_end: u64,
    pub rss_kb_start: u64,
    pub rss_kb_end: u64,
    /// Of that, the record of recent bundles (it fills its pages as bundles come).
    pub record_kb_start: u64,
    pub record_kb_end: u64,
    /// The relay's `/metrics` held backlog refusals by region.
    pub refused_family_seen: bool,
}

impl MatrixReport {
    pub fn failures(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| format!("{}: {}", c.what, c.detail))
            .collect()
    }
}

/// The engine's fault rules: one per region, timed from [`LEAD_MS`].
fn fault_specs(cfg: &MatrixConfig) -> Vec<(String, String)> {
    let d = (cfg.duration_s * 1_000.0) as u64;
    let (l, a, w) = (LEAD_MS, d / 4, d * 3 / 10);
    [
        (0, format!("blackhole@{}ms+{w}ms", l + a)),
        (1, format!("stall@{}ms+{w}ms:every=3", l + a)),
        (2, format!("rst@{l}ms+{d}ms:every=4,code=7")),
        (3, format!("goaway@{}ms", l + a)),
        (4, format!("close@{}ms+{}ms", l + a, w / 2)),
        (5, format!("throttle@{l}ms+{d}ms:every=3")),
        (6, format!("storm@{}ms:fraction=0.5,retry_ms=2000", l + a)),
        (7, format!("latency@{l}ms+{d}ms:ms=20")),
    ]
    .into_iter()
    .map(|(r, f)| {
        let region = MAINNET_REGIONS[r].to_string();
        let sep = if f.contains(':') { ',' } else { ':' };
        (region.clone(), format!("{f}{sep}region={region}"))
    })
    .collect()
}

fn say(cfg: &MatrixConfig, line: impl AsRef<str>) {
    if cfg.progress {
        eprintln!("bench-demo --faults: {}", line.as_ref());
    }
}

/// Runs the matrix.
pub fn run(cfg: &MatrixConfig) -> Result<MatrixReport, String> {
    let load_count = (cfg.rate_per_s * cfg.duration_s).ceil() as u64;
    let half = (cfg.half_closers * cfg.half_close_bundles) as u64;
    let dcfg = DemoConfig {
        seed: cfg.seed,
        progress: cfg.progress,
        ..DemoConfig::default()
    };
    let prepared = demo::generate(&dcfg, load_count + half)?;
    let (load_bundles, half_bundles) = prepared.bundles.split_at(load_count as usize);

    let specs = fault_specs(cfg);
    let faults = specs
        .iter()
        .map(|(_, f)| f.parse::<FaultSpec>().map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let engine = demo::start_engine(EngineConfig {
        interval_ms: cfg.interval_ms,
        faults,
        seed: cfg.seed,
        port: 0,
        tls: true,
        ..EngineConfig::default()
    })?;
    let regions = engine.handle.region_addrs();
    let bad_tls = vec![(BAD_TLS_REGION.to_string(), regions[regions.len() - 1].1)];
    let per_source_max = 64;
    let setup = RelaySetup {
        regions: regions.clone(),
        egress: cfg.egress.clone(),
        socks5: Vec::new(),
        tls_ca_pem: engine.handle.ca_pem().map(str::to_string),
        interval_ms: cfg.interval_ms,
        threads: cfg.relay_threads,
        in_flight_max: 4096,
        metrics: true,
        tuning: Some(RelayTuning {
            upstream_timeout_ms: 1_000,
            ping_timeout_ms: 500,
            connect_timeout_ms: 1_000,
            reconnect_max_ms: 1_000,
            head_timeout_ms: 1_000,
            send_timeout_ms: 1_000,
            intake_conns_max: 256,
            intake_per_source_max: per_source_max,
            bundle_max_age_ms: 2_000,
        }),
        bad_tls_regions: bad_tls,
        admin: true,
        handoffs: true,
        tenants: 0,
        reload_every_ms: 0,
        egress_cut_at_ms: 0,
        leader: false,
        reactor_poll: false,
        cpus: Vec::new(),
        ping_idle_ms: None,
        tcp_user_timeout_ms: None,
    };
    let relay_cfg = DemoConfig {
        relay_exe: Some(cfg.relay_exe.clone()),
        ..dcfg
    };
    let relay = RelayRun::start(&relay_cfg, setup)?;
    let outcome = drive(
        cfg,
        &engine,
        &relay,
        load_bundles,
        half_bundles,
        &specs,
        per_source_max,
    );
    let last = relay.stop();
    let engine_stats = engine.stop()?;
    let mut report = outcome?;
    let last = last?;
    report.engine = engine_stats;
    report.relay = last;
    finish_checks(&mut report);
    Ok(report)
}

/// What the run saw before the relay stopped.
#[allow(clippy::too_many_arguments)]
fn drive(
    cfg: &MatrixConfig,
    engine: &demo::EngineThread,
    relay: &RelayRun,
    load_bundles: &[GeneratedBundle],
    half_bundles: &[GeneratedBundle],
    specs: &[(String, String)],
    per_source_max: u32,
) -> Result<MatrixReport, String> {
    let probe = relay.probe();
    let good_pairs = cfg.pairs_per_region() * MAINNET_REGIONS.len() as u64;
    demo::wait_pairs_up(&probe, good_pairs)?;
    let pid = relay
        .pid()
        .ok_or("the matrix runs the relay as a process")?;
    let admin = relay
        .admin_addr()
        .ok_or("the relay has no admin listener")?;
    let (fds_start, rss_kb_start) = observe::sample_process(pid);
    let record_kb_start = record_kb(&observe::scrape(admin)?);
    let up_at = engine.handle.stats().uptime_ms;
    if up_at >= LEAD_MS {
        return Err(format!(
            "the pool took until {up_at} ms of engine time to come up; the faults start at \
             {LEAD_MS} ms"
        ));
    }
    say(
        cfg,
        format!(
            "{good_pairs} pairs up; {fds_start} open files, {} MiB",
            rss_kb_start / 1024
        ),
    );
    std::thread::sleep(Duration::from_millis(LEAD_MS - up_at));

    let rotating = relay.rotating_addr();
    let pinned = relay.pinned_addrs();
    let mut targets = vec![rotating];
    targets.extend(&pinned[..MAINNET_REGIONS.len()]);
    let load_cfg = LoadConfig {
        targets,
        rate_per_s: cfg.rate_per_s,
        duration: None,
        requests: Some(load_bundles.len() as u64),
        connections: 18,
        timeout: Duration::from_secs(5),
        progress: cfg.progress,
        ..LoadConfig::default()
    };
    let abuse_at = Duration::from_secs_f64(cfg.duration_s / 5.0);
    let (load_report, seen) = std::thread::scope(|s| {
        let load = s.spawn(|| load::run(&load_cfg, load_bundles));
        std::thread::sleep(abuse_at);
        say(cfg, "abusive clients start");
        let seen = abuse(cfg, rotating, half_bundles);
        (load.join().expect("load"), seen)
    });
    let load = load_report.map_err(|e| format!("load: {e}"))?.summary;
    say(cfg, "load done; waiting for the relay to settle");
    let settled = observe::wait_settled(&probe, good_pairs);
    let (fds_end, rss_kb_end) = observe::sample_process(pid);
    let stats = probe.stats()?;
    let metrics = observe::scrape(admin)?;
    let record_kb_end = record_kb(&metrics);
    let checks = vec![
        Check {
            what: "the relay settled".into(),
            ok: settled.is_ok(),
            detail: settled.unwrap_or_else(|e| e),
        },
        load_check(&load, seen.half.refused as u64, &stats),
    ];
    Ok(MatrixReport {
        faults: fault_rows(cfg, specs, &stats, &metrics),
        clients: client_rows(cfg, &stats, &seen, per_source_max),
        checks,
        relay: stats,
        engine: EngineStats::default(),
        load,
        fds_start,
        fds_end,
        rss_kb_start,
        rss_kb_end,
        record_kb_start,
        record_kb_end,
        refused_family_seen: metrics.keys().any(|(family, region)| {
            family == "bundle_relay_requests_refused_backlog_total" && !region.is_empty()
        }),
    })
}

/// The record of recent bundles' resident KiB, from a scrape.
fn record_kb(metrics: &BTreeMap<(String, String), f64>) -> u64 {
    let key = (
        "bundle_relay_record_resident_bytes".to_string(),
        String::new(),
    );
    metrics.get(&key).map_or(0, |b| *b as u64 / 1024)
}

/// What the abusive clients saw.
struct Abused {
    /// Requests the never-reading clients got out before the relay hung up.
    slow_sent: usize,
    /// Trickling clients answered 408.
    trickle_408: usize,
    /// Half-closing clients' bundles, by answer.
    half: clients::HalfClosed,
    /// Clients that half-closed in the middle of a body and read a 400 saying so.
    cut_400: usize,
    /// Flood connections the relay held open, and those it refused with a 429.
    flood: clients::Flooded,
}

/// Every abusive client kind at once against the rotating port.
fn abuse(cfg: &MatrixConfig, rotating: SocketAddr, half_bundles: &[GeneratedBundle]) -> Abused {
    std::thread::scope(|s| {
        let slow = s.spawn(|| clients::slow_readers(rotating, cfg.slow_readers));
        let trickle = s.spawn(|| clients::tricklers(rotating, cfg.tricklers));
        let half = s.spawn(|| clients::half_closers(rotating, cfg.half_closers, half_bundles));
        let cut = s.spawn(|| {
            let request = half_bundles.first().map_or(&[][..], |b| &b.request[..]);
            clients::cut_short(rotating, cfg.cut_short, request)
        });
        let flood = s.spawn(|| clients::flood(rotating, cfg.flood_connections));
        Abused {
            slow_sent: slow.join().expect("slow readers"),
            trickle_408: trickle.join().expect("tricklers"),
            half: half.join().expect("half-closers"),
            cut_400: cut.join().expect("cut-short clients"),
            flood: flood.join().expect("flood"),
        }
    })
}

/// What the relay did about each region's fault, and what became of the region's bundles
/// (from its `/metrics`).
fn fault_rows(
    cfg: &MatrixConfig,
    specs: &[(String, String)],
    stats: &RelayStats,
    metrics: &BTreeMap<(String, String), f64>,
) -> Vec<FaultRow> {
    let region_value = |family: &str, region: &str| -> u64 {
        metrics
            .get(&(family.to_string(), region.to_string()))
            .copied()
            .unwrap_or(0.0) as u64
    };
    let row = |fault: String, region: &str, relay_did: String, lost_max: u64| FaultRow {
        refused_max: refusals_allowed(&fault),
        fault,
        region: region.to_string(),
        rerouted: region_value("bundle_relay_bundles_rerouted_total", region),
        relay_did: match region_value("bundle_relay_bundles_rerouted_total", region) {
            0 => relay_did,
            1 => {
                format!("{relay_did}; 1 rotating-port bundle waiting here left for another region")
            }
            n => format!(
                "{relay_did}; {n} rotating-port bundles waiting here left for another region"
            ),
        },
        delivered: region_value("bundle_relay_bundles_delivered_total", region),
        expired: region_value("bundle_relay_bundles_expired_total", region),
        failed: region_value("bundle_relay_bundles_failed_total", region),
        lost_max,
        refused: region_value("bundle_relay_requests_refused_backlog_total", region),
    };
    let mut faults = Vec::new();
    for (region, spec) in specs {
        let kind = spec.split('@').next().unwrap_or("");
        let pairs = cfg.pairs_per_region();
        let (did, lost_max) = match kind {
            "blackhole" => (
                format!(
                    "region paused once silent ({} silences), probed until it answered, its \
                     connections closed when PINGs went unanswered and reconnected",
                    stats.silences
                ),
                pairs,
            ),
            "stall" => (
                "calls unanswered past the 1 s deadline: their pairs reconnected".to_string(),
                u64::MAX, // bounded by the engine's stalled calls, filled in by finish_checks
            ),
            "rst" => (
                "REFUSED_STREAM: the bundle sent again on another pair".to_string(),
                0,
            ),
            "goaway" => (
                "calls in flight finished, connections drained and reconnected".to_string(),
                0,
            ),
            "close" => (
                "pairs out of rotation while the region was down, back when it came up".to_string(),
                pairs,
            ),
            "throttle" => (
                format!(
                    "globally rate limited: the region backed off ({} back-offs), no address \
                     cooled, the bundle requeued",
                    stats.throttles
                ),
                0,
            ),
            "storm" => (
                format!(
                    "Retry-After honoured on each told pair ({} cooldowns)",
                    stats.cooldowns
                ),
                0,
            ),
            "latency" => ("answers 20 ms late: nothing to do".to_string(), 0),
            _ => (String::new(), 0),
        };
        faults.push(row(spec.clone(), region, did, lost_max));
    }
    faults.push(row(
        "TLS name wrong for the region".into(),
        BAD_TLS_REGION,
        format!(
            "each handshake failed, its pairs never joined rotation ({} failed setups in all)",
            stats.connect_failures
        ),
        0,
    ));
    faults
}

/// Backlog refusals a fault (its spec) may cause: any where it stops the region's sending (a
/// black hole, stalled calls, the region down) or slows it (a region-wide back-off, half the
/// sources cooling for the whole max age, every fourth call refused and sent again, which
/// takes a send of its own), since what waits then can outgrow what the pool sends within
/// the max age near the pool's capacity, and a 429 at once is the honest answer; none where
/// the pool keeps its pace (connections drained and back within moments, late answers, a
/// region that never came up).
fn refusals_allowed(fault: &str) -> u64 {
    match fault.split('@').next().unwrap_or("") {
        "blackhole" | "stall" | "close" | "throttle" | "storm" | "rst" => u64::MAX,
        _ => 0,
    }
}

/// How the relay met each abusive client kind.
fn client_rows(
    cfg: &MatrixConfig,
    stats: &RelayStats,
    seen: &Abused,
    per_source_max: u32,
) -> Vec<ClientRow> {
    let half_want = cfg.half_closers * cfg.half_close_bundles;
    vec![
        ClientRow {
            clients: format!("{} pipelining clients that never read", cfg.slow_readers),
            relay_did: format!(
                "closed at the send deadline ({} closed, {} requests sent)",
                stats.intake_send_timeouts, seen.slow_sent
            ),
            ok: stats.intake_send_timeouts >= cfg.slow_readers as u64,
        },
        ClientRow {
            clients: format!(
                "{} clients trickling a head one byte per 100 ms",
                cfg.tricklers
            ),
            relay_did: format!(
                "408 at the head deadline, then closed ({} answered 408)",
                seen.trickle_408
            ),
            ok: seen.trickle_408 == cfg.tricklers,
        },
        ClientRow {
            clients: format!(
                "{} clients sending {} bundles each, then half-closing",
                cfg.half_closers, cfg.half_close_bundles
            ),
            relay_did: format!(
                "every bundle answered before the close ({} of {half_want}: {} with its id, {} \
                 refused 429 for the backlog)",
                seen.half.with_id + seen.half.refused,
                seen.half.with_id,
                seen.half.refused
            ),
            ok: seen.half.with_id + seen.half.refused == half_want,
        },
        ClientRow {
            clients: format!(
                "{} clients half-closing in the middle of a bundle's body",
                cfg.cut_short
            ),
            relay_did: format!(
                "400 saying how much of the body came, then closed ({} answered 400)",
                seen.cut_400
            ),
            ok: seen.cut_400 == cfg.cut_short,
        },
        ClientRow {
            clients: format!("{} connections from one address", cfg.flood_connections),
            relay_did: format!(
                "{} refused at once past {per_source_max} per thread, {} of them read 429 \
                 naming the share ({} held open)",
                stats.intake_refused_per_source, seen.flood.told_429, seen.flood.open
            ),
            ok: stats.intake_refused_per_source > 0
                && seen.flood.told_429 as u64 == stats.intake_refused_per_source
                && seen.flood.open <= per_source_max as usize * cfg.relay_threads,
        },
    ]
}

/// Every load request answered with its bundle's id, or refused at once for a region's
/// backlog (429, -32097; which regions may refuse is each fault row's check). A -32097 is
/// also the in-flight cap's code: the relay must have refused none at the cap, and its
/// backlog refusals must be exactly those the load and the half-closing clients (the only
/// others sending bundles) were answered.
fn load_check(load: &LoadSummary, half_refused: u64, relay: &RelayStats) -> Check {
    let refused = load.by_rpc_error.get(&-32097).copied().unwrap_or(0);
    let status_429 = load.by_status.get(&429).copied().unwrap_or(0);
    load_verdict(
        (load.scheduled, load.counts.sent),
        load.counts.answered,
        load.counts.errors + load.counts.timeouts,
        load.result_ids_matching,
        (refused, status_429),
        (
            relay.refused_backlog.saturating_sub(half_refused),
            relay.refused_cap,
        ),
    )
}

/// [`load_check`]'s verdict from its counts: `load` = (requests scheduled, requests sent: one
/// never sent, the load too far behind, is one not answered); `refused` = (load answers with
/// -32097, load answers with 429); `relay` = (the relay's backlog refusals of load requests,
/// its cap refusals).
fn load_verdict(
    load: (u64, u64),
    answered: u64,
    failed: u64,
    with_id: u64,
    refused: (u64, u64),
    relay: (u64, u64),
) -> Check {
    let ((scheduled, sent), (rpc, status), (backlog, cap)) = (load, refused, relay);
    Check {
        what: "every load request answered with its bundle's id, or refused 429 for a backlog"
            .into(),
        ok: sent == scheduled
            && answered == sent
            && failed == 0
            && with_id + rpc == sent
            && status == rpc
            && cap == 0
            && backlog == rpc,
        detail: format!(
            "scheduled {scheduled} sent {sent} answered {answered} errors or timeouts {failed}: \
             {with_id} with its id, \
             {rpc} refused with -32097 ({status} answered 429; the relay counted {backlog} \
             backlog refusals of them, {cap} at the in-flight cap)"
        ),
    }
}

/// Verdicts that need the engine's final counts and the relay's final totals.
fn finish_checks(r: &mut MatrixReport) {
    let stalled = r.engine.faults.get("stall").copied().unwrap_or(0);
    for row in r.faults.iter_mut() {
        if row.lost_max == u64::MAX {
            row.lost_max = stalled;
        }
        row.lost_max = row.lost_max.saturating_add(row.rerouted);
    }
    let t = &r.relay;
    let mut checks = vec![
        Check {
            what: "every bundle accounted for".into(),
            ok: t.identity_holds() && t.in_flight == 0,
            detail: format!("admitted {} = {}", t.admitted, report::bundle_ends(t)),
        },
        Check {
            what: "no early send at the engine".into(),
            ok: r.engine.early_sends == 0,
            detail: format!("{} early sends", r.engine.early_sends),
        },
        Check {
            what: "no duplicate at the engine".into(),
            ok: r.engine.duplicates == 0,
            detail: format!("{} duplicates", r.engine.duplicates),
        },
    ];
    for row in &r.faults {
        checks.push(Check {
            what: format!(
                "{}: lost no more than it held when it went silent, and what it passed to other \
                 regions",
                row.region
            ),
            ok: row.failed <= row.lost_max,
            detail: format!("{} failed, at most {}", row.failed, row.lost_max),
        });
        if row.refused_max != u64::MAX {
            checks.push(Check {
                what: format!(
                    "{}: refused nothing for a backlog: its fault leaves the pool's pace whole",
                    row.region
                ),
                ok: row.refused <= row.refused_max,
                detail: format!("{} refused, at most {}", row.refused, row.refused_max),
            });
        }
    }
    for c in &r.clients {
        checks.push(Check {
            what: c.clients.clone(),
            ok: c.ok,
            detail: c.relay_did.clone(),
        });
    }
    let by_region: u64 = r.faults.iter().map(|f| f.refused).sum();
    checks.push(Check {
        what: "backlog refusals by region add up to the relay's count".into(),
        ok: r.refused_family_seen && by_region == r.relay.refused_backlog,
        detail: if r.refused_family_seen {
            format!("{by_region} by region, {} in all", r.relay.refused_backlog)
        } else {
            "no bundle_relay_requests_refused_backlog_total by region in the relay's /metrics"
                .into()
        },
    });
    checks.push(Check {
        what: "open files back to where they started".into(),
        ok: r.fds_end <= r.fds_start,
        detail: format!("{} at the start, {} at the end", r.fds_start, r.fds_end),
    });
    // The record of recent bundles fills its pages as bundles come: that growth is its budget
    // being used, not a leak, and is measured apart.
    let grew = r.record_kb_end.saturating_sub(r.record_kb_start);
    checks.push(Check {
        what: "memory back to where it started, but for the record of recent bundles".into(),
        ok: r.rss_kb_end <= r.rss_kb_start + grew + RSS_SLACK_KB,
        detail: format!(
            "{} at the start, {} at the end, of which the record grew {}",
            mib(r.rss_kb_start),
            mib(r.rss_kb_end),
            mib(grew)
        ),
    });
    checks.append(&mut r.checks);
    r.checks = checks;
}

/// The report as text: the fault table, the client table, the verdicts.
pub fn render(r: &MatrixReport) -> String {
    let mut faults = Table::new(&[
        "region",
        "fault",
        "what the relay did",
        "delivered",
        "expired",
        "lost",
        "refused 429",
    ]);
    for f in &r.faults {
        faults.push(vec![
            f.region.clone(),
            f.fault.clone(),
            f.relay_did.clone(),
            f.delivered.to_string(),
            f.expired.to_string(),
            format!("{} (at most {})", f.failed, f.lost_max),
            if f.refused_max == u64::MAX {
                f.refused.to_string()
            } else {
                format!("{} (at most {})", f.refused, f.refused_max)
            },
        ]);
    }
    let mut clients = Table::new(&["clients", "what the relay did"]);
    for c in &r.clients {
        clients.push(vec![c.clients.clone(), c.relay_did.clone()]);
    }
    let t = &r.relay;
    let mut out = format!(
        "{}\n{}\nrelay: admitted {} = {}; retries {}, cooldowns {}, silences {}, reconnects \
         after loss {}; engine: {} accepted, {} early sends, {} duplicates\n",
        faults.render(),
        clients.render(),
        t.admitted,
        report::bundle_ends(t),
        t.retries,
        t.cooldowns,
        t.silences,
        t.disconnects,
        r.engine.accepted,
        r.engine.early_sends,
        r.engine.duplicates
    );
    for c in &r.checks {
        let _ = writeln!(out, "{} {}: {}", report::check_mark(c.ok), c.what, c.detail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sent 100, answered 100, no errors; (with id, -32097 answers, 429 answers, relay's
    /// backlog refusals, relay's cap refusals).
    fn verdict(with_id: u64, rpc: u64, status: u64, backlog: u64, cap: u64) -> bool {
        load_verdict((100, 100), 100, 0, with_id, (rpc, status), (backlog, cap)).ok
    }

    #[test]
    fn every_request_answered_with_its_id_passes() {
        assert!(verdict(100, 0, 0, 0, 0));
    }

    #[test]
    fn a_backlog_refusal_the_relay_counted_passes() {
        assert!(verdict(99, 1, 1, 1, 0));
    }

    #[test]
    fn a_backlog_refusal_counted_twice_fails() {
        assert!(!verdict(99, 1, 1, 2, 0));
    }

    #[test]
    fn a_refusal_at_the_in_flight_cap_fails() {
        assert!(!verdict(99, 1, 1, 0, 1));
        assert!(!verdict(99, 1, 1, 1, 1));
    }

    #[test]
    fn a_refusal_the_relay_did_not_count_as_a_backlog_fails() {
        assert!(!verdict(99, 1, 1, 0, 0));
    }

    #[test]
    fn a_minus_32097_not_answered_429_fails() {
        assert!(!verdict(99, 1, 0, 1, 0));
    }

    #[test]
    fn an_answer_with_another_id_fails() {
        assert!(!verdict(99, 0, 0, 0, 0));
    }

    #[test]
    fn an_error_a_timeout_or_an_unanswered_request_fails() {
        assert!(!load_verdict((100, 100), 100, 1, 100, (0, 0), (0, 0)).ok);
        assert!(!load_verdict((100, 100), 99, 0, 99, (0, 0), (0, 0)).ok);
    }

    /// The load fell so far behind that the rest of its schedule never went: those requests
    /// were not answered, whatever became of the ones sent.
    #[test]
    fn a_request_the_load_never_sent_fails() {
        assert!(!load_verdict((100, 90), 90, 0, 90, (0, 0), (0, 0)).ok);
    }

    #[test]
    fn backlog_refusals_are_allowed_only_where_a_fault_stops_or_slows_a_regions_sending() {
        for (fault, allowed) in [
            ("blackhole@8000ms+2400ms:region=amsterdam", true),
            ("stall@8000ms+2400ms:every=3,region=dublin", true),
            ("close@8000ms+1200ms:region=ny", true),
            ("throttle@6000ms+8000ms:every=3,region=slc", true),
            (
                "storm@8000ms:fraction=0.5,retry_ms=2000,region=singapore",
                true,
            ),
            ("rst@6000ms+8000ms:every=4,code=7,region=frankfurt", true),
            ("goaway@8000ms:region=london", false),
            ("latency@6000ms+8000ms:ms=20,region=tokyo", false),
            ("TLS name wrong for the region", false),
        ] {
            assert_eq!(refusals_allowed(fault) == u64::MAX, allowed, "{fault}");
        }
    }
}
