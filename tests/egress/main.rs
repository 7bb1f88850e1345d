//! The egress client pieces' tests in one binary: the SOCKS5 client and its fuzz body, the TLS
//! client session. The counting allocator is this binary's (per thread).

#[path = "../counting_alloc/mod.rs"]
mod counting_alloc;
#[path = "../tls_support/mod.rs"]
mod tls_support;

mod local_routes_fuzz;
mod socks5_client;
mod socks5_fuzz;
mod tls_session;
