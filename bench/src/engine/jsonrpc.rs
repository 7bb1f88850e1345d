//! The engine's HTTP JSON-RPC as Jito serves it beside gRPC, same host:
//!
//! - `sendTransaction` on `/api/v1/transactions`: the transaction's first signature, or -32602
//!   for one that does not decode or sanitize;
//! - `getBundleStatuses` and `getInflightBundleStatuses` on `/api/v1/bundles`,
//!   `/api/v1/getBundleStatuses` and `/api/v1/getInflightBundleStatuses` (either method on any
//!   of the three), 1 to 5 bundle ids each, answered from the landing model ([`super::landing`])
//!   with the engine's slot as `context.slot`; -32602 for params that are not `[[id, ...]]`,
//!   more than 5 ids or an id that is not 64 hex digits.
//!
//! With tokens required (`EngineConfig::auth`), a call without a live access token in
//! `authorization: Bearer <token>` is refused first, as gRPC calls are: HTTP 401 with -32001
//! and the same words ("missing access token", "unknown access token", "access token
//! expired"), counted nowhere but the stats' token refusals.
//!
//! Every call passes the same gate as SendBundle: the per-(source, region) rule and the faults
//! that answer in its place (`deny`, `throttle`, `storm`; the stream faults are SendBundle's
//! alone), refused in Jito's shape and words: HTTP 429 with -32097 ("Retry after Nms",
//! "Network congested. …"), 403 for a denied source. A method the path does not serve is
//! -32601, a body that is not JSON -32700, one over 64 KiB HTTP 413 with -32600. Answers echo
//! the request's `id` and are HTTP 200 otherwise.
//!
//! Shapes (`getInflightBundleStatuses`, then `getBundleStatuses`; one entry per id, in order):
//!
//! ```text
//! {"context":{"slot":S},"value":[{"bundle_id":ID,"status":"Invalid"|"Pending"|"Failed"|"Landed","landed_slot":S|null}]}
//! {"context":{"slot":S},"value":[null | {"bundle_id":ID,"transactions":[SIG,...],"slot":S,
//!   "confirmation_status":"processed"|"confirmed"|"finalized","err":{"Ok":null}}]}
//! ```

use std::net::IpAddr;

use base64::Engine as _;
use bytes::Bytes;
use h2::RecvStream;
use h2::server::SendResponse;
use http::{Request, Response};
use serde_json::{Value, json};

use super::Shared;
use super::landing::{State, confirmation};
use super::server::{Gate, authorize, gate, read_body};
use super::stats::inc;
use super::validate::{self, SIG_B58_MAX};
use crate::sentlog;
use bundle_relay::jito::{
    BUNDLES_PATH, GLOBAL_THROTTLE_MESSAGE, TRANSACTIONS_PATH, code, rate_limit_message,
};
use bundle_relay::proto::bundle::Bundle;
use bundle_relay::proto::packet::{Meta, Packet};

/// Jito's path for `getBundleStatuses` alone (it is answered on [`BUNDLES_PATH`] too).
pub(super) const GET_BUNDLE_STATUSES_PATH: &str = "/api/v1/getBundleStatuses";
/// Jito's path for `getInflightBundleStatuses` alone.
pub(super) const GET_INFLIGHT_BUNDLE_STATUSES_PATH: &str = "/api/v1/getInflightBundleStatuses";
/// Most bundle ids one status call may ask about, as Jito allows.
const STATUS_IDS_MAX: usize = 5;

/// A path the engine answers JSON-RPC on, by the methods it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Endpoint {
    /// `sendTransaction`.
    Transactions,
    /// `getBundleStatuses`, `getInflightBundleStatuses`.
    Bundles,
}

/// The JSON-RPC endpoint behind `path`, if it is one.
pub(super) fn endpoint(path: &str) -> Option<Endpoint> {
    match path {
        TRANSACTIONS_PATH => Some(Endpoint::Transactions),
        BUNDLES_PATH | GET_BUNDLE_STATUSES_PATH | GET_INFLIGHT_BUNDLE_STATUSES_PATH => {
            Some(Endpoint::Bundles)
        }
        _ => None,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    SendTransaction,
    GetBundleStatuses,
    GetInflightBundleStatuses,
}

impl Endpoint {
    fn method(self, name: &str) -> Option<Method> {
        match (self, name) {
            (Endpoint::Transactions, "sendTransaction") => Some(Method::SendTransaction),
            (Endpoint::Bundles, "getBundleStatuses") => Some(Method::GetBundleStatuses),
            (Endpoint::Bundles, "getInflightBundleStatuses") => {
                Some(Method::GetInflightBundleStatuses)
            }
            _ => None,
        }
    }

    fn serves(self) -> &'static str {
        match self {
            Endpoint::Transactions => "sendTransaction",
            Endpoint::Bundles => "getBundleStatuses and getInflightBundleStatuses",
        }
    }
}

/// Answers one request on a JSON-RPC path.
pub(super) async fn serve(
    sh: &Shared,
    region: usize,
    peer: IpAddr,
    endpoint: Endpoint,
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) {
    let authorized = authorize(sh, req.headers());
    let mut body = req.into_body();
    let c = &sh.counters;
    // The body is read even for a refused call, to echo its id.
    let bytes = match (read_body(&mut body).await, authorized) {
        (Err(None), _) => return,
        (read, Err(refusal)) => {
            let id = read
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .and_then(|v| v.get("id").cloned())
                .unwrap_or(Value::Null);
            return answer(
                &mut respond,
                401,
                error(&id, code::UNAUTHORIZED, refusal.message()),
            );
        }
        (Err(Some(msg)), Ok(())) => {
            inc(&c.body_too_large);
            return answer(
                &mut respond,
                413,
                error(&Value::Null, code::INVALID_REQUEST, &msg),
            );
        }
        (Ok(b), Ok(())) => b,
    };
    if endpoint == Endpoint::Transactions {
        inc(&c.send_transaction_calls);
    }
    let request: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return answer(
                &mut respond,
                200,
                error(&Value::Null, code::PARSE_ERROR, &e.to_string()),
            );
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let name = request.get("method").and_then(Value::as_str).unwrap_or("");
    let Some(method) = endpoint.method(name) else {
        let msg = format!("Method not found: this path serves {}", endpoint.serves());
        return answer(&mut respond, 200, error(&id, code::METHOD_NOT_FOUND, &msg));
    };
    let what = match method {
        Method::SendTransaction => "send transactions",
        Method::GetBundleStatuses | Method::GetInflightBundleStatuses => "ask bundle statuses",
    };
    if let Some((status, refusal)) = refused(sh, region, peer, what, &id) {
        return answer(&mut respond, status, refusal);
    }
    let result = match method {
        Method::SendTransaction => match transaction(&request) {
            Ok(sig) => {
                inc(&c.transactions_accepted);
                Ok(Value::String(sig))
            }
            Err(msg) => {
                inc(&c.transactions_rejected);
                Err(msg)
            }
        },
        Method::GetBundleStatuses => {
            inc(&c.status_calls);
            bundle_ids(&request).map(|ids| bundle_statuses(sh, &ids))
        }
        Method::GetInflightBundleStatuses => {
            inc(&c.inflight_status_calls);
            bundle_ids(&request).map(|ids| inflight_statuses(sh, &ids))
        }
    };
    let body = match result {
        Ok(result) => json!({"jsonrpc": "2.0", "result": result, "id": id}),
        Err(msg) => error(&id, code::INVALID_PARAMS, &msg),
    };
    answer(&mut respond, 200, body);
}

/// Runs the gate for a call from `peer` (who would `what`); the HTTP status and body of a
/// refusal, in Jito's words, or `None` when it passes.
fn refused(
    sh: &Shared,
    region: usize,
    peer: IpAddr,
    what: &str,
    id: &Value,
) -> Option<(u16, Value)> {
    Some(match gate(sh, region, peer, sentlog::monotonic_ns()) {
        Gate::Denied(_) => {
            let msg = format!("source {peer} is not allowed to {what}");
            (403, error(id, code::FORBIDDEN, &msg))
        }
        Gate::Early(ms) | Gate::Storm(ms) => {
            (429, error(id, code::RATE_LIMITED, &rate_limit_message(ms)))
        }
        Gate::Throttled => (429, error(id, code::RATE_LIMITED, GLOBAL_THROTTLE_MESSAGE)),
        Gate::Pass => return None,
    })
}

/// The ids a status call asks about, each as written and decoded.
fn bundle_ids(request: &Value) -> Result<Vec<(&str, [u8; 32])>, String> {
    const SHAPE: &str = "params must be [[bundle_id, ...]]: one array of 1 to 5 bundle ids, \
        each 64 hex digits";
    let list = request
        .get("params")
        .and_then(Value::as_array)
        .and_then(|p| p.first())
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or(SHAPE)?;
    if list.len() > STATUS_IDS_MAX {
        return Err(format!(
            "at most {STATUS_IDS_MAX} bundle ids per call, got {}",
            list.len()
        ));
    }
    list.iter()
        .map(|v| {
            let s = v.as_str().ok_or(SHAPE)?;
            let id = validate::unhex(s)
                .ok_or_else(|| format!("bundle id {s:?} is not 64 hex digits"))?;
            Ok((s, id))
        })
        .collect()
}

/// `getInflightBundleStatuses`' result.
fn inflight_statuses(sh: &Shared, ids: &[(&str, [u8; 32])]) -> Value {
    let now_ns = sh.elapsed_ns();
    let landing = sh.landing.lock().expect("landing lock");
    let value: Vec<Value> = ids
        .iter()
        .map(|(asked, id)| {
            let state = landing.state(id, now_ns);
            let landed_slot = match state {
                State::Landed { at_ns } => json!(sh.slot_at(at_ns)),
                _ => Value::Null,
            };
            json!({"bundle_id": asked, "status": state.name(), "landed_slot": landed_slot})
        })
        .collect();
    json!({"context": {"slot": sh.slot_at(now_ns)}, "value": value})
}

/// `getBundleStatuses`' result: an entry for a landed bundle, `null` for any other.
fn bundle_statuses(sh: &Shared, ids: &[(&str, [u8; 32])]) -> Value {
    let now_ns = sh.elapsed_ns();
    let current_slot = sh.slot_at(now_ns);
    let landing = sh.landing.lock().expect("landing lock");
    let value: Vec<Value> = ids
        .iter()
        .map(|(asked, id)| {
            let State::Landed { at_ns } = landing.state(id, now_ns) else {
                return Value::Null;
            };
            let slot = sh.slot_at(at_ns);
            let transactions: Vec<String> = landing
                .signatures(id)
                .unwrap_or_default()
                .iter()
                .map(|sig| {
                    let mut b58 = [0u8; SIG_B58_MAX];
                    let n = validate::base58_sig(sig, &mut b58);
                    String::from_utf8_lossy(&b58[..n]).into_owned()
                })
                .collect();
            json!({
                "bundle_id": asked,
                "transactions": transactions,
                "slot": slot,
                "confirmation_status": confirmation(slot, current_slot),
                "err": {"Ok": null},
            })
        })
        .collect();
    json!({"context": {"slot": current_slot}, "value": value})
}

/// The request's transaction, checked as a bundle's packet is: its first signature in base58.
fn transaction(request: &Value) -> Result<String, String> {
    let params = request.get("params").and_then(Value::as_array);
    let text = params
        .and_then(|p| p.first())
        .and_then(Value::as_str)
        .ok_or("params[0] must be the transaction as a string")?;
    let encoding = params
        .and_then(|p| p.get(1))
        .and_then(|o| o.get("encoding"))
        .and_then(Value::as_str)
        .unwrap_or("base58");
    let data = match encoding {
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("params[0]: not base64: {e}"))?,
        "base58" => bs58::decode(text)
            .into_vec()
            .map_err(|e| format!("params[0]: not base58: {e}"))?,
        other => return Err(format!("unknown encoding {other:?}")),
    };
    let size = data.len() as u64;
    let bundle = Bundle {
        header: None,
        packets: vec![Packet {
            data: data.clone(),
            meta: Some(Meta {
                size,
                ..Meta::default()
            }),
        }],
    };
    validate::check_bundle(&bundle).map_err(|r| r.message)?;
    let mut b58 = [0u8; SIG_B58_MAX];
    let n = validate::base58_sig(validate::first_signature(&data), &mut b58);
    Ok(String::from_utf8_lossy(&b58[..n]).into_owned())
}

fn error(id: &Value, code: i32, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": id})
}

fn answer(respond: &mut SendResponse<Bytes>, status: u16, body: Value) {
    let mut head = Response::builder()
        .status(status)
        .header("content-type", "application/json");
    if status == 401 {
        // HTTP requires a 401 to name the scheme it wants.
        head = head.header("www-authenticate", "Bearer");
    }
    let head = head.body(()).expect("static head");
    let Ok(mut stream) = respond.send_response(head, false) else {
        return;
    };
    let _ = stream.send_data(Bytes::from(body.to_string()), true);
}
