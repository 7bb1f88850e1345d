//! The `[tenants_from]` endpoint's answer as the poller reads it: HTTP head, a sized, chunked
//! or read-to-close body, then the tenants document's checks (the body asserts consistency).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bundle_relay::serve::fuzz_tenants_answer(data);
});
