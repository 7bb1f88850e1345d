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

/// Whether `command` (answering `version_arg`) is installed. CI installs it (`.ci/run`, from
/// Debian's `package`): missing there is a broken CI, not a reason to skip; elsewhere the test
/// says so and passes.
pub fn installed(command: &str, version_arg: &str, package: &str) -> bool {
    let found = std::process::Command::new(command)
        .arg(version_arg)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true but {command} is missing: .ci/run installs Debian's {package} package"
        );
        eprintln!("skipped: {command} is not installed (apt-get install {package})");
    }
    found
}

/// A region's production host name, `<region>.mainnet.block-engine.jito.wtf`.
pub fn engine_host(region: &str) -> String {
    format!("{region}.{MAINNET_DOMAIN}")
}
