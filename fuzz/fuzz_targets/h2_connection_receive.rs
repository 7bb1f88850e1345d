#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bundle_relay::fuzz::h2_connection_receive(data);
});
