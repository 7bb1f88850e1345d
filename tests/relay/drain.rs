//! A relay that is stopping: what it still takes while it drains. A bundle answered must go
//! out before the process exits, so during the drain a bundle is admitted only when the pool
//! can send it before the drain's deadline; any other is refused with 503 (and `Retry-After`),
//! so the bot sends it elsewhere, instead of being answered and then failed at the deadline.

use crate::dispatcher_support;

use bundle_relay::clock::Instant;
use bundle_relay::relay::intake::Verdict;
use dispatcher_support::{MS, body, one_region_with};

/// One pair paced at 1 s, calls answered within 100 ms (a quarter of a 400 ms deadline),
/// draining for 500 ms: the first bundle goes at once and is admitted; the second could only
/// go a second later, after the exit, and is refused 503 saying why, with nothing admitted
/// for it; once the deadline leaves time for the pair's next send and its answer, one is
/// admitted again.
#[test]
fn while_draining_a_bundle_the_pool_cannot_send_before_the_exit_is_refused_503_not_answered() {
    let (mut t, _, now) = one_region_with(1_000, 2_000, |s| s.upstream_timeout_ms = 400);
    t.d.drain_until(Instant(now.0 + 500 * MS));
    assert_eq!(t.post(&body(1), now), Verdict::Admitted, "{}", t.response());
    assert!(t.send(now), "sent at once, within the drain");
    assert_eq!(
        t.post(&body(2), now),
        Verdict::Unavailable,
        "{}",
        t.response()
    );
    let answer = t.response();
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(answer.contains("\r\nRetry-After: 1\r\n"), "{answer}");
    assert!(
        answer.contains("the relay is stopping and cannot send this bundle before it exits"),
        "{answer}"
    );
    let totals = t.totals();
    assert_eq!((totals.admitted, totals.in_flight), (1, 1), "{totals:?}");
    t.answer(now);
    // A drain long enough for the pair's next send takes the bundle.
    t.d.drain_until(Instant(now.0 + 1_500 * MS));
    assert_eq!(t.post(&body(3), now), Verdict::Admitted, "{}", t.response());
    assert!(t.d.check_accounting());
}
