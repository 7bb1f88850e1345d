//! Jito's bundle id: SHA-256 over the base58 first signatures of the bundle's transactions, in
//! order, joined with ",", shown as lowercase hex. Computed without allocation: each signature is
//! base58-encoded into a stack buffer (five8, Firedancer's fixed-size encoder) and streamed into
//! the hasher. It is NOT a check of the bundle: the signatures are hashed as they are.

use core::fmt;

use sha2::{Digest, Sha256};

/// Longest base58 text of a 64-byte signature.
pub const SIGNATURE_BASE58_LEN_MAX: usize = 88;

/// A bundle id: the SHA-256 digest; [`BundleId::to_hex`] and Display give Jito's text form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BundleId(pub [u8; 32]);

impl BundleId {
    /// The 64 lowercase hex digits Jito returns as `sendBundle`'s result.
    pub fn to_hex(&self) -> [u8; 64] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = HEX[usize::from(b >> 4)];
            out[2 * i + 1] = HEX[usize::from(b & 0x0F)];
        }
        out
    }
}

impl fmt::Display for BundleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.to_hex();
        // Hex digits are ASCII.
        f.write_str(core::str::from_utf8(&hex).expect("hex digits are ASCII"))
    }
}

/// Base58 text of a signature, written into `out`; the returned `&str` borrows `out`.
pub fn signature_base58<'a>(
    sig: &[u8; 64],
    out: &'a mut [u8; SIGNATURE_BASE58_LEN_MAX],
) -> &'a str {
    let len = usize::from(five8::encode_64(sig, out));
    core::str::from_utf8(&out[..len]).expect("base58 digits are ASCII")
}

/// The bundle id of transactions with these first signatures, in bundle order.
pub fn bundle_id<'a>(first_signatures: impl IntoIterator<Item = &'a [u8; 64]>) -> BundleId {
    let mut hasher = Sha256::new();
    let mut text = [0u8; SIGNATURE_BASE58_LEN_MAX];
    for (i, sig) in first_signatures.into_iter().enumerate() {
        if i > 0 {
            hasher.update(b",");
        }
        hasher.update(signature_base58(sig, &mut text).as_bytes());
    }
    BundleId(hasher.finalize().into())
}
