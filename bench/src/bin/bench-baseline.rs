//! bench-baseline: the conventional relay (tokio + axum + tonic, the seed's mutex limiter) that
//! bundle-relay is measured against. See `bundle_relay_bench::baseline`.

use std::net::SocketAddr;
use std::process::ExitCode;

use bundle_relay_bench::baseline::config::{self, BaselineConfig};
use bundle_relay_bench::baseline::{Baseline, Stats};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "bench-baseline",
    about = "Conventional Jito bundle relay (baseline for bundle-relay)"
)]
struct Args {
    /// Rotating intake port: each bundle goes to the region that can send soonest.
    #[arg(long, default_value = "127.0.0.1:8080")]
    rotating: SocketAddr,
    /// First pinned intake port; region i listens on its port + i.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pinned_base: SocketAddr,
    /// Admin address serving GET /stats.
    #[arg(long, default_value = "127.0.0.1:9101")]
    admin: SocketAddr,
    /// Region engine, `name=host:port`, repeatable (default: the 8 mainnet names at
    /// 127.0.0.(11+i):10000).
    #[arg(long = "engine")]
    engines: Vec<String>,
    /// Egress addresses: comma-separated addresses and CIDR ranges, repeatable.
    #[arg(long, default_value = config::DEFAULT_EGRESS)]
    egress: Vec<String>,
    /// One send per interval per (egress address, region).
    #[arg(long, default_value_t = bundle_relay::jito::INTERVAL_MS_DEFAULT)]
    interval_ms: u64,
    /// Cap on admitted bundles not yet ended; beyond it the intake answers 429.
    #[arg(long, default_value_t = config::DEFAULT_MAX_IN_FLIGHT)]
    max_in_flight: usize,
    /// Age after which an undelivered bundle is dropped as expired.
    #[arg(long, default_value_t = config::DEFAULT_MAX_AGE_MS)]
    max_age_ms: u64,
    /// Cooldown when RESOURCE_EXHAUSTED carries no retry hint.
    #[arg(long, default_value_t = config::DEFAULT_RETRY_AFTER_MS)]
    default_retry_after_ms: u64,
    /// Connect every (egress, region) pair at startup instead of on first use.
    #[arg(long)]
    connect_at_startup: bool,
    /// Intake connections budgeted in the open-file check.
    #[arg(long, default_value_t = config::DEFAULT_INTAKE_CONNECTIONS_MAX)]
    intake_connections_max: usize,
    /// Shutdown waits this long for in-flight bundles.
    #[arg(long, default_value_t = config::DEFAULT_MAX_AGE_MS + 500)]
    drain_ms: u64,
    /// Tokio worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    worker_threads: usize,
}

fn config_of(args: &Args) -> Result<BaselineConfig, config::ConfigError> {
    let regions = if args.engines.is_empty() {
        config::default_regions()
    } else {
        args.engines
            .iter()
            .map(|s| config::parse_engine(s))
            .collect::<Result<_, _>>()?
    };
    let egress = config::parse_egress(&args.egress.join(","))?;
    Ok(BaselineConfig {
        rotating_addr: args.rotating,
        pinned_base: args.pinned_base,
        admin_addr: Some(args.admin),
        regions,
        egress,
        interval_ms: args.interval_ms,
        max_in_flight: args.max_in_flight,
        max_age_ms: args.max_age_ms,
        default_retry_after_ms: args.default_retry_after_ms,
        connect_at_startup: args.connect_at_startup,
        intake_connections_max: args.intake_connections_max,
        drain_ms: args.drain_ms,
        journal: false,
    })
}

fn print_stats(stats: &Stats) {
    println!("{}", serde_json::to_string(stats).unwrap_or_default());
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

bundle_relay_bench::allocator!();

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = match config_of(&args) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("bench-baseline: {e}");
            return ExitCode::from(2);
        }
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if args.worker_threads > 0 {
        runtime.worker_threads(args.worker_threads);
    }
    let runtime = match runtime.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench-baseline: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let handle = match Baseline::start(cfg.clone()).await {
            Ok(h) => h,
            Err(e) => {
                eprintln!("bench-baseline: {e}");
                return ExitCode::FAILURE;
            }
        };
        eprintln!(
            "bench-baseline: rotating {} | pinned {} | admin {} | {} egress x {} regions, interval {} ms, cap {}",
            handle.rotating_addr(),
            handle
                .pinned_addrs()
                .iter()
                .map(|(n, a)| format!("{n}={a}"))
                .collect::<Vec<_>>()
                .join(" "),
            handle.admin_addr().map_or("off".into(), |a| a.to_string()),
            cfg.egress.len(),
            cfg.regions.len(),
            cfg.interval_ms,
            cfg.max_in_flight,
        );
        wait_for_signal().await;
        eprintln!("bench-baseline: stopping; draining in-flight bundles for up to {} ms", cfg.drain_ms);
        let stats = handle.shutdown().await;
        print_stats(&stats);
        ExitCode::SUCCESS
    })
}
