//! One reactor thread's dispatcher driven without sockets: its first pair connected and in
//! rotation (the engine's SETTINGS and PING answer scripted), what it sends flushed, calls
//! answered OK, and bots' sendBundle requests on the region's pinned port. Shared by the tests
//! of handoffs, reloads and the pacing ledger.

#![allow(dead_code)]

use std::sync::Arc;

use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::http1;
use bundle_relay::limiter::PairId;
use bundle_relay::mesh::Mesh;
use bundle_relay::metrics::accounting::{Stats, Totals};
use bundle_relay::relay::Spec;
use bundle_relay::relay::dispatch::Dispatcher;
use bundle_relay::relay::intake::{self, Port, Verdict};
use bundle_relay::relay::tenancy::Claim;

use crate::h2_support::{engine_hello, ok_reply};
use crate::intake_support::{bundle, send_bundle_body};

pub const MS: u64 = 1_000_000;

pub struct Sim {
    pub d: Dispatcher,
    pub stats: Arc<Stats>,
    /// What the thread records for `/metrics`.
    pub metrics: bundle_relay::metrics::Metrics,
    pub pair: PairId,
    /// The next stream id the pair's connection uses.
    pub stream: u32,
    /// The engine's answers for the streams to come, built ahead (building one allocates).
    replies: Vec<Vec<u8>>,
    /// The last answer to a bot.
    out: Vec<u8>,
    out_len: usize,
}

/// Thread `t` of `spec` as it starts at `now`: nothing connected yet.
pub fn unconnected(spec: &Spec, t: usize, now: Instant) -> (Dispatcher, Arc<Stats>) {
    let (d, stats, _) = unconnected_metered(spec, t, now);
    (d, stats)
}

/// [`unconnected`], and the relay's metrics the thread records into.
pub fn unconnected_metered(
    spec: &Spec,
    t: usize,
    now: Instant,
) -> (Dispatcher, Arc<Stats>, bundle_relay::metrics::Metrics) {
    let names: Vec<String> = spec.regions.iter().map(|r| r.name.clone()).collect();
    let metrics = bundle_relay::metrics::Metrics::new(&names, spec.threads);
    let stats = Arc::new(Stats::default());
    let d = Dispatcher::new(
        &spec.thread(t),
        TickRate::NANOS,
        now,
        stats.clone(),
        metrics.thread(t),
    );
    (d, stats, metrics)
}

/// Sends everything `d` has for its pairs; returns how many bytes.
pub fn flush(d: &mut Dispatcher, now: Instant) -> usize {
    let mut sent = 0;
    while let Some(p) = d.poll_dirty() {
        let n = d.transmit(p, now).len();
        d.transmitted(p, n, now);
        sent += n;
    }
    sent
}

impl Sim {
    /// Thread `t` of `spec` at `now` (joined to `mesh` when given), its first pair connected,
    /// greeted by the engine and in rotation.
    pub fn connected(spec: &Spec, t: usize, mesh: Option<&Arc<Mesh>>, now: Instant) -> Sim {
        Sim::connected_through(spec, t, mesh, now, |_, _, _| {})
    }

    /// [`Sim::connected`] for a pair with a tunnel to set up first (a SOCKS5 proxy): `tunnel`
    /// plays the proxy's side, from the socket connected to the tunnel up.
    pub fn connected_through(
        spec: &Spec,
        t: usize,
        mesh: Option<&Arc<Mesh>>,
        now: Instant,
        tunnel: impl FnOnce(&mut Dispatcher, PairId, Instant),
    ) -> Sim {
        let (mut d, stats, metrics) = unconnected_metered(spec, t, now);
        if let Some(mesh) = mesh {
            d.join(mesh.clone(), t);
        }
        let order = d.poll_connect(now).expect("the pair connects at start");
        d.connected(order.pair, now);
        tunnel(&mut d, order.pair, now);
        let mut s = Sim {
            d,
            stats,
            metrics,
            pair: order.pair,
            stream: 1,
            replies: Vec::new(),
            out: vec![0; 4096],
            out_len: 0,
        };
        s.flush(now);
        s.d.received(order.pair, &engine_hello(), now);
        s.flush(now);
        s
    }

    /// Sends everything the dispatcher has for its pairs; returns how many bytes.
    pub fn flush(&mut self, now: Instant) -> usize {
        flush(&mut self.d, now)
    }

    /// Dispatches at `now`; true when a call went out.
    pub fn send(&mut self, now: Instant) -> bool {
        self.d.dispatch(now);
        self.flush(now) > 0
    }

    /// The engine answers the call in flight with OK.
    pub fn answer(&mut self, now: Instant) {
        let i = (self.stream / 2) as usize;
        if self.replies.len() <= i {
            self.replies
                .extend((self.replies.len()..i + 64).map(|k| ok_reply(2 * k as u32 + 1)));
        }
        self.stream += 2;
        let reply = std::mem::take(&mut self.replies[i]);
        self.d.received(self.pair, &reply, now);
        self.replies[i] = reply;
        self.flush(now);
    }

    /// The engine answers the call in flight with gRPC status `code` and `message`.
    pub fn answer_error(&mut self, code: u32, message: &str, now: Instant) {
        let reply = crate::h2_support::error_reply(self.stream, code, message);
        self.stream += 2;
        self.d.received(self.pair, &reply, now);
        self.flush(now);
    }

    /// Builds the engine's answers for the next `calls` streams now, so answering them later
    /// allocates nothing.
    pub fn prepare_replies(&mut self, calls: u32) {
        let first = self.stream / 2;
        self.replies = (0..first + calls + 64)
            .map(|k| ok_reply(2 * k + 1))
            .collect();
    }

    /// A bot's sendBundle `body` on the first region's pinned port.
    pub fn post(&mut self, body: &str, now: Instant) -> Verdict {
        self.post_as(Port::Pinned(0), Claim::LOOPBACK, "", body, now)
    }

    /// A bot's sendBundle `body` on `port` from `claim` (its source and `x-jito-auth`
    /// header), with `query` after the path.
    pub fn post_as(
        &mut self,
        port: Port,
        claim: Claim<'_>,
        query: &str,
        body: &str,
        now: Instant,
    ) -> Verdict {
        self.post_to(port, "/api/v1/bundles", claim, query, body, now)
    }

    /// As [`Sim::post_as`], to `path`.
    pub fn post_to(
        &mut self,
        port: Port,
        path: &str,
        claim: Claim<'_>,
        query: &str,
        body: &str,
        now: Instant,
    ) -> Verdict {
        let (n, verdict, _) = intake::handle(
            &mut self.d,
            port,
            bundle_relay::relay::queries::ConnRef::DETACHED,
            claim,
            http1::Method::Post,
            path.as_bytes(),
            query.as_bytes(),
            body.as_bytes(),
            true,
            now,
            &mut self.out,
        );
        self.out_len = n;
        verdict
    }

    /// A signed two-transaction bundle of `seed`, posted.
    pub fn post_bundle(&mut self, seed: u64, now: Instant) -> Verdict {
        let b = body(seed);
        self.post(&b, now)
    }

    /// The last answer's bytes.
    pub fn response_bytes(&self) -> &[u8] {
        &self.out[..self.out_len]
    }

    /// The last answer, as text.
    pub fn response(&self) -> String {
        String::from_utf8_lossy(&self.out[..self.out_len]).into_owned()
    }

    pub fn totals(&self) -> Totals {
        self.stats.totals()
    }
}

/// One thread, one region (ny, pinned), one source (127.1.0.1), its pair in rotation and
/// idle at the returned instant (the tip-account refresh sent at start answered and an
/// interval passed), and the spec it runs.
pub fn one_region(interval_ms: u64, max_age_ms: u64) -> (Sim, Spec, Instant) {
    one_region_with(interval_ms, max_age_ms, |_| {})
}

/// [`one_region`] with `tweak` applied to its spec first.
pub fn one_region_with(
    interval_ms: u64,
    max_age_ms: u64,
    tweak: impl FnOnce(&mut Spec),
) -> (Sim, Spec, Instant) {
    let region = bundle_relay::relay::RegionSpec {
        interval_ms,
        ..bundle_relay::relay::RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap())
    };
    let mut spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
    spec.bundle_max_age_ms = max_age_ms;
    spec.upstream_timeout_ms = 600_000;
    tweak(&mut spec);
    let now = Instant(MS);
    let mut t = Sim::connected(&spec, 0, None, now);
    assert!(t.send(now));
    t.answer(now);
    let now = Instant(now.0 + interval_ms * MS + 1);
    t.d.dispatch(now);
    (t, spec, now)
}

/// A sendBundle body for a signed two-transaction bundle of `seed`.
pub fn body(seed: u64) -> String {
    let (txs, _, _) = bundle(seed, 2);
    send_bundle_body(&txs, seed)
}

/// Every byte `pair` has to send now, flushed (no other pair may have any).
pub fn sent(d: &mut Dispatcher, pair: PairId, now: Instant) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(p) = d.poll_dirty() {
        assert_eq!(p, pair);
        let bytes = d.transmit(p, now).to_vec();
        d.transmitted(p, bytes.len(), now);
        out.extend(bytes);
    }
    out
}

/// What a dispatcher sent its pairs, flushed: the call each HEADERS frame opened, as (pair,
/// stream), for the engine to answer.
pub fn flush_calls(d: &mut Dispatcher, now: Instant, calls: &mut Vec<(PairId, u32)>) {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    while let Some(p) = d.poll_dirty() {
        let bytes = d.transmit(p, now).to_vec();
        d.transmitted(p, bytes.len(), now);
        let mut i = if bytes.starts_with(PREFACE) {
            PREFACE.len()
        } else {
            0
        };
        while i + 9 <= bytes.len() {
            let len = u32::from_be_bytes([0, bytes[i], bytes[i + 1], bytes[i + 2]]) as usize;
            let stream = u32::from_be_bytes(bytes[i + 5..i + 9].try_into().unwrap()) & 0x7fff_ffff;
            if bytes[i + 3] == 1 {
                calls.push((p, stream));
            }
            i += 9 + len;
        }
    }
}

/// The engine answers every call `calls` holds with OK.
pub fn answer_calls(d: &mut Dispatcher, now: Instant, calls: &mut Vec<(PairId, u32)>) {
    for (p, stream) in std::mem::take(calls) {
        d.received(p, &ok_reply(stream), now);
    }
}

/// Connects every pair thread `t` has due, each set up through the engine's hello.
pub fn connect_due(t: &mut Sim, now: Instant) {
    while let Some(order) = t.d.poll_connect(now) {
        t.d.connected(order.pair, now);
        t.flush(now);
        t.d.received(order.pair, &engine_hello(), now);
        t.flush(now);
    }
}

/// One thread, one region paced at 1 s, `sources` addresses, `tweak` applied to the spec:
/// every pair up and idle at the returned instant (the tip-account call answered and an
/// interval passed).
pub fn pool(sources: u8, tweak: impl FnOnce(&mut Spec)) -> (Sim, Instant) {
    let region = bundle_relay::relay::RegionSpec {
        interval_ms: 1_000,
        ..bundle_relay::relay::RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap())
    };
    let sources = (1..=sources)
        .map(|i| format!("127.1.0.{i}").parse().unwrap())
        .collect();
    let mut spec = Spec::local(vec![region], sources);
    spec.bundle_max_age_ms = 5_000;
    spec.upstream_timeout_ms = 600_000;
    tweak(&mut spec);
    let now = Instant(MS);
    let mut t = Sim::connected(&spec, 0, None, now);
    connect_due(&mut t, now);
    let mut calls = Vec::new();
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, &mut calls);
    answer_calls(&mut t.d, now, &mut calls);
    let now = Instant(now.0 + spec.regions[0].interval_ms * MS + 1);
    t.d.run_timers(now);
    t.d.dispatch(now);
    (t, now)
}

/// `ms` milliseconds after `now`.
pub fn at_ms(now: Instant, ms: u64) -> Instant {
    Instant(now.0 + ms * MS)
}
