//! A bot asking the relay about its bundles, end to end on loopback: bench-load sends signed
//! bundles over HTTP to the relay, bench-engine throttles every third SendBundle ("Network
//! congested", RESOURCE_EXHAUSTED: the region backs off), and the bot then asks getInflightBundleStatuses and
//! getBundleDelivery over HTTP, as a Jito client would, and reads what happened to each.

mod support;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{Engine, EngineConfig, MAINNET_REGIONS};
use serde_json::Value;
use support::relay::{bundles, pinned, run_load, spec, wait_ended, wait_pairs_up};

/// One JSON-RPC call over a fresh connection to `addr`; the parsed answer.
fn rpc(addr: SocketAddr, path: &str, body: &str) -> Value {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    let json = out.split("\r\n\r\n").nth(1).expect("a body");
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_reads_where_each_bundle_went_and_what_the_engine_said() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 10;
    ec.faults = vec!["throttle@0s:every=3".parse().unwrap()];
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
