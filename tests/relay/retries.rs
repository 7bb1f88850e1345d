//! Bundles an engine refused unprocessed (UNAVAILABLE, REFUSED_STREAM, streams past a GOAWAY,
//! lost before their last byte left): sent again, the first time at once, then after a back-off
//! that doubles, so an outage of a few hundred milliseconds (an engine's front end restarting)
//! delays them and does not spend their tries. A held bundle holds no other behind it.

use std::mem::take;

use crate::dispatcher_support::{MS, Sim, flush_calls, pool};
use crate::h2_support::{error_reply, ok_reply};

use bundle_relay::clock::Instant;
use bundle_relay::limiter::PairId;
use bundle_relay::relay::intake::Verdict;

/// Envoy's words when the engine behind it is away (gRPC UNAVAILABLE).
const AWAY: &str = "upstream connect error or disconnect/reset before headers";

fn at(now: Instant, ms: u64) -> Instant {
    Instant(now.0 + ms * MS)
}

/// Dispatches at `now` and answers every call that goes out: UNAVAILABLE while `away`, else OK.
/// Returns how many calls went out.
fn step(t: &mut Sim, now: Instant, away: bool, calls: &mut Vec<(PairId, u32)>) -> usize {
    t.d.run_timers(now);
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, calls);
    let n = calls.len();
    for (p, s) in take(calls) {
        let reply = if away {
            error_reply(s, 14, AWAY)
        } else {
            ok_reply(s)
        };
        t.d.received(p, &reply, now);
    }
    t.flush(now);
    n
}

#[test]
fn a_bundle_refused_unprocessed_through_a_100_ms_outage_is_delivered_after_it_not_rejected() {
    let (mut t, start) = pool(16, |_| {});
    assert_eq!(
        t.post_bundle(1, start),
        Verdict::Admitted,
        "{}",
        t.response()
    );
    let mut calls = Vec::new();
    let mut sent_at = Vec::new();
    for ms in 0..=700 {
        let now = at(start, ms);
        if step(&mut t, now, ms < 100, &mut calls) > 0 {
            sent_at.push(ms);
        }
    }
    let s = t.totals();
    assert_eq!(
        (s.admitted, s.delivered, s.rejected, s.in_flight),
        (1, 1, 0, 0),
        "sent at {sent_at:?} ms: {s:?}"
    );
    // Again at once, then 10, 20, 40 and 80 ms after each refusal.
    assert_eq!(sent_at, [0, 1, 11, 31, 71, 151], "ms after admission");
    assert!(t.d.check_accounting());
}

#[test]
fn the_dispatcher_wakes_when_a_held_bundles_back_off_ends() {
    let (mut t, start) = pool(16, |_| {});
    assert_eq!(t.post_bundle(1, start), Verdict::Admitted);
    let mut calls = Vec::new();
    assert_eq!(step(&mut t, start, true, &mut calls), 1);
    assert_eq!(step(&mut t, at(start, 1), true, &mut calls), 1);
    assert_eq!(step(&mut t, at(start, 2), true, &mut calls), 0, "held");
    let wake = t.d.next_deadline().expect("a deadline");
    assert!(
        wake.0 <= at(start, 11).0,
        "wakes {} ms after admission, not by 11",
        (wake.0 - start.0) / MS
    );
    assert_eq!(step(&mut t, at(start, 11), false, &mut calls), 1);
    assert_eq!(t.totals().delivered, 1);
}

#[test]
fn bundles_behind_a_held_one_go_at_once_and_it_goes_when_its_back_off_ends() {
    let (mut t, start) = pool(16, |_| {});
    assert_eq!(t.post_bundle(1, start), Verdict::Admitted);
    let mut calls = Vec::new();
    assert_eq!(step(&mut t, start, true, &mut calls), 1);
    assert_eq!(step(&mut t, at(start, 1), true, &mut calls), 1);
    // Held until 11 ms; two bundles that came after it are sent meanwhile.
    assert_eq!(t.post_bundle(2, at(start, 2)), Verdict::Admitted);
    assert_eq!(t.post_bundle(3, at(start, 2)), Verdict::Admitted);
    assert_eq!(step(&mut t, at(start, 2), false, &mut calls), 2);
    assert_eq!(t.totals().delivered, 2);
    assert_eq!(step(&mut t, at(start, 10), false, &mut calls), 0, "held");
    assert_eq!(step(&mut t, at(start, 11), false, &mut calls), 1);
    let s = t.totals();
    assert_eq!((s.admitted, s.delivered, s.in_flight), (3, 3, 0), "{s:?}");
    assert!(t.d.check_accounting());
}

#[test]
fn a_bundle_refused_unprocessed_at_every_try_ends_rejected_after_its_tries() {
    use bundle_relay::relay::dispatch::ATTEMPTS_MAX;
    let (mut t, start) = pool(16, |_| {});
    assert_eq!(t.post_bundle(1, start), Verdict::Admitted);
    let mut calls = Vec::new();
    let mut tries = 0;
    for ms in 0..=1_500 {
        tries += step(&mut t, at(start, ms), true, &mut calls);
    }
    let s = t.totals();
    assert_eq!((s.rejected, s.expired, s.in_flight), (1, 0, 0), "{s:?}");
    assert_eq!(tries, usize::from(ATTEMPTS_MAX));
}
