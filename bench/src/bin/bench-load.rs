//! bench-load: open-loop sendBundle load at a constant rate, latency from scheduled send time.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use bundle_relay_bench::load::{self, LoadConfig};
use bundle_relay_bench::txgen::{self, TxGenConfig};
use clap::Parser;

#[derive(Parser)]
#[command(about = "Open-loop (wrk2-style) sendBundle load generator")]
struct Args {
    /// host:port to load; repeat or comma-separate for several (connections round-robin).
    #[arg(long, required = true, value_delimiter = ',')]
    target: Vec<String>,
    /// Requests per second.
    #[arg(long)]
    rate: f64,
    /// Run length in seconds.
    #[arg(long, value_parser = load::parse_seconds)]
    duration_s: Option<f64>,
    /// Stop after this many requests.
    #[arg(long)]
    requests: Option<u64>,
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Shared send-time table for bench-engine (put it on /dev/shm).
    #[arg(long)]
    sent_log: Option<PathBuf>,
    /// HdrHistogram interval log (.hlog), one interval per second.
    #[arg(long)]
    hlog: Option<PathBuf>,
    /// JSON summary file.
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Written into every transaction's tag; the engine joins only this run's bundles.
    #[arg(long, default_value_t = 1)]
    run_id: u32,
    /// Transactions per bundle as count:weight items.
    #[arg(long, default_value = "1:20,3:60,5:20")]
    txs_mix: String,
    /// Transaction string encodings as name:weight items.
    #[arg(long, default_value = "base64:50,base58:50")]
    encoding_mix: String,
    #[arg(long, default_value_t = 50)]
    v0_percent: u8,
    #[arg(long, default_value_t = 50)]
    compute_budget_percent: u8,
    /// Send this key in every request's `x-jito-auth` header (a relay tenant's key).
    #[arg(long)]
    auth: Option<String>,
    /// No progress lines.
    #[arg(long)]
    quiet: bool,
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("bench-load: {msg}");
    std::process::exit(2);
}

bundle_relay_bench::allocator!();

fn main() {
    let a = Args::parse();
    let targets: Vec<SocketAddr> = a
        .target
        .iter()
        .map(|t| {
            t.to_socket_addrs()
                .ok()
                .and_then(|mut it| it.next())
                .unwrap_or_else(|| fail(format!("target {t:?} is not host:port")))
        })
        .collect();
    let cfg = LoadConfig {
        targets,
        rate_per_s: a.rate,
        duration: a.duration_s.map(Duration::from_secs_f64),
        requests: a.requests,
        connections: a.connections,
        pipeline_depth: a.pipeline,
        threads: a.threads,
        timeout: Duration::from_millis(a.timeout_ms),
        sent_log: a.sent_log,
        hlog: a.hlog,
        progress: !a.quiet,
    };
    // Refuse a bad configuration before spending time on signatures.
    let total = cfg.check().unwrap_or_else(|e| fail(e));
    let gen_cfg = TxGenConfig {
        seed: a.seed,
        run_id: a.run_id,
        txs_mix: txgen::parse_txs_mix(&a.txs_mix)
            .unwrap_or_else(|e| fail(format!("--txs-mix: {e}"))),
        encoding_mix: txgen::parse_encoding_mix(&a.encoding_mix)
            .unwrap_or_else(|e| fail(format!("--encoding-mix: {e}"))),
        v0_percent: a.v0_percent,
        compute_budget_percent: a.compute_budget_percent,
        host: a.target[0].clone(),
        auth: a.auth.clone(),
        ..TxGenConfig::default()
    };
    eprintln!("bench-load: generating {total} signed bundles ...");
    let (bundles, stats) = txgen::generate(gen_cfg, 0, total).unwrap_or_else(|e| fail(e));
    eprintln!(
        "bench-load: generated {} bundles ({} transactions) in {:.2} s on {} threads: {:.0} bundles/s",
        stats.bundles,
        stats.transactions,
        stats.elapsed.as_secs_f64(),
        stats.threads,
        stats.bundles_per_s()
    );
    let report = load::run(&cfg, &bundles).unwrap_or_else(|e| fail(e));
    println!("{}", report.summary);
    if let Some(p) = a.json {
        bundle_relay_bench::report::write_json(&report.summary, &p).unwrap_or_else(|e| fail(e));
    }
}
