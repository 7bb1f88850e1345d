//! HPACK's prefixed integers (RFC 7541 section 5.1), with the overflow bound that keeps every
//! shift in range.

use super::error::HpackError;

/// An integer prefix value above this is an attack or a bug: no header in this protocol needs a
/// length or index beyond 2^24, and stopping there keeps every shift far from overflow.
pub const INTEGER_MAX: u64 = 1 << 24;

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
