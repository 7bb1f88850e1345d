//! bench-engine's tests in one binary: its endpoints, validation, rate limit, auth, bundle
//! statuses, scheduled faults, and reaching it through TLS and SOCKS5. One module per subject.

#[path = "../support/mod.rs"]
mod support;

mod auth;
mod bundle_statuses;
mod endpoints;
mod faults;
mod rate_limit;
mod socks5;
mod tls;
mod validation;
