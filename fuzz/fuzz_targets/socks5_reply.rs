#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bundle_relay::egress::socks5::fuzz_handle_bytes(data);
});
