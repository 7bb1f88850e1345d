//! Finding where a run of ordinary string bytes ends: the loop every string of a request spends
//! its time in (a 1,232-byte transaction is about 1,650 base64 characters, each looked at by the
//! scanner and again by the walk).
//!
//! On x86-64 sixteen bytes are classified per step with SSE2, which every x86-64 CPU has (no
//! runtime detection, no target feature): three compares, a mask and one `tzcnt` give the
//! exact position. Elsewhere, eight bytes a step in a u64 (SWAR), then byte by byte. The
//! tests hold the form built for the target to the byte-at-a-time definition.

/// Whether `c` stops a plain run in unchecked JSON: a quote, a backslash, a control character
/// or a non-ASCII byte (the scanner then decides what it is).
#[inline(always)]
fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c)
}

/// In unchecked JSON: the position of the first byte at or after `pos` that is a quote, a
/// backslash, a control character or non-ASCII, or `b.len()`.
#[inline(always)]
pub(crate) fn skip_plain(b: &[u8], pos: usize) -> usize {
    let pos = wide::skip_plain(b, pos);
    pos + b[pos..]
        .iter()
        .position(|&c| is_special(c))
        .unwrap_or(b.len() - pos)
}

/// In checked JSON (where a string's bytes need no more classifying): the position of the next
/// quote or backslash at or after `pos`, or `b.len()`.
#[inline(always)]
pub(crate) fn skip_to_quote_or_backslash(b: &[u8], pos: usize) -> usize {
    let pos = wide::skip_to_quote_or_backslash(b, pos);
    pos + b[pos..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\')
        .unwrap_or(b.len() - pos)
}

/// Sixteen bytes a step; each function returns the exact position of the first stop found in
/// a whole block, or the start of the last partial block (fewer than 16 bytes left).
#[cfg(target_arch = "x86_64")]
mod wide {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };

    const BLOCK: usize = 16;

    #[inline(always)]
    fn load(b: &[u8], pos: usize) -> __m128i {
        let block: &[u8; BLOCK] = b[pos..pos + BLOCK].try_into().expect("16 bytes");
        // SAFETY: `block` is 16 readable bytes; the load is unaligned.
        unsafe { _mm_loadu_si128(block.as_ptr().cast()) }
    }

    #[inline(always)]
    pub(super) fn skip_plain(b: &[u8], mut pos: usize) -> usize {
        // SAFETY (every intrinsic below): SSE2 is part of the x86-64 baseline, so every CPU
        // this code runs on has it.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let space = _mm_set1_epi8(0x20);
            while pos + BLOCK <= b.len() {
                let v = load(b, pos);
                // A signed compare: below 0x20 is a control character, and every byte from
                // 0x80 up is negative, so one compare finds both.
                let low = _mm_cmplt_epi8(v, space);
                let stops = _mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                    low,
                );
                let mask = _mm_movemask_epi8(stops) as u32;
                if mask != 0 {
                    return pos + mask.trailing_zeros() as usize;
                }
                pos += BLOCK;
            }
        }
        pos
    }

    #[inline(always)]
    pub(super) fn skip_to_quote_or_backslash(b: &[u8], mut pos: usize) -> usize {
        // SAFETY: as in `skip_plain`.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            while pos + BLOCK <= b.len() {
                let v = load(b, pos);
                let stops = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
                let mask = _mm_movemask_epi8(stops) as u32;
                if mask != 0 {
                    return pos + mask.trailing_zeros() as usize;
                }
                pos += BLOCK;
            }
        }
        pos
    }
}

/// Eight bytes a step in a u64; stops at the first word holding a stop (the byte loop finds it).
#[cfg(not(target_arch = "x86_64"))]
mod wide {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;

    #[inline(always)]
    fn word_at(b: &[u8], pos: usize) -> u64 {
        u64::from_le_bytes(b[pos..pos + 8].try_into().expect("8 bytes"))
    }

    #[inline(always)]
    fn has_byte(w: u64, c: u8) -> bool {
        let x = w ^ (LO * u64::from(c));
        x.wrapping_sub(LO) & !x & HI != 0
    }

    #[inline(always)]
    pub(super) fn skip_plain(b: &[u8], mut pos: usize) -> usize {
        while pos + 8 <= b.len() {
            let w = word_at(b, pos);
            // For ASCII bytes, `b - 0x20` borrows into the high bit only when b < 0x20;
            // non-ASCII bytes are caught by their own high bit.
            let control = w.wrapping_sub(LO * 0x20) & !w & HI;
            if has_byte(w, b'"') || has_byte(w, b'\\') || control != 0 || w & HI != 0 {
                break;
            }
            pos += 8;
        }
        pos
    }

    #[inline(always)]
    pub(super) fn skip_to_quote_or_backslash(b: &[u8], mut pos: usize) -> usize {
        while pos + 8 <= b.len() {
            let w = word_at(b, pos);
            if has_byte(w, b'"') || has_byte(w, b'\\') {
                break;
            }
            pos += 8;
        }
        pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn plain_bytewise(b: &[u8], pos: usize) -> usize {
        (pos..b.len())
            .find(|&i| is_special(b[i]))
            .unwrap_or(b.len())
    }

    fn quote_bytewise(b: &[u8], pos: usize) -> usize {
        (pos..b.len())
            .find(|&i| matches!(b[i], b'"' | b'\\'))
            .unwrap_or(b.len())
    }

    #[test]
    fn every_kind_of_stop_is_found_at_every_offset_of_a_block() {
        for stop in [b'"', b'\\', 0x00, 0x1F, 0x80, 0xFF] {
            for at in 0..40 {
                let mut b = vec![b'A'; 40];
                b[at] = stop;
                assert_eq!(skip_plain(&b, 0), at, "stop {stop:#04x} at {at}");
                let want = if matches!(stop, b'"' | b'\\') { at } else { 40 };
                assert_eq!(
                    skip_to_quote_or_backslash(&b, 0),
                    want,
                    "{stop:#04x} at {at}"
                );
            }
        }
    }

    #[test]
    fn bytes_that_look_like_stops_but_are_not_are_skipped() {
        // 0x20 and 0x7F are the edges of the plain range; '!' and ']' neighbour the stops.
        let b = b" \x7f!#[]~ \x7f!#[]~ \x7f!#[]~ \x7f!#[]~";
        assert_eq!(skip_plain(b, 0), b.len());
        assert_eq!(skip_to_quote_or_backslash(b, 0), b.len());
    }

    proptest! {
        #[test]
        fn the_wide_scan_agrees_with_the_bytewise_definition(
            b in proptest::collection::vec(
                prop_oneof![8 => 0x21u8..0x7F, 1 => any::<u8>()], 0..100),
            from in 0usize..100,
        ) {
            let pos = from.min(b.len());
            prop_assert_eq!(skip_plain(&b, pos), plain_bytewise(&b, pos));
            prop_assert_eq!(skip_to_quote_or_backslash(&b, pos), quote_bytewise(&b, pos));
        }
    }
}
