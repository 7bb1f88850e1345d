//! Why a transaction string was refused, by stage: decoding ([`DecodeError`]) or validation
//! ([`TxError`]), joined in [`WireError`]. Each names what was wrong and where.

use core::fmt;

use super::encoding::Encoding;
use super::tx::TxError;

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
