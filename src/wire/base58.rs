//! Base58 (Bitcoin alphabet) decoding of one transaction, without allocation. Decoding only:
//! signatures are encoded for the bundle id by five8 (`bundle_id.rs`).
//!
//! Base58 is a positional number in base 58, so decoding is a big-number conversion and costs
//! O(n²) in the string length. The `bs58` crate does that conversion one output byte at a time
//! (`decode().onto()` is allocation-free, but every input character walks every output byte).
//! This decoder keeps the number in 64-bit limbs and folds ten characters (58^10 < 2^64) into it
//! per pass, so each pass is one 64×64→128 multiply per limb: about 8 × 10 = 80 times less work
//! per character than byte-wise; measured 40× faster than `bs58` on a transaction (see the
//! module doc of `wire`).
//!
//! Semantics match `bs58::decode(..).into_vec()` exactly (the differential tests hold it to that):
//! each leading '1' is one leading zero byte, the rest is the number's minimal big-endian bytes,
//! and the empty string decodes to no bytes.

use super::encoding::Encoding;
use super::error::DecodeError;
use super::limits::{BASE58_LEN_MAX, PACKET_DATA_SIZE};

/// The Bitcoin base58 alphabet, which Solana uses for keys, signatures and transactions.
pub(crate) const ALPHABET: &[u8; 58] =
    b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// Marks a byte that is not a base58 digit in [`DIGIT`].
const INVALID: u8 = 0xFF;

/// Digit value of each byte, or [`INVALID`].
const DIGIT: [u8; 256] = {
    let mut table = [INVALID; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        table[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// Characters folded into the number per pass: 58^10 ≈ 4.3e17 still fits a u64 limb.
const CHARS_PER_PASS: usize = 10;

/// 58^k for k in 0..=10, the multiplier of a pass that folds k characters.
const POW58: [u64; CHARS_PER_PASS + 1] = {
    let mut table = [1u64; CHARS_PER_PASS + 1];
    let mut i = 1;
    while i <= CHARS_PER_PASS {
        table[i] = table[i - 1] * 58;
        i += 1;
    }
    table
};

/// Limbs for the largest number a capped string can hold: 1683 digits of base 58 need
/// ⌈1683 × log2(58) / 64⌉ = 155 limbs, so the exact decoded length of any string under the cap can
/// be computed and reported even when it is over [`PACKET_DATA_SIZE`].
const LIMBS: usize = (BASE58_LEN_MAX * 5858 / 1000 / 64) + 1;

/// Decodes `text` into `out`, returning the number of bytes written.
///
/// Checks the length cap before touching any character, then every character, then the decoded
/// length. `out` is written only when the whole string is valid.
pub fn decode(text: &[u8], out: &mut [u8; PACKET_DATA_SIZE]) -> Result<usize, DecodeError> {
    if text.len() > BASE58_LEN_MAX {
        return Err(DecodeError::TooLong {
            encoding: Encoding::Base58,
            len: text.len(),
            max: BASE58_LEN_MAX,
        });
    }
    let zeros = text.iter().take_while(|&&c| c == ALPHABET[0]).count();
    let digits = &text[zeros..];

    // Little-endian limbs; `used` limbs hold the number so far, the rest are zero.
    let mut limbs = [0u64; LIMBS];
    let mut used = 0usize;
    let mut position = zeros;
    for chunk in digits.chunks(CHARS_PER_PASS) {
        let mut add = 0u64;
        for &c in chunk {
            let digit = DIGIT[c as usize];
            if digit == INVALID {
                return Err(DecodeError::InvalidCharacter {
                    encoding: Encoding::Base58,
                    byte: c,
                    position,
                });
            }
            add = add * 58 + u64::from(digit);
            position += 1;
        }
        let mul = u128::from(POW58[chunk.len()]);
        let mut carry = u128::from(add);
        for limb in &mut limbs[..used] {
            let t = u128::from(*limb) * mul + carry;
            *limb = t as u64;
            carry = t >> 64;
        }
        if carry != 0 {
            // Cannot overflow: LIMBS covers the largest number of BASE58_LEN_MAX digits.
            limbs[used] = carry as u64;
            used += 1;
        }
    }

    let significant_len = match used {
        0 => 0,
        n => (n - 1) * 8 + 8 - (limbs[n - 1].leading_zeros() as usize / 8),
    };
    let len = zeros + significant_len;
    if len > PACKET_DATA_SIZE {
        return Err(DecodeError::DecodedTooLong {
            len,
            max: PACKET_DATA_SIZE,
        });
    }

    out[..zeros].fill(0);
    // Big-endian bytes of the number, most significant limb first.
    let dest = &mut out[zeros..len];
    for (i, byte) in dest.iter_mut().rev().enumerate() {
        *byte = (limbs[i / 8] >> ((i % 8) * 8)) as u8;
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limbs_cover_the_largest_capped_string() {
        // 58^1683 < 2^(64 × LIMBS)
        assert!(1683.0 * 58f64.log2() < (64 * LIMBS) as f64);
    }

    #[test]
    fn pow58_table_is_exact() {
        assert_eq!(POW58[10], 430_804_206_899_405_824);
    }
}
