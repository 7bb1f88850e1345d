//! Two relay processes on one host during a takeover, driven without sockets: two dispatchers
//! with the same source and region booking in one pacing ledger. What the old one sent holds
//! the pair in the new one for the rest of its interval (the new one's limiter alone would
//! send at once), and the wait is counted.

mod h2_support;
mod intake_support;
mod wire_support;

use std::sync::Arc;

use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::http1;
use bundle_relay::limiter::PairId;
use bundle_relay::limiter::ledger::Ledger;
use bundle_relay::metrics::accounting::Stats;
use bundle_relay::relay::dispatch::Dispatcher;
use bundle_relay::relay::intake::{self, Port, Verdict};
use bundle_relay::relay::{RegionSpec, Spec};
use h2_support::{engine_hello, ok_reply};
use intake_support::{bundle, send_bundle_body};

const MS: u64 = 1_000_000;

struct Process {
    d: Dispatcher,
    stats: Arc<Stats>,
    pair: PairId,
    stream: u32,
}

impl Process {
    /// A relay process with one source (127.1.0.1) and one region (ny, 1 s), its pair
    /// connected at `now` and the engine's hello received.
    fn up(ledger: &Arc<Ledger>, now: Instant) -> Process {
        let region = RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap());
        let mut spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
        spec.upstream_timeout_ms = 600_000;
        spec.bundle_max_age_ms = 10_000;
        spec.ledger = Some(ledger.clone());
        let metrics = bundle_relay::metrics::Metrics::new(&["ny".to_string()], 1);
        let stats = Arc::new(Stats::default());
        let mut d = Dispatcher::new(
            &spec.thread(0),
            TickRate::NANOS,
            now,
            stats.clone(),
            metrics.thread(0),
        );
        let order = d.poll_connect(now).expect("the pair connects at start");
        d.connected(order.pair, now);
        let mut p = Process {
            d,
            stats,
            pair: order.pair,
            stream: 1,
        };
        p.flush(now);
        p.d.received(order.pair, &engine_hello(), now);
        p.flush(now);
        p
    }

    fn flush(&mut self, now: Instant) -> usize {
        let mut sent = 0;
        while let Some(p) = self.d.poll_dirty() {
            let n = self.d.transmit(p, now).len();
            self.d.transmitted(p, n, now);
            sent += n;
        }
        sent
    }

    /// Dispatches at `now`; true when a call went out.
    fn send(&mut self, now: Instant) -> bool {
        self.d.dispatch(now);
        self.flush(now) > 0
    }

    fn answer(&mut self, now: Instant) {
        self.d.received(self.pair, &ok_reply(self.stream), now);
        self.stream += 2;
        self.flush(now);
    }

    fn request(&mut self, seed: u64, now: Instant) -> Verdict {
        let (txs, _, _) = bundle(seed, 2);
        let body = send_bundle_body(&txs, seed);
        let mut out = [0u8; 4096];
        intake::handle(
            &mut self.d,
            Port::Pinned(0),
            http1::Method::Post,
            b"/api/v1/bundles",
            b"",
            body.as_bytes(),
            true,
            now,
            &mut out,
        )
        .1
    }
}

#[test]
fn a_pair_the_old_process_just_used_waits_out_its_interval_in_the_new_one() {
    let ledger = Arc::new(Ledger::private(4));
    let t0 = Instant(MS);
    let mut old = Process::up(&ledger, t0);
    assert!(
        old.send(t0),
        "the old process's tip-account refresh goes at once"
    );
    let answered = Instant(t0.0 + 3 * MS);
    old.answer(answered);

    // The new process comes up 200 ms later with a fresh limiter and a bundle to send.
    let t1 = Instant(t0.0 + 200 * MS);
    let mut new = Process::up(&ledger, t1);
    assert_eq!(new.request(1, t1), Verdict::Admitted);
    assert!(
        !new.send(t1),
        "the ledger holds the pair: the old process used it 200 ms ago"
    );
    assert!(new.stats.totals().ledger_waits >= 1);
    let before = Instant(answered.0 + 999 * MS);
    assert!(
        !new.send(before),
        "still inside the interval the old process booked"
    );
    let after = Instant(answered.0 + 1_001 * MS);
    assert!(
        new.send(after),
        "one interval after the old process's call ended"
    );
    new.answer(after);
    let s = new.stats.totals();
    assert_eq!((s.admitted, s.delivered), (1, 1), "{s:?}");

    // And the other way: the old one, still draining, now waits for the new one's send.
    assert_eq!(old.request(2, after), Verdict::Admitted);
    assert!(!old.send(Instant(after.0 + MS)));
    assert!(old.send(Instant(after.0 + 1_001 * MS)));
}
