//! Egress: how a connection leaves this host. From a local source address (each upstream socket
//! bound to its own, so the block engine counts it as its own (source IP, region) pair), or
//! through a SOCKS5 proxy whose CONNECT handshake runs before HTTP/2 (and TLS) start on the
//! tunnel; each proxy counts as its own source address for the limiter.

pub mod socket;
pub mod socks5;
