//! The engine's HTTP JSON-RPC as Jito serves it beside gRPC: `sendTransaction` on
//! `/api/v1/transactions`, under the same per-(source, region) rule as SendBundle and the faults
//! that answer in its place (`deny`, `throttle`, `storm`; the stream faults are SendBundle's
//! alone), answered in Jito's shape and words: the signature, or HTTP 429 with -32097 ("Retry after
//! Nms", "Network congested. …"), 403 for a denied source, -32602 for a transaction that does
//! not decode or sanitize.

use std::net::IpAddr;

use base64::Engine as _;
use bytes::Bytes;
use h2::RecvStream;
use h2::server::SendResponse;
use http::{Request, Response};
use serde_json::{Value, json};

use super::Shared;
use super::server::{Gate, gate, read_body};
use super::stats::inc;
use super::validate::{self, SIG_B58_MAX};
use crate::sentlog;
use bundle_relay::jito::{GLOBAL_THROTTLE_MESSAGE, code, rate_limit_message};
use bundle_relay::proto::bundle::Bundle;
use bundle_relay::proto::packet::{Meta, Packet};

/// Answers one request on the JSON-RPC path.
pub(super) async fn serve(
    sh: &Shared,
    region: usize,
    peer: IpAddr,
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) {
    let mut body = req.into_body();
    let c = &sh.counters;
    let bytes = match read_body(&mut body).await {
        Ok(b) => b,
        Err(Some(msg)) => {
            inc(&c.body_too_large);
            return answer(
                &mut respond,
                413,
                error(&Value::Null, code::INVALID_REQUEST, &msg),
            );
        }
        Err(None) => return,
    };
    inc(&c.send_transaction_calls);
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
    if request.get("method").and_then(Value::as_str) != Some("sendTransaction") {
        let msg = "Method not found: this path serves sendTransaction";
        return answer(&mut respond, 200, error(&id, code::METHOD_NOT_FOUND, msg));
    }
    match gate(sh, region, peer, sentlog::monotonic_ns()) {
        Gate::Denied(_) => {
            let msg = format!("source {peer} is not allowed to send transactions");
            return answer(&mut respond, 403, error(&id, code::FORBIDDEN, &msg));
        }
        Gate::Early(ms) | Gate::Storm(ms) => {
            return answer(
                &mut respond,
                429,
                error(&id, code::RATE_LIMITED, &rate_limit_message(ms)),
            );
        }
        Gate::Throttled => {
            return answer(
                &mut respond,
                429,
                error(&id, code::RATE_LIMITED, GLOBAL_THROTTLE_MESSAGE),
            );
        }
        Gate::Pass => {}
    }
    match transaction(&request) {
        Ok(sig) => {
            inc(&c.transactions_accepted);
            let body = json!({"jsonrpc": "2.0", "result": sig, "id": id});
            answer(&mut respond, 200, body);
        }
        Err(msg) => {
            inc(&c.transactions_rejected);
            answer(&mut respond, 200, error(&id, code::INVALID_PARAMS, &msg));
        }
    }
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
    // Checked: a signature count below 128 (one byte), then the first signature.
    let sig: &[u8; 64] = data[1..65]
        .try_into()
        .expect("a checked transaction is signed");
    let mut b58 = [0u8; SIG_B58_MAX];
    let n = validate::base58_sig(sig, &mut b58);
    Ok(String::from_utf8_lossy(&b58[..n]).into_owned())
}

fn error(id: &Value, code: i32, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": id})
}

fn answer(respond: &mut SendResponse<Bytes>, status: u16, body: Value) {
    let head = Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(())
        .expect("static head");
    let Ok(mut stream) = respond.send_response(head, false) else {
        return;
    };
    let _ = stream.send_data(Bytes::from(body.to_string()), true);
}
