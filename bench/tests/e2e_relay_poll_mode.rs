//! `[reactor] mode = "poll"` end to end: reactor threads that never sleep in the kernel still
//! deliver every bundle through bench-engine, hand bundles between threads (a polling thread is
//! never marked asleep, so nobody has to wake it), and keep spinning while idle, where a
//! sleeping relay's loop stands still.

mod support;

use std::time::Duration;

use bundle_relay::config::{Reactor, ReactorMode};
use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{EngineConfig, MAINNET_REGIONS};
use bundle_relay_bench::load::{self, LoadConfig};
use support::relay::{bundles, spec, wait_ended, wait_pairs_up};

/// Loop iterations each thread runs over `idle` with nothing to do.
async fn idle_iterations(relay: &Relay, idle: Duration) -> Vec<u64> {
    let before = relay.thread_iterations();
    tokio::time::sleep(idle).await;
    let after = relay.thread_iterations();
    after.iter().zip(&before).map(|(a, b)| a - b).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_threads_deliver_every_bundle_hand_off_between_threads_and_spin_when_idle() {
    // 8 sources x 8 regions at 500 ms: 128 bundles a second in all.
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 500;
    let engine = support::engine::start(ec).await;
    let mut s = spec(&engine.region_addrs(), "127.1.83.0/29", 500);
    s.reactor = Reactor {
        mode: ReactorMode::Poll,
        napi_busy_poll_us: 0,
    };
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 64, Duration::from_secs(10)).await;

    // A sleeping thread wakes for its timers, a few dozen times in 300 ms; a polling one runs
    // its loop without pause.
    let spins = idle_iterations(&relay, Duration::from_millis(300)).await;
    assert!(
        spins.iter().all(|&n| n > 10_000),
        "idle loop iterations per thread in 300 ms: {spins:?}"
    );

    // One connection (so one thread reads every bundle and hands many to the other) at about
    // 80% of the pool for 2 s.
    let cfg = LoadConfig {
        targets: vec![relay.rotating_addr().unwrap()],
        rate_per_s: 100.0,
        duration: None,
        requests: Some(200),
        connections: 1,
        timeout: Duration::from_secs(5),
        ..LoadConfig::default()
    };
    let sent = bundles(36, 0, 200);
    let report = tokio::task::spawn_blocking(move || load::run(&cfg, &sent))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.summary.result_ids_matching, 200);
    let end = wait_ended(&relay, Duration::from_secs(10)).await;
    assert!(end.identity_holds(), "{end:?}");
    assert_eq!((end.admitted, end.delivered), (200, 200), "{end:?}");
    assert!(
        end.handoffs_out > 0 && end.handoffs_in == end.handoffs_out,
        "{end:?}"
    );
    let es = engine.stats();
    assert_eq!(es.accepted, 200);
    assert_eq!(es.early_sends, 0);
    relay.shutdown(Duration::from_millis(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleeping_threads_stand_still_when_idle() {
    let ec = EngineConfig::for_tests(&MAINNET_REGIONS[..1]);
    let engine = support::engine::start(ec).await;
    let mut s = spec(&engine.region_addrs(), "127.1.84.0/30", 500);
    s.threads = 1;
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 4, Duration::from_secs(10)).await;
    let spins = idle_iterations(&relay, Duration::from_millis(300)).await;
    assert!(
        spins[0] < 1_000,
        "a sleeping thread ran {} idle iterations in 300 ms",
        spins[0]
    );
    relay.shutdown(Duration::from_millis(200));
}
