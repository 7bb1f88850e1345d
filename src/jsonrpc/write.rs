//! Responses written into a caller's fixed buffer. NOT a JSON serializer: only the answer
//! shapes the relay sends, in Solana's field order.

use core::fmt;

use super::error::RpcError;
use super::error::{ERROR_CAUSE_LEN_MAX, QUOTED_CHARS_MAX};
use super::limits::ID_LEN_MAX;
use super::request::Id;
use super::runs::skip_plain;

/// A buffer that holds any error response: the envelope (about 60 bytes), an id of at most
/// [`ID_LEN_MAX`] bytes, and the longest message. The longest messages quote user input:
/// a wire-layer cause of [`ERROR_CAUSE_LEN_MAX`](ERROR_CAUSE_LEN_MAX) bytes, each byte
/// at worst a control character escaped to 6 (`\u001f`), or [`QUOTED_CHARS_MAX`](
/// QUOTED_CHARS_MAX) quoted characters at worst 7 bytes each once escaped twice.
/// A test writes the worst cases.
pub const ERROR_RESPONSE_LEN_MAX: usize = 2048;

const _: () = assert!(
    ERROR_RESPONSE_LEN_MAX >= 100 + ID_LEN_MAX + 6 * ERROR_CAUSE_LEN_MAX
        && ERROR_RESPONSE_LEN_MAX >= 100 + ID_LEN_MAX + 7 * QUOTED_CHARS_MAX + 60
);

/// The response did not fit the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow;

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("response does not fit the buffer")
    }
}

/// Appends bytes to a fixed buffer. Once something does not fit, the writer stops writing and
/// [`finish`](Writer::finish) reports [`Overflow`]; callers write everything and check once.
///
/// Its `fmt::Write` appends text as is; wrap it in [`Escaping`] to write inside a JSON string.
pub struct Writer<'b> {
    buf: &'b mut [u8],
    len: usize,
    overflowed: bool,
}

impl<'b> Writer<'b> {
    pub fn new(buf: &'b mut [u8]) -> Self {
        Writer {
            buf,
            len: 0,
            overflowed: false,
        }
    }

    /// Appends raw bytes.
    #[inline]
    pub fn bytes(&mut self, b: &[u8]) {
        if self.overflowed || b.len() > self.buf.len() - self.len {
            self.overflowed = true;
            return;
        }
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }

    /// Appends `s` escaped for the inside of a JSON string: quotes, backslashes and control
    /// characters escaped, everything else (non-ASCII included) as UTF-8.
    pub fn escaped(&mut self, s: &str) {
        let b = s.as_bytes();
        let mut run = 0;
        let mut i = 0;
        loop {
            // Plain runs are skipped many bytes a step; what stops the skip is looked at here
            // (a non-ASCII byte stops it too, and is written as it is).
            i = skip_plain(b, i);
            let Some(&c) = b.get(i) else {
                break;
            };
            i += 1;
            let short: &[u8] = match c {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                0..=0x1f => b"",
                _ => continue,
            };
            self.bytes(&b[run..i - 1]);
            if short.is_empty() {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                self.bytes(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(c >> 4)],
                    HEX[usize::from(c & 15)],
                ]);
            } else {
                self.bytes(short);
            }
            run = i;
        }
        self.bytes(&b[run..]);
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether something did not fit.
    pub fn is_overflowed(&self) -> bool {
        self.overflowed
    }

    /// The written bytes, or [`Overflow`] if anything did not fit.
    pub fn finish(self) -> Result<&'b [u8], Overflow> {
        if self.overflowed {
            return Err(Overflow);
        }
        let Writer { buf, len, .. } = self;
        Ok(&buf[..len])
    }
}

impl fmt::Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.bytes(s.as_bytes());
        Ok(())
    }
}

/// `fmt::Write` that escapes for the inside of a JSON string, so any `Display` can be written
/// as a JSON string body without an intermediate buffer.
pub struct Escaping<'w, 'b>(pub &'w mut Writer<'b>);

impl fmt::Write for Escaping<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.escaped(s);
        Ok(())
    }
}

/// `{"jsonrpc":"2.0","result":"<result>","id":<id>}` with `result` escaped.
pub fn write_result_str<'b>(
    out: &'b mut [u8],
    id: Id<'_>,
    result: &str,
) -> Result<&'b [u8], Overflow> {
    let mut w = Writer::new(out);
    w.bytes(b"{\"jsonrpc\":\"2.0\",\"result\":\"");
    w.escaped(result);
    w.bytes(b"\",\"id\":");
    w.bytes(id.raw());
    w.bytes(b"}");
    w.finish()
}

/// `{"jsonrpc":"2.0","result":<result_json>,"id":<id>}`; `result_json` must be valid JSON
/// (getTipAccounts' array, a status object), written as is.
pub fn write_result_raw<'b>(
    out: &'b mut [u8],
    id: Id<'_>,
    result_json: &[u8],
) -> Result<&'b [u8], Overflow> {
    let mut w = Writer::new(out);
    w.bytes(b"{\"jsonrpc\":\"2.0\",\"result\":");
    w.bytes(result_json);
    w.bytes(b",\"id\":");
    w.bytes(id.raw());
    w.bytes(b"}");
    w.finish()
}

/// `{"jsonrpc":"2.0","error":{"code":<code>,"message":"<message>"},"id":<id>}`.
/// After a failed [`parse_request`](super::parse::parse_request) pass `err.id`; for an error about a
/// parsed request (the wire layer's), pass the request's id.
pub fn write_error<'b>(
    out: &'b mut [u8],
    id: Id<'_>,
    err: &RpcError<'_>,
) -> Result<&'b [u8], Overflow> {
    use fmt::Write as _;
    let mut w = Writer::new(out);
    w.bytes(b"{\"jsonrpc\":\"2.0\",\"error\":{\"code\":");
    // Writer's fmt::Write never fails; overflow is reported by finish.
    let _ = write!(w, "{}", err.code);
    w.bytes(b",\"message\":\"");
    let _ = write!(Escaping(&mut w), "{err}");
    w.bytes(b"\"},\"id\":");
    w.bytes(id.raw());
    w.bytes(b"}");
    w.finish()
}
