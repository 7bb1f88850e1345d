//! gRPC unary calls over [`crate::h2`]: request headers and the 5-byte message prefix out,
//! and every reply (or its absence) folded into one [`Outcome`] the retry logic acts on.
//!
//! SendBundle is encoded by hand straight from the transactions' wire bytes into the stream's
//! send buffer ([`encode_send_bundle`]); a test checks it byte for byte against prost. No
//! function here allocates.

use crate::h2::hpack::HeaderList;
use crate::h2::{Connection, Field, Reason, Response, StartError, StreamEnd, StreamId};

/// Method paths (jito-facts.md section 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    SendBundle,
    GetTipAccounts,
    GetNextScheduledLeader,
}

impl Method {
    pub fn path(self) -> &'static str {
        match self {
            Method::SendBundle => "/searcher.SearcherService/SendBundle",
            Method::GetTipAccounts => "/searcher.SearcherService/GetTipAccounts",
            Method::GetNextScheduledLeader => "/searcher.SearcherService/GetNextScheduledLeader",
        }
    }
}

/// gRPC status codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code(pub u32);

/// The gRPC spec's names of codes 0 to 16, by code.
pub const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl Code {
    pub const OK: Code = Code(0);
    pub const CANCELLED: Code = Code(1);
    pub const UNKNOWN: Code = Code(2);
    pub const INVALID_ARGUMENT: Code = Code(3);
    pub const DEADLINE_EXCEEDED: Code = Code(4);
    pub const NOT_FOUND: Code = Code(5);
    pub const PERMISSION_DENIED: Code = Code(7);
    pub const RESOURCE_EXHAUSTED: Code = Code(8);
    pub const UNIMPLEMENTED: Code = Code(12);
    pub const INTERNAL: Code = Code(13);
    pub const UNAVAILABLE: Code = Code(14);
    pub const UNAUTHENTICATED: Code = Code(16);

    /// The name the gRPC spec gives the code (`PERMISSION_DENIED`); `OUT_OF_SPEC` beyond 16.
    pub fn name(self) -> &'static str {
        CODE_NAMES
            .get(self.0 as usize)
            .copied()
            .unwrap_or("OUT_OF_SPEC")
    }

    /// The gRPC spec's mapping for a reply without grpc-status (doc/http-grpc-status-mapping.md).
    pub fn from_http_status(status: u16) -> Code {
        match status {
            400 => Code::INTERNAL,
            401 => Code::UNAUTHENTICATED,
            403 => Code::PERMISSION_DENIED,
            404 => Code::UNIMPLEMENTED,
            429 | 502 | 503 | 504 => Code::UNAVAILABLE,
            _ => Code::UNKNOWN,
        }
    }
}

/// The message part of a status: grpc-message as received (percent-encoded), decoded on
/// demand so holding it costs nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct StatusMessage<'a>(pub &'a [u8]);

impl StatusMessage<'_> {
    /// Percent-decodes into `out` (truncating); returns the decoded bytes.
    pub fn decode_into<'b>(&self, out: &'b mut [u8]) -> &'b [u8] {
        let n = percent_decode(self.0, out);
        &out[..n]
    }
}

impl std::fmt::Debug for StatusMessage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for StatusMessage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut buf = [0u8; MESSAGE_SCAN_BYTES_MAX];
        f.write_str(&String::from_utf8_lossy(self.decode_into(&mut buf)))
    }
}

/// Percent-decodes grpc-message (gRPC spec: `%XX` for bytes outside 0x20..0x7e and `%`);
/// a malformed escape is kept as is, as the spec asks. Returns the length written.
pub fn percent_decode(input: &[u8], out: &mut [u8]) -> usize {
    let hex = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let (mut i, mut n) = (0, 0);
    while i < input.len() && n < out.len() {
        let c = input[i];
        if c == b'%' {
            if let (Some(h), Some(l)) = (
                input.get(i + 1).and_then(|&c| hex(c)),
                input.get(i + 2).and_then(|&c| hex(c)),
            ) {
                out[n] = h << 4 | l;
                n += 1;
                i += 3;
                continue;
            }
        }
        out[n] = c;
        n += 1;
        i += 1;
    }
    n
}

/// How much of grpc-message is examined for a retry hint; Jito's texts are about 120 bytes.
pub const MESSAGE_SCAN_BYTES_MAX: usize = 512;
/// Back-off when RESOURCE_EXHAUSTED carries no hint: Jito's limit is one request per second.
pub const RETRY_AFTER_MS_DEFAULT: u64 = 1_000;
/// A hint beyond this is clamped: a misparsed or hostile value must not park a pair for long.
pub const RETRY_AFTER_MS_MAX: u64 = 60_000;

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

/// Per-connection call settings.
#[derive(Clone, Debug)]
pub struct CallConfig {
    /// `https` over TLS, `http` for plaintext test peers.
    pub scheme: &'static str,
    /// Host (and port if not default) of the block engine.
    pub authority: String,
    /// Sent as `authorization` when set (e.g. `Bearer <token>`), never indexed.
    pub authorization: Option<String>,
    /// Back-off for RESOURCE_EXHAUSTED without a hint.
    pub retry_after_ms_default: u64,
}

/// The 5-byte gRPC message prefix (uncompressed).
pub const PREFIX_LEN: usize = 5;
/// grpc-timeout allows at most 8 digits.
const TIMEOUT_DIGITS_MAX: u64 = 99_999_999;

/// Starts a unary call whose message is written by `message` into the buffer it is given
/// (returning its length, `None` if it does not fit). `timeout_ms` goes out as grpc-timeout and
/// also ends the stream locally.
pub fn start_call(
    conn: &mut Connection,
    cfg: &CallConfig,
    now_ns: u64,
    method: Method,
    timeout_ms: Option<u64>,
    message: impl FnOnce(&mut [u8]) -> Option<usize>,
) -> Result<StreamId, StartError> {
    let mut timeout = [0u8; 10];
    let mut fields = [Field {
        name: b"",
        value: b"",
        sensitive: false,
    }; 8];
    let mut n = 0;
    let mut push = |name: &'static [u8], value, sensitive| {
        fields[n] = Field {
            name,
            value,
            sensitive,
        };
        n += 1;
    };
    push(b":method", b"POST", false);
    push(b":scheme", cfg.scheme.as_bytes(), false);
    push(b":path", method.path().as_bytes(), false);
    push(b":authority", cfg.authority.as_bytes(), false);
    push(b"content-type", b"application/grpc", false);
    push(b"te", b"trailers", false);
    if let Some(ms) = timeout_ms {
        let len = write_timeout(ms, &mut timeout);
        push(b"grpc-timeout", &timeout[..len], false);
    }
    if let Some(a) = &cfg.authorization {
        push(b"authorization", a.as_bytes(), true);
    }
    let deadline = timeout_ms.map(|ms| now_ns + ms * 1_000_000);
    conn.start_request(now_ns, &fields[..n], deadline, |buf| {
        let body = buf.get_mut(PREFIX_LEN..)?;
        let len = message(body)?;
        buf[0] = 0;
        buf[1..PREFIX_LEN].copy_from_slice(&(len as u32).to_be_bytes());
        Some(PREFIX_LEN + len)
    })
}

/// grpc-timeout in milliseconds (`<N>m`), or seconds when the milliseconds need more than
/// 8 digits.
fn write_timeout(ms: u64, out: &mut [u8; 10]) -> usize {
    let (v, unit) = if ms <= TIMEOUT_DIGITS_MAX {
        (ms, b'm')
    } else {
        ((ms / 1000).min(TIMEOUT_DIGITS_MAX), b'S')
    };
    let mut digits = [0u8; 8];
    let mut d = 0;
    let mut x = v;
    loop {
        digits[d] = b'0' + (x % 10) as u8;
        d += 1;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    for i in 0..d {
        out[i] = digits[d - 1 - i];
    }
    out[d] = unit;
    d + 1
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0, |a, &c| a * 10 + (c - b'0') as u64))
}

/// The wait in `... Retry after 1606ms ...` (case-insensitive `retry after`).
pub fn retry_after_from_message(decoded: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"retry after ";
    let at = decoded
        .windows(KEY.len())
        .position(|w| w.eq_ignore_ascii_case(KEY))?;
    let rest = &decoded[at + KEY.len()..];
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let value = parse_u64(&rest[..digits])?;
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
        return parse_u64(ms);
    }
    parse_u64(v.strip_suffix(b"s").unwrap_or(v)).map(|s| s.saturating_mul(1000))
}

fn status_of(list: &HeaderList) -> Option<Code> {
    list.get(b"grpc-status")
        .and_then(parse_u64)
        .map(|c| Code(c.min(u32::MAX as u64) as u32))
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
        Code::RESOURCE_EXHAUSTED => {
            let mut buf = [0u8; MESSAGE_SCAN_BYTES_MAX];
            let hint = retry_after_from_message(message.decode_into(&mut buf))
                .or_else(|| {
                    status_list
                        .get(b"retry-after")
                        .and_then(retry_after_from_metadata)
                })
                .or_else(|| {
                    resp.headers
                        .get(b"retry-after")
                        .and_then(retry_after_from_metadata)
                });
            Outcome::RateLimited {
                retry_after_ms: hint
                    .unwrap_or(retry_after_ms_default)
                    .min(RETRY_AFTER_MS_MAX),
            }
        }
        Code::UNAVAILABLE => Outcome::Retryable { why: "UNAVAILABLE" },
        Code::DEADLINE_EXCEEDED | Code::CANCELLED | Code::UNKNOWN | Code::INTERNAL => {
            Outcome::Unknown {
                why: "server failed the call; it may have been processed",
            }
        }
        code => Outcome::Rejected { code, message },
    }
}

// ---- protobuf, by hand ----

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(out: &mut [u8], pos: &mut usize, mut v: u64) -> Option<()> {
    while v >= 0x80 {
        *out.get_mut(*pos)? = (v as u8) | 0x80;
        *pos += 1;
        v >>= 7;
    }
    *out.get_mut(*pos)? = v as u8;
    *pos += 1;
    Some(())
}

/// `packet.Meta { size = 1 }` body length.
fn meta_len(size: usize) -> usize {
    if size == 0 {
        0
    } else {
        1 + varint_len(size as u64)
    }
}

fn packet_len(tx: &[u8]) -> usize {
    let data = if tx.is_empty() {
        0
    } else {
        1 + varint_len(tx.len() as u64) + tx.len()
    };
    let m = meta_len(tx.len());
    data + 1 + varint_len(m as u64) + m
}

/// Encodes `SendBundleRequest { bundle: Bundle { packets: [Packet { data: tx, meta: Meta {
/// size: tx.len() } }] } }` (field numbers: jito-facts.md section 2) into `out`; returns the
/// length, or `None` when `out` is too short. Matches prost's encoding byte for byte.
pub fn encode_send_bundle<'t>(
    txs: impl Iterator<Item = &'t [u8]> + Clone,
    out: &mut [u8],
) -> Option<usize> {
    let bundle_len: usize = txs
        .clone()
        .map(|tx| {
            let p = packet_len(tx);
            1 + varint_len(p as u64) + p
        })
        .sum();
    let mut pos = 0;
    put_varint(out, &mut pos, 0x0a)?; // SendBundleRequest.bundle = 1, length-delimited
    put_varint(out, &mut pos, bundle_len as u64)?;
    for tx in txs {
        put_varint(out, &mut pos, 0x1a)?; // Bundle.packets = 3
        put_varint(out, &mut pos, packet_len(tx) as u64)?;
        if !tx.is_empty() {
            put_varint(out, &mut pos, 0x0a)?; // Packet.data = 1
            put_varint(out, &mut pos, tx.len() as u64)?;
            out.get_mut(pos..pos + tx.len())?.copy_from_slice(tx);
            pos += tx.len();
        }
        put_varint(out, &mut pos, 0x12)?; // Packet.meta = 2
        put_varint(out, &mut pos, meta_len(tx.len()) as u64)?;
        if !tx.is_empty() {
            put_varint(out, &mut pos, 0x08)?; // Meta.size = 1, varint
            put_varint(out, &mut pos, tx.len() as u64)?;
        }
    }
    Some(pos)
}

/// `SendBundleResponse.uuid` (field 1) without allocating; `None` for malformed input.
pub fn send_bundle_uuid(msg: &[u8]) -> Option<&str> {
    let mut pos = 0;
    let mut uuid = "";
    while pos < msg.len() {
        let (key, used) = get_varint(&msg[pos..])?;
        pos += used;
        match key & 7 {
            0 => pos += get_varint(&msg[pos..])?.1,
            1 => pos += 8,
            5 => pos += 4,
            2 => {
                let (len, used) = get_varint(&msg[pos..])?;
                pos += used;
                let v = msg.get(pos..pos.checked_add(len as usize)?)?;
                if key >> 3 == 1 {
                    uuid = std::str::from_utf8(v).ok()?;
                }
                pos += len as usize;
            }
            _ => return None,
        }
    }
    (pos == msg.len()).then_some(uuid)
}

fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &c) in b.iter().enumerate().take(10) {
        v |= ((c & 0x7f) as u64) << (7 * i);
        if c & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Encodes any prost message (cold-path methods: GetTipAccounts, GetNextScheduledLeader).
pub fn encode_prost<M: prost::Message>(m: &M, out: &mut [u8]) -> Option<usize> {
    let len = m.encoded_len();
    let mut buf = out.get_mut(..len)?;
    m.encode(&mut buf).ok()?;
    Some(len)
}
