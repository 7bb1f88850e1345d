//! The record's answers as JSON-RPC results, written into a fixed buffer. Sans-IO.
//!
//! `getInflightBundleStatuses` in Jito's shape, from the relay's own view:
//!
//! | the record says | `status` |
//! |---|---|
//! | no bundle of that id from this tenant (never, longer ago than the record keeps, or admitted before Jito's five-minute look-back) | `Invalid` |
//! | waiting for a pair, being sent, or taken by an engine (this copy or an earlier one) | `Pending` |
//! | rejected by an engine, expired before any engine took it, or lost | `Failed` |
//!
//! `Landed` is the engine's to say: a bundle an engine took is `Pending` here until the
//! engine's own answer (`relay::statuses`) says `Landed` (with its slot) or `Failed`; one lost
//! after it was sent whole is `Failed` here, and the engine that may have processed it is
//! asked too.
//! `getBundleDelivery` is the relay's own: the full record of one bundle.

use core::fmt::Write as _;

use crate::clock::{Instant, TickRate};
use crate::jsonrpc::{Escaping, Writer};

use super::{End, Found, Record};

/// `Invalid` / `Pending` / `Failed` for a bundle the record holds (`None`: it does not). A
/// bundle an engine took is `Pending` even if a later copy of it failed: the engine has it.
pub fn jito_status(found: Option<&Found>) -> &'static str {
    let Some(f) = found else {
        return "Invalid";
    };
    match f.latest.end {
        End::Open | End::Delivered | End::Moved => "Pending",
        End::Rejected | End::Expired | End::Failed if f.accepted => "Pending",
        End::Rejected | End::Expired | End::Failed => "Failed",
    }
}

/// Lowercase hex of a bundle id.
pub fn write_hex(w: &mut Writer<'_>, id: &[u8; 32]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (i, b) in id.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 15)];
    }
    w.bytes(&out);
}

/// The bundle id in `s` (64 hex characters, either case).
pub fn parse_id(s: &[u8]) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut id = [0u8; 32];
    for (i, pair) in s.chunks_exact(2).enumerate() {
        id[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(id)
}

/// `{"context":{"slot":<slot>},"value":[{"bundle_id":…,"status":…,"landed_slot":null},…]}`
/// for `ids` in order.
pub fn write_inflight(w: &mut Writer<'_>, slot: u64, ids: &[([u8; 32], Option<Found>)]) {
    write_inflight_with(w, slot, ids.len(), |i| {
        (ids[i].0, jito_status(ids[i].1.as_ref()), None)
    });
}

/// As [`write_inflight`], entry `i` of `n` being `(bundle id, status, landed slot)`.
pub fn write_inflight_with(
    w: &mut Writer<'_>,
    slot: u64,
    n: usize,
    entry: impl Fn(usize) -> ([u8; 32], &'static str, Option<u64>),
) {
    let _ = write!(w, "{{\"context\":{{\"slot\":{slot}}},\"value\":[");
    for i in 0..n {
        let (id, status, landed) = entry(i);
        if i > 0 {
            w.bytes(b",");
        }
        w.bytes(b"{\"bundle_id\":\"");
        write_hex(w, &id);
        w.bytes(b"\",\"status\":\"");
        w.bytes(status.as_bytes());
        match landed {
            Some(s) => {
                let _ = write!(w, "\",\"landed_slot\":{s}}}");
            }
            None => w.bytes(b"\",\"landed_slot\":null}"),
        }
    }
    w.bytes(b"]}");
}

/// Names the record's numbers stand for.
pub struct Names<'a> {
    pub region: &'a dyn Fn(u8) -> &'a str,
    pub tenant: &'a str,
}

fn micros(rate: TickRate, from: Instant, to: Instant) -> u64 {
    rate.to_us(to.since(from))
}

/// The whole record of one bundle (`getBundleDelivery`'s result); times are microseconds after
/// its admission, and its admission in Unix milliseconds.
pub fn write_delivery(
    w: &mut Writer<'_>,
    found: &Found,
    rate: TickRate,
    unix_ns: impl Fn(Instant) -> u64,
    names: &Names<'_>,
) {
    let r: &Record = &found.latest;
    w.bytes(b"{\"bundle_id\":\"");
    write_hex(w, &r.id);
    w.bytes(b"\",\"status\":\"");
    w.bytes(r.end.name().as_bytes());
    w.bytes(b"\",\"tenant\":\"");
    w.escaped(names.tenant);
    let _ = write!(
        w,
        "\",\"transactions\":{},\"admitted_unix_ms\":{},\"ended_after_us\":",
        r.tx_count,
        unix_ns(r.admitted) / 1_000_000
    );
    if r.end == End::Open {
        w.bytes(b"null");
    } else {
        let _ = write!(w, "{}", micros(rate, r.admitted, r.ended));
    }
    let _ = write!(
        w,
        ",\"submissions\":{},\"attempts_total\":{},\"attempts\":[",
        found.submissions, r.attempts
    );
    for (i, a) in r.kept().iter().enumerate() {
        if i > 0 {
            w.bytes(b",");
        }
        w.bytes(b"{\"region\":\"");
        w.escaped((names.region)(a.region));
        w.bytes(b"\",\"egress\":\"");
        let _ = write!(Escaping(w), "{}", a.egress);
        let _ = write!(
            w,
            "\",\"sent_after_us\":{},\"answered_after_us\":",
            micros(rate, r.admitted, a.sent)
        );
        match a.answered {
            Some(t) => {
                let _ = write!(w, "{}", micros(rate, r.admitted, t));
            }
            None => w.bytes(b"null"),
        }
        w.bytes(b",\"verdict\":\"");
        w.bytes(a.verdict.name().as_bytes());
        w.bytes(b"\",\"grpc_status\":");
        match a.grpc_code {
            Some(c) => {
                let _ = write!(w, "{c}");
            }
            None => w.bytes(b"null"),
        }
        if matches!(
            a.verdict,
            super::Verdict::RateLimited | super::Verdict::RegionThrottled
        ) {
            let _ = write!(w, ",\"retry_after_ms\":{}", a.retry_after_ms);
        }
        w.bytes(b"}");
    }
    w.bytes(b"],\"engine\":");
    if r.text.is_empty() {
        w.bytes(b"null");
    } else {
        w.bytes(b"\"");
        w.escaped(r.text.as_str());
        w.bytes(b"\"");
    }
    w.bytes(b"}");
}
