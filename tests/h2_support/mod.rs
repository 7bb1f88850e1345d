//! Building an HTTP/2 peer's replies byte by byte, for tests that script the engine's side.
#![allow(dead_code)]

use bundle_relay::h2::frame;
use bundle_relay::h2::hpack::Encoder;

/// Appends a frame on stream 1 to `out` and returns the offset of its stream id, so a test can
/// patch the id per call.
pub fn push_frame(out: &mut Vec<u8>, kind: u8, flags: u8, payload: &[u8]) -> usize {
    let at = out.len();
    out.resize(at + 9 + payload.len(), 0);
    frame::write(&mut out[at..], kind, flags, 1, payload).unwrap();
    at + 5
}

/// An HPACK block of literal fields.
pub fn block(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = vec![0; 512];
    let mut pos = 0;
    for (n, v) in fields {
        Encoder::encode_field(n, v, false, &mut out, &mut pos).unwrap();
    }
    out.truncate(pos);
    out
}
