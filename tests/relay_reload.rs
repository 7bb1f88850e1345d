//! A reload applied to one thread's dispatcher, driven without sockets: a region the config
//! no longer lists takes no new bundle (its pinned port says so by name) while the bundles
//! already waiting for it still go, and its connection closes once nothing waits; a shorter
//! max age judges waiting bundles by the new age; a source no longer listed closes its idle
//! connection and does not reconnect, and listed again it connects.

mod h2_support;
mod intake_support;
mod wire_support;

use std::sync::Arc;

use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::http1;
use bundle_relay::limiter::PairId;
use bundle_relay::metrics::accounting::Stats;
use bundle_relay::relay::dispatch::Dispatcher;
use bundle_relay::relay::intake::{self, Port, Verdict};
use bundle_relay::relay::tuning::Tuning;
use bundle_relay::relay::{RegionSpec, Spec};
use h2_support::{engine_hello, ok_reply};
use intake_support::{bundle, send_bundle_body};

const MS: u64 = 1_000_000;

struct One {
    d: Dispatcher,
    stats: Arc<Stats>,
    spec: Spec,
    pair: PairId,
    stream: u32,
}

impl One {
    fn flush(&mut self, now: Instant) -> usize {
        let mut sent = 0;
        while let Some(p) = self.d.poll_dirty() {
            let n = self.d.transmit(p, now).len();
            self.d.transmitted(p, n, now);
            sent += n;
        }
        sent
    }

    fn answer(&mut self, now: Instant) {
        self.d.received(self.pair, &ok_reply(self.stream), now);
        self.stream += 2;
        self.flush(now);
    }

    /// A bot's sendBundle on the region's pinned port: the status and the body.
    fn request(&mut self, seed: u64, now: Instant) -> (Verdict, String) {
        let (txs, _, _) = bundle(seed, 2);
        let body = send_bundle_body(&txs, seed);
        let mut out = [0u8; 4096];
        let (n, verdict, _) = intake::handle(
            &mut self.d,
            Port::Pinned(0),
            http1::Method::Post,
            b"/api/v1/bundles",
            b"",
            body.as_bytes(),
            true,
            now,
            &mut out,
        );
        (verdict, String::from_utf8_lossy(&out[..n]).into_owned())
    }
}

/// One thread, one region (ny, pinned), one source, its pair in rotation and idle.
fn one(interval_ms: u64, max_age_ms: u64) -> (One, Instant) {
    let region = RegionSpec {
        interval_ms,
        ..RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap())
    };
    let mut spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
    spec.bundle_max_age_ms = max_age_ms;
    spec.upstream_timeout_ms = 600_000;
    let metrics = bundle_relay::metrics::Metrics::new(&["ny".to_string()], 1);
    let stats = Arc::new(Stats::default());
    let now = Instant(MS);
    let mut d = Dispatcher::new(
        &spec.thread(0),
        TickRate::NANOS,
        now,
        stats.clone(),
        metrics.thread(0),
    );
    let order = d.poll_connect(now).expect("the pair connects at start");
    d.connected(order.pair, now);
    let mut t = One {
        d,
        stats,
        spec,
        pair: order.pair,
        stream: 1,
    };
    t.flush(now);
    t.d.received(order.pair, &engine_hello(), now);
    t.flush(now);
    // The tip-account refresh sent at start, answered: the pair is free after an interval.
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    t.answer(now);
    let now = Instant(now.0 + interval_ms * MS + 1);
    t.d.dispatch(now);
    (t, now)
}

#[test]
fn a_retired_region_takes_no_new_bundle_sends_what_waits_and_then_closes() {
    let (mut t, mut now) = one(100, 10_000);
    // One goes at once; the second waits for the pair's next interval.
    assert_eq!(t.request(1, now).0, Verdict::Admitted);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    assert_eq!(t.request(2, now).0, Verdict::Admitted);
    let mut tuning = Tuning::of_spec(&t.spec);
    tuning.regions[0] = None;
    t.d.retune(&tuning, now);
    let (verdict, answer) = t.request(3, now);
    assert_eq!(verdict, Verdict::Invalid);
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        answer.contains("region ny is no longer in the relay's config"),
        "{answer}"
    );
    t.answer(now);
    t.d.dispatch(now);
    assert_eq!(
        t.d.poll_close(),
        None,
        "a bundle still waits: the connection stays"
    );
    now = Instant(now.0 + 101 * MS);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0, "the bundle that waited went");
    t.answer(now);
    t.d.dispatch(now);
    assert_eq!(
        t.d.poll_close(),
        Some(t.pair),
        "nothing waits: the connection closes"
    );
    let s = t.stats.totals();
    assert_eq!((s.admitted, s.delivered, s.in_flight), (2, 2, 0), "{s:?}");
    assert!(t.d.check_accounting());
}

#[test]
fn a_shorter_max_age_judges_bundles_already_waiting() {
    let (mut t, now) = one(1_000, 10_000);
    assert_eq!(t.request(1, now).0, Verdict::Admitted);
    t.d.dispatch(now);
    t.flush(now);
    assert_eq!(t.request(2, now).0, Verdict::Admitted);
    let mut tuning = Tuning::of_spec(&t.spec);
    tuning.bundle_max_age_ms = 200;
    t.d.retune(&tuning, now);
    let later = Instant(now.0 + 201 * MS);
    t.d.dispatch(later);
    let s = t.stats.totals();
    assert_eq!(
        (s.expired, s.in_flight),
        (1, 1),
        "the waiting one expired by the new age: {s:?}"
    );
    assert!(t.d.check_accounting());
}

#[test]
fn a_source_no_longer_listed_closes_and_stays_down_until_listed_again() {
    let (mut t, now) = one(100, 10_000);
    let mut tuning = Tuning::of_spec(&t.spec);
    tuning.sources.clear();
    t.d.retune(&tuning, now);
    assert_eq!(t.d.poll_close(), Some(t.pair), "idle: it closes at once");
    t.d.socket_released(t.pair, now, 0);
    let later = Instant(now.0 + 60_000 * MS);
    t.d.dispatch(later);
    assert!(t.d.poll_connect(later).is_none(), "it does not reconnect");
    assert_eq!(t.d.sources_listed(), 0);
    t.d.retune(&Tuning::of_spec(&t.spec), later);
    let order = t.d.poll_connect(later).expect("listed again, it connects");
    assert_eq!(order.pair, t.pair);
}
