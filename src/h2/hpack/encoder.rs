//! The HPACK encoder: static-table indexes and literals, never an insert into the peer's
//! dynamic table.

use super::huffman;
use super::integer::encode_integer;
use super::table::STATIC_TABLE;

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
