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
/// table size chosen by its second byte, so table state carries across blocks. Beside it, a
/// second decoder takes the same blocks leniently into a list too small for most of them: where
/// the first succeeds, so does it, its list holds every field only if the block fit, and the
/// two tables stay the same.
pub fn hpack_decoder(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let mut d = Decoder::new(data[1] as usize * 32);
    let mut lenient = Decoder::new(data[1] as usize * 32);
    let mut list = HeaderList::new(4096, 64);
    let mut small = HeaderList::new(64, 4);
    let mut spill = HeaderList::new(4096, 64);
    let body = &data[2..];
    let split = (data[0] as usize).min(body.len());
    let mut in_step = true;
    for block in [&body[..split], &body[split..]] {
        list.clear();
        small.clear();
        let strict = d.decode(block, &mut list);
        assert!(list.list_size() <= 4096 + 32 * 64);
        let kept = lenient.decode_lenient(block, &mut small, &mut spill);
        if in_step && strict.is_ok() {
            let whole = kept.expect("a block the strict decoder takes, the lenient one takes");
            assert_eq!(whole, small.len() == list.len());
            assert_eq!(d.table_size(), lenient.table_size());
            for i in 0.. {
                let (a, b) = (d.table_entry(i), lenient.table_entry(i));
                assert_eq!(a, b);
                if a.is_none() {
                    break;
                }
            }
        } else {
            // A failed block leaves each table wherever its decoder stopped.
            in_step = false;
        }
    }
    let mut out = [0u8; 512];
    let _ = huffman_decode(body, &mut out);
}
