//! Response heads and bodies written into the caller's buffer. It is NOT where a status is
//! chosen (the caller's) and it writes no `Date` header (see the module docs of `http1`).

use super::error::HttpError;
use super::status::reason;

/// The interim answer to `Expect: 100-continue`, written before the client sends its body.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Room that [`write_error`] needs for any [`HttpError`] this module returns (a test writes
/// every one of them into a buffer this size).
pub const ERROR_RESPONSE_LEN_MAX: usize = 256;

/// Writes `HTTP/1.1 <status> <reason>`, `Content-Type`, `Content-Length`,
/// `Connection: keep-alive|close`, then `extra_headers` in order, then `body`. Returns the bytes
/// written, or `None` when `out` is too small (or `status` is not three digits); `out` may then
/// hold a partial answer that must not be sent.
///
/// `Connection: keep-alive` is redundant for HTTP/1.1 clients but needed by HTTP/1.0 clients
/// that asked for it, and costs 24 bytes. Header names and values come from the relay, never
/// from a client, so they are only checked (for CR and LF) in debug builds.
pub fn write_response(
    out: &mut [u8],
    status: u16,
    keep_alive: bool,
    content_type: &str,
    extra_headers: &[(&str, &[u8])],
    body: &[u8],
) -> Option<usize> {
    if !(100..=999).contains(&status) {
        return None;
    }
    debug_assert!(!has_line_break(content_type.as_bytes()));
    let mut w = Cursor { out, pos: 0 };
    w.put(b"HTTP/1.1 ")?;
    w.put(&[
        b'0' + (status / 100) as u8,
        b'0' + (status / 10 % 10) as u8,
        b'0' + (status % 10) as u8,
        b' ',
    ])?;
    w.put(reason(status).as_bytes())?;
    w.put(b"\r\nContent-Type: ")?;
    w.put(content_type.as_bytes())?;
    w.put(b"\r\nContent-Length: ")?;
    w.decimal(body.len())?;
    w.put(if keep_alive {
        b"\r\nConnection: keep-alive\r\n"
    } else {
        b"\r\nConnection: close\r\n"
    })?;
    for (name, value) in extra_headers {
        debug_assert!(!has_line_break(name.as_bytes()) && !has_line_break(value));
        w.put(name.as_bytes())?;
        w.put(b": ")?;
        w.put(value)?;
        w.put(b"\r\n")?;
    }
    w.put(b"\r\n")?;
    w.put(body)?;
    Some(w.pos)
}

/// The answer to `err`: its status, a `text/plain` body that is `err.what` and a newline,
/// and `Connection: close`. Fits in [`ERROR_RESPONSE_LEN_MAX`] bytes.
pub fn write_error(out: &mut [u8], err: &HttpError) -> Option<usize> {
    write_error_noted(out, err, None)
}

/// [`write_error`] naming the limit a request broke, from the relay's settings:
/// `what (intake.body_bytes_max = 65536 bytes)`. A client's developer then knows what to send
/// instead and an operator what to raise. Without room for the limit, the plain answer.
pub fn write_error_limit(
    out: &mut [u8],
    err: &HttpError,
    limit: Option<(&str, usize)>,
) -> Option<usize> {
    match limit {
        None => write_error_noted(out, err, None),
        Some((setting, bytes)) => write_error_noted(
            out,
            err,
            Some(&|w: &mut Cursor<'_>| {
                w.put(b" (")?;
                w.put(setting.as_bytes())?;
                w.put(b" = ")?;
                w.decimal(bytes)?;
                w.put(b" bytes)")
            }),
        ),
    }
}

/// [`write_error`] saying how much of a request came before it was cut short, and of how
/// much its head announced when it did: `what (11 of 50 bytes came)`. Without room for that,
/// the plain answer.
pub fn write_error_came(
    out: &mut [u8],
    err: &HttpError,
    came: usize,
    of: Option<usize>,
) -> Option<usize> {
    write_error_noted(
        out,
        err,
        Some(&|w: &mut Cursor<'_>| {
            w.put(b" (")?;
            w.decimal(came)?;
            if let Some(of) = of {
                w.put(b" of ")?;
                w.decimal(of)?;
            }
            w.put(b" bytes came)")
        }),
    )
}

/// Writes a note after an error's words; `None` when it does not fit.
type Note<'n> = &'n dyn Fn(&mut Cursor<'_>) -> Option<()>;

/// The answer to `err` with `note` written after its words; a note that does not fit, in the
/// body or in `out`, is left out.
fn write_error_noted(out: &mut [u8], err: &HttpError, note: Option<Note<'_>>) -> Option<usize> {
    let mut body = [0u8; ERROR_RESPONSE_LEN_MAX];
    let mut w = Cursor {
        out: &mut body,
        pos: 0,
    };
    w.put(err.what.as_bytes())?;
    if let Some(note) = note {
        let plain = w.pos;
        if note(&mut w).is_none() {
            w.pos = plain;
        }
    }
    w.put(b"\n")?;
    let n = w.pos;
    let written = write_response(
        out,
        err.status,
        false,
        "text/plain; charset=utf-8",
        &[],
        &body[..n],
    );
    if written.is_none() && note.is_some() {
        return write_error_noted(out, err, None);
    }
    written
}

fn has_line_break(s: &[u8]) -> bool {
    s.iter().any(|&b| b == b'\r' || b == b'\n')
}

struct Cursor<'o> {
    out: &'o mut [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn put(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.pos.checked_add(bytes.len())?;
        self.out.get_mut(self.pos..end)?.copy_from_slice(bytes);
        self.pos = end;
        Some(())
    }

    fn decimal(&mut self, mut n: usize) -> Option<()> {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.put(&digits[i..])
    }
}
