//! Recording allocates nothing: every method the reactor calls on the request path, counted
//! with the counting allocator.

use crate::counting_alloc;

use bundle_relay::grpc::Code;
use bundle_relay::metrics::{Metrics, ReqOutcome};

#[test]
fn recording_every_metric_allocates_nothing() {
    let regions: Vec<String> = (0..8).map(|i| format!("r{i}")).collect();
    let m = Metrics::new(&regions, 2);
    let tm = m.thread(1);
    let st = m.stats(1);
    let before = counting_alloc::allocations();
    for i in 0..10_000u64 {
        let r = (i % 8) as usize;
        tm.request(
            bundle_relay::metrics::METHODS[(i % 6) as usize],
            ReqOutcome::ALL[(i % 4) as usize],
        );
        let bundles = st.region(r);
        bundles.admitted.inc();
        bundles.delivered.inc();
        bundles.rejected.inc();
        bundles.expired.inc();
        bundles.failed.inc();
        bundles.in_flight.set(i);
        tm.upstream_status(r, Code((i % 20) as u32));
        tm.upstream_transport_error(r);
        bundles.cooldowns.inc();
        tm.set_cooldowns_active(r, i);
        tm.set_conn_states(r, [i, 1, 2, 3]);
        tm.reconnect(r);
        st.arena_capacity.set(4096);
        st.intake_conns.set(i);
        st.intake_refused.inc();
        tm.record_overhead_ns(i * 997);
        tm.record_delivery_ns(i * 1_000_003);
        tm.record_limiter_wait_ns(i * i);
        tm.record_upstream_rtt_ns(r, i * 123_457);
    }
    assert_eq!(counting_alloc::allocations() - before, 0);
    // And the values landed (a test that records into nothing proves nothing).
    assert_eq!(m.snapshot().regions[3].bundles.admitted, 1_250);
    assert_eq!(
        m.histogram(bundle_relay::metrics::HistId::Overhead).len(),
        10_000
    );
}
