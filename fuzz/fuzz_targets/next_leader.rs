//! Differential: a GetNextScheduledLeader answer decodes by hand exactly as prost decodes it
//! (the body asserts that), whatever the bytes.
#![no_main]

use bundle_relay::relay::leader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    leader::fuzz_answer(data);
});
