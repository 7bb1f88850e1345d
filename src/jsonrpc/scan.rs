//! The strict RFC 8259 scanner: checks a whole document in one pass without building anything.
//! It is NOT the request parser: `parse.rs` drives it and walks what it checked.
//!
//! Beyond RFC 8259's grammar it rejects what serde_json rejects, so both agree on every
//! document below [`DEPTH_MAX`]: lone `\u` surrogates (RFC 8259 leaves their meaning undefined;
//! they cannot become a Rust `str`). A number whose value overflows `f64` is accepted here
//! (the grammar allows it; only an id could hold one, and ids are echoed verbatim).

use super::error::Expected;
use super::json_str::JsonStr;
use super::limits::DEPTH_MAX;
use super::runs::{skip_plain, skip_to_quote_or_backslash};

/// A scanning failure: byte offset and what was expected there.
pub(crate) type ScanError = (usize, Expected);

const _: () = assert!(DEPTH_MAX <= 64, "the container stack is one u64");

/// Byte classes inside a string: 0 ordinary ASCII, 1 quote, 2 backslash, 3 control, 4 non-ASCII.
static STRING_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if i < 0x20 {
            3
        } else if i == b'"' as usize {
            1
        } else if i == b'\\' as usize {
            2
        } else if i >= 0x80 {
            4
        } else {
            0
        };
        i += 1;
    }
    t
};

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn hex_val(c: u8) -> Option<u32> {
    match c {
        b'0'..=b'9' => Some(u32::from(c - b'0')),
        b'a'..=b'f' => Some(u32::from(c - b'a' + 10)),
        b'A'..=b'F' => Some(u32::from(c - b'A' + 10)),
        _ => None,
    }
}

pub(crate) struct Scanner<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Scanner { b, pos: 0 }
    }

    #[inline]
    pub(crate) fn ws(&mut self) {
        while self.pos < self.b.len() && is_ws(self.b[self.pos]) {
            self.pos += 1;
        }
    }

    /// The byte at the cursor, or 0 at the end (0 is never valid where a byte is looked at).
    #[inline]
    pub(crate) fn peek(&self) -> u8 {
        self.b.get(self.pos).copied().unwrap_or(0)
    }

    fn err<T>(&self, expected: Expected) -> Result<T, ScanError> {
        Err((self.pos, expected))
    }

    /// Scans a string; the cursor is on its opening quote.
    pub(crate) fn string(&mut self) -> Result<JsonStr<'a>, ScanError> {
        debug_assert_eq!(self.peek(), b'"');
        self.pos += 1;
        let start = self.pos;
        let mut escaped = false;
        loop {
            self.pos = skip_plain(self.b, self.pos);
            let Some(&c) = self.b.get(self.pos) else {
                return self.err(Expected::StringEnd);
            };
            match STRING_CLASS[usize::from(c)] {
                1 => {
                    let s = JsonStr::from_checked(&self.b[start..self.pos], escaped);
                    self.pos += 1;
                    return Ok(s);
                }
                2 => {
                    escaped = true;
                    self.escape()?;
                }
                3 => return self.err(Expected::EscapedControl),
                _ => self.utf8()?,
            }
        }
    }

    /// One escape; the cursor is on its backslash.
    fn escape(&mut self) -> Result<(), ScanError> {
        self.pos += 1;
        match self.peek() {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                self.pos += 1;
                Ok(())
            }
            b'u' => {
                let at = self.pos - 1;
                let unit = self.hex4()?;
                match unit {
                    0xD800..=0xDBFF => {
                        if self.peek() != b'\\' || self.b.get(self.pos + 1) != Some(&b'u') {
                            return Err((at, Expected::SurrogatePair));
                        }
                        self.pos += 1;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err((at, Expected::SurrogatePair));
                        }
                        Ok(())
                    }
                    0xDC00..=0xDFFF => Err((at, Expected::SurrogatePair)),
                    _ => Ok(()),
                }
            }
            _ => self.err(Expected::Escape),
        }
    }

    /// `uXXXX`; the cursor is on the `u`.
    fn hex4(&mut self) -> Result<u32, ScanError> {
        self.pos += 1;
        let mut v = 0u32;
        for _ in 0..4 {
            match hex_val(self.peek()) {
                Some(d) => v = v << 4 | d,
                None => return self.err(Expected::HexDigit),
            }
            self.pos += 1;
        }
        Ok(v)
    }

    /// One multi-byte UTF-8 character (Unicode 15, table 3-7); the cursor is on its lead byte.
    fn utf8(&mut self) -> Result<(), ScanError> {
        let b = self.b;
        let p = self.pos;
        let (len, lo, hi) = match b[p] {
            0xC2..=0xDF => (2, 0x80, 0xBF),
            0xE0 => (3, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (3, 0x80, 0xBF),
            0xED => (3, 0x80, 0x9F),
            0xF0 => (4, 0x90, 0xBF),
            0xF1..=0xF3 => (4, 0x80, 0xBF),
            0xF4 => (4, 0x80, 0x8F),
            _ => return self.err(Expected::Utf8),
        };
        match b.get(p + 1) {
            Some(&c) if (lo..=hi).contains(&c) => {}
            _ => return Err((p, Expected::Utf8)),
        }
        for i in 2..len {
            match b.get(p + i) {
                Some(&c) if c & 0xC0 == 0x80 => {}
                _ => return Err((p, Expected::Utf8)),
            }
        }
        self.pos = p + len;
        Ok(())
    }

    fn number(&mut self) -> Result<(), ScanError> {
        if self.peek() == b'-' {
            self.pos += 1;
        }
        match self.peek() {
            b'0' => self.pos += 1,
            b'1'..=b'9' => self.digits(),
            _ => return self.err(Expected::Digit),
        }
        if self.peek() == b'.' {
            self.pos += 1;
            if !self.peek().is_ascii_digit() {
                return self.err(Expected::Digit);
            }
            self.digits();
        }
        if matches!(self.peek(), b'e' | b'E') {
            self.pos += 1;
            if matches!(self.peek(), b'+' | b'-') {
                self.pos += 1;
            }
            if !self.peek().is_ascii_digit() {
                return self.err(Expected::Digit);
            }
            self.digits();
        }
        Ok(())
    }

    fn digits(&mut self) {
        while self.peek().is_ascii_digit() {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &'static str) -> Result<(), ScanError> {
        let w = word.as_bytes();
        for (i, &c) in w.iter().enumerate() {
            if self.b.get(self.pos + i) != Some(&c) {
                return Err((self.pos + i, Expected::Literal(word)));
            }
        }
        self.pos += w.len();
        Ok(())
    }

    /// An object key and its colon, leaving the cursor on the value; the cursor is on the key.
    pub(crate) fn key(&mut self) -> Result<JsonStr<'a>, ScanError> {
        if self.peek() != b'"' {
            return self.err(Expected::Key);
        }
        let key = self.string()?;
        self.ws();
        if self.peek() != b':' {
            return self.err(Expected::Colon);
        }
        self.pos += 1;
        self.ws();
        Ok(key)
    }

    /// Scans one complete value of any kind, nested at most `DEPTH_MAX - outer_depth` further.
    /// The cursor is on the value's first byte; it ends just past the value.
    pub(crate) fn value(&mut self, outer_depth: usize) -> Result<(), ScanError> {
        // Bit i of `objects` says whether container level i (from 0) is an object.
        let mut objects: u64 = 0;
        let mut depth = 0usize;
        'value: loop {
            match self.peek() {
                c @ (b'{' | b'[') => {
                    if outer_depth + depth >= DEPTH_MAX {
                        return self.err(Expected::ShallowerNesting);
                    }
                    self.pos += 1;
                    self.ws();
                    let is_object = c == b'{';
                    if is_object {
                        objects |= 1 << depth;
                    } else {
                        objects &= !(1 << depth);
                    }
                    depth += 1;
                    let close = if is_object { b'}' } else { b']' };
                    if self.peek() == close {
                        self.pos += 1;
                        depth -= 1;
                    } else {
                        if is_object {
                            self.key()?;
                        }
                        continue 'value;
                    }
                }
                b'"' => {
                    self.string()?;
                }
                b'-' | b'0'..=b'9' => self.number()?,
                b't' => self.literal("true")?,
                b'f' => self.literal("false")?,
                b'n' => self.literal("null")?,
                _ => return self.err(Expected::Value),
            }
            // After a value: close containers until one continues with ','.
            loop {
                if depth == 0 {
                    return Ok(());
                }
                self.ws();
                let in_object = objects & (1 << (depth - 1)) != 0;
                match (in_object, self.peek()) {
                    (_, b',') => {
                        self.pos += 1;
                        self.ws();
                        if in_object {
                            self.key()?;
                        }
                        continue 'value;
                    }
                    (true, b'}') | (false, b']') => {
                        self.pos += 1;
                        depth -= 1;
                    }
                    (true, _) => return self.err(Expected::CommaOrObjectEnd),
                    (false, _) => return self.err(Expected::CommaOrArrayEnd),
                }
            }
        }
    }

    /// Checks that only whitespace follows.
    pub(crate) fn end(&mut self) -> Result<(), ScanError> {
        self.ws();
        if self.pos == self.b.len() {
            Ok(())
        } else {
            self.err(Expected::End)
        }
    }
}

/// A cursor over JSON the scanner has already checked: no validation, only structure.
pub(crate) struct Walk<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(checked: &'a [u8]) -> Self {
        Walk { b: checked, pos: 0 }
    }

    #[inline]
    pub(crate) fn peek(&self) -> u8 {
        self.b.get(self.pos).copied().unwrap_or(0)
    }

    #[inline]
    fn ws(&mut self) {
        while self.pos < self.b.len() && is_ws(self.b[self.pos]) {
            self.pos += 1;
        }
    }

    /// Enters the array or object under the cursor; true if it has a first element (the cursor
    /// is then on it, or on its key).
    pub(crate) fn enter(&mut self) -> bool {
        self.pos += 1;
        self.ws();
        if matches!(self.peek(), b']' | b'}') {
            self.pos += 1;
            false
        } else {
            true
        }
    }

    /// Each member of the object under the cursor: `f` gets its key with the cursor on its
    /// value, which it must read or skip; the cursor ends past the object.
    pub(crate) fn members(&mut self, mut f: impl FnMut(JsonStr<'a>, &mut Walk<'a>)) {
        if !self.enter() {
            return;
        }
        loop {
            let key = self.key();
            f(key, self);
            if !self.next() {
                break;
            }
        }
    }

    /// After an element: true if another follows (the cursor is then on it), false when the
    /// container closed.
    pub(crate) fn next(&mut self) -> bool {
        self.ws();
        let more = self.peek() == b',';
        self.pos += 1;
        self.ws();
        more
    }

    /// A string under the cursor.
    pub(crate) fn string(&mut self) -> JsonStr<'a> {
        self.pos += 1;
        let start = self.pos;
        let mut escaped = false;
        loop {
            self.pos = skip_to_quote_or_backslash(self.b, self.pos);
            if self.b[self.pos] == b'"' {
                break;
            }
            escaped = true;
            self.pos += 2;
        }
        let s = JsonStr::from_checked(&self.b[start..self.pos], escaped);
        self.pos += 1;
        s
    }

    /// An object key and its colon; leaves the cursor on the value.
    pub(crate) fn key(&mut self) -> JsonStr<'a> {
        let k = self.string();
        self.ws();
        self.pos += 1;
        self.ws();
        k
    }

    /// The raw JSON text of the value under the cursor (a number's digits), skipping it.
    pub(crate) fn raw_value(&mut self) -> &'a [u8] {
        let start = self.pos;
        self.skip();
        &self.b[start..self.pos]
    }

    /// Skips the value under the cursor.
    pub(crate) fn skip(&mut self) {
        match self.peek() {
            b'"' => {
                self.string();
            }
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek() {
                        b'"' => {
                            self.string();
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.pos += 1;
                                return;
                            }
                        }
                        _ => {}
                    }
                    self.pos += 1;
                }
            }
            // A number or literal runs to the next delimiter.
            _ => {
                while self.pos < self.b.len()
                    && !matches!(self.b[self.pos], b',' | b']' | b'}')
                    && !is_ws(self.b[self.pos])
                {
                    self.pos += 1;
                }
            }
        }
    }
}
