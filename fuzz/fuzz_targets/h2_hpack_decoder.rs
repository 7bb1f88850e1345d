#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bundle_relay::h2::fuzz::hpack_decoder(data);
});
