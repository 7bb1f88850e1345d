//! Rotating-port bundles already waiting in a region that can no longer send them within their
//! max age (its one address cooling for seconds after the engine's Retry-After) leave for
//! another of their tenant's regions that can: what routing does for a new bundle, done for the
//! ones routed before the region fell behind. Pinned-port bundles stay in their region, and no
//! bundle goes to a region its tenant may not use. Fanned-out bundles: no copy is queued where
//! it cannot leave in time, the last copy moves with its own tries and only where no copy went,
//! and none once another copy was delivered. Driven through one thread's dispatcher (two for
//! the move through a peer) without sockets.

use crate::dispatcher_support;

use bundle_relay::clock::Instant;
use bundle_relay::config::Policy;
use bundle_relay::limiter::PairId;
use bundle_relay::relay::intake::{Port, Verdict};
use bundle_relay::relay::tenancy::Claim;
use bundle_relay::relay::{RegionSpec, Spec};
use dispatcher_support::{MS, Sim, answer_calls, body, flush_calls};

/// The engine's answer that cools the address that sent the call for `ms`.
fn cooled_for(ms: u64) -> String {
    format!(
        "Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: \
         Retry after {ms}ms"
    )
}

/// One thread's spec: `regions` by name and the last octet of their engine's 127.0.0.x, each
/// paced at 100 ms; `sources` addresses; bundles living `max_age_ms`; `policy` for everyone.
fn spec(regions: &[(&str, u8)], sources: u8, max_age_ms: u64, policy: Policy) -> Spec {
    let regions = regions
        .iter()
        .map(|&(name, octet)| RegionSpec {
            interval_ms: 100,
            ..RegionSpec::plain(name, format!("127.0.0.{octet}:10000").parse().unwrap())
        })
        .collect();
    let sources = (1..=sources)
        .map(|i| format!("127.1.0.{i}").parse().unwrap())
        .collect();
    let mut spec = Spec::local(regions, sources);
    spec.bundle_max_age_ms = max_age_ms;
    spec.upstream_timeout_ms = 600_000;
    spec.open_to_all(policy);
    spec
}

/// One thread of ny and slc (one source) fanning every rotating-port bundle out to both, its
/// bundles living a second: both pairs up, the tip-account call answered and an interval
/// passed. The pairs (ny's, slc's) and that instant.
fn ny_and_slc_fanning_out() -> (Sim, PairId, PairId, Instant) {
    let fan_out = Policy {
        fan_out: 2,
        ..Policy::open()
    };
    let spec = spec(&[("ny", 1), ("slc", 2)], 1, 1_000, fan_out);
    let now = Instant(MS);
    let mut t = Sim::connected(&spec, 0, None, now);
    let ny = t.pair;
    let slc = t.d.poll_connect(now).expect("slc's pair is due").pair;
    bring_up(&mut t, slc, now);
    let mut calls = Vec::new();
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, &mut calls);
    answer_calls(&mut t.d, now, &mut calls);
    (t, ny, slc, Instant(now.0 + 100 * MS + 1))
}

/// One thread, three regions (ny, slc, tokyo; 100 ms) and one source, a policy for everyone
/// allowed ny and tokyo only, bundles living a second. Only ny's pair is up, its tip-account
/// call answered and an interval passed; the others' connects are returned, not yet made, with
/// their remote's last octet (2: slc, 3: tokyo).
fn ny_up_of_three(now: Instant) -> (Sim, Vec<(PairId, u8)>, Instant) {
    let ny_and_tokyo = Policy {
        regions: vec![0, 2],
        ..Policy::open()
    };
    let spec = spec(
        &[("ny", 1), ("slc", 2), ("tokyo", 3)],
        1,
        1_000,
        ny_and_tokyo,
    );
    let mut t = Sim::connected(&spec, 0, None, now);
    let mut later = Vec::new();
    while let Some(order) = t.d.poll_connect(now) {
        let std::net::IpAddr::V4(ip) = order.remote.ip() else {
            unreachable!("the regions are on IPv4 loopback")
        };
        later.push((order.pair, ip.octets()[3]));
    }
    later.sort_by_key(|&(_, octet)| octet);
    assert_eq!(
        later.iter().map(|&(_, o)| o).collect::<Vec<_>>(),
        [2, 3],
        "ny's pair connected first; slc's and tokyo's are due"
    );
    assert!(t.send(now), "the tip-account call");
    t.answer(now);
    let now = Instant(now.0 + 100 * MS + 1);
    t.d.dispatch(now);
    (t, later, now)
}

/// A bundle pinned to slc (region 1) sent on `slc`, its one pair: the call's stream.
fn pinned_to_slc_sent(t: &mut Sim, slc: PairId, now: Instant) -> u32 {
    let mut calls = Vec::new();
    assert_eq!(
        t.post_as(Port::Pinned(1), Claim::LOOPBACK, "", &body(10), now),
        Verdict::Admitted
    );
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, &mut calls);
    let [(p, stream)] = calls[..] else {
        panic!("slc's call: {calls:?}")
    };
    assert_eq!(p, slc);
    stream
}

/// A bundle pinned to slc sent on `slc`, its one pair, and taken, so the pair is paced for an
/// interval; then a bundle from the rotating port, fanned out to ny (sent at once) and slc
/// (waiting for that pair).
fn fan_out_with_slc_paced(t: &mut Sim, slc: PairId, now: Instant) {
    let stream = pinned_to_slc_sent(t, slc, now);
    t.d.received(slc, &crate::h2_support::ok_reply(stream), now);
    let v = t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(1), now);
    assert_eq!(v, Verdict::Admitted, "{}", t.response());
}

/// Connects `pair`, set up through the engine's hello.
fn bring_up(t: &mut Sim, pair: PairId, now: Instant) {
    t.d.connected(pair, now);
    t.flush(now);
    t.d.received(pair, &crate::h2_support::engine_hello(), now);
    t.flush(now);
}

#[test]
fn rotating_bundles_waiting_in_a_region_that_cools_past_their_max_age_leave_through_another_of_their_tenants_regions()
 {
    let (mut t, later, mut now) = ny_up_of_three(Instant(MS));
    let [(slc, _), (tokyo, _)] = later[..] else {
        unreachable!()
    };
    // Three bundles from the rotating port and one pinned to ny: ny is the one region up.
    for seed in 1..=3 {
        let v = t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(seed), now);
        assert_eq!(v, Verdict::Admitted, "{}", t.response());
    }
    assert_eq!(t.post_bundle(4, now), Verdict::Admitted, "{}", t.response());
    assert!(t.send(now), "the first goes on ny's pair");
    // The engine cools ny's one address for three seconds: nothing waiting there leaves
    // within its second.
    t.answer_error(8, &cooled_for(3_000), now);
    t.d.dispatch(now);
    // slc comes up: none of these may go there.
    bring_up(&mut t, slc, now);
    let mut calls = Vec::new();
    let step = |t: &mut Sim, now: Instant, calls: &mut Vec<(PairId, u32)>| {
        t.d.run_timers(now);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, calls);
        let on = |p| calls.iter().filter(|&&(c, _)| c == p).count();
        let n = (on(slc), on(tokyo));
        answer_calls(&mut t.d, now, calls);
        n
    };
    let (mut on_slc, mut on_tokyo) = (0, 0);
    for _ in 0..5 {
        now = Instant(now.0 + 10 * MS);
        let (s, k) = step(&mut t, now, &mut calls);
        (on_slc, on_tokyo) = (on_slc + s, on_tokyo + k);
    }
    let s = t.totals();
    assert_eq!(
        (s.delivered, s.in_flight, on_slc),
        (0, 4, 0),
        "nothing went to slc: {s:?}"
    );
    // tokyo comes up: the three rotating bundles leave through it, one an interval, all
    // within their second; the pinned one stays in ny and expires there.
    bring_up(&mut t, tokyo, now);
    for _ in 0..150 {
        now = Instant(now.0 + 10 * MS);
        let (s, k) = step(&mut t, now, &mut calls);
        (on_slc, on_tokyo) = (on_slc + s, on_tokyo + k);
    }
    let s = t.totals();
    assert_eq!(
        (s.admitted, s.delivered, s.expired, s.in_flight),
        (4, 3, 1, 0),
        "{s:?}"
    );
    assert_eq!(
        (on_slc, on_tokyo),
        (0, 3),
        "the three rotating bundles went to tokyo"
    );
    let ny = t.stats.region(0);
    assert_eq!(
        (ny.admitted.get(), ny.delivered.get(), ny.expired.get()),
        (4, 3, 1),
        "counted in the region they were admitted for"
    );
    assert_eq!(ny.rerouted.get(), 3, "ny's rotating bundles left for tokyo");
    assert!(t.d.check_accounting());
}

/// The same across threads: the region a thread's rotating bundles wait in cools past their
/// max age, and of their tenant's other regions only another thread's pool is up. They move
/// there, copied into slots it lent, and are delivered; each thread's counts add up.
#[test]
fn rotating_bundles_late_in_their_region_leave_through_another_threads_pool_for_another_region() {
    use bundle_relay::mesh::Mesh;
    use std::sync::Arc;
    let mut spec = spec(&[("ny", 1), ("tokyo", 3)], 2, 1_000, Policy::open());
    spec.threads = 2;
    spec.arena_slots = 64;
    let mesh = Arc::new(Mesh::new(2, 32));
    let mut now = Instant(MS);
    // Thread 0 has only its ny pair up; thread 1 both, then its ny connection is reset.
    let mut a = Sim::connected(&spec, 0, Some(&mesh), now);
    let mut b = Sim::connected(&spec, 1, Some(&mesh), now);
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    assert!(a.send(now), "thread 0's tip-account call");
    a.answer(now);
    while a.d.poll_connect(now).is_some() {}
    dispatcher_support::connect_due(&mut b, now);
    now = Instant(now.0 + 100 * MS + 1);
    a.d.dispatch(now);
    // Three bundles from the rotating port on thread 0: its ny pool is the only one it knows.
    for seed in 1..=3 {
        let v = a.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(seed), now);
        assert_eq!(v, Verdict::Admitted, "{}", a.response());
    }
    assert!(a.send(now), "the first goes on thread 0's ny pair");
    a.answer_error(8, &cooled_for(3_000), now);
    a.d.dispatch(now);
    assert_eq!(a.totals().handoffs_out, 0, "no other place known yet");
    b.d.socket_released(b.pair, now, 0);
    let mut on_b = 0;
    for _ in 0..100 {
        now = Instant(now.0 + 10 * MS);
        for (t, c) in [(&mut b, &mut cb), (&mut a, &mut ca)] {
            t.d.run_timers(now);
            t.d.dispatch(now);
            flush_calls(&mut t.d, now, c);
        }
        on_b += cb.len();
        assert!(ca.is_empty(), "thread 0 sends nothing more: {ca:?}");
        answer_calls(&mut b.d, now, &mut cb);
    }
    let (ta, tb) = (a.totals(), b.totals());
    assert_eq!(
        (ta.admitted, ta.handoffs_out, ta.in_flight, ta.expired),
        (3, 3, 0, 0),
        "{ta:?}"
    );
    assert_eq!(
        (tb.handoffs_in, tb.delivered, tb.in_flight),
        (3, 3, 0),
        "{tb:?}"
    );
    assert!(on_b >= 3, "thread 1 sent them: {on_b} calls");
    assert_eq!(
        a.stats.region(0).rerouted.get(),
        1 + 2,
        "thread 0's ny: 3 left"
    );
    assert!(a.d.check_accounting() && b.d.check_accounting());
}

/// A fanned-out bundle whose copy to ny was refused unprocessed until its tries were spent
/// (ended there) and whose other copy waits in slc, cooling past its max age: that last copy
/// moves to tokyo with its own tries, none of ny's. Answered UNAVAILABLE once there, it goes
/// again and is delivered, not rejected as if ny's eight tries were its own.
#[test]
fn the_last_copy_of_a_fanned_out_bundle_moved_to_another_region_keeps_its_own_tries() {
    use bundle_relay::relay::dispatch::ATTEMPTS_MAX;
    let fan_out = Policy {
        fan_out: 2,
        ..Policy::open()
    };
    let spec = spec(&[("ny", 1), ("slc", 2), ("tokyo", 3)], 1, 5_000, fan_out);
    let mut now = Instant(MS);
    let mut t = Sim::connected(&spec, 0, None, now);
    let mut due = Vec::new();
    while let Some(order) = t.d.poll_connect(now) {
        due.push(order);
    }
    let remote = |o: &bundle_relay::relay::dispatch::ConnectOrder| o.remote.ip().to_string();
    let slc = due.iter().find(|o| remote(o) == "127.0.0.2").unwrap().pair;
    let tokyo = due.iter().find(|o| remote(o) == "127.0.0.3").unwrap().pair;
    let ny = t.pair;
    let mut calls = Vec::new();
    bring_up(&mut t, slc, now);
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, &mut calls);
    answer_calls(&mut t.d, now, &mut calls);
    now = Instant(now.0 + 100 * MS + 1);
    // The rotating bundle fans out to ny and slc (tokyo is not up), and waits in slc for its
    // pair, paced after a bundle it just sent; then slc's connection is lost.
    fan_out_with_slc_paced(&mut t, slc, now);
    t.d.socket_released(slc, now, 0);
    // ny refuses its copy unprocessed at every try, until its tries are spent; then its
    // connection is lost, so ny is no place for the other copy.
    let mut ny_tries = 0;
    while ny_tries < ATTEMPTS_MAX {
        t.d.run_timers(now);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, &mut calls);
        for (p, s) in std::mem::take(&mut calls) {
            assert_eq!(p, ny, "only ny sends");
            ny_tries += 1;
            let reply = crate::h2_support::error_reply(s, 14, "temporarily unavailable");
            t.d.received(p, &reply, now);
        }
        now = Instant(now.0 + 100 * MS + 1);
        assert!(
            now.0 < 3_000 * MS,
            "ny's tries are spent within two seconds"
        );
    }
    t.d.socket_released(ny, now, 0);
    t.d.dispatch(now);
    assert_eq!(
        (t.totals().in_flight, t.stats.region(1).rerouted.get()),
        (1, 0),
        "slc's copy waits: {:?}",
        t.totals()
    );
    // tokyo comes up: the copy waiting in slc moves there. Refused unprocessed once, it goes
    // again, and is taken.
    bring_up(&mut t, tokyo, now);
    let mut refused = false;
    for _ in 0..20 {
        t.d.run_timers(now);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, &mut calls);
        for (p, s) in std::mem::take(&mut calls) {
            assert_eq!(p, tokyo, "only tokyo sends now");
            let reply = if std::mem::replace(&mut refused, true) {
                crate::h2_support::ok_reply(s)
            } else {
                crate::h2_support::error_reply(s, 14, "temporarily unavailable")
            };
            t.d.received(p, &reply, now);
        }
        now = Instant(now.0 + 100 * MS + 1);
    }
    let s = t.totals();
    assert_eq!(
        (s.delivered, s.rejected, s.in_flight),
        (2, 0, 0),
        "the pinned bundle and the fanned-out one delivered: {s:?}"
    );
    assert_eq!(t.stats.region(1).rerouted.get(), 1);
    assert!(t.d.check_accounting());
}

/// A pinned bundle late at the tail of a cooling region hides the rotating ones ahead of it
/// from the scan that stops at the first with nowhere to go; the scan that reads past it runs
/// at most every 5 ms, and the loop wakes for it while a rotating bundle is left: when another
/// region comes up a moment after one such scan, the rotating bundles move within those 5 ms,
/// not at some later event.
#[test]
fn rotating_bundles_behind_a_late_pinned_one_move_within_five_ms_of_a_region_coming_up() {
    let (mut t, later, now) = ny_up_of_three(Instant(MS));
    let [_, (tokyo, _)] = later[..] else {
        unreachable!()
    };
    for seed in 1..=2 {
        let v = t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(seed), now);
        assert_eq!(v, Verdict::Admitted, "{}", t.response());
    }
    assert_eq!(t.post_bundle(3, now), Verdict::Admitted, "{}", t.response());
    assert!(t.send(now));
    t.answer_error(8, &cooled_for(3_000), now);
    // Every late bundle read: nowhere to go yet, and looked at again within 5 ms.
    t.d.dispatch(now);
    assert!(
        t.d.next_deadline().is_some_and(|d| d.0 <= now.0 + 5 * MS),
        "the loop wakes for the next look"
    );
    let up = Instant(now.0 + MS);
    bring_up(&mut t, tokyo, up);
    t.d.dispatch(up);
    assert_eq!(
        t.stats.region(0).rerouted.get(),
        0,
        "the scan stopped at the pinned one"
    );
    let wake = t.d.next_deadline().expect("a deadline");
    assert!(
        wake.0 <= now.0 + 5 * MS,
        "the next look past is due 5 ms after the last: woken {} µs after it",
        (wake.0 - now.0) / 1_000
    );
    t.d.dispatch(wake);
    assert_eq!(
        t.stats.region(0).rerouted.get(),
        2,
        "both rotating bundles moved"
    );
}

/// A fanned-out bundle's further copies go only to regions that can send them within its max
/// age: with slc's one address cooling for three seconds, a bundle fanned out to two regions
/// waits in ny alone, and once ny's engine takes it, nothing of it is left in flight (no copy
/// queued in slc holding its slot until it expires there).
#[test]
fn a_fanned_out_bundle_queues_no_copy_where_it_cannot_leave_within_its_max_age() {
    let (mut t, ny, slc, now) = ny_and_slc_fanning_out();
    let mut calls = Vec::new();
    // A bundle pinned to slc, answered by cooling slc's one address for three seconds.
    let s = pinned_to_slc_sent(&mut t, slc, now);
    t.d.received(
        slc,
        &crate::h2_support::error_reply(s, 8, &cooled_for(3_000)),
        now,
    );
    let v = t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(1), now);
    assert_eq!(v, Verdict::Admitted, "{}", t.response());
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, &mut calls);
    assert_eq!(calls.len(), 1, "one copy, sent on ny's pair: {calls:?}");
    assert_eq!(calls[0].0, ny);
    answer_calls(&mut t.d, now, &mut calls);
    t.d.dispatch(now);
    let s = t.totals();
    assert_eq!(
        (s.delivered, s.in_flight),
        (1, 1),
        "delivered, and only the pinned bundle left in flight: {s:?}"
    );
    assert!(t.d.check_accounting());
}

/// A fanned-out bundle's copy left waiting after ny's engine took the other stays where it
/// is when its region falls behind (slc's connection lost): it is not moved to ny and sent
/// there a second time. It waits for slc's pair or expires; the bundle is delivered either
/// way.
#[test]
fn a_fanned_out_bundles_copy_left_after_delivery_is_not_sent_again_to_the_region_that_took_it() {
    let (mut t, ny, slc, mut now) = ny_and_slc_fanning_out();
    let mut calls = Vec::new();
    fan_out_with_slc_paced(&mut t, slc, now);
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, &mut calls);
    assert_eq!(calls.len(), 1, "ny's copy; slc's waits: {calls:?}");
    assert_eq!(calls[0].0, ny);
    answer_calls(&mut t.d, now, &mut calls);
    t.d.dispatch(now);
    assert_eq!(
        t.totals().delivered,
        1,
        "taken in ny, the fanned-out bundle ends with its copy in slc"
    );
    // slc's connection is lost: the copy there is late.
    t.d.socket_released(slc, now, 0);
    let mut on_ny = 0;
    for _ in 0..15 {
        now = Instant(now.0 + 100 * MS + 1);
        t.d.run_timers(now);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, &mut calls);
        on_ny += calls.iter().filter(|&&(p, _)| p == ny).count();
        answer_calls(&mut t.d, now, &mut calls);
    }
    assert_eq!(on_ny, 0, "nothing sent to ny again");
    assert_eq!(
        t.stats.region(0).rerouted.get() + t.stats.region(1).rerouted.get(),
        0
    );
    let s = t.totals();
    assert_eq!(
        (s.delivered, s.expired, s.in_flight),
        (2, 0, 0),
        "the pinned bundle and the fanned-out one delivered: {s:?}"
    );
    assert!(t.d.check_accounting());
}

/// The scan remembers a bundle that had nowhere to go, to pass over older ones alike; a
/// fanned-out bundle's last copy, whose other copy ny took, has nowhere for reasons of its own
/// (it goes to no other region), so an older rotating bundle of the same tenant waiting ahead
/// of it in slc is still offered ny, and leaves through it when slc's connection is lost.
#[test]
fn a_late_bundle_ahead_of_a_delivered_bundles_last_copy_still_moves() {
    let (mut t, ny, slc, now) = ny_and_slc_fanning_out();
    let mut calls = Vec::new();
    // slc paced for an interval; ny busy in a call: the rotating bundle Y goes to slc alone.
    let q = pinned_to_slc_sent(&mut t, slc, now);
    t.d.received(slc, &crate::h2_support::ok_reply(q), now);
    assert_eq!(
        t.post_bundle(20, now),
        Verdict::Admitted,
        "{}",
        t.response()
    );
    t.d.dispatch(now);
    flush_calls(&mut t.d, now, &mut calls);
    assert_eq!(calls.len(), 1, "ny's call: {calls:?}");
    assert_eq!(calls[0].0, ny);
    let v = t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(1), now);
    assert_eq!(v, Verdict::Admitted, "{}", t.response());
    answer_calls(&mut t.d, now, &mut calls);
    // X fans out to ny and to slc, behind Y; then slc's connection is lost.
    let v = t.post_as(Port::Rotating, Claim::LOOPBACK, "", &body(2), now);
    assert_eq!(v, Verdict::Admitted, "{}", t.response());
    t.d.socket_released(slc, now, 0);
    // ny sends X's copy and its engine takes it.
    let next = Instant(now.0 + 100 * MS + 1);
    t.d.dispatch(next);
    flush_calls(&mut t.d, next, &mut calls);
    assert_eq!(calls.len(), 1, "X's copy on ny: {calls:?}");
    answer_calls(&mut t.d, next, &mut calls);
    assert_eq!(t.totals().in_flight, 2, "Y, and X's copy in slc");
    let mut now = next;
    for _ in 0..10 {
        now = Instant(now.0 + 50 * MS);
        t.d.run_timers(now);
        t.d.dispatch(now);
        flush_calls(&mut t.d, now, &mut calls);
        answer_calls(&mut t.d, now, &mut calls);
    }
    assert_eq!(t.stats.region(1).rerouted.get(), 1, "Y left slc for ny");
    let s = t.totals();
    assert_eq!(
        (s.delivered, s.expired, s.in_flight),
        (3, 0, 1),
        "the pinned bundles and Y delivered; X ends with its copy in slc: {s:?}"
    );
    assert!(t.d.check_accounting());
}
