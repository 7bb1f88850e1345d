//! Rotating-port bundles already waiting in a region that can no longer send them within their
//! max age (its one address cooling for seconds after the engine's Retry-After) leave for
//! another of their tenant's regions that can: what routing does for a new bundle, done for the
//! ones routed before the region fell behind. Pinned-port bundles stay in their region, and no
//! bundle goes to a region its tenant may not use. Driven through one thread's dispatcher
//! without sockets.

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

/// One thread, three regions (ny, slc, tokyo; 100 ms) and one source, a policy for everyone
/// allowed ny and tokyo only, bundles living a second. Only ny's pair is up, its tip-account
/// call answered and an interval passed; the others' connects are returned, not yet made, with
/// their remote's last octet (2: slc, 3: tokyo).
fn ny_up_of_three(now: Instant) -> (Sim, Vec<(PairId, u8)>, Instant) {
    let regions: Vec<RegionSpec> = [
        ("ny", "127.0.0.1:10000"),
        ("slc", "127.0.0.2:10000"),
        ("tokyo", "127.0.0.3:10000"),
    ]
    .iter()
    .map(|(name, addr)| RegionSpec {
        interval_ms: 100,
        ..RegionSpec::plain(name, addr.parse().unwrap())
    })
    .collect();
    let mut spec = Spec::local(regions, vec!["127.1.0.1".parse().unwrap()]);
    spec.bundle_max_age_ms = 1_000;
    spec.upstream_timeout_ms = 600_000;
    spec.open_to_all(Policy {
        regions: vec![0, 2],
        ..Policy::open()
    });
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
    let regions: Vec<RegionSpec> = [("ny", "127.0.0.1:10000"), ("tokyo", "127.0.0.3:10000")]
        .iter()
        .map(|(name, addr)| RegionSpec {
            interval_ms: 100,
            ..RegionSpec::plain(name, addr.parse().unwrap())
        })
        .collect();
    let sources = vec!["127.1.0.1".parse().unwrap(), "127.1.0.2".parse().unwrap()];
    let mut spec = Spec::local(regions, sources);
    spec.threads = 2;
    spec.arena_slots = 64;
    spec.bundle_max_age_ms = 1_000;
    spec.upstream_timeout_ms = 600_000;
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
