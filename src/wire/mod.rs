//! Transaction wire layer: encoded strings to bytes, the zero-copy transaction validator,
//! and Jito's bundle id. It is NOT the JSON layer (strings arrive already found in the body)
//! and NOT a transaction decoder: it checks the wire format and reads three facts, it builds
//! no transaction.
//!
//! Read it in this order: `limits.rs`, `encoding.rs`, `error.rs`, `decode.rs` (the entry),
//! `base58.rs` and `base64.rs`, `tx.rs` (the validator), `bundle_id.rs`.
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

mod base58;
mod base64;
mod bundle_id;
mod decode;
mod encoding;
mod error;
mod limits;
mod tx;

pub use bundle_id::{BundleId, SIGNATURE_BASE58_LEN_MAX, bundle_id, signature_base58};
pub use decode::{decode, decode_and_validate};
pub use encoding::Encoding;
pub use error::{DecodeError, WireError};
pub use limits::{BASE58_LEN_MAX, BASE64_LEN_MAX, BUNDLE_TXS_MAX, PACKET_DATA_SIZE};
pub use tx::{Field, MessageVersion, TxError, TxInfo, read_compact_u16, validate};
