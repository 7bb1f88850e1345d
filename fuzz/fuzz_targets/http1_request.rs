#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bundle_relay::http1::fuzz::request(data);
});
