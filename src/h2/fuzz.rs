//! The HTTP/2 decoders' fuzz bodies as plain functions: `fuzz/fuzz_targets/h2_frame_decoder.rs`
//! and `h2_hpack_decoder.rs` call them under libFuzzer, and a seeded proptest in
//! `tests/h2/fuzz_bodies.rs` runs them in `cargo test`. Each must never panic and never grow a
//! buffer, whatever the bytes.
//!
//! Only bodies within this layer live here; the connection driven with gRPC calls in flight
//! spans two layers and is in [`crate::fuzz`]. NOT part of the relay: nothing on the request
//! path calls them.

use super::frame::{self, HEADER_LEN, Head};
use super::hpack::{Decoder, HeaderList, huffman_decode};

/// Splits `data` into frames and validates each.
pub fn frame_decoder(mut data: &[u8]) {
    while data.len() >= HEADER_LEN {
        let mut head = Head::parse(data[..HEADER_LEN].try_into().expect("9 bytes"));
        let rest = &data[HEADER_LEN..];
        let len = (head.len as usize).min(rest.len());
        head.len = len as u32;
        if let Ok(frame::Frame::Settings { payload, .. }) = frame::decode(head, &rest[..len]) {
            for _ in frame::settings(payload) {}
        }
        data = &rest[len..];
    }
}

/// Decodes `data` as two header blocks (split at a position chosen by its first byte) with a
/// table size chosen by its second byte, so table state carries across blocks.
pub fn hpack_decoder(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let mut d = Decoder::new(data[1] as usize * 32);
    let mut list = HeaderList::new(4096, 64);
    let body = &data[2..];
    let split = (data[0] as usize).min(body.len());
    for block in [&body[..split], &body[split..]] {
        list.clear();
        let _ = d.decode(block, &mut list);
        assert!(list.list_size() <= 4096 + 32 * 64);
    }
    let mut out = [0u8; 512];
    let _ = huffman_decode(body, &mut out);
}
