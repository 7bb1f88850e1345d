//! Bundle checks and Jito's bundle id, sans-IO.
//!
//! Every packet is decoded with the Solana crates themselves (bincode `VersionedTransaction`,
//! trailing bytes rejected, then `sanitize()`), so the engine is an oracle independent of the
//! relay's own zero-copy validator. Signatures are not verified: ed25519 costs ~50 µs each, more
//! than the whole per-request budget, and the relay never alters signed bytes (the recorder lets
//! tests check byte identity instead). The bundle id is computed here with bs58 + sha2, apart from
//! the relay's code. Cost: ≈1 µs decode per transaction plus ≈0.5 µs base58 + SHA-256 per bundle.

use bincode::Options;
use bundle_relay::proto::bundle::Bundle;
use bundle_relay::wire::{BUNDLE_TXS_MAX, PACKET_DATA_SIZE};
use sha2::{Digest, Sha256};
use solana_transaction::versioned::VersionedTransaction;

use crate::tag::Tag;

/// Why a SendBundle was refused after it passed the rate limit; one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reject {
    /// The gRPC framing (5-byte prefix) was wrong or compressed.
    Framing,
    /// The bytes are not a `SendBundleRequest`.
    Protobuf,
    NoBundle,
    NoPackets,
    TooManyPackets,
    PacketTooLarge,
    MetaSize,
    /// bincode could not decode the packet as a transaction, or bytes were left over.
    Decode,
    /// The transaction decoded but fails `sanitize()`.
    Sanitize,
}

impl Reject {
    pub const ALL: [Reject; 9] = [
        Reject::Framing,
        Reject::Protobuf,
        Reject::NoBundle,
        Reject::NoPackets,
        Reject::TooManyPackets,
        Reject::PacketTooLarge,
        Reject::MetaSize,
        Reject::Decode,
        Reject::Sanitize,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reject::Framing => "grpc_framing",
            Reject::Protobuf => "protobuf",
            Reject::NoBundle => "no_bundle",
            Reject::NoPackets => "no_packets",
            Reject::TooManyPackets => "too_many_packets",
            Reject::PacketTooLarge => "packet_too_large",
            Reject::MetaSize => "meta_size",
            Reject::Decode => "decode",
            Reject::Sanitize => "sanitize",
        }
    }

    pub fn is_decode_failure(self) -> bool {
        matches!(self, Reject::Decode | Reject::Sanitize)
    }
}

/// A refused bundle: the reason and the message for `grpc-message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reject,
    pub message: String,
}

/// What an accepted bundle yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Jito's bundle id as raw SHA-256 bytes.
    pub id: [u8; 32],
    /// The bench tag of the first transaction, if it carries one.
    pub tag: Option<Tag>,
}

/// Checks every packet of a bundle and computes its id.
pub fn check_bundle(bundle: &Bundle) -> Result<Checked, Refusal> {
    let refuse = |reason, message: String| Err(Refusal { reason, message });
    let n = bundle.packets.len();
    if n == 0 {
        return refuse(Reject::NoPackets, "bundle has no packets".into());
    }
    if n > BUNDLE_TXS_MAX {
        return refuse(
            Reject::TooManyPackets,
            format!("bundle has {n} packets, at most {BUNDLE_TXS_MAX} allowed"),
        );
    }
    let mut hasher = Sha256::new();
    let mut tag = None;
    for (i, p) in bundle.packets.iter().enumerate() {
        let len = p.data.len();
        if len > PACKET_DATA_SIZE {
            return refuse(
                Reject::PacketTooLarge,
                format!("packet {i}: {len} bytes, more than PACKET_DATA_SIZE {PACKET_DATA_SIZE}"),
            );
        }
        let size = p.meta.as_ref().map_or(0, |m| m.size);
        if size != len as u64 {
            return refuse(
                Reject::MetaSize,
                format!("packet {i}: meta.size {size} differs from data length {len}"),
            );
        }
        let tx: VersionedTransaction = match bincode::DefaultOptions::new()
            .with_limit(PACKET_DATA_SIZE as u64)
            .with_fixint_encoding()
            .reject_trailing_bytes()
            .deserialize(&p.data)
        {
            Ok(tx) => tx,
            Err(e) => {
                return refuse(
                    Reject::Decode,
                    format!("packet {i}: not a transaction: {e}"),
                );
            }
        };
        if let Err(e) = tx.sanitize() {
            return refuse(
                Reject::Sanitize,
                format!("packet {i}: transaction fails sanitize: {e}"),
            );
        }
        let Some(sig) = tx.signatures.first() else {
            return refuse(Reject::Sanitize, format!("packet {i}: no signatures"));
        };
        if i > 0 {
            hasher.update(b",");
        }
        let mut b58 = [0u8; SIG_B58_MAX];
        let sig: &[u8; 64] = sig.as_ref().try_into().expect("signatures are 64 bytes");
        let w = base58_sig(sig, &mut b58);
        hasher.update(&b58[..w]);
        if i == 0 {
            tag = Tag::from_blockhash(&tx.message.recent_blockhash().to_bytes());
        }
    }
    Ok(Checked {
        id: hasher.finalize().into(),
        tag,
    })
}

/// Base58 digits of a 64-byte value, at most.
pub const SIG_B58_MAX: usize = 88;
/// 58^5: limbs this size times 2^32 plus a carry still fit a u64, so four input bytes are
/// folded in per step (16 × 18 steps instead of bs58's 64 × 88 digit steps; the bs58 crate was
/// the engine's largest single cost at ≈5 µs per signature).
const B58_LIMB: u64 = 656_356_768;
const B58_LIMB_DIGITS: usize = 5;
/// Limbs for 88 digits.
const SIG_B58_LIMBS: usize = SIG_B58_MAX.div_ceil(B58_LIMB_DIGITS);
const B58_ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// Writes a signature in base58 (Bitcoin alphabet, as Solana) into `out`; returns the length.
pub fn base58_sig(sig: &[u8; 64], out: &mut [u8; SIG_B58_MAX]) -> usize {
    let mut limbs = [0u64; SIG_B58_LIMBS]; // little-endian base-58^5 digits
    let mut used = 0;
    for chunk in sig.chunks_exact(4) {
        let mut carry = u32::from_be_bytes(chunk.try_into().expect("4 bytes")) as u64;
        for l in limbs[..used].iter_mut() {
            let v = (*l << 32) + carry;
            *l = v % B58_LIMB;
            carry = v / B58_LIMB;
        }
        while carry > 0 {
            limbs[used] = carry % B58_LIMB;
            carry /= B58_LIMB;
            used += 1;
        }
    }
    let mut digits = [0u8; SIG_B58_LIMBS * B58_LIMB_DIGITS];
    let mut n = 0;
    for &limb in limbs[..used].iter().rev() {
        let mut l = limb;
        for k in (0..B58_LIMB_DIGITS).rev() {
            digits[n + k] = (l % 58) as u8;
            l /= 58;
        }
        n += B58_LIMB_DIGITS;
    }
    let first = digits[..n].iter().position(|&d| d != 0).unwrap_or(n);
    let zeros = sig.iter().take_while(|&&b| b == 0).count();
    out[..zeros].fill(b'1');
    let mut w = zeros;
    for &d in &digits[first..n] {
        out[w] = B58_ALPHABET[d as usize];
        w += 1;
    }
    w
}

/// Jito's bundle id of the given first signatures (SHA-256 over their base58 forms joined by
/// `,`), as raw bytes.
pub fn bundle_id<'a>(first_signatures: impl IntoIterator<Item = &'a [u8; 64]>) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for (i, sig) in first_signatures.into_iter().enumerate() {
        if i > 0 {
            hasher.update(b",");
        }
        hasher.update(bs58::encode(sig).into_string().as_bytes());
    }
    hasher.finalize().into()
}

/// The first signature of a transaction [`check_bundle`] accepted: its signature count is
/// below 128 (one byte of compact-u16; 128 signatures would not fit a packet) and at least 1.
///
/// Panics on fewer than 65 bytes, which no checked transaction has.
pub fn first_signature(tx: &[u8]) -> &[u8; 64] {
    tx[1..65]
        .try_into()
        .expect("a checked transaction is signed")
}

/// A bundle id from 64 hex digits (either case), as Jito's status calls take it.
pub fn unhex(s: &str) -> Option<[u8; 32]> {
    let s = s.as_bytes();
    if s.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut id = [0u8; 32];
    for (b, pair) in id.iter_mut().zip(s.chunks_exact(2)) {
        *b = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(id)
}

/// Lowercase hex, as Jito writes bundle ids.
pub fn hex(id: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(64);
    for b in id {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base58_matches_the_bs58_crate_on_seeded_random_signatures() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(58);
        for i in 0..2_000 {
            let mut sig = [0u8; 64];
            rng.fill(&mut sig[..]);
            // Leading zero bytes become leading '1's; cover 0..=64 of them.
            let zeros = i % 66;
            sig[..zeros.min(64)].fill(0);
            if i % 7 == 0 {
                sig = [0xff; 64];
            }
            let mut out = [0u8; SIG_B58_MAX];
            let w = base58_sig(&sig, &mut out);
            assert_eq!(
                std::str::from_utf8(&out[..w]).unwrap(),
                bs58::encode(sig).into_string()
            );
        }
    }

    #[test]
    fn unhex_reads_back_hex_and_refuses_anything_else() {
        let id: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
        assert_eq!(unhex(&hex(&id)), Some(id));
        assert_eq!(unhex(&hex(&id).to_uppercase()), Some(id));
        assert_eq!(unhex(&hex(&id)[..62]), None);
        assert_eq!(unhex(&format!("{}0", hex(&id))), None);
        assert_eq!(unhex(&format!("g{}", &hex(&id)[1..])), None);
        assert_eq!(unhex(&format!("+{}", &hex(&id)[1..])), None);
    }

    #[test]
    fn bundle_id_known_answer_from_jitos_docs() {
        let sig = |s: &str| -> [u8; 64] { bs58::decode(s).into_vec().unwrap().try_into().unwrap() };
        let a = sig(
            "3bC2M9fiACSjkTXZDgeNAuQ4ScTsdKGwR42ytFdhUvikqTmBheUxfsR1fDVsM5ADCMMspuwGkdm1uKbU246x5aE3",
        );
        let b = sig(
            "8t9hKYEYNbLvNqiSzP96S13XF1C2f1ro271Kdf7bkZ6EpjPLuDff1ywRy4gfaGSTubsM2FeYGDoT64ZwPm1cQUt",
        );
        assert_eq!(
            hex(&bundle_id([&a, &b])),
            "892b79ed49138bfb3aa5441f0df6e06ef34f9ee8f3976c15b323605bae0cf51d"
        );
    }
}
