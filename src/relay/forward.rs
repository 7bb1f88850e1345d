//! A transaction sent without `bundleOnly=true`, as Jito treats it: forwarded to the engine's own
//! JSON-RPC `sendTransaction` (HTTP/2 POST, JSON body, on the same pair and pacing as a bundle),
//! not sent as a one-transaction bundle, which the auction would refuse untipped. Sans-IO: the
//! request's headers, and what the engine's answer means in the terms the retry logic acts on
//! ([`grpc::Outcome`]), so a forwarded call and a SendBundle share one settling path.
//!
//! The engine's JSON-RPC errors drive the limiter as gRPC's do: -32097 with `Retry after Nms`
//! cools the pair exactly that long (without it, a `retry-after` header does, else Jito's one
//! second); -32097 "Network congested. Endpoint is globally rate limited." backs the whole
//! region off (the caller tells it by its text); HTTP 429 without a readable body cools the
//! pair for its `retry-after`, else Jito's one second. -32602 (invalid params: an expired
//! blockhash, say) is a refusal for good; -32603 and an unreadable 200 may have been processed,
//! so they are not sent again; 502/503/504 were not, and are.

use crate::grpc::{self, CallConfig, Code, Outcome, StatusMessage};
use crate::h2::{Connection, Fields, Response, StartError, StreamEnd, StreamId};
use crate::journal::Text;
use crate::jsonrpc::{self, Reply};

/// Jito's rate-limit code, for every throttle it answers.
const RATE_LIMITED: i64 = crate::jito::code::RATE_LIMITED as i64;
const INVALID_PARAMS: i64 = crate::jito::code::INVALID_PARAMS as i64;
const PARSE_ERROR: i64 = crate::jito::code::PARSE_ERROR as i64;
const INVALID_REQUEST: i64 = crate::jito::code::INVALID_REQUEST as i64;
const METHOD_NOT_FOUND: i64 = crate::jito::code::METHOD_NOT_FOUND as i64;

/// Starts `POST path` with the JSON `body` on `conn` (the pair's connection), ending locally
/// after `timeout_ms`.
pub fn start(
    conn: &mut Connection,
    call: &CallConfig,
    path: &str,
    now_ns: u64,
    timeout_ms: u64,
    body: &[u8],
) -> Result<StreamId, StartError> {
    let mut fields = Fields::<6>::new();
    fields.push(b":method", b"POST", false);
    fields.push(b":scheme", call.scheme().as_bytes(), false);
    fields.push(b":path", path.as_bytes(), false);
    fields.push(b":authority", call.authority().as_bytes(), false);
    fields.push(b"content-type", b"application/json", false);
    if let Some(a) = &call.authorization {
        fields.push(b"authorization", a.as_bytes(), true);
    }
    let deadline = now_ns + timeout_ms * 1_000_000;
    conn.start_request(now_ns, fields.as_slice(), Some(deadline), |buf| {
        buf.get_mut(..body.len())?.copy_from_slice(body);
        Some(body.len())
    })
}

/// What a forwarded call came to, and the engine's own words for the record (its error
/// message, or the signature it answered). A stream that ended without a whole answer reads
/// as for gRPC.
pub fn outcome<'a>(resp: &Response<'a>) -> (Outcome<'a>, Text) {
    if resp.end != StreamEnd::Complete {
        return (
            grpc::outcome(resp, grpc::RETRY_AFTER_MS_DEFAULT),
            Text::default(),
        );
    }
    let http = resp
        .headers
        .get(b":status")
        .and_then(|v| core::str::from_utf8(v).ok()?.parse::<u16>().ok())
        .unwrap_or(0);
    let mut buf = [0u8; 256];
    match jsonrpc::parse_reply(resp.body) {
        Some(Reply::Result(sig)) => (Outcome::Ok(sig.raw()), Text::new(sig.raw())),
        Some(Reply::OtherResult) => (Outcome::Ok(b""), Text::default()),
        Some(Reply::Error { code, message }) => {
            let words = message.unescape_into(&mut buf).map_or(message.raw(), |w| w);
            let text = Text::new(words);
            let outcome = match code {
                RATE_LIMITED => Outcome::RateLimited {
                    retry_after_ms: wait_said(words, resp)
                        .unwrap_or(grpc::RETRY_AFTER_MS_DEFAULT)
                        .min(grpc::RETRY_AFTER_MS_MAX),
                },
                INVALID_PARAMS => rejected(Code::INVALID_ARGUMENT),
                // The method or request was not understood: nothing was processed, and
                // sending it again will not change that.
                PARSE_ERROR | INVALID_REQUEST | METHOD_NOT_FOUND => rejected(Code::UNIMPLEMENTED),
                _ => Outcome::Unknown {
                    why: "the engine failed the call; it may have been processed",
                },
            };
            (outcome, text)
        }
        None => {
            let outcome = match http {
                429 => Outcome::RateLimited {
                    retry_after_ms: wait_said(b"", resp)
                        .unwrap_or(grpc::RETRY_AFTER_MS_DEFAULT)
                        .min(grpc::RETRY_AFTER_MS_MAX),
                },
                502..=504 => Outcome::Retryable {
                    why: "the engine's front end answered 502-504",
                },
                401 | 403 => rejected(Code::from_http_status(http)),
                _ => Outcome::Unknown {
                    why: "the answer was not JSON-RPC; it may have been processed",
                },
            };
            let shown = &resp.body[..resp.body.len().min(buf.len())];
            (outcome, Text::new(shown))
        }
    }
}

/// The wait a forwarded call's rate-limited answer names, if it names one (`None`: the caller's
/// default applies): `Retry after <N>ms` in its JSON-RPC error's message, else its
/// `retry-after` header; at most [`grpc::RETRY_AFTER_MS_MAX`]. As [`grpc::retry_after_said`]
/// for gRPC.
pub fn retry_after_said(resp: &Response<'_>) -> Option<u64> {
    let mut buf = [0u8; 256];
    let words = match jsonrpc::parse_reply(resp.body) {
        Some(Reply::Error { message, .. }) => {
            message.unescape_into(&mut buf).map_or(message.raw(), |w| w)
        }
        _ => b"",
    };
    wait_said(words, resp).map(|ms| ms.min(grpc::RETRY_AFTER_MS_MAX))
}

/// The wait in the engine's `words`, else in the answer's `retry-after` header.
fn wait_said(words: &[u8], resp: &Response<'_>) -> Option<u64> {
    grpc::retry_after_from_message(words).or_else(|| {
        resp.headers
            .get(b"retry-after")
            .and_then(grpc::retry_after_from_metadata)
    })
}

fn rejected<'a>(code: Code) -> Outcome<'a> {
    Outcome::Rejected {
        code,
        message: StatusMessage(b""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::HeaderList;

    /// What an engine's complete answer (HTTP `status`, `body`) comes to.
    fn answer(status: &str, body: &str) -> (String, String) {
        answer_with(status, &[], body)
    }

    /// `f` of the engine's complete answer: HTTP `status`, `more` headers, `body`.
    fn with_answer<T>(
        status: &str,
        more: &[(&str, &str)],
        body: &str,
        f: impl FnOnce(&Response<'_>) -> T,
    ) -> T {
        let mut headers = HeaderList::new(1024, 8);
        headers.push(b":status", status.as_bytes()).unwrap();
        for (name, value) in more {
            headers.push(name.as_bytes(), value.as_bytes()).unwrap();
        }
        let trailers = HeaderList::new(64, 1);
        f(&Response {
            end: StreamEnd::Complete,
            request_sent: true,
            request_end: Some(1),
            headers: &headers,
            trailers: &trailers,
            body: body.as_bytes(),
        })
    }

    /// [`answer`] with more headers.
    fn answer_with(status: &str, more: &[(&str, &str)], body: &str) -> (String, String) {
        with_answer(status, more, body, |resp| {
            let (o, text) = outcome(resp);
            let o = match o {
                Outcome::Ok(_) => "delivered".to_string(),
                Outcome::RateLimited { retry_after_ms } => format!("cool {retry_after_ms} ms"),
                Outcome::Retryable { .. } => "send again".to_string(),
                Outcome::Rejected { code, .. } => format!("rejected {}", code.0),
                Outcome::Unknown { .. } => "may have been processed".to_string(),
            };
            (o, text.as_str().to_string())
        })
    }

    fn error(code: i64, message: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","error":{{"code":{code},"message":"{message}"}},"id":1}}"#)
    }

    #[test]
    fn a_signature_is_delivered_and_kept_as_the_engines_words() {
        let sig = "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW";
        let body = format!(r#"{{"jsonrpc":"2.0","result":"{sig}","id":1}}"#);
        assert_eq!(
            answer("200", &body),
            ("delivered".into(), sig[..crate::journal::TEXT_BYTES].into())
        );
    }

    #[test]
    fn rate_limited_with_a_wait_cools_the_pair_that_long() {
        let m = "Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: Retry after 1606ms";
        assert_eq!(answer("429", &error(-32097, m)).0, "cool 1606 ms");
    }

    #[test]
    fn globally_rate_limited_is_rate_limited_with_jitos_words_for_the_region_to_back_off() {
        let m = crate::jito::GLOBAL_THROTTLE_MESSAGE;
        assert_eq!(
            answer("429", &error(-32097, m)),
            ("cool 1000 ms".into(), m.to_string())
        );
    }

    #[test]
    fn invalid_params_is_refused_for_good_with_the_engines_words() {
        let m = "bundle contains an expired blockhash";
        assert_eq!(
            answer("200", &error(-32602, m)),
            ("rejected 3".into(), m.into())
        );
    }

    #[test]
    fn an_internal_error_may_have_been_processed() {
        assert_eq!(
            answer("200", &error(-32603, "boom")).0,
            "may have been processed"
        );
    }

    #[test]
    fn a_429_without_a_body_cools_the_pair_for_jitos_second() {
        assert_eq!(answer("429", "").0, "cool 1000 ms");
    }

    #[test]
    fn a_429_naming_its_wait_in_retry_after_cools_the_pair_that_long() {
        assert_eq!(
            answer_with("429", &[("retry-after", "5")], "").0,
            "cool 5000 ms"
        );
        let m = "Rate limit exceeded.";
        assert_eq!(
            answer_with("429", &[("retry-after", "2")], &error(-32097, m)).0,
            "cool 2000 ms"
        );
        // The words name the wait first, as gRPC's message does.
        let m = "Rate limit exceeded. Retry after 1606ms";
        assert_eq!(
            answer_with("429", &[("retry-after", "2")], &error(-32097, m)).0,
            "cool 1606 ms"
        );
    }

    #[test]
    fn the_wait_a_globally_rate_limited_answer_names_is_told_from_none() {
        let said =
            |more: &[(&str, &str)], body: &str| with_answer("429", more, body, retry_after_said);
        let m = crate::jito::GLOBAL_THROTTLE_MESSAGE;
        assert_eq!(said(&[], &error(-32097, m)), None);
        let m = format!("{m} Retry after 2000ms");
        assert_eq!(said(&[], &error(-32097, &m)), Some(2000));
        assert_eq!(said(&[("retry-after", "3")], ""), Some(3000));
    }

    #[test]
    fn a_front_ends_502_to_504_is_sent_again() {
        for s in ["502", "503", "504"] {
            let (o, text) = answer(
                s,
                "upstream connect error or disconnect/reset before headers",
            );
            assert_eq!(o, "send again", "{s}");
            assert!(text.starts_with("upstream connect error"), "{text}");
        }
    }

    #[test]
    fn a_200_that_is_not_json_rpc_may_have_been_processed() {
        assert_eq!(answer("200", "<html>").0, "may have been processed");
    }
}
