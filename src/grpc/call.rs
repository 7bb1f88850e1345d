//! Starting a unary call: the request headers (with grpc-timeout and authorization), the
//! 5-byte message prefix, and the message written by the caller straight into the stream's
//! send buffer.

use crate::h2::hpack::Encoded;
use crate::h2::{Connection, Fields, StartError, StreamId};

/// Method paths (jito-facts.md section 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    SendBundle,
    GetTipAccounts,
    GetNextScheduledLeader,
    /// Searcher authentication (`auth.AuthService`).
    GenerateAuthChallenge,
    GenerateAuthTokens,
    RefreshAccessToken,
}

impl Method {
    pub fn path(self) -> &'static str {
        match self {
            Method::SendBundle => "/searcher.SearcherService/SendBundle",
            Method::GetTipAccounts => "/searcher.SearcherService/GetTipAccounts",
            Method::GetNextScheduledLeader => "/searcher.SearcherService/GetNextScheduledLeader",
            Method::GenerateAuthChallenge => "/auth.AuthService/GenerateAuthChallenge",
            Method::GenerateAuthTokens => "/auth.AuthService/GenerateAuthTokens",
            Method::RefreshAccessToken => "/auth.AuthService/RefreshAccessToken",
        }
    }
}

impl Method {
    pub const ALL: [Method; 6] = [
        Method::SendBundle,
        Method::GetTipAccounts,
        Method::GetNextScheduledLeader,
        Method::GenerateAuthChallenge,
        Method::GenerateAuthTokens,
        Method::RefreshAccessToken,
    ];
}

/// Per-connection call settings.
#[derive(Clone, Debug)]
pub struct CallConfig {
    /// `https` over TLS, `http` for plaintext test peers.
    scheme: &'static str,
    /// Host (and port if not default) of the block engine.
    authority: String,
    /// Per method (in [`Method::ALL`]'s order), the fields every call of it repeats, encoded
    /// once: `:method`, `:scheme`, `:path`, `:authority`, `content-type`, `te`.
    heads: Vec<Encoded>,
    /// Sent as `authorization` when set (e.g. `Bearer <token>`), never indexed.
    pub authorization: Option<String>,
    /// Back-off for RESOURCE_EXHAUSTED without a hint.
    pub retry_after_ms_default: u64,
}

impl CallConfig {
    /// Calls to `authority` over `scheme`, no authorization, the default back-off.
    pub fn new(scheme: &'static str, authority: String) -> CallConfig {
        let heads = Method::ALL
            .iter()
            .map(|m| {
                Encoded::of(&[
                    (b":method", b"POST"),
                    (b":scheme", scheme.as_bytes()),
                    (b":path", m.path().as_bytes()),
                    (b":authority", authority.as_bytes()),
                    (b"content-type", b"application/grpc"),
                    (b"te", b"trailers"),
                ])
            })
            .collect();
        CallConfig {
            scheme,
            authority,
            heads,
            authorization: None,
            retry_after_ms_default: RETRY_AFTER_MS_DEFAULT,
        }
    }

    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// What the header blocks hold on the heap (the budget counts it).
    pub fn heap_bytes(&self) -> usize {
        self.heads.capacity() * std::mem::size_of::<Encoded>()
            + self.heads.iter().map(Encoded::heap_bytes).sum::<usize>()
    }

    fn head(&self, method: Method) -> &Encoded {
        &self.heads[method as usize]
    }
}

/// Back-off when RESOURCE_EXHAUSTED carries no hint: Jito's limit is one request per second.
pub const RETRY_AFTER_MS_DEFAULT: u64 = 1_000;

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
    let mut fields = Fields::<2>::new();
    if let Some(ms) = timeout_ms {
        let len = write_timeout(ms, &mut timeout);
        fields.push(b"grpc-timeout", &timeout[..len], false);
    }
    if let Some(a) = &cfg.authorization {
        fields.push(b"authorization", a.as_bytes(), true);
    }
    let deadline = timeout_ms.map(|ms| now_ns + ms * 1_000_000);
    let head = cfg.head(method);
    conn.start_request_encoded(now_ns, head, fields.as_slice(), deadline, |buf| {
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
