//! Configuration's tests in one binary: loading and its errors, what a reload changes, and the
//! host addresses the embedded default sends from.

#[path = "../tls_support/mod.rs"]
mod tls_support;

mod host;
mod load;
mod reload_changes;
