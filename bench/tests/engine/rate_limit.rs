//! Jito's rule: one accepted bundle per interval per (source IP, region).

use crate::support;

use std::time::Duration;

use bundle_relay_bench::engine::EngineConfig;
use support::engine::*;
use tonic::Code;

fn cfg(interval_ms: u64) -> EngineConfig {
    EngineConfig {
        interval_ms,
        ..EngineConfig::for_tests(&["ny", "tokyo"])
    }
}

#[tokio::test]
async fn second_send_inside_interval_is_resource_exhausted_with_retry_after() {
    let h = start(cfg(2_000)).await;
    let mut c = client(addr_of(&h, "ny"), src(1)).await;
    c.send_bundle(bundle(1)).await.expect("first send accepted");
    let err = c.send_bundle(bundle(2)).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    let retry = retry_ms_of(err.message());
    assert!((1_500..=2_000).contains(&retry), "retry {retry}");
    let s = h.stats();
    assert_eq!((s.accepted, s.early_sends), (1, 1));
    assert_eq!(s.early_sends_by_source.get("127.0.1.1"), Some(&1));
    assert_eq!(s.regions[0].early_sends, 1);
    assert_eq!(s.rejected["early_send"], 1);
}

#[tokio::test]
async fn send_after_interval_is_accepted() {
    let h = start(cfg(150)).await;
    let mut c = client(addr_of(&h, "ny"), src(1)).await;
    c.send_bundle(bundle(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(170)).await;
    c.send_bundle(bundle(2)).await.expect("on time again");
    let s = h.stats();
    assert_eq!((s.accepted, s.early_sends), (2, 0));
}

#[tokio::test]
async fn early_send_does_not_extend_the_window() {
    let h = start(cfg(400)).await;
    let mut c = client(addr_of(&h, "ny"), src(1)).await;
    c.send_bundle(bundle(1)).await.unwrap();
    let t0 = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let err = c.send_bundle(bundle(2)).await.unwrap_err();
    let retry = retry_ms_of(err.message());
    assert!(retry <= 200, "the wait only shrinks: {retry}");
    tokio::time::sleep_until(t0 + Duration::from_millis(410)).await;
    c.send_bundle(bundle(3))
        .await
        .expect("the early send did not move the window");
    assert_eq!(h.stats().early_sends, 1);
}

#[tokio::test]
async fn sources_are_limited_independently_per_region() {
    let h = start(cfg(5_000)).await;
    let ny = addr_of(&h, "ny");
    let tokyo = addr_of(&h, "tokyo");
    // Decision table: (source, region) → accepted on first send, regardless of the others.
    for (source, region) in [(1, ny), (1, tokyo), (2, ny), (2, tokyo)] {
        let mut c = client(region, src(source)).await;
        c.send_bundle(bundle(source as u64 * 10 + region.port() as u64))
            .await
            .unwrap_or_else(|e| panic!("source {source} to {region}: {e}"));
    }
    // Each pair has now used its turn.
    for (source, region) in [(1, ny), (2, tokyo)] {
        let mut c = client(region, src(source)).await;
        let err = c.send_bundle(bundle(99 + source as u64)).await.unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted);
    }
    let s = h.stats();
    assert_eq!((s.accepted, s.early_sends, s.distinct_sources), (4, 2, 2));
    assert_eq!(
        s.regions
            .iter()
            .map(|r| (r.accepted, r.early_sends))
            .collect::<Vec<_>>(),
        [(2, 1), (2, 1)]
    );
}

#[tokio::test]
async fn one_ms_interval_admits_a_send_every_few_ms() {
    let h = start(cfg(1)).await;
    let mut c = client(addr_of(&h, "ny"), src(1)).await;
    for n in 0..5 {
        tokio::time::sleep(Duration::from_millis(3)).await;
        c.send_bundle(bundle(n)).await.expect("1 ms interval");
    }
    assert_eq!(h.stats().accepted, 5);
}
