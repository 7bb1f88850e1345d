//! Differential: an engine's JSON-RPC answer to a forwarded bundle-status query
//! (getBundleStatuses, getInflightBundleStatuses) reads as serde_json reads it (the body
//! asserts that), whatever the bytes.
#![no_main]

use bundle_relay::jsonrpc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    jsonrpc::fuzz_status_reply(data);
});
