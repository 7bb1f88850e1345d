//! Two relay processes on one host during a takeover, driven without sockets: two dispatchers
//! with the same source and region booking in one pacing ledger. What the old one sent holds
//! the pair in the new one for the rest of its interval (the new one's limiter alone would
//! send at once), and the wait is counted.

use crate::dispatcher_support;

use std::sync::Arc;

use bundle_relay::clock::Instant;
use bundle_relay::limiter::ledger::Ledger;
use bundle_relay::relay::intake::Verdict;
use bundle_relay::relay::tuning::{Pace, Tuning};
use bundle_relay::relay::{RegionSpec, Spec};
use dispatcher_support::{MS, Sim};

/// A relay process with one source (127.1.0.1) and one region (ny, 1 s) booking in `ledger`,
/// its pair connected at `now` and the engine's hello received.
fn process(ledger: &Arc<Ledger>, now: Instant) -> Sim {
    let region = RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap());
    let mut spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
    spec.upstream_timeout_ms = 600_000;
    spec.bundle_max_age_ms = 10_000;
    spec.ledger = Some(ledger.clone());
    Sim::connected(&spec, 0, None, now)
}

#[test]
fn a_pair_the_old_process_just_used_waits_out_its_interval_in_the_new_one() {
    let ledger = Arc::new(Ledger::private(4));
    let t0 = Instant(MS);
    let mut old = process(&ledger, t0);
    assert!(
        old.send(t0),
        "the old process's tip-account refresh goes at once"
    );
    let answered = Instant(t0.0 + 3 * MS);
    old.answer(answered);

    // The new process comes up 200 ms later with a fresh limiter and a bundle to send.
    let t1 = Instant(t0.0 + 200 * MS);
    let mut new = process(&ledger, t1);
    assert_eq!(new.post_bundle(1, t1), Verdict::Admitted);
    assert!(
        !new.send(t1),
        "the ledger holds the pair: the old process used it 200 ms ago"
    );
    assert!(new.totals().ledger_waits >= 1);
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
    let s = new.totals();
    assert_eq!((s.admitted, s.delivered), (1, 1), "{s:?}");

    // And the other way: the old one, still draining, now waits for the new one's send.
    assert_eq!(old.post_bundle(2, after), Verdict::Admitted);
    assert!(!old.send(Instant(after.0 + MS)));
    assert!(old.send(Instant(after.0 + 1_001 * MS)));
}

/// A call that runs longer than the interval (a slow engine; the call may take up to
/// `upstream_timeout_ms`) holds the pair in the other process until it is answered, and one
/// interval past that: the engine stamps the request somewhere in that time, so a send from the
/// other process any sooner could reach it within the interval.
#[test]
fn a_call_still_unanswered_after_its_interval_holds_the_pair_in_the_other_process() {
    let ledger = Arc::new(Ledger::private(4));
    let t0 = Instant(MS);
    let mut old = process(&ledger, t0);
    assert!(old.send(t0), "the old process's call goes at once");

    let t1 = Instant(t0.0 + 1_500 * MS);
    let mut new = process(&ledger, t1);
    assert_eq!(new.post_bundle(1, t1), Verdict::Admitted);
    assert!(
        !new.send(t1),
        "the old process's call is still unanswered 1.5 s on: the pair is not free"
    );
    let answered = Instant(t0.0 + 2_000 * MS);
    old.answer(answered);
    assert!(
        !new.send(Instant(answered.0 + 999 * MS)),
        "inside the interval after the old call's answer"
    );
    assert!(
        new.send(Instant(answered.0 + 1_001 * MS)),
        "one interval after the answer, and no later: the answer gave the hold back"
    );
}

/// A call given up unanswered (the old process's drain deadline passed) may still reach the
/// engine: its claim stays whole, and the new process waits out the call's hold.
#[test]
fn a_call_given_up_at_shutdown_keeps_holding_the_pair_in_the_other_process() {
    let ledger = Arc::new(Ledger::private(4));
    let t0 = Instant(MS);
    let mut old = process(&ledger, t0);
    assert!(old.send(t0));
    old.d.abandon_all(Instant(t0.0 + 100 * MS));

    let t1 = Instant(t0.0 + 2_000 * MS);
    let mut new = process(&ledger, t1);
    assert_eq!(new.post_bundle(1, t1), Verdict::Admitted);
    assert!(
        !new.send(t1),
        "the abandoned call's hold (the upstream timeout) still runs"
    );
}

/// A reload to `interval_ms` for `t`'s one region at `now`.
fn reload_interval(t: &mut Sim, interval_ms: u64, now: Instant) {
    let region = RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap());
    let spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
    let mut tuning = Tuning::of_spec(&spec);
    tuning.upstream_timeout_ms = 600_000;
    tuning.bundle_max_age_ms = 10_000;
    tuning.regions[0] = Some(Pace {
        interval_ms,
        burst: 1,
    });
    t.d.retune(&tuning, now);
}

/// A reload to a shorter interval applies from the pair's last send at once, in the ledger
/// as in the limiter: the process's own booking, made at the old interval, does not hold the
/// pair the old interval more, nor count as another process's send.
#[test]
fn a_reload_to_a_shorter_interval_is_not_held_back_by_the_processs_own_booking() {
    let ledger = Arc::new(Ledger::private(4));
    let t0 = Instant(MS);
    let mut t = process(&ledger, t0);
    assert!(t.send(t0), "the tip-account refresh goes at once");
    let answered = Instant(t0.0 + 3 * MS);
    t.answer(answered);

    reload_interval(&mut t, 200, Instant(answered.0 + 10 * MS));
    let soon = Instant(answered.0 + 201 * MS);
    assert_eq!(t.post_bundle(1, soon), Verdict::Admitted);
    assert!(
        t.send(soon),
        "200 ms after the last call ended, as the reloaded interval says"
    );
    assert_eq!(
        t.totals().ledger_waits,
        0,
        "no other process sent: nothing waited on the ledger"
    );
}

/// The same for a call in flight during the reload: its answer books the new interval in the
/// ledger too, not the old one from its send.
#[test]
fn a_call_in_flight_during_a_reload_to_a_shorter_interval_books_the_new_one_in_the_ledger() {
    let ledger = Arc::new(Ledger::private(4));
    let t0 = Instant(MS);
    let mut t = process(&ledger, t0);
    assert!(t.send(t0), "the tip-account refresh goes at once");
    reload_interval(&mut t, 200, Instant(t0.0 + 10 * MS));
    let answered = Instant(t0.0 + 20 * MS);
    t.answer(answered);

    let soon = Instant(answered.0 + 201 * MS);
    assert_eq!(t.post_bundle(1, soon), Verdict::Admitted);
    assert!(
        t.send(soon),
        "200 ms after the call ended, as the reloaded interval says"
    );
    assert_eq!(t.totals().ledger_waits, 0);
}

/// A reload to a longer interval holds in the ledger as well: another process (a takeover's
/// successor, whose own limiter never saw this send) waits the new interval out.
#[test]
fn a_reload_to_a_longer_interval_holds_the_pair_for_the_other_process_too() {
    let ledger = Arc::new(Ledger::private(4));
    let t0 = Instant(MS);
    let mut old = process(&ledger, t0);
    assert!(old.send(t0));
    let answered = Instant(t0.0 + 3 * MS);
    old.answer(answered);
    reload_interval(&mut old, 3_000, Instant(answered.0 + 10 * MS));

    let t1 = Instant(answered.0 + 1_500 * MS);
    let mut new = process(&ledger, t1);
    reload_interval(&mut new, 3_000, t1);
    assert_eq!(new.post_bundle(1, t1), Verdict::Admitted);
    assert!(
        !new.send(t1),
        "the old process sent 1.5 s ago; the interval is 3 s now"
    );
    assert!(!new.send(Instant(answered.0 + 2_999 * MS)));
    assert!(new.send(Instant(answered.0 + 3_001 * MS)));
}
