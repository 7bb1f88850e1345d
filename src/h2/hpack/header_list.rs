//! A decoded header list in fixed storage, sized once; the decoder appends to it.

use super::error::HpackError;
use super::huffman::{self, HuffmanError};
use super::integer::decode_integer;
use super::table::ENTRY_OVERHEAD;

/// A decoded header list in fixed storage: field bytes in one arena, field bounds in a table.
pub struct HeaderList {
    pub(super) bytes: Box<[u8]>,
    pub(super) bytes_len: usize,
    /// (start, name_len, value_len) into `bytes`.
    fields: Box<[(u32, u32, u32)]>,
    fields_len: usize,
}

impl HeaderList {
    /// Room for `bytes_max` bytes of names and values and `fields_max` fields.
    pub fn new(bytes_max: usize, fields_max: usize) -> Self {
        Self {
            bytes: vec![0; bytes_max].into_boxed_slice(),
            bytes_len: 0,
            fields: vec![(0, 0, 0); fields_max].into_boxed_slice(),
            fields_len: 0,
        }
    }

    /// Bytes [`HeaderList::new`] allocates for these capacities.
    pub fn allocation_bytes(bytes_max: usize, fields_max: usize) -> usize {
        bytes_max + fields_max * std::mem::size_of::<(u32, u32, u32)>()
    }

    /// Its room: bytes of names and values, fields.
    pub fn capacities(&self) -> (usize, usize) {
        (self.bytes.len(), self.fields.len())
    }

    /// Where the list ends now, to go back to with [`HeaderList::reset_to`].
    pub(super) fn mark(&self) -> (usize, usize) {
        (self.bytes_len, self.fields_len)
    }

    /// Drops what was appended since `mark`.
    pub(super) fn reset_to(&mut self, mark: (usize, usize)) {
        (self.bytes_len, self.fields_len) = mark;
    }

    pub fn clear(&mut self) {
        self.bytes_len = 0;
        self.fields_len = 0;
    }

    pub fn len(&self) -> usize {
        self.fields_len
    }

    pub fn is_empty(&self) -> bool {
        self.fields_len == 0
    }

    /// Field `i` as (name, value).
    pub fn field(&self, i: usize) -> (&[u8], &[u8]) {
        let (s, n, v) = self.fields[i];
        let (s, n, v) = (s as usize, n as usize, v as usize);
        (&self.bytes[s..s + n], &self.bytes[s + n..s + n + v])
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        (0..self.fields_len).map(|i| self.field(i))
    }

    /// The first value of `name`.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Appends a field from plain bytes.
    pub fn push(&mut self, name: &[u8], value: &[u8]) -> Result<(), HpackError> {
        let start = self.bytes_len;
        self.append(name)?;
        self.append(value)?;
        self.commit(start, name.len(), value.len())
    }

    pub(super) fn append(&mut self, b: &[u8]) -> Result<(), HpackError> {
        let end = self.bytes_len + b.len();
        if end > self.bytes.len() {
            return Err(HpackError::ListTooLarge);
        }
        self.bytes[self.bytes_len..end].copy_from_slice(b);
        self.bytes_len = end;
        Ok(())
    }

    /// Appends an HPACK string literal at the end of the arena; returns its length and the
    /// bytes of input consumed.
    pub(super) fn append_literal(&mut self, buf: &[u8]) -> Result<(usize, usize), HpackError> {
        let huffman = *buf.first().ok_or(HpackError::Truncated)? & 0x80 != 0;
        let (len, used) = decode_integer(buf, 7)?;
        let len = len as usize;
        let raw = buf.get(used..used + len).ok_or(HpackError::Truncated)?;
        let out = &mut self.bytes[self.bytes_len..];
        let n = if huffman {
            huffman::decode(raw, out).map_err(|e| match e {
                HuffmanError::Overflow => HpackError::ListTooLarge,
                e => HpackError::Huffman(e),
            })?
        } else {
            out.get_mut(..len)
                .ok_or(HpackError::ListTooLarge)?
                .copy_from_slice(raw);
            len
        };
        self.bytes_len += n;
        Ok((n, used + len))
    }

    pub(super) fn commit(
        &mut self,
        start: usize,
        name_len: usize,
        value_len: usize,
    ) -> Result<(), HpackError> {
        if self.fields_len == self.fields.len() {
            return Err(HpackError::ListTooLarge);
        }
        self.fields[self.fields_len] = (start as u32, name_len as u32, value_len as u32);
        self.fields_len += 1;
        Ok(())
    }

    /// Total size as SETTINGS_MAX_HEADER_LIST_SIZE counts it (RFC 9113 section 6.5.2).
    pub fn list_size(&self) -> usize {
        self.bytes_len + ENTRY_OVERHEAD * self.fields_len
    }
}
