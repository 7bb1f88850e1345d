//! One intake request in, one HTTP response out: routing, JSON-RPC, admission. Sans-IO.
//!
//! Fire-and-forget: a `sendBundle` is answered with its id as soon as it is decoded, validated
//! and holds an arena slot; the send happens after. The one kind of request answered later is
//! a status query only an engine can answer ([`Verdict::Deferred`], see `statuses`). No slot free is the in-flight cap: 429 with
//! `Retry-After: 1` and JSON-RPC -32097, decided before any decoding, without allocating.

use crate::bundle;
use crate::clock::Instant;
use crate::grpc;
use crate::http1;
use crate::jsonrpc::{self, Call, ErrorKind, Id, RpcError};
use crate::wire::{self, SIGNATURE_BASE58_LEN_MAX};

use super::dispatch::{Asking, Dispatcher, Refusal};
use super::queries::ConnRef;
use super::statuses;
use super::tenancy::{Claim, Denied, Unforwarded};
use crate::metrics::tenants::ShareFull;

/// Seconds a client is told to wait when the in-flight cap is reached.
pub const CAP_RETRY_AFTER_S: &[u8] = b"1";

/// Room for any JSON-RPC body the relay writes (errors are capped well below this).
pub const BODY_BYTES_MAX: usize = jsonrpc::ERROR_RESPONSE_LEN_MAX + 512;

/// Room for an admitted request's answer, the body every bundle gets: its id in hex, or a
/// transaction's signature in base58 (the longer), and the client's id. The buffer is filled
/// per request, so the common answer does not clear [`BODY_BYTES_MAX`] bytes for a body of a
/// hundred or two.
const ADMITTED_BODY_BYTES_MAX: usize =
    r#"{"jsonrpc":"2.0","result":"","id":}"#.len() + SIGNATURE_BASE58_LEN_MAX + jsonrpc::ID_LEN_MAX;

pub use super::Port;

/// Paths that carry JSON-RPC: Jito's old style (`bundles`, `transactions`) and one per method.
pub fn is_rpc_path(path: &[u8]) -> bool {
    matches!(
        path,
        b"/api/v1/bundles"
            | b"/api/v1/transactions"
            | b"/api/v1/sendBundle"
            | b"/api/v1/sendTransaction"
            | b"/api/v1/getTipAccounts"
            | b"/api/v1/getBundleStatuses"
            | b"/api/v1/getInflightBundleStatuses"
            | b"/api/v1/getBundleDelivery"
    )
}

/// What the request came to, for counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A bundle was admitted.
    Admitted,
    /// Answered without admitting anything (ping, tip accounts).
    Answered,
    /// Refused at the in-flight cap (or, for a status query, with no pair to an engine free
    /// in time: 429 at the pool's pace).
    RefusedCap,
    /// Refused by the tenant checks (unknown, disabled, region, rate, share).
    RefusedTenant,
    /// A bundle refused because the pairs it may leave through could not send it within its
    /// max age, behind the bundles waiting already: 429.
    RefusedBacklog,
    /// The request was wrong; the answer says how.
    Invalid,
    /// The request was right but cannot be served now: its region was removed by a reload
    /// (503, naming it), or a status query no engine answered (a JSON-RPC error saying why).
    Unavailable,
    /// Nothing written yet: an engine is asked, and the answer comes from
    /// [`Dispatcher::poll_answered`].
    Deferred,
}

/// Handles one complete request from intake connection `conn`; writes the whole HTTP response
/// into `out` and returns its length, what happened, and the JSON-RPC method (for the request
/// counters). [`Verdict::Deferred`] writes nothing.
#[allow(clippy::too_many_arguments)]
pub fn handle(
    d: &mut Dispatcher,
    port: Port,
    conn: ConnRef,
    claim: Claim<'_>,
    method: http1::Method,
    path: &[u8],
    query: &[u8],
    body: &[u8],
    keep_alive: bool,
    now: Instant,
    out: &mut [u8],
) -> (usize, Verdict, Option<jsonrpc::Method>) {
    if method == http1::Method::Head {
        // GET's answer (GET never waits on an engine), its head alone: the same status and
        // Content-Length, no body.
        let (n, verdict, m) = handle(
            d,
            port,
            conn,
            claim,
            http1::Method::Get,
            path,
            query,
            body,
            keep_alive,
            now,
            out,
        );
        let head = out[..n]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(n, |i| i + 4);
        return (head, verdict, m);
    }
    let method_seen = core::cell::Cell::new(None);
    let reply = |out: &mut [u8], status, ctype, extra: &[(&str, &[u8])], body: &[u8], v| {
        let n = http1::write_response(out, status, keep_alive, ctype, extra, body)
            .expect("intake output buffer holds any response");
        (n, v, method_seen.get())
    };
    let (mut port, mut claim) = (port, claim);
    match method {
        http1::Method::Get if path == b"/ping" && d.stats().draining.get() != 0 => {
            return reply(out, 503, "text/plain", &[], b"draining", Verdict::Answered);
        }
        http1::Method::Get if path == b"/ping" => {
            return reply(out, 200, "text/plain", &[], b"ok", Verdict::Answered);
        }
        http1::Method::Post if is_rpc_path(path) => {}
        http1::Method::Post if region_path(path).is_some() => {
            let name = region_path(path).expect("checked");
            // A region a reload removed is still found: it answers 503 naming it, as its
            // pinned port does. Names are lowercase in the config; a URL may not be (host
            // names, which Jito's regions are, are not case-sensitive either).
            let r = region_named(d, name);
            match (r, port) {
                (Some(r), Port::Rotating) => {
                    // The region by its path, the tenant by the port it came to.
                    claim.arrived_on = Some(port);
                    port = Port::Pinned(r as u8);
                }
                (Some(r), Port::Pinned(p)) if usize::from(p) == r => {}
                (r, _) => {
                    let mut text = [0u8; REGION_404_BYTES_MAX];
                    let n = match (r, port) {
                        (Some(_), Port::Pinned(p)) => other_ports_region(&mut text, d, p, name),
                        _ => no_such_region(&mut text, d, name),
                    };
                    return reply(out, 404, "text/plain", &[], &text[..n], Verdict::Invalid);
                }
            }
        }
        _ if path == b"/ping" => {
            return reply(
                out,
                405,
                "text/plain",
                &[("Allow", b"GET, HEAD")],
                b"method not allowed: /ping takes GET (or HEAD)",
                Verdict::Invalid,
            );
        }
        _ if is_rpc_path(path)
            || region_path(path).is_some_and(|name| region_named(d, name).is_some()) =>
        {
            // A bot that GETs its RPC URL learns to POST, not that the URL is wrong.
            return reply(
                out,
                405,
                "text/plain",
                &[("Allow", b"POST")],
                b"method not allowed: JSON-RPC is sent with POST on this path",
                Verdict::Invalid,
            );
        }
        _ => {
            return reply(
                out,
                404,
                "text/plain",
                &[],
                b"not found: JSON-RPC is served on POST /api/v1/bundles, /api/v1/transactions and /api/v1/<method>, and under /<region>/api/v1/ for one region alone; GET /ping",
                Verdict::Invalid,
            );
        }
    }
    let (request, named) = jsonrpc::parse_request_named(body);
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            // Counted under the method it named, when the relay serves that method.
            method_seen.set(named);
            let mut json = [0u8; BODY_BYTES_MAX];
            let b = jsonrpc::write_error(&mut json, e.id, &e).expect("errors fit");
            return reply(out, 200, "application/json", &[], b, Verdict::Invalid);
        }
    };
    let id = request.id;
    method_seen.set(Some(request.method()));
    let call = request.call;
    // A key in the header wins; Jito's clients put it in the query otherwise.
    let claim = Claim {
        key: claim.key.or_else(|| query_param(query, b"uuid")),
        ..claim
    };
    let claim = match claim.client() {
        Ok(c) => c,
        Err(Unforwarded {
            proxy,
            forwarded_for,
        }) => {
            d.refused_unforwarded(proxy, forwarded_for, now);
            let mut json = [0u8; BODY_BYTES_MAX];
            let e = RpcError::new(ErrorKind::Unforwarded {
                proxy,
                forwarded_for,
            })
            .with_id(id);
            let b = jsonrpc::write_error(&mut json, id, &e).expect("errors fit");
            return reply(out, 400, "application/json", &[], b, Verdict::Invalid);
        }
    };
    let (transactions, encoding, single) = match &call {
        Call::SendBundle {
            transactions,
            encoding,
            encoding_given,
        } => (
            transactions.as_slice(),
            bundle::TxEncoding::new(*encoding, *encoding_given),
            false,
        ),
        Call::SendTransaction {
            transaction,
            encoding,
            encoding_given,
        } => (
            core::slice::from_ref(transaction),
            bundle::TxEncoding::new(*encoding, *encoding_given),
            true,
        ),
        Call::GetTipAccounts => {
            let mut json = [0u8; BODY_BYTES_MAX];
            let b = jsonrpc::write_result_raw(&mut json, id, d.tip_accounts_json()).expect("fits");
            return reply(out, 200, "application/json", &[], b, Verdict::Answered);
        }
        Call::GetBundleStatuses { .. }
        | Call::GetInflightBundleStatuses { .. }
        | Call::GetBundleDelivery { .. } => {
            let mut json = [0u8; BODY_BYTES_MAX];
            let tenant = match d.tenancy().identify(claim, port) {
                Ok(slot) => slot,
                Err(denied) => {
                    let (status, kind) = denial(d, denied);
                    let e = RpcError::new(kind).with_id(id);
                    let b = jsonrpc::write_error(&mut json, id, &e).expect("errors fit");
                    return reply(
                        out,
                        status,
                        "application/json",
                        &[],
                        b,
                        Verdict::RefusedTenant,
                    );
                }
            };
            let to_ask = statuses::to_ask(d, &call, tenant);
            if to_ask.is_some()
                && let Err(denied) = d.tenancy().take_rate(tenant, now)
            {
                // An engine call on the tenant's behalf takes from its rate as a bundle does.
                let n = write_denied(d, denied, id, keep_alive, out);
                return (n, Verdict::RefusedTenant, method_seen.get());
            }
            let asking = to_ask.map(|to| d.ask_engine(&to.asked(conn, tenant, id), now));
            match asking {
                Some(Asking::Asked) => return (0, Verdict::Deferred, method_seen.get()),
                // No room to wait for an engine: landing cannot be answered now, nor an id the
                // record has not (`Invalid` would be a guess: see `statuses`).
                Some(Asking::Full)
                    if matches!(call, Call::GetBundleStatuses { .. })
                        || !statuses::record_has_every_id(d, &call, tenant, now) =>
                {
                    let n = write_full(id, keep_alive, out);
                    return (n, Verdict::RefusedCap, method_seen.get());
                }
                Some(Asking::Full) | None => {}
            }
            let mut result = [0u8; BODY_BYTES_MAX];
            let written = statuses::answer(d, &call, tenant, now, &mut result);
            let b = match written {
                Ok(r) => jsonrpc::write_result_raw(&mut json, id, r).expect("fits"),
                Err(_) => {
                    let e =
                        RpcError::internal("the answer did not fit the relay's buffer").with_id(id);
                    jsonrpc::write_error(&mut json, id, &e).expect("errors fit")
                }
            };
            return reply(out, 200, "application/json", &[], b, Verdict::Answered);
        }
    };
    // The cap is checked before decoding: an overloaded relay refuses without spending CPU.
    // The slot is taken where the bundle will be sent from (this thread's arena, or one lent
    // by the thread whose pool sends soonest), so it is decoded once, into this thread's decode
    // room, and encoded straight into the slot's frame.
    let mut admission = match d.admit(port, claim, now) {
        Ok(a) => a,
        Err(Refusal::Full) => {
            let n = write_full(id, keep_alive, out);
            return (n, Verdict::RefusedCap, method_seen.get());
        }
        Err(Refusal::RegionRemoved(r)) => {
            let e = RpcError::new(ErrorKind::RegionRemoved(d.region_name(r as usize))).with_id(id);
            let mut json = [0u8; BODY_BYTES_MAX];
            let b = jsonrpc::write_error(&mut json, id, &e).expect("errors fit");
            return reply(out, 503, "application/json", &[], b, Verdict::Unavailable);
        }
        Err(Refusal::Stopping) => {
            let e = RpcError::new(ErrorKind::Stopping).with_id(id);
            let mut json = [0u8; BODY_BYTES_MAX];
            let b = jsonrpc::write_error(&mut json, id, &e).expect("errors fit");
            let retry = [("Retry-After", CAP_RETRY_AFTER_S)];
            return reply(
                out,
                503,
                "application/json",
                &retry,
                b,
                Verdict::Unavailable,
            );
        }
        Err(Refusal::Backlog {
            region,
            next_ms,
            max_age_ms,
            retry_ms,
        }) => {
            let e = RpcError::new(ErrorKind::Backlog {
                region: d.region_name(usize::from(region)),
                next_ms,
                max_age_ms,
                retry_ms,
            })
            .with_id(id);
            let mut json = [0u8; BODY_BYTES_MAX];
            let b = jsonrpc::write_error(&mut json, id, &e).expect("errors fit");
            let mut wait = [0u8; 20];
            let retry = [("Retry-After", seconds(retry_ms, &mut wait))];
            let n = http1::write_response(out, 429, keep_alive, "application/json", &retry, b)
                .expect("intake output buffer holds any response");
            return (n, Verdict::RefusedBacklog, method_seen.get());
        }
        Err(Refusal::Tenant(denied)) => {
            let n = write_denied(d, denied, id, keep_alive, out);
            return (n, Verdict::RefusedTenant, method_seen.get());
        }
    };
    // A transaction without bundleOnly=true goes to the engine's own sendTransaction, as Jito
    // forwards it to the validator (an untipped one-transaction bundle would lose the auction).
    let forward = single && !bundle_only(query);
    let decoded = {
        let mut s = d.slot_mut(&mut admission);
        match bundle::decode_into_slot(&mut s, transactions, encoding) {
            Ok(decoded) => {
                let len = {
                    let (mut txs, frame) = s.txs_and_frame();
                    if forward {
                        let tx = txs.next().expect("one transaction");
                        jsonrpc::write_send_transaction(tx, frame)
                            .expect("the frame area holds the largest transaction's request")
                    } else {
                        grpc::encode_send_bundle(txs, frame)
                            .expect("the frame area holds the largest bundle")
                    }
                };
                s.meta.frame_len = len as u16;
                s.meta.json = forward;
                Ok(decoded)
            }
            Err(e) => Err(e),
        }
    };
    let decoded = match decoded {
        Ok(x) => x,
        Err(e) => {
            d.abandon(admission);
            let e = e.with_id(id);
            let mut json = [0u8; BODY_BYTES_MAX];
            let b = jsonrpc::write_error(&mut json, id, &e).expect("errors fit");
            return reply(out, 200, "application/json", &[], b, Verdict::Invalid);
        }
    };
    d.commit(admission);
    let mut json = [0u8; ADMITTED_BODY_BYTES_MAX];
    let hex = decoded.id.to_hex();
    if !single {
        let hex = core::str::from_utf8(&hex).expect("hex is ASCII");
        let b = jsonrpc::write_result_str(&mut json, id, hex).expect("fits");
        return reply(out, 200, "application/json", &[], b, Verdict::Admitted);
    }
    let mut sig = [0u8; SIGNATURE_BASE58_LEN_MAX];
    let sig = wire::signature_base58(&decoded.first_signature, &mut sig);
    let b = jsonrpc::write_result_str(&mut json, id, sig).expect("fits");
    let extra: &[(&str, &[u8])] = if bundle_only(query) {
        &[("x-bundle-id", &hex)]
    } else {
        &[]
    };
    reply(out, 200, "application/json", extra, b, Verdict::Admitted)
}

/// The whole HTTP response to status query `q` of `d` into `out` (at least
/// [`BODY_BYTES_MAX`] plus a head's room) and what it came to: the engine's answer with the
/// record's ([`Verdict::Answered`]), a 429 with no pair free in time
/// ([`Verdict::RefusedCap`]), or an error saying why there is no answer or why it did not fit
/// ([`Verdict::Unavailable`]).
pub fn write_answer(
    d: &Dispatcher,
    q: u16,
    keep_alive: bool,
    now: Instant,
    out: &mut [u8],
) -> (usize, Verdict) {
    let mut body = [0u8; super::queries::QUERY_ANSWER_BYTES + 1024];
    let query = d.query(q);
    let mut why = "the engine's answer is larger than the relay's answer buffer: ask for fewer \
                   bundles at once";
    if let Ok((status, said, b)) = statuses::write_query_answer(d, query, now, &mut body) {
        let verdict = match said {
            statuses::Said::Result => Verdict::Answered,
            statuses::Said::RateLimited => Verdict::RefusedCap,
            statuses::Said::Error => Verdict::Unavailable,
        };
        let mut wait = [0u8; 20];
        let retry = [(
            "Retry-After",
            seconds(d.query_retry_ms(query.region), &mut wait),
        )];
        let extra: &[(&str, &[u8])] = if status == 429 { &retry } else { &[] };
        if let Some(n) =
            http1::write_response(out, status, keep_alive, "application/json", extra, b)
        {
            return (n, verdict);
        }
        // The answer was whole: the room the connection's output has left is what is short,
        // held by earlier answers the bot has not read (it pipelines).
        why = "the answer does not fit beside the answers this connection has not read yet: \
               read them before asking more";
    }
    let id = Id::kept(query.id());
    let e = RpcError::internal(why).with_id(id);
    let mut small = [0u8; BODY_BYTES_MAX];
    let b = jsonrpc::write_error(&mut small, id, &e).expect("errors fit");
    let n = http1::write_response(out, 200, keep_alive, "application/json", &[], b)
        .expect("an error fits any answer's room");
    (n, Verdict::Unavailable)
}

/// The whole HTTP response of a relay with no room for the request (the in-flight cap, or no
/// room to wait on an engine): 429, `Retry-After`, and Jito's -32097 wording.
fn write_full(id: Id<'_>, keep_alive: bool, out: &mut [u8]) -> usize {
    let e = RpcError::new(ErrorKind::RateLimited {
        retry_after_ms: 1000,
    })
    .with_id(id);
    let mut json = [0u8; BODY_BYTES_MAX];
    let b = jsonrpc::write_error(&mut json, id, &e).expect("errors fit");
    let retry = [("Retry-After", CAP_RETRY_AFTER_S)];
    http1::write_response(out, 429, keep_alive, "application/json", &retry, b)
        .expect("intake output buffer holds any response")
}

/// The whole HTTP response refusing a tenant's request (`Retry-After` where waiting helps).
fn write_denied(
    d: &Dispatcher,
    denied: Denied,
    id: Id<'_>,
    keep_alive: bool,
    out: &mut [u8],
) -> usize {
    let mut wait = [0u8; 20];
    let retry_after = match denied {
        Denied::Rate { retry_after_ms, .. } => Some(seconds(retry_after_ms, &mut wait)),
        Denied::Share { .. } | Denied::Cap { .. } => Some(CAP_RETRY_AFTER_S),
        _ => None,
    };
    let (status, kind) = denial(d, denied);
    let e = RpcError::new(kind).with_id(id);
    let mut json = [0u8; BODY_BYTES_MAX];
    let b = jsonrpc::write_error(&mut json, id, &e).expect("errors fit");
    let wait = retry_after.map(|s| [("Retry-After", s)]);
    let extra: &[(&str, &[u8])] = wait.as_ref().map_or(&[], |w| w);
    http1::write_response(out, status, keep_alive, "application/json", extra, b)
        .expect("intake output buffer holds any response")
}

/// The HTTP status and JSON-RPC error of a tenant check's refusal.
fn denial(d: &Dispatcher, denied: Denied) -> (u16, ErrorKind<'_>) {
    match denied {
        Denied::Unknown { key_given } => (401, ErrorKind::Unauthorized { key_given }),
        // As the in-flight cap is answered ([`write_full`]).
        Denied::Cap { .. } => (
            429,
            ErrorKind::RateLimited {
                retry_after_ms: 1000,
            },
        ),
        Denied::Disabled { slot } => (403, ErrorKind::TenantDisabled(d.tenancy().name(slot))),
        Denied::Region { region, .. } => (
            403,
            ErrorKind::RegionNotAllowed(d.region_name(region as usize)),
        ),
        Denied::Rate {
            limit,
            retry_after_ms,
            ..
        } => (
            429,
            ErrorKind::TenantRateLimited {
                limit,
                retry_after_ms,
            },
        ),
        Denied::Share {
            in_flight,
            full: ShareFull::Ceiling,
            limit,
            ..
        } => (
            429,
            ErrorKind::TenantCeiling {
                in_flight,
                ceiling: limit,
            },
        ),
        Denied::Share {
            in_flight,
            full: ShareFull::Pool,
            limit,
            ..
        } => (
            429,
            ErrorKind::ShareFull {
                in_flight,
                floor: limit,
            },
        ),
    }
}

/// Whole seconds covering `ms` (at least 1), for `Retry-After`, written into `buf`.
fn seconds(ms: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = ms.div_ceil(1000).max(1);
    let mut i = buf.len();
    while n > 0 {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    &buf[i..]
}

/// The region name of a JSON-RPC path under a region (`/frankfurt/api/v1/bundles`): a bot
/// whose base URL names a region sends there alone, as through that region's pinned port, and
/// a proxy in front needs no port per region.
fn region_path(path: &[u8]) -> Option<&[u8]> {
    let rest = path.strip_prefix(b"/")?;
    let slash = memchr::memchr(b'/', rest)?;
    let (name, tail) = rest.split_at(slash);
    (!name.is_empty() && is_rpc_path(tail)).then_some(name)
}

/// The region a path names, by its config name in any case (host names, which Jito's regions
/// are, are not case-sensitive); a region a reload removed is still found.
fn region_named(d: &Dispatcher, name: &[u8]) -> Option<usize> {
    (0..d.region_count()).find(|&r| d.region_name(r).as_bytes().eq_ignore_ascii_case(name))
}

/// Room for a region path's 404: its words, the name sent and every region's name.
const REGION_404_BYTES_MAX: usize = 128
    + 2 * crate::config::REGION_NAME_BYTES_MAX
    + crate::limiter::REGIONS_MAX * (crate::config::REGION_NAME_BYTES_MAX + 2);

/// "not found" for a region path naming no region the relay runs: their names.
fn no_such_region(text: &mut [u8], d: &Dispatcher, name: &[u8]) -> usize {
    use std::io::Write as _;
    let mut w = &mut text[..];
    let room = w.len();
    let _ = w.write_all(b"not found: no region \"");
    // What the bot sent, as far as a region name can go; bytes outside printable ASCII as `?`.
    for &b in name.iter().take(crate::config::REGION_NAME_BYTES_MAX) {
        let _ = w.write_all(&[if (0x20..0x7f).contains(&b) { b } else { b'?' }]);
    }
    if name.len() > crate::config::REGION_NAME_BYTES_MAX {
        let _ = w.write_all("…".as_bytes());
    }
    let _ = w.write_all(b"\" among the regions this relay runs (");
    let mut first = true;
    for r in (0..d.region_count()).filter(|&r| !d.is_retired(r)) {
        let _ = write!(w, "{}{}", if first { "" } else { ", " }, d.region_name(r));
        first = false;
    }
    let _ = w.write_all(b")");
    room - w.len()
}

/// "not found" for a region path on another region's pinned port.
fn other_ports_region(text: &mut [u8], d: &Dispatcher, port: u8, name: &[u8]) -> usize {
    use std::io::Write as _;
    let mut w = &mut text[..];
    let room = w.len();
    let _ = write!(
        w,
        "not found: this port is region {}'s; send to region ",
        d.region_name(port.into())
    );
    let _ = w.write_all(name);
    let _ = w
        .write_all(b" through its own pinned port, or the rotating port with its name in the path");
    room - w.len()
}

/// The value of query parameter `name` (as sent: Jito's keys are UUIDs, nothing to decode).
fn query_param<'a>(query: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    query.split(|&b| b == b'&').find_map(|kv| {
        let (k, v) = kv.split_at(kv.iter().position(|&b| b == b'=')?);
        (k == name && v.len() > 1).then(|| &v[1..])
    })
}

/// `bundleOnly=true` among the query's parameters.
fn bundle_only(query: &[u8]) -> bool {
    query_param(query, b"bundleOnly") == Some(b"true")
}

/// The id to answer a request whose body could not be read at all.
pub const NULL_ID: Id<'static> = Id::NULL;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_admitted_answer_fits_its_buffer_and_one_byte_more_does_not() {
        let id_json = format!("\"{}\"", "x".repeat(jsonrpc::ID_LEN_MAX - 2));
        let request = format!(r#"{{"jsonrpc":"2.0","id":{id_json},"method":"getTipAccounts"}}"#);
        let id = jsonrpc::parse_request(request.as_bytes()).unwrap().id;
        assert_eq!(id.raw().len(), jsonrpc::ID_LEN_MAX);
        let signature = "1".repeat(SIGNATURE_BASE58_LEN_MAX);
        let mut json = [0u8; ADMITTED_BODY_BYTES_MAX];
        let b = jsonrpc::write_result_str(&mut json, id, &signature).unwrap();
        assert_eq!(
            b.len(),
            ADMITTED_BODY_BYTES_MAX,
            "exactly the longest answer"
        );
        let longer = "1".repeat(SIGNATURE_BASE58_LEN_MAX + 1);
        assert!(jsonrpc::write_result_str(&mut json, id, &longer).is_err());
    }
}
