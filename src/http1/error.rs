//! Why a request cannot be served: one named constant per refusal, each with the status it
//! is answered with and words the client's developer can act on. Answers are written by
//! [`super::write::write_error`]; this file only names them.

use super::status::reason;

/// A request that cannot be served: answer it with [`write_error`](super::write::write_error), then close the
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
    /// More than [`HEADERS_MAX`](super::limits::HEADERS_MAX) header fields.
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
    /// For the reactor: the head came, the body did not arrive within the request's deadline.
    pub const BODY_TIMEOUT: HttpError = HttpError {
        status: 408,
        what: "request body not received in time",
    };

    /// The client shut its sending side in the middle of a head: it waits for an answer to a
    /// request that can never be whole.
    pub const HEAD_CUT_SHORT: HttpError = HttpError {
        status: 400,
        what: "request head cut short: the client closed its side before the head's blank line",
    };
    /// The same in the middle of a body (written with how much of it came).
    pub const BODY_CUT_SHORT: HttpError = HttpError {
        status: 400,
        what: "request body cut short: the client closed its side before all of its Content-Length",
    };

    /// Every error this module returns, for tests and for sizing answer buffers.
    pub const ALL: [HttpError; 22] = [
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
        Self::BODY_TIMEOUT,
        Self::MALFORMED_HEAD,
        Self::HEAD_CUT_SHORT,
        Self::BODY_CUT_SHORT,
    ];
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, reason(self.status), self.what)
    }
}

impl std::error::Error for HttpError {}
