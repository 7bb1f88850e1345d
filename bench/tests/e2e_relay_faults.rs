//! bundle-relay against a misbehaving engine, end to end on loopback: many pairs paced at the
//! engine with no early send; a region killed and restarted mid-run (the in-flight cap has its
//! own file, e2e_relay_cap.rs); a bot reading, with getInflightBundleStatuses and
//! getBundleDelivery over HTTP as a Jito client would, what became of bundles the engine
//! throttled. Each test is bounded in count and time.

mod support;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{Engine, EngineConfig, MAINNET_REGIONS};
use serde_json::Value;
use support::relay::{bundles, pinned, run_load, spec, wait_ended, wait_pairs_up};

/// 512 addresses × 8 regions at a 1 s interval, one region offered more than its 512 pairs can
/// carry: bundles wait for pairs, pairs are reused as soon as the engine allows, and the engine
/// never sees a pair send early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_pairs_over_capacity_send_nothing_early() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 1_000;
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), "127.1.64.0/23", 1_000);
    s.sources.truncate(512);
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 4096, Duration::from_secs(30)).await;

    // 1,200 bundles at 600/s to one region: 512 go at once, the rest as pairs come free.
    let target = pinned(&relay, MAINNET_REGIONS[0]);
    let report = run_load(vec![target], 600.0, bundles(21, 0, 1_200)).await;
    assert_eq!(report.summary.counts.sent, 1_200);
    let end = wait_ended(&relay, Duration::from_secs(10)).await;
    assert!(end.identity_holds(), "{end:?}");
    let es = engine.stats();
    assert_eq!(es.early_sends, 0, "{:?}", es.early_sends_by_source);
    assert_eq!(es.accepted, end.delivered, "{end:?}");
    // A pair is reused once per second: the first 512 at once, then as pairs come free.
    assert!(end.delivered >= 1_024, "{end:?}");
    assert_eq!(end.delivered + end.expired, 1_200, "{end:?}");
    relay.shutdown(Duration::from_secs(1));
    engine.shutdown().await;
}

/// A region whose engine closes every connection for 2 s: its pairs leave rotation and come
/// back; the other regions deliver everything meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_region_leaves_rotation_and_returns_while_others_deliver() {
    let killed = MAINNET_REGIONS[1];
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 10;
    ec.faults = vec![format!("close@2s+4s:region={killed}").parse().unwrap()];
    let engine = Engine::start(ec).await.unwrap();
    let relay = Relay::start(spec(&engine.region_addrs(), "127.1.70.0/28", 10)).unwrap();
    wait_pairs_up(&relay, 128, Duration::from_secs(10)).await;

    // 4 s of load on the seven other regions, across the outage.
    let others: Vec<SocketAddr> = MAINNET_REGIONS
        .iter()
        .filter(|r| **r != killed)
        .map(|r| pinned(&relay, r))
        .collect();
    let during = tokio::spawn(run_load(others, 300.0, bundles(22, 0, 1_200)));
    // Mid-outage (the engine's clock: the outage is 2 s to 6 s after it started), the
    // killed region's pairs are out of rotation.
    while engine.stats().uptime_ms < 3_000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mid = relay.totals();
    let at = engine.stats().uptime_ms;
    assert!(
        at < 6_000,
        "the run was too slow to look inside the outage ({at} ms)"
    );
    assert!(
        mid.pairs_up <= 112,
        "killed region still in rotation: {mid:?}"
    );
    let report = during.await.unwrap();
    assert_eq!(report.summary.counts.sent, 1_200);
    assert_eq!(report.summary.result_ids_matching, 1_200);
    // The region is back: every pair reconnected, and it delivers again.
    wait_pairs_up(&relay, 128, Duration::from_secs(10)).await;
    let after = run_load(vec![pinned(&relay, killed)], 100.0, bundles(22, 1_200, 50)).await;
    assert_eq!(after.summary.result_ids_matching, 50);
    let end = wait_ended(&relay, Duration::from_secs(10)).await;
    assert!(end.identity_holds(), "{end:?}");
    assert_eq!((end.admitted, end.delivered), (1_250, 1_250), "{end:?}");
    assert!(end.disconnects >= 16, "{end:?}");
    let es = engine.stats();
    assert_eq!(es.early_sends, 0);
    assert_eq!(es.accepted, 1_250);
    relay.shutdown(Duration::from_secs(1));
    engine.shutdown().await;
}

/// getTipAccounts is answered from what an engine said: the engine's list replaces the
/// built-in one once a pair is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tip_accounts_come_from_the_engine() {
    let engine = Engine::start(EngineConfig::for_tests(&MAINNET_REGIONS))
        .await
        .unwrap();
    let relay = Relay::start(spec(&engine.region_addrs(), "127.1.74.0/30", 1_000)).unwrap();
    wait_pairs_up(&relay, 32, Duration::from_secs(10)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while engine.stats().other_calls == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        engine.stats().other_calls >= 1,
        "the relay asked an engine for the tip accounts"
    );
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params":[]}"#;
    let req = format!(
        "POST /api/v1/bundles HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut c = std::net::TcpStream::connect(relay.rotating_addr().unwrap()).unwrap();
    c.write_all(req.as_bytes()).unwrap();
    let mut buf = [0u8; 2048];
    let n = c.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    for acct in bundle_relay_bench::engine::TIP_ACCOUNTS {
        assert!(text.contains(acct), "{text}");
    }
    relay.shutdown(Duration::from_millis(200));
    engine.shutdown().await;
}

/// Refused streams, global throttling and a graceful GOAWAY on every connection mid-run: each
/// is retried or waited out, so every bundle still arrives exactly once and nothing is early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_streams_throttling_and_goaway_lose_nothing() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 10;
    ec.faults = vec![
        "rst@0ms:every=5,code=7".parse().unwrap(),
        "throttle@0ms:every=11".parse().unwrap(),
        "goaway@1500ms".parse().unwrap(),
    ];
    let engine = Engine::start(ec).await.unwrap();
    let relay = Relay::start(spec(&engine.region_addrs(), "127.1.76.0/28", 10)).unwrap();
    wait_pairs_up(&relay, 128, Duration::from_secs(10)).await;
    let mut targets = vec![relay.rotating_addr().unwrap()];
    targets.extend(relay.pinned_addrs().iter().map(|(_, a)| *a));
    let report = run_load(targets, 300.0, bundles(24, 0, 900)).await;
    assert_eq!(report.summary.result_ids_matching, 900);
    let end = wait_ended(&relay, Duration::from_secs(15)).await;
    assert!(end.identity_holds(), "{end:?}");
    assert_eq!((end.admitted, end.delivered), (900, 900), "{end:?}");
    let es = engine.stats();
    assert!(
        es.faults["rst"] > 0 && es.faults["throttle"] > 0 && es.faults["goaway"] > 0,
        "{:?}",
        es.faults
    );
    assert!(end.retries >= es.faults["rst"], "{end:?} {:?}", es.faults);
    assert_eq!(es.accepted, 900);
    assert_eq!(es.duplicates, 0);
    assert_eq!(es.early_sends, 0);
    relay.shutdown(Duration::from_millis(200));
    engine.shutdown().await;
}

/// Six sources on four threads: the split leaves every thread sources of its own, so with
/// handoffs off the bundles each thread accepts (connections spread over threads by the
/// kernel) all leave through its own pairs and none waits for pairs that do not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_accepted_on_every_thread_are_delivered_when_sources_do_not_divide_evenly() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 10;
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), "127.1.78.0/29", 10);
    s.sources.truncate(6);
    s.threads = 4;
    s.bundle_max_age_ms = 1_000;
    // Each thread on its own pairs: another thread's pool may not stand in for missing ones.
    s.handoffs = false;
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 48, Duration::from_secs(10)).await;
    // Nine listeners, the load's connections spread over them.
    let mut targets = vec![relay.rotating_addr().unwrap()];
    targets.extend(relay.pinned_addrs().iter().map(|(_, a)| *a));
    let report = run_load(targets, 200.0, bundles(26, 0, 400)).await;
    assert_eq!(report.summary.result_ids_matching, 400);
    let end = wait_ended(&relay, Duration::from_secs(10)).await;
    assert!(end.identity_holds(), "{end:?}");
    assert_eq!((end.delivered, end.expired), (400, 0), "{end:?}");
    // The kernel spreads connections over the threads' listeners by hash, so a thread may get
    // none; every thread that got bundles sent them itself.
    let threads = relay.thread_totals();
    for (t, tt) in threads.iter().enumerate() {
        assert_eq!(
            tt.delivered, tt.admitted,
            "thread {t} delivered its own: {tt:?}"
        );
        assert_eq!(tt.handoffs_out, 0, "thread {t}: {tt:?}");
    }
    let busy = threads.iter().filter(|t| t.admitted > 0).count();
    assert!(busy >= 2, "bundles came in on {busy} threads: {threads:?}");
    assert_eq!(engine.stats().early_sends, 0);
    relay.shutdown(Duration::from_millis(200));
    engine.shutdown().await;
}

/// One JSON-RPC call over a fresh connection to `addr`; the parsed answer.
fn rpc(addr: SocketAddr, path: &str, body: &str) -> Value {
    support::relay::rpc_call(addr, path, body).2
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_reads_where_each_bundle_went_and_what_the_engine_said() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 10;
    ec.faults = vec!["throttle@0s:every=3".parse().unwrap()];
    // Nothing lands while the test runs: the engine took the bundles, and says only Pending.
    ec.land_ms = 600_000;
    let engine = Engine::start(ec).await.unwrap();
    let egress = "127.1.77.0/29";
    let relay = Relay::start(spec(&engine.region_addrs(), egress, 10)).unwrap();
    wait_pairs_up(&relay, 64, Duration::from_secs(10)).await;

    let region = MAINNET_REGIONS[2];
    let sent = bundles(31, 0, 30);
    let ids: Vec<String> = sent
        .iter()
        .map(|b| String::from_utf8(b.bundle_id.to_vec()).unwrap())
        .collect();
    let report = run_load(vec![pinned(&relay, region)], 60.0, sent).await;
    assert_eq!(report.summary.result_ids_matching, 30);
    let end = wait_ended(&relay, Duration::from_secs(10)).await;
    assert_eq!(end.delivered, 30, "{end:?}");
    assert!(
        end.throttles > 0,
        "the engine throttled some sends: {end:?}"
    );
    assert_eq!(
        end.cooldowns, 0,
        "a global throttle cools no address: {end:?}"
    );

    let rotating = relay.rotating_addr().unwrap();
    let five: Vec<String> = ids[..5].iter().map(|i| format!("\"{i}\"")).collect();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"getInflightBundleStatuses","params":[[{}]]}}"#,
        five.join(",")
    );
    let answer = rpc(rotating, "/api/v1/getInflightBundleStatuses", &body);
    let value = answer["result"]["value"].as_array().expect("Jito's shape");
    assert_eq!(value.len(), 5);
    for (v, id) in value.iter().zip(&ids) {
        assert_eq!(v["bundle_id"], id.as_str());
        assert_eq!(
            v["status"], "Pending",
            "taken by the engine, not landed: {v}"
        );
    }

    let pool: HashSet<IpAddr> = bundle_relay_bench::baseline::config::parse_egress(egress)
        .unwrap()
        .into_iter()
        .collect();
    let mut throttled = 0;
    for id in &ids {
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":2,"method":"getBundleDelivery","params":["{id}"]}}"#);
        let d = &rpc(rotating, "/api/v1/bundles", &body)["result"];
        assert_eq!(d["status"], "delivered", "{d}");
        // bench-engine answers SendBundle with the bundle's own id as its uuid.
        assert_eq!(d["engine"], id.as_str(), "{d}");
        let attempts = d["attempts"].as_array().unwrap();
        let total = d["attempts_total"].as_u64().unwrap() as usize;
        assert_eq!(
            attempts.len(),
            total.min(4),
            "the first three and the latest: {d}"
        );
        let (last, earlier) = attempts.split_last().expect("sent at least once");
        assert_eq!(last["verdict"], "accepted", "{d}");
        for a in attempts {
            assert_eq!(a["region"], region, "{d}");
            let ip: IpAddr = a["egress"].as_str().unwrap().parse().unwrap();
            assert!(pool.contains(&ip), "left from {ip}, not the pool: {d}");
        }
        for a in earlier {
            // Everyone throttled: the region backed off, from 100 ms.
            assert_eq!(a["verdict"], "region_throttled", "{d}");
            assert_eq!(a["grpc_status"], 8, "{d}");
            assert!(a["retry_after_ms"].as_u64().unwrap() >= 100, "{d}");
            throttled += 1;
        }
    }
    assert!(throttled > 0, "some bundle shows its throttled send");
    let es = engine.stats();
    assert_eq!(es.early_sends, 0);
    relay.shutdown(Duration::from_secs(1));
    engine.shutdown().await;
}
