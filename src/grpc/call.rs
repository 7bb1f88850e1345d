//! Starting a unary call: the request headers (with grpc-timeout and authorization), the
//! 5-byte message prefix, and the message written by the caller straight into the stream's
//! send buffer.

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
    let mut fields = Fields::<8>::new();
    fields.push(b":method", b"POST", false);
    fields.push(b":scheme", cfg.scheme.as_bytes(), false);
    fields.push(b":path", method.path().as_bytes(), false);
    fields.push(b":authority", cfg.authority.as_bytes(), false);
    fields.push(b"content-type", b"application/grpc", false);
    fields.push(b"te", b"trailers", false);
    if let Some(ms) = timeout_ms {
        let len = write_timeout(ms, &mut timeout);
        fields.push(b"grpc-timeout", &timeout[..len], false);
    }
    if let Some(a) = &cfg.authorization {
        fields.push(b"authorization", a.as_bytes(), true);
    }
    let deadline = timeout_ms.map(|ms| now_ns + ms * 1_000_000);
    conn.start_request(now_ns, fields.as_slice(), deadline, |buf| {
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
