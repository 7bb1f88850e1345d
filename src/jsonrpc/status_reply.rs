//! The bundle-status queries the relay forwards to an engine (`getBundleStatuses`,
//! `getInflightBundleStatuses`), and the engine's answers to them, read without allocating. It
//! is NOT a general response parser: the whole document is checked by the same strict scanner as
//! requests, then only `result.context.slot` and the elements of `result.value` are kept (raw,
//! for `getBundleStatuses`, whose entries the relay passes on as the engine wrote them; as
//! `bundle_id` / `status` / `landed_slot`, for `getInflightBundleStatuses`, which the relay
//! merges with its own record).

use super::json_str::JsonStr;
use super::reply::{
    assert_reads_as_serde_json, checked_object, read_error, serde_error, unescaped,
};
use super::scan::Walk;

/// What an engine answered to a status query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusReply<'a> {
    /// A `result` object: `context.slot` (0 when absent or not an integer) and the raw text of
    /// `value` when it is an array.
    Result { slot: u64, value: Option<&'a [u8]> },
    /// An `error` (it wins over a `result`): its `code` (0 when absent) and `message`.
    Error { code: i64, message: JsonStr<'a> },
}

/// The engine's answer in `body`; `None` when it is not a JSON object holding an object
/// `result` or an `error`.
pub fn parse_status_reply(body: &[u8]) -> Option<StatusReply<'_>> {
    let mut w = checked_object(body)?;
    let (mut result, mut error) = (None, None);
    w.members(|key, w| {
        if key.eq_str("result") {
            result = if w.peek() == b'{' {
                Some(result_object(w))
            } else {
                w.skip();
                None
            };
        } else if key.eq_str("error") {
            let (code, message) = read_error(w);
            error = Some(StatusReply::Error { code, message });
        } else {
            w.skip();
        }
    });
    error.or(result)
}

fn result_object<'a>(w: &mut Walk<'a>) -> StatusReply<'a> {
    let (mut slot, mut value) = (0, None);
    w.members(|key, w| {
        if key.eq_str("context") {
            // The last one counts, as in serde_json, whatever its type.
            slot = if w.peek() == b'{' {
                context_slot(w)
            } else {
                w.skip();
                0
            };
        } else if key.eq_str("value") {
            value = (w.peek() == b'[').then(|| w.raw_value());
            if value.is_none() {
                w.skip();
            }
        } else {
            w.skip();
        }
    });
    StatusReply::Result { slot, value }
}

fn context_slot(w: &mut Walk<'_>) -> u64 {
    let mut slot = 0;
    w.members(|key, w| {
        let raw = w.raw_value();
        if key.eq_str("slot") {
            slot = parse_u64(raw).unwrap_or(0);
        }
    });
    slot
}

/// A non-negative integer's JSON text; `None` for anything else.
fn parse_u64(raw: &[u8]) -> Option<u64> {
    core::str::from_utf8(raw).ok()?.parse().ok()
}

/// Calls `f` with the raw text of each element of `value` (a `value` array from
/// [`parse_status_reply`], so already checked), in order.
pub fn for_each_element<'a>(value: &'a [u8], mut f: impl FnMut(&'a [u8])) {
    let mut w = Walk::new(value);
    if w.peek() != b'[' || !w.enter() {
        return;
    }
    loop {
        f(w.raw_value());
        if !w.next() {
            break;
        }
    }
}

/// One element of a `getInflightBundleStatuses` answer, as far as the relay reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InflightEntry<'a> {
    pub bundle_id: Option<JsonStr<'a>>,
    pub status: Option<JsonStr<'a>>,
    /// `landed_slot` when it is a non-negative integer.
    pub landed_slot: Option<u64>,
}

/// The element `raw` (from [`for_each_element`]) read as an inflight status; all `None` when it
/// is not an object.
pub fn inflight_entry<'a>(raw: &'a [u8]) -> InflightEntry<'a> {
    let mut e = InflightEntry {
        bundle_id: None,
        status: None,
        landed_slot: None,
    };
    let mut w = Walk::new(raw);
    if w.peek() != b'{' {
        return e;
    }
    let string = |w: &mut Walk<'a>| {
        if w.peek() == b'"' {
            Some(w.string())
        } else {
            w.skip();
            None
        }
    };
    w.members(|key, w| {
        if key.eq_str("bundle_id") {
            e.bundle_id = string(w);
        } else if key.eq_str("status") {
            e.status = string(w);
        } else if key.eq_str("landed_slot") {
            e.landed_slot = parse_u64(w.raw_value());
        } else {
            w.skip();
        }
    });
    e
}

/// The longest status query [`write_status_query`] writes (five ids).
pub const STATUS_QUERY_LEN_MAX: usize = QUERY_HEAD.len()
    + "getInflightBundleStatuses".len()
    + QUERY_MID.len()
    + 5 * (64 + 2)
    + 4
    + QUERY_TAIL.len();

const QUERY_HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":""#;
const QUERY_MID: &[u8] = br#"","params":[["#;
const QUERY_TAIL: &[u8] = b"]]}";

/// Writes `method` (`getBundleStatuses` or `getInflightBundleStatuses`) of the bundle `ids`
/// (lowercase hex, as Jito writes them) into `out`, returning its length; `None` when it does
/// not fit.
pub fn write_status_query(method: &str, ids: &[[u8; 32]], out: &mut [u8]) -> Option<usize> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut n = 0;
    let mut put = |b: &[u8]| -> Option<()> {
        out.get_mut(n..n + b.len())?.copy_from_slice(b);
        n += b.len();
        Some(())
    };
    put(QUERY_HEAD)?;
    put(method.as_bytes())?;
    put(QUERY_MID)?;
    for (i, id) in ids.iter().enumerate() {
        let mut text = [0u8; 64];
        for (j, b) in id.iter().enumerate() {
            text[2 * j] = HEX[usize::from(b >> 4)];
            text[2 * j + 1] = HEX[usize::from(b & 15)];
        }
        put(if i == 0 { b"\"" } else { b",\"" })?;
        put(&text)?;
        put(b"\"")?;
    }
    put(QUERY_TAIL)?;
    Some(n)
}

/// The `status_reply` fuzz target's body (also run as a seeded proptest in
/// `tests/jsonrpc/response.rs`): whatever the bytes, [`parse_status_reply`] and the element
/// readers must not panic and must read what serde_json reads (the last `error`, else the last
/// `result` when it is an object: its `context.slot`, its `value`'s elements and, per element,
/// `bundle_id`, `status` and `landed_slot`), except for documents nested deeper than the
/// scanner allows and numbers past f64's range, which serde_json refuses.
pub fn fuzz_status_reply(data: &[u8]) {
    use serde_json::Value;
    type Entry = (Option<String>, Option<String>, Option<u64>);
    let ours = parse_status_reply(data).map(|r| match r {
        StatusReply::Error { code, message } => Err((code, unescaped(&message))),
        StatusReply::Result { slot, value } => {
            let mut entries: Vec<(Value, Entry)> = Vec::new();
            if let Some(v) = value {
                for_each_element(v, |raw| {
                    let e = inflight_entry(raw);
                    let element: Value =
                        serde_json::from_slice(raw).expect("an element of checked JSON is JSON");
                    let text = |s: Option<JsonStr<'_>>| s.as_ref().map(unescaped);
                    entries.push((element, (text(e.bundle_id), text(e.status), e.landed_slot)));
                });
            }
            Ok((slot, value.map(|_| entries)))
        }
    });
    assert_reads_as_serde_json(data, ours, |m| match (m.get("error"), m.get("result")) {
        (Some(e), _) => Some(Err(serde_error(e))),
        (None, Some(r @ Value::Object(_))) => {
            let slot = r["context"]["slot"].as_u64().unwrap_or(0);
            let value = r.get("value").and_then(Value::as_array).map(|a| {
                a.iter()
                    .map(|el| {
                        let s = |k: &str| el.get(k).and_then(Value::as_str).map(str::to_string);
                        let landed = el.get("landed_slot").and_then(Value::as_u64);
                        (el.clone(), (s("bundle_id"), s("status"), landed))
                    })
                    .collect::<Vec<_>>()
            });
            Some(Ok((slot, value)))
        }
        _ => None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFLIGHT: &str = r#"{"jsonrpc":"2.0","result":{"context":{"slot":280999028},"value":[{"bundle_id":"b1","status":"Landed","landed_slot":280999025},{"bundle_id":"b2","status":"Pending","landed_slot":null}]},"id":1}"#;

    #[test]
    fn an_inflight_answer_gives_its_slot_and_each_entry() {
        let Some(StatusReply::Result { slot, value }) = parse_status_reply(INFLIGHT.as_bytes())
        else {
            panic!()
        };
        assert_eq!(slot, 280_999_028);
        let mut seen = Vec::new();
        for_each_element(value.unwrap(), |raw| {
            let e = inflight_entry(raw);
            seen.push((
                e.bundle_id.unwrap().as_str().unwrap().to_string(),
                e.status.unwrap().as_str().unwrap().to_string(),
                e.landed_slot,
            ));
        });
        assert_eq!(
            seen,
            [
                ("b1".into(), "Landed".into(), Some(280_999_025)),
                ("b2".into(), "Pending".into(), None)
            ]
        );
    }

    #[test]
    fn bundle_status_entries_come_back_raw_nulls_included() {
        let body = br#"{"result":{"context":{"slot":7},"value":[null, {"bundle_id":"x","transactions":["s"],"slot":5,"confirmation_status":"finalized","err":{"Ok":null}}]}}"#;
        let Some(StatusReply::Result { value, .. }) = parse_status_reply(body) else {
            panic!()
        };
        let mut raws = Vec::new();
        for_each_element(value.unwrap(), |raw| raws.push(raw.to_vec()));
        assert_eq!(raws[0], b"null");
        assert!(raws[1].starts_with(b"{\"bundle_id\":\"x\"") && raws[1].ends_with(b"}}"));
    }

    #[test]
    fn an_error_wins_and_anything_else_is_no_reply() {
        let r = parse_status_reply(
            br#"{"result":{"value":[]},"error":{"code":-32097,"message":"Network congested. Endpoint is globally rate limited."}}"#,
        );
        assert!(matches!(r, Some(StatusReply::Error { code: -32097, .. })));
        for body in ["", "[]", "{}", r#"{"result":"x"}"#, r#"{"result":{}"#] {
            assert_eq!(parse_status_reply(body.as_bytes()), None, "{body:?}");
        }
    }

    #[test]
    fn the_query_is_jitos_request_as_serde_json_reads_it() {
        let ids = [[0xab; 32], [0x01; 32], [0; 32], [0xff; 32], [7; 32]];
        let mut out = [0u8; STATUS_QUERY_LEN_MAX];
        let n = write_status_query("getInflightBundleStatuses", &ids, &mut out).unwrap();
        assert_eq!(n, STATUS_QUERY_LEN_MAX, "five ids is the longest");
        let v: serde_json::Value = serde_json::from_slice(&out[..n]).unwrap();
        assert_eq!(v["method"], "getInflightBundleStatuses");
        assert_eq!(v["params"][0][0], "ab".repeat(32));
        assert_eq!(v["params"][0].as_array().unwrap().len(), 5);
        assert_eq!(
            write_status_query("getBundleStatuses", &ids, &mut out[..40]),
            None
        );
    }
}
