//! Every reply, or its absence, folded into one [`Outcome`] the retry logic acts on: what was
//! sent, what came back (headers, trailers or a Trailers-Only reply), and the retry hint a
//! RESOURCE_EXHAUSTED carries.

use super::call::PREFIX_LEN;
use super::status::{Code, MESSAGE_SCAN_BYTES_MAX, StatusMessage};
use crate::h2::{HeaderList, Reason, Response, StreamEnd};

/// A hint beyond this (a day) is held to it: a pair is parked for as long as the engine says,
/// since sending sooner only earns a longer back-off, but a value no engine means (too many
/// digits to be a wait) brings the pair back in a day rather than never.
pub const RETRY_AFTER_MS_MAX: u64 = 24 * 3600 * 1000;

/// What a call came to, in the terms the retry logic needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// OK with the response message (protobuf bytes, prefix removed).
    Ok(&'a [u8]),
    /// RESOURCE_EXHAUSTED: wait this long on this (source, region) pair, then retry.
    RateLimited { retry_after_ms: u64 },
    /// Not processed (UNAVAILABLE, REFUSED_STREAM, above GOAWAY's last id, lost before the
    /// request was fully sent): safe to send again, here or elsewhere.
    Retryable { why: &'static str },
    /// The server answered with an error that retrying will not fix.
    Rejected {
        code: Code,
        message: StatusMessage<'a>,
    },
    /// Lost after the request was fully sent: it may have been processed.
    Unknown { why: &'static str },
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0, |a, &c| a * 10 + (c - b'0') as u64))
}

/// A wait's digits; more than `u64` holds reads as the most it holds (the caller clamps).
fn parse_wait(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |a, &c| {
        a.saturating_mul(10).saturating_add((c - b'0') as u64)
    }))
}

/// The wait in `... Retry after 1606ms ...` (case-insensitive `retry after`).
pub fn retry_after_from_message(decoded: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"retry after ";
    let at = decoded
        .windows(KEY.len())
        .position(|w| w.eq_ignore_ascii_case(KEY))?;
    let rest = &decoded[at + KEY.len()..];
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let value = parse_wait(&rest[..digits])?;
    let unit = &rest[digits..];
    if unit.starts_with(b"ms") {
        Some(value)
    } else if unit.starts_with(b"s") {
        Some(value.saturating_mul(1000))
    } else {
        None
    }
}

/// A `retry-after` metadata value: `<N>ms`, or `<N>` / `<N>s` in seconds as in HTTP.
pub fn retry_after_from_metadata(v: &[u8]) -> Option<u64> {
    if let Some(ms) = v.strip_suffix(b"ms") {
        return parse_wait(ms);
    }
    parse_wait(v.strip_suffix(b"s").unwrap_or(v)).map(|s| s.saturating_mul(1000))
}

/// The wait a rate-limited reply names, if it names one (`None`: it names none, and the
/// caller's default applies): `Retry after <N>ms` in its grpc-message, else a `retry-after` in
/// its status metadata, else in its headers (a front end's own 429); at most
/// [`RETRY_AFTER_MS_MAX`]. [`outcome`]'s wait for RESOURCE_EXHAUSTED, for a caller that must
/// tell the engine's word from the default (a region-wide throttle backs off by its own
/// doubling only where the engine names no wait).
pub fn retry_after_said(resp: &Response<'_>) -> Option<u64> {
    let status_list = if status_of(resp.trailers).is_some() {
        resp.trailers
    } else {
        resp.headers
    };
    let message = StatusMessage(status_list.get(b"grpc-message").unwrap_or(b""));
    wait_said(message, status_list, resp.headers).map(|ms| ms.min(RETRY_AFTER_MS_MAX))
}

fn wait_said(
    message: StatusMessage<'_>,
    status_list: &HeaderList,
    headers: &HeaderList,
) -> Option<u64> {
    let mut buf = [0u8; MESSAGE_SCAN_BYTES_MAX];
    retry_after_from_message(message.decode_into(&mut buf))
        .or_else(|| {
            status_list
                .get(b"retry-after")
                .and_then(retry_after_from_metadata)
        })
        .or_else(|| {
            headers
                .get(b"retry-after")
                .and_then(retry_after_from_metadata)
        })
}

fn status_of(list: &HeaderList) -> Option<Code> {
    list.get(b"grpc-status")
        .and_then(parse_u64)
        .map(|c| Code(c.min(u32::MAX as u64) as u32))
}

/// The gRPC status a complete reply carried (the trailers', else the headers', else the one
/// its HTTP status maps to), whatever [`outcome`] makes of it; `None` for a stream that ended
/// without a reply, or a reply without a status.
pub fn reply_code(resp: &Response<'_>) -> Option<Code> {
    if resp.end != StreamEnd::Complete {
        return None;
    }
    status_of(resp.trailers)
        .or_else(|| status_of(resp.headers))
        .or_else(|| {
            let http = resp.headers.get(b":status").and_then(parse_u64)?;
            (http != 200).then(|| Code::from_http_status(http as u16))
        })
}

/// Folds a finished stream into an [`Outcome`].
pub fn outcome<'a>(resp: &Response<'a>, retry_after_ms_default: u64) -> Outcome<'a> {
    let lost = |sent: bool, why_unsent, why_sent| {
        if sent {
            Outcome::Unknown { why: why_sent }
        } else {
            Outcome::Retryable { why: why_unsent }
        }
    };
    match resp.end {
        StreamEnd::Complete => {}
        StreamEnd::NotProcessed => {
            return Outcome::Retryable {
                why: "above GOAWAY's last stream id",
            };
        }
        StreamEnd::Reset {
            reason,
            request_sent,
        } => {
            if reason == Reason::REFUSED_STREAM {
                return Outcome::Retryable {
                    why: "REFUSED_STREAM",
                };
            }
            return lost(
                request_sent,
                "reset before the request was sent",
                "reset after the request was sent",
            );
        }
        StreamEnd::ConnectionLost { request_sent, .. } => {
            return lost(
                request_sent,
                "connection lost before the request was sent",
                "connection lost after the request was sent",
            );
        }
        StreamEnd::TimedOut { request_sent } => {
            return lost(
                request_sent,
                "deadline passed before the request was sent",
                "deadline passed after the request was sent",
            );
        }
        StreamEnd::Withheld => {
            return Outcome::Retryable {
                why: "flow control held the request past its send-by",
            };
        }
        StreamEnd::PeerError { request_sent, .. } => {
            return lost(
                request_sent,
                "peer protocol error before the request was sent",
                "peer protocol error after the request was sent",
            );
        }
    }
    // Trailers-Only replies carry the status in the headers.
    let (status_list, code) = match status_of(resp.trailers) {
        Some(c) => (resp.trailers, Some(c)),
        None => (resp.headers, status_of(resp.headers)),
    };
    let http = resp
        .headers
        .get(b":status")
        .and_then(parse_u64)
        .unwrap_or(0) as u16;
    let message = StatusMessage(status_list.get(b"grpc-message").unwrap_or(b""));
    let code = match code {
        Some(c) => c,
        // A front end's own rate limit: the gRPC spec maps it to UNAVAILABLE (try again), but
        // the pair it came through is what is refused, for its `retry-after` (read below).
        None if http == 429 => Code::RESOURCE_EXHAUSTED,
        None if http != 200 => Code::from_http_status(http),
        None => {
            return Outcome::Unknown {
                why: "reply without grpc-status",
            };
        }
    };
    match code {
        Code::OK => {
            let body = resp.body;
            if body.len() < PREFIX_LEN {
                return Outcome::Unknown {
                    why: "OK without a response message",
                };
            }
            if body[0] != 0 {
                return Outcome::Unknown {
                    why: "compressed response message, never negotiated",
                };
            }
            let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
            if body.len() != PREFIX_LEN + len {
                return Outcome::Unknown {
                    why: "response body is not exactly one message",
                };
            }
            Outcome::Ok(&body[PREFIX_LEN..])
        }
        Code::RESOURCE_EXHAUSTED => Outcome::RateLimited {
            retry_after_ms: wait_said(message, status_list, resp.headers)
                .unwrap_or(retry_after_ms_default)
                .min(RETRY_AFTER_MS_MAX),
        },
        Code::UNAVAILABLE => Outcome::Retryable { why: "UNAVAILABLE" },
        Code::DEADLINE_EXCEEDED | Code::CANCELLED | Code::UNKNOWN | Code::INTERNAL => {
            Outcome::Unknown {
                why: "server failed the call; it may have been processed",
            }
        }
        code => Outcome::Rejected { code, message },
    }
}
