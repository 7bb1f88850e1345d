//! The memory budget printed at startup is what the relay really allocates: a relay started in
//! this process, its whole pool connected to bench-engine (in a process of its own, so only the
//! relay allocates here), holds within a few percent of `Budget::new`'s total, and carrying
//! bundles afterwards allocates nothing more.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bundle_relay::budget::{Budget, BudgetInputs};
use bundle_relay::limiter::ledger::Ledger;
use bundle_relay::relay::{RegionSpec, Spec};
use bundle_relay::runtime::Relay;
use bundle_relay_bench::txgen::{self, TxGenConfig};

/// Live heap bytes of the whole process.
struct Live;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Live = Live;

fn live() -> i64 {
    LIVE_BYTES.load(Ordering::Relaxed)
}

const REGIONS: usize = 8;
const BASE_IP: [u8; 4] = [127, 0, 0, 211];
const PORT: u16 = 19_811;

struct Engine(Child);

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn engine() -> Engine {
    let child = Command::new(env!("CARGO_BIN_EXE_bench-engine"))
        .args(["--base-ip", "127.0.0.211", "--port", &PORT.to_string()])
        .args(["--interval-ms", "10", "--duration-s", "60"])
        .args(["--stats-addr", "127.0.0.210:19810"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("bench-engine starts");
    let last = region_addr(REGIONS - 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(last).is_err() {
        assert!(Instant::now() < deadline, "bench-engine did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    Engine(child)
}

fn region_addr(i: usize) -> SocketAddr {
    let [a, b, c, d] = BASE_IP;
    SocketAddr::from(([a, b, c, d + i as u8], PORT))
}

fn wait(
    relay: &Relay,
    what: &str,
    ok: impl Fn(&bundle_relay::metrics::accounting::Totals) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok(&relay.totals()) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            relay.totals()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `requests` (whole sendBundle requests) on one keep-alive connection, each answered
/// before the next goes.
fn send(target: SocketAddr, requests: &[Box<[u8]>], buf: &mut [u8]) {
    let mut s = TcpStream::connect(target).unwrap();
    for request in requests {
        s.write_all(request).unwrap();
        let n = s.read(buf).unwrap();
        assert!(
            buf[..n].starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&buf[..n])
        );
    }
}

/// Starts a relay of `spec`, waits for its pool, sends 200 bundles; returns the bytes it held
/// with every pair up and what carrying the bundles added.
fn allocated(spec: Spec, requests: &[Box<[u8]>]) -> (i64, i64) {
    let pairs = (spec.sources.len() * spec.regions.len()) as u64;
    let mut buf = vec![0u8; 4096];
    let before = live();
    // `run` books in a pacing ledger it maps; this one is heap, so the heap holds all of it.
    let mut spec = spec;
    spec.ledger = Some(std::sync::Arc::new(Ledger::private(pairs as usize)));
    let relay = Relay::start(spec).unwrap();
    wait(&relay, "every pair up", |t| t.pairs_up == pairs);
    // The last pair counted up may still be finishing its setup on a loaded host: the heap
    // is read once it holds still (three readings 50 ms apart, within 5 s).
    let mut last = live();
    let mut still = 0;
    let settle_by = std::time::Instant::now() + Duration::from_secs(5);
    while still < 3 && std::time::Instant::now() < settle_by {
        std::thread::sleep(Duration::from_millis(50));
        let now = live();
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    let started = live() - before;
    let delivered = relay.totals().delivered;
    send(relay.rotating_addr().unwrap(), requests, &mut buf);
    wait(&relay, "every bundle delivered", |t| {
        t.delivered == delivered + requests.len() as u64
    });
    let loaded = live() - before;
    relay.shutdown(Duration::from_secs(1));
    (started, loaded - started)
}

#[test]
fn the_budget_is_what_the_relay_allocates_and_load_adds_nothing() {
    let _engine = engine();
    let regions = (0..REGIONS)
        .map(|i| RegionSpec {
            interval_ms: 10,
            ..RegionSpec::plain(&format!("r{i}"), region_addr(i))
        })
        .collect();
    let sources = (0..16)
        .map(|i| std::net::IpAddr::from([127, 1, 91, i]))
        .collect();
    let mut spec = Spec::local(regions, sources);
    spec.threads = 2;
    spec.arena_slots = 4_096;
    let requests: Vec<Box<[u8]>> = txgen::generate(TxGenConfig::default(), 0, 400)
        .unwrap()
        .0
        .into_iter()
        .map(|b| b.request)
        .collect();
    // Metrics on, then off (no histograms then: the budget says so, and so does the heap).
    for (metrics, requests) in [(true, &requests[..200]), (false, &requests[200..])] {
        spec.metrics = metrics;
        let budget = Budget::new(BudgetInputs::of(&spec));
        let total = budget.total_bytes() as i64;
        let (started, added) = allocated(spec.clone(), requests);
        let off = (started - total) as f64 / total as f64;
        eprintln!(
            "metrics {metrics}: allocated {started} bytes with every pair up, budget {total} \
             ({:+.2}%); {added} more after 200 bundles",
            off * 100.0
        );
        assert!(
            off.abs() <= 0.01,
            "metrics {metrics}: allocated {started} bytes, the budget says {total} ({:+.2}%):\n{budget}",
            off * 100.0
        );
        assert!(
            added <= 64 * 1024,
            "metrics {metrics}: carrying 200 bundles allocated {added} bytes more"
        );
    }
}
