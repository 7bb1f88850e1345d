//! Admission against the pool's pace: a bundle is answered only if the pairs it may leave
//! through can send it within its max age, behind the bundles already waiting for them. One
//! they cannot is refused at once, 429 with Jito's -32097 and the wait in its words, so the bot
//! sends it elsewhere, instead of being answered and then expiring unsent.

use crate::dispatcher_support;

use bundle_relay::clock::Instant;
use bundle_relay::metrics::tenants::Refused;
use bundle_relay::relay::intake::Verdict;
use dispatcher_support::{Sim, at_ms, body, one_region, one_region_with};

/// Bundles `seeds` posted at `now`, each admitted.
fn admit(t: &mut Sim, seeds: std::ops::RangeInclusive<u64>, now: Instant) {
    for seed in seeds {
        let v = t.post(&body(seed), now);
        assert_eq!(v, Verdict::Admitted, "bundle {seed}: {}", t.response());
    }
}

/// One pair paced at 1 s, bundles kept 2.5 s: the pair sends the first at once and one a
/// second after each, so three are sent in time; the fourth would leave 3 s from now, and is
/// refused naming the region, its max age and how long to wait: 540 ms, until its late line
/// (2500 − 2500/64 ms on) passes 3 s. Every bundle answered is delivered; none expires.
#[test]
fn a_bundle_the_pool_cannot_send_within_its_max_age_is_refused_429_not_answered_and_expired() {
    let (mut t, _, now) = one_region(1_000, 2_500);
    admit(&mut t, 1..=3, now);
    assert_eq!(
        t.post(&body(4), now),
        Verdict::RefusedBacklog,
        "{}",
        t.response()
    );
    let answer = t.response();
    assert!(answer.starts_with("HTTP/1.1 429 "), "{answer}");
    assert!(answer.contains("\r\nRetry-After: 1\r\n"), "{answer}");
    assert!(answer.contains("\"code\":-32097"), "{answer}");
    assert!(
        answer.contains(
            "Retry after 540ms (the relay's egress addresses for ny cannot send this bundle \
             within its max age of 2500 ms: it would leave 3000 ms from now, behind the bundles \
             already waiting)"
        ),
        "{answer}"
    );
    let refused = t.d.tenancy().stats().counts(0).refused;
    assert_eq!(
        refused[Refused::Backlog as usize],
        1,
        "the default tenant's count"
    );
    assert_eq!(
        t.stats.region(0).refused_backlog.get(),
        1,
        "ny's count: an operator reads which region's pool is behind"
    );
    for ms in [0, 1_000, 2_000, 3_000] {
        let now = at_ms(now, ms);
        t.d.run_timers(now);
        if t.send(now) {
            t.answer(now);
        }
    }
    let s = t.totals();
    assert_eq!(
        (s.admitted, s.delivered, s.expired, s.in_flight),
        (3, 3, 0, 0),
        "{s:?}"
    );
    assert!(t.d.check_accounting());
}

/// Once the pair has sent one (and been answered: a pair in a call gives no estimate), a
/// bundle fits again; the next does not.
#[test]
fn a_bundle_refused_for_the_backlog_is_admitted_once_the_pool_has_sent_what_waited() {
    let (mut t, _, now) = one_region(1_000, 2_500);
    admit(&mut t, 1..=3, now);
    assert!(t.send(now));
    t.answer(now);
    assert_eq!(t.post(&body(4), now), Verdict::RefusedBacklog);
    let later = at_ms(now, 1_000);
    t.d.run_timers(later);
    assert!(t.send(later));
    t.answer(later);
    assert_eq!(
        t.post(&body(4), later),
        Verdict::Admitted,
        "{}",
        t.response()
    );
    assert_eq!(
        t.post(&body(5), later),
        Verdict::RefusedBacklog,
        "{}",
        t.response()
    );
}

/// A pair of a region with a burst sends that many back to back before its interval paces
/// it: one pair, burst 5, 1 s, 2 s max age, sends six in time (five at once, one a second
/// on); the seventh would leave at 2 s, in the last 1/64 of its max age, and is refused.
#[test]
fn a_regions_burst_counts_as_sends_at_once() {
    let (mut t, _, now) = one_region_with(1_000, 2_000, |s| s.regions[0].burst = 5);
    admit(&mut t, 1..=6, now);
    assert_eq!(
        t.post(&body(7), now),
        Verdict::RefusedBacklog,
        "{}",
        t.response()
    );
}

/// While the relay drains for a stop, a bundle it cannot send in time is told so (503, the
/// relay is stopping), not 429 "retry later" at a relay about to exit.
#[test]
fn while_draining_a_late_bundle_is_refused_as_stopping_not_as_backlog() {
    let (mut t, _, now) = one_region(1_000, 2_500);
    admit(&mut t, 1..=3, now);
    t.d.drain_until(at_ms(now, 5_000));
    assert_eq!(
        t.post(&body(4), now),
        Verdict::Unavailable,
        "{}",
        t.response()
    );
    assert!(
        t.response().contains("the relay is stopping"),
        "{}",
        t.response()
    );
}

/// A bundle that would leave just inside its max age, but in its last 1/64 (one pair at 1 s,
/// 2 s max age, one bundle waiting and the pair busy until 1 s: it would leave at 2 s, the
/// late line at 1968.75 ms) is refused with the wait that brings it in time, 32 ms: retried
/// then, it is admitted. Never "Retry after 0ms", which a bot would take as "at once" and be
/// refused again.
#[test]
fn a_bundle_refused_in_the_last_sliver_of_its_max_age_is_told_the_wait_that_brings_it_in_time() {
    let (mut t, _, now) = one_region(1_000, 2_000);
    admit(&mut t, 1..=2, now);
    assert!(t.send(now));
    t.answer(now);
    assert_eq!(
        t.post(&body(3), now),
        Verdict::RefusedBacklog,
        "{}",
        t.response()
    );
    let answer = t.response();
    assert!(answer.contains("\r\nRetry-After: 1\r\n"), "{answer}");
    assert!(
        answer.contains(
            "Retry after 32ms (the relay's egress addresses for ny cannot send this bundle \
             within its max age of 2000 ms: it would leave 2000 ms from now, behind the bundles \
             already waiting)"
        ),
        "{answer}"
    );
    let retried = at_ms(now, 32);
    assert_eq!(
        t.post(&body(3), retried),
        Verdict::Admitted,
        "{}",
        t.response()
    );
}
