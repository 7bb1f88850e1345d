//! The baseline relay end to end on loopback: real HTTP in, real signed transactions, real
//! tonic gRPC out to a rate-limiting engine defined in `support::baseline`.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use bundle_relay::jito::TIP_ACCOUNTS;
use bundle_relay::jito::code::{
    INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RATE_LIMITED,
};
use bundle_relay_bench::baseline::config::parse_egress;
use bundle_relay_bench::baseline::{Baseline, BaselineConfig, BaselineHandle};
use sha2::{Digest, Sha256};
use support::baseline::*;
use tonic::Code;

fn config(engines: &[SocketAddr], egress: &str, interval_ms: u64) -> BaselineConfig {
    BaselineConfig {
        rotating_addr: "127.0.0.1:0".parse().unwrap(),
        pinned_base: "127.0.0.1:0".parse().unwrap(),
        admin_addr: Some("127.0.0.1:0".parse().unwrap()),
        regions: engines
            .iter()
            .enumerate()
            .map(|(i, a)| (format!("region{i}"), *a))
            .collect(),
        egress: parse_egress(egress).unwrap(),
        interval_ms,
        max_age_ms: 10_000,
        ..BaselineConfig::default()
    }
}

fn rules(interval_ms: u64) -> EngineRules {
    EngineRules {
        interval: Duration::from_millis(interval_ms),
        slack: Duration::from_millis(3),
        crossing: Duration::from_millis(75),
        backoff_every: 0,
        backoff: Duration::from_millis(150),
        reject_all: None,
    }
}

fn expected_id(txs: &[Vec<u8>]) -> String {
    let joined: Vec<String> = txs.iter().map(|t| first_signature(t)).collect();
    Sha256::digest(joined.join(",").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn settled(handle: &BaselineHandle) -> bool {
    eventually(Duration::from_secs(20), || {
        let s = handle.totals();
        s.in_flight == 0 && s.identity_holds()
    })
    .await
}

/// Replays one region's limiter journal: no pair is handed out before its interval since its
/// previous hand-out, nor inside a cooldown already applied; every cooldown lasts whole
/// milliseconds. Returns the cooldowns' lengths in ms, in journal order.
fn journal_violations(handle: &BaselineHandle, region: usize, interval_ms: u64) -> Vec<u64> {
    use bundle_relay_bench::baseline::limiter::Event;
    use std::collections::HashMap;
    let mut next: HashMap<usize, u64> = HashMap::new();
    let mut cooldowns = Vec::new();
    for event in handle.journal(region) {
        match event {
            Event::Acquired { pair, now_ns } => {
                let allowed = next.get(&pair).copied().unwrap_or(0);
                assert!(
                    now_ns >= allowed,
                    "region {region} pair {pair} sent {} ns early",
                    allowed - now_ns
                );
                next.insert(pair, now_ns + interval_ms * 1_000_000);
            }
            Event::Cooldown {
                pair,
                now_ns,
                until_ns,
            } => {
                assert_eq!(
                    (until_ns - now_ns) % 1_000_000,
                    0,
                    "cooldown is not the engine's whole ms"
                );
                assert!(until_ns > now_ns);
                let e = next.entry(pair).or_default();
                *e = (*e).max(until_ns);
                cooldowns.push((until_ns - now_ns) / 1_000_000);
            }
            Event::Settled { pair, until_ns, .. } => {
                let e = next.entry(pair).or_default();
                *e = (*e).max(until_ns);
            }
        }
    }
    cooldowns
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admitted_bundle_is_delivered_once_byte_identical_with_no_early_sends() {
    const REGIONS: usize = 4;
    const BUNDLES: u64 = 400;
    const CONNECTIONS: u64 = 8;
    let mut engine_rules = rules(10);
    // Every 4th request of a pair is told to back off for 150 ms: the relay must cool exactly
    // that pair and move the bundle to another.
    engine_rules.backoff_every = 4;
    let (engines, log) = start_engine(REGIONS, engine_rules).await;
    let mut cfg = config(&engines, "127.1.0.0/28", 10);
    cfg.journal = true;
    let handle = Baseline::start(cfg).await.unwrap();
    let rotating = handle.rotating_addr();
    let pinned: Vec<SocketAddr> = handle.pinned_addrs().into_iter().map(|(_, a)| a).collect();

    // Half the bundles through the rotating port, the rest spread over the pinned ports.
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        let pinned = pinned.clone();
        tasks.push(tokio::spawn(async move {
            let mut sent = Vec::new();
            let mut clients: Vec<Http> = Vec::new();
            clients.push(Http::connect(rotating).await);
            for &p in &pinned {
                clients.push(Http::connect(p).await);
            }
            for b in (c..BUNDLES).step_by(CONNECTIONS as usize) {
                let txs = bundle(b, (b % 5 + 1) as usize);
                let port = if b % 2 == 0 {
                    0
                } else {
                    1 + (b as usize / 2) % REGIONS
                };
                let response = clients[port]
                    .post("/api/v1/bundles", &send_bundle_body(b, &txs))
                    .await;
                assert_eq!(
                    response.status,
                    200,
                    "bundle {b}: {:?}",
                    String::from_utf8_lossy(&response.body)
                );
                let json = response.json();
                assert_eq!(json["id"], b);
                assert_eq!(json["result"], expected_id(&txs), "bundle {b} id");
                sent.push((port, txs));
            }
            sent
        }));
    }
    let mut sent = Vec::new();
    for t in tasks {
        sent.extend(t.await.unwrap());
    }
    assert!(
        settled(&handle).await,
        "bundles never settled: {:?}",
        handle.totals()
    );
    let stats = handle.totals();
    assert_eq!(stats.admitted, BUNDLES);
    assert_eq!(stats.delivered, BUNDLES, "{stats:?}");
    assert!(stats.identity_holds());

    {
        let log_guard = log.lock().unwrap();
        let log = &*log_guard;
        eprintln!(
            "delivered {BUNDLES}, backoffs {}, crossed {}, ignored {}, early {}, retries {}, min pair gap {:?}",
            log.backoffs,
            log.crossed_backoff,
            log.ignored_backoff,
            log.early,
            stats.retries,
            log.min_gap
        );
        assert_eq!(log.duplicates, 0, "a bundle was delivered twice");
        assert_eq!(log.early, 0, "the engine saw a pair send early");
        assert_eq!(
            log.ignored_backoff, 0,
            "a pair sent inside a cooldown it had been told about"
        );
        let mut journal_cooldowns = 0;
        let mut full_backoffs = 0;
        for r in 0..REGIONS {
            // Each cooldown lasts exactly what the engine asked: the rules' 150 ms for a
            // scheduled back-off, the rest of it for a request that crossed one.
            let mut cooled = journal_violations(&handle, r, 10);
            let mut asked = log.asked_ms.get(&r).cloned().unwrap_or_default();
            cooled.sort_unstable();
            asked.sort_unstable();
            assert_eq!(
                cooled, asked,
                "region {r}: cooldown lengths (ms) differ from the engine's Retry-After"
            );
            journal_cooldowns += cooled.len() as u64;
            full_backoffs += cooled.iter().filter(|&&ms| ms == 150).count() as u64;
        }
        assert!(
            full_backoffs >= log.backoffs,
            "{} of {} scheduled back-offs were cooled for their 150 ms",
            full_backoffs,
            log.backoffs
        );
        assert_eq!(
            log.headers_set, 0,
            "Jito's clients leave the bundle header empty"
        );
        assert!(log.backoffs > 0, "the engine never asked for a back-off");
        let exhausted = log.backoffs + log.crossed_backoff + log.ignored_backoff + log.early;
        assert_eq!(
            stats.cooldowns, exhausted,
            "one cooldown per RESOURCE_EXHAUSTED"
        );
        assert_eq!(journal_cooldowns, exhausted);
        assert!(stats.retries >= stats.cooldowns);
        assert_eq!(log.delivered.len() as u64, BUNDLES);
        for (port, txs) in &sent {
            let (region, packets) = &log.delivered[&first_signature(&txs[0])];
            if *port > 0 {
                assert_eq!(
                    *region,
                    port - 1,
                    "a pinned bundle left through another region"
                );
            }
            assert_eq!(packets.len(), txs.len());
            for ((data, size), tx) in packets.iter().zip(txs) {
                assert_eq!(
                    data, tx,
                    "packet bytes differ from the submitted transaction"
                );
                assert_eq!(*size, tx.len() as u64);
            }
        }
        assert_eq!(log.sources.len(), 16, "every egress address sends");
        for r in 0..REGIONS {
            assert!(
                log.per_region.get(&r).copied().unwrap_or(0) > 0,
                "region {r} never used"
            );
        }
    }
    let final_stats = handle.shutdown().await.totals;
    assert!(final_stats.identity_holds());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_cap_answers_429_with_retry_after_and_32097_then_recovers() {
    let (engines, _log) = start_engine(1, rules(60_000)).await;
    let mut cfg = config(&engines, "127.1.1.1", 60_000);
    cfg.max_in_flight = 3;
    cfg.max_age_ms = 1000;
    let handle = Baseline::start(cfg).await.unwrap();
    let mut http = Http::connect(handle.rotating_addr()).await;

    // The only pair sends once, then waits a minute: later bundles stay in flight.
    let first = http
        .post("/api/v1/bundles", &send_bundle_body(0, &bundle(1000, 1)))
        .await;
    assert_eq!(first.status, 200);
    assert!(eventually(Duration::from_secs(10), || handle.totals().delivered == 1).await);
    for b in 1..=3 {
        let r = http
            .post(
                "/api/v1/bundles",
                &send_bundle_body(b, &bundle(1000 + b, 1)),
            )
            .await;
        assert_eq!(r.status, 200, "bundle {b} is within the cap");
    }
    let refused = http
        .post("/api/v1/bundles", &send_bundle_body(4, &bundle(1004, 1)))
        .await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), Some("1"));
    let json = refused.json();
    assert_eq!(json["error"]["code"], RATE_LIMITED);
    assert_eq!(json["id"], 4);
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in-flight")
    );
    let stats = handle.totals();
    assert_eq!(
        (stats.admitted, stats.in_flight, stats.refused_cap),
        (4, 3, 1)
    );

    // The waiting bundles expire at their max age and free the cap.
    assert!(eventually(Duration::from_secs(10), || handle.totals().expired == 3).await);
    let again = http
        .post("/api/v1/bundles", &send_bundle_body(5, &bundle(1005, 1)))
        .await;
    assert_eq!(again.status, 200);
    let stats = handle.shutdown().await.totals;
    assert!(stats.identity_holds(), "{stats:?}");
}

async fn rpc_error(http: &mut Http, path: &str, body: &str) -> (i32, String, serde_json::Value) {
    let r = http.post(path, body).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let json = r.json();
    let code = json["error"]["code"]
        .as_i64()
        .and_then(|c| i32::try_from(c).ok())
        .unwrap_or_else(|| panic!("no error for {body}: {json}"));
    (
        code,
        json["error"]["message"].as_str().unwrap().to_owned(),
        json["id"].clone(),
    )
}

fn send_raw(txs: &[String], options: serde_json::Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": "q", "method": "sendBundle", "params": [txs, options]}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_rpc_answers_and_errors_name_the_problem() {
    let (engines, _log) = start_engine(2, rules(10)).await;
    let handle = Baseline::start(config(&engines, "127.1.2.0/30", 10))
        .await
        .unwrap();
    let mut http = Http::connect(handle.rotating_addr()).await;

    let ping = http.get("/ping").await;
    assert_eq!((ping.status, ping.body.as_slice()), (200, b"ok".as_slice()));

    for path in ["/api/v1/bundles", "/api/v1/getTipAccounts"] {
        let r = http
            .post(
                path,
                r#"{"jsonrpc":"2.0","id":"abc","method":"getTipAccounts","params":[]}"#,
            )
            .await;
        let json = r.json();
        assert_eq!(json["id"], "abc");
        assert_eq!(json["result"].as_array().unwrap().len(), 8);
        assert_eq!(json["result"][0], TIP_ACCOUNTS[0]);
    }

    let (code, msg, id) = rpc_error(&mut http, "/api/v1/bundles", "{").await;
    assert_eq!((code, id), (PARSE_ERROR, serde_json::Value::Null), "{msg}");
    let (code, _, id) = rpc_error(
        &mut http,
        "/api/v1/bundles",
        r#"{"id":7,"method":"sendBundle","params":[[]]}"#,
    )
    .await;
    assert_eq!((code, id), (INVALID_REQUEST, serde_json::json!(7)));
    let (code, msg, _) = rpc_error(
        &mut http,
        "/api/v1/bundles",
        r#"{"jsonrpc":"2.0","id":1,"method":"sendBundel"}"#,
    )
    .await;
    assert_eq!(code, METHOD_NOT_FOUND);
    assert!(msg.contains("sendBundel"), "{msg}");

    let good: Vec<String> = bundle(2000, 6)
        .iter()
        .map(|t| bs58::encode(t).into_string())
        .collect();
    let (code, msg, id) = rpc_error(
        &mut http,
        "/api/v1/bundles",
        &send_raw(&good, serde_json::json!({})),
    )
    .await;
    assert_eq!((code, id), (INVALID_PARAMS, serde_json::json!("q")));
    assert!(msg.contains("got 6"), "{msg}");
    let (code, msg, _) = rpc_error(
        &mut http,
        "/api/v1/bundles",
        &send_raw(&[], serde_json::json!({})),
    )
    .await;
    assert!(code == INVALID_PARAMS && msg.contains("got 0"), "{msg}");

    let mut bad = good[..3].to_vec();
    bad[2] = "0OIl".into();
    let (code, msg, _) = rpc_error(
        &mut http,
        "/api/v1/bundles",
        &send_raw(&bad, serde_json::json!({})),
    )
    .await;
    assert!(
        code == INVALID_PARAMS && msg.contains("transaction 2") && msg.contains("base58"),
        "{msg}"
    );

    let mut long = good[..2].to_vec();
    long[1] = "1".repeat(1684);
    let (_, msg, _) = rpc_error(
        &mut http,
        "/api/v1/bundles",
        &send_raw(&long, serde_json::json!({})),
    )
    .await;
    assert!(
        msg.contains("transaction 1") && msg.contains("1683"),
        "{msg}"
    );

    let mut trailing = transfer_tx(2100, 5);
    trailing.push(0);
    let trailing = vec![good[0].clone(), bs58::encode(&trailing).into_string()];
    let (_, msg, _) = rpc_error(
        &mut http,
        "/api/v1/bundles",
        &send_raw(&trailing, serde_json::json!({})),
    )
    .await;
    assert!(
        msg.contains("transaction 1") && msg.contains("deserialize"),
        "{msg}"
    );

    let mut unsigned = transfer_tx(2200, 5);
    unsigned[65] = 2; // the message now asks for two signatures but carries one
    let unsigned = vec![bs58::encode(&unsigned).into_string()];
    let (_, msg, _) = rpc_error(
        &mut http,
        "/api/v1/bundles",
        &send_raw(&unsigned, serde_json::json!({})),
    )
    .await;
    assert!(
        msg.contains("transaction 0") && msg.contains("sanitize"),
        "{msg}"
    );

    let (_, msg, _) = rpc_error(
        &mut http,
        "/api/v1/bundles",
        &send_raw(&good[..1], serde_json::json!({"encoding": "hex"})),
    )
    .await;
    assert!(msg.contains("\"hex\""), "{msg}");

    // base64 works and gives the same id rule.
    use base64::Engine as _;
    let txs = bundle(2300, 2);
    let b64: Vec<String> = txs
        .iter()
        .map(|t| base64::engine::general_purpose::STANDARD.encode(t))
        .collect();
    let r = http
        .post(
            "/api/v1/bundles",
            &send_raw(&b64, serde_json::json!({"encoding": "base64"})),
        )
        .await;
    assert_eq!(r.json()["result"], expected_id(&txs));

    // sendTransaction with bundleOnly: result is the signature, the bundle id is in a header.
    let tx = transfer_tx(2400, 5);
    let body = serde_json::json!({"jsonrpc":"2.0","id":3,"method":"sendTransaction","params":[bs58::encode(&tx).into_string()]});
    let r = http
        .post("/api/v1/transactions?bundleOnly=true", &body.to_string())
        .await;
    assert_eq!(r.json()["result"], first_signature(&tx));
    assert_eq!(
        r.header("x-bundle-id"),
        Some(expected_id(std::slice::from_ref(&tx)).as_str())
    );

    assert_eq!(http.post("/api/v1/nothing", "{}").await.status, 404);

    let mut admin = Http::connect(handle.admin_addr().unwrap()).await;
    assert!(settled(&handle).await);
    let stats = admin.get("/stats").await.json();
    assert_eq!(stats["admitted"], 2);
    assert_eq!(stats["delivered"], 2);
    assert_eq!(stats["bad_requests"], 10);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_rejection_ends_the_bundle_as_rejected_with_its_reason() {
    let mut engine_rules = rules(10);
    engine_rules.reject_all = Some(Code::InvalidArgument);
    let (engines, _log) = start_engine(1, engine_rules).await;
    let handle = Baseline::start(config(&engines, "127.1.3.0/30", 10))
        .await
        .unwrap();
    let mut http = Http::connect(handle.rotating_addr()).await;
    for b in 0..5 {
        assert_eq!(
            http.post(
                "/api/v1/bundles",
                &send_bundle_body(b, &bundle(3000 + b, 2))
            )
            .await
            .status,
            200
        );
    }
    assert!(settled(&handle).await);
    let stats = handle.shutdown().await;
    let t = &stats.totals;
    assert_eq!((t.admitted, t.rejected, t.delivered), (5, 5, 0));
    let (reason, count) = stats.rejection_reasons.iter().next().unwrap();
    assert!(
        reason.contains("InvalidArgument") && reason.contains("expired blockhash"),
        "{reason}"
    );
    assert_eq!(*count, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_accepting_and_drains_in_flight_bundles() {
    let (engines, log) = start_engine(1, rules(100)).await;
    let handle = Baseline::start(config(&engines, "127.1.4.1", 100))
        .await
        .unwrap();
    let addr = handle.rotating_addr();
    let mut http = Http::connect(addr).await;
    for b in 0..3 {
        assert_eq!(
            http.post(
                "/api/v1/bundles",
                &send_bundle_body(b, &bundle(4000 + b, 1))
            )
            .await
            .status,
            200
        );
    }
    drop(http);
    // One pair at 100 ms: the third bundle can only leave ~200 ms from now.
    let stats = handle.shutdown().await.totals;
    assert_eq!((stats.delivered, stats.in_flight), (3, 0), "{stats:?}");
    assert_eq!(log.lock().unwrap().early, 0);
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
}

#[tokio::test]
async fn a_pool_too_big_for_the_open_file_limit_is_refused_naming_the_numbers() {
    let mut cfg = config(&["127.0.0.1:1".parse().unwrap()], "127.2.0.0/17", 1000);
    cfg.admin_addr = None;
    let error = Baseline::start(cfg)
        .await
        .err()
        .expect("32768 pairs cannot fit")
        .to_string();
    assert!(
        error.contains("32768 upstream connections") && error.contains("RLIMIT_NOFILE"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_port_sends_to_the_region_that_can_send_soonest() {
    // One egress address, a one-minute interval: once a region has sent, only the other can.
    let (engines, log) = start_engine(3, rules(60_000)).await;
    let mut cfg = config(&engines, "127.1.5.1", 60_000);
    cfg.max_age_ms = 500;
    let handle = Baseline::start(cfg).await.unwrap();
    let mut http = Http::connect(handle.rotating_addr()).await;
    for b in 0..3 {
        assert_eq!(
            http.post(
                "/api/v1/bundles",
                &send_bundle_body(b, &bundle(5000 + b, 1))
            )
            .await
            .status,
            200
        );
        let delivered = eventually(Duration::from_secs(10), || {
            handle.totals().delivered == b + 1
        })
        .await;
        assert!(
            delivered,
            "bundle {b} was not sent at once to a free region"
        );
    }
    let per_region = log.lock().unwrap().per_region.clone();
    assert_eq!(
        (per_region.get(&0), per_region.get(&1), per_region.get(&2)),
        (Some(&1), Some(&1), Some(&1))
    );
    // Every region is booked now: the next bundle waits and expires.
    assert_eq!(
        http.post("/api/v1/bundles", &send_bundle_body(9, &bundle(5009, 1)))
            .await
            .status,
        200
    );
    assert!(eventually(Duration::from_secs(10), || handle.totals().expired == 1).await);
    handle.shutdown().await;
}
