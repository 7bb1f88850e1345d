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
//! (`tests/alloc/wire.rs` counts). Errors carry what was wrong and where; the JSON-RPC layer prefixes
//! "transaction {index}: ".
//!
//! ## Decisions
//!
//! - base58: a 64-bit-limb big-number decoder (`base58.rs`), not `bs58::decode().onto()`. The
//!   latter is allocation-free but converts one output byte per input character; folding ten
//!   characters per pass into u64 limbs is 60× faster on a transaction (table below).
//! - base64: a table decoder that accepts exactly what `base64`'s STANDARD engine accepts; the crate
//!   itself would do (its `decode_slice` is allocation-free and faster), but owning the decoder
//!   gives errors that name the character and its position.
//! - Signatures are base58-encoded for the bundle id with `five8::encode_64` (fixed-size,
//!   stack-only).
//!
//! ## Measured costs
//!
//! `cargo bench --bench decode -- --warm-up-time 1 --measurement-time 3` (criterion medians, this
//! 2-core AMD EPYC machine while quiet; the ratios come from the same run). Bundles: signed
//! transactions of 200–400 bytes (the first legacy, the rest v0 with lookup tables). The
//! Solana-crates path decodes to a `Vec`, deserializes with bincode, sanitizes, and builds the id
//! from `bs58` strings joined and hashed.
//!
//! | benchmark                               | relay    | Solana crates / crate          | ratio |
//! |-----------------------------------------|----------|--------------------------------|-------|
//! | 3-tx bundle, base64: decode+validate+id | 1.74 µs  | 6.89 µs                        | 4.0×  |
//! | 3-tx bundle, base58: decode+validate+id | 3.78 µs  | 174.8 µs                       | 46×   |
//! | 5-tx bundle, base58 / base64, relay     | 6.32 / 2.90 µs | (base58 through `bs58`: 285 µs) | 2.18× |
//! | validate one tx                         | 60 ns    | 1.34 µs (bincode+sanitize)     | 22×   |
//! | bundle id of 3 signatures               | 0.77 µs  | 13.7 µs (bs58 strings + sha2)  | 17.9× |
//! | decode one tx, base58                   | 0.89 µs  | 53.6 µs (`bs58` `onto`)        | 60×   |
//! | decode one tx, base64                   | 0.26 µs  | 0.20 µs (`base64` `decode_slice`) | 0.79× |
//!
//! On a 16-core Intel Xeon host the 5-tx bundle is 7.53 µs in base58 against 3.94 µs in base64
//! (1.91×). The base64 decoder is slower than the crate's, which decodes eight characters per
//! step; the bundle id (base58 encodings and SHA-256) is the largest part of the base64 path.

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
