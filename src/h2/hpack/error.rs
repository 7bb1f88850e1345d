//! Why a header block could not be decoded; the connection turns every one into a
//! connection error.

use super::huffman::HuffmanError;

/// Why a header block could not be decoded. The connection answers every variant, including
/// [`HpackError::ListTooLarge`], with GOAWAY COMPRESSION_ERROR: decoding stops at the error, so
/// the dynamic table is no longer in step with the peer's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpackError {
    /// The block ended inside a representation.
    Truncated,
    /// An integer exceeded [`INTEGER_MAX`](super::integer::INTEGER_MAX).
    IntegerOverflow,
    /// An index of 0 or past the end of the static plus dynamic table.
    InvalidIndex(u64),
    /// A dynamic table size update above the limit we advertised.
    SizeUpdateTooLarge(u64),
    /// A dynamic table size update after the first field of the block.
    SizeUpdateNotAtStart,
    /// A Huffman string with EOS or bad padding.
    Huffman(HuffmanError),
    /// The decoded fields do not fit the header list's capacity.
    ListTooLarge,
}
