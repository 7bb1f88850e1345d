//! Recording allocates nothing: every method the reactor calls on the request path, counted
//! with the counting allocator.

mod counting_alloc;

use bundle_relay::grpc::Code;
use bundle_relay::metrics::{Method, Metrics, ReqOutcome};

#[test]
fn recording_every_metric_allocates_nothing() {
    let regions: Vec<String> = (0..8).map(|i| format!("r{i}")).collect();
    let m = Metrics::new(&regions, 2);
    let tm = m.thread(1);
    let before = counting_alloc::allocations();
    for i in 0..10_000u64 {
        let r = (i % 8) as usize;
        tm.request(
            Method::ALL[(i % 6) as usize],
            ReqOutcome::ALL[(i % 4) as usize],
        );
        tm.admitted(r);
        tm.delivered(r);
        tm.rejected(r);
        tm.expired(r);
        tm.failed(r);
        tm.set_in_flight(r, i);
        tm.upstream_status(r, Code((i % 20) as u32));
        tm.upstream_transport_error(r);
        tm.cooldown_started(r);
        tm.set_cooldowns_active(r, i);
        tm.set_conn_states(r, [i, 1, 2, 3]);
        tm.reconnect(r);
        tm.set_arena(4096, i);
        tm.set_intake_connections(i);
        tm.intake_refused();
        tm.record_overhead_ns(i * 997);
        tm.record_delivery_ns(i * 1_000_003);
        tm.record_limiter_wait_ns(i * i);
        tm.record_upstream_rtt_ns(r, i * 123_457);
    }
    assert_eq!(counting_alloc::allocations() - before, 0);
    // And the values landed (a test that records into nothing proves nothing).
    assert_eq!(m.snapshot().regions[3].admitted, 1_250);
    assert_eq!(
        m.histogram(bundle_relay::metrics::HistId::Overhead).len(),
        10_000
    );
}
