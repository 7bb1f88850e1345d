//! Steady-state calls allocate nothing: a counting global allocator watches a client run
//! SendBundle calls against scripted replies, after a warm-up.

use crate::counting_alloc;
use crate::h2_support;
use counting_alloc::allocations;
use h2_support::{block, push_frame};

use bundle_relay::grpc::{self, CallConfig, Method, Outcome};
use bundle_relay::h2::frame;
use bundle_relay::h2::{Config, Connection, Event};

const CALLS: u32 = 1_000;

#[test]
fn steady_state_send_bundle_calls_allocate_nothing() {
    let mut c = Connection::new(Config::default(), 0);
    let mut call = CallConfig::new("https", "ny.mainnet.block-engine.jito.wtf".into());
    call.authorization = Some("Bearer token".into());
    let n = c.poll_transmit().len();
    c.advance_transmit(n);
    let mut settings = [0u8; 9];
    frame::write_settings(&mut settings, &[]).unwrap();
    c.handle_bytes(0, &settings);
    c.handle_bytes(0, &[0, 0, 0, frame::SETTINGS, frame::FLAG_ACK, 0, 0, 0, 0]);

    // One reply, with its stream id patched per call.
    let uuid = b"\x0a\x24123e4567-e89b-12d3-a456-426614174000";
    let mut reply = Vec::new();
    let mut id_at = Vec::new();
    id_at.push(push_frame(
        &mut reply,
        frame::HEADERS,
        frame::FLAG_END_HEADERS,
        &block(&[(b":status", b"200"), (b"content-type", b"application/grpc")]),
    ));
    let mut msg = vec![0, 0, 0, 0, uuid.len() as u8];
    msg.extend_from_slice(uuid);
    id_at.push(push_frame(&mut reply, frame::DATA, 0, &msg));
    id_at.push(push_frame(
        &mut reply,
        frame::HEADERS,
        frame::FLAG_END_HEADERS | frame::FLAG_END_STREAM,
        &block(&[(b"grpc-status", b"0")]),
    ));
    let txs: Vec<Vec<u8>> = (0..5).map(|i| vec![i as u8; 1232]).collect();
    let tx_refs: Vec<&[u8]> = txs.iter().map(|t| t.as_slice()).collect();
    // The server credits our connection window with each request body it reads.
    let mut scratch = vec![0; 8192];
    let body_len =
        grpc::PREFIX_LEN + grpc::encode_send_bundle(tx_refs.iter().copied(), &mut scratch).unwrap();
    let mut credit = [0u8; 13];
    frame::write_window_update(&mut credit, 0, body_len as u32).unwrap();
    reply.splice(0..0, credit);
    for at in &mut id_at {
        *at += credit.len();
    }

    let one_call = |i: u32, c: &mut Connection, reply: &mut Vec<u8>| {
        let now = i as u64 * 1_000_000;
        let id = grpc::start_call(c, &call, now, Method::SendBundle, Some(2_000), |b| {
            grpc::encode_send_bundle(tx_refs.iter().copied(), b)
        })
        .unwrap();
        let n = c.poll_transmit().len();
        assert!(n > 6_000, "headers and the whole bundle are queued");
        c.advance_transmit(n);
        for &at in &id_at {
            reply[at..at + 4].copy_from_slice(&id.0.to_be_bytes());
        }
        c.handle_bytes(now, reply);
        assert_eq!(c.poll_event(), Some(Event::StreamEnded(id)));
        let r = c.response(id).unwrap();
        match grpc::outcome(&r, 1000) {
            Outcome::Ok(m) => assert_eq!(
                grpc::send_bundle_uuid(m),
                Some("123e4567-e89b-12d3-a456-426614174000")
            ),
            other => panic!("{other:?}"),
        }
        c.release(id);
        // Window updates the client queued.
        let n = c.poll_transmit().len();
        c.advance_transmit(n);
    };
    for i in 0..10 {
        one_call(i, &mut c, &mut reply);
    }
    let probe = allocations();
    drop(std::hint::black_box(vec![1u8; 10]));
    assert!(allocations() > probe, "the counter sees allocations");
    let before = allocations();
    for i in 10..10 + CALLS {
        one_call(i, &mut c, &mut reply);
    }
    assert_eq!(
        allocations() - before,
        0,
        "allocations in {CALLS} steady-state calls"
    );
}
