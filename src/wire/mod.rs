//! Transaction wire layer: encoded strings to bytes, the zero-copy transaction validator,
//! and Jito's bundle id.
//!
//! The request path calls [`decode_and_validate`] once per transaction string, straight into the
//! request's arena slot, then [`bundle_id`] over the first signatures. Nothing here allocates
//! (`tests/wire_alloc.rs` counts). Errors carry what was wrong and where; the JSON-RPC layer prefixes
//! "transaction {index}: ".
//!
//! ## Decisions
//!
//! - base58: a 64-bit-limb big-number decoder (`base58.rs`), not `bs58::decode().onto()`. The
//!   latter is allocation-free but converts one output byte per input character; folding ten
//!   characters per pass into u64 limbs is 40× faster on a transaction (table below).
//! - base64: a table decoder that accepts exactly what `base64`'s STANDARD engine accepts; the crate
//!   itself would do (its `decode_slice` is allocation-free and faster), but owning the decoder
//!   gives errors that name the character and its position.
//! - Signatures are base58-encoded for the bundle id with `five8::encode_64` (fixed-size,
//!   stack-only).
//!
//! ## Measured costs
//!
//! `cargo bench --bench decode -- --warm-up-time 1 --measurement-time 3` (criterion medians; a
//! 2-core machine shared with other builds, load average about 12, so absolute times are inflated
//! several-fold; the ratios come from the same run). Bundle: 3 signed transactions of 200–400
//! bytes (one legacy, two v0 with lookup tables). The Solana-crates path decodes to a `Vec`,
//! deserializes with bincode, sanitizes, and builds the id from `bs58` strings joined and hashed.
//!
//! | benchmark                              | relay     | Solana crates / crate | ratio |
//! |----------------------------------------|-----------|-----------------------|-------|
//! | 3-tx bundle, base64: decode+validate+id | 10.6 µs  | 42.3 µs               | 4.0×  |
//! | 3-tx bundle, base58: decode+validate+id | 22.1 µs  | 882.6 µs              | 40×   |
//! | validate one tx                        | 0.27 µs   | 5.93 µs (bincode+sanitize) | 22× |
//! | bundle id of 3 signatures              | 4.01 µs   | 50.5 µs (bs58 strings + sha2) | 12.6× |
//! | decode one tx, base58                  | 7.00 µs   | 277 µs (`bs58` `onto`) | 40×  |
//! | decode one tx, base64                  | 1.80 µs   | 1.19 µs (`base64` `decode_slice`) | 0.66× |
//!
//! The base64 decoder is slower than the crate's, which decodes eight characters per step; the
//! bundle id (three base58 encodings and SHA-256) is the largest part of the base64 path.

/// Largest serialized transaction Solana accepts (`PACKET_DATA_SIZE`): one IPv6 MTU minus headers.
pub const PACKET_DATA_SIZE: usize = 1232;
/// Most transactions a Jito bundle may hold.
pub const MAX_BUNDLE_TXS: usize = 5;
/// Longest base58 string Solana RPC accepts for one transaction (encodes 1232 bytes).
pub const MAX_BASE58_LEN: usize = 1683;
/// Longest base64 string Solana RPC accepts for one transaction (encodes 1232 bytes).
pub const MAX_BASE64_LEN: usize = 1644;

/// How a transaction is encoded in a JSON-RPC request. Jito's default is base58.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Encoding {
    #[default]
    Base58,
    Base64,
}

impl Encoding {
    /// The longest encoded string allowed for one transaction in this encoding.
    pub const fn max_encoded_len(self) -> usize {
        match self {
            Encoding::Base58 => MAX_BASE58_LEN,
            Encoding::Base64 => MAX_BASE64_LEN,
        }
    }

    /// The name used in JSON-RPC's `encoding` option.
    pub const fn name(self) -> &'static str {
        match self {
            Encoding::Base58 => "base58",
            Encoding::Base64 => "base64",
        }
    }
}

mod base58;
mod base64;
mod bundle_id;
mod tx;

use core::fmt;

pub use bundle_id::{BundleId, SIGNATURE_BASE58_MAX_LEN, bundle_id, signature_base58};
pub use tx::{Field, MessageVersion, TxError, TxInfo, read_compact_u16, validate};

/// Why an encoded transaction string could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The string is longer than the encoding's cap; checked before anything else.
    TooLong {
        encoding: Encoding,
        len: usize,
        max: usize,
    },
    /// A byte outside the encoding's alphabet, at this 0-based position.
    InvalidCharacter {
        encoding: Encoding,
        byte: u8,
        position: usize,
    },
    /// Base64 text must come in whole quads (padding included).
    Base64LengthNotQuad { len: usize },
    /// The last base64 digit before the padding carries bits the padding says are unused.
    Base64TrailingBits { position: usize },
    /// The decoded bytes are more than one packet.
    DecodedTooLong { len: usize, max: usize },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::TooLong { encoding, len, max } => write!(
                f,
                "{} string is {len} characters; the limit is {max}",
                encoding.name()
            ),
            DecodeError::InvalidCharacter {
                encoding,
                byte,
                position,
            } => {
                if byte.is_ascii_graphic() {
                    write!(
                        f,
                        "invalid {} character '{}' at position {position}",
                        encoding.name(),
                        byte as char
                    )
                } else {
                    write!(
                        f,
                        "invalid {} character (byte 0x{byte:02x}) at position {position}",
                        encoding.name()
                    )
                }
            }
            DecodeError::Base64LengthNotQuad { len } => write!(
                f,
                "base64 string length {len} is not a multiple of 4 (padding is required)"
            ),
            DecodeError::Base64TrailingBits { position } => write!(
                f,
                "base64 character at position {position} has nonzero bits after the last byte"
            ),
            DecodeError::DecodedTooLong { len, max } => {
                write!(f, "decoded transaction is {len} bytes; the limit is {max}")
            }
        }
    }
}

impl core::error::Error for DecodeError {}

/// Decodes one transaction string into `out`, returning the decoded length.
///
/// The length cap is checked first, so an oversized string costs nothing. `out` may be partly
/// written even on error.
pub fn decode(
    enc: Encoding,
    text: &[u8],
    out: &mut [u8; PACKET_DATA_SIZE],
) -> Result<usize, DecodeError> {
    match enc {
        Encoding::Base58 => base58::decode(text, out),
        Encoding::Base64 => base64::decode(text, out),
    }
}

/// A transaction string that failed to decode or to validate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    Decode(DecodeError),
    Tx(TxError),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Decode(e) => e.fmt(f),
            WireError::Tx(e) => e.fmt(f),
        }
    }
}

impl core::error::Error for WireError {}

impl From<DecodeError> for WireError {
    fn from(e: DecodeError) -> Self {
        WireError::Decode(e)
    }
}

impl From<TxError> for WireError {
    fn from(e: TxError) -> Self {
        WireError::Tx(e)
    }
}

/// Decodes one transaction string into `out` and validates it: the request path's single call.
/// On success `out[..len]` holds the transaction's wire bytes.
pub fn decode_and_validate(
    enc: Encoding,
    text: &[u8],
    out: &mut [u8; PACKET_DATA_SIZE],
) -> Result<(usize, TxInfo), WireError> {
    let len = decode(enc, text, out)?;
    let info = validate(&out[..len])?;
    Ok((len, info))
}
