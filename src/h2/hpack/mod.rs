//! HPACK (RFC 7541): a complete decoder (Huffman, dynamic table, size updates, integer and
//! length overflow checks) and an encoder that uses the static table and literals only. It is
//! NOT a general-purpose encoder: it never indexes, so any table size the peer allows suits it.
//!
//! Read it in this order: `integer.rs`, `huffman.rs` (with `huffman_table.rs`), `table.rs`,
//! `header_list.rs`, `error.rs`, `decoder.rs`, `encoder.rs`.
//!
//! Nothing here allocates after construction: the decoder's dynamic table is a byte buffer of
//! the size we advertise in SETTINGS_HEADER_TABLE_SIZE, and decoded fields land in a
//! caller-owned [`HeaderList`] of fixed capacity. The encoder never inserts into the peer's
//! dynamic table; the table size update a peer may need (to 0, after it changes
//! SETTINGS_HEADER_TABLE_SIZE) is the connection's to write (`h2::conn`).

mod decoder;
mod encoder;
mod error;
mod header_list;
mod huffman;
mod huffman_table;
mod integer;
mod table;

pub use decoder::{Decoder, Spill};
pub use encoder::{Encoded, Encoder};
pub use error::HpackError;
pub use header_list::HeaderList;
pub use huffman::HuffmanError;
/// Huffman coding, exposed for tests and fuzzing.
pub use huffman::{decode as huffman_decode, encode as huffman_encode};
pub use integer::{INTEGER_MAX, decode_integer, encode_integer};
pub use table::{ENTRY_OVERHEAD, STATIC_TABLE};
