//! A sans-IO HTTP/2 client (RFC 9113) for gRPC: bytes and `now` in; bytes to send, events and
//! the next deadline out. The reactor feeds it; tests drive it against scripted and real peers.
//!
//! Read it in this order:
//! - [`frame`]: frame parsing and validation, frame writers.
//! - [`hpack`]: header compression (RFC 7541).
//! - [`config`]: the connection's limits, each with its reason.
//! - [`error`]: how streams and connections end, who caused it, whether a retry is safe.
//! - [`stream`]: the stream table and the RFC 9113 section 5.1 stream states.
//! - `transmit.rs`: the transmit buffer and its stream offsets.
//! - [`storage`]: where the transmit and receive buffers live (a thread's zeroed slab).
//! - [`discard`]: the thread's list that blocks of streams already gone are decoded into.
//! - [`conn`]: the connection state machine, flow control, keepalive and GOAWAY.
//! - [`fuzz`]: the fuzz bodies of the frame and HPACK decoders.
//!
//! It is NOT a server, NOT a general-purpose client: no server push (refused in SETTINGS), no
//! priorities (PRIORITY is read and ignored), no dynamic-table inserts on the encoding side,
//! and no socket or clock of its own. gRPC on top of it is [`crate::grpc`].

pub mod config;
pub mod conn;
pub mod discard;
pub mod error;
pub mod frame;
pub mod fuzz;
pub mod hpack;
pub mod storage;
pub mod stream;
mod transmit;

pub use config::Config;
pub use conn::{Connection, Event};
pub use error::{Blame, ConnError, StartError, StreamEnd};
pub use frame::Reason;
pub use hpack::HeaderList;
pub use stream::{Field, Fields, Response, StreamId};
