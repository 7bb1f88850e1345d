//! A JSON string as it sits in the request body: the bytes between the quotes, still escaped.
//! It is NOT a decoded string: escapes are read only when a caller compares, counts or copies
//! it out.

use core::fmt;

/// A string member of a request, borrowed from the body without copying.
///
/// Only the scanner creates these, after it has checked the string: the raw bytes are valid
/// UTF-8, every escape is well formed and every `\u` surrogate is paired, so reading the
/// content never fails.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JsonStr<'a> {
    raw: &'a [u8],
    escaped: bool,
}

/// The caller's buffer is shorter than the unescaped string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooSmall {
    /// Bytes the unescaped string needs.
    pub needed: usize,
}

impl fmt::Display for BufferTooSmall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unescaped string needs {} bytes", self.needed)
    }
}

impl<'a> JsonStr<'a> {
    pub(crate) const EMPTY: JsonStr<'static> = JsonStr {
        raw: b"",
        escaped: false,
    };

    /// `raw` must be a checked JSON string body (see the type's doc).
    pub(crate) const fn from_checked(raw: &'a [u8], escaped: bool) -> Self {
        JsonStr { raw, escaped }
    }

    /// The bytes between the quotes exactly as sent. When [`has_escapes`](Self::has_escapes) is
    /// false this is the content itself: the fast path for transaction strings.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Whether the string contains a backslash escape (then `raw()` is not the content).
    pub fn has_escapes(&self) -> bool {
        self.escaped
    }

    /// The content as `&str` when it has no escapes.
    pub fn as_str(&self) -> Option<&'a str> {
        if self.escaped {
            return None;
        }
        // The scanner checked UTF-8 already; this repeats the check rather than trusting it
        // with `unsafe`, and is only used off the hot path.
        core::str::from_utf8(self.raw).ok()
    }

    /// Writes the unescaped content into `out` and returns the written part. No allocation:
    /// the caller provides the buffer (a transaction needs at most
    /// [`BASE58_LEN_MAX`](crate::wire::BASE58_LEN_MAX) bytes).
    pub fn unescape_into<'o>(&self, out: &'o mut [u8]) -> Result<&'o [u8], BufferTooSmall> {
        if !self.escaped {
            let n = self.raw.len();
            if n > out.len() {
                return Err(BufferTooSmall { needed: n });
            }
            out[..n].copy_from_slice(self.raw);
            return Ok(&out[..n]);
        }
        let mut len = 0usize;
        let mut fits = true;
        for piece in self.pieces() {
            let mut utf8 = [0u8; 4];
            let bytes: &[u8] = match piece {
                Piece::Raw(run) => run,
                Piece::Char(c) => c.encode_utf8(&mut utf8).as_bytes(),
            };
            if fits && len + bytes.len() <= out.len() {
                out[len..len + bytes.len()].copy_from_slice(bytes);
            } else {
                fits = false;
            }
            len += bytes.len();
        }
        if fits {
            Ok(&out[..len])
        } else {
            Err(BufferTooSmall { needed: len })
        }
    }

    /// As [`JsonStr::unescape_into`], but what does not fit is cut off at a character
    /// boundary: the written part, and whether anything was cut. For text shown to people (an
    /// engine's error message), where the start of it says more than nothing.
    pub fn unescape_prefix_into<'o>(&self, out: &'o mut [u8]) -> (&'o [u8], bool) {
        let mut len = 0usize;
        for piece in self.pieces() {
            let mut utf8 = [0u8; 4];
            let bytes: &[u8] = match piece {
                Piece::Raw(run) => run,
                Piece::Char(c) => c.encode_utf8(&mut utf8).as_bytes(),
            };
            if len + bytes.len() <= out.len() {
                out[len..len + bytes.len()].copy_from_slice(bytes);
                len += bytes.len();
                continue;
            }
            // The part of a run that fits, up to its last whole character (the scanner checked
            // the run is UTF-8); an escaped character fits whole or not at all.
            if let Piece::Raw(run) = piece {
                let mut take = out.len() - len;
                while take > 0 && run.get(take).is_some_and(|&b| b & 0xc0 == 0x80) {
                    take -= 1;
                }
                out[len..len + take].copy_from_slice(&run[..take]);
                len += take;
            }
            return (&out[..len], true);
        }
        (&out[..len], false)
    }

    /// Length of the unescaped content in bytes.
    pub fn unescaped_len(&self) -> usize {
        if !self.escaped {
            return self.raw.len();
        }
        self.pieces()
            .map(|p| match p {
                Piece::Raw(run) => run.len(),
                Piece::Char(c) => c.len_utf8(),
            })
            .sum()
    }

    /// Number of characters (Unicode scalar values) in the unescaped content.
    pub fn char_count(&self) -> usize {
        self.pieces()
            .map(|p| match p {
                Piece::Raw(run) => run.iter().filter(|&&b| (b & 0xC0) != 0x80).count(),
                Piece::Char(_) => 1,
            })
            .sum()
    }

    /// Whether the unescaped content equals `s`.
    pub fn eq_str(&self, s: &str) -> bool {
        if !self.escaped {
            return self.raw == s.as_bytes();
        }
        self.bytes().eq(s.bytes())
    }

    /// Whether two strings have the same unescaped content.
    pub fn content_eq(&self, other: &JsonStr<'_>) -> bool {
        if !self.escaped && !other.escaped {
            return self.raw == other.raw;
        }
        self.bytes().eq(other.bytes())
    }

    /// The unescaped content as bytes, one at a time.
    pub fn bytes(&self) -> Bytes<'a> {
        Bytes {
            pieces: self.pieces(),
            run: &[],
            utf8: [0; 4],
            utf8_at: 0,
            utf8_len: 0,
        }
    }

    /// Runs of unescaped bytes and single escaped characters, in order.
    pub(crate) fn pieces(&self) -> Pieces<'a> {
        Pieces { rest: self.raw }
    }

    /// Writes the content as a JSON string literal (quoted, escaped), keeping at most
    /// `chars_max` characters and marking a cut with `…`. Used to name user input in error
    /// messages without letting it run on or inject control characters.
    pub(crate) fn write_quoted(&self, f: &mut dyn fmt::Write, chars_max: usize) -> fmt::Result {
        f.write_char('"')?;
        let mut shown = 0usize;
        for piece in self.pieces() {
            let mut run_buf = [0u8; 4];
            let text: &str = match piece {
                Piece::Raw(run) => core::str::from_utf8(run).unwrap_or("\u{FFFD}"),
                Piece::Char(c) => c.encode_utf8(&mut run_buf),
            };
            for c in text.chars() {
                if shown == chars_max {
                    return f.write_str("\"…");
                }
                shown += 1;
                write_escaped_char(f, c)?;
            }
        }
        f.write_char('"')
    }
}

/// JSON's escaping for one character of a string literal.
pub(crate) fn write_escaped_char(f: &mut dyn fmt::Write, c: char) -> fmt::Result {
    match c {
        '"' => f.write_str("\\\""),
        '\\' => f.write_str("\\\\"),
        '\n' => f.write_str("\\n"),
        '\r' => f.write_str("\\r"),
        '\t' => f.write_str("\\t"),
        '\u{8}' => f.write_str("\\b"),
        '\u{c}' => f.write_str("\\f"),
        c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32),
        c => f.write_char(c),
    }
}

impl fmt::Debug for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_quoted(f, usize::MAX)
    }
}

/// The content, unescaped (not quoted).
impl fmt::Display for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write as _;
        for piece in self.pieces() {
            match piece {
                Piece::Raw(run) => f.write_str(core::str::from_utf8(run).unwrap_or("\u{FFFD}"))?,
                Piece::Char(c) => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

pub(crate) enum Piece<'a> {
    Raw(&'a [u8]),
    Char(char),
}

pub(crate) struct Pieces<'a> {
    rest: &'a [u8],
}

fn hex4(h: &[u8]) -> u32 {
    h[..4].iter().fold(0u32, |acc, &d| {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => d - b'A' + 10,
        };
        acc << 4 | u32::from(v)
    })
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Piece<'a>;

    fn next(&mut self) -> Option<Piece<'a>> {
        let rest = self.rest;
        if rest.is_empty() {
            return None;
        }
        if rest[0] != b'\\' {
            let n = rest.iter().position(|&b| b == b'\\').unwrap_or(rest.len());
            self.rest = &rest[n..];
            return Some(Piece::Raw(&rest[..n]));
        }
        let (c, used) = match rest[1] {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            _ => {
                let hi = hex4(&rest[2..]);
                if (0xD800..0xDC00).contains(&hi) {
                    // The scanner guarantees a low surrogate escape follows.
                    let lo = hex4(&rest[8..]);
                    let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    (char::from_u32(cp).unwrap_or('\u{FFFD}'), 12)
                } else {
                    (char::from_u32(hi).unwrap_or('\u{FFFD}'), 6)
                }
            }
        };
        self.rest = &rest[used..];
        Some(Piece::Char(c))
    }
}

/// Iterator over the unescaped bytes of a [`JsonStr`].
pub struct Bytes<'a> {
    pieces: Pieces<'a>,
    run: &'a [u8],
    utf8: [u8; 4],
    utf8_at: u8,
    utf8_len: u8,
}

impl Iterator for Bytes<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        loop {
            if let Some((&b, rest)) = self.run.split_first() {
                self.run = rest;
                return Some(b);
            }
            if self.utf8_at < self.utf8_len {
                let b = self.utf8[usize::from(self.utf8_at)];
                self.utf8_at += 1;
                return Some(b);
            }
            match self.pieces.next()? {
                Piece::Raw(run) => self.run = run,
                Piece::Char(c) => {
                    self.utf8_len = c.encode_utf8(&mut self.utf8).len() as u8;
                    self.utf8_at = 0;
                }
            }
        }
    }
}
