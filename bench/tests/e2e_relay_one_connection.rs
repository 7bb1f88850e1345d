//! One bot connection reaches the whole egress pool: its bundles, read by one reactor thread,
//! leave through every thread's pairs. Through bench-engine on loopback, at about 90% of the
//! whole pool's capacity over a single keep-alive connection, far beyond what the one thread's
//! own share of the pool could carry: every bundle is delivered once, nothing is early, and
//! every thread's pairs carry bundles.

mod support;

use std::time::Duration;

use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{EngineConfig, MAINNET_REGIONS};
use bundle_relay_bench::load::{self, LoadConfig};
use support::relay::{bundles, spec, wait_ended, wait_pairs_up};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_uses_every_threads_pairs_and_delivers_every_bundle() {
    // 8 sources x 8 regions at 500 ms: 128 bundles a second in all, 32 for each of 4 threads.
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 500;
    let engine = support::engine::start(ec).await;
    let mut s = spec(&engine.region_addrs(), "127.1.82.0/29", 500);
    s.threads = 4;
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 64, Duration::from_secs(10)).await;

    // One connection at 112/s (about 90% of the pool) for 3 s.
    let cfg = LoadConfig {
        targets: vec![relay.rotating_addr().unwrap()],
        rate_per_s: 112.0,
        duration: None,
        requests: Some(336),
        connections: 1,
        timeout: Duration::from_secs(5),
        ..LoadConfig::default()
    };
    let sent = bundles(34, 0, 336);
    let report = tokio::task::spawn_blocking(move || load::run(&cfg, &sent))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.summary.result_ids_matching, 336);
    let end = wait_ended(&relay, Duration::from_secs(10)).await;
    assert!(end.identity_holds(), "{end:?}");
    assert_eq!((end.admitted, end.delivered), (336, 336), "{end:?}");
    assert!(
        end.handoffs_out > 0 && end.handoffs_in == end.handoffs_out,
        "{end:?}"
    );
    let per_thread = relay.thread_totals();
    for (t, tt) in per_thread.iter().enumerate() {
        assert!(
            tt.delivered > 0,
            "thread {t}'s pairs carried nothing: {per_thread:?}"
        );
        assert!(tt.identity_holds(), "thread {t}: {tt:?}");
    }
    let es = engine.stats();
    assert_eq!(es.accepted, 336);
    assert_eq!(es.early_sends, 0);
    assert_eq!(es.duplicates, 0);
    relay.shutdown(Duration::from_millis(200));
    engine.shutdown().await;
}
