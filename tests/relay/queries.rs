//! Bots' status queries and the pool: bundles come first. A query that an engine must answer
//! takes a pair as a bundle does (the engine paces the source for it), so queries use the
//! pairs bundles leave, and never the last of a region's ready ones: a bundle that comes
//! next finds a pair at once however fast bots poll.

use crate::dispatcher_support;

use bundle_relay::clock::Instant;
use bundle_relay::relay::intake::Verdict;
use dispatcher_support::{MS, Sim, answer_calls, body, flush_calls};

fn pool(sources: u8) -> (Sim, Instant) {
    dispatcher_support::pool(sources, |_| {})
}

fn status_query(t: &mut Sim, seed: u8, now: Instant) {
    let id = format!("{seed:02x}").repeat(32);
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"getBundleStatuses","params":[["{id}"]]}}"#);
    assert_eq!(t.post(&body, now), Verdict::Deferred, "{}", t.response());
}

/// Calls the thread sent at `now` (its timers run first, as the reactor's loop runs them).
fn sent(t: &mut Sim, now: Instant) -> usize {
    let mut calls = Vec::new();
    t.d.run_timers(now);
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, &mut calls);
    calls.len()
}

/// Sixteen pairs, fourteen just used by bundles: a status query takes one of the two left;
/// a second, past the queries' pace, waits rather than take the last, and the bundle that
/// comes next goes at once. The waiting query is refused as Jito refuses a caller over its
/// rate once its wait is over.
#[test]
fn a_status_query_never_takes_the_last_ready_pair_a_bundle_would_wait_for() {
    let (mut t, now) = pool(16);
    for seed in 0..14 {
        assert_eq!(
            t.post_bundle(seed, now),
            Verdict::Admitted,
            "{}",
            t.response()
        );
    }
    let mut calls = Vec::new();
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, &mut calls);
    assert_eq!(calls.len(), 14);
    answer_calls(&mut t.d, now, &mut calls);
    status_query(&mut t, 1, now);
    assert_eq!(sent(&mut t, now), 1, "a query takes one of two ready pairs");
    // Past the queries' pace (an eighth of 16 pairs a second: one each 500 ms), before the
    // bundles' pairs are due again.
    let now = Instant(now.0 + 600 * MS);
    status_query(&mut t, 2, now);
    assert_eq!(
        sent(&mut t, now),
        0,
        "the last ready pair is left to bundles"
    );
    assert_eq!(
        t.post(&body(99), now),
        Verdict::Admitted,
        "{}",
        t.response()
    );
    assert_eq!(sent(&mut t, now), 1, "the bundle goes at once");
    let later = Instant(now.0 + 251 * MS);
    assert_eq!(sent(&mut t, later), 0);
    let (_, q) =
        t.d.poll_answered()
            .expect("the second query gave up waiting");
    let mut out = vec![0u8; 16 * 1024];
    let (n, verdict) = bundle_relay::relay::intake::write_answer(&t.d, q, true, later, &mut out);
    assert_eq!(verdict, Verdict::RefusedCap);
    assert!(out[..n].starts_with(b"HTTP/1.1 429 "));
}

/// However idle the pool, status queries take at most an eighth of a region's pace: with 16
/// pairs at 1 s, one each 500 ms. A query polled faster waits for its turn (or its 250 ms);
/// a bundle meanwhile goes at once.
#[test]
fn status_queries_take_an_eighth_of_a_regions_pace_at_most() {
    let (mut t, now) = pool(16);
    status_query(&mut t, 1, now);
    assert_eq!(sent(&mut t, now), 1);
    let at = |ms: u64| Instant(now.0 + ms * MS);
    status_query(&mut t, 2, at(300));
    assert_eq!(sent(&mut t, at(300)), 0, "paced");
    assert_eq!(
        t.post(&body(7), at(300)),
        Verdict::Admitted,
        "{}",
        t.response()
    );
    assert_eq!(sent(&mut t, at(300)), 1, "the bundle goes at once");
    assert_eq!(sent(&mut t, at(499)), 0);
    assert_eq!(sent(&mut t, at(500)), 1, "its turn");
}

/// A region of one pair keeps none back: a query takes it when it is ready (at most one a
/// pace of eight intervals).
#[test]
fn in_a_region_of_one_pair_a_status_query_takes_it_when_ready() {
    let (mut t, now) = pool(1);
    status_query(&mut t, 1, now);
    assert_eq!(sent(&mut t, now), 1, "the query takes the one pair");
}
