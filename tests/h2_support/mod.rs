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

/// The engine's side of the HTTP/2 start: its SETTINGS, a generous window, the ACK of ours and
/// of the PING a new connection sends.
pub fn engine_hello() -> Vec<u8> {
    let mut h = vec![0u8; 9 + 13 + 9 + 17];
    frame::write_settings(&mut h, &[]).unwrap();
    frame::write_window_update(&mut h[9..], 0, 1 << 30).unwrap();
    h[22..31].copy_from_slice(&[0, 0, 0, frame::SETTINGS, frame::FLAG_ACK, 0, 0, 0, 0]);
    // The answer to the PING a new connection sends (its first: payload 1).
    frame::write_ping(&mut h[31..], true, 1u64.to_be_bytes()).unwrap();
    h
}

/// The engine's answer on `stream`: HEADERS with `:status` 200 and `content_type`, one DATA
/// of `data`, then gRPC's OK trailers (`grpc`) or the end of the stream with the DATA.
pub fn data_reply(stream: u32, content_type: &[u8], data: &[u8], grpc: bool) -> Vec<u8> {
    let mut reply = Vec::new();
    let mut at = vec![push_frame(
        &mut reply,
        frame::HEADERS,
        frame::FLAG_END_HEADERS,
        &block(&[(b":status", b"200"), (b"content-type", content_type)]),
    )];
    let end = if grpc { 0 } else { frame::FLAG_END_STREAM };
    at.push(push_frame(&mut reply, frame::DATA, end, data));
    if grpc {
        at.push(push_frame(
            &mut reply,
            frame::HEADERS,
            frame::FLAG_END_HEADERS | frame::FLAG_END_STREAM,
            &block(&[(b"grpc-status", b"0")]),
        ));
    }
    for a in at {
        reply[a..a + 4].copy_from_slice(&stream.to_be_bytes());
    }
    reply
}

/// The engine's OK answer on `stream`.
pub fn ok_reply(stream: u32) -> Vec<u8> {
    let uuid = b"\x0a\x02id";
    let mut msg = vec![0, 0, 0, 0, uuid.len() as u8];
    msg.extend_from_slice(uuid);
    data_reply(stream, b"application/grpc", &msg, true)
}

/// The engine's Trailers-Only error answer on `stream`: gRPC status `code` with `message`
/// (percent-encoded as gRPC asks).
pub fn error_reply(stream: u32, code: u32, message: &str) -> Vec<u8> {
    let mut encoded = String::new();
    for b in message.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    let code = code.to_string();
    let mut reply = Vec::new();
    let at = push_frame(
        &mut reply,
        frame::HEADERS,
        frame::FLAG_END_HEADERS | frame::FLAG_END_STREAM,
        &block(&[
            (b":status", b"200"),
            (b"content-type", b"application/grpc"),
            (b"grpc-status", code.as_bytes()),
            (b"grpc-message", encoded.as_bytes()),
        ]),
    );
    reply[at..at + 4].copy_from_slice(&stream.to_be_bytes());
    reply
}

/// An engine on an ephemeral loopback port that answers every connection's HTTP/2 start
/// ([`engine_hello`]) and then only reads: enough for a relay's pairs to join rotation.
pub fn hello_engine() -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let _ = c.write_all(&engine_hello());
                let mut buf = [0u8; 4096];
                while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}
