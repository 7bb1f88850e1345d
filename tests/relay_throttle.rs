//! An engine that throttles everyone ("Network congested. Endpoint is globally rate limited.",
//! RESOURCE_EXHAUSTED with no wait) is not one source's cooldown: another address would be
//! throttled too. The whole region backs off (100 ms, doubling while it keeps saying so, back
//! to 100 ms once a call is accepted), the address keeps its place, and the bundle goes once the
//! back-off ends. Driven through one thread's dispatcher without sockets.

mod dispatcher_support;
mod h2_support;
mod intake_support;
mod wire_support;

use bundle_relay::clock::Instant;
use bundle_relay::jito::GLOBAL_THROTTLE_MESSAGE;
use bundle_relay::relay::intake::Verdict;
use dispatcher_support::{MS, Sim, one_region};

/// The bundle posted, sent, and answered "globally rate limited" at `now`.
fn throttled(t: &mut Sim, seed: u64, now: Instant) {
    assert_eq!(t.post_bundle(seed, now), Verdict::Admitted);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0, "sent");
    t.answer_error(8, GLOBAL_THROTTLE_MESSAGE, now);
}

/// Whether a call goes out at `now`.
fn sends(t: &mut Sim, now: Instant) -> bool {
    t.d.dispatch(now);
    t.flush(now) > 0
}

fn at(now: Instant, ms: u64) -> Instant {
    Instant(now.0 + ms * MS)
}

#[test]
fn a_global_throttle_backs_the_whole_region_off_and_costs_the_address_no_cooldown() {
    // A 10 ms interval: the pair alone would be ready again long before the back-off ends.
    let (mut t, _, now) = one_region(10, 10_000);
    throttled(&mut t, 1, now);
    assert!(!sends(&mut t, at(now, 50)), "the region backs off");
    assert!(
        t.d.next_deadline().is_some_and(|d| d.0 <= at(now, 100).0),
        "the dispatcher wakes when the back-off ends"
    );
    assert!(
        sends(&mut t, at(now, 101)),
        "the same pair sends once it ends"
    );
    t.answer(at(now, 102));
    let s = t.totals();
    assert_eq!((s.delivered, s.cooldowns, s.retries), (1, 0, 1), "{s:?}");
    assert_eq!(t.stats.region(0).throttles.get(), 1);
    assert!(t.d.check_accounting());
}

#[test]
fn back_offs_double_while_the_engine_keeps_throttling_and_start_over_after_an_accept() {
    let (mut t, _, now) = one_region(10, 10_000);
    throttled(&mut t, 1, now);
    let second = at(now, 101);
    assert!(sends(&mut t, second));
    t.answer_error(8, GLOBAL_THROTTLE_MESSAGE, second);
    assert!(!sends(&mut t, at(second, 150)), "twice as long: 200 ms");
    assert!(sends(&mut t, at(second, 201)));
    let ok = at(second, 202);
    t.answer(ok);
    assert_eq!(t.totals().delivered, 1);
    // Accepted: the next throttle waits 100 ms again.
    let next = at(ok, 20);
    throttled(&mut t, 2, next);
    assert!(!sends(&mut t, at(next, 90)));
    assert!(sends(&mut t, at(next, 101)));
}

#[test]
fn a_sources_own_rate_limit_still_cools_only_that_pair() {
    let (mut t, _, now) = one_region(10, 10_000);
    assert_eq!(t.post_bundle(1, now), Verdict::Admitted);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    t.answer_error(
        8,
        "Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: Retry after 300ms",
        now,
    );
    assert!(!sends(&mut t, at(now, 290)));
    assert!(sends(&mut t, at(now, 301)));
    let s = t.totals();
    assert_eq!(s.cooldowns, 1, "{s:?}");
    assert_eq!(t.stats.region(0).throttles.get(), 0);
}
