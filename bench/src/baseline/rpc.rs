//! Jito's HTTP JSON-RPC, decoded the conventional way: serde_json into serde structs, base58 or
//! base64 into `Vec`s, bincode into `VersionedTransaction` (trailing bytes rejected) and
//! `sanitize()`. Each transaction's raw bytes are kept as they arrived and become one packet.

use std::borrow::Cow;

use base64::Engine as _;
use bincode::Options as _;
use bundle_relay::proto::packet::{Meta, Packet};
use bundle_relay::wire::{BUNDLE_TXS_MAX, Encoding, PACKET_DATA_SIZE};
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use solana_transaction::versioned::VersionedTransaction;

use bundle_relay::jito::TIP_ACCOUNTS_JSON;
pub use bundle_relay::jito::code;

/// A JSON-RPC error: code and a message naming the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
    fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }
}

#[derive(Deserialize)]
struct RawRequest<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct SendOptions<'a> {
    #[serde(default, borrow)]
    encoding: Option<Cow<'a, str>>,
}

/// A parsed request envelope; `id` is the raw JSON to echo (`null` when absent).
pub struct Request<'a> {
    pub id: &'a str,
    pub method: Cow<'a, str>,
    pub params: Option<&'a RawValue>,
}

/// Parses the envelope. On error, returns the id when it could be read, to echo it.
pub fn parse_request(body: &[u8]) -> Result<Request<'_>, (&str, RpcError)> {
    let raw: RawRequest<'_> = serde_json::from_slice(body).map_err(|e| {
        (
            "null",
            RpcError::new(code::PARSE_ERROR, format!("parse error: {e}")),
        )
    })?;
    let id = raw.id.map_or("null", RawValue::get);
    if raw.jsonrpc.as_deref() != Some("2.0") {
        return Err((
            id,
            RpcError::new(
                code::INVALID_REQUEST,
                "invalid request: \"jsonrpc\" must be \"2.0\"",
            ),
        ));
    }
    let Some(method) = raw.method else {
        return Err((
            id,
            RpcError::new(code::INVALID_REQUEST, "invalid request: missing \"method\""),
        ));
    };
    Ok(Request {
        id,
        method,
        params: raw.params,
    })
}

/// A validated bundle, ready to send: one packet per transaction plus Jito's bundle id.
#[derive(Debug, Clone)]
pub struct DecodedBundle {
    pub packets: Vec<Packet>,
    /// Jito's bundle id: lowercase hex SHA-256 of the first signatures (base58) joined by ",".
    pub bundle_id: String,
    /// First signature of the first transaction, base58.
    pub first_signature: String,
}

fn params_array(params: Option<&RawValue>) -> Result<Vec<&RawValue>, RpcError> {
    let Some(params) = params else {
        return Err(RpcError::params("invalid params: missing \"params\""));
    };
    serde_json::from_str(params.get())
        .map_err(|e| RpcError::params(format!("invalid params: expected an array: {e}")))
}

fn encoding_of(options: Option<&&RawValue>) -> Result<Encoding, RpcError> {
    let Some(options) = options else {
        return Ok(Encoding::default());
    };
    let options: SendOptions<'_> = serde_json::from_str(options.get())
        .map_err(|e| RpcError::params(format!("invalid params: options must be an object: {e}")))?;
    match options.encoding.as_deref() {
        None | Some("base58") => Ok(Encoding::Base58),
        Some("base64") => Ok(Encoding::Base64),
        Some(other) => Err(RpcError::params(format!(
            "invalid params: unsupported encoding \"{other}\" (expected base58 or base64)"
        ))),
    }
}

/// `sendBundle` params: `[[tx, ...], {"encoding": ...}?]`.
pub fn decode_send_bundle(params: Option<&RawValue>) -> Result<DecodedBundle, RpcError> {
    let params = params_array(params)?;
    if params.is_empty() || params.len() > 2 {
        return Err(RpcError::params(format!(
            "invalid params: expected [[tx, ...], options?], got {} elements",
            params.len()
        )));
    }
    let encoding = encoding_of(params.get(1))?;
    let txs: Vec<Cow<'_, str>> = serde_json::from_str(params[0].get()).map_err(|e| {
        RpcError::params(format!(
            "invalid params: first element must be an array of strings: {e}"
        ))
    })?;
    if txs.is_empty() || txs.len() > BUNDLE_TXS_MAX {
        return Err(RpcError::params(format!(
            "invalid params: a bundle holds 1 to {BUNDLE_TXS_MAX} transactions, got {}",
            txs.len()
        )));
    }
    decode_txs(txs.iter().map(|t| t.as_ref()), txs.len(), encoding)
}

/// `sendTransaction` params: `[tx, {"encoding": ...}?]`, sent as a one-transaction bundle.
pub fn decode_send_transaction(params: Option<&RawValue>) -> Result<DecodedBundle, RpcError> {
    let params = params_array(params)?;
    if params.is_empty() || params.len() > 2 {
        return Err(RpcError::params(format!(
            "invalid params: expected [tx, options?], got {} elements",
            params.len()
        )));
    }
    let encoding = encoding_of(params.get(1))?;
    let tx: Cow<'_, str> = serde_json::from_str(params[0].get()).map_err(|e| {
        RpcError::params(format!(
            "invalid params: first element must be a transaction string: {e}"
        ))
    })?;
    decode_txs(std::iter::once(tx.as_ref()), 1, encoding)
}

fn decode_txs<'a>(
    txs: impl Iterator<Item = &'a str>,
    count: usize,
    encoding: Encoding,
) -> Result<DecodedBundle, RpcError> {
    let mut packets = Vec::with_capacity(count);
    let mut joined = String::with_capacity(count * 89);
    let mut first_signature = String::new();
    for (i, s) in txs.enumerate() {
        let (bytes, signature) = decode_tx(i, s, encoding)?;
        if i == 0 {
            first_signature.clone_from(&signature);
        } else {
            joined.push(',');
        }
        joined.push_str(&signature);
        let size = bytes.len() as u64;
        packets.push(Packet {
            data: bytes,
            meta: Some(Meta {
                size,
                ..Meta::default()
            }),
        });
    }
    Ok(DecodedBundle {
        packets,
        bundle_id: bundle_id_of(&joined),
        first_signature,
    })
}

/// Lowercase hex SHA-256 of the comma-joined base58 first signatures (Jito's rule).
pub fn bundle_id_of(joined_signatures: &str) -> String {
    let digest = Sha256::digest(joined_signatures.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// Decodes and validates transaction `i`; returns its wire bytes and first signature (base58).
pub fn decode_tx(i: usize, s: &str, encoding: Encoding) -> Result<(Vec<u8>, String), RpcError> {
    let max = encoding.max_encoded_len();
    if s.len() > max {
        return Err(RpcError::params(format!(
            "transaction {i}: {} string is {} chars, longest allowed is {max}",
            encoding.name(),
            s.len()
        )));
    }
    let bytes = match encoding {
        Encoding::Base58 => bs58::decode(s)
            .into_vec()
            .map_err(|e| RpcError::params(format!("transaction {i}: invalid base58: {e}")))?,
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| RpcError::params(format!("transaction {i}: invalid base64: {e}")))?,
    };
    if bytes.len() > PACKET_DATA_SIZE {
        return Err(RpcError::params(format!(
            "transaction {i}: {} bytes, longest allowed is {PACKET_DATA_SIZE}",
            bytes.len()
        )));
    }
    let tx: VersionedTransaction = bincode::DefaultOptions::new()
        .with_limit(PACKET_DATA_SIZE as u64)
        .with_fixint_encoding()
        .reject_trailing_bytes()
        .deserialize(&bytes)
        .map_err(|e| RpcError::params(format!("transaction {i}: failed to deserialize: {e}")))?;
    tx.sanitize()
        .map_err(|e| RpcError::params(format!("transaction {i}: failed to sanitize: {e}")))?;
    let Some(signature) = tx.signatures.first() else {
        return Err(RpcError::params(format!(
            "transaction {i}: has no signatures"
        )));
    };
    Ok((bytes, signature.to_string()))
}

/// `{"jsonrpc":"2.0","result":<result_json>,"id":<id>}`.
pub fn result_body(id: &str, result_json: &str) -> String {
    let mut out = String::with_capacity(40 + id.len() + result_json.len());
    out.push_str("{\"jsonrpc\":\"2.0\",\"result\":");
    out.push_str(result_json);
    out.push_str(",\"id\":");
    out.push_str(id);
    out.push('}');
    out
}

/// `{"jsonrpc":"2.0","error":{"code":..,"message":..},"id":<id>}`.
pub fn error_body(id: &str, error: &RpcError) -> String {
    let message = serde_json::to_string(&error.message).unwrap_or_else(|_| "\"\"".into());
    format!(
        "{{\"jsonrpc\":\"2.0\",\"error\":{{\"code\":{},\"message\":{message}}},\"id\":{id}}}",
        error.code
    )
}

/// The `getTipAccounts` result as JSON.
pub fn tip_accounts_json() -> &'static str {
    std::str::from_utf8(TIP_ACCOUNTS_JSON).expect("the tip accounts are ASCII")
}
