//! A sans-IO HTTP/2 client (RFC 9113) for gRPC: bytes and `now` in; bytes to send, events and
//! the next deadline out. The reactor feeds it; tests drive it against scripted and real peers.
//!
//! - [`frame`]: frame parsing and validation, frame writers.
//! - [`hpack`]: header compression (RFC 7541).
//! - [`conn`]: the connection state machine, streams in a fixed table, flow control.

pub mod conn;
pub mod frame;
pub mod fuzz;
pub mod hpack;

pub use conn::{Blame, Config, ConnError, Connection, Event, StartError, StreamEnd, StreamId};
pub use frame::Reason;
