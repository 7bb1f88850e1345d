#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bundle_relay::egress::local::fuzz_parse(data);
});
