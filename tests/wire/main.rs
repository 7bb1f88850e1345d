//! The wire layer's tests in one binary: transaction strings decoded and validated, bundle ids,
//! bundles decoded into arena slots. One module per subject.

#[path = "../wire_support/mod.rs"]
mod wire_support;

mod bundle_decode;
mod bundle_id;
mod decode;
mod tx_diff;
mod tx_rules;
