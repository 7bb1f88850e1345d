//! Steady-state paths allocate nothing: one binary under a counting global allocator (per thread,
//! so tests running side by side do not disturb each other's counts). One module per layer.

#[path = "../counting_alloc/mod.rs"]
mod counting_alloc;
#[path = "../h2_support/mod.rs"]
mod h2_support;
#[path = "../relay_path_support/mod.rs"]
mod relay_path_support;
#[path = "../tls_support/mod.rs"]
mod tls_support;
#[path = "../wire_support/mod.rs"]
mod wire_support;

mod h2_steady_state;
mod http1;
mod jsonrpc;
mod limiter;
mod metrics;
mod relay_quota;
mod relay_steady_state;
mod tls_session;
mod wire;
