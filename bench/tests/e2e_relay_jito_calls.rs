//! What a searcher asks of Jito, end to end through the relay to bench-engine:
//!
//! - `sendTransaction` without `bundleOnly=true` goes to the engine's own JSON-RPC
//!   `sendTransaction` (not as a one-transaction bundle), answered with the signature; with
//!   it, as a bundle with `x-bundle-id`; the engine's JSON-RPC throttles (-32097 with its wait)
//!   cool the pair exactly as gRPC's do.
//! - Leader-aware routing: bench-engine runs a leader schedule (the next leader's region
//!   changes every 400 ms here) and counts the bundles that arrive at that region; the relay
//!   learns it from GetNextScheduledLeader and sends the rotating port's bundles there, or to
//!   the soonest region when the leader's has no pair ready within the wait.
//! - Fan-out: a bundle sent to several regions at once, counted once, every send recorded.
//! - Bundle statuses: landing is the engine's to say (bench-engine lands accepted bundles a
//!   set time after it took them); the relay forwards the bots' status calls to the engine's
//!   JSON-RPC on a pair and answers with the engine's word merged with its own record, or with
//!   the record alone (inflight) or a clear error (statuses) when no engine answers in time.
//! - Searcher authentication: the relay buys and renews tokens from the engine's auth service
//!   as the searcher and sends every call with one.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bundle_relay::config::{Policy, SearcherKey, Strategy};
use bundle_relay::relay::auth::Signer;
use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{AuthConfig, Engine, EngineConfig, EngineHandle, MAINNET_REGIONS};
use serde_json::Value;
use sha2::{Digest, Sha256};
use support::baseline::{first_signature, transfer_tx};
use support::relay::{bundles, pairs_text, rpc_call, run_load, spec, wait_ended, wait_pairs_up};

fn send_transaction(tx: &[u8]) -> String {
    let b64 = base64_encode(tx);
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"sendTransaction","params":["{b64}",{{"encoding":"base64"}}]}}"#
    )
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Jito's id of a one-transaction bundle: SHA-256 of its signature's base58, in hex.
fn bundle_id_of(tx: &[u8]) -> String {
    let d = Sha256::digest(first_signature(tx).as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Three transactions without bundleOnly reach the engine's JSON-RPC sendTransaction and none
/// of its SendBundle; one with bundleOnly=true is a bundle. Each is answered with its
/// signature, the bundle one with its id in x-bundle-id too, and the record shows each send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_transaction_goes_to_the_engines_send_transaction_unless_bundle_only() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..2]);
    ec.interval_ms = 10;
    let engine = Engine::start(ec).await.unwrap();
    let s = spec(&engine.region_addrs(), "127.1.83.0/30", 10);
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 8, Duration::from_secs(10)).await;
    let rotating = relay.rotating_addr().unwrap();
    let txs: Vec<Vec<u8>> = (0..4).map(|i| transfer_tx(8300 + i, 5_000)).collect();
    for (i, tx) in txs.iter().enumerate() {
        let path = if i == 3 {
            "/api/v1/transactions?bundleOnly=true"
        } else {
            "/api/v1/transactions"
        };
        let (status, head, answer) = rpc_call(rotating, path, &send_transaction(tx));
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"], first_signature(tx), "{answer}");
        assert_eq!(answer["id"], 7);
        assert_eq!(
            head.contains(&format!("x-bundle-id: {}", bundle_id_of(tx))),
            i == 3,
            "{head}"
        );
    }
    let t = wait_ended(&relay, Duration::from_secs(10)).await;
    assert_eq!(t.delivered, 4, "{t:?}");
    let es = engine.stats();
    assert_eq!(
        (es.transactions_accepted, es.send_bundle_calls, es.accepted),
        (3, 1, 1),
        "{es:?}"
    );
    for tx in &txs[..3] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"getBundleDelivery","params":["{}"]}}"#,
            bundle_id_of(tx)
        );
        let d = rpc_call(rotating, "/api/v1/bundles", &body).2["result"].clone();
        assert_eq!(d["status"], "delivered", "{d}");
        assert_eq!(d["attempts"][0]["verdict"], "accepted", "{d}");
        // The engine's own answer, kept: the signature.
        assert_eq!(d["engine"], first_signature(tx), "{d}");
    }
    assert_eq!(es.early_sends, 0);
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// The engine tells every source to back off 1.5 s (-32097, "Retry after 1500ms", as HTTP
/// 429): the pair cools exactly that long, the transaction is sent again when it may be, and
/// the record shows both sends with the engine's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engines_json_rpc_retry_after_cools_the_pair_as_grpcs_does() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..1]);
    ec.interval_ms = 10;
    ec.faults = vec!["storm@0s+1s:fraction=1,retry_ms=1500".parse().unwrap()];
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), "127.1.84.1", 10);
    s.threads = 1;
    s.bundle_max_age_ms = 5_000;
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 1, Duration::from_secs(10)).await;
    let rotating = relay.rotating_addr().unwrap();
    let tx = transfer_tx(8400, 5_000);
    let (status, _, answer) = rpc_call(rotating, "/api/v1/transactions", &send_transaction(&tx));
    assert_eq!(
        (status, &answer["result"]),
        (200, &Value::from(first_signature(&tx)))
    );
    let t = wait_ended(&relay, Duration::from_secs(10)).await;
    assert_eq!((t.delivered, t.cooldowns), (1, 1), "{t:?}");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"getBundleDelivery","params":["{}"]}}"#,
        bundle_id_of(&tx)
    );
    let d = rpc_call(rotating, "/api/v1/bundles", &body).2["result"].clone();
    let a = d["attempts"].as_array().unwrap();
    assert_eq!(a.len(), 2, "{d}");
    assert_eq!(a[0]["verdict"], "rate_limited", "{d}");
    assert_eq!(a[0]["retry_after_ms"], 1500, "{d}");
    assert_eq!(a[1]["verdict"], "accepted", "{d}");
    let waited =
        a[1]["sent_after_us"].as_u64().unwrap() - a[0]["answered_after_us"].as_u64().unwrap();
    assert!(waited >= 1_500_000, "sent again only after the wait: {d}");
    let es = engine.stats();
    assert_eq!((es.transactions_accepted, es.early_sends), (1, 0), "{es:?}");
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// The engine's slot: a leader holds four, so the leader's region changes every 400 ms.
const SLOT_MS: u64 = 100;

fn ok(r: &bundle_relay_bench::load::LoadReport) -> u64 {
    r.outcomes
        .iter()
        .filter(|o| {
            matches!(o.outcome, bundle_relay_bench::load::Outcome::Answered(a)
                if a.status == 200 && a.rpc_error.is_none())
        })
        .count() as u64
}

/// The same engine, pool and load through a relay routing by leader, then one routing to the
/// soonest region: by leader, most bundles reach the next leader's region (the rest are the
/// ones sent in the moments after a turn changed, before the next poll); by soonest, about
/// one region in eight, as chance has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rotating_ports_bundles_go_to_the_next_leaders_region() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 10;
    ec.slot_ms = SLOT_MS;
    let engine = Engine::start(ec).await.unwrap();
    let mut share = [0.0; 2];
    for (i, strategy) in [Strategy::Leader, Strategy::Soonest]
        .into_iter()
        .enumerate()
    {
        let mut s = spec(&engine.region_addrs(), "127.1.81.0/28", 10);
        s.open_to_all(Policy {
            strategy,
            ..Policy::open()
        });
        s.leader.poll_ms = 50;
        let relay = Relay::start(s).unwrap();
        wait_pairs_up(&relay, 128, Duration::from_secs(10)).await;
        let before = engine.stats();
        let load = run_load(
            vec![relay.rotating_addr().unwrap()],
            200.0,
            bundles(81 + i as u64, 0, 400),
        )
        .await;
        let t = wait_ended(&relay, Duration::from_secs(10)).await;
        let after = engine.stats();
        assert_eq!(ok(&load), 400, "{strategy:?}: {}", load.summary);
        assert_eq!(t.delivered, 400, "{strategy:?}: {t:?}");
        let accepted = after.accepted - before.accepted;
        share[i] = (after.at_leader - before.at_leader) as f64 / accepted as f64;
        let debug = pairs_text(&relay);
        if strategy == Strategy::Leader {
            assert!(t.leader_answers > 0, "{t:?}");
            assert!(t.leader_routed >= 300, "{t:?}");
            assert!(debug.starts_with("next leader: slot 38"), "{debug}");
        } else {
            assert_eq!((t.leader_polls, t.leader_routed), (0, 0), "{t:?}");
            assert!(!debug.contains("next leader"), "{debug}");
        }
        let end = relay.shutdown(Duration::from_millis(200));
        assert!(end.identity_holds(), "{end:?}");
    }
    eprintln!(
        "at the next leader's region: {:.1}% by leader, {:.1}% by soonest",
        100.0 * share[0],
        100.0 * share[1]
    );
    assert!(share[0] >= 0.6, "by leader: {share:?}");
    assert!(share[1] <= 0.35, "by soonest: {share:?}");
    assert_eq!(engine.stats().early_sends, 0);
    engine.shutdown().await;
}

/// Two addresses at Jito's one send a second: the leader's region can take two bundles a
/// second, the pool sixteen. At ten a second, a relay that held bundles for the leader's
/// region would expire most of them; the wait sends them to the soonest region instead, and
/// every one is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaders_region_with_no_pair_ready_within_the_wait_hands_its_bundles_to_the_soonest() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 1_000;
    ec.slot_ms = SLOT_MS;
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), "127.1.82.0/31", 1_000);
    // Polled at the default 400 ms: 2.5 of the pool's 16 sends a second.
    s.open_to_all(Policy {
        strategy: Strategy::Leader,
        ..Policy::open()
    });
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 16, Duration::from_secs(10)).await;
    // Let a poll or two through first: a poll takes a pair like a bundle does.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let load = run_load(
        vec![relay.rotating_addr().unwrap()],
        10.0,
        bundles(82, 0, 20),
    )
    .await;
    // Bundles refused before they are admitted were never routed anywhere.
    let bad = r#"{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["AAAA"],{"encoding":"base64"}]}"#;
    for _ in 0..5 {
        let (status, _, answer) = rpc_call(relay.rotating_addr().unwrap(), "/api/v1/bundles", bad);
        assert!(answer["error"].is_object(), "{status}: {answer}");
    }
    let t = wait_ended(&relay, Duration::from_secs(10)).await;
    assert_eq!(ok(&load), 20, "{}", load.summary);
    assert_eq!((t.delivered, t.expired), (20, 0), "{t:?}");
    assert!(t.leader_routed > 0, "{t:?}");
    assert!(t.leader_fallbacks > 0, "{t:?}");
    assert_eq!(
        t.leader_routed + t.leader_fallbacks,
        20,
        "each admitted bundle routed once: {t:?}"
    );
    assert_eq!(engine.stats().early_sends, 0);
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// `ec`'s engine at a 10 ms interval, and a relay through `egress` (four addresses) whose
/// every rotating-port bundle fans out to three regions, its pairs up.
async fn fanned_out_by_three(mut ec: EngineConfig, egress: &str) -> (EngineHandle, Relay) {
    ec.interval_ms = 10;
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), egress, 10);
    s.open_to_all(Policy {
        fan_out: 3,
        ..Policy::open()
    });
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 32, Duration::from_secs(10)).await;
    (engine, relay)
}

/// Everyone's bundles fan out to three regions: each reaches three different regions' engines
/// (each accepts it once: the engine counts the other two as duplicates of the id), is answered
/// and counted once, and its record shows the three sends, all accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fanned_out_bundle_reaches_three_regions_and_is_counted_once() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.record = true;
    let (engine, relay) = fanned_out_by_three(ec, "127.1.85.0/30").await;
    let sent = bundles(85, 0, 40);
    let ids: Vec<String> = sent
        .iter()
        .map(|g| String::from_utf8(g.bundle_id.to_vec()).unwrap())
        .collect();
    let load = run_load(vec![relay.rotating_addr().unwrap()], 100.0, sent).await;
    let t = wait_ended(&relay, Duration::from_secs(10)).await;
    assert_eq!(ok(&load), 40, "{}", load.summary);
    assert_eq!((t.admitted, t.delivered), (40, 40), "{t:?}");
    let es = engine.stats();
    assert_eq!((es.accepted, es.duplicates), (120, 80), "{es:?}");
    let recorded = engine.recorded();
    let rotating = relay.rotating_addr().unwrap();
    for id in &ids {
        let mut regions: Vec<&str> = recorded
            .iter()
            .filter(|b| &b.id == id)
            .map(|b| b.region.as_str())
            .collect();
        regions.sort_unstable();
        regions.dedup();
        assert_eq!(regions.len(), 3, "{id}: {regions:?}");
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":2,"method":"getBundleDelivery","params":["{id}"]}}"#);
        let d = rpc_call(rotating, "/api/v1/bundles", &body).2["result"].clone();
        assert_eq!(d["status"], "delivered", "{d}");
        let a = d["attempts"].as_array().unwrap();
        assert_eq!(a.len(), 3, "{d}");
        assert!(a.iter().all(|a| a["verdict"] == "accepted"), "{d}");
    }
    assert_eq!(es.early_sends, 0);
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// One of the eight engines stops answering (its calls stall): the copies sent there are lost
/// or wait out the region's silence, and every bundle still ends once, delivered, because
/// another copy was accepted; none counts as failed or expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fanned_out_bundle_whose_copy_is_lost_ends_delivered_by_the_others() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.faults = vec!["stall@0s:region=frankfurt".parse().unwrap()];
    let (engine, relay) = fanned_out_by_three(ec, "127.1.86.0/30").await;
    let load = run_load(
        vec![relay.rotating_addr().unwrap()],
        20.0,
        bundles(86, 0, 24),
    )
    .await;
    let t = wait_ended(&relay, Duration::from_secs(10)).await;
    assert_eq!(ok(&load), 24, "{}", load.summary);
    assert_eq!(
        (t.admitted, t.delivered, t.failed, t.expired),
        (24, 24, 0, 0),
        "{t:?}"
    );
    let es = engine.stats();
    // The only stall rule is frankfurt's: a hit is a copy that really went there and was lost.
    assert!(
        es.faults["stall"] > 0,
        "no copy was sent to the stalled region: {:?}",
        es.faults
    );
    let stalled = es.regions.iter().find(|r| r.name == "frankfurt").unwrap();
    assert_eq!(stalled.accepted, 0, "{es:?}");
    assert!(
        es.accepted >= 48,
        "two healthy copies of each at least: {es:?}"
    );
    assert_eq!(es.early_sends, 0);
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// The JSON body of a generated bundle's HTTP request.
fn json_body(b: &bundle_relay_bench::txgen::GeneratedBundle) -> String {
    let text = String::from_utf8(b.request.to_vec()).unwrap();
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

fn status_call(method: &str, ids: &[&str]) -> String {
    let ids: Vec<String> = ids.iter().map(|i| format!("\"{i}\"")).collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":"q","method":"{method}","params":[[{}]]}}"#,
        ids.join(",")
    )
}

/// A bundle the engine took is `Pending` to a bot until the engine lands it, then `Landed` at
/// the engine's slot; `getBundleStatuses` is the engine's own answer (`null`, then the entry
/// with the bundle's signatures and confirmation), each asked of the engine on a pair. An id
/// neither the relay nor the engine ever had is `Invalid`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bots_status_calls_show_its_bundle_pending_then_landed_at_the_engines_slot() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..2]);
    ec.interval_ms = 10;
    ec.slot_ms = 50;
    // Long enough that the first questions come before it lands, even on a loaded machine.
    ec.land_ms = 1_000;
    let engine = Engine::start(ec).await.unwrap();
    let s = spec(&engine.region_addrs(), "127.1.87.0/30", 10);
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 8, Duration::from_secs(10)).await;
    let rotating = relay.rotating_addr().unwrap();
    let b = &bundles(87, 0, 1)[0];
    let id = String::from_utf8(b.bundle_id.to_vec()).unwrap();
    let (status, _, answer) = rpc_call(rotating, "/api/v1/bundles", &json_body(b));
    assert_eq!(
        (status, answer["result"].as_str()),
        (200, Some(id.as_str()))
    );
    wait_ended(&relay, Duration::from_secs(5)).await;
    let unknown = "ab".repeat(32);
    let inflight = status_call("getInflightBundleStatuses", &[&id, &unknown]);
    let (_, _, a) = rpc_call(rotating, "/api/v1/getInflightBundleStatuses", &inflight);
    assert_eq!(a["id"], "q", "{a}");
    let v = &a["result"]["value"];
    assert_eq!(
        (&v[0]["bundle_id"], &v[0]["status"]),
        (&Value::from(id.clone()), &Value::from("Pending")),
        "{a}"
    );
    assert_eq!(
        (&v[1]["status"], &v[1]["landed_slot"]),
        (&Value::from("Invalid"), &Value::Null),
        "{a}"
    );
    assert!(
        a["result"]["context"]["slot"].as_u64().unwrap() > 0,
        "the engine's slot: {a}"
    );
    let statuses = status_call("getBundleStatuses", &[&id]);
    let (_, _, a) = rpc_call(rotating, "/api/v1/bundles", &statuses);
    assert_eq!(
        a["result"]["value"],
        serde_json::json!([null]),
        "not landed yet: {a}"
    );

    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (_, _, a) = rpc_call(rotating, "/api/v1/bundles", &inflight);
    let landed = &a["result"]["value"][0];
    assert_eq!(landed["status"], "Landed", "{a}");
    let slot = landed["landed_slot"].as_u64().expect("a landed slot");
    let (_, _, a) = rpc_call(rotating, "/api/v1/getBundleStatuses", &statuses);
    let e = &a["result"]["value"][0];
    assert_eq!(
        (&e["bundle_id"], e["slot"].as_u64()),
        (&Value::from(id.clone()), Some(slot)),
        "{a}"
    );
    assert!(
        ["processed", "confirmed", "finalized"]
            .contains(&e["confirmation_status"].as_str().unwrap()),
        "{a}"
    );
    assert_eq!(e["err"], serde_json::json!({"Ok": null}), "{a}");
    // Jito's id is the SHA-256 of the signatures the engine lists: they are this bundle's.
    let sigs: Vec<&str> = e["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let digest = Sha256::digest(sigs.join(",").as_bytes());
    assert_eq!(
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
        id,
        "{a}"
    );

    let t = relay.totals();
    assert_eq!(
        (t.status_queries, t.status_queries_answered),
        (4, 4),
        "{t:?}"
    );
    let es = engine.stats();
    assert_eq!(
        (es.status_calls, es.inflight_status_calls),
        (2, 2),
        "{es:?}"
    );
    assert_eq!(es.early_sends, 0, "status calls keep the per-address rule");
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// Jito's most a status call asks about (five bundles) of its largest kind (five transactions
/// each): the engine's whole answer, several kilobytes, reaches the bot, every entry landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engines_answer_for_five_landed_five_transaction_bundles_reaches_the_bot_whole() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..2]);
    ec.interval_ms = 10;
    ec.land_ms = 50;
    let engine = Engine::start(ec).await.unwrap();
    let s = spec(&engine.region_addrs(), "127.1.88.0/30", 10);
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 8, Duration::from_secs(10)).await;
    let rotating = relay.rotating_addr().unwrap();
    let five = bundle_relay_bench::txgen::generate(
        bundle_relay_bench::txgen::TxGenConfig {
            seed: 88,
            run_id: 88,
            txs_mix: vec![(5, 1)],
            ..Default::default()
        },
        0,
        5,
    )
    .unwrap()
    .0;
    let mut ids = Vec::new();
    for b in &five {
        let id = b.bundle_id_str().to_string();
        let (status, _, answer) = rpc_call(rotating, "/api/v1/bundles", &json_body(b));
        assert_eq!(
            (status, answer["result"].as_str()),
            (200, Some(id.as_str()))
        );
        ids.push(id);
    }
    wait_ended(&relay, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let (status, _, a) = rpc_call(
        rotating,
        "/api/v1/getBundleStatuses",
        &status_call("getBundleStatuses", &ids),
    );
    assert_eq!(status, 200, "{a}");
    let value = a["result"]["value"]
        .as_array()
        .unwrap_or_else(|| panic!("{a}"));
    assert!(
        a.to_string().len() > 3_000,
        "the answer is several kilobytes: {a}"
    );
    for (e, id) in value.iter().zip(&ids) {
        assert_eq!(e["bundle_id"], *id, "{a}");
        assert_eq!(e["transactions"].as_array().map(Vec::len), Some(5), "{a}");
    }
    assert_eq!(value.len(), 5, "{a}");
    let t = relay.totals();
    assert_eq!(t.status_queries_answered, t.status_queries, "{t:?}");
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// Two relays behind one address (HAProxy spreads a bot's connections over them): a bundle
/// sent through one is not `Invalid` to the other, which has no record of it. It asks an engine
/// and answers with the engine's word: `Pending`, then `Landed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_sent_through_another_relay_has_the_engines_status_not_invalid() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..2]);
    ec.interval_ms = 10;
    ec.slot_ms = 50;
    ec.land_ms = 1_000;
    let engine = Engine::start(ec).await.unwrap();
    let a = Relay::start(spec(&engine.region_addrs(), "127.1.90.0/30", 10)).unwrap();
    let b = Relay::start(spec(&engine.region_addrs(), "127.1.90.4/30", 10)).unwrap();
    wait_pairs_up(&a, 8, Duration::from_secs(10)).await;
    wait_pairs_up(&b, 8, Duration::from_secs(10)).await;
    let bundle = &bundles(90, 0, 1)[0];
    let id = String::from_utf8(bundle.bundle_id.to_vec()).unwrap();
    let (status, _, answer) = rpc_call(
        a.rotating_addr().unwrap(),
        "/api/v1/bundles",
        &json_body(bundle),
    );
    assert_eq!(
        (status, answer["result"].as_str()),
        (200, Some(id.as_str()))
    );
    wait_ended(&a, Duration::from_secs(5)).await;
    let inflight = status_call("getInflightBundleStatuses", &[&id]);
    let (_, _, r) = rpc_call(b.rotating_addr().unwrap(), "/api/v1/bundles", &inflight);
    assert_eq!(r["result"]["value"][0]["status"], "Pending", "{r}");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (_, _, r) = rpc_call(b.rotating_addr().unwrap(), "/api/v1/bundles", &inflight);
    let v = &r["result"]["value"][0];
    assert_eq!(v["status"], "Landed", "{r}");
    assert!(v["landed_slot"].as_u64().is_some(), "{r}");
    let t = b.totals();
    assert_eq!(
        (t.admitted, t.status_queries, t.status_queries_answered),
        (0, 2, 2),
        "{t:?}"
    );
    for relay in [a, b] {
        let end = relay.shutdown(Duration::from_millis(200));
        assert!(end.identity_holds(), "{end:?}");
    }
    engine.shutdown().await;
}

/// One address at Jito's one call a second: right after a bundle, no pair is free within the
/// query's wait. `getInflightBundleStatuses` is then the relay's record alone (`Pending`, no
/// slot); `getBundleStatuses` is refused as Jito refuses a caller over its rate (HTTP 429,
/// -32097, the wait in the message), so a bot's back-off works; both counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_pair_free_in_time_inflight_is_the_record_and_statuses_is_429_as_jitos_rate_limit()
{
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..1]);
    ec.interval_ms = 1_000;
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), "127.1.88.1", 1_000);
    s.threads = 1;
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 1, Duration::from_secs(10)).await;
    // The tip-account refresh takes the pair at start: let its second pass.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let rotating = relay.rotating_addr().unwrap();
    let b = &bundles(88, 0, 1)[0];
    let id = String::from_utf8(b.bundle_id.to_vec()).unwrap();
    rpc_call(rotating, "/api/v1/bundles", &json_body(b));
    wait_ended(&relay, Duration::from_secs(5)).await;
    let (_, _, a) = rpc_call(
        rotating,
        "/api/v1/bundles",
        &status_call("getInflightBundleStatuses", &[&id]),
    );
    assert_eq!(a["result"]["value"][0]["status"], "Pending", "{a}");
    assert_eq!(a["result"]["context"]["slot"], 0, "{a}");
    let (status, head, a) = rpc_call(
        rotating,
        "/api/v1/bundles",
        &status_call("getBundleStatuses", &[&id]),
    );
    assert_eq!(
        (status, a["error"]["code"].as_i64()),
        (429, Some(-32097)),
        "{a}"
    );
    let msg = a["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("Retry after 1000ms"),
        "the pair's interval: {msg}"
    );
    assert!(head.ends_with("\r\nretry-after: 1"), "{head}");
    let t = relay.totals();
    assert_eq!(
        (t.status_queries, t.status_queries_unanswered),
        (2, 2),
        "{t:?}"
    );
    // The 429 counts where every refusal at the pool's pace does, metrics on or off.
    assert_eq!(t.refused_cap, 1, "{t:?}");
    // Counted as answered: the record is a result, the 429 a refusal at the pool's pace.
    let mut m = String::new();
    relay.metrics().render_prometheus(&mut m);
    for (method, outcome) in [
        ("getInflightBundleStatuses", "ok"),
        ("getBundleStatuses", "refused_cap"),
    ] {
        let line = format!(
            "\nbundle_relay_requests_total{{method=\"{method}\",outcome=\"{outcome}\"}} 1\n"
        );
        assert!(m.contains(&line), "{line} in:\n{m}");
    }
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// A tenant's request rate covers the engine calls made for it: with its one token spent on a
/// bundle, a status query that would ask an engine (about a bundle an engine took, or one
/// this relay never had) is refused 429 in Jito's words with a Retry-After, and no engine is
/// asked; what the record answers alone (the bundle's delivery) costs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_query_that_asks_an_engine_takes_from_the_tenants_rate() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..1]);
    ec.interval_ms = 10;
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), "127.1.89.0/31", 10);
    s.open_to_all(Policy {
        rate: Some((1, 1)),
        ..Policy::open()
    });
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 2, Duration::from_secs(10)).await;
    let rotating = relay.rotating_addr().unwrap();
    let b = &bundles(89, 0, 1)[0];
    let id = String::from_utf8(b.bundle_id.to_vec()).unwrap();
    rpc_call(rotating, "/api/v1/bundles", &json_body(b));
    wait_ended(&relay, Duration::from_secs(5)).await;
    let inflight = status_call("getInflightBundleStatuses", &[&id]);
    let (status, head, a) = rpc_call(rotating, "/api/v1/bundles", &inflight);
    assert_eq!(
        (status, a["error"]["code"].as_i64()),
        (429, Some(-32097)),
        "{a}"
    );
    assert!(head.contains("retry-after: 1"), "{head}");
    let unknown = status_call("getInflightBundleStatuses", &[&"cd".repeat(32)]);
    let (status, _, a) = rpc_call(rotating, "/api/v1/bundles", &unknown);
    assert_eq!(
        (status, a["error"]["code"].as_i64()),
        (429, Some(-32097)),
        "{a}"
    );
    let delivery =
        format!(r#"{{"jsonrpc":"2.0","id":"d","method":"getBundleDelivery","params":["{id}"]}}"#);
    let (status, _, a) = rpc_call(rotating, "/api/v1/bundles", &delivery);
    assert_eq!(
        (status, &a["result"]["status"]),
        (200, &Value::from("delivered")),
        "{a}"
    );
    assert_eq!(engine.stats().inflight_status_calls, 0);
    assert_eq!(relay.totals().status_queries, 0);
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// An engine of two regions (10 ms interval) that authenticates searchers, its tokens living
/// `access_ttl_ms` and `refresh_ttl_ms`, with `fault`; and a relay from `egress` that
/// authenticates as a searcher, its pairs up and each of its two threads holding a token for
/// each region (four flows).
async fn authenticating(
    fault: &str,
    access_ttl_ms: u64,
    refresh_ttl_ms: u64,
    egress: &str,
) -> (EngineHandle, Relay) {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..2]);
    ec.interval_ms = 10;
    ec.faults = vec![fault.parse().unwrap()];
    ec.auth = Some(AuthConfig {
        access_ttl_ms,
        refresh_ttl_ms,
    });
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), egress, 10);
    let key = SearcherKey::from_seed([7; 32]);
    s.auth = Some(Arc::new(Signer::new(&key)));
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 8, Duration::from_secs(10)).await;
    support::relay::wait_for(
        &relay,
        "every thread holds a token for every region",
        Duration::from_secs(5),
        |t| t.auth_tokens >= 4,
    )
    .await;
    (engine, relay)
}

/// An engine that gives tokens but refuses every bundle UNAUTHENTICATED for three seconds (its
/// token store out of step with its bundle path): the relay voids each token no call took and
/// asks for the next only after a back-off (100 ms doubling), so the auth service sees tens of
/// calls, not a storm of thousands; once the engine takes tokens again, bundles go, and every
/// one is accounted for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_refusing_every_token_for_a_while_is_asked_for_new_ones_after_a_back_off() {
    let (engine, relay) = authenticating(
        "deny@0s+3s:code=16,fraction=1",
        600_000,
        3_600_000,
        "127.1.90.8/30",
    )
    .await;
    let load = run_load(
        vec![relay.rotating_addr().unwrap()],
        100.0,
        bundles(91, 0, 400),
    )
    .await;
    let t = wait_ended(&relay, Duration::from_secs(15)).await;
    let es = engine.stats();
    assert!(es.faults["deny"] > 0, "the engine refused tokens: {es:?}");
    // Two threads, two regions: four flows, each voided about six times in three seconds.
    assert!(
        es.auth_challenges + es.auth_refreshes <= 60,
        "auth calls {} challenges + {} refreshes: {es:?}",
        es.auth_challenges,
        es.auth_refreshes
    );
    assert_eq!(ok(&load), 400, "{}", load.summary);
    assert_eq!(t.admitted, 400, "{t:?}");
    assert!(t.delivered >= 100, "bundles go again afterwards: {t:?}");
    assert_eq!((es.accepted, es.early_sends), (t.delivered, 0), "{es:?}");
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// Tokens that live 1.5 s: the relay authenticates each thread to each region as the searcher
/// before sending anything there and renews its access token half way through each life. Mid
/// load the engine forgets every access token (as a restart would): the calls that meet it are
/// refused UNAUTHENTICATED, the relay voids its token, refreshes, and sends those bundles
/// again; no pair leaves rotation as a denied source. Every bundle is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_authenticates_renews_its_token_and_recovers_from_a_revoke_under_load() {
    let (engine, relay) = authenticating("revoke@2s", 1_500, 60_000, "127.1.90.0/30").await;
    let load = run_load(
        vec![relay.rotating_addr().unwrap()],
        100.0,
        bundles(90, 0, 300),
    )
    .await;
    let t = wait_ended(&relay, Duration::from_secs(10)).await;
    assert_eq!(ok(&load), 300, "{}", load.summary);
    assert_eq!((t.delivered, t.failed, t.expired), (300, 0, 0), "{t:?}");
    let es = engine.stats();
    assert_eq!(
        es.auth_challenges, 4,
        "one whole flow per thread and region, the refresh token outliving the revoke: {es:?}"
    );
    assert!(
        es.auth_refreshes >= 8,
        "renewed every 750 ms for 3 s: {es:?}"
    );
    assert!(
        (1..=20).contains(&es.unauthenticated_calls),
        "only calls that met the revoke before the relay knew: {es:?}"
    );
    assert_eq!(es.faults["revoke"], 1, "{es:?}");
    assert_eq!((es.accepted, es.early_sends), (300, 0), "{es:?}");
    assert_eq!((t.auth_failures, t.pairs_up), (0, 8), "{t:?}");
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}
