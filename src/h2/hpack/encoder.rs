//! The HPACK encoder: static-table indexes and literals, never an insert into the peer's
//! dynamic table.

use super::huffman;
use super::integer::encode_integer;
use super::table::{ENTRY_OVERHEAD, STATIC_TABLE};

/// Encodes header fields with the static table and literals never added to the peer's table.
/// Stateless: the peer's SETTINGS_HEADER_TABLE_SIZE never matters.
pub struct Encoder;

/// Fields that every request of a kind repeats, encoded once. A stateless block is the same
/// bytes every time, so a request copies them instead of searching the static table and
/// Huffman-coding each literal again (most of what encoding a SendBundle's headers cost).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encoded {
    bytes: Vec<u8>,
    /// What the fields add to the header list size (RFC 7540 section 6.5.2).
    list_size: usize,
}

impl Encoded {
    /// `fields` (name, value), none sensitive, encoded as [`Encoder::encode_field`] would.
    pub fn of(fields: &[(&[u8], &[u8])]) -> Encoded {
        // A literal's worst case: two length prefixes of up to 6 bytes around raw strings.
        let room: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 13).sum();
        let mut bytes = vec![0u8; room];
        let mut len = 0;
        let mut list_size = 0;
        for (name, value) in fields {
            Encoder::encode_field(name, value, false, &mut bytes, &mut len)
                .expect("room for the worst case");
            list_size += name.len() + value.len() + ENTRY_OVERHEAD;
        }
        bytes.truncate(len);
        bytes.shrink_to_fit();
        Encoded { bytes, list_size }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn list_size(&self) -> usize {
        self.list_size
    }

    /// What the block holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }
}

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
