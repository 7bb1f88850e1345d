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
    process_with_burst(ledger, 1, now)
}

/// [`process`] with its region's burst.
fn process_with_burst(ledger: &Arc<Ledger>, burst: u32, now: Instant) -> Sim {
    let region = RegionSpec {
        burst,
        ..RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap())
    };
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

/// A pair held back because the other process sent on it is not the engine backing off:
/// `/debug/pairs` shows it as deferred, and the engine's cooldowns gauge does not count it. An
/// operator who reads cooldowns as the engine throttling this host would otherwise be sent
/// looking for a fault during every takeover, and on every host sharing a ledger file.
#[test]
fn a_pair_another_process_sent_on_shows_as_deferred_not_as_an_engine_cooldown() {
    let ledger = Arc::new(Ledger::private(4));
    let t0 = Instant(MS);
    let mut old = process(&ledger, t0);
    assert!(old.send(t0));
    old.answer(Instant(t0.0 + 3 * MS));
    let t1 = Instant(t0.0 + 200 * MS);
    let mut new = process(&ledger, t1);
    assert_eq!(new.post_bundle(1, t1), Verdict::Admitted);
    assert!(!new.send(t1), "the ledger holds the pair");
    new.d.sweep(t1);
    let mut text = String::new();
    new.d.render_pairs(t1, &mut text);
    assert!(
        text.contains("cooling 0 deferred 1 held 0"),
        "the pair waits for the other process's send: {text}"
    );
    assert_eq!(new.metrics.snapshot().regions[0].cooldowns_active, 0);

    // The engine's own cooldown on that pair, after the deferral, is a cooldown again.
    let t2 = Instant(t1.0 + 2_000 * MS);
    assert!(new.send(t2));
    new.answer_error(8, "Back-off triggered: Retry after 5000ms", t2);
    new.d.sweep(t2);
    let mut text = String::new();
    new.d.render_pairs(t2, &mut text);
    assert!(text.contains("cooling 1 deferred 0"), "{text}");
    assert_eq!(new.metrics.snapshot().regions[0].cooldowns_active, 1);
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
    reload(t, interval_ms, 1, 600_000, now);
}

/// A reload to `interval_ms`, `burst` and `upstream_timeout_ms` for `t`'s one region at `now`.
fn reload(t: &mut Sim, interval_ms: u64, burst: u32, upstream_timeout_ms: u64, now: Instant) {
    let region = RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap());
    let spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
    let mut tuning = Tuning::of_spec(&spec);
    tuning.upstream_timeout_ms = upstream_timeout_ms;
    tuning.bundle_max_age_ms = 10_000;
    tuning.regions[0] = Some(Pace { interval_ms, burst });
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

/// A call in flight after a spent burst, during a reload to a shorter interval: the ledger
/// reprices what the claim booked ahead (the burst's earlier intervals too) as the limiter
/// does, so the pair goes when the limiter says, not when the old burst would have allowed.
/// Burst 3 at 1 s, three sends in 3 ms; 250 ms from 4 ms on; the third answered at 10 ms:
/// the limiter allows the next at 254 ms.
#[test]
fn a_spent_burst_in_flight_during_a_reload_to_a_shorter_interval_frees_the_pair_as_the_limiter_does()
 {
    let ledger = Arc::new(Ledger::private(4));
    let at = |ms: u64| Instant(ms * MS);
    let mut t = process_with_burst(&ledger, 3, at(1));
    assert!(t.send(at(1)), "the tip-account refresh");
    t.answer(at(2));
    assert_eq!(t.post_bundle(1, at(2)), Verdict::Admitted);
    assert!(t.send(at(2)));
    t.answer(at(3));
    assert_eq!(t.post_bundle(2, at(3)), Verdict::Admitted);
    assert!(t.send(at(3)), "the burst's third");
    reload(&mut t, 250, 3, 600_000, at(4));
    t.answer(at(10));
    assert_eq!(t.post_bundle(3, at(10)), Verdict::Admitted);
    assert!(!t.send(at(250)), "the burst is spent until 254 ms");
    assert!(t.send(at(255)), "as the limiter allows");
    assert_eq!(t.totals().ledger_waits, 0);
}

/// A reload that shortens the call's hold (`upstream_timeout_ms`) while a call is in flight
/// (sent with the longer deadline, which it keeps): its end gives back the hold its claim
/// booked, so the pair is free one interval after the answer.
#[test]
fn a_reload_of_the_calls_hold_while_a_call_is_in_flight_frees_the_pair_one_interval_after_its_answer()
 {
    let ledger = Arc::new(Ledger::private(4));
    let at = |ms: u64| Instant(ms * MS);
    let mut t = process(&ledger, at(1));
    assert!(t.send(at(1)), "the tip-account refresh");
    reload(&mut t, 1_000, 1, 1_000, at(2));
    t.answer(at(3));
    assert_eq!(t.post_bundle(1, at(3)), Verdict::Admitted);
    assert!(!t.send(at(1_002)));
    assert!(t.send(at(1_004)), "one interval after the answer");
    assert_eq!(t.totals().ledger_waits, 0);
}

/// A region's burst holds in the ledger as in the limiter: three sends a burst of 3 allows go
/// back to back, none refused by the process's own bookings (a pair whose GCRA arrival time
/// was still under the burst's tolerance was booked as if at the tolerance, a whole
/// interval late, and the burst's third send waited as if another process had sent).
#[test]
fn a_burst_goes_whole_with_a_ledger_as_without_one() {
    let ledger = Arc::new(Ledger::private(4));
    let at = |ms: u64| Instant(ms * MS);
    let mut t = process_with_burst(&ledger, 3, at(1));
    assert!(t.send(at(1)), "the tip-account refresh");
    t.answer(at(2));
    for (i, ms) in [2, 3].into_iter().enumerate() {
        assert_eq!(t.post_bundle(i as u64, at(ms)), Verdict::Admitted);
        assert!(t.send(at(ms)), "send {} of the burst", i + 2);
        t.answer(at(ms));
    }
    assert_eq!(t.totals().ledger_waits, 0);
    assert_eq!(t.post_bundle(9, at(4)), Verdict::Admitted);
    assert!(!t.send(at(4)), "the burst is spent");
}

/// After an engine's Retry-After, the burst is whole again once the cooldown ends, with the
/// ledger as without it: the cooldown booked in the ledger (its end plus the burst's
/// tolerance, so another process honours it) is the process's own, and once passed it does
/// not count as a burst spent, nor as another process's sends. Burst 3 at 1 s, told to wait
/// 3 s at 2 ms: three sends go back to back at 3.01 s.
#[test]
fn after_a_cooldown_the_burst_goes_whole_with_a_ledger_as_without_one() {
    let ledger = Arc::new(Ledger::private(4));
    let at = |ms: u64| Instant(ms * MS);
    let mut t = process_with_burst(&ledger, 3, at(1));
    assert!(t.send(at(1)), "the tip-account refresh");
    t.answer(at(1));
    assert_eq!(t.post_bundle(1, at(1)), Verdict::Admitted);
    assert!(t.send(at(1)));
    t.answer_error(
        8,
        "Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: \
         Retry after 3000ms",
        at(2),
    );
    assert!(!t.send(at(2_000)), "cooling");
    let mut sent = 0;
    for (seed, ms) in [(2, 3_010), (3, 3_011), (4, 3_012)] {
        if seed > 2 {
            assert_eq!(t.post_bundle(seed, at(ms)), Verdict::Admitted);
        }
        if t.send(at(ms)) {
            sent += 1;
            t.answer(at(ms));
        }
    }
    assert_eq!(sent, 3, "the told bundle and two more: {:?}", t.totals());
    assert_eq!(t.totals().ledger_waits, 0);
}

/// A burst two processes share through the ledger (an upgrade's predecessor and successor):
/// the second send of a burst of 2 goes from the new process, and then the burst is spent
/// for it too. Its own pace says the pair is free; the ledger, which counts the old
/// process's send, says not yet, and only a booking of the process's own cooldown may be
/// set aside (there was none): a third send within the interval would be refused by the
/// engine.
/// Two processes on one ledger at a burst of 2 (1 s): the old one's tip-account refresh at
/// 1 ms, answered at 2 ms; the new one's at 3 ms, its call still in flight.
fn a_burst_shared_by_two_processes() -> (Sim, Sim) {
    let ledger = Arc::new(Ledger::private(4));
    let at = |ms: u64| Instant(ms * MS);
    let mut old = process_with_burst(&ledger, 2, at(1));
    assert!(old.send(at(1)), "the old process's tip-account refresh");
    old.answer(at(2));
    let mut new = process_with_burst(&ledger, 2, at(3));
    assert!(new.send(at(3)), "the new one's: the burst's second send");
    (old, new)
}

#[test]
fn a_burst_shared_by_two_processes_is_spent_once_for_both() {
    let at = |ms: u64| Instant(ms * MS);
    let (_old, mut new) = a_burst_shared_by_two_processes();
    new.answer(at(4));
    assert_eq!(new.post_bundle(1, at(5)), Verdict::Admitted);
    assert!(
        !new.send(at(5)),
        "the burst of 2 is spent across both processes"
    );
    assert!(new.totals().ledger_waits >= 1);
    assert!(!new.send(at(900)));
    assert!(
        new.send(at(1_010)),
        "an interval after the old process's send"
    );
}

/// A reload to a longer call deadline (`upstream_timeout_ms`) while the new process's call
/// is in flight, its claim counting the old process's send: the call's end still keeps that
/// send (its claim's hold is given back, not the new longer one), so the old process finds
/// the burst of 2 spent.
#[test]
fn a_reload_to_a_longer_call_deadline_during_a_call_that_counts_the_other_processs_send_keeps_that_send()
 {
    let at = |ms: u64| Instant(ms * MS);
    let (mut old, mut new) = a_burst_shared_by_two_processes();
    reload(&mut new, 1_000, 2, 601_000, at(3));
    new.answer(at(4));
    assert_eq!(old.post_bundle(1, at(5)), Verdict::Admitted);
    assert!(
        !old.send(at(5)),
        "the burst of 2 is spent across both processes"
    );
    assert!(old.send(at(1_010)), "an interval after the old send");
}

/// The same across a reload: the new process's call in flight counts the old one's send in its
/// claim, and a reload to a shorter interval rescales only what is its own. The old process
/// (not reloaded: an upgrade's predecessor) still finds the burst of 2 spent.
#[test]
fn a_reload_during_a_call_that_counts_the_other_processs_send_keeps_that_send() {
    let at = |ms: u64| Instant(ms * MS);
    let (mut old, mut new) = a_burst_shared_by_two_processes();
    reload(&mut new, 500, 2, 600_000, at(10));
    new.answer(at(20));
    assert_eq!(old.post_bundle(1, at(30)), Verdict::Admitted);
    assert!(
        !old.send(at(30)),
        "two sends in the last second: the burst of 2 is spent"
    );
}

/// A ledger file with no entry left for some of this relay's pairs (other relays' keys fill
/// it): those pairs pace alone, and a pair another relay also uses may send early. Said once,
/// with how many and what mends it, not left silent.
#[test]
fn pairs_a_full_ledger_has_no_entry_for_are_named_not_left_unshared_in_silence() {
    let ledger = Arc::new(Ledger::private(1));
    let mut other = 0u8;
    while ledger
        .slot(bundle_relay::limiter::ledger::pair_key(
            &format!("10.9.9.{other}"),
            "ny",
        ))
        .is_some()
    {
        other += 1;
    }
    let t = process(&ledger, Instant(MS));
    let mut lines = Vec::new();
    t.d.log().drain(|l| lines.push(l.to_string()));
    assert!(
        lines.iter().any(|l| l.contains(
            "the pacing ledger has no entry left for 1 of this thread's 1 pairs: they pace \
             alone, and one another relay of the host also uses may send early"
        )),
        "{lines:?}"
    );
}
