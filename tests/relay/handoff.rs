//! Bundles moving between threads, driven without sockets: two dispatchers (threads 0 and 1
//! of one relay) joined by a mesh, each with its own pair to one region, the engine's bytes
//! scripted. A bundle accepted on thread 0 goes to thread 1's pool when that can send it
//! sooner, is decoded into a slot thread 1 lent, and is admitted, sent and counted there; with
//! no slot lent it stays, and nothing is lost either way. In steady state a handed-off bundle
//! allocates nothing.

use crate::counting_alloc;
use crate::dispatcher_support;

use std::sync::Arc;

use bundle_relay::clock::Instant;
use bundle_relay::mesh::Mesh;
use bundle_relay::metrics::accounting::Totals;
use bundle_relay::relay::intake::{Port, Verdict};
use bundle_relay::relay::tenancy::Claim;
use bundle_relay::relay::{RegionSpec, Spec};
use counting_alloc::allocations;
use dispatcher_support::{MS, Sim as Thread, answer_calls, body, connect_due, flush_calls};

/// Two threads of a relay with one region and two sources, each thread's pair connected and
/// in rotation, and the mesh between them.
fn two_threads(interval_ms: u64, arena_slots: u32, now: Instant) -> (Thread, Thread, Instant) {
    let region = RegionSpec {
        interval_ms,
        ..RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap())
    };
    let mut spec = Spec::local(
        vec![region],
        vec!["127.1.0.1".parse().unwrap(), "127.1.0.2".parse().unwrap()],
    );
    spec.threads = 2;
    spec.arena_slots = arena_slots;
    spec.upstream_timeout_ms = 600_000;
    // A minute: one pair a thread sends a whole arena in time (these tests are of room).
    spec.bundle_max_age_ms = 60_000;
    let mesh = Arc::new(Mesh::new(2, arena_slots / 2));
    let threads: Vec<Thread> = (0..2)
        .map(|t| Thread::connected(&spec, t, Some(&mesh), now))
        .collect();
    let mut threads = threads.into_iter();
    let (mut a, mut b) = (threads.next().unwrap(), threads.next().unwrap());
    // Each publishes its pool and lends the other its slots; the tip-account refresh each
    // sends at start is answered, so both pairs are free again.
    for t in [&mut a, &mut b] {
        t.d.dispatch(now);
        assert!(t.flush(now) > 0, "the tip-account refresh went out");
        t.answer(now);
    }
    let now = Instant(now.0 + interval_ms * MS + 1);
    a.d.dispatch(now);
    b.d.dispatch(now);
    (a, b, now)
}

/// A bot's sendBundle on thread `t`'s pinned port for the region; an admitted one is answered
/// 200.
fn request(t: &mut Thread, body: &str, now: Instant) -> Verdict {
    let verdict = t.post(body, now);
    assert!(
        verdict != Verdict::Admitted || t.response_bytes().starts_with(b"HTTP/1.1 200"),
        "{}",
        t.response()
    );
    verdict
}

fn totals(t: &Thread) -> Totals {
    t.totals()
}

/// [`two_threads`] a millisecond after thread 0 sent bundle 1 on its pair: thread 0's pair is
/// held, so its next bundle goes to thread 1's idle one.
fn first_pair_held() -> (Thread, Thread, Instant) {
    let (mut a, b, now) = two_threads(1_000, 64, Instant(MS));
    request(&mut a, &body(1), now);
    a.d.dispatch(now);
    a.flush(now);
    (a, b, Instant(now.0 + MS))
}

#[test]
fn a_bundle_goes_to_the_thread_whose_pool_sends_it_soonest_and_is_counted_there() {
    let (mut a, mut b, mut now) = two_threads(1_000, 64, Instant(MS));
    // Both pairs are ready: the first bundle stays on the thread that read it.
    assert_eq!(request(&mut a, &body(1), now), Verdict::Admitted);
    a.d.dispatch(now);
    assert!(a.flush(now) > 0, "thread 0 sent it on its own pair");
    // Its pair is now held until the answer: the next bundle goes to thread 1's ready pair.
    now = Instant(now.0 + MS);
    assert_eq!(request(&mut a, &body(2), now), Verdict::Admitted);
    assert_eq!(totals(&a).handoffs_out, 1);
    assert_eq!(a.d.poll_wake(), Some(1), "thread 1 is to be woken");
    b.d.dispatch(now);
    assert_eq!(totals(&b).handoffs_in, 1);
    assert!(b.flush(now) > 0, "thread 1 sent it on its pair");
    b.answer(now);
    a.answer(now);
    // Each counted the bundle it sent, once: admitted, delivered, nothing in flight.
    let (ta, tb) = (totals(&a), totals(&b));
    assert_eq!(
        (ta.admitted, ta.delivered, ta.in_flight),
        (1, 1, 0),
        "{ta:?}"
    );
    assert_eq!(
        (tb.admitted, tb.delivered, tb.in_flight),
        (1, 1, 0),
        "{tb:?}"
    );
    assert!(a.d.check_accounting() && b.d.check_accounting());
    assert_eq!((a.d.in_flight(), b.d.in_flight()), (0, 0));
}

#[test]
fn without_a_lent_slot_the_bundle_stays_and_nothing_is_lost() {
    // Four slots a thread: one lent to the other (a quarter of the arena).
    let (mut a, mut b, mut now) = two_threads(1_000, 8, Instant(MS));
    assert_eq!(request(&mut a, &body(1), now), Verdict::Admitted);
    a.d.dispatch(now);
    a.flush(now);
    now = Instant(now.0 + MS);
    // Thread 0's pair is held: both bundles would go to thread 1, which lent one slot.
    assert_eq!(request(&mut a, &body(2), now), Verdict::Admitted);
    assert_eq!(request(&mut a, &body(3), now), Verdict::Admitted);
    let ta = totals(&a);
    assert_eq!(
        (ta.handoffs_out, ta.handoffs_without_credit),
        (1, 1),
        "{ta:?}"
    );
    assert_eq!(ta.in_flight, 2, "the first bundle and the one that stayed");
    b.d.dispatch(now);
    b.flush(now);
    b.answer(now);
    // Thread 0's pair frees after its answer and the interval: the bundle that stayed goes.
    a.answer(now);
    now = Instant(now.0 + 1_001 * MS);
    a.d.dispatch(now);
    assert!(a.flush(now) > 0);
    a.answer(now);
    let (ta, tb) = (totals(&a), totals(&b));
    assert_eq!(
        (ta.admitted, ta.delivered, ta.in_flight),
        (2, 2, 0),
        "{ta:?}"
    );
    assert_eq!(
        (tb.admitted, tb.delivered, tb.in_flight),
        (1, 1, 0),
        "{tb:?}"
    );
}

#[test]
fn a_bundle_with_a_bad_transaction_keeps_its_lent_slot_for_the_next() {
    let (mut a, mut b, mut now) = two_threads(1_000, 8, Instant(MS));
    request(&mut a, &body(1), now);
    a.d.dispatch(now);
    a.flush(now);
    now = Instant(now.0 + MS);
    let bad = r#"{"jsonrpc":"2.0","id":9,"method":"sendBundle","params":[["AAAA"],{"encoding":"base64"}]}"#;
    assert_eq!(request(&mut a, bad, now), Verdict::Invalid);
    // The one lent slot is still there for a good bundle.
    assert_eq!(request(&mut a, &body(2), now), Verdict::Admitted);
    assert_eq!(totals(&a).handoffs_out, 1);
    b.d.dispatch(now);
    b.flush(now);
    b.answer(now);
    assert_eq!(totals(&b).delivered, 1);
}

#[test]
fn bundles_handed_off_at_shutdown_are_counted_where_they_were_admitted() {
    let (mut a, mut b, now) = first_pair_held();
    request(&mut a, &body(2), now);
    // The drain deadline passes before thread 1 ran: it admits what it was handed, then fails
    // it with everything else it holds.
    b.d.abandon_all(now);
    a.d.abandon_all(now);
    let (ta, tb) = (totals(&a), totals(&b));
    assert_eq!((ta.admitted, ta.failed), (1, 1), "{ta:?}");
    assert_eq!((tb.admitted, tb.failed), (1, 1), "{tb:?}");
    assert!(ta.identity_holds() && tb.identity_holds());
}

/// Thread 1 reaches its drain deadline first (each thread's runs from when it saw the stop)
/// and stops; thread 0 still answers a bot a moment later. Thread 1's pool would send that
/// bundle sooner, but a stopped thread never runs again: the bundle is kept and counted on the
/// thread that answered it.
#[test]
fn a_bundle_answered_after_another_thread_stopped_is_kept_and_counted_where_it_was_answered() {
    let (mut a, mut b, now) = first_pair_held();
    b.d.abandon_all(now);
    b.d.close();
    // Thread 0's pair is held, thread 1's idle.
    assert_eq!(request(&mut a, &body(2), now), Verdict::Admitted);
    a.d.abandon_all(now);
    let (ta, tb) = (totals(&a), totals(&b));
    assert_eq!(
        (ta.admitted + tb.admitted, ta.failed + tb.failed),
        (2, 2),
        "both answered bundles counted and ended: {ta:?} {tb:?}"
    );
    assert_eq!(ta.handoffs_out, 0, "nothing handed to a stopped thread");
}

/// Thread 0 hands thread 1 a bundle it answered just as thread 1 stops: thread 1 waits until
/// every thread has stopped before it exits, and ends (as failed) what it was handed
/// meanwhile, so the bundle is counted, admitted and ended, where it went.
#[test]
fn a_bundle_handed_to_a_thread_as_it_stops_is_counted_there_before_it_exits() {
    let (mut a, mut b, now) = first_pair_held();
    // Thread 1 has ended what it held; thread 0 has not seen it stop yet.
    b.d.abandon_all(now);
    assert_eq!(request(&mut a, &body(2), now), Verdict::Admitted);
    assert_eq!(totals(&a).handoffs_out, 1);
    b.d.close();
    assert!(!b.d.closed_all(now), "thread 0 still runs");
    assert_eq!(
        (totals(&b).admitted, totals(&b).failed),
        (1, 1),
        "ended while waiting"
    );
    a.d.abandon_all(now);
    a.d.close();
    assert!(b.d.closed_all(now) && a.d.closed_all(now));
    let (ta, tb) = (totals(&a), totals(&b));
    assert_eq!((ta.admitted, ta.failed), (1, 1), "{ta:?}");
    assert_eq!((tb.admitted, tb.failed), (1, 1), "{tb:?}");
    assert!(ta.identity_holds() && tb.identity_holds());
}

/// A thread that is stopping takes nothing more: with this thread's own arena full, a bundle
/// that would take a slot the stopping thread lent earlier is refused 429 instead (it would
/// only be answered and then failed unsent there).
#[test]
fn a_full_arena_does_not_spill_into_a_slot_a_stopping_thread_lent() {
    // Four slots a thread, one of them lent to the other.
    let (mut a, mut b, now) = two_threads(1_000, 8, Instant(MS));
    b.d.leave();
    for seed in 1..=3 {
        assert_eq!(request(&mut a, &body(seed), now), Verdict::Admitted);
    }
    assert_eq!(request(&mut a, &body(4), now), Verdict::RefusedCap);
    let ta = totals(&a);
    assert_eq!((ta.admitted, ta.handoffs_out), (3, 0), "{ta:?}");
    b.d.abandon_all(now);
    assert_eq!(totals(&b).admitted, 0);
}

#[test]
fn handed_off_bundles_allocate_nothing_in_steady_state() {
    const CALLS: u32 = 300;
    let (mut a, mut b, mut now) = two_threads(1, 256, Instant(MS));
    // Thread 0's pair stays held by a call never answered, so every bundle goes to thread 1.
    request(&mut a, &body(1), now);
    a.d.dispatch(now);
    a.flush(now);
    let bodies: Vec<String> = (0..10 + CALLS as u64).map(|i| body(100 + i)).collect();
    let round = |a: &mut Thread, b: &mut Thread, now: Instant, body: &str| {
        assert_eq!(request(a, body, now), Verdict::Admitted);
        while a.d.poll_wake().is_some() {}
        b.d.dispatch(now);
        assert!(b.flush(now) > 0, "thread 1 sent the bundle");
        // As a reactor's iteration does: the answer, then the dispatcher's pass (which
        // publishes the pair free again).
        b.answer(now);
        b.d.dispatch(now);
        a.d.dispatch(now);
    };
    for body in &bodies[..10] {
        now = Instant(now.0 + 2 * MS);
        round(&mut a, &mut b, now, body);
    }
    b.prepare_replies(2 * CALLS);
    let before = allocations();
    for body in &bodies[10..] {
        now = Instant(now.0 + 2 * MS);
        round(&mut a, &mut b, now, body);
    }
    assert_eq!(allocations() - before, 0, "allocations in {CALLS} handoffs");
    let tb = totals(&b);
    assert_eq!(tb.delivered, 10 + CALLS as u64, "{tb:?}");
    assert_eq!(totals(&a).handoffs_out, 10 + CALLS as u64);
    assert!(b.d.check_accounting());
}

/// A reload removes every source of thread 1 while a bundle waits there for a pair: the
/// bundle moves to thread 0, which has a pair, and is delivered there (not left to expire on
/// a thread that can no longer send). It is counted admitted once, on the thread that took
/// it, and each thread's accounting balances with what it moved out and took in.
#[test]
fn a_bundle_waiting_on_a_thread_whose_sources_a_reload_removed_is_sent_by_another() {
    use bundle_relay::relay::tuning::Tuning;
    let (mut a, mut b, mut now) = two_threads(1_000, 64, Instant(MS));
    let spec_sources: Vec<bundle_relay::config::Source> = vec![
        bundle_relay::config::Source::Local("127.1.0.1".parse().unwrap()),
        bundle_relay::config::Source::Local("127.1.0.2".parse().unwrap()),
    ];
    // Both pairs held by a call each: the third bundle, posted on thread 1, waits there.
    assert_eq!(request(&mut a, &body(1), now), Verdict::Admitted);
    a.d.dispatch(now);
    assert!(a.flush(now) > 0);
    assert_eq!(request(&mut b, &body(2), now), Verdict::Admitted);
    b.d.dispatch(now);
    assert!(b.flush(now) > 0);
    a.d.dispatch(now);
    b.d.dispatch(now);
    now = Instant(now.0 + MS);
    assert_eq!(request(&mut b, &body(3), now), Verdict::Admitted);
    assert_eq!(
        totals(&b).in_flight,
        2,
        "its own call and the waiting bundle"
    );

    // The reload lists only thread 0's source.
    let region = RegionSpec {
        interval_ms: 1_000,
        ..RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap())
    };
    let mut tuning = Tuning::of_spec(&Spec::local(
        vec![region],
        vec!["127.1.0.1".parse().unwrap(), "127.1.0.2".parse().unwrap()],
    ));
    tuning.sources = spec_sources[..1]
        .iter()
        .map(|s| (s.id(), s.clone()))
        .collect();
    a.d.retune(&tuning, now);
    b.d.retune(&tuning, now);
    assert_eq!(b.d.sources_listed(), 0);
    // Both calls are answered; thread 1's pair closes (drained), thread 0's is free again
    // after the interval.
    a.answer(now);
    b.answer(now);
    while let Some(p) = b.d.poll_close() {
        b.d.socket_released(p, now, 0);
    }
    // Three seconds, past the max age: the waiting bundle must have gone by then.
    for _ in 0..30 {
        now = Instant(now.0 + 100 * MS);
        b.d.dispatch(now);
        a.d.dispatch(now);
        if a.flush(now) > 0 {
            a.answer(now);
        }
    }
    let (ta, tb) = (totals(&a), totals(&b));
    assert_eq!(
        tb.expired, 0,
        "nothing expired on the thread that lost its sources: {tb:?}"
    );
    assert_eq!(
        (ta.admitted + tb.admitted, ta.delivered + tb.delivered),
        (3, 3),
        "{ta:?} {tb:?}"
    );
    assert_eq!((ta.in_flight, tb.in_flight), (0, 0));
    assert!(a.d.check_accounting() && b.d.check_accounting());
}

/// A relay of two threads, two regions (ny, slc; 1 s) and two sources (one a thread), whose
/// open policy fans every rotating-port bundle out to both regions: its spec, its sources and
/// its threads, joined by their mesh, each with its first pair connected at `now`.
fn fanning_out_to_two_regions(now: Instant) -> (Spec, Vec<std::net::IpAddr>, Vec<Thread>) {
    let regions: Vec<RegionSpec> = [("ny", "127.0.0.1:10000"), ("slc", "127.0.0.2:10000")]
        .iter()
        .map(|(name, addr)| RegionSpec {
            interval_ms: 1_000,
            ..RegionSpec::plain(name, addr.parse().unwrap())
        })
        .collect();
    let sources: Vec<std::net::IpAddr> =
        vec!["127.1.0.1".parse().unwrap(), "127.1.0.2".parse().unwrap()];
    let mut spec = Spec::local(regions, sources.clone());
    spec.threads = 2;
    spec.arena_slots = 64;
    spec.upstream_timeout_ms = 600_000;
    spec.bundle_max_age_ms = 60_000;
    spec.open_to_all(bundle_relay::config::Policy {
        fan_out: 2,
        ..bundle_relay::config::Policy::open()
    });
    let mesh = Arc::new(Mesh::new(2, 32));
    let threads = (0..2)
        .map(|t| Thread::connected(&spec, t, Some(&mesh), now))
        .collect();
    (spec, sources, threads)
}

/// Every pair of `threads` up (one per region on each), the tip-account refresh answered:
/// each thread's list of calls for the engine to answer, empty.
fn every_pair_up(
    threads: &mut [Thread],
    now: Instant,
) -> Vec<Vec<(bundle_relay::limiter::PairId, u32)>> {
    let mut calls = vec![Vec::new(); threads.len()];
    for (t, c) in threads.iter_mut().zip(&mut calls) {
        connect_due(t, now);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, c);
        answer_calls(&mut t.d, now, c);
    }
    calls
}

/// Fanned-out bundles wait on a thread whose sources a reload then removes: the copies move
/// to the other thread and are delivered there, and each region's counts still add up over
/// the threads (admitted = ended + in flight), with nothing left in flight in any region on
/// either thread. A bundle is counted in the region it was admitted for, wherever its last
/// copy leaves from.
#[test]
fn fanned_out_bundles_moved_off_a_thread_a_reload_emptied_keep_each_regions_counts_adding_up() {
    use bundle_relay::config::Source;
    use bundle_relay::relay::intake::Port;
    use bundle_relay::relay::tenancy::Claim;
    use bundle_relay::relay::tuning::Tuning;
    let mut now = Instant(MS);
    let (spec, sources, mut threads) = fanning_out_to_two_regions(now);
    let mut calls = every_pair_up(&mut threads, now);
    now = Instant(now.0 + 1_000 * MS + 1);
    let rotating = |t: &mut Thread, seed: u64, now: Instant| {
        t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(seed), now)
    };
    // One fanned-out bundle on each thread uses every pair: each pair is then paced for a
    // second.
    for (i, (t, c)) in threads.iter_mut().zip(&mut calls).enumerate() {
        t.d.dispatch(now);
        assert_eq!(
            rotating(t, i as u64, now),
            Verdict::Admitted,
            "{}",
            t.response()
        );
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, c);
        assert_eq!(c.len(), 2, "thread {i} sent a copy to each region");
        answer_calls(&mut t.d, now, c);
    }
    // Two more on thread 1 wait there, each with a copy in both regions' lanes.
    now = Instant(now.0 + MS);
    for seed in [10, 11] {
        assert_eq!(
            rotating(&mut threads[1], seed, now),
            Verdict::Admitted,
            "{}",
            threads[1].response()
        );
    }
    threads[1].d.dispatch(now);
    assert_eq!(threads[1].totals().in_flight, 2);
    let primaries: Vec<u64> = (0..2)
        .map(|r| threads[1].stats.region(r).in_flight.get())
        .collect();
    assert_eq!(primaries, [1, 1], "one bundle admitted for each region");
    // The reload leaves thread 0's source only.
    let mut tuning = Tuning::of_spec(&spec);
    let kept = Source::Local(sources[0]);
    tuning.sources = [(kept.id(), kept)].into_iter().collect();
    for t in threads.iter_mut() {
        t.d.retune(&tuning, now);
    }
    assert_eq!(threads[1].d.sources_listed(), 0);
    for _ in 0..40 {
        now = Instant(now.0 + 100 * MS);
        for (t, c) in threads.iter_mut().zip(&mut calls) {
            t.d.dispatch(now);
            while let Some(p) = t.d.poll_close() {
                t.d.socket_released(p, now, 0);
            }
            flush_calls(&mut t.d, now, c);
            answer_calls(&mut t.d, now, c);
        }
    }
    let all = Totals::of(threads.iter().map(|t| &*t.stats));
    assert_eq!(
        (all.admitted, all.delivered, all.in_flight),
        (4, 4, 0),
        "{all:?}"
    );
    for r in 0..2 {
        let mut sum = bundle_relay::metrics::accounting::RegionTotals::default();
        for (i, t) in threads.iter().enumerate() {
            sum.add(t.stats.region(r));
            assert_eq!(
                t.stats.region(r).in_flight.get(),
                0,
                "region {r} on thread {i}"
            );
        }
        assert_eq!(
            sum.admitted,
            sum.delivered + sum.rejected + sum.expired + sum.failed + sum.in_flight,
            "region {r}: {sum:?}"
        );
    }
    for t in &threads {
        assert!(t.d.check_accounting());
    }
}

/// A rotating-port bundle its tenant fans out to two regions, admitted on a thread whose pairs
/// are all in calls: it goes to the other thread, whose pool sends it first, and there a copy
/// goes to each region, as it would have from the thread that read it.
#[test]
fn a_fanned_out_bundle_handed_to_another_thread_still_goes_to_each_region_it_fans_out_to() {
    use bundle_relay::relay::intake::Port;
    use bundle_relay::relay::tenancy::Claim;
    let mut now = Instant(MS);
    let (_spec, _sources, mut threads) = fanning_out_to_two_regions(now);
    let mut calls = every_pair_up(&mut threads, now);
    now = Instant(now.0 + 1_000 * MS + 1);
    let rotating = |t: &mut Thread, seed: u64, now: Instant| {
        t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(seed), now)
    };
    for t in threads.iter_mut() {
        t.d.dispatch(now);
    }
    // Bundle 1 takes both of thread 0's pairs; their calls stay unanswered.
    assert_eq!(rotating(&mut threads[0], 1, now), Verdict::Admitted);
    threads[0].d.dispatch(now);
    flush_calls(&mut threads[0].d, now, &mut calls[0]);
    assert_eq!(calls[0].len(), 2, "a copy to each region from thread 0");
    // Bundle 2 finds no pair of thread 0's free: thread 1's pool takes it.
    assert_eq!(rotating(&mut threads[0], 2, now), Verdict::Admitted);
    assert_eq!(
        threads[0].totals().handoffs_out,
        1,
        "bundle 2 went to thread 1"
    );
    threads[1].d.dispatch(now);
    flush_calls(&mut threads[1].d, now, &mut calls[1]);
    assert_eq!(calls[1].len(), 2, "a copy to each region from thread 1");
    answer_calls(&mut threads[1].d, now, &mut calls[1]);
    answer_calls(&mut threads[0].d, now, &mut calls[0]);
    let all = Totals::of(threads.iter().map(|t| &*t.stats));
    assert_eq!(
        (all.admitted, all.delivered, all.in_flight),
        (2, 2, 0),
        "{all:?}"
    );
}

/// A thread whose loop fails (its ring broke) after another handed it a bundle the bot was
/// already answered for: the bundle is counted there, admitted and failed, as is what the
/// failed thread held, so the books of the whole relay still say where every bundle went.
#[test]
fn a_bundle_handed_to_a_thread_whose_loop_failed_is_counted_failed_not_lost() {
    let (mut a, mut b, now) = first_pair_held();
    assert_eq!(request(&mut a, &body(2), now), Verdict::Admitted);
    assert_eq!(totals(&a).handoffs_out, 1, "bundle 2 went to thread 1");
    // Thread 1's ring fails before its loop read the handoff.
    b.d.end_after_failure(now);
    // Thread 0 stops later: it ends what it holds and closes; thread 1 then sees every thread
    // closed and has ended whatever reached it.
    a.d.leave();
    a.d.abandon_all(now);
    a.d.close();
    assert!(a.d.closed_all(now));
    assert!(b.d.closed_all(now));
    let (ta, tb) = (totals(&a), totals(&b));
    assert_eq!(ta.admitted + tb.admitted, 2, "{ta:?} {tb:?}");
    assert_eq!(ta.failed + tb.failed, 2, "{ta:?} {tb:?}");
    assert_eq!((tb.handoffs_in, tb.in_flight), (1, 0), "{tb:?}");
    assert!(a.d.check_accounting() && b.d.check_accounting());
}

/// A thread that has seen a reload retire a region (and drained its pair there, nothing
/// waiting) is handed a fanned-out bundle by a thread still on the old config, with a copy
/// for that region: the bundle is delivered and ends within seconds, its books adding up on
/// both threads, not held in flight until its max age a minute on.
#[test]
fn a_fanned_out_bundle_handed_to_a_thread_that_retired_one_of_its_regions_ends_delivered() {
    use bundle_relay::relay::intake::Port;
    use bundle_relay::relay::tenancy::Claim;
    use bundle_relay::relay::tuning::Tuning;
    let mut now = Instant(MS);
    let (spec, _, mut threads) = fanning_out_to_two_regions(now);
    let mut calls: Vec<Vec<_>> = vec![Vec::new(), Vec::new()];
    // One engine round for both threads: connects, sends, answers, closes.
    let pump = |threads: &mut Vec<Thread>, calls: &mut Vec<Vec<_>>, now: Instant, answer: bool| {
        for (t, c) in threads.iter_mut().zip(calls.iter_mut()) {
            connect_due(t, now);
            t.d.dispatch(now);
            flush_calls(&mut t.d, now, c);
            if answer {
                answer_calls(&mut t.d, now, c);
            }
            while let Some(p) = t.d.poll_close() {
                t.d.socket_released(p, now, 0);
            }
        }
    };
    pump(&mut threads, &mut calls, now, true);
    now = Instant(now.0 + 1_000 * MS + 1);
    // Thread 0 sends a fanned-out bundle: both its pairs held, unanswered for now.
    let rotating = |t: &mut Thread, seed: u64, now: Instant| {
        t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(seed), now)
    };
    for t in threads.iter_mut() {
        t.d.dispatch(now);
    }
    assert_eq!(rotating(&mut threads[0], 1, now), Verdict::Admitted);
    pump(&mut threads, &mut calls, now, false);
    assert_eq!(
        (calls[0].len(), calls[1].len()),
        (2, 0),
        "a copy to each region from thread 0"
    );
    // Thread 1 applies the reload retiring ny; nothing waits for it there: it drains.
    let mut tuning = Tuning::of_spec(&spec);
    tuning.regions[0] = None;
    threads[1].d.retune(&tuning, now);
    pump(&mut threads, &mut calls, now, false);
    assert_eq!(
        threads[1].totals().pairs_up,
        1,
        "thread 1's ny pair drained"
    );
    // Thread 0, still on the old config, takes another: its pairs are held, thread 1's free.
    now = Instant(now.0 + MS);
    pump(&mut threads, &mut calls, now, false);
    assert_eq!(rotating(&mut threads[0], 2, now), Verdict::Admitted);
    pump(&mut threads, &mut calls, now, false);
    assert_eq!(threads[1].totals().handoffs_in, 1, "handed to thread 1");
    for _ in 0..30 {
        now = Instant(now.0 + 100 * MS);
        pump(&mut threads, &mut calls, now, true);
    }
    let all = Totals::of(threads.iter().map(|t| &*t.stats));
    assert_eq!(
        (all.admitted, all.delivered, all.expired, all.in_flight),
        (2, 2, 0, 0),
        "{all:?}"
    );
    for t in &threads {
        assert!(t.d.check_accounting());
    }
}

/// A fanned-out bundle whose copy to one region is answered UNAVAILABLE at every try uses up
/// that copy's tries alone: the copy to the healthy region, answered UNAVAILABLE once when the
/// other's tries are spent, is still sent again and delivered. Each copy has its own
/// `ATTEMPTS_MAX` tries; one sick region does not reject a bundle another would take.
#[test]
fn a_region_that_never_takes_a_fanned_out_copy_leaves_the_other_copys_retries_whole() {
    use bundle_relay::relay::dispatch::ATTEMPTS_MAX;
    use bundle_relay::relay::intake::Port;
    use bundle_relay::relay::tenancy::Claim;
    let mut now = Instant(MS);
    let (_, _, mut threads) = fanning_out_to_two_regions(now);
    let mut calls = every_pair_up(&mut threads, now);
    now = Instant(now.0 + 1_000 * MS + 1);
    let t = &mut threads[0];
    let c = &mut calls[0];
    t.d.dispatch(now);
    assert_eq!(
        t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(1), now),
        Verdict::Admitted,
        "{}",
        t.response()
    );
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, c);
    assert_eq!(c.len(), 2, "a copy to each region");
    // The sick region's pair is the first called; the healthy one's call is held unanswered.
    let (sick, _) = c[0];
    let mut healthy = Vec::new();
    let unavailable = |d: &mut bundle_relay::relay::dispatch::Dispatcher, s: u32, now| {
        d.received(
            sick,
            &crate::h2_support::error_reply(s, 14, "temporarily unavailable"),
            now,
        )
    };
    let mut sick_tries = 0;
    for _ in 0..(2 * ATTEMPTS_MAX) {
        for (p, s) in std::mem::take(c) {
            if p == sick {
                sick_tries += 1;
                unavailable(&mut t.d, s, now);
            } else {
                healthy.push((p, s));
            }
        }
        now = Instant(now.0 + 1_000 * MS + 1);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, c);
    }
    assert_eq!(t.totals().in_flight, 1, "{:?}", t.totals());
    // The healthy region answers UNAVAILABLE once, then takes the bundle.
    let (p, s) = healthy.pop().expect("the healthy copy's call");
    assert!(healthy.is_empty());
    t.d.received(
        p,
        &crate::h2_support::error_reply(s, 14, "temporarily unavailable"),
        now,
    );
    for _ in 0..3 {
        now = Instant(now.0 + 1_000 * MS + 1);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, c);
        answer_calls(&mut t.d, now, c);
    }
    let totals = t.totals();
    assert_eq!(
        (
            totals.admitted,
            totals.delivered,
            totals.rejected,
            totals.in_flight
        ),
        (1, 1, 0, 0),
        "{totals:?}"
    );
    assert_eq!(sick_tries, u32::from(ATTEMPTS_MAX), "the sick copy's tries");
    assert!(t.d.check_accounting());
}

/// A fanned-out bundle's copies share one hold in its meta, but only a copy refused twice or
/// more waits for it: the other copy's first refusal (one connection's GOAWAY or stream
/// limit) is sent again at once on another pair, not held behind a region that keeps refusing.
#[test]
fn a_fanned_out_copys_first_refusal_goes_again_at_once_while_the_other_copy_is_held() {
    use bundle_relay::relay::intake::Port;
    use bundle_relay::relay::tenancy::Claim;
    let unavailable = |s: u32| crate::h2_support::error_reply(s, 14, "temporarily unavailable");
    let mut now = Instant(MS);
    // One thread: two pairs a region.
    let (mut spec, _, _) = fanning_out_to_two_regions(now);
    spec.threads = 1;
    let mut threads = vec![Thread::connected(&spec, 0, None, now)];
    let mut calls = every_pair_up(&mut threads, now);
    now = Instant(now.0 + 1_000 * MS + 1);
    let t = &mut threads[0];
    let c = &mut calls[0];
    t.d.run_timers(now);
    t.d.dispatch(now);
    assert_eq!(
        t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(1), now),
        Verdict::Admitted
    );
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, c);
    assert_eq!(c.len(), 2, "a copy to each region");
    let ((sick, first), (healthy, held)) = (c[0], c[1]);
    c.clear();
    // The sick region refuses its copy on both its pairs: held 10 ms.
    t.d.received(sick, &unavailable(first), now);
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, c);
    let (other, second) = c
        .pop()
        .expect("the sick copy's second try, on its other pair");
    assert_ne!(other, sick);
    t.d.received(other, &unavailable(second), now);
    // The healthy region refuses its copy once: it goes again at once, on its other pair.
    t.d.received(healthy, &unavailable(held), now);
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, c);
    assert_eq!(c.len(), 1, "the healthy copy, at once: {c:?}");
    assert_ne!(c[0].0, healthy);
    assert!(t.d.check_accounting());
}

/// The calls a thread wrote, by pair and stream.
type Calls = Vec<(bundle_relay::limiter::PairId, u32)>;

/// Two threads of a relay with `regions` regions paced at 10 ms and three sources each, every
/// pair up and idle; calls time out after 4 s (a region goes silent after 1 s), PINGs are
/// never due, bundles keep a minute.
fn two_threads_of_three_pairs(regions: usize) -> ([Thread; 2], [Calls; 2], Instant) {
    let (threads, calls, now) = two_threads_of(regions, 6, 10, 4_000);
    (threads, calls, Instant(now.0 + 11 * MS))
}

/// Two threads of a relay with `regions` regions paced at `interval_ms` and `sources` sources
/// (half each), every pair up and its start-up calls answered, at 1 ms.
fn two_threads_of(
    regions: usize,
    sources: u8,
    interval_ms: u64,
    upstream_timeout_ms: u64,
) -> ([Thread; 2], [Calls; 2], Instant) {
    let regions = ["ny", "tokyo"][..regions]
        .iter()
        .enumerate()
        .map(|(i, name)| RegionSpec {
            interval_ms,
            ..RegionSpec::plain(name, format!("127.0.0.{}:10000", i + 1).parse().unwrap())
        })
        .collect();
    let sources = (1..=sources)
        .map(|i| format!("127.1.0.{i}").parse().unwrap())
        .collect();
    let mut spec = Spec::local(regions, sources);
    spec.threads = 2;
    spec.arena_slots = 64;
    spec.upstream_timeout_ms = upstream_timeout_ms;
    // The silence PINGs every connection; this engine's front end would answer them.
    spec.ping_timeout_ms = 600_000;
    spec.bundle_max_age_ms = 60_000;
    let now = Instant(MS);
    let mesh = Arc::new(Mesh::new(2, 32));
    let mut threads: [Thread; 2] =
        std::array::from_fn(|t| Thread::connected(&spec, t, Some(&mesh), now));
    let mut calls = [Vec::new(), Vec::new()];
    for (t, c) in threads.iter_mut().zip(&mut calls) {
        connect_due(t, now);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, c);
        answer_calls(&mut t.d, now, c);
    }
    (threads, calls, now)
}

fn step(t: &mut Thread, now: Instant, c: &mut Calls) {
    t.d.run_timers(now);
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, c);
}

/// Each thread judges its engine's silence on its own calls, and probes on its own back-off
/// (up to 5 s apart once probes go unanswered). Once one thread's engine answers a bundle
/// again, the others are woken (and do not sleep meanwhile) and send again without waiting
/// for their own probe: one bundle at a time until one is answered there, since a thread's
/// own path to the engine may still hang.
#[test]
fn a_thread_still_silent_sends_again_once_another_hears_its_engine_answer_a_bundle() {
    let (mut threads, mut calls, now) = two_threads_of_three_pairs(1);
    // Each thread sends a bundle of its own, and neither is answered.
    for (seed, (t, c)) in [1u64, 2]
        .into_iter()
        .zip(threads.iter_mut().zip(&mut calls))
    {
        step(t, now, c);
        assert_eq!(request(t, &body(seed), now), Verdict::Admitted);
        step(t, now, c);
        assert_eq!(c.len(), 1, "thread sent bundle {seed}");
        c.clear();
    }
    // Past a quarter of the call deadline both are silent; each probes. Then two bundles
    // for each stay where they came (neither thread has an estimate to offer).
    let now = Instant(now.0 + 1_001 * MS);
    for (t, c) in threads.iter_mut().zip(&mut calls) {
        step(t, now, c);
        assert_eq!(totals(t).silences, 1);
        assert_eq!(c.len(), 1, "a probe");
    }
    for (seeds, (t, c)) in [[3u64, 4], [5, 6]]
        .into_iter()
        .zip(threads.iter_mut().zip(&mut calls))
    {
        for seed in seeds {
            assert_eq!(request(t, &body(seed), now), Verdict::Admitted);
        }
        step(t, now, c);
        assert_eq!(c.len(), 1, "no bundle while silent");
    }
    let [a, b] = &mut threads;
    let [ca, cb] = &mut calls;
    // Thread 0's probe is answered; its trial bundle goes and is answered: its silence ends.
    answer_calls(&mut a.d, now, ca);
    let now = Instant(now.0 + 11 * MS);
    step(a, now, ca);
    assert_eq!(ca.len(), 1, "thread 0's trial bundle");
    answer_calls(&mut a.d, now, ca);
    step(a, now, ca);
    assert_eq!(totals(a).delivered, 1, "{:?}", totals(a));
    assert_eq!(a.d.poll_wake(), Some(1), "thread 1 is to be woken");
    assert!(b.d.has_inbound(), "thread 1 does not go to sleep on it");
    // Thread 1's probe is still out; one of its bundles goes all the same, and only one.
    step(b, now, cb);
    assert!(!b.d.has_inbound());
    assert_eq!(cb.len(), 2, "thread 1's probe and one bundle: {cb:?}");
    let probe = cb.remove(0);
    answer_calls(&mut b.d, now, cb);
    // Answered: thread 1's silence ends and its other bundle goes.
    let now = Instant(now.0 + 11 * MS);
    step(b, now, cb);
    assert_eq!(cb.len(), 1, "thread 1's last bundle");
    answer_calls(&mut b.d, now, cb);
    let tb = totals(b);
    assert_eq!(
        (tb.admitted, tb.delivered),
        (3, 2),
        "{tb:?} (probe {probe:?})"
    );
    assert!(a.d.check_accounting() && b.d.check_accounting());
}

/// A thread acts on another's news once: one that heard it while its own calls were still
/// in time, and went silent after, waits for its own probe's answer before sending again.
#[test]
fn a_silence_that_began_after_the_news_was_heard_waits_for_its_own_probe() {
    let (mut threads, mut calls, now) = two_threads_of_three_pairs(1);
    let [a, b] = &mut threads;
    let [ca, cb] = &mut calls;
    // Thread 0's bundle hangs, and its region goes silent a second on.
    step(a, now, ca);
    assert_eq!(request(a, &body(1), now), Verdict::Admitted);
    step(a, now, ca);
    ca.clear();
    let now = Instant(now.0 + 1_001 * MS);
    step(a, now, ca);
    assert_eq!((totals(a).silences, ca.len()), (1, 1), "silent: a probe");
    // Thread 1's bundle, written now, hangs too.
    step(b, now, cb);
    assert_eq!(request(b, &body(2), now), Verdict::Admitted);
    step(b, now, cb);
    assert_eq!(cb.len(), 1);
    cb.clear();
    // Thread 0 hears its engine again (its probe, then a bundle): news for thread 1, read
    // while its own call is still within the second.
    answer_calls(&mut a.d, now, ca);
    assert_eq!(request(a, &body(3), now), Verdict::Admitted);
    let now = Instant(now.0 + 11 * MS);
    step(a, now, ca);
    assert_eq!(ca.len(), 1, "thread 0's trial bundle");
    answer_calls(&mut a.d, now, ca);
    step(a, now, ca);
    step(b, now, cb);
    assert_eq!(totals(b).silences, 0);
    // Past the second its call is unanswered: silent, probing (not on trial from the old
    // news, which would send no probe).
    let now = Instant(now.0 + 1_000 * MS);
    step(b, now, cb);
    assert_eq!((totals(b).silences, cb.len()), (1, 1), "silent: a probe");
    // Meanwhile its bundles leave through thread 0, which sends.
    assert_eq!(request(b, &body(4), now), Verdict::Admitted);
    assert_eq!(totals(b).handoffs_out, 1, "{:?}", totals(b));
    let now = Instant(now.0 + 11 * MS);
    step(b, now, cb);
    assert_eq!(cb.len(), 1, "the probe alone: {cb:?}");
}

/// A bot's sendBundle on thread `t`'s pinned port for region `r`.
fn request_for(t: &mut Thread, r: u8, seed: u64, now: Instant) -> Verdict {
    t.post_as(Port::Pinned(r), Claim::LOOPBACK, "", &body(seed), now)
}

/// Thread `t`, whose call to region `r` has hung past the silence threshold at `now`: the
/// region goes silent, its probe is answered, and bundle `seed`, sent as its trial, is
/// answered: news of `r` for the other thread. Returns when.
fn hears_again(t: &mut Thread, c: &mut Calls, r: u8, seed: u64, now: Instant) -> Instant {
    step(t, now, c);
    assert_eq!(c.len(), 1, "the probe");
    answer_calls(&mut t.d, now, c);
    assert_eq!(request_for(t, r, seed, now), Verdict::Admitted);
    let now = Instant(now.0 + 11 * MS);
    step(t, now, c);
    assert_eq!(c.len(), 1, "the trial bundle");
    answer_calls(&mut t.d, now, c);
    step(t, now, c);
    now
}

/// News names a region and when it was heard; a thread acts on each region's time once. One
/// that read the news of ny while its own ny call was still in time, and went silent on ny
/// after, is not put on trial by the next news, of tokyo: its ny bundles keep leaving through
/// the thread that sends, and it waits for its own probe.
#[test]
fn news_of_another_region_leaves_a_silence_that_began_after_the_last_news_of_its_own() {
    let (mut threads, mut calls, now) = two_threads_of_three_pairs(2);
    let [a, b] = &mut threads;
    let [ca, cb] = &mut calls;
    let (ny, tokyo) = (0u8, 1u8);
    // Thread 0's ny bundle hangs; half a second on, thread 1's does too.
    step(a, now, ca);
    assert_eq!(request_for(a, ny, 1, now), Verdict::Admitted);
    step(a, now, ca);
    ca.clear();
    let half = Instant(now.0 + 500 * MS);
    step(b, half, cb);
    assert_eq!(request_for(b, ny, 2, half), Verdict::Admitted);
    step(b, half, cb);
    assert_eq!(cb.len(), 1, "thread 1's ny bundle");
    cb.clear();
    // Thread 0 hears its ny engine again: news of ny.
    let now = hears_again(a, ca, ny, 3, Instant(now.0 + 1_001 * MS));
    // Thread 1 reads it while its own ny call is half a second old: nothing to do.
    step(b, now, cb);
    assert_eq!((totals(b).silences, cb.len()), (0, 0));
    // Thread 0's tokyo bundle hangs.
    assert_eq!(request_for(a, tokyo, 4, now), Verdict::Admitted);
    step(a, now, ca);
    assert_eq!(ca.len(), 1, "thread 0's tokyo bundle");
    ca.clear();
    // Thread 1's ny call is unanswered past the second: ny silent there, probing.
    let later = Instant(half.0 + 1_001 * MS);
    step(b, later, cb);
    assert_eq!((totals(b).silences, cb.len()), (1, 1), "silent: a probe");
    // Thread 0 hears its tokyo engine again: news of tokyo.
    let now = hears_again(a, ca, tokyo, 5, Instant(now.0 + 1_001 * MS));
    assert_eq!(totals(a).delivered, 2, "{:?}", totals(a));
    step(b, now, cb);
    // Thread 1's ny is still silent: its next ny bundle goes to thread 0, which sends.
    assert_eq!(request_for(b, ny, 6, now), Verdict::Admitted);
    assert_eq!(totals(b).handoffs_out, 1, "{:?}", totals(b));
    step(b, now, cb);
    assert_eq!(cb.len(), 1, "thread 1's ny probe alone: {cb:?}");
}

/// Bundles already waiting on a thread that cannot send them (every pair of its own in a call
/// its engine leaves unanswered, then the region silent there) leave through a thread whose
/// pool can send them in time, oldest first, once it can: not only new bundles route around.
#[test]
fn bundles_waiting_on_a_thread_whose_engine_hangs_leave_through_a_thread_that_sends() {
    let (mut threads, mut calls, now) = two_threads_of_three_pairs(1);
    let [a, b] = &mut threads;
    let [ca, cb] = &mut calls;
    // Every pair of both threads takes a bundle; two more wait on thread 0, since no thread
    // has a pair free.
    for (t, c, seeds) in [(&mut *b, &mut *cb, 1..=3u64), (&mut *a, &mut *ca, 4..=6)] {
        for seed in seeds {
            assert_eq!(request(t, &body(seed), now), Verdict::Admitted);
        }
        step(t, now, c);
        assert_eq!(c.len(), 3);
    }
    ca.clear();
    for seed in 7..=8 {
        assert_eq!(request(a, &body(seed), now), Verdict::Admitted);
    }
    step(a, now, ca);
    assert_eq!(
        (ca.len(), totals(a).handoffs_out),
        (0, 0),
        "{:?}",
        totals(a)
    );
    // Thread 1's engine answers; thread 0's never does, and a second on its region is silent
    // there.
    let now = Instant(now.0 + 500 * MS);
    answer_calls(&mut b.d, now, cb);
    step(b, now, cb);
    let now = Instant(now.0 + 501 * MS);
    step(a, now, ca);
    assert_eq!(totals(a).silences, 1);
    assert!(ca.is_empty(), "no pair free there: {ca:?}");
    assert_eq!(totals(a).handoffs_out, 2, "{:?}", totals(a));
    // Thread 1 sends both, and its engine answers them.
    step(b, now, cb);
    assert_eq!(cb.len(), 2, "{cb:?}");
    answer_calls(&mut b.d, now, cb);
    step(b, now, cb);
    let (ta, tb) = (totals(a), totals(b));
    assert_eq!(
        (tb.handoffs_in, tb.delivered, ta.in_flight),
        (2, 5, 3),
        "{ta:?}\n{tb:?}"
    );
    assert!(a.d.check_accounting() && b.d.check_accounting());
}

/// The same when a thread's pool is lost under its queue (its one connection reset, every
/// pair down): the bundles waiting there leave through the thread that still has a pair, the
/// youngest first; a lane whose pairs are only busy in a call moves nothing (they are back an
/// answer and an interval on).
#[test]
fn bundles_waiting_on_a_thread_that_lost_its_pool_leave_through_a_thread_that_has_one() {
    let (mut a, mut b, now) = two_threads(1_000, 64, Instant(MS));
    // Each thread's one pair takes a bundle; two more wait on thread 0, neither pool free.
    assert_eq!(request(&mut b, &body(1), now), Verdict::Admitted);
    assert!(b.send(now));
    assert_eq!(request(&mut a, &body(2), now), Verdict::Admitted);
    assert!(a.send(now));
    for seed in 3..=4 {
        assert_eq!(request(&mut a, &body(seed), now), Verdict::Admitted);
    }
    // Thread 1's engine answers: its pair is free again an interval on, and it says so.
    b.answer(now);
    let now = Instant(now.0 + 1_001 * MS);
    b.d.dispatch(now);
    // Thread 0's pair is only in a call: nothing moves.
    a.d.dispatch(now);
    assert_eq!(totals(&a).handoffs_out, 0, "{:?}", totals(&a));
    // Its connection is reset: no pair up there, and its waiting bundles move.
    a.d.socket_released(a.pair, now, 0);
    a.d.dispatch(now);
    assert_eq!(totals(&a).handoffs_out, 2, "{:?}", totals(&a));
    assert!(b.send(now), "thread 1 sends the first it took");
    b.answer(now);
    let now = Instant(now.0 + 1_001 * MS);
    assert!(b.send(now), "and the second an interval on");
    b.answer(now);
    let (ta, tb) = (totals(&a), totals(&b));
    assert_eq!(
        (tb.handoffs_in, tb.delivered, ta.admitted),
        (2, 3, 3),
        "{ta:?}\n{tb:?}"
    );
    assert!(a.d.check_accounting() && b.d.check_accounting());
}

/// A thread that takes bundles handed to it and sends them at once, on pairs that were all
/// ready alike, publishes an estimate that has not changed: the handing thread must still
/// learn that those bundles are gone, or it counts them as queued there (an interval over the
/// pairs each) and soon keeps its bundles waiting for its own pairs while the other thread's
/// stand ready. At 90% of a pool from one connection that queued hundreds of bundles for up to
/// half a second.
#[test]
fn bundles_a_thread_took_and_sent_at_once_no_longer_count_against_it() {
    let (mut threads, mut calls, t0) = two_threads_of(1, 12, 1_000, 600_000);
    let [a, b] = &mut threads;
    let [ca, cb] = &mut calls;
    // Thread 0 spends every pair of its own a second ahead of its next bundles.
    let mut now = Instant(t0.0 + 1_001 * MS);
    b.d.dispatch(now);
    for seed in 1..=6 {
        assert_eq!(request(a, &body(seed), now), Verdict::Admitted);
        a.d.dispatch(now);
        flush_calls(&mut a.d, now, ca);
        answer_calls(&mut a.d, now, ca);
    }
    // 700 ms on its own pairs are 300 ms away; thread 1's six stand ready. Every bundle goes
    // there, and thread 1 sends each at once.
    now = Instant(now.0 + 700 * MS);
    a.d.dispatch(now);
    b.d.dispatch(now);
    for seed in 7..=10 {
        assert_eq!(request(a, &body(seed), now), Verdict::Admitted);
        b.d.dispatch(now);
        flush_calls(&mut b.d, now, cb);
        answer_calls(&mut b.d, now, cb);
        a.d.dispatch(now);
        assert_eq!(
            totals(b).handoffs_in,
            seed - 6,
            "bundle {seed} went to the thread with pairs ready: {:?}",
            totals(a)
        );
    }
}
