//! The HTTP/2 client and gRPC calls against a scripted server in memory with simulated time:
//! the protocol rules, flow control, GOAWAY, and a misbehaving peer that must end in the right
//! error, never a panic or an unbounded buffer.

use bundle_relay::grpc::{self, CallConfig, Code, Method, Outcome};
use bundle_relay::h2::frame::{self, Head, PREFACE, Reason};
use bundle_relay::h2::hpack::{Decoder, Encoder, HeaderList};
use bundle_relay::h2::{
    Config, ConnError, Connection, Event, Field, StartError, StreamEnd, StreamId,
};

const MS: u64 = 1_000_000;

#[derive(Debug, Clone)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// The server side, written by hand: frames out as bytes, the client's frames parsed back.
struct Peer {
    preface_seen: bool,
    buf: Vec<u8>,
    decoder: Decoder,
}

impl Peer {
    fn new() -> Self {
        Peer {
            preface_seen: false,
            buf: Vec::new(),
            decoder: Decoder::new(4096),
        }
    }

    /// Everything the client has queued, as frames.
    fn read(&mut self, c: &mut Connection) -> Vec<Frame> {
        let out = c.poll_transmit().to_vec();
        c.advance_transmit(out.len());
        self.buf.extend_from_slice(&out);
        if !self.preface_seen && self.buf.len() >= PREFACE.len() {
            assert_eq!(&self.buf[..PREFACE.len()], PREFACE);
            self.buf.drain(..PREFACE.len());
            self.preface_seen = true;
        }
        let mut frames = Vec::new();
        while self.buf.len() >= 9 {
            let h = Head::parse(self.buf[..9].try_into().unwrap());
            if self.buf.len() < 9 + h.len as usize {
                break;
            }
            let payload = self.buf[9..9 + h.len as usize].to_vec();
            self.buf.drain(..9 + h.len as usize);
            frames.push(Frame {
                kind: h.kind,
                flags: h.flags,
                stream: h.stream,
                payload,
            });
        }
        frames
    }

    fn decode_headers(&mut self, block: &[u8]) -> Vec<(String, String)> {
        let mut l = HeaderList::new(8192, 64);
        self.decoder.decode(block, &mut l).unwrap();
        l.iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into(),
                    String::from_utf8_lossy(v).into(),
                )
            })
            .collect()
    }
}

fn raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0; 9 + payload.len()];
    frame::write(&mut v, kind, flags, stream, payload).unwrap();
    v
}

fn settings(values: &[(u16, u32)]) -> Vec<u8> {
    let mut v = vec![0; 9 + 6 * values.len()];
    frame::write_settings(&mut v, values).unwrap();
    v
}

fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = vec![0; 4096];
    let mut pos = 0;
    for (n, v) in fields {
        Encoder::encode_field(n.as_bytes(), v.as_bytes(), false, &mut out, &mut pos).unwrap();
    }
    out.truncate(pos);
    out
}

fn headers(stream: u32, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
    let flags = frame::FLAG_END_HEADERS
        | if end_stream {
            frame::FLAG_END_STREAM
        } else {
            0
        };
    raw(frame::HEADERS, flags, stream, &block(fields))
}

fn data(stream: u32, bytes: &[u8], end_stream: bool) -> Vec<u8> {
    raw(
        frame::DATA,
        if end_stream {
            frame::FLAG_END_STREAM
        } else {
            0
        },
        stream,
        bytes,
    )
}

fn grpc_message(msg: &[u8]) -> Vec<u8> {
    let mut v = vec![0];
    v.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    v.extend_from_slice(msg);
    v
}

/// A full gRPC OK reply.
fn reply_ok(stream: u32, msg: &[u8]) -> Vec<u8> {
    let mut v = headers(
        stream,
        &[(":status", "200"), ("content-type", "application/grpc")],
        false,
    );
    v.extend(data(stream, &grpc_message(msg), false));
    v.extend(headers(stream, &[("grpc-status", "0")], true));
    v
}

fn call_cfg() -> CallConfig {
    CallConfig::new("http", "engine.test".into())
}

/// `method` started on `c` with [`call_cfg`], a 1.5 s deadline and an empty message.
fn start(c: &mut Connection, method: Method) -> Result<StreamId, StartError> {
    grpc::start_call(c, &call_cfg(), 0, method, Some(1500), |_| Some(0))
}

/// A connection past the SETTINGS exchange.
fn open(cfg: Config, peer_settings: &[(u16, u32)]) -> (Connection, Peer) {
    let mut c = Connection::new(cfg, 0);
    let mut p = Peer::new();
    p.read(&mut c);
    c.handle_bytes(0, &settings(peer_settings));
    c.handle_bytes(0, &raw(frame::SETTINGS, frame::FLAG_ACK, 0, &[]));
    p.read(&mut c);
    (c, p)
}

fn get(c: &mut Connection, body: &[u8]) -> Result<StreamId, StartError> {
    let f = [
        Field {
            name: b":method",
            value: b"POST",
            sensitive: false,
        },
        Field {
            name: b":scheme",
            value: b"http",
            sensitive: false,
        },
        Field {
            name: b":path",
            value: b"/x",
            sensitive: false,
        },
        Field {
            name: b":authority",
            value: b"t",
            sensitive: false,
        },
    ];
    c.start_request(0, &f, None, |b| {
        b[..body.len()].copy_from_slice(body);
        Some(body.len())
    })
}

fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn end_of(c: &Connection, id: StreamId) -> StreamEnd {
    c.response(id).expect("stream ended").end
}

fn closed_with(c: &Connection) -> ConnError {
    assert!(c.is_closed());
    c.error().unwrap()
}

fn goaway_code(frames: &[Frame]) -> Option<Reason> {
    frames
        .iter()
        .find(|f| f.kind == frame::GOAWAY)
        .map(|f| Reason(u32::from_be_bytes(f.payload[4..8].try_into().unwrap())))
}

// ---- preface and SETTINGS ----

#[test]
fn preface_then_settings_with_push_disabled_and_our_limits() {
    let mut c = Connection::new(Config::default(), 0);
    let mut p = Peer::new();
    let frames = p.read(&mut c);
    let s = &frames[0];
    assert_eq!(s.kind, frame::SETTINGS);
    let values: Vec<(u16, u32)> = frame::settings(&s.payload).collect();
    assert!(values.contains(&(frame::SETTINGS_ENABLE_PUSH, 0)));
    assert!(values.contains(&(
        frame::SETTINGS_INITIAL_WINDOW_SIZE,
        Config::default().stream_window
    )));
    assert!(values.contains(&(
        frame::SETTINGS_MAX_HEADER_LIST_SIZE,
        Config::default().header_list_bytes_max as u32
    )));
    // The connection window is raised at once.
    assert_eq!(frames[1].kind, frame::WINDOW_UPDATE);
}

#[test]
fn peer_settings_are_acked() {
    let mut c = Connection::new(Config::default(), 0);
    let mut p = Peer::new();
    p.read(&mut c);
    c.handle_bytes(0, &settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 7)]));
    let f = p.read(&mut c);
    assert!(
        f.iter()
            .any(|f| f.kind == frame::SETTINGS && f.flags == frame::FLAG_ACK)
    );
    assert_eq!(c.peer_streams_max(), 7);
}

#[test]
fn our_settings_unacked_past_the_timeout_close_with_settings_timeout() {
    let cfg = Config::default();
    let mut c = Connection::new(cfg.clone(), 0);
    let mut p = Peer::new();
    p.read(&mut c);
    c.handle_bytes(0, &settings(&[]));
    let deadline = c.poll_timeout().unwrap();
    assert_eq!(deadline, cfg.settings_ack_timeout_ms * MS);
    c.handle_timeout(deadline - 1);
    assert!(!c.is_closed());
    c.handle_timeout(deadline);
    assert_eq!(
        closed_with(&c),
        ConnError::Timeout {
            what: "SETTINGS not acknowledged"
        }
    );
    assert_eq!(goaway_code(&p.read(&mut c)), Some(Reason::SETTINGS_TIMEOUT));
}

#[test]
fn first_frame_other_than_settings_is_a_protocol_error() {
    let mut c = Connection::new(Config::default(), 0);
    c.handle_bytes(0, &raw(frame::PING, 0, 0, &[0; 8]));
    assert!(matches!(
        closed_with(&c),
        ConnError::PeerProtocol {
            reason: Reason::PROTOCOL_ERROR,
            ..
        }
    ));
}

#[test]
fn server_enabling_push_is_a_protocol_error() {
    let mut c = Connection::new(Config::default(), 0);
    c.handle_bytes(0, &settings(&[(frame::SETTINGS_ENABLE_PUSH, 1)]));
    assert!(matches!(
        closed_with(&c),
        ConnError::PeerProtocol {
            reason: Reason::PROTOCOL_ERROR,
            ..
        }
    ));
}

// ---- a request and its reply ----

/// The header list the peer decodes for a call of the method at `path` to `engine.test`,
/// with its `grpc-timeout` and, when there is one, its authorization last.
fn request_fields(path: &str, timeout: &str, authorization: Option<&str>) -> Vec<(String, String)> {
    let fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "engine.test"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("grpc-timeout", timeout),
    ];
    fields
        .iter()
        .copied()
        .chain(authorization.map(|a| ("authorization", a)))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn request_headers_body_and_reply_with_trailers() {
    let (mut c, mut p) = open(Config::default(), &[]);
    let id = start(&mut c, Method::GetTipAccounts).unwrap();
    assert_eq!(id, StreamId(1));
    let f = p.read(&mut c);
    assert_eq!(f[0].kind, frame::HEADERS);
    let h = p.decode_headers(&f[0].payload);
    let want = request_fields("/searcher.SearcherService/GetTipAccounts", "1500m", None);
    assert_eq!(h, want);
    assert_eq!(f[1].kind, frame::DATA);
    assert_eq!(f[1].payload, vec![0, 0, 0, 0, 0]);
    assert_eq!(f[1].flags, frame::FLAG_END_STREAM);
    c.handle_bytes(0, &reply_ok(1, b"\x0a\x03abc"));
    assert_eq!(events(&mut c), vec![Event::StreamEnded(id)]);
    let r = c.response(id).unwrap();
    assert_eq!(grpc::outcome(&r, 1000), Outcome::Ok(b"\x0a\x03abc"));
    c.release(id);
    assert_eq!(c.active_streams(), 0);
}

/// Each method's repeated fields are encoded once per connection config: every method's
/// block still decodes to its own path, in order, with its timeout and authorization after.
#[test]
fn every_methods_header_block_decodes_to_its_own_fields() {
    let (mut c, mut p) = open(Config::default(), &[]);
    let mut cfg = call_cfg();
    cfg.authorization = Some("Bearer t0k".into());
    for m in Method::ALL {
        grpc::start_call(&mut c, &cfg, 0, m, Some(250), |_| Some(0)).unwrap();
        let f = p.read(&mut c);
        assert_eq!(f[0].kind, frame::HEADERS);
        let h = p.decode_headers(&f[0].payload);
        let want = request_fields(m.path(), "250m", Some("Bearer t0k"));
        assert_eq!(h, want, "{m:?}");
    }
}

/// A server that lowers SETTINGS_HEADER_TABLE_SIZE (below HPACK's 4,096) must see our next
/// header block start with a dynamic table size update (RFC 7541 section 4.2; nghttp2, in
/// front of many servers, refuses the block otherwise): one, to 0 (our encoder never indexes),
/// on the first block after each change and on none after.
#[test]
fn a_lowered_header_table_size_is_acknowledged_at_the_start_of_the_next_header_block() {
    let (mut c, mut p) = open(Config::default(), &[(frame::SETTINGS_HEADER_TABLE_SIZE, 0)]);
    let mut firsts = Vec::new();
    for _ in 0..2 {
        get(&mut c, b"").unwrap();
        let f = p.read(&mut c);
        assert_eq!(f[0].kind, frame::HEADERS);
        firsts.push(f[0].payload[0]);
        let h = p.decode_headers(&f[0].payload);
        assert_eq!(h[0], (":method".into(), "POST".into()), "{h:?}");
    }
    assert_eq!(firsts[0], 0x20, "a size update to 0 first");
    assert_ne!(firsts[1] & 0xe0, 0x20, "and only once");

    // Lowered again after a raise: told again.
    for size in [8192, 256] {
        c.handle_bytes(0, &settings(&[(frame::SETTINGS_HEADER_TABLE_SIZE, size)]));
    }
    get(&mut c, b"").unwrap();
    let f = p.read(&mut c);
    let h = f.iter().find(|f| f.kind == frame::HEADERS).unwrap();
    assert_eq!(h.payload[0], 0x20, "told again after the next change");

    // A peer that never sets it gets no update.
    let (mut c, mut p) = open(Config::default(), &[]);
    get(&mut c, b"").unwrap();
    let f = p.read(&mut c);
    assert_ne!(f[0].payload[0] & 0xe0, 0x20);
}

/// A load balancer's error reply with more header bytes than the relay keeps (a long cookie,
/// a report-to policy), the one it could not keep added to the HPACK table: the call ends as
/// the reply's status says (503: never processed, sent again), the connection stays up, and
/// the table stays in step (the next reply names that header by its index).
#[test]
fn a_reply_with_more_header_bytes_than_kept_ends_its_call_and_not_the_connection() {
    let cfg = bundle_relay::relay::upstream_h2_config();
    let (mut c, _p) = open(cfg, &[]);
    let first = start(&mut c, Method::SendBundle).unwrap();
    // :status 503 (a literal value for static name 8), set-cookie (600 bytes, not indexed),
    // then x-pad (900 bytes, indexed): 1,500 bytes of fields, the list keeps 1,024.
    let mut b = vec![0x08, 3];
    b.extend_from_slice(b"503");
    b.extend_from_slice(&[0x00, 10]);
    b.extend_from_slice(b"set-cookie");
    b.extend_from_slice(&[0x7f, 0xd9, 0x03]);
    b.extend(std::iter::repeat_n(b'c', 600));
    b.extend_from_slice(&[0x40, 5]);
    b.extend_from_slice(b"x-pad");
    b.extend_from_slice(&[0x7f, 0x85, 0x06]);
    b.extend(std::iter::repeat_n(b'p', 900));
    c.handle_bytes(
        0,
        &raw(
            frame::HEADERS,
            frame::FLAG_END_HEADERS | frame::FLAG_END_STREAM,
            1,
            &b,
        ),
    );
    assert_eq!(
        format!("{:?}", grpc::outcome(&c.response(first).unwrap(), 1000)),
        "Retryable { why: \"UNAVAILABLE\" }"
    );
    c.release(first);
    assert!(c.can_start(), "the connection is still open");
    let second = start(&mut c, Method::SendBundle).unwrap();
    // 200, the indexed x-pad (dynamic index 62), then grpc-status 0 with no body: Trailers-Only.
    let mut b = vec![0x88, 0xbe];
    b.extend_from_slice(&block(&[("grpc-status", "0")]));
    c.handle_bytes(
        0,
        &raw(
            frame::HEADERS,
            frame::FLAG_END_HEADERS | frame::FLAG_END_STREAM,
            3,
            &b,
        ),
    );
    let resp = c.response(second).expect("the second reply decoded");
    assert_eq!(resp.end, StreamEnd::Complete);
    assert_eq!(resp.headers.get(b"x-pad").map(<[u8]>::len), Some(900));
    assert_eq!(resp.headers.get(b"grpc-status"), Some(&b"0"[..]));
}

/// A server may answer before the whole request reached it (a body held back by a small
/// window). The call is over for us, so the stream is reset (CANCEL) rather than left open on
/// the server, counting against its MAX_CONCURRENT_STREAMS until the connection ends.
#[test]
fn a_complete_reply_before_the_request_body_went_resets_the_stream() {
    let (mut c, mut p) = open(
        Config::default(),
        &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 16)],
    );
    let id = get(&mut c, &[7u8; 100]).unwrap();
    let sent = p.read(&mut c);
    assert!(
        !sent
            .iter()
            .any(|f| f.kind == frame::DATA && f.flags & frame::FLAG_END_STREAM != 0),
        "the body is held back by the window"
    );
    c.handle_bytes(
        0,
        &headers(1, &[(":status", "200"), ("grpc-status", "0")], true),
    );
    assert_eq!(end_of(&c, id), StreamEnd::Complete);
    let after = p.read(&mut c);
    let rst = after
        .iter()
        .find(|f| f.kind == frame::RST_STREAM && f.stream == 1)
        .expect("RST_STREAM for the answered stream");
    assert_eq!(rst.payload, Reason::CANCEL.0.to_be_bytes());
    c.release(id);
    assert!(
        !p.read(&mut c).iter().any(|f| f.kind == frame::RST_STREAM),
        "once"
    );
}

/// The peer's SETTINGS_MAX_HEADER_LIST_SIZE counts every field, the ones encoded once too:
/// a SendBundle call's list is 363 bytes (RFC 7541's 32 per field included).
#[test]
fn a_call_past_the_peers_header_list_limit_is_refused_before_anything_is_sent() {
    for (limit, ok) in [(362, false), (363, true)] {
        let (mut c, mut p) = open(
            Config::default(),
            &[(frame::SETTINGS_MAX_HEADER_LIST_SIZE, limit)],
        );
        let r = start(&mut c, Method::SendBundle);
        if ok {
            assert!(r.is_ok(), "{limit}: {r:?}");
        } else {
            assert_eq!(r, Err(StartError::HeadersTooLarge), "{limit}");
            assert!(p.read(&mut c).is_empty(), "nothing sent");
        }
    }
}

#[test]
fn authorization_is_sent_never_indexed() {
    let (mut c, mut p) = open(Config::default(), &[]);
    let mut cfg = call_cfg();
    cfg.authorization = Some("Bearer t0k".into());
    grpc::start_call(&mut c, &cfg, 0, Method::SendBundle, None, |_| Some(0)).unwrap();
    let f = p.read(&mut c);
    let h = p.decode_headers(&f[0].payload);
    assert!(h.contains(&("authorization".into(), "Bearer t0k".into())));
    // Literal never indexed (0001 prefix, 4-bit index) with the static name 23: 0x1f then
    // 23 - 15 = 0x08; without indexing it would be 0x0f 0x08.
    let block = &f[0].payload;
    assert!(block.windows(2).any(|w| w == [0x1f, 0x08]), "{block:02x?}");
    assert!(!block.windows(2).any(|w| w == [0x0f, 0x08]), "{block:02x?}");
}

#[test]
fn stream_ids_are_odd_and_increasing() {
    let (mut c, _p) = open(Config::default(), &[]);
    let ids: Vec<u32> = (0..5).map(|_| get(&mut c, b"").unwrap().0).collect();
    assert_eq!(ids, vec![1, 3, 5, 7, 9]);
}

#[test]
fn header_block_split_over_continuation_is_assembled() {
    let (mut c, _p) = open(Config::default(), &[]);
    let id = get(&mut c, b"").unwrap();
    let b = block(&[
        (":status", "200"),
        ("grpc-status", "0"),
        ("x-long", &"v".repeat(300)),
    ]);
    let mut bytes = raw(frame::HEADERS, frame::FLAG_END_STREAM, 1, &b[..100]);
    bytes.extend(raw(frame::CONTINUATION, 0, 1, &b[100..200]));
    bytes.extend(raw(
        frame::CONTINUATION,
        frame::FLAG_END_HEADERS,
        1,
        &b[200..],
    ));
    // Delivered a byte at a time: frames split anywhere still parse.
    for byte in &bytes {
        c.handle_bytes(0, std::slice::from_ref(byte));
    }
    assert_eq!(end_of(&c, id), StreamEnd::Complete);
    assert_eq!(
        c.response(id)
            .unwrap()
            .headers
            .get(b"x-long")
            .unwrap()
            .len(),
        300
    );
}

#[test]
fn ping_is_answered_with_the_same_payload() {
    let (mut c, mut p) = open(Config::default(), &[]);
    c.handle_bytes(0, &raw(frame::PING, 0, 0, b"12345678"));
    let f = p.read(&mut c);
    assert_eq!(
        (f[0].kind, f[0].flags, f[0].payload.as_slice()),
        (frame::PING, frame::FLAG_ACK, &b"12345678"[..])
    );
}

#[test]
fn keepalive_pings_only_a_silent_peer_and_tells_its_owner_of_a_missing_ack() {
    let (c, _p) = open(Config::default(), &[]);
    assert_eq!(c.poll_timeout(), None, "off by default");
    let cfg = Config {
        keepalive_interval_ms: Some(1_000),
        keepalive_timeout_ms: 200,
        ..Config::default()
    };
    let (mut c, mut p) = open(cfg, &[]);
    assert_eq!(c.poll_timeout(), Some(1_000 * MS));
    // A frame from the peer at 600 ms: the next PING waits a whole interval from there.
    c.handle_bytes(600 * MS, &raw(frame::PING, 0, 0, b"peerping"));
    p.read(&mut c);
    assert_eq!(c.poll_timeout(), Some(1_600 * MS));
    c.handle_timeout(1_600 * MS);
    let f = p.read(&mut c);
    assert_eq!((f[0].kind, f[0].flags), (frame::PING, 0));
    // Answered: the peer is alive, and it says so as an event.
    c.handle_bytes(
        1_650 * MS,
        &raw(frame::PING, frame::FLAG_ACK, 0, &f[0].payload),
    );
    assert_eq!(events(&mut c), vec![Event::PingAcked]);
    assert_eq!(c.poll_timeout(), Some(2_650 * MS));
    // Unanswered: the owner is told at the deadline and decides; the connection stays open.
    c.handle_timeout(2_650 * MS);
    p.read(&mut c);
    assert_eq!(c.poll_timeout(), Some(2_850 * MS));
    c.handle_timeout(2_850 * MS);
    assert_eq!(events(&mut c), vec![Event::PingTimedOut { after_ms: 200 }]);
    assert!(!c.is_closed());
}

#[test]
fn a_ping_on_demand_goes_at_once_and_only_one_is_outstanding() {
    let (mut c, mut p) = open(Config::default(), &[]);
    c.ping(10 * MS, 50);
    c.ping(11 * MS, 50);
    let f = p.read(&mut c);
    assert_eq!(f.iter().filter(|f| f.kind == frame::PING).count(), 1);
    assert_eq!(c.poll_timeout(), Some(60 * MS));
    c.handle_bytes(
        20 * MS,
        &raw(frame::PING, frame::FLAG_ACK, 0, &f[0].payload),
    );
    assert_eq!(events(&mut c), vec![Event::PingAcked]);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn a_requests_end_offset_tells_whether_its_last_byte_was_sent() {
    let (mut c, _p) = open(Config::default(), &[]);
    let before = c.transmitted_total();
    let id = get(&mut c, &[7; 100]).unwrap();
    let end = c.request_end(id).expect("END_STREAM queued");
    let queued = c.poll_transmit().len() as u64;
    assert_eq!(end, before + queued, "the request is the last thing queued");
    // Part of it leaves: not whole yet.
    c.advance_transmit(queued as usize - 1);
    assert!(c.transmitted_total() < end);
    c.advance_transmit(1);
    assert_eq!(c.transmitted_total(), end);
    c.handle_transport_closed();
    let resp = c.response(id).unwrap();
    assert_eq!(resp.request_end, Some(end));
}

// ---- flow control ----

#[test]
fn body_waits_for_window_and_flows_with_window_updates() {
    let (mut c, mut p) = open(
        Config::default(),
        &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)],
    );
    let id = get(&mut c, &[7; 25]).unwrap();
    let f = p.read(&mut c);
    let sent: usize = f
        .iter()
        .filter(|f| f.kind == frame::DATA)
        .map(|f| f.payload.len())
        .sum();
    assert_eq!(sent, 10);
    c.handle_bytes(0, &raw(frame::WINDOW_UPDATE, 0, 1, &10u32.to_be_bytes()));
    let f = p.read(&mut c);
    assert_eq!(
        f.iter()
            .filter(|f| f.kind == frame::DATA)
            .map(|f| f.payload.len())
            .sum::<usize>(),
        10
    );
    c.handle_bytes(0, &raw(frame::WINDOW_UPDATE, 0, 1, &100u32.to_be_bytes()));
    let f = p.read(&mut c);
    let last = f.iter().find(|f| f.kind == frame::DATA).unwrap();
    assert_eq!(
        (last.payload.len(), last.flags),
        (5, frame::FLAG_END_STREAM)
    );
    c.handle_bytes(0, &reply_ok(1, b""));
    assert_eq!(end_of(&c, id), StreamEnd::Complete);
}

/// A request the peer's flow control still holds part of when it must have gone whole
/// (`send_by`: a bundle's max age) is given up: reset (CANCEL), ended unsent, and what the
/// window later allows carries none of it. One that went whole in time is left alone.
#[test]
fn a_request_not_sent_whole_by_its_send_by_is_reset_unsent_and_never_sent_late() {
    let (mut c, mut p) = open(
        Config::default(),
        &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)],
    );
    let id = get(&mut c, &[7; 25]).unwrap();
    c.send_by(id, 50 * MS);
    p.read(&mut c);
    assert_eq!(c.poll_timeout(), Some(50 * MS));
    c.handle_timeout(49 * MS);
    assert!(c.response(id).is_none(), "still in time");
    c.handle_timeout(50 * MS);
    assert_eq!(end_of(&c, id), StreamEnd::Withheld);
    assert!(end_of(&c, id).retry_safe(), "never sent whole");
    let f = p.read(&mut c);
    let rst = f
        .iter()
        .find(|f| f.kind == frame::RST_STREAM)
        .expect("reset");
    assert_eq!(
        Reason(u32::from_be_bytes(rst.payload[..4].try_into().unwrap())),
        Reason::CANCEL
    );
    c.handle_bytes(0, &raw(frame::WINDOW_UPDATE, 0, 1, &100u32.to_be_bytes()));
    assert!(p.read(&mut c).iter().all(|f| f.kind != frame::DATA));
    // Whole in time: the send-by is no deadline for its answer.
    let id = get(&mut c, &[7; 5]).unwrap();
    c.send_by(id, 60 * MS);
    p.read(&mut c);
    c.handle_timeout(70 * MS);
    assert!(c.response(id).is_none(), "the answer may come later");
}

#[test]
fn initial_window_change_mid_stream_applies_to_open_streams() {
    let (mut c, mut p) = open(
        Config::default(),
        &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)],
    );
    get(&mut c, &[1; 30]).unwrap();
    p.read(&mut c);
    // Shrinking makes the window negative (10 - 10 sent, then -5): nothing more may go.
    c.handle_bytes(0, &settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 5)]));
    c.handle_bytes(0, &raw(frame::WINDOW_UPDATE, 0, 1, &4u32.to_be_bytes()));
    let f = p.read(&mut c);
    assert!(f.iter().all(|f| f.kind != frame::DATA));
    // Growing by 25 leaves 24: the remaining 20 go out.
    c.handle_bytes(0, &settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 30)]));
    let f = p.read(&mut c);
    assert_eq!(
        f.iter()
            .filter(|f| f.kind == frame::DATA)
            .map(|f| f.payload.len())
            .sum::<usize>(),
        20
    );
}

#[test]
fn window_update_overflow_is_a_flow_control_error() {
    let (mut c, _p) = open(Config::default(), &[]);
    c.handle_bytes(
        0,
        &raw(frame::WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes()),
    );
    assert!(matches!(
        closed_with(&c),
        ConnError::PeerProtocol {
            reason: Reason::FLOW_CONTROL_ERROR,
            ..
        }
    ));
    let (mut c, mut p) = open(Config::default(), &[]);
    let id = get(&mut c, b"").unwrap();
    c.handle_bytes(
        0,
        &raw(frame::WINDOW_UPDATE, 0, 1, &0x7fff_ffffu32.to_be_bytes()),
    );
    assert!(matches!(
        end_of(&c, id),
        StreamEnd::PeerError {
            reason: Reason::FLOW_CONTROL_ERROR,
            ..
        }
    ));
    assert!(p.read(&mut c).iter().any(|f| f.kind == frame::RST_STREAM));
    assert!(!c.is_closed());
}

#[test]
fn data_on_a_released_stream_still_credits_the_connection_window() {
    let cfg = Config {
        conn_window: 65_535,
        ..Config::default()
    };
    let (mut c, mut p) = open(cfg, &[]);
    let id = get(&mut c, b"").unwrap();
    c.handle_bytes(0, &headers(1, &[(":status", "200")], false));
    c.release(id);
    p.read(&mut c);
    // 4 frames of 10,000 bytes: past half the window, a connection WINDOW_UPDATE must follow.
    for _ in 0..4 {
        c.handle_bytes(0, &data(1, &[0; 10_000], false));
    }
    let f = p.read(&mut c);
    let wu = f
        .iter()
        .find(|f| f.kind == frame::WINDOW_UPDATE && f.stream == 0)
        .expect("connection credited");
    assert_eq!(
        u32::from_be_bytes(wu.payload[..4].try_into().unwrap()),
        40_000
    );
    assert!(!c.is_closed());
}

#[test]
fn data_beyond_our_connection_window_is_a_flow_control_error() {
    let cfg = Config {
        conn_window: 65_535,
        frame_size_max: 100_000,
        response_body_bytes_max: 100_000,
        ..Config::default()
    };
    let (mut c, _p) = open(cfg, &[]);
    get(&mut c, b"").unwrap();
    c.handle_bytes(0, &headers(1, &[(":status", "200")], false));
    c.handle_bytes(0, &data(1, &[0; 65_536], false));
    assert!(matches!(
        closed_with(&c),
        ConnError::PeerProtocol {
            reason: Reason::FLOW_CONTROL_ERROR,
            ..
        }
    ));
}

#[test]
fn data_beyond_our_stream_window_is_a_stream_flow_control_error() {
    let cfg = Config {
        stream_window: 1_000,
        ..Config::default()
    };
    let (mut c, _p) = open(cfg, &[]);
    let id = get(&mut c, b"").unwrap();
    c.handle_bytes(0, &headers(1, &[(":status", "200")], false));
    c.handle_bytes(0, &data(1, &[0; 1_001], false));
    assert!(matches!(
        end_of(&c, id),
        StreamEnd::PeerError {
            reason: Reason::FLOW_CONTROL_ERROR,
            ..
        }
    ));
    assert!(!c.is_closed());
}

// ---- concurrency and GOAWAY ----

#[test]
fn max_concurrent_streams_one_refuses_the_second_request_until_the_first_ends() {
    let (mut c, _p) = open(
        Config::default(),
        &[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 1)],
    );
    let a = get(&mut c, b"").unwrap();
    assert_eq!(get(&mut c, b""), Err(StartError::ConcurrencyLimit));
    assert!(!c.can_start());
    c.handle_bytes(0, &reply_ok(1, b""));
    assert_eq!(end_of(&c, a), StreamEnd::Complete);
    assert_eq!(get(&mut c, b"").unwrap(), StreamId(3));
}

#[test]
fn goaway_mid_flight_reports_streams_above_last_id_as_not_processed_then_drains() {
    let (mut c, _p) = open(Config::default(), &[]);
    let a = get(&mut c, b"").unwrap();
    let b = get(&mut c, b"").unwrap();
    let d = get(&mut c, b"").unwrap();
    let mut g = 1u32.to_be_bytes().to_vec();
    g.extend(0u32.to_be_bytes());
    c.handle_bytes(0, &raw(frame::GOAWAY, 0, 0, &g));
    assert_eq!(end_of(&c, b), StreamEnd::NotProcessed);
    assert_eq!(end_of(&c, d), StreamEnd::NotProcessed);
    assert_eq!(
        grpc::outcome(&c.response(d).unwrap(), 1000),
        Outcome::Retryable {
            why: "above GOAWAY's last stream id"
        }
    );
    assert_eq!(get(&mut c, b""), Err(StartError::NotAccepting));
    assert!(!c.is_closed());
    c.handle_bytes(0, &reply_ok(1, b"ok"));
    assert_eq!(end_of(&c, a), StreamEnd::Complete);
    assert_eq!(
        closed_with(&c),
        ConnError::GoAway {
            reason: Reason::NO_ERROR
        }
    );
    let ev = events(&mut c);
    assert!(ev.contains(&Event::GoAway {
        last_stream: 1,
        reason: Reason::NO_ERROR
    }));
    assert_eq!(
        ev.last(),
        Some(&Event::Closed(ConnError::GoAway {
            reason: Reason::NO_ERROR
        }))
    );
}

// ---- the misbehaving peer ----

#[test]
fn rst_stream_after_headers_and_after_data_end_the_stream_as_reset() {
    let (mut c, _p) = open(Config::default(), &[]);
    let a = get(&mut c, b"x").unwrap();
    let b = get(&mut c, b"x").unwrap();
    c.handle_bytes(0, &headers(1, &[(":status", "200")], false));
    c.handle_bytes(
        0,
        &raw(
            frame::RST_STREAM,
            0,
            1,
            &Reason::INTERNAL_ERROR.0.to_be_bytes(),
        ),
    );
    c.handle_bytes(0, &headers(3, &[(":status", "200")], false));
    c.handle_bytes(0, &data(3, &grpc_message(b"partial"), false));
    c.handle_bytes(
        0,
        &raw(
            frame::RST_STREAM,
            0,
            3,
            &Reason::REFUSED_STREAM.0.to_be_bytes(),
        ),
    );
    assert_eq!(
        end_of(&c, a),
        StreamEnd::Reset {
            reason: Reason::INTERNAL_ERROR,
            request_sent: true
        }
    );
    assert_eq!(
        grpc::outcome(&c.response(a).unwrap(), 1000),
        Outcome::Unknown {
            why: "reset after the request was sent"
        }
    );
    assert_eq!(
        grpc::outcome(&c.response(b).unwrap(), 1000),
        Outcome::Retryable {
            why: "REFUSED_STREAM"
        }
    );
    assert!(!c.is_closed());
}

#[test]
fn window_held_at_zero_ends_at_the_deadline_as_retryable() {
    let (mut c, mut p) = open(
        Config::default(),
        &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)],
    );
    let id = grpc::start_call(
        &mut c,
        &call_cfg(),
        0,
        Method::SendBundle,
        Some(2_000),
        |b| {
            b[..100].fill(1);
            Some(100)
        },
    )
    .unwrap();
    assert!(p.read(&mut c).iter().all(|f| f.kind != frame::DATA));
    assert_eq!(c.poll_timeout(), Some(2_000 * MS));
    c.handle_timeout(2_000 * MS);
    assert_eq!(
        end_of(&c, id),
        StreamEnd::TimedOut {
            request_sent: false
        }
    );
    assert_eq!(
        grpc::outcome(&c.response(id).unwrap(), 1000),
        Outcome::Retryable {
            why: "deadline passed before the request was sent"
        }
    );
    assert!(p.read(&mut c).iter().any(|f| f.kind == frame::RST_STREAM));
}

#[test]
fn ping_flood_ends_in_enhance_your_calm_with_bounded_output() {
    let (mut c, mut p) = open(Config::default(), &[]);
    let mut total = 0;
    for _ in 0..10_000 {
        c.handle_bytes(0, &raw(frame::PING, 0, 0, &[0; 8]));
        total = total.max(c.poll_transmit().len());
        if c.is_closed() {
            break;
        }
    }
    assert!(matches!(
        closed_with(&c),
        ConnError::PeerProtocol {
            reason: Reason::ENHANCE_YOUR_CALM,
            what: "PING flood"
        }
    ));
    assert!(total <= Config::default().transmit_bytes_max);
    assert_eq!(
        goaway_code(&p.read(&mut c)),
        Some(Reason::ENHANCE_YOUR_CALM)
    );
}

#[test]
fn continuation_flood_ends_in_enhance_your_calm() {
    let (mut c, _p) = open(Config::default(), &[]);
    get(&mut c, b"").unwrap();
    c.handle_bytes(0, &raw(frame::HEADERS, 0, 1, &block(&[(":status", "200")])));
    for _ in 0..1000 {
        c.handle_bytes(0, &raw(frame::CONTINUATION, 0, 1, &[]));
    }
    assert!(matches!(
        closed_with(&c),
        ConnError::PeerProtocol {
            reason: Reason::ENHANCE_YOUR_CALM,
            what: "CONTINUATION flood"
        }
    ));
}

#[test]
fn header_block_left_open_past_its_time_limit_closes_the_connection() {
    let (mut c, _p) = open(Config::default(), &[]);
    get(&mut c, b"").unwrap();
    c.handle_bytes(0, &raw(frame::HEADERS, 0, 1, &block(&[(":status", "200")])));
    let t = c.poll_timeout().unwrap();
    assert_eq!(t, Config::default().header_block_open_ms * MS);
    c.handle_timeout(t);
    assert!(matches!(
        closed_with(&c),
        ConnError::PeerProtocol {
            reason: Reason::ENHANCE_YOUR_CALM,
            ..
        }
    ));
}

#[test]
fn oversize_header_block_ends_in_enhance_your_calm() {
    let (mut c, _p) = open(Config::default(), &[]);
    get(&mut c, b"").unwrap();
    let big = vec![0x40u8; 9_000];
    c.handle_bytes(0, &raw(frame::HEADERS, 0, 1, &big));
    c.handle_bytes(
        0,
        &raw(frame::CONTINUATION, frame::FLAG_END_HEADERS, 1, &[0; 16]),
    );
    assert!(matches!(
        closed_with(&c),
        ConnError::PeerProtocol {
            reason: Reason::ENHANCE_YOUR_CALM,
            what: "header block larger than our limit"
        }
    ));
}

#[test]
fn hpack_garbage_is_a_compression_error() {
    let (mut c, _p) = open(Config::default(), &[]);
    let id = get(&mut c, b"abc").unwrap();
    c.handle_bytes(
        0,
        &raw(
            frame::HEADERS,
            frame::FLAG_END_HEADERS,
            1,
            &[0xff, 0xff, 0xff, 0xff, 0x0f],
        ),
    );
    assert!(matches!(
        closed_with(&c),
        ConnError::PeerProtocol {
            reason: Reason::COMPRESSION_ERROR,
            ..
        }
    ));
    assert!(matches!(
        end_of(&c, id),
        StreamEnd::ConnectionLost {
            request_sent: true,
            ..
        }
    ));
    assert_eq!(
        grpc::outcome(&c.response(id).unwrap(), 1000),
        Outcome::Unknown {
            why: "connection lost after the request was sent"
        }
    );
}

/// Each invalid frame, the error it must cause.
#[test]
fn invalid_frames_map_to_their_rfc_9113_errors() {
    let mut goaway_short = vec![0; 4];
    goaway_short.truncate(4);
    let conn_cases: Vec<(&str, Vec<u8>, Reason)> = vec![
        (
            "DATA on stream 0",
            raw(frame::DATA, 0, 0, b"x"),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "HEADERS on an idle stream",
            headers(5, &[(":status", "200")], true),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "DATA on a server stream id",
            raw(frame::DATA, 0, 2, b"x"),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "padding longer than payload",
            raw(frame::DATA, frame::FLAG_PADDED, 1, &[5, 0, 0]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "SETTINGS ACK with payload",
            raw(frame::SETTINGS, frame::FLAG_ACK, 0, &[0; 6]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            "SETTINGS length not multiple of 6",
            raw(frame::SETTINGS, 0, 0, &[0; 5]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            "SETTINGS on a stream",
            raw(frame::SETTINGS, 0, 1, &[]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "PING length 7",
            raw(frame::PING, 0, 0, &[0; 7]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            "PING on a stream",
            raw(frame::PING, 0, 1, &[0; 8]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "GOAWAY too short",
            raw(frame::GOAWAY, 0, 0, &goaway_short),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            "RST_STREAM length 3",
            raw(frame::RST_STREAM, 0, 1, &[0; 3]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            "RST_STREAM on stream 0",
            raw(frame::RST_STREAM, 0, 0, &[0; 4]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "WINDOW_UPDATE length 3",
            raw(frame::WINDOW_UPDATE, 0, 0, &[0; 3]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            "WINDOW_UPDATE of 0 on the connection",
            raw(frame::WINDOW_UPDATE, 0, 0, &[0; 4]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "PUSH_PROMISE",
            raw(
                frame::PUSH_PROMISE,
                frame::FLAG_END_HEADERS,
                1,
                &[0, 0, 0, 2],
            ),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "CONTINUATION without HEADERS",
            raw(frame::CONTINUATION, frame::FLAG_END_HEADERS, 1, &[0x88]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "frame above our MAX_FRAME_SIZE",
            raw(frame::DATA, 0, 1, &[0; 16_385]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            "MAX_FRAME_SIZE below the minimum",
            settings(&[(frame::SETTINGS_MAX_FRAME_SIZE, 100)]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "INITIAL_WINDOW_SIZE above 2^31-1",
            settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0x8000_0000)]),
            Reason::FLOW_CONTROL_ERROR,
        ),
    ];
    for (what, bytes, want) in conn_cases {
        let (mut c, mut p) = open(Config::default(), &[]);
        get(&mut c, b"").unwrap();
        p.read(&mut c);
        c.handle_bytes(0, &bytes);
        match c.error() {
            Some(ConnError::PeerProtocol { reason, .. }) => assert_eq!(reason, want, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(goaway_code(&p.read(&mut c)), Some(want), "{what}");
    }
    let stream_cases: Vec<(&str, Vec<u8>, Reason)> = vec![
        (
            "DATA before HEADERS",
            data(1, b"x", false),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "PRIORITY length 4",
            raw(frame::PRIORITY, 0, 1, &[0; 4]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            "WINDOW_UPDATE of 0 on a stream",
            raw(frame::WINDOW_UPDATE, 0, 1, &[0; 4]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            "headers without :status",
            headers(1, &[("grpc-status", "0")], true),
            Reason::PROTOCOL_ERROR,
        ),
    ];
    for (what, bytes, want) in stream_cases {
        let (mut c, mut p) = open(Config::default(), &[]);
        let id = get(&mut c, b"").unwrap();
        p.read(&mut c);
        c.handle_bytes(0, &bytes);
        assert!(!c.is_closed(), "{what}");
        let rst = p
            .read(&mut c)
            .into_iter()
            .find(|f| f.kind == frame::RST_STREAM)
            .expect(what);
        assert_eq!(
            Reason(u32::from_be_bytes(rst.payload[..4].try_into().unwrap())),
            want,
            "{what}"
        );
        if what != "PRIORITY length 4" {
            assert!(
                matches!(end_of(&c, id), StreamEnd::PeerError { reason, .. } if reason == want),
                "{what}"
            );
        }
    }
}

/// A HEADERS frame whose priority makes its stream depend on itself resets that stream
/// (RFC 9113 section 5.3.1), but its header block is still decoded (section 4.3): the HPACK
/// table stays in step with the peer's, so the next stream's reply that indexes what the
/// block added reads right, and the connection lives.
#[test]
fn headers_depending_on_itself_reset_its_stream_and_still_keep_the_hpack_table_in_step() {
    let (mut c, mut p) = open(Config::default(), &[]);
    let first = get(&mut c, b"").unwrap();
    let second = get(&mut c, b"").unwrap();
    p.read(&mut c);
    // Stream 1 depends on stream 1; its block adds "x: y" to the table (literal, indexed).
    let mut payload = 1u32.to_be_bytes().to_vec();
    payload.push(15);
    payload.extend_from_slice(&[0x40, 1, b'x', 1, b'y']);
    c.handle_bytes(
        0,
        &raw(
            frame::HEADERS,
            frame::FLAG_PRIORITY | frame::FLAG_END_HEADERS,
            1,
            &payload,
        ),
    );
    assert!(!c.is_closed(), "{:?}", c.error());
    assert!(matches!(
        end_of(&c, first),
        StreamEnd::PeerError {
            reason: Reason::PROTOCOL_ERROR,
            ..
        }
    ));
    // Stream 3's reply: :status 200 (static 8), then the table's first entry (62).
    c.handle_bytes(
        0,
        &raw(
            frame::HEADERS,
            frame::FLAG_END_HEADERS | frame::FLAG_END_STREAM,
            3,
            &[0x88, 0xbe],
        ),
    );
    assert!(!c.is_closed(), "{:?}", c.error());
    assert_eq!(end_of(&c, second), StreamEnd::Complete);
    assert_eq!(
        c.response(second).unwrap().headers.get(b"x"),
        Some(&b"y"[..])
    );
}

#[test]
fn unknown_frame_types_are_ignored() {
    let (mut c, _p) = open(Config::default(), &[]);
    let id = get(&mut c, b"").unwrap();
    c.handle_bytes(0, &raw(0xfa, 0xff, 1, b"whatever"));
    c.handle_bytes(0, &reply_ok(1, b""));
    assert_eq!(end_of(&c, id), StreamEnd::Complete);
}

#[test]
fn response_body_over_its_buffer_cancels_only_that_stream() {
    let cfg = Config {
        response_body_bytes_max: 64,
        ..Config::default()
    };
    let (mut c, mut p) = open(cfg, &[]);
    let id = get(&mut c, b"").unwrap();
    c.handle_bytes(0, &headers(1, &[(":status", "200")], false));
    c.handle_bytes(0, &data(1, &[0; 65], false));
    assert!(matches!(
        end_of(&c, id),
        StreamEnd::PeerError {
            reason: Reason::CANCEL,
            ..
        }
    ));
    assert!(p.read(&mut c).iter().any(|f| f.kind == frame::RST_STREAM));
    assert!(!c.is_closed());
}

#[test]
fn transport_loss_splits_requests_by_whether_they_were_sent() {
    let (mut c, _p) = open(
        Config::default(),
        &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 4)],
    );
    let sent = get(&mut c, b"ab").unwrap();
    let unsent = get(&mut c, b"abcdefgh").unwrap();
    c.handle_transport_closed();
    assert_eq!(
        grpc::outcome(&c.response(sent).unwrap(), 1000),
        Outcome::Unknown {
            why: "connection lost after the request was sent"
        }
    );
    assert_eq!(
        grpc::outcome(&c.response(unsent).unwrap(), 1000),
        Outcome::Retryable {
            why: "connection lost before the request was sent"
        }
    );
}

// ---- gRPC outcomes ----

fn outcome_of(
    hdrs: &[(&str, &str)],
    body: Option<&[u8]>,
    trailers: Option<&[(&str, &str)]>,
) -> String {
    let (mut c, _p) = open(Config::default(), &[]);
    let id = get(&mut c, b"").unwrap();
    c.handle_bytes(0, &headers(1, hdrs, body.is_none() && trailers.is_none()));
    if let Some(b) = body {
        c.handle_bytes(0, &data(1, b, trailers.is_none()));
    }
    if let Some(t) = trailers {
        c.handle_bytes(0, &headers(1, t, true));
    }
    format!("{:?}", grpc::outcome(&c.response(id).unwrap(), 1000))
}

#[test]
fn resource_exhausted_with_retry_after_ms_in_the_message_is_rate_limited_for_that_long() {
    let msg = "Rate%20limit%20exceeded.%20Limit:%201%20per%20second%20for%20txn%20requests.%20Back-off%20triggered:%20Retry%20after%201606ms";
    let t = [("grpc-status", "8"), ("grpc-message", msg)];
    assert_eq!(
        outcome_of(&[(":status", "200")], None, Some(&t)),
        "RateLimited { retry_after_ms: 1606 }"
    );
}

#[test]
fn resource_exhausted_with_retry_after_metadata_uses_it() {
    let t = [("grpc-status", "8"), ("retry-after", "3")];
    assert_eq!(
        outcome_of(&[(":status", "200")], None, Some(&t)),
        "RateLimited { retry_after_ms: 3000 }"
    );
}

/// The engine's word on how long to wait is kept however long it is: sending earlier only
/// earns a longer back-off.
#[test]
fn resource_exhausted_with_a_two_minute_wait_cools_the_pair_two_minutes() {
    let t = [
        ("grpc-status", "8"),
        (
            "grpc-message",
            "Back-off%20triggered:%20Retry%20after%20120000ms",
        ),
    ];
    assert_eq!(
        outcome_of(&[(":status", "200")], None, Some(&t)),
        "RateLimited { retry_after_ms: 120000 }"
    );
    let t = [("grpc-status", "8"), ("retry-after", "3600")];
    assert_eq!(
        outcome_of(&[(":status", "200")], None, Some(&t)),
        "RateLimited { retry_after_ms: 3600000 }"
    );
}

/// A wait longer than a day (too many digits to be a real one, too) is a day: the pair comes
/// back rather than never, and never sooner than a day.
#[test]
fn resource_exhausted_with_an_absurd_wait_cools_the_pair_a_day_not_the_default() {
    for msg in [
        "Retry%20after%2099999999999ms",
        "Retry%20after%209999999999999999999999ms",
    ] {
        let t = [("grpc-status", "8"), ("grpc-message", msg)];
        assert_eq!(
            outcome_of(&[(":status", "200")], None, Some(&t)),
            format!(
                "RateLimited {{ retry_after_ms: {} }}",
                grpc::RETRY_AFTER_MS_MAX
            ),
            "{msg}"
        );
    }
    assert_eq!(grpc::RETRY_AFTER_MS_MAX, 24 * 3600 * 1000);
}

#[test]
fn resource_exhausted_without_hint_uses_the_configured_default() {
    let t = [("grpc-status", "8"), ("grpc-message", "Network congested")];
    assert_eq!(
        outcome_of(&[(":status", "200")], None, Some(&t)),
        "RateLimited { retry_after_ms: 1000 }"
    );
}

/// A front end's own 429 (no gRPC status: the engine never saw the call) is the rate limit
/// it says it is: the pair cools for its `retry-after`, or Jito's second, as a forwarded
/// call's 429 does, rather than the bundle spending an attempt on a pair that is refused.
#[test]
fn a_bare_http_429_cools_the_pair_for_its_retry_after() {
    assert_eq!(
        outcome_of(&[(":status", "429"), ("retry-after", "2")], None, None),
        "RateLimited { retry_after_ms: 2000 }"
    );
    assert_eq!(
        outcome_of(&[(":status", "429")], None, None),
        "RateLimited { retry_after_ms: 1000 }"
    );
    assert_eq!(
        outcome_of(&[(":status", "503")], None, None),
        "Retryable { why: \"UNAVAILABLE\" }"
    );
}

#[test]
fn unavailable_in_trailers_only_reply_is_retryable() {
    let h = [
        (":status", "200"),
        ("grpc-status", "14"),
        ("grpc-message", "upstream connect error"),
    ];
    assert_eq!(
        outcome_of(&h, None, None),
        "Retryable { why: \"UNAVAILABLE\" }"
    );
}

#[test]
fn invalid_argument_is_rejected_with_the_decoded_message() {
    let t = [
        ("grpc-status", "3"),
        (
            "grpc-message",
            "bundle%20contains%20an%20expired%20blockhash%25",
        ),
    ];
    assert_eq!(
        outcome_of(&[(":status", "200")], None, Some(&t)),
        "Rejected { code: Code(3), message: bundle contains an expired blockhash% }"
    );
}

#[test]
fn http_status_without_grpc_status_is_synthesised() {
    assert_eq!(
        outcome_of(&[(":status", "503")], None, None),
        "Retryable { why: \"UNAVAILABLE\" }"
    );
    assert_eq!(
        outcome_of(&[(":status", "404")], None, None),
        "Rejected { code: Code(12), message:  }"
    );
    assert_eq!(
        outcome_of(&[(":status", "401")], None, None),
        "Rejected { code: Code(16), message:  }"
    );
    assert_eq!(
        outcome_of(&[(":status", "200")], Some(&grpc_message(b"x")), None),
        "Unknown { why: \"reply without grpc-status\" }"
    );
}

#[test]
fn ok_needs_exactly_one_uncompressed_message() {
    let ok = [("grpc-status", "0")];
    assert_eq!(
        outcome_of(&[(":status", "200")], Some(&grpc_message(b"hi")), Some(&ok)),
        "Ok([104, 105])"
    );
    let mut compressed = grpc_message(b"hi");
    compressed[0] = 1;
    assert!(outcome_of(&[(":status", "200")], Some(&compressed), Some(&ok)).starts_with("Unknown"));
    let mut two = grpc_message(b"a");
    two.extend(grpc_message(b"b"));
    assert!(outcome_of(&[(":status", "200")], Some(&two), Some(&ok)).starts_with("Unknown"));
}

#[test]
fn grpc_codes_map_to_outcomes() {
    let table: &[(&str, &str)] = &[
        ("0", "Unknown"), // OK without a message
        ("1", "Unknown"),
        ("3", "Rejected"),
        ("4", "Unknown"),
        ("7", "Rejected"),
        ("8", "RateLimited"),
        ("13", "Unknown"),
        ("14", "Retryable"),
        ("16", "Rejected"),
    ];
    for (code, want) in table {
        let got = outcome_of(&[(":status", "200"), ("grpc-status", code)], None, None);
        assert!(got.starts_with(want), "grpc-status {code}: {got}");
    }
    assert_eq!(Code::from_http_status(429), Code::UNAVAILABLE);
}

#[test]
fn a_reset_connection_starts_over_in_the_same_storage() {
    let (mut c, mut p) = open(Config::default(), &[]);
    let id = get(&mut c, b"one").unwrap();
    p.read(&mut c);
    c.handle_bytes(0, &reply_ok(id.0, b""));
    c.handle_transport_closed();
    c.reset(5 * MS);
    assert!(!c.is_closed() && !c.is_ready());
    assert!(
        c.poll_transmit().starts_with(PREFACE),
        "preface queued again"
    );
    assert_eq!(c.transmitted_total(), 0);
    let mut p = Peer::new();
    p.read(&mut c);
    c.handle_bytes(5 * MS, &settings(&[]));
    assert!(c.is_ready());
    assert_eq!(
        get(&mut c, b"two").unwrap(),
        StreamId(1),
        "stream ids start over"
    );
}
