//! bench-null: answers every HTTP/1.1 request with a fixed JSON-RPC result, as fast as it can.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bundle_relay_bench::null::{NullConfig, NullServer};
use clap::Parser;

#[derive(Parser)]
#[command(
    about = "Trivial HTTP/1.1 JSON-RPC responder: bench-load's self-test and the intake floor"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8999")]
    listen: SocketAddr,
    /// Responder threads, each with its own SO_REUSEPORT listener.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Answer sendBundle with the real bundle id (decodes every transaction) instead of zeros.
    #[arg(long)]
    bundle_ids: bool,
    /// Run on these cores only, comma-separated (`bench-demo --compare --pin-relay` puts it on
    /// the relays' cores).
    #[arg(long)]
    cores: Option<String>,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long)]
    duration_s: Option<u64>,
}

bundle_relay_bench::allocator!();

fn main() {
    let a = Args::parse();
    if let Some(list) = &a.cores {
        let confined = bundle_relay_bench::affinity::parse_cores(list).and_then(|cores| {
            bundle_relay_bench::affinity::confine(&cores).map_err(|e| e.to_string())
        });
        if let Err(e) = confined {
            eprintln!("bench-null: --cores {list}: {e}");
            std::process::exit(2);
        }
    }
    let server = match NullServer::start(&NullConfig {
        listen: a.listen,
        threads: a.threads,
        bundle_ids: a.bundle_ids,
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bench-null: cannot listen on {}: {e}", a.listen);
            std::process::exit(1);
        }
    };
    eprintln!(
        "bench-null: pid {} listening on {} with {} thread(s)",
        std::process::id(),
        server.local_addr(),
        a.threads
    );
    let start = Instant::now();
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let served = server.requests_served();
        eprintln!("bench-null: {} req/s, {served} total", served - last);
        last = served;
        if a.duration_s
            .is_some_and(|d| start.elapsed() >= Duration::from_secs(d))
        {
            break;
        }
    }
    if let Err(e) = server.stop() {
        eprintln!("bench-null: {e}");
        std::process::exit(1);
    }
}
