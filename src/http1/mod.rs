//! HTTP/1.1 intake, sans-IO: bytes in, one framed request (or "need more", or an error to
//! answer) out; responses written into the caller's buffer. This file frames one request and
//! keeps no state between calls; [`conn`] is one whole connection (its buffers, pipelining,
//! `100 Continue`, deadlines and closing) built on it. Only the reactor does I/O and reads the
//! clock: nothing here does either, and nothing allocates after a connection's buffers.
//!
//! The request head is parsed by `httparse`: it is the parser under hyper, kept up by its
//! maintainers for years and fuzzed by many users, scans with SIMD (SSE4.2/AVX2 where the CPU
//! has them), and writes its results into a caller-provided header array, so it never
//! allocates. What httparse leaves to its caller, message framing (RFC 9112 section 6), is
//! done here, strictly, because framing disagreements between peers are how request smuggling
//! works:
//! - the body length comes only from one `Content-Length` of decimal digits;
//! - `Transfer-Encoding` is refused (501), and refused as malformed (400) beside a
//!   `Content-Length`;
//! - a `POST` without `Content-Length` is 411; other methods without it have an empty body.
//!
//! Limits, each with its reason:
//! - [`HEAD_BYTES_MAX_DEFAULT`] (8 KiB): a Jito client's head is a request line and a handful of
//!   headers, well under 1 KiB; 8 KiB is what nginx and most servers allow by default, and it
//!   bounds the bytes httparse rescans while a head trickles in. Over it: 431.
//! - [`BODY_BYTES_MAX_DEFAULT`] (64 KiB): the largest legal `sendBundle` is 5 transactions of
//!   1683 base58 characters plus JSON framing, under 9 KiB; 64 KiB leaves room for whitespace
//!   and unknown options while keeping one connection's buffer small. Over it: 413, decided
//!   from the head, before any body byte is read.
//! - [`HEADERS_MAX`] (64): the header array lives on the stack (2 KiB); more fields is 431.
//! - [`HEAD_TIMEOUT_MS_DEFAULT`], [`IDLE_TIMEOUT_MS_DEFAULT`] and [`SEND_TIMEOUT_MS_DEFAULT`]
//!   are enforced by [`conn`] with the time the reactor gives it; they are here so every intake
//!   limit is in one place. A client that misses the head deadline gets
//!   [`HttpError::HEAD_TIMEOUT`] (408).
//!
//! How a caller drives it (see [`parse`], [`needed`] and [`frame`]):
//! 1. Append received bytes to the connection's buffer and call [`parse`].
//! 2. `Ok(Some(req))`: handle it, then drop `req.len` bytes from the front of the buffer and
//!    call again: clients may pipeline, and the next request may already be there.
//! 3. `Ok(None)`: wait for more bytes. If the request said `Expect: 100-continue` and its body
//!    has not arrived, [`needed`] (or [`frame`], which does both in one call) answers
//!    [`Needed::Body`] with `expect_continue: true`: write [`CONTINUE`] once for that request.
//!    Never send it once the request is complete: the client is not waiting for it then.
//! 4. `Err(e)`: write [`write_error`]'s answer and close the connection (after the answer is
//!    sent: the bytes that follow cannot be framed, so nothing more is read from it).
//!
//! The whole request is at most `head_bytes_max + body_bytes_max` bytes
//! ([`Limits::request_bytes_max`]), so a buffer that size never overflows before [`parse`] has
//! either framed a request or refused it.
//!
//! Measured cost: `cargo bench --workspace --profile dev --bench http1 -- --warm-up-time 1
//! --measurement-time 3` (benches/http1.rs): a python-requests head of 7 fields (239 bytes)
//! before a 1.6 KB sendBundle body; criterion point estimates. These are **dev-profile**
//! figures (this crate at opt-level 1, httparse at 2), taken on the 2-core build machine at a
//! load average of 13, three runs; a release run on a quiet machine will be lower.
//!
//! | run | [`parse`] (framed request) | bare httparse head parse | [`parse`], last body byte missing | [`write_response`] 200, 100-byte body |
//! |---|---|---|---|---|
//! | 1 | 1.21 µs | 0.75 µs | 1.08 µs | 259 ns |
//! | 2 | 1.24 µs | 0.82 µs | 1.12 µs | 221 ns |
//! | 3 | 1.09 µs | 0.79 µs | 1.08 µs | 216 ns |
//!
//! What the table supports: httparse is about two thirds of a framed request; the framing
//! rules (a pass over the parsed fields) are the rest. [`conn`] calls this once when a request
//! arrives whole, twice when its body follows its head, and a logarithmic number of times when
//! its head trickles in (see its docs).
//!
//! Responses: [`write_response`] writes status line, `Content-Type`, `Content-Length`,
//! `Connection` and the caller's extra headers. There is no `Date` header: RFC 9110 lets a
//! server without a reliable clock omit it, no Jito client reads it, and it would cost a clock
//! read and a date format (or a per-second cache shared by the loop) on every answer.

pub mod conn;
pub mod fuzz;
mod write;

pub use write::{CONTINUE, ERROR_RESPONSE_LEN_MAX, reason, write_error, write_response};

/// Largest request head (request line and headers, through the blank line) accepted by
/// default; see the module documentation for the reason.
pub const HEAD_BYTES_MAX_DEFAULT: usize = 8 * 1024;
/// Largest request body (`Content-Length`) accepted by default.
pub const BODY_BYTES_MAX_DEFAULT: usize = 64 * 1024;
/// The whole head must arrive within this many milliseconds of its first byte: a client
/// trickling a head byte by byte (slowloris) would otherwise hold a connection slot forever.
pub const HEAD_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// A keep-alive connection with no request in progress is closed after this long. Bots keep
/// connections warm with a request every few seconds; a minute frees slots held by the dead.
pub const IDLE_TIMEOUT_MS_DEFAULT: u64 = 60_000;
/// A connection whose answers make no progress into the socket for this long is closed: a
/// client that never reads would otherwise pin its connection slot (and its output buffer)
/// for as long as it stays connected.
pub const SEND_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Most header fields in one head; the parser's array of field slots lives on the stack.
pub const HEADERS_MAX: usize = 64;

/// Size limits for one request.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Request line and headers, through the blank line, in bytes.
    pub head_bytes_max: usize,
    /// Body, in bytes, as declared by `Content-Length`.
    pub body_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            head_bytes_max: HEAD_BYTES_MAX_DEFAULT,
            body_bytes_max: BODY_BYTES_MAX_DEFAULT,
        }
    }
}

impl Limits {
    /// The largest request these limits let through: a receive buffer this big always holds
    /// one whole request (or enough of one for [`parse`] to refuse it).
    pub const fn request_bytes_max(&self) -> usize {
        self.head_bytes_max + self.body_bytes_max
    }
}

/// The request method. Routing needs only these two; anything else is the router's 405.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Other,
}

/// One framed request, borrowing the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: Method,
    /// The path without the query string. An absolute-form target
    /// (`http://host:port/p?q`, which RFC 9112 says servers must accept) is reduced to its path.
    pub path: &'a [u8],
    /// What followed the first `?` of the target (empty when there was none): Jito clients put
    /// `uuid=…` and `bundleOnly=true` there.
    pub query: &'a [u8],
    pub body: &'a [u8],
    /// Whether the connection stays open after the answer: HTTP/1.1 unless `Connection: close`;
    /// HTTP/1.0 only with `Connection: keep-alive` (and without `close`).
    pub keep_alive: bool,
    /// Bytes of the buffer this request used (head and body): the caller drops them before the
    /// next call, which may find a pipelined request right behind.
    pub len: usize,
    /// `Expect: 100-continue` was sent (HTTP/1.1 only: RFC 9110 says to ignore it from 1.0).
    /// A complete request needs no `100 Continue`; see [`Needed::Body`] for when one is due.
    pub expect_continue: bool,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// The head, from the request line through the blank line, for [`Request::header`].
    pub head: &'a [u8],
}

impl<'a> Request<'a> {
    /// The value of the first header field named `name` (ASCII case-insensitive), without
    /// surrounding whitespace. Rescans the head, which httparse has already validated, so
    /// nothing per request needs to be kept beyond the fields above.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        let mut lines = self.head.split(|&b| b == b'\n').map(strip_cr);
        // Empty lines before the request line are allowed (RFC 9112 section 2.2), then the
        // request line itself.
        lines.by_ref().find(|l| !l.is_empty())?;
        for line in lines {
            if line.is_empty() {
                break;
            }
            let colon = line.iter().position(|&b| b == b':')?;
            if line[..colon].eq_ignore_ascii_case(name.as_bytes()) {
                return Some(trim_ows(&line[colon + 1..]));
            }
        }
        None
    }
}

/// A request that cannot be served: answer it with [`write_error`], then close the
/// connection, since what follows it in the stream cannot be framed with confidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpError {
    pub status: u16,
    /// What was wrong, in words the client's developer can act on; the response body.
    pub what: &'static str,
}

impl HttpError {
    /// The head did not end within `head_bytes_max` bytes.
    pub const HEAD_TOO_LARGE: HttpError = HttpError {
        status: 431,
        what: "request head too large: request line and headers exceed the server's limit",
    };
    /// More than [`HEADERS_MAX`] header fields.
    pub const TOO_MANY_HEADERS: HttpError = HttpError {
        status: 431,
        what: "too many header fields: at most 64 are accepted",
    };
    /// `Content-Length` above `body_bytes_max`, refused before the body is read.
    pub const BODY_TOO_LARGE: HttpError = HttpError {
        status: 413,
        what: "request body too large: Content-Length exceeds the server's limit",
    };
    /// A `POST` with neither `Content-Length` nor `Transfer-Encoding`.
    pub const LENGTH_REQUIRED: HttpError = HttpError {
        status: 411,
        what: "POST without Content-Length: send the body's length in Content-Length",
    };
    /// `Transfer-Encoding: chunked` (the only coding clients send for requests).
    pub const CHUNKED_NOT_SUPPORTED: HttpError = HttpError {
        status: 501,
        what: "chunked request bodies are not supported; send Content-Length",
    };
    /// Any other `Transfer-Encoding`.
    pub const TRANSFER_CODING_NOT_SUPPORTED: HttpError = HttpError {
        status: 501,
        what: "Transfer-Encoding is not supported; send the body with Content-Length",
    };
    /// Both framings at once: the classic request-smuggling shape (RFC 9112 section 6.3).
    pub const CONTENT_LENGTH_WITH_TRANSFER_ENCODING: HttpError = HttpError {
        status: 400,
        what: "both Content-Length and Transfer-Encoding: send Content-Length only",
    };
    /// `Content-Length` given more than once, even with equal values.
    pub const CONTENT_LENGTH_DUPLICATE: HttpError = HttpError {
        status: 400,
        what: "Content-Length given more than once",
    };
    /// `Content-Length` that is not one run of ASCII digits.
    pub const CONTENT_LENGTH_NOT_A_NUMBER: HttpError = HttpError {
        status: 400,
        what: "Content-Length is not a decimal number",
    };
    /// An HTTP/2 request line, such as the prior-knowledge preface `PRI * HTTP/2.0`.
    pub const HTTP2_NOT_SUPPORTED: HttpError = HttpError {
        status: 505,
        what: "HTTP/2 is not served on this port: use HTTP/1.1",
    };
    /// `HTTP/<anything but 1.0 or 1.1>`.
    pub const VERSION_NOT_SUPPORTED: HttpError = HttpError {
        status: 505,
        what: "HTTP version not supported: use HTTP/1.1 (or HTTP/1.0)",
    };
    /// The version token does not start with `HTTP/`.
    pub const MALFORMED_VERSION: HttpError = HttpError {
        status: 400,
        what: "malformed request line: invalid HTTP version (httparse: Version)",
    };
    pub const MALFORMED_HEADER_NAME: HttpError = HttpError {
        status: 400,
        what: "malformed request head: invalid header name (httparse: HeaderName)",
    };
    pub const MALFORMED_HEADER_VALUE: HttpError = HttpError {
        status: 400,
        what: "malformed request head: invalid header value (httparse: HeaderValue)",
    };
    pub const MALFORMED_NEW_LINE: HttpError = HttpError {
        status: 400,
        what: "malformed request head: invalid line ending (httparse: NewLine)",
    };
    pub const MALFORMED_TOKEN: HttpError = HttpError {
        status: 400,
        what: "malformed request line: invalid method or target (httparse: Token)",
    };
    /// httparse's response-only error; listed so every httparse error has a name.
    pub const MALFORMED_STATUS: HttpError = HttpError {
        status: 400,
        what: "malformed request head (httparse: Status)",
    };
    /// A head httparse accepted without method, target or version; httparse never does that,
    /// so this answers rather than panics should a later version change.
    pub const MALFORMED_HEAD: HttpError = HttpError {
        status: 400,
        what: "malformed request head",
    };
    /// For the reactor: the head did not arrive within its deadline.
    pub const HEAD_TIMEOUT: HttpError = HttpError {
        status: 408,
        what: "request head not received in time",
    };

    /// Every error this module returns, for tests and for sizing answer buffers.
    pub const ALL: [HttpError; 19] = [
        Self::HEAD_TOO_LARGE,
        Self::TOO_MANY_HEADERS,
        Self::BODY_TOO_LARGE,
        Self::LENGTH_REQUIRED,
        Self::CHUNKED_NOT_SUPPORTED,
        Self::TRANSFER_CODING_NOT_SUPPORTED,
        Self::CONTENT_LENGTH_WITH_TRANSFER_ENCODING,
        Self::CONTENT_LENGTH_DUPLICATE,
        Self::CONTENT_LENGTH_NOT_A_NUMBER,
        Self::HTTP2_NOT_SUPPORTED,
        Self::VERSION_NOT_SUPPORTED,
        Self::MALFORMED_VERSION,
        Self::MALFORMED_HEADER_NAME,
        Self::MALFORMED_HEADER_VALUE,
        Self::MALFORMED_NEW_LINE,
        Self::MALFORMED_TOKEN,
        Self::MALFORMED_STATUS,
        Self::HEAD_TIMEOUT,
        Self::MALFORMED_HEAD,
    ];
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, reason(self.status), self.what)
    }
}

impl std::error::Error for HttpError {}

/// How far a partly received request has come; see [`needed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needed {
    /// A whole request of `len` bytes is in the buffer: [`parse`] returns it.
    Complete { len: usize },
    /// The head has not ended yet. The request will be at most `len_max` bytes in all
    /// ([`Limits::request_bytes_max`]); [`parse`] refuses anything longer.
    Head { len_max: usize },
    /// The head is complete and valid, and the request will be exactly `len` bytes; the body
    /// is still arriving. `expect_continue`: the client waits for `100 Continue` before it
    /// sends the body; write [`CONTINUE`] once for this request.
    Body { len: usize, expect_continue: bool },
}

/// [`parse`]'s answer with the partial cases told apart; [`frame`] returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framed<'a> {
    Request(Request<'a>),
    /// As [`Needed::Head`].
    NeedHead {
        len_max: usize,
    },
    /// As [`Needed::Body`].
    NeedBody {
        len: usize,
        expect_continue: bool,
    },
}

/// Frames the first request in `buf`. `Ok(None)`: the request is not all there yet (call
/// again with more bytes; [`needed`] says how many and whether `100 Continue` is due).
/// Only the first request is looked at; the caller drops `len` bytes and calls again for the
/// next.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<Request<'a>>, HttpError> {
    match frame(buf, limits)? {
        Framed::Request(r) => Ok(Some(r)),
        Framed::NeedHead { .. } | Framed::NeedBody { .. } => Ok(None),
    }
}

/// How much of the first request in `buf` is there, for sizing a receive buffer and for
/// deciding when to send `100 Continue`. Errors are exactly [`parse`]'s.
pub fn needed(buf: &[u8], limits: &Limits) -> Result<Needed, HttpError> {
    Ok(match frame(buf, limits)? {
        Framed::Request(r) => Needed::Complete { len: r.len },
        Framed::NeedHead { len_max } => Needed::Head { len_max },
        Framed::NeedBody {
            len,
            expect_continue,
        } => Needed::Body {
            len,
            expect_continue,
        },
    })
}

/// [`parse`] and [`needed`] in one call: the reactor's entry point when it also answers
/// `Expect: 100-continue`.
pub fn frame<'a>(buf: &'a [u8], limits: &Limits) -> Result<Framed<'a>, HttpError> {
    // Only the first head_bytes_max bytes can hold a head we accept, so httparse never
    // scans further, however much is buffered behind it.
    let window = &buf[..buf.len().min(limits.head_bytes_max)];
    let mut fields = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut req = httparse::Request::new(&mut fields);
    let head_len = match req.parse(window) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if window.len() >= limits.head_bytes_max => {
            return Err(HttpError::HEAD_TOO_LARGE);
        }
        Ok(httparse::Status::Partial) => {
            return Ok(Framed::NeedHead {
                len_max: limits.request_bytes_max(),
            });
        }
        Err(e) => return Err(head_error(e, window)),
    };
    let (Some(method), Some(target), Some(minor_version)) = (req.method, req.path, req.version)
    else {
        return Err(HttpError::MALFORMED_HEAD);
    };

    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue = false;
    for field in req.headers.iter() {
        let name = field.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            if content_length.is_some() {
                return Err(HttpError::CONTENT_LENGTH_DUPLICATE);
            }
            content_length = Some(decimal(trim_ows(field.value))?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // Several fields form one list; the last coding is the one that frames the body.
            transfer_encoding = Some(field.value);
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in field.value.split(|&b| b == b',').map(trim_ows) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            // Other expectations are ignored (RFC 9110 lets a server answer them with 417;
            // a client that sends one gets served as if it had not).
            expect_continue |= trim_ows(field.value).eq_ignore_ascii_case(b"100-continue");
        }
    }

    if let Some(te) = transfer_encoding {
        if content_length.is_some() {
            return Err(HttpError::CONTENT_LENGTH_WITH_TRANSFER_ENCODING);
        }
        let last = te.rsplit(|&b| b == b',').next().map_or(&b""[..], trim_ows);
        return Err(if last.eq_ignore_ascii_case(b"chunked") {
            HttpError::CHUNKED_NOT_SUPPORTED
        } else {
            HttpError::TRANSFER_CODING_NOT_SUPPORTED
        });
    }
    let method = match method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        _ => Method::Other,
    };
    let body_len = match content_length {
        Some(n) if n > limits.body_bytes_max as u64 => return Err(HttpError::BODY_TOO_LARGE),
        Some(n) => n as usize,
        None if method == Method::Post => return Err(HttpError::LENGTH_REQUIRED),
        None => 0,
    };

    let expect_continue = expect_continue && minor_version == 1;
    let len = head_len + body_len;
    if buf.len() < len {
        return Ok(Framed::NeedBody {
            len,
            expect_continue,
        });
    }
    let (path, query) = split_target(target.as_bytes());
    Ok(Framed::Request(Request {
        method,
        path,
        query,
        body: &buf[head_len..len],
        keep_alive: !close && (minor_version == 1 || keep_alive_token),
        len,
        expect_continue,
        minor_version,
        head: &buf[..head_len],
    }))
}

/// Names httparse's error; a bad version token is told apart into HTTP/2, another
/// `HTTP/x.y` (505) and garbage (400).
fn head_error(e: httparse::Error, window: &[u8]) -> HttpError {
    match e {
        httparse::Error::TooManyHeaders => HttpError::TOO_MANY_HEADERS,
        httparse::Error::HeaderName => HttpError::MALFORMED_HEADER_NAME,
        httparse::Error::HeaderValue => HttpError::MALFORMED_HEADER_VALUE,
        httparse::Error::NewLine => HttpError::MALFORMED_NEW_LINE,
        httparse::Error::Token => HttpError::MALFORMED_TOKEN,
        httparse::Error::Status => HttpError::MALFORMED_STATUS,
        httparse::Error::Version => {
            let start = window
                .iter()
                .position(|&b| b != b'\r' && b != b'\n')
                .unwrap_or(window.len());
            let line = window[start..]
                .split(|&b| b == b'\n')
                .next()
                .map_or(&b""[..], strip_cr);
            // httparse allows exactly one space between method, target and version.
            let version = line.split(|&b| b == b' ').nth(2).unwrap_or(b"");
            if version.starts_with(b"HTTP/2") {
                HttpError::HTTP2_NOT_SUPPORTED
            } else if version.starts_with(b"HTTP/") {
                HttpError::VERSION_NOT_SUPPORTED
            } else {
                HttpError::MALFORMED_VERSION
            }
        }
    }
}

/// `Content-Length = 1*DIGIT`. Values beyond u64 saturate: they are over any limit anyway.
fn decimal(value: &[u8]) -> Result<u64, HttpError> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::CONTENT_LENGTH_NOT_A_NUMBER);
    }
    Ok(value.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Splits a request target into path and query; an absolute-form target loses its scheme
/// and authority first.
fn split_target(target: &[u8]) -> (&[u8], &[u8]) {
    let mut path = target;
    for scheme in [&b"http://"[..], b"https://"] {
        if target.len() >= scheme.len() && target[..scheme.len()].eq_ignore_ascii_case(scheme) {
            let rest = &target[scheme.len()..];
            path = match rest.iter().position(|&b| b == b'/' || b == b'?') {
                Some(i) if rest[i] == b'/' => &rest[i..],
                // `http://host?q` has an empty path, which means `/`; keep the query.
                Some(i) => {
                    return (b"/", &rest[i + 1..]);
                }
                None => b"/",
            };
            break;
        }
    }
    match path.iter().position(|&b| b == b'?') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (path, b""),
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Optional whitespace (RFC 9110 section 5.6.3) trimmed from both ends.
fn trim_ows(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|&b| b != b' ' && b != b'\t');
    let Some(start) = start else { return b"" };
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .unwrap_or(start);
    &v[start..=end]
}
