//! The intake's limits, each with its reason: sizes one request may have, and the deadlines
//! [`super::conn`] enforces with the time the reactor gives it. One place for every intake
//! limit; this file checks nothing itself.
//!
//! - [`HEAD_BYTES_MAX_DEFAULT`] (8 KiB): a Jito client's head is a request line and a handful of
//!   headers, well under 1 KiB; 8 KiB is what nginx and most servers allow by default, and it
//!   bounds the bytes httparse rescans while a head trickles in. Over it: 431.
//! - [`BODY_BYTES_MAX_DEFAULT`] (64 KiB): the largest legal `sendBundle` is 5 transactions of
//!   1683 base58 characters plus JSON framing, under 9 KiB; 64 KiB leaves room for whitespace
//!   and unknown options while keeping one connection's buffer small. Over it: 413, decided
//!   from the head, before any body byte is read.
//! - [`HEADERS_MAX`] (64): the header array lives on the stack (2 KiB); more fields is 431.
//! - [`HEAD_TIMEOUT_MS_DEFAULT`], [`IDLE_TIMEOUT_MS_DEFAULT`] and [`SEND_TIMEOUT_MS_DEFAULT`]:
//!   a client that misses the head deadline gets
//!   [`HttpError::HEAD_TIMEOUT`](super::error::HttpError::HEAD_TIMEOUT) (408).

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
    /// one whole request (or enough of one for [`parse`](super::request::parse) to refuse it).
    pub const fn request_bytes_max(&self) -> usize {
        self.head_bytes_max + self.body_bytes_max
    }
}
