//! The in-flight cap end to end, alone in its process so its memory reading is its own: every
//! pair of the pool cooling and twice its capacity offered.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bundle_relay::jito::code::RATE_LIMITED;
use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{Engine, EngineConfig, MAINNET_REGIONS};
use bundle_relay_bench::load::{self, Outcome};
use support::relay::{bundles, run_load, spec, wait_pairs_up};

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Every pair cooling for 30 s and twice the pool's capacity offered: the arena (the in-flight
/// cap) fills, the rest is refused with 429 + Retry-After + -32097 at once, the connection stays
/// usable, and memory does not grow with the refused load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_arena_answers_429_and_memory_stays_flat() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 1_000;
    ec.faults = vec!["storm@0ms:fraction=1.0,retry_ms=30000".parse().unwrap()];
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), "127.1.72.0/29", 1_000);
    s.arena_slots = 64;
    // Past the 30 s cooldowns: the pool would send what the arena holds within the max age,
    // so what is refused is refused at the cap (a shorter one refuses it as late).
    s.bundle_max_age_ms = 60_000;
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 64, Duration::from_secs(10)).await;
    let target = relay.rotating_addr().unwrap();

    // Warm-up: fill the arena once so every lazily touched page is touched.
    let first = run_load(vec![target], 400.0, bundles(23, 0, 400)).await;
    let refused = |r: &load::LoadReport| {
        r.outcomes
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Answered(a) if a.status == 429 && a.rpc_error == Some(RATE_LIMITED)))
            .count()
    };
    assert!(
        refused(&first) >= 400 - 64,
        "{:?} {:?}",
        first.summary,
        relay.totals()
    );
    let rss_before = rss_kib();
    let flood = run_load(vec![target], 800.0, bundles(23, 400, 1_600)).await;
    let rss_after = rss_kib();
    assert_eq!(
        refused(&flood),
        1_600,
        "the cap is full: every new bundle is refused: {:?} {:?}",
        flood.summary,
        relay.totals()
    );
    // Generous bound: the test process also holds the engine and the load generator.
    assert!(
        rss_after < rss_before + 16 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB under refused load"
    );

    // The refusal is a well-formed 429 on a connection that stays usable.
    let mut c = TcpStream::connect(target).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = &bundles(23, 2_000, 1)[0].request;
    let mut seen = String::new();
    for _ in 0..2 {
        c.write_all(req).unwrap();
        let mut buf = [0u8; 4096];
        let n = c.read(&mut buf).unwrap();
        seen = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(seen.starts_with("HTTP/1.1 429 "), "{seen}");
        assert!(seen.contains("Retry-After: 1\r\n"), "{seen}");
        assert!(seen.contains(&RATE_LIMITED.to_string()), "{seen}");
    }
    let ping = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n";
    c.write_all(ping).unwrap();
    let mut buf = [0u8; 512];
    let n = c.read(&mut buf).unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200 "), "{seen}");

    let t = relay.totals();
    assert_eq!(t.in_flight, 64, "{t:?}");
    assert!(t.identity_holds(), "{t:?}");
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    assert_eq!(
        end.failed, 64,
        "held bundles are counted failed at shutdown: {end:?}"
    );
    engine.shutdown().await;
}
