//! Base58 (Bitcoin alphabet) decoding of one transaction, without allocation. Decoding only:
//! signatures are encoded for the bundle id by five8 (`bundle_id.rs`).
//!
//! Base58 is a positional number in base 58, so decoding is a big-number conversion and costs
//! O(n²) in the string length. The `bs58` crate does that conversion one output byte at a time
//! (`decode().onto()` is allocation-free, but every input character walks every output byte).
//! This decoder keeps the number in 64-bit limbs and folds ten characters (58^10 < 2^64) into it
//! per pass, so each pass is one 64×64→128 multiply per limb: about 8 × 10 = 80 times less work
//! per character than byte-wise (measured in `cargo bench --bench decode`, `decode_one_base58`).
//! What is left is that quadratic core, about 0.46 × (chars / 10)² multiplies: splitting the
//! carry chain in two, fusing two passes, a 128-bit multiplier, 56-bit limbs with lazy carries
//! and a pair-of-digits table were each measured no faster on x86-64 without target features.
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

/// 58^k for k in 0..=10; 58^10 multiplies the number each pass, the rest weigh a pass's digits.
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

/// Passes a capped string takes (its first, shorter group folded before them).
const PASSES: usize = BASE58_LEN_MAX / CHARS_PER_PASS;

/// Decodes `text` into `out`, returning the number of bytes written.
///
/// Checks the length cap before touching any character, then every character, then the decoded
/// length. `out` is written only when the whole string is valid.
///
/// Three loops, each without a dependency on the others' latency: every ten characters become
/// one value (ten independent multiplies, not a chain of ten), invalid characters are only
/// OR-ed together there (the first one is looked for again on the error path alone); then the
/// limb passes, whose only chain is the carry; then whole limbs are written out, not bytes.
/// Measured against the byte-at-a-time form in `cargo bench --bench decode`.
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
    let (head, rest) = digits.split_at(digits.len() % CHARS_PER_PASS);

    // INVALID has the top bit set and no digit does: one test for the whole string.
    let mut seen = 0u8;
    let mut first = 0u64;
    for &c in head {
        let digit = DIGIT[usize::from(c)];
        seen |= digit;
        first = first * 58 + u64::from(digit & 0x3F);
    }
    let mut adds = [0u64; PASSES];
    let passes = rest.len() / CHARS_PER_PASS;
    for (add, chunk) in adds.iter_mut().zip(rest.chunks_exact(CHARS_PER_PASS)) {
        let d: [u8; CHARS_PER_PASS] = std::array::from_fn(|i| DIGIT[usize::from(chunk[i])]);
        seen |= d.iter().fold(0, |a, &x| a | x);
        *add = (0..CHARS_PER_PASS).fold(0u64, |a, i| {
            a + u64::from(d[i] & 0x3F) * POW58[CHARS_PER_PASS - 1 - i]
        });
    }
    if seen & 0x80 != 0 {
        let position = zeros
            + digits
                .iter()
                .position(|&c| DIGIT[usize::from(c)] == INVALID)
                .unwrap_or(0);
        return Err(DecodeError::InvalidCharacter {
            encoding: Encoding::Base58,
            byte: text[position],
            position,
        });
    }

    // Little-endian limbs; `used` limbs hold the number so far, the rest are zero.
    let mut limbs = [0u64; LIMBS];
    let mut used = usize::from(first != 0);
    limbs[0] = first;
    let mul = u128::from(POW58[CHARS_PER_PASS]);
    for &add in &adds[..passes] {
        let mut carry = add;
        for limb in &mut limbs[..used] {
            let t = u128::from(*limb) * mul + u128::from(carry);
            *limb = t as u64;
            carry = (t >> 64) as u64;
        }
        if carry != 0 {
            // Cannot overflow: LIMBS covers the largest number of BASE58_LEN_MAX digits.
            limbs[used] = carry;
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
    // Big-endian bytes of the number: whole limbs from the end, least significant first, then
    // the top limb's significant bytes.
    let mut end = len;
    for limb in &limbs[..used.saturating_sub(1)] {
        out[end - 8..end].copy_from_slice(&limb.to_be_bytes());
        end -= 8;
    }
    if used > 0 {
        let top = limbs[used - 1].to_be_bytes();
        out[zeros..end].copy_from_slice(&top[8 - (end - zeros)..]);
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
