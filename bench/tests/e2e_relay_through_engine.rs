//! bundle-relay end to end on loopback, through the scenario of `support::scenario`: bench-load
//! sends really signed bundles over HTTP to the io_uring relay, which sends them as gRPC through
//! 64 egress addresses x 8 regions to bench-engine, which enforces Jito's per-(source IP,
//! region) rule at a 10 ms interval and throws a 30 s cooldown storm at half of the sources
//! mid-run. Every bundle must arrive exactly once, byte-identical, under its Jito id; the
//! engine must never see an early send; every admitted bundle is accounted for.

mod support;

use bundle_relay_bench::demo::RelayKind;
use support::scenario;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_delivers_every_bundle_once_byte_identical_with_no_early_sends_through_a_storm() {
    let run = scenario::through_a_storm(RelayKind::BundleRelay, 8, "127.1.61.0/26").await;
    let end = run.shutdown().await;
    assert!(end.identity_holds(), "{end:?}");
}
