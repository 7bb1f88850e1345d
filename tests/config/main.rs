//! Configuration's tests in one binary: loading and its errors, and what a reload changes.

#[path = "../tls_support/mod.rs"]
mod tls_support;

mod load;
mod reload_changes;
