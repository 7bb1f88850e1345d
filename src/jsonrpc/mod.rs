//! Jito's JSON-RPC, read and answered without a DOM and without allocating. It is NOT a
//! general JSON library: it checks a whole document but keeps only what a Jito request needs,
//! and it decodes no transaction (that is `wire`'s).
//!
//! Read it in this order: `limits.rs`, `json_str.rs` (strings borrowed from the body),
//! `request.rs` (what a valid request is), `error.rs`, `runs.rs` (where a string's plain
//! bytes end), `scan.rs` (the JSON scanner), `parse.rs` (the request parser), `write.rs`
//! (answers), `reply.rs` (an engine's answer to a forwarded `sendTransaction`, and that
//! request), `status_reply.rs` (the bundle-status queries the relay forwards, and the engine's
//! answers to them).
//!
//! [`parse_request`] takes one HTTP body. One strict RFC 8259 pass checks the whole document
//! (any invalid JSON is -32700 with the byte offset and what was expected) while it notes the
//! top-level members `jsonrpc`, `id`, `method` and `params`; a second, structure-only walk over
//! the already-checked `params` shape-checks them for the method (-32602 naming the problem and
//! the index, counting from 0). Strings stay in the body as [`JsonStr`]; up to five of them
//! sit in a fixed array ([`StrList`]). Errors ([`RpcError`]) carry kinds, numbers and borrowed
//! slices, and render their message only when written.
//!
//! Request rules beyond JSON-RPC 2.0:
//! - `id` may be a number, string or null and is echoed byte for byte (its raw JSON text, at
//!   most [`ID_LEN_MAX`] bytes). A request **without an id is answered with `"id":null`**:
//!   JSON-RPC would call it a notification and answer nothing, but a bot sending a bundle
//!   always wants its bundle id back.
//! - A batch (top-level array) is refused with -32600: one request per HTTP request.
//! - A top-level member given twice is -32600 naming it; unknown top-level members are ignored,
//!   as are unknown option keys (Solana's `skipPreflight` and friends).
//!
//! Responses are written by [`write_result_str`], [`write_result_raw`] and [`write_error`] into
//! the caller's buffer in Solana's field order, `{"jsonrpc":"2.0","result":…,"id":…}`.
//!
//! Measured cost: `cargo bench --bench jsonrpc -- --warm-up-time 1 --measurement-time 3`
//! (benches/jsonrpc.rs), a 3-transaction base64 sendBundle of 1.6 KB, all three paths in the
//! same run; criterion point estimates in µs. The build machine had 2 cores at a load average
//! of 12 during every run, so run-to-run noise is ±40%: the runs are listed, not averaged.
//!
//! | run | `parse_request` | serde_json typed structs (owned `String`s) | serde_json `Value` | typed / ours |
//! |---|---|---|---|---|
//! | 1 | 2.62 | 3.39 | 5.39 | 1.29 |
//! | 2 | 4.25 | 3.21 | 3.34 | 0.75 |
//! | 3 | 2.20 | 3.00 | 3.98 | 1.36 |
//! | 4 | 2.45 | 2.12 | 3.13 | 0.87 |
//!
//! What the table supports: on this machine the scanner is on par with serde_json's typed path
//! while allocating nothing (tests/alloc/jsonrpc.rs), where the typed path allocates a string
//! per member and transaction and a `Vec` per request. It reads the params twice (a checking
//! pass over the whole body, then a structure-only walk over `params`); a clean speed ratio
//! needs a quiet machine, so rerun there before drawing more from it.

mod error;
mod json_str;
mod limits;
mod parse;
mod reply;
mod request;
mod runs;
mod scan;
mod status_reply;
mod write;

pub use error::{
    ERROR_CAUSE_LEN_MAX, ErrorKind, Expected, InlineText, JsonType, ListOf, QUOTED_CHARS_MAX,
    RpcError,
};
pub use json_str::{BufferTooSmall, Bytes, JsonStr};
pub use limits::{DEPTH_MAX, ID_LEN_MAX, MEMBERS_MAX, STATUS_IDS_MAX, STR_LIST_LEN_MAX};
pub use parse::{parse_request, parse_request_named};
pub use reply::{Reply, fuzz_reply, parse_reply, send_transaction_len, write_send_transaction};
pub use request::{Call, Id, Method, Request, StrList};
pub use status_reply::{
    InflightEntry, STATUS_QUERY_LEN_MAX, StatusReply, for_each_element, fuzz_status_reply,
    inflight_entry, parse_status_reply, write_status_query,
};
pub use write::{
    ERROR_RESPONSE_LEN_MAX, Escaping, Overflow, Writer, write_error, write_result_raw,
    write_result_str,
};
