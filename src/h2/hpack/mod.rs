//! HPACK (RFC 7541): a complete decoder (Huffman, dynamic table, size updates, integer and
//! length overflow checks) and an encoder that uses the static table and literals only.
//!
//! Nothing here allocates after construction: the decoder's dynamic table is a byte buffer of
//! the size we advertise in SETTINGS_HEADER_TABLE_SIZE, and decoded fields land in a
//! caller-owned [`HeaderList`] of fixed capacity. The encoder never inserts into the peer's
//! dynamic table, so it never needs to send table size updates, whatever the peer advertises.

mod huffman;
mod huffman_table;

pub use huffman::HuffmanError;

/// RFC 7541 section 4.1: every dynamic table entry costs its name and value plus 32 bytes.
pub const ENTRY_OVERHEAD: usize = 32;

/// An integer prefix value above this is an attack or a bug: no header in this protocol needs a
/// length or index beyond 2^24, and stopping there keeps every shift far from overflow.
pub const INTEGER_MAX: u64 = 1 << 24;

/// RFC 7541 Appendix A.
pub const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Why a header block could not be decoded. Every variant is a connection error of type
/// COMPRESSION_ERROR except [`HpackError::ListTooLarge`], which the connection maps to
/// ENHANCE_YOUR_CALM: the block was valid, just bigger than we agreed to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpackError {
    /// The block ended inside a representation.
    Truncated,
    /// An integer exceeded [`INTEGER_MAX`].
    IntegerOverflow,
    /// An index of 0 or past the end of the static plus dynamic table.
    InvalidIndex(u64),
    /// A dynamic table size update above the limit we advertised.
    SizeUpdateTooLarge(u64),
    /// A dynamic table size update after the first field of the block.
    SizeUpdateNotAtStart,
    /// A Huffman string with EOS or bad padding.
    Huffman(HuffmanError),
    /// The decoded fields do not fit the header list's capacity.
    ListTooLarge,
}

/// Decodes an HPACK integer with an `n`-bit prefix; returns the value and bytes consumed.
pub fn decode_integer(buf: &[u8], prefix_bits: u8) -> Result<(u64, usize), HpackError> {
    let mask = ((1u16 << prefix_bits) - 1) as u8;
    let first = *buf.first().ok_or(HpackError::Truncated)? & mask;
    if first < mask {
        return Ok((first as u64, 1));
    }
    let mut value = mask as u64;
    let mut shift = 0;
    for (i, &b) in buf[1..].iter().enumerate() {
        value += ((b & 0x7f) as u64) << shift;
        if value > INTEGER_MAX {
            return Err(HpackError::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            return Ok((value, i + 2));
        }
        shift += 7;
        // Zero-valued continuation bytes add nothing but would shift past 63 bits.
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
    }
    Err(HpackError::Truncated)
}

/// Encodes `value` with an `n`-bit prefix, OR-ing `flags` into the first byte; returns the
/// length or `None` when `out` is too short.
pub fn encode_integer(value: u64, prefix_bits: u8, flags: u8, out: &mut [u8]) -> Option<usize> {
    let mask = ((1u16 << prefix_bits) - 1) as u64;
    if value < mask {
        *out.first_mut()? = flags | value as u8;
        return Some(1);
    }
    *out.first_mut()? = flags | mask as u8;
    let mut rest = value - mask;
    let mut i = 1;
    while rest >= 128 {
        *out.get_mut(i)? = (rest as u8 & 0x7f) | 0x80;
        rest >>= 7;
        i += 1;
    }
    *out.get_mut(i)? = rest as u8;
    Some(i + 1)
}

/// A decoded header list in fixed storage: field bytes in one arena, field bounds in a table.
pub struct HeaderList {
    bytes: Box<[u8]>,
    bytes_len: usize,
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

    fn append(&mut self, b: &[u8]) -> Result<(), HpackError> {
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
    fn append_literal(&mut self, buf: &[u8]) -> Result<(usize, usize), HpackError> {
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

    fn commit(
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

/// The decoder's dynamic table: entries stored oldest first in one byte buffer, compacted when
/// an insert would run off the end.
struct DynamicTable {
    bytes: Box<[u8]>,
    /// Live bytes are `bytes[head..tail]`.
    head: usize,
    tail: usize,
    /// Ring of (offset, name_len, value_len), oldest at `first`.
    entries: Box<[(u32, u32, u32)]>,
    first: usize,
    count: usize,
    size: usize,
    size_max: usize,
}

impl DynamicTable {
    fn new(capacity: usize) -> Self {
        Self {
            bytes: vec![0; capacity].into_boxed_slice(),
            head: 0,
            tail: 0,
            entries: vec![(0, 0, 0); Self::entries_for(capacity)].into_boxed_slice(),
            first: 0,
            count: 0,
            size: 0,
            size_max: capacity,
        }
    }

    fn allocation_bytes(capacity: usize) -> usize {
        capacity + Self::entries_for(capacity) * std::mem::size_of::<(u32, u32, u32)>()
    }

    /// Entry slots for a table of `capacity` bytes: every entry costs at least
    /// [`ENTRY_OVERHEAD`].
    fn entries_for(capacity: usize) -> usize {
        capacity / ENTRY_OVERHEAD + 1
    }

    /// Entry `i` (0 = newest) as (name, value).
    fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        if i >= self.count {
            return None;
        }
        let slot = (self.first + self.count - 1 - i) % self.entries.len();
        let (o, n, v) = self.entries[slot];
        let (o, n, v) = (o as usize, n as usize, v as usize);
        Some((&self.bytes[o..o + n], &self.bytes[o + n..o + n + v]))
    }

    fn evict_oldest(&mut self) {
        let (_, n, v) = self.entries[self.first];
        self.size -= n as usize + v as usize + ENTRY_OVERHEAD;
        self.head += (n + v) as usize;
        self.first = (self.first + 1) % self.entries.len();
        self.count -= 1;
        if self.count == 0 {
            self.head = 0;
            self.tail = 0;
        }
    }

    fn set_size_max(&mut self, size_max: usize) {
        self.size_max = size_max;
        while self.size > self.size_max {
            self.evict_oldest();
        }
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let entry_size = name.len() + value.len() + ENTRY_OVERHEAD;
        while self.count > 0 && self.size + entry_size > self.size_max {
            self.evict_oldest();
        }
        if entry_size > self.size_max {
            // RFC 7541 section 4.4: an entry larger than the table empties it and is not added.
            return;
        }
        let len = name.len() + value.len();
        if self.tail + len > self.bytes.len() {
            self.bytes.copy_within(self.head..self.tail, 0);
            let shift = self.head as u32;
            for k in 0..self.count {
                let slot = (self.first + k) % self.entries.len();
                self.entries[slot].0 -= shift;
            }
            self.tail -= self.head;
            self.head = 0;
        }
        let o = self.tail;
        self.bytes[o..o + name.len()].copy_from_slice(name);
        self.bytes[o + name.len()..o + len].copy_from_slice(value);
        self.tail += len;
        let slot = (self.first + self.count) % self.entries.len();
        self.entries[slot] = (o as u32, name.len() as u32, value.len() as u32);
        self.count += 1;
        self.size += entry_size;
    }
}

/// HPACK decoder with a dynamic table of at most `table_size_max` bytes (the value we send as
/// SETTINGS_HEADER_TABLE_SIZE).
pub struct Decoder {
    table: DynamicTable,
    table_size_limit: usize,
}

impl Decoder {
    pub fn new(table_size_max: usize) -> Self {
        Self {
            table: DynamicTable::new(table_size_max),
            table_size_limit: table_size_max,
        }
    }

    /// Bytes [`Decoder::new`] allocates for a table of `table_size_max` bytes.
    pub fn allocation_bytes(table_size_max: usize) -> usize {
        DynamicTable::allocation_bytes(table_size_max)
    }

    /// Back to an empty dynamic table at its full size, as for a new connection; keeps its
    /// storage.
    pub fn reset(&mut self) {
        let t = &mut self.table;
        t.head = 0;
        t.tail = 0;
        t.first = 0;
        t.count = 0;
        t.size = 0;
        t.size_max = self.table_size_limit;
    }

    /// A decoder with no storage, standing in while a real one is moved (allocates nothing).
    pub fn placeholder() -> Self {
        Self {
            table: DynamicTable {
                bytes: Box::default(),
                head: 0,
                tail: 0,
                entries: Box::default(),
                first: 0,
                count: 0,
                size: 0,
                size_max: 0,
            },
            table_size_limit: 0,
        }
    }

    /// The dynamic table's current size in RFC 7541 units.
    pub fn table_size(&self) -> usize {
        self.table.size
    }

    /// Dynamic table entry `i` (0 = newest), for tests.
    pub fn table_entry(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.table.get(i)
    }

    /// Decodes one complete header block, appending fields to `out`.
    pub fn decode(&mut self, block: &[u8], out: &mut HeaderList) -> Result<(), HpackError> {
        let mut pos = 0;
        let mut fields_seen = false;
        while pos < block.len() {
            let b = block[pos];
            let rest = &block[pos..];
            if b & 0x80 != 0 {
                let (index, used) = decode_integer(rest, 7)?;
                let (name, value) = self.lookup(index)?;
                // Borrow juggling: copy from the table into the list.
                let start = out.bytes_len;
                out.append(name)?;
                out.append(value)?;
                out.commit(start, name.len(), value.len())?;
                pos += used;
                fields_seen = true;
            } else if b & 0xe0 == 0x20 {
                if fields_seen {
                    return Err(HpackError::SizeUpdateNotAtStart);
                }
                let (size, used) = decode_integer(rest, 5)?;
                if size as usize > self.table_size_limit {
                    return Err(HpackError::SizeUpdateTooLarge(size));
                }
                self.table.set_size_max(size as usize);
                pos += used;
            } else {
                // 01xxxxxx: with incremental indexing (6-bit prefix); 0000xxxx without
                // indexing and 0001xxxx never indexed (4-bit prefix).
                let indexing = b & 0x40 != 0;
                let prefix = if indexing { 6 } else { 4 };
                let (index, mut used) = decode_integer(rest, prefix)?;
                let start = out.bytes_len;
                let name_len = if index == 0 {
                    let (n, u) = out.append_literal(&rest[used..])?;
                    used += u;
                    n
                } else {
                    let (name, _) = self.lookup(index)?;
                    out.append(name)?;
                    name.len()
                };
                let (value_len, u) = out.append_literal(&rest[used..])?;
                used += u;
                out.commit(start, name_len, value_len)?;
                if indexing {
                    let name = &out.bytes[start..start + name_len];
                    let value = &out.bytes[start + name_len..start + name_len + value_len];
                    self.table.insert(name, value);
                }
                pos += used;
                fields_seen = true;
            }
        }
        Ok(())
    }

    fn lookup(&self, index: u64) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError::InvalidIndex(0)),
            1..=61 => {
                let (n, v) = STATIC_TABLE[index as usize - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self
                .table
                .get(index as usize - 62)
                .ok_or(HpackError::InvalidIndex(index)),
        }
    }
}

/// Encodes header fields with the static table and literals never added to the peer's table.
/// Stateless: the peer's SETTINGS_HEADER_TABLE_SIZE never matters.
pub struct Encoder;

impl Encoder {
    /// Appends one field to `out[*pos..]`; `sensitive` fields (authorization) use the
    /// never-indexed form so intermediaries do not compress them either.
    pub fn encode_field(
        name: &[u8],
        value: &[u8],
        sensitive: bool,
        out: &mut [u8],
        pos: &mut usize,
    ) -> Option<()> {
        let mut name_index = 0;
        for (i, (n, v)) in STATIC_TABLE.iter().enumerate() {
            if n.as_bytes() == name {
                if v.as_bytes() == value && !sensitive {
                    *pos += encode_integer(i as u64 + 1, 7, 0x80, &mut out[*pos..])?;
                    return Some(());
                }
                if name_index == 0 {
                    name_index = i + 1;
                }
            }
        }
        let flags = if sensitive { 0x10 } else { 0x00 };
        *pos += encode_integer(name_index as u64, 4, flags, out.get_mut(*pos..)?)?;
        if name_index == 0 {
            Self::encode_string(name, out, pos)?;
        }
        Self::encode_string(value, out, pos)
    }

    /// A string literal, Huffman-coded when that is shorter.
    pub fn encode_string(s: &[u8], out: &mut [u8], pos: &mut usize) -> Option<()> {
        let huff_len = huffman::encoded_len(s);
        if huff_len < s.len() {
            *pos += encode_integer(huff_len as u64, 7, 0x80, out.get_mut(*pos..)?)?;
            *pos += huffman::encode(s, out.get_mut(*pos..*pos + huff_len)?)?;
        } else {
            *pos += encode_integer(s.len() as u64, 7, 0, out.get_mut(*pos..)?)?;
            out.get_mut(*pos..*pos + s.len())?.copy_from_slice(s);
            *pos += s.len();
        }
        Some(())
    }
}

/// Huffman-decodes `input` into `out` (exposed for tests and fuzzing).
pub fn huffman_decode(input: &[u8], out: &mut [u8]) -> Result<usize, HuffmanError> {
    huffman::decode(input, out)
}

/// Huffman-encodes `input` into `out`; `None` when `out` is too short.
pub fn huffman_encode(input: &[u8], out: &mut [u8]) -> Option<usize> {
    huffman::encode(input, out)
}
