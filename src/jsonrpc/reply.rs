//! An engine's JSON-RPC answer to a call the relay forwarded (`sendTransaction`), read without
//! allocating, and the request that call sends. It is NOT a general response parser: the whole
//! document is checked by the same strict scanner as requests, then only the top-level `result`
//! and `error` (`code`, `message`) are kept.

use base64::Engine as _;

use super::json_str::JsonStr;
use super::limits::DEPTH_MAX;
use super::scan::{Scanner, Walk};

/// What the engine answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply<'a> {
    /// `result` as a string: `sendTransaction`'s signature.
    Result(JsonStr<'a>),
    /// `result` of another JSON type.
    OtherResult,
    /// `error`: its `code` (0 when absent or not an integer) and `message` (empty when absent).
    Error { code: i64, message: JsonStr<'a> },
}

/// The engine's answer in `body`; `None` when it is not a JSON object holding `result` or
/// `error` (an `error` wins when both are there).
pub fn parse_reply(body: &[u8]) -> Option<Reply<'_>> {
    let mut w = checked_object(body)?;
    let (mut result, mut error) = (None, None);
    w.members(|key, w| {
        if key.eq_str("result") {
            result = Some(if w.peek() == b'"' {
                Reply::Result(w.string())
            } else {
                w.skip();
                Reply::OtherResult
            });
        } else if key.eq_str("error") {
            let (code, message) = read_error(w);
            error = Some(Reply::Error { code, message });
        } else {
            w.skip();
        }
    });
    error.or(result)
}

/// `body` checked whole as one JSON object (JSON whitespace around it allowed), and a cursor at
/// its start; `None` for anything else.
pub(super) fn checked_object(body: &[u8]) -> Option<Walk<'_>> {
    // JSON's whitespace only (not a form feed, which `is_ascii_whitespace` would skip).
    let start = body
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))?;
    let body = &body[start..];
    if body[0] != b'{' {
        return None;
    }
    let mut s = Scanner::new(body);
    s.value(0).ok()?;
    s.end().ok()?;
    Some(Walk::new(body))
}

/// The `error` member's value under the cursor: its `code` (0 when absent or not an integer)
/// and `message` (empty when absent or not a string), the last of each counting, as in
/// serde_json.
pub(super) fn read_error<'a>(w: &mut Walk<'a>) -> (i64, JsonStr<'a>) {
    let (mut code, mut message) = (0, JsonStr::EMPTY);
    if w.peek() != b'{' {
        w.skip();
        return (code, message);
    }
    w.members(|key, w| {
        if key.eq_str("code") {
            code = parse_i64(w.raw_value()).unwrap_or(0);
        } else if key.eq_str("message") {
            message = if w.peek() == b'"' {
                w.string()
            } else {
                w.skip();
                JsonStr::EMPTY
            };
        } else {
            w.skip();
        }
    });
    (code, message)
}

/// An integer's JSON text (`-32097`); `None` for a fraction, an exponent or a value past i64.
fn parse_i64(raw: &[u8]) -> Option<i64> {
    core::str::from_utf8(raw).ok()?.parse().ok()
}

/// The longest `sendTransaction` request [`write_send_transaction`] writes for a transaction
/// of `tx_len` bytes.
pub const fn send_transaction_len(tx_len: usize) -> usize {
    SEND_TX_HEAD.len() + tx_len.div_ceil(3) * 4 + SEND_TX_TAIL.len()
}

const SEND_TX_HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":[""#;
const SEND_TX_TAIL: &[u8] = br#"",{"encoding":"base64"}]}"#;

/// Writes `sendTransaction` of the wire transaction `tx` (base64, as Jito's clients send it)
/// into `out`, returning its length; `None` when it does not fit.
pub fn write_send_transaction(tx: &[u8], out: &mut [u8]) -> Option<usize> {
    let head = SEND_TX_HEAD.len();
    out.get_mut(..head)?.copy_from_slice(SEND_TX_HEAD);
    let n = base64::engine::general_purpose::STANDARD
        .encode_slice(tx, out.get_mut(head..)?)
        .ok()?;
    let end = head + n;
    out.get_mut(end..end + SEND_TX_TAIL.len())?
        .copy_from_slice(SEND_TX_TAIL);
    Some(end + SEND_TX_TAIL.len())
}

/// The `engine_reply` fuzz target's body (also run as a seeded proptest in
/// `tests/jsonrpc/response.rs`): whatever the bytes, [`parse_reply`] must not panic and must
/// read what serde_json reads (an object's last `error`, else its last `result`; `code` as an
/// i64, else 0; `message` as a string, else empty), except for documents nested deeper than
/// the scanner's [`DEPTH_MAX`], which it refuses, and numbers past f64's
/// range, which RFC 8259 allows and serde_json refuses (the scanner keeps them as text).
pub fn fuzz_reply(data: &[u8]) {
    let ours = parse_reply(data).map(|r| match r {
        Reply::Result(s) => (None, Some(unescaped(&s))),
        Reply::OtherResult => (None, None),
        Reply::Error { code, message } => (Some((code, unescaped(&message))), None),
    });
    assert_reads_as_serde_json(data, ours, |m| match (m.get("error"), m.get("result")) {
        (Some(e), _) => Some((Some(serde_error(e)), None)),
        (None, Some(r)) => Some((None, r.as_str().map(str::to_string))),
        (None, None) => None,
    });
}

/// The differential check of the engine-answer fuzz targets: `ours`, what a reader made of
/// `data`, equals what `theirs` makes of serde_json's top-level object (`None` when `data` is
/// no object), except where serde_json refuses what RFC 8259 allows (numbers past f64's
/// range) or the scanner refuses nesting past [`DEPTH_MAX`].
pub(super) fn assert_reads_as_serde_json<T: PartialEq + core::fmt::Debug>(
    data: &[u8],
    ours: Option<T>,
    theirs: impl FnOnce(&serde_json::Map<String, serde_json::Value>) -> Option<T>,
) {
    let parsed = serde_json::from_slice::<serde_json::Value>(data);
    if parsed
        .as_ref()
        .is_err_and(|e| e.to_string().starts_with("number out of range"))
    {
        return;
    }
    let theirs = match parsed {
        Ok(serde_json::Value::Object(m)) => theirs(&m),
        _ => None,
    };
    let nested = data.iter().filter(|&&b| b == b'[' || b == b'{').count();
    if ours.is_none() && theirs.is_some() && nested > DEPTH_MAX {
        return;
    }
    assert_eq!(ours, theirs, "{:?}", String::from_utf8_lossy(data));
}

/// An `error` member as serde_json reads it: `code` as an i64 else 0, `message` as a string
/// else empty.
pub(super) fn serde_error(e: &serde_json::Value) -> (i64, String) {
    (
        e.get("code")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0),
        e.get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_string(),
    )
}

/// A checked string's content.
pub(super) fn unescaped(s: &JsonStr<'_>) -> String {
    let mut buf = vec![0u8; s.raw().len()];
    let out = s.unescape_into(&mut buf).expect("unescaping never grows");
    String::from_utf8(out.to_vec()).expect("a checked string is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(body: &str) -> (i64, String) {
        match parse_reply(body.as_bytes()) {
            Some(Reply::Error { code, message }) => (code, message.as_str().unwrap().to_string()),
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn a_result_string_is_the_signature() {
        let r = parse_reply(br#" {"jsonrpc":"2.0","result":"5x\u0041y","id":1}"#).unwrap();
        let Reply::Result(s) = r else { panic!("{r:?}") };
        assert_eq!(s.raw(), br"5x\u0041y");
        assert_eq!(
            parse_reply(br#"{"result":{"value":1}}"#),
            Some(Reply::OtherResult)
        );
    }

    #[test]
    fn an_error_keeps_its_code_and_message_and_wins_over_a_result() {
        assert_eq!(
            error(
                r#"{"jsonrpc":"2.0","error":{"code":-32097,"message":"Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: Retry after 1606ms"},"id":1}"#
            ),
            (
                -32097,
                "Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: Retry after 1606ms".into()
            )
        );
        assert_eq!(
            error(r#"{"result":"x","error":{"message":"m","data":[1,2],"code":-32602}}"#),
            (-32602, "m".into())
        );
        assert_eq!(error(r#"{"error":{"code":1.5}}"#), (0, String::new()));
        assert_eq!(error(r#"{"error":"plain"}"#), (0, String::new()));
    }

    #[test]
    fn anything_but_a_json_object_with_result_or_error_is_no_reply() {
        for body in [
            "",
            "\x0c{\"result\":\"x\"}",
            "[]",
            "{}",
            r#"{"id":1}"#,
            r#"{"result":"x""#,
            "upstream connect error",
            r#"{"result":"x"} x"#,
        ] {
            assert_eq!(parse_reply(body.as_bytes()), None, "{body:?}");
        }
    }

    #[test]
    fn send_transaction_is_base64_as_serde_json_reads_it() {
        let tx: Vec<u8> = (0..=255u8).cycle().take(1232).collect();
        let mut out = [0u8; 2048];
        let n = write_send_transaction(&tx, &mut out).unwrap();
        assert_eq!(n, send_transaction_len(tx.len()));
        let v: serde_json::Value = serde_json::from_slice(&out[..n]).unwrap();
        assert_eq!(v["method"], "sendTransaction");
        assert_eq!(v["params"][1]["encoding"], "base64");
        let b64 = v["params"][0].as_str().unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
            tx
        );
        assert_eq!(write_send_transaction(&tx, &mut out[..n - 1]), None);
    }
}
