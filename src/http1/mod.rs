//! HTTP/1.1 intake, sans-IO: bytes in, one framed request (or "need more", or an error to
//! answer) out; responses written into the caller's buffer. [`request`] frames one request
//! and keeps no state between calls; [`conn`] is one whole connection (its buffers,
//! pipelining, `100 Continue`, deadlines and closing) built on it. Only the reactor does I/O
//! and reads the clock: nothing here does either, and nothing allocates after a connection's
//! buffers. It is NOT a general HTTP server: no chunked bodies, no HTTP/2, no `Date` header,
//! one request framed at a time.
//!
//! Read it in this order: [`limits`], [`error`], [`request`] (framing), `write.rs` (answers),
//! [`conn`] (the connection), [`refusal`] (answers to connections refused at accept), [`fuzz`]
//! (the fuzz body).
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
//! Limits, each with its reason, are in [`limits`]: 8 KiB of head, 64 KiB of body, 64 header
//! fields, and the head, idle and send deadlines [`conn`] enforces.
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
pub mod error;
pub mod forwarded;
pub mod fuzz;
pub mod limits;
pub mod refusal;
pub mod request;
mod status;
mod write;

pub use error::HttpError;
pub use limits::{
    BODY_BYTES_MAX_DEFAULT, HEAD_BYTES_MAX_DEFAULT, HEAD_TIMEOUT_MS_DEFAULT, HEADERS_MAX,
    IDLE_TIMEOUT_MS_DEFAULT, Limits, SEND_TIMEOUT_MS_DEFAULT,
};
pub use request::{Framed, Method, Needed, Request, frame, needed, parse, split_target};
pub use status::reason;
pub use write::{
    CONTINUE, ERROR_RESPONSE_LEN_MAX, write_error, write_error_came, write_error_limit,
    write_response,
};
