//! Fuzz target bodies as plain functions: `fuzz/fuzz_targets/h2_*.rs` call them under
//! libFuzzer, and a seeded proptest in `tests/h2_fuzz_bodies.rs` runs them in `cargo test`.
//! Each must never panic and never grow a buffer, whatever the bytes.

use super::conn::{Config, Connection, Field};
use super::frame::{self, HEADER_LEN, Head};
use super::hpack::{Decoder, HeaderList};

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
    let _ = super::hpack::huffman_decode(body, &mut out);
}

/// A server's bytes into a client with two requests in flight, delivered in chunks whose sizes
/// and timing come from the input; the client's outputs are drained as a reactor would.
pub fn connection_receive(data: &[u8]) {
    let cfg = Config {
        stream_slots: 4,
        transmit_bytes_max: 32 * 1024,
        ..Config::default()
    };
    let tx_max = cfg.transmit_bytes_max;
    let mut c = Connection::new(cfg, 0);
    let fields = [
        Field {
            name: b":method",
            value: b"POST",
            sensitive: false,
        },
        Field {
            name: b":path",
            value: b"/x",
            sensitive: false,
        },
    ];
    let _ = c.start_request(0, &fields, Some(5_000_000_000), |b| {
        b[..3000].fill(7);
        Some(3000)
    });
    let _ = c.start_request(0, &fields, None, |_| Some(0));
    // A valid SETTINGS first so the input reaches past the preface check.
    let mut settings = [0u8; 9];
    frame::write_settings(&mut settings, &[]).expect("fits");
    c.handle_bytes(0, &settings);
    let mut now = 0u64;
    let mut rest = data;
    while !rest.is_empty() {
        let take = (rest[0] as usize % 64 + 1).min(rest.len());
        now += rest[0] as u64 * 10_000_000;
        c.handle_bytes(now, &rest[..take]);
        rest = &rest[take..];
        assert!(c.poll_transmit().len() <= tx_max);
        if take % 3 == 0 {
            let n = c.poll_transmit().len();
            c.advance_transmit(n);
        }
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        while let Some(ev) = c.poll_event() {
            if let super::conn::Event::StreamEnded(id) = ev {
                if let Some(r) = c.response(id) {
                    let _ = crate::grpc::outcome(&r, 1000);
                }
                c.release(id);
            }
        }
        if c.can_start() && take % 5 == 0 {
            let _ = c.start_request(now, &fields, None, |_| Some(0));
        }
    }
    c.handle_transport_closed();
    while c.poll_event().is_some() {}
}
