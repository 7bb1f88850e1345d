//! The request path's entry: one encoded transaction string to validated bytes in a fixed
//! buffer.

use super::encoding::Encoding;
use super::error::{DecodeError, WireError};
use super::limits::PACKET_DATA_SIZE;
use super::tx::{TxInfo, validate};
use super::{base58, base64};

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
