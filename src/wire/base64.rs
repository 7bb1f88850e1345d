//! Standard base64 (RFC 4648 alphabet, `=` padding) decoding of one transaction, without
//! allocation. Decoding only: the relay never writes base64.
//!
//! Accepts exactly what `base64::engine::general_purpose::STANDARD` accepts, which is what Solana
//! RPC decodes with: the length is a multiple of four, padding is canonical (one or two `=` that
//! end the last quad, nowhere else), and the bits the padding leaves over are zero. The
//! differential tests hold this module to that crate.

use super::encoding::Encoding;
use super::error::DecodeError;
use super::limits::{BASE64_LEN_MAX, PACKET_DATA_SIZE};

/// Marks a byte that is not a base64 digit in [`SEXTET`].
const INVALID: u8 = 0xFF;

/// Value of each byte as a base64 digit, or [`INVALID`].
const SEXTET: [u8; 256] = {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut table = [INVALID; 256];
    let mut i = 0;
    while i < alphabet.len() {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
};

const PAD: u8 = b'=';

/// Decodes `text` into `out`, returning the number of bytes written.
pub fn decode(text: &[u8], out: &mut [u8; PACKET_DATA_SIZE]) -> Result<usize, DecodeError> {
    if text.len() > BASE64_LEN_MAX {
        return Err(DecodeError::TooLong {
            encoding: Encoding::Base64,
            len: text.len(),
            max: BASE64_LEN_MAX,
        });
    }
    if text.len() % 4 != 0 {
        return Err(DecodeError::Base64LengthNotQuad { len: text.len() });
    }
    // At most two '=' end the text; any other '=' is reported as an invalid character below.
    let pads = text.iter().rev().take(2).take_while(|&&c| c == PAD).count();
    let digits = &text[..text.len() - pads];
    let len = text.len() / 4 * 3 - pads;
    if len > PACKET_DATA_SIZE {
        return Err(DecodeError::DecodedTooLong {
            len,
            max: PACKET_DATA_SIZE,
        });
    }

    let sextet = |position: usize| -> Result<u32, DecodeError> {
        let c = digits[position];
        match SEXTET[c as usize] {
            INVALID => Err(DecodeError::InvalidCharacter {
                encoding: Encoding::Base64,
                byte: c,
                position,
            }),
            v => Ok(u32::from(v)),
        }
    };

    let full_quads = digits.len() / 4;
    for (q, quad) in digits.chunks_exact(4).enumerate() {
        let [a, b, c, d] = [0, 1, 2, 3].map(|i| SEXTET[usize::from(quad[i])]);
        // One branch per quad: INVALID has the top bit set, no digit value does.
        if (a | b | c | d) & 0x80 != 0 {
            let bad = (0..4).find(|&i| SEXTET[usize::from(quad[i])] == INVALID);
            return Err(sextet(q * 4 + bad.unwrap_or(0)).unwrap_err());
        }
        let word = u32::from(a) << 18 | u32::from(b) << 12 | u32::from(c) << 6 | u32::from(d);
        out[q * 3..q * 3 + 3].copy_from_slice(&word.to_be_bytes()[1..]);
    }
    let p = full_quads * 4;
    let o = full_quads * 3;
    match digits.len() - p {
        0 => {}
        // "xy==": one byte; the low 4 bits of y are left over and must be zero.
        2 => {
            let (a, b) = (sextet(p)?, sextet(p + 1)?);
            if b & 0x0F != 0 {
                return Err(DecodeError::Base64TrailingBits { position: p + 1 });
            }
            out[o] = (a << 2 | b >> 4) as u8;
        }
        // "xyz=": two bytes; the low 2 bits of z are left over and must be zero.
        3 => {
            let word = sextet(p)? << 18 | sextet(p + 1)? << 12 | sextet(p + 2)? << 6;
            if word & 0xFF != 0 {
                return Err(DecodeError::Base64TrailingBits { position: p + 2 });
            }
            out[o..o + 2].copy_from_slice(&word.to_be_bytes()[1..3]);
        }
        // Unreachable: the length is a multiple of four and at most two '=' were stripped.
        _ => unreachable!("quad remainder after at most two pads"),
    }
    Ok(len)
}
