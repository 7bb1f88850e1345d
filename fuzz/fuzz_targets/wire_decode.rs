//! Differential: base58 and base64 decoding must accept exactly what the `bs58` crate and
//! base64's STANDARD engine accept (within the relay's caps) and produce the same bytes.
#![no_main]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bundle_relay::wire::{Encoding, BASE58_LEN_MAX, BASE64_LEN_MAX, PACKET_DATA_SIZE, decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut out = [0u8; PACKET_DATA_SIZE];

    let ours = decode(Encoding::Base58, data, &mut out).map(|n| out[..n].to_vec());
    let theirs = if data.len() <= BASE58_LEN_MAX {
        bs58::decode(data)
            .into_vec()
            .ok()
            .filter(|v| v.len() <= PACKET_DATA_SIZE)
    } else {
        None
    };
    assert_eq!(ours.ok(), theirs, "base58");

    let ours = decode(Encoding::Base64, data, &mut out).map(|n| out[..n].to_vec());
    let theirs = STANDARD
        .decode(data)
        .ok()
        .filter(|v| data.len() <= BASE64_LEN_MAX && v.len() <= PACKET_DATA_SIZE);
    assert_eq!(ours.ok(), theirs, "base64");
});
