//! Egress: how a connection leaves this host. From a local source address (each upstream socket
//! bound to its own, so the block engine counts it as its own (source IP, region) pair), or
//! through a SOCKS5 proxy whose CONNECT handshake runs before HTTP/2 (and TLS) start on the
//! tunnel; each proxy counts as its own source address for the limiter.
//!
//! `socks5` and `transport` are the sans-IO layers under HTTP/2
//! (tunnel, then TLS), `stack` is one pair's whole byte stack (those layers and its HTTP/2
//! connection, their storage kept across reconnects), `resolve` keeps each region's addresses
//! current, `local` says which addresses the kernel takes as this host's.

pub mod local;
pub mod resolve;
pub mod socks5;
pub mod stack;
pub mod transport;
