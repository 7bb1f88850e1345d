//! What the bench's integration tests share, one module per peer they stand up:
//!
//! | module | what |
//! |---|---|
//! | `relay` | bundle-relay on loopback against bench-engine: its spec, waiting on its counters, bundles and a bounded load |
//! | `scenario` | the end-to-end scenario for either relay kind: every bundle once, byte-identical, never early, through a storm |
//! | `engine` | bench-engine alone: tonic and raw h2 clients from chosen source addresses |
//! | `baseline` | the baseline alone: hand-signed transfers, a keep-alive HTTP/1.1 client, a rate-limiting test engine |
//! | `tls` | a blocking socket driving the relay's sans-IO SOCKS5, TLS and HTTP/2 + gRPC layers, and throwaway PKI |
//!
//! Each test binary compiles all of it and uses a part.
#![allow(dead_code)]

pub mod baseline;
pub mod engine;
pub mod relay;
pub mod scenario;
pub mod tls;

// The root crate's tests skip (or, under CI, fail) on a missing tool the same way.
#[path = "../../../tests/process_support/installed.rs"]
mod installed;
#[allow(unused_imports)] // each test binary uses its own part
pub use installed::installed;

use std::time::{Duration, Instant};

use bundle_relay::jito::MAINNET_DOMAIN;

/// Polls `f` every `period` until it yields a value or `limit` has passed (then once more).
pub async fn poll<T>(
    limit: Duration,
    period: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(period).await;
    }
}

/// A region's production host name, `<region>.mainnet.block-engine.jito.wtf`.
pub fn engine_host(region: &str) -> String {
    format!("{region}.{MAINNET_DOMAIN}")
}
