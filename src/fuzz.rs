//! Fuzz bodies that span layers, as plain functions: `fuzz/fuzz_targets/` calls them under
//! libFuzzer and seeded proptests run them in `cargo test`. A body that exercises one layer
//! alone lives in that layer (`h2::fuzz`, `http1::fuzz`); this module sits above them all, so
//! none of them has to reach up.
//!
//! This is NOT part of the relay: nothing on the request path calls it.

use crate::grpc;
use crate::h2::{Config, Connection, Event, Field, frame};

/// A server's bytes into an HTTP/2 client with two requests in flight, delivered in chunks
/// whose sizes and timing come from the input; the client's outputs are drained as a reactor
/// would, and every finished stream is folded into its gRPC outcome.
pub fn h2_connection_receive(data: &[u8]) {
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
            if let Event::StreamEnded(id) = ev {
                if let Some(r) = c.response(id) {
                    let _ = grpc::outcome(&r, 1000);
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
