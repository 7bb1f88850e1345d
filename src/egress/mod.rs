//! Egress: the sockets upstream connections leave through, each bound to its own source
//! address so the block engine counts it as its own (source IP, region) pair.

pub mod socket;
//! How a connection leaves this host: from a local source address, or through a SOCKS5 proxy
//! whose CONNECT handshake runs before HTTP/2 (and TLS) start on the tunnel. Each proxy counts
//! as its own source address for the limiter.

pub mod socks5;
