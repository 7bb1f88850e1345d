//! Per-thread recording merges exactly: seeded random workloads on real threads, checked
//! against each thread's own plain tallies; counters seen by a concurrent scraper never go
//! backwards; the atomic histograms have HdrHistogram's bucket layout to the bucket.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use bundle_relay::grpc::Code;
use bundle_relay::metrics::atomic_hist::{
    self, COUNTS_LEN, HIGHEST_NS, index_of, new_histogram, value_at,
};
use bundle_relay::metrics::{
    HistId, METHODS, Metrics, ReqOutcome, STATUS_SLOT_TRANSPORT, STATUS_SLOTS, Snapshot,
    status_slot,
};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const THREADS: usize = 4;
const OPS_PER_THREAD: usize = 20_000;
const SEED: u64 = 0x6d65_7472_6963;

fn regions() -> Vec<String> {
    ["amsterdam", "frankfurt", "ny", "tokyo"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// What one thread recorded, tallied plainly.
struct Expected {
    snap: Snapshot,
    hists: Vec<Histogram<u64>>,
    sums: Vec<u64>,
}

fn latency(rng: &mut StdRng) -> u64 {
    // Log-uniform over 0 ns .. ~2 min, so every bucket range and the clamp are exercised.
    let exp = rng.random_range(0..37u32);
    rng.random_range(0..(1u64 << exp).max(1)) + if exp == 36 { HIGHEST_NS } else { 0 }
}

fn run_thread(m: &Metrics, t: usize) -> Expected {
    let tm = m.thread(t);
    let st = m.stats(t);
    let nregions = m.region_names().len();
    let ids = m.hist_ids();
    let mut rng = StdRng::seed_from_u64(SEED ^ t as u64);
    let mut e = Expected {
        snap: Snapshot {
            regions: vec![Default::default(); nregions],
            ..Snapshot::default()
        },
        hists: ids.iter().map(|_| new_histogram()).collect(),
        sums: vec![0; ids.len()],
    };
    for _ in 0..OPS_PER_THREAD {
        let r = rng.random_range(0..nregions);
        match rng.random_range(0..14u32) {
            0 => {
                let method = METHODS[rng.random_range(0..METHODS.len())];
                let outcome = ReqOutcome::ALL[rng.random_range(0..4)];
                tm.request(method, outcome);
                e.snap.requests[bundle_relay::metrics::method_slot(method)][outcome as usize] += 1;
            }
            1 => {
                st.region(r).admitted.inc();
                e.snap.regions[r].bundles.admitted += 1;
            }
            2 => {
                st.region(r).delivered.inc();
                e.snap.regions[r].bundles.delivered += 1;
            }
            3 => {
                st.region(r).rejected.inc();
                e.snap.regions[r].bundles.rejected += 1;
            }
            4 => {
                st.region(r).expired.inc();
                e.snap.regions[r].bundles.expired += 1;
            }
            5 => {
                st.region(r).failed.inc();
                e.snap.regions[r].bundles.failed += 1;
            }
            6 => {
                let code = Code(rng.random_range(0..20));
                tm.upstream_status(r, code);
                e.snap.regions[r].upstream[status_slot(code)] += 1;
            }
            7 => {
                tm.upstream_transport_error(r);
                e.snap.regions[r].upstream[STATUS_SLOT_TRANSPORT] += 1;
            }
            8 => {
                st.region(r).cooldowns.inc();
                e.snap.regions[r].bundles.cooldowns += 1;
            }
            9 => {
                tm.reconnect(r);
                e.snap.regions[r].reconnects += 1;
            }
            10 => {
                st.intake_refused.inc();
                e.snap.intake_refused += 1;
            }
            _ => {
                let i = rng.random_range(0..ids.len());
                let v = latency(&mut rng);
                match ids[i] {
                    HistId::Overhead => tm.record_overhead_ns(v),
                    HistId::Delivery => tm.record_delivery_ns(v),
                    HistId::LimiterWait => tm.record_limiter_wait_ns(v),
                    HistId::UpstreamRtt(r) => tm.record_upstream_rtt_ns(r, v),
                }
                e.hists[i].record(v.min(HIGHEST_NS)).unwrap();
                e.sums[i] += v;
            }
        }
    }
    // Gauges: the last value each thread set, summed over threads on scrape.
    for r in 0..nregions {
        let states = [t as u64, 1, 2 + r as u64, 3];
        tm.set_conn_states(r, states);
        tm.set_cooldowns_active(r, r as u64 + 1);
        st.region(r).in_flight.set(2);
        for (a, s) in e.snap.regions[r].conns.iter_mut().zip(states) {
            *a += s;
        }
        e.snap.regions[r].cooldowns_active += r as u64 + 1;
        e.snap.regions[r].bundles.in_flight += 2;
        // Slots held are the bundles in flight, every region's together.
        e.snap.arena_in_use += 2;
    }
    st.arena_capacity.set(1024);
    st.intake_conns.set(5);
    e.snap.arena_capacity += 1024;
    e.snap.intake_connections += 5;
    e
}

fn recorded(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

#[test]
fn counters_and_histograms_merge_across_threads_exactly() {
    let m = Arc::new(Metrics::new(&regions(), THREADS));
    m.set_config_generation(7);
    let done = Arc::new(AtomicBool::new(false));
    // A scraper running alongside: merged counters never decrease between scrapes.
    let scraper = {
        let (m, done) = (Arc::clone(&m), Arc::clone(&done));
        thread::spawn(move || {
            let mut last = m.snapshot();
            let mut scrapes = 0u32;
            while !done.load(Ordering::SeqCst) || scrapes == 0 {
                let s = m.snapshot();
                for (a, b) in last
                    .requests
                    .iter()
                    .flatten()
                    .zip(s.requests.iter().flatten())
                {
                    assert!(b >= a, "a request counter went backwards");
                }
                for (a, b) in last.regions.iter().zip(&s.regions) {
                    assert!(
                        b.bundles.admitted >= a.bundles.admitted
                            && b.bundles.delivered >= a.bundles.delivered
                    );
                    for k in 0..STATUS_SLOTS {
                        assert!(b.upstream[k] >= a.upstream[k]);
                    }
                }
                last = s;
                scrapes += 1;
            }
            scrapes
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let m = Arc::clone(&m);
            thread::spawn(move || run_thread(&m, t))
        })
        .collect();
    let expected: Vec<Expected> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    done.store(true, Ordering::SeqCst);
    assert!(scraper.join().unwrap() > 0);

    let mut want = Snapshot {
        regions: vec![Default::default(); regions().len()],
        config_generation: 7,
        ..Snapshot::default()
    };
    for e in &expected {
        for (a, b) in want
            .requests
            .iter_mut()
            .flatten()
            .zip(e.snap.requests.iter().flatten())
        {
            *a += b;
        }
        want.intake_connections += e.snap.intake_connections;
        want.intake_refused += e.snap.intake_refused;
        want.arena_capacity += e.snap.arena_capacity;
        want.arena_in_use += e.snap.arena_in_use;
        for (w, r) in want.regions.iter_mut().zip(&e.snap.regions) {
            let (wb, rb) = (&mut w.bundles, &r.bundles);
            wb.admitted += rb.admitted;
            wb.delivered += rb.delivered;
            wb.rejected += rb.rejected;
            wb.expired += rb.expired;
            wb.failed += rb.failed;
            wb.in_flight += rb.in_flight;
            wb.cooldowns += rb.cooldowns;
            for k in 0..STATUS_SLOTS {
                w.upstream[k] += r.upstream[k];
            }
            w.cooldowns_active += r.cooldowns_active;
            for k in 0..4 {
                w.conns[k] += r.conns[k];
            }
            w.reconnects += r.reconnects;
        }
    }
    assert_eq!(m.snapshot(), want);

    for (i, id) in m.hist_ids().into_iter().enumerate() {
        let mut want_h = new_histogram();
        let mut want_sum = 0;
        for e in &expected {
            want_h.add(&e.hists[i]).unwrap();
            want_sum += e.sums[i];
        }
        let got = m.histogram(id);
        assert_eq!(got.len(), want_h.len(), "{id:?} count");
        assert_eq!(recorded(&got), recorded(&want_h), "{id:?} buckets");
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                got.value_at_quantile(q),
                want_h.value_at_quantile(q),
                "{id:?} q{q}"
            );
        }
        assert_eq!(m.histogram_sum_ns(id), want_sum, "{id:?} sum");
    }
}

#[test]
fn bucket_layout_is_hdrhistograms_for_1ns_to_60s_at_3_digits() {
    let h = new_histogram();
    assert_eq!(h.distinct_values(), COUNTS_LEN);
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut values: Vec<u64> = (0..64).flat_map(|b| [(1u64 << b) - 1, 1u64 << b]).collect();
    values.extend((0..20_000).map(|_| latency(&mut rng)));
    for v in values {
        let v = v.min(HIGHEST_NS);
        let i = index_of(v);
        assert_eq!(value_at(i), h.lowest_equivalent(v), "value {v}");
        if i + 1 < COUNTS_LEN && v < HIGHEST_NS {
            assert_eq!(value_at(i + 1), h.highest_equivalent(v) + 1, "value {v}");
        }
    }
}

#[test]
fn values_above_a_minute_are_recorded_as_a_minute_and_summed_as_they_were() {
    let m = Metrics::new(&regions(), 1);
    let tm = m.thread(0);
    tm.record_overhead_ns(HIGHEST_NS * 10);
    let h = m.histogram(HistId::Overhead);
    assert_eq!(h.len(), 1);
    assert_eq!(h.max(), h.highest_equivalent(HIGHEST_NS));
    assert_eq!(m.histogram_sum_ns(HistId::Overhead), HIGHEST_NS * 10);
    let _ = atomic_hist::LOWEST_NS;
}

#[test]
fn accounting_identity_holds_when_every_admitted_bundle_is_settled_or_held() {
    let m = Metrics::new(&regions(), 2);
    let (a, b) = (m.stats(0), m.stats(1));
    let (a, b) = (a.region(1), b.region(1));
    for _ in 0..10 {
        a.admitted.inc();
    }
    a.delivered.inc();
    a.delivered.inc();
    b.rejected.inc();
    b.expired.inc();
    a.failed.inc();
    a.in_flight.set(3);
    b.in_flight.set(2);
    assert_eq!(m.check_accounting(), Ok(()));
    let acc = &m.accounting()[1];
    assert_eq!((acc.admitted, acc.settled_or_held), (10, 10));
}

#[test]
fn accounting_check_names_the_region_that_does_not_add_up() {
    let m = Metrics::new(&regions(), 1);
    let st = m.stats(0);
    let t = st.region(2);
    t.admitted.inc();
    t.admitted.inc();
    t.delivered.inc();
    let err = m.check_accounting().unwrap_err();
    assert!(err.contains("region ny"), "{err}");
    assert!(
        err.contains("admitted 2") && err.contains("in_flight 1"),
        "{err}"
    );
    assert!(!err.contains("frankfurt"), "{err}");
}

#[test]
fn thread_metrics_do_not_share_cache_lines() {
    let m = Metrics::new(&regions(), 3);
    for t in 0..3 {
        let p = Arc::as_ptr(&m.thread(t)) as usize;
        assert_eq!(p % 128, 0, "thread {t} metrics not 128-byte aligned");
    }
}
