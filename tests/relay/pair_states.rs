//! A pair's connection life in the sans-IO dispatcher, driven by a simulated reactor and
//! engine: random connects, failures, handshakes, protocol errors, GOAWAYs, closes, timeouts
//! and bundles (seeded, reproducible). After every step the counts the dispatcher keeps from
//! its pairs' states must match the states themselves: handshake slots in use, pairs up, the
//! limiter's view of each pair, and the accounting identity. Then the cases that used to leak:
//! a request never written whole is sent again, not failed.

use crate::h2_support;
use crate::tls_support;
use crate::wire_support;

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::egress::transport::{Stage, TlsTarget, TransportError};
use bundle_relay::h2::frame;
use bundle_relay::http1;
use bundle_relay::limiter::PairId;
use bundle_relay::metrics::accounting::Stats;
use bundle_relay::relay::dispatch::{Dispatcher, Link};
use bundle_relay::relay::intake::{self, Port, Verdict};
use bundle_relay::relay::tenancy::Claim;
use bundle_relay::relay::{RegionSpec, Spec};
use bundle_relay::tls::{self, TlsError};
use h2_support::{engine_hello as hello, ok_reply};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use wire_support::{Shape, serialize, signed_tx};

const MS: u64 = 1_000_000;
const SOURCES: usize = 4;
const HANDSHAKES_MAX: u32 = 2;

/// A bot's sendBundle body: one really signed transaction.
fn request(seed: u64) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let tx = signed_tx(
        &mut rng,
        Shape {
            signers: 1,
            instructions: 1,
            accounts_per_ix: 2,
            data_len_max: 16,
            v0_tables: None,
        },
    );
    let tx = base64::engine::general_purpose::STANDARD.encode(serialize(&tx));
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["{tx}"],{{"encoding":"base64"}}]}}"#
    )
}

fn goaway() -> Vec<u8> {
    let mut g = vec![0u8; 9 + 8];
    frame::write_goaway(&mut g, 0, frame::Reason::NO_ERROR).unwrap();
    g
}

/// Stream ids of the HEADERS frames in the client's bytes (after its preface).
fn headers_streams(bytes: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut b = bytes.strip_prefix(frame::PREFACE).unwrap_or(bytes);
    while b.len() >= 9 {
        let h = frame::Head::parse(b[..9].try_into().unwrap());
        let end = 9 + h.len as usize;
        if b.len() < end {
            break;
        }
        if h.kind == frame::HEADERS {
            out.push(h.stream);
        }
        b = &b[end..];
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sock {
    Connecting,
    Connected,
}

struct Sim {
    d: Dispatcher,
    stats: Arc<Stats>,
    now: Instant,
    socks: HashMap<u32, Sock>,
    /// Per pair: the stream of the call the engine has not answered yet.
    calls: HashMap<u32, u32>,
    /// Bytes the client sent, per pair, not yet read by the engine.
    sent: HashMap<u32, Vec<u8>>,
    seq: u64,
    /// What the relay was started with (a reload starts from it).
    spec: Spec,
}

impl Sim {
    fn new(spec_tweak: impl FnOnce(&mut Spec)) -> Sim {
        let region = RegionSpec {
            interval_ms: 1,
            ..RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap())
        };
        let sources = (1..=SOURCES)
            .map(|i| format!("127.1.0.{i}").parse().unwrap())
            .collect();
        let mut spec = Spec::local(vec![region], sources);
        spec.handshakes_max = HANDSHAKES_MAX;
        spec.bundle_max_age_ms = 1_000;
        spec.upstream_timeout_ms = 400;
        spec_tweak(&mut spec);
        let stats = Arc::new(Stats::default());
        let metrics = bundle_relay::metrics::Metrics::new(&["ny".to_string()], 1);
        let now = Instant(MS);
        let d = Dispatcher::new(
            &spec.thread(0),
            TickRate::NANOS,
            now,
            stats.clone(),
            metrics.thread(0),
        );
        Sim {
            d,
            stats,
            now,
            socks: HashMap::new(),
            calls: HashMap::new(),
            sent: HashMap::new(),
            seq: 0,
            spec,
        }
    }

    /// What the reactor does each iteration: connects, closes, sends.
    fn reactor(&mut self, send_all: bool) {
        while let Some(order) = self.d.poll_connect(self.now) {
            assert!(self.socks.insert(order.pair.0, Sock::Connecting).is_none());
        }
        while let Some(p) = self.d.poll_close() {
            self.release(p.0);
        }
        // One send per dirty pair per iteration, as the reactor has one send in flight.
        let dirty: Vec<PairId> = std::iter::from_fn(|| self.d.poll_dirty()).collect();
        for p in dirty {
            if self.socks.get(&p.0) != Some(&Sock::Connected) {
                continue;
            }
            let bytes = self.d.transmit(p, self.now).to_vec();
            let n = if send_all {
                bytes.len()
            } else {
                bytes.len() / 2
            };
            self.d.transmitted(p, n, self.now);
            let out = self.sent.entry(p.0).or_default();
            out.extend_from_slice(&bytes[..n]);
            if let Some(&s) = headers_streams(out).last() {
                self.calls.insert(p.0, s);
            }
        }
    }

    /// The socket of pair `p` ends: a connect refused, or a connection the peer closed.
    fn release(&mut self, p: u32) {
        let errno = match self.socks.get(&p) {
            Some(Sock::Connecting) => libc::ECONNREFUSED,
            _ => 0,
        };
        self.release_with(p, errno);
    }

    /// The socket of pair `p` ends with `errno` (0: closed by the peer).
    fn release_with(&mut self, p: u32, errno: i32) {
        if self.socks.remove(&p).is_some() {
            self.calls.remove(&p);
            self.sent.remove(&p);
            self.d.socket_released(PairId(p), self.now, errno);
        }
    }

    fn admit(&mut self) -> Verdict {
        self.seq += 1;
        let body = request(self.seq);
        let mut out = vec![0u8; 8192];
        let (_, verdict, _) = intake::handle(
            &mut self.d,
            Port::Pinned(0),
            bundle_relay::relay::queries::ConnRef::DETACHED,
            Claim::LOOPBACK,
            http1::Method::Post,
            b"/api/v1/bundles",
            b"",
            body.as_bytes(),
            true,
            self.now,
            &mut out,
        );
        verdict
    }

    /// The counts kept from the pairs' states agree with the states.
    fn check(&mut self) {
        // Every pair's timer holds its earliest deadline, so none is missed without a scan.
        if let Err(e) = self.d.check_timers() {
            panic!("{e}");
        }
        let links: Vec<Link> = (0..self.d.pair_count() as u32)
            .map(|p| self.d.link(PairId(p)))
            .collect();
        let handshaking = links.iter().filter(|l| l.holds_handshake_slot()).count() as u32;
        assert_eq!(self.d.handshakes_in_progress(), handshaking, "{links:?}");
        assert!(handshaking <= HANDSHAKES_MAX, "{links:?}");
        let up = links.iter().filter(|l| l.in_rotation()).count() as u64;
        assert_eq!(self.stats.pairs_up.get(), up, "{links:?}");
        for (p, l) in links.iter().enumerate() {
            assert_eq!(
                self.d.limiter().view(PairId(p as u32)).conn,
                l.conn_state(),
                "pair {p}: {l:?}"
            );
            // The reactor holds a socket exactly while the dispatcher thinks there is one.
            assert_eq!(
                self.socks.contains_key(&(p as u32)),
                *l != Link::Down,
                "pair {p}: {l:?} {:?}",
                self.socks
            );
        }
        assert!(self.d.check_accounting(), "{:?}", self.stats);
        self.d.limiter().check_invariants();
    }
}

#[test]
fn counts_kept_from_pair_states_match_the_states_through_random_connection_lives() {
    // What the random lives reached, over all seeds: checked on trivial states only, the
    // invariants would prove nothing.
    let (mut most_up, mut delivered) = (0, 0);
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut sim = Sim::new(|_| {});
        sim.reactor(true);
        sim.check();
        for step in 0..400 {
            let pairs: Vec<u32> = sim.socks.keys().copied().collect();
            let pick = |rng: &mut StdRng| pairs[rng.random_range(0..pairs.len())];
            match rng.random_range(0..100) {
                // The TCP connect of a socket completes, or fails.
                0..=24 if !pairs.is_empty() => {
                    let p = pick(&mut rng);
                    if sim.socks[&p] == Sock::Connecting {
                        if rng.random_bool(0.8) {
                            sim.socks.insert(p, Sock::Connected);
                            sim.d.connected(PairId(p), sim.now);
                        } else {
                            sim.release(p);
                        }
                    }
                }
                // The engine speaks: its SETTINGS, an answer, garbage, or GOAWAY.
                25..=54 if !pairs.is_empty() => {
                    let p = pick(&mut rng);
                    if sim.socks[&p] == Sock::Connected {
                        let bytes = match rng.random_range(0..10) {
                            0..=4 => hello(),
                            5..=7 => match sim.calls.remove(&p) {
                                Some(s) => ok_reply(s),
                                None => hello(),
                            },
                            8 => b"\x00\x00\x04\x09\x00\x00\x00\x00\x07garbage".to_vec(),
                            _ => goaway(),
                        };
                        sim.d.received(PairId(p), &bytes, sim.now);
                    }
                }
                // The peer hangs up, or the socket errors.
                55..=62 if !pairs.is_empty() => {
                    let p = pick(&mut rng);
                    sim.release(p);
                }
                // A bot's bundle.
                63..=79 => {
                    sim.admit();
                    sim.d.dispatch(sim.now);
                }
                // Time passes: deadlines, reconnects.
                _ => {
                    sim.now = Instant(sim.now.0 + rng.random_range(0..300) * MS);
                    sim.d.sweep(sim.now);
                    sim.d.dispatch(sim.now);
                }
            }
            sim.reactor(rng.random_bool(0.9));
            sim.check();
            most_up = most_up.max(sim.stats.pairs_up.get());
            let _ = step;
        }
        delivered += sim.stats.totals().delivered;
    }
    assert!(most_up >= 2, "pairs in rotation at once at most: {most_up}");
    assert!(delivered > 0, "no bundle delivered in any life");
}

/// Connects due while every handshake slot is taken wait for a handshake to end, which wakes
/// the loop by itself: they set no deadline, or the loop would wake at once, find no slot, and
/// spin until a handshake ended (a relay starting a large pool, or one whose engine keeps
/// closing, burned a core so).
#[test]
fn connects_waiting_for_a_handshake_slot_set_no_deadline_the_loop_would_spin_on() {
    let mut sim = Sim::new(|_| {});
    sim.reactor(true);
    assert_eq!(
        sim.d.handshakes_in_progress(),
        HANDSHAKES_MAX,
        "every slot taken, {} pairs still to connect",
        SOURCES as u32 - HANDSHAKES_MAX
    );
    assert!(sim.d.poll_connect(sim.now).is_none());
    sim.d.file_timers();
    if let Some(next) = sim.d.next_deadline() {
        assert!(
            next.0 > sim.now.0,
            "the next deadline is {} ns from now: the loop would not sleep",
            next.0 as i64 - sim.now.0 as i64
        );
    }
}

/// Drives one pair to rotation and sends one bundle on it, writing only `part` of the bytes.
fn one_bundle_part_written(part: impl Fn(usize) -> usize) -> Sim {
    let mut sim = Sim::new(|s| s.sources.truncate(1));
    let order = sim.d.poll_connect(sim.now).unwrap();
    sim.socks.insert(order.pair.0, Sock::Connected);
    sim.d.connected(order.pair, sim.now);
    sim.reactor(true);
    sim.d.received(order.pair, &hello(), sim.now);
    sim.reactor(true);
    assert_eq!(sim.d.link(order.pair), Link::InRotation);
    assert_eq!(sim.admit(), Verdict::Admitted);
    sim.d.dispatch(sim.now);
    let p = sim.d.poll_dirty().expect("the bundle went to the pair");
    let n = sim.d.transmit(p, sim.now).len();
    assert!(n > 100);
    sim.d.transmitted(p, part(n), sim.now);
    sim
}

#[test]
fn a_bundle_whose_request_never_left_whole_is_sent_again_when_its_connection_dies() {
    for part in [|_| 0, |n: usize| n / 2, |n: usize| n - 1] {
        let mut sim = one_bundle_part_written(part);
        sim.release(0);
        assert_eq!(sim.stats.totals().failed, 0, "{:?}", sim.stats);
        assert_eq!(sim.stats.retries.get(), 1);
        assert_eq!(sim.d.in_flight(), 1, "waiting for a pair again");
        sim.check();
    }
}

/// A socket that took none of a request (it was full: the reactor's send that never waits met
/// `EAGAIN`) leaves the bytes where they were: the pair is due a send again, which carries the
/// whole request, and the bundle is delivered once the engine answers.
#[test]
fn a_request_the_socket_took_none_of_goes_out_whole_on_the_next_send() {
    let mut sim = one_bundle_part_written(|_| 0);
    let p = sim.d.poll_dirty().expect("the pair is due a send again");
    let bytes = sim.d.transmit(p, sim.now).to_vec();
    let streams = headers_streams(&bytes);
    assert_eq!(streams.len(), 1, "the whole request, its HEADERS first");
    sim.d.transmitted(p, bytes.len(), sim.now);
    assert_eq!(sim.d.poll_dirty(), None, "nothing more to send");
    sim.d.received(p, &ok_reply(streams[0]), sim.now);
    let t = sim.stats.totals();
    assert_eq!((t.delivered, t.failed), (1, 0), "{t:?}");
    assert_eq!(
        sim.stats.retries.get(),
        0,
        "sent once, on the same connection"
    );
    sim.check();
}

#[test]
fn a_bundle_written_whole_and_then_lost_is_counted_failed() {
    let mut sim = one_bundle_part_written(|n| n);
    sim.release(0);
    assert_eq!(sim.stats.totals().failed, 1, "{:?}", sim.stats);
    assert_eq!(sim.d.in_flight(), 0);
    sim.check();
}

#[test]
fn a_timed_out_call_takes_its_pair_out_of_rotation_and_it_reconnects_later() {
    let mut sim = one_bundle_part_written(|n| n);
    sim.now = Instant(sim.now.0 + 500 * MS);
    sim.d.sweep(sim.now);
    assert_eq!(
        sim.stats.totals().failed,
        1,
        "written whole, then no answer"
    );
    assert_eq!(sim.d.link(PairId(0)), Link::Closing);
    assert_eq!(sim.stats.pairs_up.get(), 0);
    sim.reactor(true);
    assert_eq!(sim.d.link(PairId(0)), Link::Down);
    sim.check();
}

/// One pair to a TLS region, its TCP connect done and its ClientHello written; `engine` is
/// what the engine does next.
fn tls_setup_ending(engine: impl FnOnce(&mut Sim)) -> Option<TransportError> {
    let ca = tls_support::pki(&["engine.test"]).ca_pem;
    let mut sim = Sim::new(|s| {
        s.sources.truncate(1);
        s.connect_timeout_ms = 400;
        s.regions[0].tls = Some(TlsTarget {
            config: tls::client_config_from_pem(ca.as_bytes()).unwrap(),
            sni: "engine.test".into(),
        });
    });
    let order = sim.d.poll_connect(sim.now).unwrap();
    sim.socks.insert(order.pair.0, Sock::Connected);
    sim.d.connected(order.pair, sim.now);
    sim.reactor(true);
    assert_eq!(sim.d.link(order.pair), Link::Handshaking);
    assert!(!sim.sent[&order.pair.0].is_empty(), "the ClientHello left");
    engine(&mut sim);
    sim.reactor(true);
    assert_eq!(sim.d.link(order.pair), Link::Down);
    sim.check();
    sim.d.last_error(order.pair).cloned()
}

#[test]
fn a_tls_engine_that_never_answers_is_reported_as_a_handshake_timeout() {
    let error = tls_setup_ending(|sim| {
        sim.now = Instant(sim.now.0 + 500 * MS);
        sim.d.sweep(sim.now);
    });
    assert_eq!(
        error,
        Some(TransportError::HandshakeTimeout {
            after_ms: 400,
            stage: Stage::Tls,
            proxy: None
        })
    );
}

#[test]
fn a_tls_engine_that_hangs_up_mid_handshake_is_reported_as_closing_it() {
    let error = tls_setup_ending(|sim| sim.release(0));
    assert_eq!(
        error,
        Some(TransportError::Tls(TlsError::PeerClosedDuringHandshake))
    );
}

/// A reset (a firewall that drops by SNI, an ICMP error, TCP_USER_TIMEOUT) mid-handshake is
/// named as what the kernel said, not as the engine closing: it points at the path, not the
/// engine.
#[test]
fn a_connection_reset_mid_handshake_is_reported_as_the_reset_not_as_a_close() {
    let error = tls_setup_ending(|sim| sim.release_with(0, libc::ECONNRESET));
    assert_eq!(
        error.map(|e| e.to_string()).as_deref(),
        Some(
            "the connection broke during the TLS handshake: Connection reset by peer (os error 104)"
        )
    );
}

#[test]
fn a_handshake_timeout_stays_the_reason_on_every_later_try() {
    // The second try times out as the first did: the error names the timeout both times.
    let ca = tls_support::pki(&["engine.test"]).ca_pem;
    let mut sim = Sim::new(|s| {
        s.sources.truncate(1);
        s.connect_timeout_ms = 400;
        s.reconnect_min_ms = 10;
        s.reconnect_max_ms = 10;
        s.regions[0].tls = Some(TlsTarget {
            config: tls::client_config_from_pem(ca.as_bytes()).unwrap(),
            sni: "engine.test".into(),
        });
    });
    for attempt in 0..2 {
        let order = sim.d.poll_connect(sim.now).expect("a connect is due");
        sim.socks.insert(order.pair.0, Sock::Connected);
        sim.d.connected(order.pair, sim.now);
        sim.reactor(true);
        sim.now = Instant(sim.now.0 + 500 * MS);
        sim.d.sweep(sim.now);
        sim.reactor(true);
        assert_eq!(
            sim.d.last_error(order.pair),
            Some(&TransportError::HandshakeTimeout {
                after_ms: 400,
                stage: Stage::Tls,
                proxy: None
            }),
            "attempt {attempt}"
        );
        sim.now = Instant(sim.now.0 + 100 * MS);
        sim.check();
    }
}

/// Every pair connected, its engine's SETTINGS and PING answer in: all in rotation.
fn all_up(sim: &mut Sim) {
    while sim.stats.pairs_up.get() < SOURCES as u64 {
        sim.reactor(true);
        let connecting: Vec<u32> = sim
            .socks
            .iter()
            .filter(|(_, s)| **s == Sock::Connecting)
            .map(|(p, _)| *p)
            .collect();
        for p in connecting {
            sim.socks.insert(p, Sock::Connected);
            sim.d.connected(PairId(p), sim.now);
        }
        sim.reactor(true);
        for p in 0..SOURCES as u32 {
            if sim.d.link(PairId(p)) == Link::Opened {
                sim.d.received(PairId(p), &hello(), sim.now);
            }
        }
        sim.reactor(true);
    }
    sim.check();
}

#[test]
fn an_idle_pool_sleeps_until_its_first_keepalive_and_then_every_pair_pings_once() {
    let mut sim = Sim::new(|s| s.ping_idle_ms = 2_000);
    all_up(&mut sim);
    let up_at = sim.now;
    sim.d.file_timers();
    let next = sim.d.next_deadline().expect("keepalives are timed");
    assert!(
        next.0 >= up_at.0 + 2_000 * MS && next.0 <= up_at.0 + 2_002 * MS,
        "nothing before the keepalive: next deadline {} ms after the pool came up",
        (next.0 - up_at.0) / MS
    );
    // Just before it, the timers fire nothing: no pair has anything to send.
    sim.now = Instant(up_at.0 + 1_999 * MS);
    sim.d.sweep(sim.now);
    assert!(sim.d.poll_dirty().is_none());
    // At it, each pair PINGs its engine once, and the next deadline is that PING's answer's.
    sim.now = next;
    sim.d.sweep(sim.now);
    let dirty: Vec<PairId> = std::iter::from_fn(|| sim.d.poll_dirty()).collect();
    let pinged: Vec<u32> = dirty
        .into_iter()
        .map(|p| {
            let bytes = sim.d.transmit(p, sim.now).to_vec();
            sim.d.transmitted(p, bytes.len(), sim.now);
            let h = frame::Head::parse(bytes[..9].try_into().unwrap());
            assert_eq!(h.kind, frame::PING, "pair {}", p.0);
            p.0
        })
        .collect();
    assert_eq!(pinged.len(), SOURCES, "{pinged:?}");
    sim.check();
}

/// A TLS engine for the simulated reactor: a rustls server that reads what the client sent
/// and answers through the dispatcher, on one pair.
struct TlsEngine {
    server: rustls::ServerConnection,
    pair: PairId,
    /// Bytes of `Sim::sent` already read.
    read: usize,
}

impl TlsEngine {
    /// Reads what the client sent since the last time; returns the plaintext.
    fn hear(&mut self, sim: &Sim) -> Vec<u8> {
        let sent = sim
            .sent
            .get(&self.pair.0)
            .map_or(&[][..], |s| &s[self.read..]);
        self.read += sent.len();
        let mut rd = sent;
        while !rd.is_empty() {
            self.server.read_tls(&mut rd).unwrap();
            self.server.process_new_packets().unwrap();
        }
        let mut plain = vec![0u8; 64 * 1024];
        let n = tls_support::server_read(&mut self.server, &mut plain);
        plain.truncate(n);
        plain
    }

    /// Sends what the server has queued (handshake records, data, alerts) to the client.
    fn flush(&mut self, sim: &mut Sim) {
        let mut out = Vec::new();
        while self.server.wants_write() {
            self.server.write_tls(&mut out).unwrap();
        }
        if !out.is_empty() {
            sim.d.received(self.pair, &out, sim.now);
        }
    }

    fn say(&mut self, sim: &mut Sim, plain: &[u8]) {
        tls_support::server_write(&mut self.server, plain);
        self.flush(sim);
    }
}

/// One pair to a TLS region, handshaken and in rotation (its engine's SETTINGS and PING
/// answer in), with the engine that serves it.
fn one_tls_pair_up() -> (Sim, TlsEngine) {
    let pki = tls_support::pki(&["engine.test"]);
    let mut sim = Sim::new(|s| {
        s.sources.truncate(1);
        s.reconnect_min_ms = 100;
        s.reconnect_max_ms = 100;
        s.regions[0].tls = Some(TlsTarget {
            config: tls::client_config_from_pem(pki.ca_pem.as_bytes()).unwrap(),
            sni: "engine.test".into(),
        });
    });
    let order = sim.d.poll_connect(sim.now).unwrap();
    sim.socks.insert(order.pair.0, Sock::Connected);
    sim.d.connected(order.pair, sim.now);
    let mut engine = TlsEngine {
        server: rustls::ServerConnection::new(tls_support::server_config(&pki, &[b"h2"])).unwrap(),
        pair: order.pair,
        read: 0,
    };
    for _ in 0..8 {
        sim.reactor(true);
        engine.hear(&sim);
        engine.flush(&mut sim);
        if sim.d.link(order.pair) == Link::Opened {
            break;
        }
    }
    assert_eq!(sim.d.link(order.pair), Link::Opened, "TLS handshaken");
    sim.reactor(true);
    assert!(
        engine.hear(&sim).starts_with(frame::PREFACE),
        "HTTP/2 starts through TLS"
    );
    engine.say(&mut sim, &hello());
    sim.reactor(true);
    assert_eq!(sim.d.link(order.pair), Link::InRotation);
    sim.check();
    (sim, engine)
}

#[test]
fn a_tls_engine_sending_close_notify_takes_its_pair_out_of_rotation_at_once_and_it_reconnects() {
    let (mut sim, mut engine) = one_tls_pair_up();
    let pair = engine.pair;
    // The engine ends its TLS session and keeps the TCP connection open.
    engine.server.send_close_notify();
    engine.flush(&mut sim);
    assert_ne!(
        sim.d.link(pair),
        Link::InRotation,
        "close_notify is the engine closing the connection"
    );
    assert_eq!(sim.stats.pairs_up.get(), 0);
    sim.reactor(true);
    assert_eq!(sim.d.link(pair), Link::Down, "its socket closed");
    sim.check();
    assert!(sim.d.poll_connect(sim.now).is_none(), "backing off first");
    sim.now = Instant(sim.now.0 + 100 * MS);
    sim.d.sweep(sim.now);
    let again = sim.d.poll_connect(sim.now).expect("a reconnect is due");
    assert_eq!(again.pair, pair);
}

/// A bundle in flight on a TLS pair, `part` of its request's records written, when the engine
/// ends the connection: by close_notify (TCP left open) or by closing the socket. Returns the
/// pair's link after the reactor's next turn, then retries, failed bundles and bundles still in
/// flight.
fn tls_bundle_when_the_engine_closes(
    part: fn(usize) -> usize,
    close_notify: bool,
) -> (Link, u64, u64, u32) {
    let (mut sim, mut engine) = one_tls_pair_up();
    assert_eq!(sim.admit(), Verdict::Admitted);
    sim.d.dispatch(sim.now);
    let p = sim.d.poll_dirty().expect("the bundle went to the pair");
    let n = sim.d.transmit(p, sim.now).len();
    assert!(n > 100);
    sim.d.transmitted(p, part(n), sim.now);
    if close_notify {
        engine.server.send_close_notify();
        engine.flush(&mut sim);
    } else {
        sim.release(p.0);
    }
    sim.reactor(true);
    sim.check();
    (
        sim.d.link(p),
        sim.stats.retries.get(),
        sim.stats.totals().failed,
        sim.d.in_flight(),
    )
}

#[test]
fn a_bundle_in_flight_when_a_tls_engine_sends_close_notify_ends_as_when_it_hangs_up() {
    let parts: [fn(usize) -> usize; 3] = [|_| 0, |n| n / 2, |n| n];
    // Not written whole: sent again (waiting for a pair); written whole: failed.
    let expected = [
        (Link::Down, 1, 0, 1),
        (Link::Down, 1, 0, 1),
        (Link::Down, 0, 1, 0),
    ];
    for (part, expected) in parts.into_iter().zip(expected) {
        let hang_up = tls_bundle_when_the_engine_closes(part, false);
        assert_eq!(hang_up, expected, "the socket closed");
        let close_notify = tls_bundle_when_the_engine_closes(part, true);
        assert_eq!(close_notify, expected, "close_notify, TCP open");
    }
}

#[test]
fn an_answer_a_tls_engine_sends_just_before_close_notify_still_delivers_its_bundle() {
    let (mut sim, mut engine) = one_tls_pair_up();
    assert_eq!(sim.admit(), Verdict::Admitted);
    sim.d.dispatch(sim.now);
    sim.reactor(true);
    let streams = headers_streams(&engine.hear(&sim));
    let &stream = streams
        .last()
        .expect("the bundle's request reached the engine");
    // The answer and close_notify arrive in one read.
    tls_support::server_write(&mut engine.server, &ok_reply(stream));
    engine.server.send_close_notify();
    engine.flush(&mut sim);
    sim.reactor(true);
    let t = sim.stats.totals();
    assert_eq!((t.delivered, t.failed), (1, 0), "{t:?}");
    assert_eq!(sim.stats.retries.get(), 0);
    assert_eq!(sim.d.link(engine.pair), Link::Down);
    sim.check();
}

/// The first due pair connected, the engine's SETTINGS, a window and the ACK of ours received:
/// everything but the answer to the PING that admits the connection, so it is not in rotation.
fn opened_awaiting_ping(sim: &mut Sim) -> bundle_relay::relay::dispatch::ConnectOrder {
    let order = sim.d.poll_connect(sim.now).expect("a connect is due");
    sim.socks.insert(order.pair.0, Sock::Connected);
    sim.d.connected(order.pair, sim.now);
    sim.reactor(true);
    sim.d.received(order.pair, &hello()[..31], sim.now);
    sim.reactor(true);
    assert_eq!(
        sim.d.link(order.pair),
        Link::Opened,
        "not in rotation before the answer"
    );
    order
}

/// 301 ms on, past a 300 ms PING timeout: the pair's connection is closed by the relay, and
/// its error.
fn closed_past_the_ping(sim: &mut Sim, pair: PairId) -> Option<TransportError> {
    sim.now = Instant(sim.now.0 + 301 * MS);
    sim.d.run_timers(sim.now);
    sim.d.sweep(sim.now);
    sim.reactor(true);
    assert!(!sim.socks.contains_key(&pair.0), "closed by the relay");
    sim.d.last_error(pair).cloned()
}

/// An engine that sends its SETTINGS and never answers the PING that admits a new connection:
/// the relay closes the connection at the PING's deadline, and says so; it does not blame the
/// engine for a close the relay made.
#[test]
fn a_new_connection_whose_ping_goes_unanswered_is_closed_naming_the_ping_not_the_engine() {
    let mut sim = Sim::new(|s| {
        s.sources.truncate(1);
        s.ping_timeout_ms = 300;
    });
    let order = opened_awaiting_ping(&mut sim);
    let error = closed_past_the_ping(&mut sim, order.pair);
    assert_eq!(
        error,
        Some(TransportError::PingUnanswered {
            after_ms: 300,
            proxy: None
        })
    );
    assert_eq!(
        error.unwrap().to_string(),
        "the engine did not answer the PING that admits a new connection within 300 ms"
    );
    sim.check();
}

/// A server that does not speak HTTP/2 (a wrong port, an HTTP/1.1 front end), or an engine
/// that says GOAWAY before the connection joins rotation: the relay's log and `/debug/pairs`
/// name what HTTP/2 saw, not "the engine closed the connection".
#[test]
fn a_setup_that_http2_ends_names_what_http2_saw_not_a_close_by_the_engine() {
    let ended = |bytes: &[u8]| {
        let mut sim = Sim::new(|s| s.sources.truncate(1));
        let order = sim.d.poll_connect(sim.now).expect("a connect is due");
        sim.socks.insert(order.pair.0, Sock::Connected);
        sim.d.connected(order.pair, sim.now);
        sim.reactor(true);
        sim.d.received(order.pair, bytes, sim.now);
        sim.reactor(true);
        assert_eq!(sim.d.link(order.pair), Link::Down);
        sim.check();
        sim.d.last_error(order.pair).map(|e| e.to_string())
    };
    let http1 = ended(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(
        http1.as_deref(),
        Some(
            "HTTP/2: the engine broke the protocol (PROTOCOL_ERROR: the server answered in \
             HTTP/1, not HTTP/2): the relay closed the connection"
        )
    );
    // SETTINGS, then GOAWAY (last stream 0, ENHANCE_YOUR_CALM, "too many connections").
    let mut goaway = hello()[..9].to_vec();
    let debug = b"too many connections";
    goaway.extend_from_slice(&((8 + debug.len()) as u32).to_be_bytes()[1..]);
    goaway.extend_from_slice(&[7, 0, 0, 0, 0, 0]);
    goaway.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x0b]);
    goaway.extend_from_slice(debug);
    let said = ended(&goaway);
    assert_eq!(
        said.as_deref(),
        Some("HTTP/2: the engine said GOAWAY (ENHANCE_YOUR_CALM) before the connection was in use")
    );
}

/// A reload that lengthens the PING timeout while a new connection's admitting PING is out
/// leaves that PING its own deadline, and the error names the timeout it was sent with (300
/// ms), not the one in force when it ran out.
#[test]
fn a_ping_unanswered_across_a_reload_is_named_with_the_timeout_it_was_sent_with() {
    use bundle_relay::relay::tuning::Tuning;
    let mut sim = Sim::new(|s| {
        s.sources.truncate(1);
        s.ping_timeout_ms = 300;
    });
    let order = opened_awaiting_ping(&mut sim);
    let mut tuning = Tuning::of_spec(&sim.spec);
    tuning.ping_timeout_ms = 1_000;
    sim.d.retune(&tuning, sim.now);
    let error = closed_past_the_ping(&mut sim, order.pair);
    assert_eq!(
        error.as_ref().map(ToString::to_string),
        Some(
            "the engine did not answer the PING that admits a new connection within 300 ms"
                .to_string()
        )
    );
    sim.check();
}
