//! gRPC unary calls over [`crate::h2`]: request headers and the 5-byte message prefix out,
//! and every reply (or its absence) folded into one [`Outcome`] the retry logic acts on. It is
//! NOT a general gRPC client: unary calls only, no compression, no streaming, and no retry of
//! its own (the dispatcher decides from the [`Outcome`]).
//!
//! Read it in this order: `status.rs` (codes and messages), `call.rs` (starting a call),
//! `outcome.rs` (what a call came to), `message.rs` (the searcher messages), `protowire.rs`
//! (the wire format read by hand, for the answers decoded on a reactor).
//!
//! SendBundle is encoded by hand straight from the transactions' wire bytes into the stream's
//! send buffer ([`encode_send_bundle`]); a test checks it byte for byte against prost. No
//! function here allocates.

mod call;
mod message;
mod outcome;
pub mod protowire;
mod status;

pub use call::{CallConfig, Method, PREFIX_LEN, RETRY_AFTER_MS_DEFAULT, start_call};
pub use message::{encode_prost, encode_send_bundle, send_bundle_uuid};
pub use outcome::{
    Outcome, RETRY_AFTER_MS_MAX, outcome, reply_code, retry_after_from_message,
    retry_after_from_metadata, retry_after_said,
};
pub use status::{CODE_NAMES, Code, MESSAGE_SCAN_BYTES_MAX, StatusMessage, percent_decode};
