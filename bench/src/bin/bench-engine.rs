//! bench-engine: the synthetic Jito block engine (see `bundle_relay_bench::engine`).
//!
//! Runs until SIGINT/SIGTERM or `--duration-s`, then prints the stats JSON (stdout or
//! `--stats-out`). Live stats: `curl http://127.0.0.1:9100/stats`.
//!
//! `--cpu-probe N` instead measures the engine's CPU per SendBundle with an in-process client and
//! prints that report.
//!
//! ```text
//! bench-engine                                   # 8 regions on 127.0.0.11..18:10000, 1 s interval
//! bench-engine --interval-ms 100 --duration-s 60 --stats-out engine.json \
//!     --sent-log /dev/shm/bench-sent --run-id 7 \
//!     --fault storm@5s:fraction=0.5,retry_ms=30000 --fault rst@1s+2s:every=10,region=ny
//! bench-engine --tls --tls-cert-out /tmp/engine-ca.pem
//! bench-engine --regions ny,tokyo --base-ip 127.0.0.1 --ip-step 0 --port 10000 --port-step 1
//! bench-engine --land-ms 400 --land-share 0.8   # getBundleStatuses: 80% land, 400 ms after
//! bench-engine --auth --auth-access-ttl-ms 60000 # every call needs a token from auth.AuthService
//! ```
//!
//! Fault syntax: `KIND@START[+DURATION][:key=value,...]`, see `engine::fault` (kinds storm,
//! throttle, rst, stall, latency, goaway, close, blackhole, deny, revoke).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use bundle_relay_bench::engine::{self, AuthConfig, Engine, EngineConfig, FaultSpec, auth};
use bundle_relay_bench::report;

#[derive(Parser, Debug)]
#[command(about = "Synthetic Jito block engine for bundle-relay benchmarks")]
struct Args {
    /// Region names, comma-separated; region i listens on base-ip + i*ip-step, port + i*port-step.
    #[arg(long, value_delimiter = ',', default_values_t = engine::MAINNET_REGIONS.map(String::from))]
    regions: Vec<String>,
    #[arg(long, default_value_t = engine::BASE_IP_DEFAULT)]
    base_ip: Ipv4Addr,
    #[arg(long, default_value_t = 1)]
    ip_step: u32,
    #[arg(long, default_value_t = engine::PORT_DEFAULT)]
    port: u16,
    #[arg(long, default_value_t = 0)]
    port_step: u16,
    /// One accepted bundle per (source IP, region) per this many ms.
    #[arg(long, default_value_t = engine::INTERVAL_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(1..))]
    interval_ms: u64,
    /// Slot time of the synthetic leader schedule (GetNextScheduledLeader): a leader holds 4
    /// slots, the regions in turn; the stats count bundles that arrived at the next leader's
    /// region.
    #[arg(long, default_value_t = engine::SLOT_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(1..))]
    slot_ms: u64,
    /// getBundleStatuses / getInflightBundleStatuses: an accepted bundle that lands does so
    /// this many ms after acceptance, in the slot of that instant; one that does not land is
    /// Pending until then and Failed after.
    #[arg(long, default_value_t = engine::LAND_MS_DEFAULT)]
    land_ms: u64,
    /// Share of accepted bundles that land, 0.0 to 1.0: a bundle lands iff the first byte of its
    /// id is below land-share × 256 (0 = none lands, 1 = all do).
    #[arg(long, default_value_t = engine::LAND_SHARE_DEFAULT, value_parser = parse_land_share)]
    land_share: f64,
    /// KIND@START[+DURATION][:key=value,...], repeatable; kinds: storm, throttle, rst, stall,
    /// latency, goaway, close, blackhole, deny, revoke (e.g. storm@5s:fraction=0.5,retry_ms=30000,
    /// rst@1s+2s:every=10, latency@0s:ms=5,region=ny). revoke@START (no duration, no region):
    /// at START every access token issued so far is forgotten, as an engine restart would lose
    /// them (calls with one get "unknown access token"); refresh tokens and challenges are kept.
    #[arg(long = "fault")]
    faults: Vec<FaultSpec>,
    /// Seeds the storm's choice of sources.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Require Jito's searcher auth: every SearcherService and JSON-RPC call must carry
    /// `authorization: Bearer <access token>` from auth.AuthService (GenerateAuthChallenge, then
    /// GenerateAuthTokens with the ed25519-signed challenge; RefreshAccessToken), else gRPC
    /// UNAUTHENTICATED / HTTP 401. The auth service is served either way.
    #[arg(long)]
    auth: bool,
    /// With --auth: lifetime of an access token (Jito's is 30 minutes).
    #[arg(long, default_value_t = auth::ACCESS_TTL_MS_DEFAULT, requires = "auth", value_parser = clap::value_parser!(u64).range(1..))]
    auth_access_ttl_ms: u64,
    /// With --auth: lifetime of a refresh token, which buys new access tokens until it expires.
    #[arg(long, default_value_t = auth::REFRESH_TTL_MS_DEFAULT, requires = "auth", value_parser = clap::value_parser!(u64).range(1..))]
    auth_refresh_ttl_ms: u64,
    /// Serve TLS (self-signed CA + server certificate, ALPN h2).
    #[arg(long)]
    tls: bool,
    /// Where to write the CA certificate (PEM) clients should trust.
    #[arg(long)]
    tls_cert_out: Option<PathBuf>,
    /// bench-load's shared send-time log, for delivery latency.
    #[arg(long)]
    sent_log: Option<PathBuf>,
    /// Count latency only for bench tags of this run.
    #[arg(long)]
    run_id: Option<u32>,
    #[arg(long, default_value_t = engine::STATS_ADDR_DEFAULT)]
    stats_addr: SocketAddr,
    /// Write the final stats JSON here instead of stdout.
    #[arg(long)]
    stats_out: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = bundle_relay_bench::load::parse_seconds)]
    duration_s: Option<f64>,
    /// Bundle ids remembered for duplicate counting.
    #[arg(long, default_value_t = engine::DUP_CAPACITY_DEFAULT)]
    dup_capacity: usize,
    /// Tokio worker threads; 1 runs everything on the main thread (cheapest).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Measure engine CPU per SendBundle over this many bundles, print the report, exit.
    #[arg(long)]
    cpu_probe: Option<u64>,
    /// Source addresses the probe uses (each connects to every region).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    probe_sources: u32,
}

fn parse_land_share(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{v} is outside 0.0..=1.0 (the share of accepted bundles that land)"
        ))
    }
}

bundle_relay_bench::allocator!();

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(n) = args.cpu_probe {
        return match engine::probe::run(n, args.probe_sources) {
            Ok(r) => {
                println!("{}", report::json(&r));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bench-engine: cpu probe failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let rt = if args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    }
    .expect("tokio runtime");
    rt.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let cfg = EngineConfig {
        regions: args.regions,
        base_ip: args.base_ip,
        ip_step: args.ip_step,
        port: args.port,
        port_step: args.port_step,
        interval_ms: args.interval_ms,
        slot_ms: args.slot_ms,
        land_ms: args.land_ms,
        land_share: args.land_share,
        faults: args.faults,
        seed: args.seed,
        tls: args.tls,
        tls_cert_out: args.tls_cert_out,
        sent_log: args.sent_log,
        run_id: args.run_id,
        stats_addr: Some(args.stats_addr),
        dup_capacity: args.dup_capacity,
        record: false,
        auth: args.auth.then_some(AuthConfig {
            access_ttl_ms: args.auth_access_ttl_ms,
            refresh_ttl_ms: args.auth_refresh_ttl_ms,
        }),
    };
    let handle = match Engine::start(cfg).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("bench-engine: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (name, addr) in handle.region_addrs() {
        eprintln!("bench-engine: region {name} on {addr}");
    }
    if let Some(a) = handle.stats_addr() {
        eprintln!("bench-engine: stats on http://{a}/stats");
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    let until = async {
        match args.duration_s {
            Some(s) => tokio::time::sleep(Duration::from_secs_f64(s)).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = until => {}
    }
    let stats = handle.shutdown().await;
    match args.stats_out {
        None => println!("{}", report::json(&stats)),
        Some(p) => {
            if let Err(e) = report::write_json(&stats, &p) {
                eprintln!("bench-engine: stats: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
