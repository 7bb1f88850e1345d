//! The bench end to end, as every later measurement uses it, through bench-baseline: the
//! scenario of `support::scenario` (really signed bundles over HTTP, gRPC through 64 egress
//! addresses x 8 regions to bench-engine at a 10 ms interval, a 30 s cooldown storm at half of
//! the sources mid-run). Every accepted bundle must arrive exactly once, byte-identical, under
//! its Jito id, and the engine must never see an early send.

mod support;

use bundle_relay_bench::demo::RelayKind;
use support::scenario::{self, BUNDLES};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_delivers_every_bundle_once_byte_identical_with_no_early_sends_through_a_storm() {
    let run = scenario::through_a_storm(RelayKind::Baseline, 7, "127.1.60.0/26").await;
    assert_eq!(
        run.engine_stats.latency.percentiles.count, BUNDLES,
        "delivery latency for every bundle"
    );
    run.shutdown().await;
}
