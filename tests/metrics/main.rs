//! Metrics, histogram logs and the admin endpoint's tests in one binary. One module per subject.

#[path = "../metrics_support/mod.rs"]
mod metrics_support;

mod admin_http;
mod hlog;
mod merge;
mod prometheus;
