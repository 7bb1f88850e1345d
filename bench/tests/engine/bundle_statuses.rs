//! Jito's bundle-status JSON-RPC calls on bench-engine: `getInflightBundleStatuses` and
//! `getBundleStatuses` answered from the landing model, in Jito's shapes, under the same
//! per-source rule as SendBundle.

use crate::support;

use std::net::IpAddr;
use std::time::Duration;

use bundle_relay::jito::{BUNDLES_PATH, code};
use bundle_relay::proto::searcher::NextScheduledLeaderRequest;
use bundle_relay_bench::engine::{EngineConfig, EngineHandle, SLOT_BASE, testkit};
use serde_json::{Value, json};
use support::engine::*;

const INFLIGHT_PATH: &str = "/api/v1/getInflightBundleStatuses";
const STATUSES_PATH: &str = "/api/v1/getBundleStatuses";

/// A loopback source 127.1.0.`n`, apart from the 127.0.1.x ones `src` gives.
fn source(lo: u8) -> IpAddr {
    IpAddr::from([127, 1, 0, lo])
}

fn call(method: &str, ids: &[&str]) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": [ids]})
}

/// The `result` of a successful call, checked for the JSON-RPC envelope.
fn result(reply: (u16, Value)) -> Value {
    let (status, body) = reply;
    assert_eq!(status, 200, "{body}");
    assert_eq!((&body["jsonrpc"], &body["id"]), (&json!("2.0"), &json!(1)));
    body["result"].clone()
}

async fn current_slot(h: &EngineHandle) -> u64 {
    let mut c = client(addr_of(h, "ny"), source(250)).await;
    c.get_next_scheduled_leader(NextScheduledLeaderRequest { regions: vec![] })
        .await
        .unwrap()
        .into_inner()
        .current_slot
}

#[tokio::test]
async fn a_landed_bundle_is_pending_then_landed_with_its_slot() {
    // Long enough that the first calls come before the landing, even on a loaded machine.
    let (slot_ms, land_ms) = (10, 1_000);
    let h = start(EngineConfig {
        slot_ms,
        land_ms,
        ..EngineConfig::for_tests(&["ny"])
    })
    .await;
    let ny = addr_of(&h, "ny");
    let txs = bundle_txs(1, 3);
    let sigs: Vec<String> = txs
        .iter()
        .map(|t| bs58::encode(&t[1..65]).into_string())
        .collect();
    let before = current_slot(&h).await;
    let id = client(ny, src(1))
        .await
        .send_bundle(testkit::send_bundle_request(&txs))
        .await
        .unwrap()
        .into_inner()
        .uuid;

    let r = result(
        json_rpc(
            ny,
            source(1),
            INFLIGHT_PATH,
            &call("getInflightBundleStatuses", &[&id]),
        )
        .await,
    );
    let pending_slot = r["context"]["slot"].as_u64().unwrap();
    assert_eq!(
        r["value"],
        json!([{"bundle_id": id, "status": "Pending", "landed_slot": null}])
    );
    let r = result(
        json_rpc(
            ny,
            source(2),
            STATUSES_PATH,
            &call("getBundleStatuses", &[&id]),
        )
        .await,
    );
    assert_eq!(r["value"], json!([null]));

    tokio::time::sleep(Duration::from_millis(land_ms + 50)).await;
    let r = result(
        json_rpc(
            ny,
            source(3),
            BUNDLES_PATH,
            &call("getInflightBundleStatuses", &[&id]),
        )
        .await,
    );
    let landed = r["value"][0]["landed_slot"].as_u64().unwrap();
    assert_eq!(r["value"][0]["status"], "Landed", "{r}");
    // Accepted between `before` and `pending_slot`, landed land_ms later on the same clock.
    let land_slots = land_ms / slot_ms;
    assert!(
        (before + land_slots..=pending_slot + land_slots).contains(&landed),
        "landed {landed}, accepted in {before}..={pending_slot}"
    );
    assert!(before >= SLOT_BASE && r["context"]["slot"].as_u64().unwrap() >= landed);

    let r = result(
        json_rpc(
            ny,
            source(4),
            BUNDLES_PATH,
            &call("getBundleStatuses", &[&id]),
        )
        .await,
    );
    let now = r["context"]["slot"].as_u64().unwrap();
    let expected = match now - landed {
        0 => "processed",
        1..=32 => "confirmed",
        _ => "finalized",
    };
    assert_eq!(
        r["value"],
        json!([{"bundle_id": id, "transactions": sigs, "slot": landed,
                "confirmation_status": expected, "err": {"Ok": null}}])
    );
    // 33 slots on, the landing is final.
    tokio::time::sleep(Duration::from_millis(33 * slot_ms + 20)).await;
    let r = result(
        json_rpc(
            ny,
            source(5),
            STATUSES_PATH,
            &call("getBundleStatuses", &[&id]),
        )
        .await,
    );
    assert_eq!(r["value"][0]["confirmation_status"], "finalized", "{r}");

    let s = h.stats();
    assert_eq!(
        (s.status_calls, s.inflight_status_calls, s.bundles_landed),
        (3, 2, 1)
    );
    assert_eq!(
        (s.send_transaction_calls, s.land_ms, s.land_share),
        (0, land_ms, 1.0)
    );
}

#[tokio::test]
async fn a_bundle_that_does_not_land_fails_after_land_ms() {
    let h = start(EngineConfig {
        slot_ms: 10,
        land_ms: 600,
        land_share: 0.0,
        ..EngineConfig::for_tests(&["ny"])
    })
    .await;
    let ny = addr_of(&h, "ny");
    let id = client(ny, src(1))
        .await
        .send_bundle(bundle(1))
        .await
        .unwrap()
        .into_inner()
        .uuid;
    let r = result(
        json_rpc(
            ny,
            source(1),
            BUNDLES_PATH,
            &call("getInflightBundleStatuses", &[&id]),
        )
        .await,
    );
    assert_eq!(r["value"][0]["status"], "Pending", "{r}");
    tokio::time::sleep(Duration::from_millis(650)).await;
    let r = result(
        json_rpc(
            ny,
            source(2),
            BUNDLES_PATH,
            &call("getInflightBundleStatuses", &[&id]),
        )
        .await,
    );
    assert_eq!(
        r["value"],
        json!([{"bundle_id": id, "status": "Failed", "landed_slot": null}])
    );
    let r = result(
        json_rpc(
            ny,
            source(3),
            BUNDLES_PATH,
            &call("getBundleStatuses", &[&id]),
        )
        .await,
    );
    assert_eq!(r["value"], json!([null]));
    assert_eq!(h.stats().bundles_landed, 0);
}

#[tokio::test]
async fn status_calls_are_paced_per_source_like_bundles() {
    let h = start(EngineConfig {
        interval_ms: 2_000,
        ..EngineConfig::for_tests(&["ny", "tokyo"])
    })
    .await;
    let (ny, tokyo) = (addr_of(&h, "ny"), addr_of(&h, "tokyo"));
    let unknown = "ab".repeat(32);
    let asked =
        json!({"jsonrpc": "2.0", "id": "q7", "method": "getBundleStatuses", "params": [[unknown]]});
    let (status, _) = json_rpc(ny, source(1), BUNDLES_PATH, &asked).await;
    assert_eq!(status, 200);
    // The same source again inside the interval, whatever the method: Jito's refusal.
    let again = json!({"jsonrpc": "2.0", "id": "q8", "method": "getInflightBundleStatuses", "params": [[unknown]]});
    let (status, body) = json_rpc(ny, source(1), INFLIGHT_PATH, &again).await;
    assert_eq!((status, &body["id"]), (429, &json!("q8")), "{body}");
    assert_eq!(body["error"]["code"], code::RATE_LIMITED);
    let retry = retry_ms_of(body["error"]["message"].as_str().unwrap());
    assert!((1_000..=2_000).contains(&retry), "retry {retry}");
    // A status call spends the source's turn as a bundle does: a SendBundle after it waits.
    let err = client(ny, source(1))
        .await
        .send_bundle(bundle(1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted);
    // Per (source, region): the same source on another region passes.
    assert_eq!(
        json_rpc(tokyo, source(1), BUNDLES_PATH, &again).await.0,
        200
    );
    let s = h.stats();
    assert_eq!(
        (s.status_calls, s.inflight_status_calls, s.early_sends),
        (1, 1, 2)
    );

    let denied = start(EngineConfig {
        faults: vec!["deny@0s:fraction=1".parse().unwrap()],
        ..EngineConfig::for_tests(&["ny"])
    })
    .await;
    let (status, body) = json_rpc(addr_of(&denied, "ny"), source(1), BUNDLES_PATH, &asked).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!(code::FORBIDDEN))
    );
    assert_eq!(denied.stats().status_calls, 0);
}

#[tokio::test]
async fn unknown_ids_are_invalid_and_malformed_params_are_invalid_params() {
    let h = start(EngineConfig::for_tests(&["ny"])).await;
    let ny = addr_of(&h, "ny");
    let (a, b) = ("0".repeat(64), "F".repeat(64));
    let r = result(
        json_rpc(
            ny,
            source(1),
            BUNDLES_PATH,
            &call("getInflightBundleStatuses", &[&a, &b]),
        )
        .await,
    );
    assert!(r["context"]["slot"].as_u64().unwrap() >= SLOT_BASE);
    assert_eq!(
        r["value"],
        json!([{"bundle_id": a, "status": "Invalid", "landed_slot": null},
               {"bundle_id": b, "status": "Invalid", "landed_slot": null}])
    );
    let r = result(
        json_rpc(
            ny,
            source(2),
            BUNDLES_PATH,
            &call("getBundleStatuses", &[&a]),
        )
        .await,
    );
    assert_eq!(r["value"], json!([null]));

    // Each refusal below passed the gate, so each comes from its own source.
    let six = vec![a.as_str(); 6];
    let cases = [
        (
            call("getBundleStatuses", &six),
            "at most 5 bundle ids per call, got 6",
        ),
        (
            call("getInflightBundleStatuses", &[&a, "xyz"]),
            "bundle id \"xyz\"",
        ),
        (
            call("getBundleStatuses", &[]),
            "params must be [[bundle_id, ...]]",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "getBundleStatuses", "params": [a]}),
            "params must be [[bundle_id, ...]]",
        ),
    ];
    for (i, (req, says)) in cases.iter().enumerate() {
        let (status, body) = json_rpc(ny, source(10 + i as u8), BUNDLES_PATH, req).await;
        assert_eq!((status, &body["id"]), (200, &json!(1)), "{body}");
        assert_eq!(body["error"]["code"], code::INVALID_PARAMS, "{body}");
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{msg:?} should say {says:?}");
    }
    // Another path's method, with a null id echoed.
    let req = json!({"jsonrpc": "2.0", "id": null, "method": "sendTransaction", "params": []});
    let (status, body) = json_rpc(ny, source(20), BUNDLES_PATH, &req).await;
    assert_eq!((status, &body["id"]), (200, &Value::Null));
    assert_eq!(body["error"]["code"], code::METHOD_NOT_FOUND);
}
