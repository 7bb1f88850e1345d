//! Cost of recording a metric on the request path: a counter bump and a histogram record into
//! a thread's own [`ThreadMetrics`], against doing nothing (the loop's own cost), and the cost
//! of a scrape (render /metrics) for 8 regions × 4 threads.
//!
//! Run: `cargo bench --bench metrics -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use bundle_relay::jsonrpc::Method;
use bundle_relay::metrics::{Metrics, ReqOutcome};
use criterion::{Criterion, criterion_group, criterion_main};

const REGIONS: usize = 8;
const THREADS: usize = 4;

fn regions() -> Vec<String> {
    (0..REGIONS).map(|i| format!("region{i}")).collect()
}

fn bench_record(c: &mut Criterion) {
    let m = Metrics::new(&regions(), THREADS);
    let tm = m.thread(0);
    let st = m.stats(0);
    let mut g = c.benchmark_group("record");
    g.bench_function("baseline_loop", |b| {
        let mut v = 1u64;
        b.iter(|| {
            v = v.wrapping_mul(6364136223846793005).wrapping_add(1);
            black_box(v >> 40)
        })
    });
    g.bench_function("counter_request", |b| {
        b.iter(|| {
            tm.request(
                black_box(Some(Method::SendBundle)),
                black_box(ReqOutcome::Ok),
            )
        })
    });
    g.bench_function("counter_admitted_region", |b| {
        let mut r = 0usize;
        b.iter(|| {
            r = (r + 1) % REGIONS;
            st.region(black_box(r)).admitted.inc()
        })
    });
    // Values spread over 1 µs .. 1 ms so the bucket index varies as it does in service.
    g.bench_function("histogram_record", |b| {
        let mut v = 1u64;
        b.iter(|| {
            v = v.wrapping_mul(6364136223846793005).wrapping_add(1);
            tm.record_overhead_ns(1_000 + (v >> 44))
        })
    });
    g.bench_function("request_path_set", |b| {
        // What one sendBundle costs in counting: request, admitted and delivered (the
        // accounting), upstream status, three histograms.
        let mut v = 1u64;
        b.iter(|| {
            v = v.wrapping_mul(6364136223846793005).wrapping_add(1);
            let ns = 1_000 + (v >> 44);
            tm.request(Some(Method::SendBundle), ReqOutcome::Ok);
            st.region(3).admitted.inc();
            st.region(3).delivered.inc();
            tm.upstream_status(3, bundle_relay::grpc::Code::OK);
            tm.record_overhead_ns(ns);
            tm.record_delivery_ns(ns * 2);
            tm.record_upstream_rtt_ns(3, ns * 100);
        })
    });
    g.finish();

    let mut g = c.benchmark_group("scrape");
    for t in 0..THREADS {
        let tm = m.thread(t);
        for i in 0..100_000u64 {
            tm.record_overhead_ns(1_000 + i * 7);
            tm.record_upstream_rtt_ns((i % REGIONS as u64) as usize, 1_000_000 + i * 31);
        }
    }
    g.bench_function("render_prometheus_8_regions_4_threads", |b| {
        let mut out = String::with_capacity(64 * 1024);
        b.iter(|| {
            out.clear();
            m.render_prometheus(&mut out);
            black_box(out.len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench_record);
criterion_main!(benches);
