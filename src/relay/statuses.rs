//! The bundle-status calls: Jito's `getInflightBundleStatuses` and `getBundleStatuses`, and the
//! relay's own `getBundleDelivery`. Sans-IO.
//!
//! What the relay knows it answers from its record of recent bundles (`journal`); landing is
//! known only to Jito, so those questions go to an engine ([`super::queries`]) and the answer
//! combines both:
//!
//! | call | asked of an engine | answered with |
//! |---|---|---|
//! | `getInflightBundleStatuses` | the ids an engine took or may have (a send lost after it went whole), and those the tenant has no record of (sent through another relay, straight to Jito, or by another tenant) | the record's status, `Landed` with its slot or `Failed` where the engine says so; for an id the tenant has no record of, or last admitted before Jito's five-minute look-back, the engine's status |
//! | `getBundleStatuses` | every id that is a bundle id (64 hex) | the engine's entries as it wrote them, each at the id it names; `null` for what is no bundle id or the engine left out |
//! | either, no pair free in time | — | inflight with every id on record: the record alone; else HTTP 429 and -32097 with the pair's interval to wait, as Jito answers a caller over its rate |
//! | either, the engine answered a JSON-RPC error (any code, -32603 included) | — | inflight with every id on record: the record alone; else the engine's code and words |
//! | either, the engine's answer was lost or is no JSON-RPC | — | inflight with every id on record: the record alone; else -32603 saying why |
//! | either, no room in the thread's table of queries waiting on engines | — | inflight with every id on record: the record alone; else HTTP 429 and -32097 |
//! | `getBundleDelivery` | never | the record |
//!
//! An id with no record and no engine's word is never answered `Invalid`: that is Jito's "not
//! in our system", on which bots stop polling, and the bundle may have landed through another
//! relay; the bot is told to ask again instead.
//!
//! A tenant sees only its own bundles in the record: another tenant's id is to it exactly what
//! an id this relay never had is (asked of an engine, the engine's word alone), so no answer,
//! its speed or its cost says whether another tenant sent it here.

use core::fmt::Write as _;

use crate::clock::Instant;
use crate::journal::Found;
use crate::journal::answer::{self, Names};
use crate::jsonrpc::{
    self, Call, ErrorKind, Id, Overflow, RpcError, STATUS_IDS_MAX, StatusReply, Writer,
};

use super::dispatch::Dispatcher;
use super::queries::{Ask, Asked, ConnRef, Query, Unanswered};

/// What an engine is asked for a status `call`: the bot's ids (in its order), which of them
/// go to the engine, and the region to ask (`None`: any). `None` when none needs one.
pub struct ToAsk {
    pub ask: Ask,
    pub ids: [[u8; 32]; STATUS_IDS_MAX],
    pub len: usize,
    pub forwarded: u8,
    pub region: Option<u8>,
}

impl ToAsk {
    pub fn asked<'a>(&'a self, conn: ConnRef, tenant: u16, id: Id<'a>) -> Asked<'a> {
        Asked {
            conn,
            ask: self.ask,
            tenant,
            id: id.raw(),
            ids: &self.ids[..self.len],
            forwarded: self.forwarded,
            region: self.region,
        }
    }
}

/// What to ask an engine for `call` from tenant slot `tenant` (see the module docs' table).
pub fn to_ask(d: &Dispatcher, call: &Call<'_>, tenant: u16) -> Option<ToAsk> {
    let (ask, ids) = match call {
        Call::GetBundleStatuses { bundle_ids } => (Ask::Statuses, bundle_ids),
        Call::GetInflightBundleStatuses { bundle_ids } => (Ask::Inflight, bundle_ids),
        _ => return None,
    };
    let mut t = ToAsk {
        ask,
        ids: [[0; 32]; STATUS_IDS_MAX],
        len: ids.len().min(STATUS_IDS_MAX),
        forwarded: 0,
        region: None,
    };
    for (i, s) in ids.iter().enumerate().take(STATUS_IDS_MAX) {
        let Some(id) = answer::parse_id(s.raw()) else {
            continue;
        };
        t.ids[i] = id;
        let found = d.find_bundle(&id, tenant);
        let region = found.as_ref().and_then(|f| f.taken_by);
        // An id the tenant has no record of may have gone through another relay (HAProxy
        // spreads a bot's connections) or straight to Jito: only an engine can say. One of its
        // own that no engine took yet, the record answers.
        if ask == Ask::Inflight && region.is_none() && found.is_some() {
            continue;
        }
        t.region = t.region.or(region);
        t.forwarded |= 1 << i;
    }
    (t.forwarded != 0).then_some(t)
}

/// What a status query's answer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Said {
    /// A JSON-RPC result (the engine's word, the record's, or both).
    Result,
    /// Jito's rate-limit error (HTTP 429): no pair was free in time.
    RateLimited,
    /// A JSON-RPC error: no engine answered, or it answered with an error.
    Error,
}

/// The whole JSON-RPC response body to query `q` (see the module docs), into `out`, its HTTP
/// status and what it says.
pub fn write_query_answer<'b>(
    d: &Dispatcher,
    q: &Query,
    now: Instant,
    out: &'b mut [u8],
) -> Result<(u16, Said, &'b [u8]), Overflow> {
    let id = Id::kept(q.id());
    if q.answer() == Err(Unanswered::NoPair)
        && (q.ask == Ask::Statuses || !record_has_all(d, q, now))
    {
        // A pace (the relay's, or the engine's own rate limit) kept it from an answer in time:
        // a bot backs off on this as on Jito's own.
        let e = RpcError::new(ErrorKind::RateLimited {
            retry_after_ms: d.query_retry_ms(q.region),
        });
        let b = jsonrpc::write_error(out, id, &e.with_id(id))?;
        return Ok((429, Said::RateLimited, b));
    }
    let (said, b) = write_answer_body(d, q, now, out)?;
    Ok((200, said, b))
}

/// Whether the tenant's record has every id `q` asks.
fn record_has_all(d: &Dispatcher, q: &Query, now: Instant) -> bool {
    q.ids()
        .iter()
        .all(|i| d.find_inflight(i, q.tenant, now).is_some())
}

/// Whether tenant `tenant`'s record has every bundle id `call` asks of (inflight's), before
/// any engine is asked.
pub fn record_has_every_id(d: &Dispatcher, call: &Call<'_>, tenant: u16, now: Instant) -> bool {
    match call {
        Call::GetInflightBundleStatuses { bundle_ids } => bundle_ids.iter().all(|s| {
            answer::parse_id(s.raw()).is_some_and(|id| d.find_inflight(&id, tenant, now).is_some())
        }),
        _ => true,
    }
}

fn write_answer_body<'b>(
    d: &Dispatcher,
    q: &Query,
    now: Instant,
    out: &'b mut [u8],
) -> Result<(Said, &'b [u8]), Overflow> {
    let id = Id::kept(q.id());
    let engine = q.answer().map(jsonrpc::parse_status_reply);
    let mut result = [0u8; super::queries::QUERY_ANSWER_BYTES + 512];
    let mut message = [0u8; 256];
    let method = match q.ask {
        Ask::Inflight => "getInflightBundleStatuses",
        Ask::Statuses => "getBundleStatuses",
    };
    let failed = match (q.ask, engine) {
        (Ask::Inflight, Ok(Some(StatusReply::Result { slot, value }))) => {
            let r = inflight(d, q, now, slot, value, &mut result)?;
            return Ok((Said::Result, jsonrpc::write_result_raw(out, id, r)?));
        }
        // The record alone, when it has every id: what the relay knows is still worth more
        // than an error. An id it has not, no engine vouched for: `Invalid` ("not in our
        // system", on which bots stop polling) would be a guess, so the bot asks again.
        (Ask::Inflight, _) if record_has_all(d, q, now) => {
            let r = inflight(d, q, now, 0, None, &mut result)?;
            return Ok((Said::Result, jsonrpc::write_result_raw(out, id, r)?));
        }
        (Ask::Statuses, Ok(Some(StatusReply::Result { slot, value }))) => {
            let r = statuses(q, slot, value, &mut result)?;
            return Ok((Said::Result, jsonrpc::write_result_raw(out, id, r)?));
        }
        (_, Ok(Some(StatusReply::Error { code, message: m }))) => {
            // Words longer than kept are cut, marked `…` (3 bytes kept for it), not dropped.
            const MORE: &str = "…";
            let room = message.len() - MORE.len();
            let (len, cut) = {
                let (words, cut) = m.unescape_prefix_into(&mut message[..room]);
                (words.len(), cut)
            };
            let len = if cut {
                message[len..len + MORE.len()].copy_from_slice(MORE.as_bytes());
                len + MORE.len()
            } else {
                len
            };
            RpcError::new(ErrorKind::FromEngine {
                code: i32::try_from(code).unwrap_or(crate::jito::code::INTERNAL),
                message: core::str::from_utf8(&message[..len]).unwrap_or(""),
            })
        }
        (_, Ok(_)) => RpcError::new(ErrorKind::EngineUnanswered {
            method,
            why: "the engine's answer was not a JSON-RPC result",
        }),
        (_, Err(u)) => RpcError::new(ErrorKind::EngineUnanswered {
            method,
            why: u.why(),
        }),
    };
    Ok((
        Said::Error,
        jsonrpc::write_error(out, id, &failed.with_id(id))?,
    ))
}

/// `getInflightBundleStatuses` for the ids `q` asked, in order: the record's status, and
/// `Landed` (with its slot) or `Failed` where the engine's `value` says so of a bundle it
/// took; for an id the record has not, the engine's status (asked only with its answer, or
/// with every id on record); `slot` is the engine's (0 without its answer).
fn inflight<'b>(
    d: &Dispatcher,
    q: &Query,
    now: Instant,
    slot: u64,
    value: Option<&[u8]>,
    out: &'b mut [u8],
) -> Result<&'b [u8], Overflow> {
    let ids = q.ids();
    let mut engine = [None::<(&'static str, Option<u64>)>; STATUS_IDS_MAX];
    if let Some(value) = value {
        jsonrpc::for_each_element(value, |raw| {
            let e = jsonrpc::inflight_entry(raw);
            let Some(id) = e.bundle_id.and_then(|b| answer::parse_id(b.raw())) else {
                return;
            };
            let said = match e.status {
                Some(s) if s.eq_str("Landed") => ("Landed", e.landed_slot),
                Some(s) if s.eq_str("Failed") => ("Failed", None),
                Some(s) if s.eq_str("Pending") => ("Pending", None),
                Some(s) if s.eq_str("Invalid") => ("Invalid", None),
                _ => return,
            };
            for (i, asked) in ids.iter().enumerate() {
                if q.is_forwarded(i) && *asked == id {
                    engine[i] = Some(said);
                }
            }
        });
    }
    let mut w = Writer::new(out);
    answer::write_inflight_with(&mut w, slot, ids.len(), |i| {
        let found = d.find_inflight(&ids[i], q.tenant, now);
        let mine = answer::jito_status(found.as_ref());
        match engine[i] {
            // Not this relay's: the engine's word is all there is.
            Some((said, landed)) if found.is_none() => (ids[i], said, landed),
            // The engine knows landing of a bundle it took, or may have (a send lost after
            // it went whole: the record says failed, the engine may say landed or pending).
            Some((said @ ("Landed" | "Failed" | "Pending"), landed))
                if mine == "Pending" || found.as_ref().is_some_and(|f| f.taken_by.is_some()) =>
            {
                (ids[i], said, landed)
            }
            // A bundle the relay saw fail before any engine had it did not land, and one
            // the engine never had (`Invalid`) is what the record says.
            _ => (ids[i], mine, None),
        }
    });
    w.finish()
}

/// `getBundleStatuses` for the ids `q` asked, in order: the engine's entry (as it wrote it)
/// for each forwarded one, found by the `bundle_id` it names (in the engine's order only when
/// none names one), `null` for the others and for any the engine left out.
fn statuses<'b>(
    q: &Query,
    slot: u64,
    value: Option<&[u8]>,
    out: &'b mut [u8],
) -> Result<&'b [u8], Overflow> {
    let ids = q.ids();
    // In the engine's order, and by the bundle id each entry names.
    let mut given: [&[u8]; STATUS_IDS_MAX] = [b"null"; STATUS_IDS_MAX];
    let mut by_id: [&[u8]; STATUS_IDS_MAX] = [b"null"; STATUS_IDS_MAX];
    let (mut n, mut named) = (0, false);
    if let Some(value) = value {
        jsonrpc::for_each_element(value, |raw| {
            if n < STATUS_IDS_MAX {
                given[n] = raw;
                n += 1;
            }
            let Some(id) = jsonrpc::inflight_entry(raw)
                .bundle_id
                .and_then(|b| answer::parse_id(b.raw()))
            else {
                return;
            };
            named = true;
            for (i, asked) in ids.iter().enumerate() {
                if q.is_forwarded(i) && *asked == id {
                    by_id[i] = raw;
                }
            }
        });
    }
    let mut w = Writer::new(out);
    let _ = write!(w, "{{\"context\":{{\"slot\":{slot}}},\"value\":[");
    let mut k = 0;
    for (i, entry) in by_id.iter().enumerate().take(ids.len()) {
        if i > 0 {
            w.bytes(b",");
        }
        if !q.is_forwarded(i) {
            w.bytes(b"null");
        } else if named {
            w.bytes(entry);
        } else {
            // No entry names its bundle: the engine's order is all there is.
            w.bytes(given[k]);
            k += 1;
        }
    }
    w.bytes(b"]}");
    w.finish()
}

/// The result of a status `call` for tenant slot `tenant`, written into `out`.
pub fn answer<'b>(
    d: &Dispatcher,
    call: &Call<'_>,
    tenant: u16,
    now: Instant,
    out: &'b mut [u8],
) -> Result<&'b [u8], Overflow> {
    let mut w = Writer::new(out);
    match call {
        Call::GetInflightBundleStatuses { bundle_ids } => {
            let mut found = [([0u8; 32], None::<Found>); STATUS_IDS_MAX];
            let n = bundle_ids.len().min(found.len());
            for (slot, s) in found.iter_mut().zip(bundle_ids.iter()) {
                // The parser checked each is 64 hex characters.
                let id = answer::parse_id(s.raw()).unwrap_or([0; 32]);
                *slot = (id, d.find_inflight(&id, tenant, now));
            }
            // The relay follows no chain: 0 says it has no slot of its own to report.
            answer::write_inflight(&mut w, 0, &found[..n]);
        }
        Call::GetBundleDelivery { bundle_id } => {
            let id = answer::parse_id(bundle_id.raw()).unwrap_or([0; 32]);
            match d.find_bundle(&id, tenant) {
                None => w.bytes(b"null"),
                Some(f) => {
                    let ring = d.journals().ring(f.thread);
                    let region = |r: u8| -> &str {
                        if usize::from(r) < d.region_count() {
                            d.region_name(usize::from(r))
                        } else {
                            "?"
                        }
                    };
                    let names = Names {
                        region: &region,
                        tenant: d.tenancy().name(f.latest.tenant),
                    };
                    answer::write_delivery(&mut w, &f, ring.rate(), |t| ring.unix_ns(t), &names);
                }
            }
        }
        // Only when no id is a bundle id (an engine is asked otherwise): none has a status.
        Call::GetBundleStatuses { bundle_ids } => {
            w.bytes(b"{\"context\":{\"slot\":0},\"value\":[");
            for i in 0..bundle_ids.len() {
                w.bytes(if i == 0 { b"null" } else { b",null" });
            }
            w.bytes(b"]}");
        }
        _ => w.bytes(b"null"),
    }
    w.finish()
}
