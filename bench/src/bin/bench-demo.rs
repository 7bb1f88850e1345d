//! bench-demo: engine + relay + load on loopback in one process, one command, a report at the end.
//! See `bundle_relay_bench::demo`.
//!
//! ```text
//! bench-demo                                    # 1,000 req/s for 10 s, 2,048 pairs, storm mid-run
//! bench-demo --rates 500,1000,1500,2000 --duration-s 5 --json sweep.json
//! bench-demo --egress 127.1.0.0/26 --interval-ms 100 --no-storm --fault rst@2s+1s:every=10
//! ```
//!
//! Open files: one process holds both ends of every relay-engine connection and of every load
//! connection, so a config needs 2 x egress x 8 + 2 x connections + 256 of the 20,000 allowed:
//! at most 1,246 egress addresses with 16 connections (a /24 needs 4,384).
//!
//! Exits 0 when every step's relay accounting holds and the engine saw no early send; 1 when
//! either failed; 2 on a bad argument or a failure to start.

use std::path::PathBuf;
use std::process::ExitCode;

use bundle_relay_bench::demo::{self, DemoConfig, RelayKind};
use bundle_relay_bench::txgen;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "bench-demo",
    about = "Synthetic engine + relay + open-loop load on loopback, with a report"
)]
struct Args {
    /// Relay under test (only `baseline` so far).
    #[arg(long, default_value = "baseline")]
    relay: RelayKind,
    /// Requests per second; a comma-separated list runs one fresh engine and relay per rate.
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    rates: Vec<f64>,
    #[arg(long, default_value_t = 10.0)]
    duration_s: f64,
    /// Relay egress addresses: addresses and CIDR ranges, comma-separated.
    #[arg(long, default_value = demo::EGRESS_DEFAULT)]
    egress: String,
    /// Engine interval: one bundle per (source IP, region) per this many ms.
    #[arg(long, default_value_t = bundle_relay_bench::engine::INTERVAL_MS_DEFAULT)]
    interval_ms: u64,
    /// No storm (by default half the sources are told to back off 30 s at mid-run).
    #[arg(long)]
    no_storm: bool,
    /// Engine fault KIND@START[+DURATION][:k=v,...], repeatable; times from each step's start.
    #[arg(long = "fault")]
    faults: Vec<String>,
    /// Load connections.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Also spread the load over the relay's pinned per-region ports.
    #[arg(long)]
    pinned: bool,
    /// Transactions per bundle as count:weight items.
    #[arg(long, default_value = "1:20,3:60,5:20")]
    txs_mix: String,
    /// Transaction string encodings as name:weight items.
    #[arg(long, default_value = "base64:50,base58:50")]
    encoding_mix: String,
    /// Relay runtime worker threads.
    #[arg(long, default_value_t = 2)]
    relay_threads: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No live progress lines.
    #[arg(long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let bad = |m: String| {
        eprintln!("bench-demo: {m}");
        ExitCode::from(2)
    };
    let egress = match demo::parse_egress(&a.egress) {
        Ok(e) => e,
        Err(e) => return bad(format!("--egress: {e}")),
    };
    let txs_mix = match txgen::parse_txs_mix(&a.txs_mix) {
        Ok(m) => m,
        Err(e) => return bad(format!("--txs-mix: {e}")),
    };
    let encoding_mix = match txgen::parse_encoding_mix(&a.encoding_mix) {
        Ok(m) => m,
        Err(e) => return bad(format!("--encoding-mix: {e}")),
    };
    let cfg = DemoConfig {
        relay: a.relay,
        rates_per_s: a.rates,
        duration_s: a.duration_s,
        egress,
        interval_ms: a.interval_ms,
        storm: !a.no_storm,
        faults: a.faults,
        connections: a.connections,
        pinned: a.pinned,
        txs_mix,
        encoding_mix,
        relay_threads: a.relay_threads,
        seed: a.seed,
        progress: !a.quiet,
    };
    let report = match demo::run(&cfg) {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    println!("{}", demo::render(&report));
    if let Some(p) = &a.json {
        if let Err(e) = demo::write_json(&report, p) {
            return bad(e);
        }
    }
    let failures = report.failures();
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        for f in failures {
            eprintln!("bench-demo: FAILED: {f}");
        }
        ExitCode::FAILURE
    }
}
