//! A reload applied to a relay carrying bundles: a config that drops a region and half the
//! sources and slows the pace reaches every thread; the dropped sources send nothing more and
//! their connections close, the dropped region's pinned port says so by name, the new pace
//! holds at the engine (which judges by it), and listing the sources again brings their pairs
//! back. Every bundle is accounted for throughout.

mod support;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use bundle_relay::config::{Resolve, Shared};
use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{Engine, EngineConfig};
use bundle_relay_bench::load::Outcome;
use support::relay::{bundles, pinned, run_load, spec, wait_for, wait_pairs_up};

/// The relay's config file: `regions`, the first `sources` addresses of 127.1.81.0/30.
fn config(regions: &[&str], sources: u8, interval_ms: u64) -> String {
    let mut s = String::from("threads = 2\n[intake]\nrotating = \"127.0.0.1:0\"\n");
    for (i, r) in regions.iter().enumerate() {
        s += &format!(
            "[[region]]\nname = \"{r}\"\nhost = \"127.0.0.1\"\nport = {}\ntls = false\n\
             interval_ms = {interval_ms}\n",
            10_000 + i
        );
    }
    s + &format!(
        "[egress]\naddresses = [\"127.1.81.0-127.1.81.{}\"]\n",
        sources - 1
    )
}

async fn settle(relay: &Relay, generation: u64) {
    for _ in 0..500 {
        if relay.config_generations().iter().all(|&g| g == generation) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "generation {generation} never reached every thread: {:?}",
        relay.config_generations()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_drops_a_region_and_sources_slows_the_pace_and_loses_nothing() {
    let mut ec = EngineConfig::for_tests(&["ny", "tokyo"]);
    // The engine judges early sends by the pace the reload sets, not the one the relay starts at.
    ec.interval_ms = 250;
    ec.record = true;
    let engine = Engine::start(ec).await.unwrap();
    let dir = std::env::temp_dir().join(format!("relay-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("relay.toml");
    std::fs::write(&path, config(&["ny", "tokyo"], 4, 50)).unwrap();
    let live = Arc::new(Shared::from_file(&path, Resolve::Now).unwrap());
    let mut s = spec(&engine.region_addrs(), "127.1.81.0/30", 50);
    s.go_live(live.clone());
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 8, Duration::from_secs(10)).await;

    std::fs::write(&path, config(&["ny"], 2, 250)).unwrap();
    assert_eq!(live.reload().unwrap(), 2);
    settle(&relay, 2).await;
    // Only ny's pairs of the two sources still listed stay up.
    wait_pairs_up(&relay, 2, Duration::from_secs(5)).await;

    // Tokyo's pinned port names the region that left the config.
    let mut c = TcpStream::connect(pinned(&relay, "tokyo")).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(&bundles(81, 1_000, 1)[0].request).unwrap();
    let mut buf = [0u8; 4096];
    let n = c.read(&mut buf).unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        answer.contains("region tokyo is no longer in the relay's config"),
        "{answer}"
    );

    // Twice what the old pace's pairs would send in the time, at the new pace's capacity
    // (2 pairs at 250 ms: 8/s): every one delivered, none early by the new pace.
    let before = engine.recorded().len();
    let report = run_load(
        vec![relay.rotating_addr().unwrap()],
        8.0,
        bundles(81, 0, 12),
    )
    .await;
    let answered = report
        .outcomes
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Answered(a) if a.status == 200))
        .count();
    assert_eq!(answered, 12, "{:?}", report.summary);
    // Handed between threads, a bundle counts as admitted where it is sent from.
    let t = wait_for(&relay, "12 delivered", Duration::from_secs(10), |t| {
        t.delivered == 12 && t.in_flight == 0
    })
    .await;
    assert!(t.identity_holds(), "{t:?}");
    let stats = engine.stats();
    assert_eq!(
        stats.early_sends, 0,
        "the new pace holds: {:?}",
        stats.early_sends_by_source
    );
    let listed: [IpAddr; 2] = ["127.1.81.0".parse().unwrap(), "127.1.81.1".parse().unwrap()];
    let recorded = engine.recorded();
    let after = &recorded[before..];
    assert_eq!(
        after.len(),
        12,
        "every bundle since the reload reached the engine"
    );
    for b in after {
        assert_eq!(
            b.region, "ny",
            "a bundle went to a region that left the config"
        );
        assert!(
            listed.contains(&b.source),
            "{} sent after it left the config",
            b.source
        );
    }

    // Listed again: the dropped sources' and region's pairs connect again.
    std::fs::write(&path, config(&["ny", "tokyo"], 4, 250)).unwrap();
    assert_eq!(live.reload().unwrap(), 3);
    settle(&relay, 3).await;
    wait_pairs_up(&relay, 8, Duration::from_secs(10)).await;

    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    assert_eq!(end.admitted, end.delivered, "{end:?}");
    engine.shutdown().await;
    std::fs::remove_dir_all(dir).ok();
}
