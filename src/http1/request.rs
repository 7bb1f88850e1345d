//! One request framed from the front of a buffer: httparse reads the head, and the rules
//! httparse leaves to its caller (RFC 9112 section 6 message framing) are applied here,
//! strictly. Keeps no state between calls; [`super::conn`] is the connection built on it.

use super::error::HttpError;
use super::limits::{HEADERS_MAX, Limits};

/// The request method. Routing needs only these two; anything else is the router's 405.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    /// Answered as GET would be, without the body (RFC 9110 §9.3.2).
    Head,
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
        let mut found = None;
        self.scan(name, |v| {
            found = Some(v);
            true
        });
        found
    }

    /// The value of the last header field named `name`: where each hop appends a field of its
    /// own (`X-Forwarded-For`), the last is the nearest hop's.
    pub fn last_header(&self, name: &str) -> Option<&'a [u8]> {
        let mut found = None;
        self.scan(name, |v| {
            found = Some(v);
            false
        });
        found
    }

    /// Calls `seen` with the value of each field named `name`, in order, until it says stop.
    fn scan(&self, name: &str, mut seen: impl FnMut(&'a [u8]) -> bool) {
        let head = self.head;
        // Line ends found by memchr, many bytes a step: the head is rescanned on every
        // request that asks.
        let mut from = 0;
        let mut lines = memchr::memchr_iter(b'\n', head)
            .chain(core::iter::once(head.len()))
            .map(|end| {
                let line = strip_cr(&head[from..end]);
                from = end + 1;
                line
            });
        // Empty lines before the request line are allowed (RFC 9112 section 2.2), then the
        // request line itself.
        if lines.by_ref().find(|l| !l.is_empty()).is_none() {
            return;
        }
        for line in lines {
            if line.is_empty() {
                return;
            }
            let Some(colon) = memchr::memchr(b':', line) else {
                return;
            };
            if line[..colon].eq_ignore_ascii_case(name.as_bytes())
                && seen(trim_ows(&line[colon + 1..]))
            {
                return;
            }
        }
    }
}

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
    /// sends the body; write [`CONTINUE`](super::write::CONTINUE) once for this request.
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
        "HEAD" => Method::Head,
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
pub fn split_target(target: &[u8]) -> (&[u8], &[u8]) {
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
