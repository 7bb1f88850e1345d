//! HPACK Huffman coding (RFC 7541 section 5.2 and Appendix B).
//!
//! The code is canonical (checked by a test), so decoding walks one bit at a time comparing the
//! code against the first code of each length: no tree, no allocation, a 31-entry table built at
//! compile time. Strings in gRPC headers are short, so per-bit decoding costs well under a
//! microsecond per header.

use super::huffman_table::CODES;

/// The longest code in the table (RFC 7541 Appendix B).
const CODE_LENGTH_MAX: usize = 30;
const EOS: u16 = 256;

struct Canon {
    /// First code of each length.
    first: [u32; CODE_LENGTH_MAX + 1],
    /// Number of codes of each length.
    count: [u32; CODE_LENGTH_MAX + 1],
    /// Index into `symbols` of each length's first symbol.
    offset: [u32; CODE_LENGTH_MAX + 1],
    /// Symbols sorted by (length, code).
    symbols: [u16; 257],
}

const fn build() -> Canon {
    let mut c = Canon {
        first: [0; CODE_LENGTH_MAX + 1],
        count: [0; CODE_LENGTH_MAX + 1],
        offset: [0; CODE_LENGTH_MAX + 1],
        symbols: [0; 257],
    };
    let mut n = 0;
    let mut len = 1;
    while len <= CODE_LENGTH_MAX {
        c.offset[len] = n as u32;
        let mut first_set = false;
        let mut s = 0;
        while s < 257 {
            if CODES[s].1 as usize == len {
                if !first_set || CODES[s].0 < c.first[len] {
                    c.first[len] = CODES[s].0;
                    first_set = true;
                }
                c.count[len] += 1;
                c.symbols[n] = s as u16;
                n += 1;
            }
            s += 1;
        }
        len += 1;
    }
    c
}

static CANON: Canon = build();

/// Why a Huffman string was rejected (RFC 7541 section 5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// The EOS symbol appeared inside the string.
    Eos,
    /// Padding longer than 7 bits or not all ones.
    Padding,
    /// The output buffer is full.
    Overflow,
}

/// Decodes `input` into `out`, returning the number of bytes written.
pub fn decode(input: &[u8], out: &mut [u8]) -> Result<usize, HuffmanError> {
    let mut written = 0;
    let mut code: u32 = 0;
    let mut len: usize = 0;
    for &byte in input {
        for bit in (0..8).rev() {
            code = (code << 1) | ((byte >> bit) & 1) as u32;
            len += 1;
            if len > CODE_LENGTH_MAX {
                return Err(HuffmanError::Padding);
            }
            let first = CANON.first[len];
            let count = CANON.count[len];
            if count != 0 && code >= first && code - first < count {
                let symbol = CANON.symbols[(CANON.offset[len] + code - first) as usize];
                if symbol == EOS {
                    return Err(HuffmanError::Eos);
                }
                if written == out.len() {
                    return Err(HuffmanError::Overflow);
                }
                out[written] = symbol as u8;
                written += 1;
                code = 0;
                len = 0;
            }
        }
    }
    // What is left must be a prefix of EOS (all ones) shorter than a byte.
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(HuffmanError::Padding);
    }
    Ok(written)
}

/// The Huffman-coded length of `input` in bytes.
pub fn encoded_len(input: &[u8]) -> usize {
    let bits: usize = input.iter().map(|&b| CODES[b as usize].1 as usize).sum();
    bits.div_ceil(8)
}

/// Encodes `input` into `out` (which must hold `encoded_len(input)` bytes); returns the length.
pub fn encode(input: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut acc: u64 = 0;
    let mut acc_bits = 0u32;
    let mut written = 0;
    for &b in input {
        let (code, len) = CODES[b as usize];
        acc = (acc << len) | code as u64;
        acc_bits += len as u32;
        while acc_bits >= 8 {
            acc_bits -= 8;
            *out.get_mut(written)? = (acc >> acc_bits) as u8;
            written += 1;
        }
    }
    if acc_bits > 0 {
        let pad = 8 - acc_bits;
        *out.get_mut(written)? = ((acc << pad) as u8) | ((1u16 << pad) - 1) as u8;
        written += 1;
    }
    Some(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_canonical_so_decoding_needs_no_tree() {
        let mut syms: Vec<usize> = (0..257).collect();
        syms.sort_by_key(|&s| (CODES[s].1, s));
        let mut code = 0u32;
        for (i, &s) in syms.iter().enumerate() {
            if i > 0 {
                code = (code + 1) << (CODES[s].1 - CODES[syms[i - 1]].1);
            }
            assert_eq!(code, CODES[s].0, "symbol {s}");
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let input: Vec<u8> = (0..=255u8).collect();
        let mut enc = vec![0; encoded_len(&input)];
        let n = encode(&input, &mut enc).unwrap();
        let mut dec = vec![0; 256];
        assert_eq!(decode(&enc[..n], &mut dec), Ok(256));
        assert_eq!(dec, input);
    }

    #[test]
    fn padding_of_a_full_byte_is_rejected() {
        // "a" is 00011 (5 bits) + 3 bits of padding; an extra 0xff byte is 8 bits of padding.
        assert_eq!(
            decode(&[0x1f, 0xff], &mut [0; 4]),
            Err(HuffmanError::Padding)
        );
        assert_eq!(decode(&[0x1f], &mut [0; 4]), Ok(1));
        // Padding with a zero bit is not an EOS prefix.
        assert_eq!(decode(&[0x18], &mut [0; 4]), Err(HuffmanError::Padding));
    }

    #[test]
    fn eos_inside_a_string_is_rejected() {
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut [0; 4]),
            Err(HuffmanError::Eos)
        );
    }
}
