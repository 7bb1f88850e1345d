//! How a connection leaves this host: from a local source address, or through a SOCKS5 proxy
//! whose CONNECT handshake runs before HTTP/2 (and TLS) start on the tunnel. Each proxy counts
//! as its own source address for the limiter.

pub mod socks5;
