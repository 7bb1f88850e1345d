//! `/metrics` text: well-formed exposition format 0.0.4 (checked by a small parser), the
//! metric names operators query, and values that match what was recorded.

use crate::metrics_support;

use bundle_relay::grpc::Code;
use bundle_relay::jsonrpc::Method;
use bundle_relay::metrics::{Metrics, ReqOutcome};

fn regions() -> Vec<String> {
    vec!["frankfurt".into(), "ny".into(), "we\"ird\\name".into()]
}

fn recorded() -> Metrics {
    let m = Metrics::new(&regions(), 2);
    let (a, b) = (m.thread(0), m.thread(1));
    let (sa, sb) = (m.stats(0), m.stats(1));
    for _ in 0..5 {
        a.request(Some(Method::SendBundle), ReqOutcome::Ok);
    }
    b.request(Some(Method::SendBundle), ReqOutcome::Ok);
    b.request(Some(Method::GetTipAccounts), ReqOutcome::RefusedCap);
    sa.region(0).admitted.inc();
    sa.region(0).admitted.inc();
    sb.region(0).admitted.inc();
    sa.region(0).delivered.inc();
    sb.region(0).rejected.inc();
    sa.region(0).refused_backlog.inc();
    sb.region(0).refused_backlog.inc();
    sa.region(0).in_flight.set(1);
    a.upstream_status(1, Code::RESOURCE_EXHAUSTED);
    b.upstream_status(1, Code::RESOURCE_EXHAUSTED);
    b.upstream_status(1, Code(99));
    a.upstream_transport_error(2);
    sa.region(1).cooldowns.inc();
    b.set_cooldowns_active(1, 4);
    a.set_conn_states(0, [1, 0, 6, 0]);
    b.set_conn_states(0, [0, 1, 5, 1]);
    b.reconnect(0);
    sa.arena_capacity.set(1000);
    sb.arena_capacity.set(1000);
    sa.region(2).in_flight.set(2);
    sb.region(2).in_flight.set(4);
    sa.intake_conns.set(2);
    sb.intake_refused.inc();
    m.set_config_generation(3);
    // Overhead: 3 values ≤ 10 µs, 2 in (10 µs, 1 ms], 1 above a second.
    for v in [800, 5_000, 9_000] {
        a.record_overhead_ns(v);
    }
    b.record_overhead_ns(20_000);
    b.record_overhead_ns(900_000);
    b.record_overhead_ns(2_000_000_000);
    a.record_upstream_rtt_ns(1, 30_000_000);
    m
}

#[test]
fn exposition_parses_with_help_and_type_once_per_family_and_cumulative_buckets() {
    let m = recorded();
    let mut text = String::new();
    m.render_prometheus(&mut text);
    let e = metrics_support::check(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    for (name, kind) in [
        ("bundle_relay_requests_total", "counter"),
        ("bundle_relay_bundles_admitted_total", "counter"),
        ("bundle_relay_bundles_delivered_total", "counter"),
        ("bundle_relay_bundles_rejected_total", "counter"),
        ("bundle_relay_bundles_expired_total", "counter"),
        ("bundle_relay_bundles_failed_total", "counter"),
        ("bundle_relay_bundles_in_flight", "gauge"),
        ("bundle_relay_upstream_calls_total", "counter"),
        ("bundle_relay_cooldowns_started_total", "counter"),
        ("bundle_relay_cooldowns_active", "gauge"),
        ("bundle_relay_upstream_connections", "gauge"),
        ("bundle_relay_upstream_reconnects_total", "counter"),
        ("bundle_relay_arena_capacity_slots", "gauge"),
        ("bundle_relay_arena_in_use_slots", "gauge"),
        ("bundle_relay_intake_connections", "gauge"),
        ("bundle_relay_intake_connections_refused_total", "counter"),
        ("bundle_relay_config_generation", "gauge"),
        ("bundle_relay_relay_overhead_seconds", "histogram"),
        ("bundle_relay_delivery_latency_seconds", "histogram"),
        ("bundle_relay_limiter_wait_seconds", "histogram"),
        ("bundle_relay_upstream_round_trip_seconds", "histogram"),
    ] {
        assert_eq!(e.types.get(name).map(String::as_str), Some(kind), "{name}");
    }
}

#[test]
fn counters_and_gauges_are_summed_over_threads() {
    let m = recorded();
    let mut text = String::new();
    m.render_prometheus(&mut text);
    let e = metrics_support::check(&text).unwrap();
    let v = |n: &str, l: &[(&str, &str)]| e.value(n, l).unwrap_or_else(|| panic!("{n}{l:?}"));
    let req = "bundle_relay_requests_total";
    assert_eq!(v(req, &[("method", "sendBundle"), ("outcome", "ok")]), 6.0);
    assert_eq!(
        v(
            req,
            &[("method", "getTipAccounts"), ("outcome", "refused_cap")]
        ),
        1.0
    );
    assert_eq!(v(req, &[("method", "other"), ("outcome", "error")]), 0.0);
    let f = [("region", "frankfurt")];
    assert_eq!(v("bundle_relay_bundles_admitted_total", &f), 3.0);
    assert_eq!(v("bundle_relay_bundles_delivered_total", &f), 1.0);
    assert_eq!(v("bundle_relay_bundles_rejected_total", &f), 1.0);
    assert_eq!(v("bundle_relay_bundles_in_flight", &f), 1.0);
    assert_eq!(
        v("bundle_relay_requests_refused_backlog_total", &f),
        2.0,
        "an operator reads which region's pool is behind"
    );
    let up = "bundle_relay_upstream_calls_total";
    assert_eq!(
        v(up, &[("region", "ny"), ("status", "RESOURCE_EXHAUSTED")]),
        2.0
    );
    assert_eq!(v(up, &[("region", "ny"), ("status", "OUT_OF_SPEC")]), 1.0);
    assert_eq!(v(up, &[("region", "ny"), ("status", "OK")]), 0.0);
    let weird = "we\"ird\\name";
    assert_eq!(
        v(up, &[("region", weird), ("status", "TRANSPORT_ERROR")]),
        1.0
    );
    assert_eq!(
        v("bundle_relay_cooldowns_started_total", &[("region", "ny")]),
        1.0
    );
    assert_eq!(v("bundle_relay_cooldowns_active", &[("region", "ny")]), 4.0);
    let conns = "bundle_relay_upstream_connections";
    assert_eq!(v(conns, &[("region", "frankfurt"), ("state", "up")]), 11.0);
    assert_eq!(
        v(conns, &[("region", "frankfurt"), ("state", "draining")]),
        1.0
    );
    assert_eq!(v("bundle_relay_upstream_reconnects_total", &f), 1.0);
    assert_eq!(v("bundle_relay_arena_capacity_slots", &[]), 2000.0);
    assert_eq!(v("bundle_relay_arena_in_use_slots", &[]), 7.0);
    assert_eq!(v("bundle_relay_intake_connections", &[]), 2.0);
    assert_eq!(v("bundle_relay_intake_connections_refused_total", &[]), 1.0);
    assert_eq!(v("bundle_relay_config_generation", &[]), 3.0);
}

#[test]
fn histogram_buckets_count_values_at_or_below_le_in_seconds() {
    let m = recorded();
    let mut text = String::new();
    m.render_prometheus(&mut text);
    let e = metrics_support::check(&text).unwrap();
    let b = |le: &str| {
        e.value("bundle_relay_relay_overhead_seconds_bucket", &[("le", le)])
            .unwrap_or_else(|| panic!("le {le}"))
    };
    assert_eq!(b("0.000001"), 1.0);
    assert_eq!(b("0.00001"), 3.0);
    assert_eq!(b("0.000025"), 4.0);
    assert_eq!(b("0.001"), 5.0);
    assert_eq!(b("1"), 5.0);
    assert_eq!(b("2.5"), 6.0);
    assert_eq!(b("+Inf"), 6.0);
    assert_eq!(
        e.value("bundle_relay_relay_overhead_seconds_count", &[]),
        Some(6.0)
    );
    let sum = e
        .value("bundle_relay_relay_overhead_seconds_sum", &[])
        .unwrap();
    assert!((sum - 2.000_934_8).abs() < 1e-9, "sum {sum}");
    let rtt = "bundle_relay_upstream_round_trip_seconds_bucket";
    assert_eq!(
        e.value(rtt, &[("region", "ny"), ("le", "0.025")]),
        Some(0.0)
    );
    assert_eq!(e.value(rtt, &[("region", "ny"), ("le", "0.05")]), Some(1.0));
    assert_eq!(
        e.value(rtt, &[("region", "frankfurt"), ("le", "+Inf")]),
        Some(0.0)
    );
    assert_eq!(
        e.value("bundle_relay_delivery_latency_seconds_count", &[]),
        Some(0.0)
    );
}

#[test]
fn checker_rejects_broken_expositions() {
    // The checker must be able to fail, or the tests above prove nothing.
    let ok = "# HELP a_total x\n# TYPE a_total counter\na_total 1\n";
    assert!(metrics_support::check(ok).is_ok());
    let no_type = "# HELP a_total x\na_total 1\n";
    assert!(metrics_support::check(no_type).is_err());
    let twice = format!("{ok}# HELP a_total x\n");
    assert!(metrics_support::check(&twice).is_err());
    let not_cumulative = "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\n\
        h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n";
    assert!(metrics_support::check(not_cumulative).is_err());
    let bad_count = "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n\
        h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n";
    assert!(metrics_support::check(bad_count).is_err());
    let bad_line = "# HELP g x\n# TYPE g gauge\ng{a=\"1\" 2\n";
    assert!(metrics_support::check(bad_line).is_err());
}

#[test]
fn histograms_text_has_a_percentile_table_per_histogram() {
    let m = recorded();
    let mut text = String::new();
    m.render_histograms(&mut text);
    for tag in [
        "relay_overhead",
        "delivery_latency",
        "limiter_wait",
        "upstream_round_trip.frankfurt",
        "upstream_round_trip.ny",
    ] {
        assert!(
            text.contains(&format!("# {tag} ")),
            "{tag} missing:\n{text}"
        );
    }
    assert!(text.contains("Value     Percentile TotalCount 1/(1-Percentile)"));
    // The overhead table ends at the max (2 s = 2,000,000 µs, to 0.1 %) with all 6 values.
    let overhead = text.split("# delivery_latency").next().unwrap();
    let last = overhead
        .lines()
        .rfind(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .unwrap();
    let cols: Vec<&str> = last.split_whitespace().collect();
    let value: f64 = cols[0].parse().unwrap();
    assert!((value - 2_000_000.0).abs() / 2_000_000.0 < 0.001, "{last}");
    assert_eq!(cols[1], "1.000000000000");
    assert_eq!(cols[2], "6");
    let mut dumped = Vec::new();
    m.dump_percentiles(&mut dumped).unwrap();
    assert_eq!(String::from_utf8(dumped).unwrap(), text);
}

/// Every recording call of [`recorded`], made on a registry with metrics off.
fn recorded_with_metrics_off() -> Metrics {
    let m = Metrics::with_switch(&regions(), 2, false);
    for t in [m.thread(0), m.thread(1)] {
        assert!(!t.enabled());
        t.request(Some(Method::SendBundle), ReqOutcome::Ok);
        t.upstream_status(1, Code::RESOURCE_EXHAUSTED);
        t.upstream_transport_error(2);
        t.set_cooldowns_active(1, 4);
        t.set_conn_states(0, [1, 0, 6, 0]);
        t.reconnect(0);
        t.record_overhead_ns(5_000);
        t.record_delivery_ns(5_000);
        t.record_limiter_wait_ns(5_000);
        t.record_upstream_rtt_ns(1, 30_000_000);
    }
    m
}

#[test]
fn with_metrics_off_every_recording_call_leaves_the_registry_empty() {
    let m = recorded_with_metrics_off();
    assert!(!m.enabled());
    let s = m.snapshot();
    assert_eq!(
        s,
        bundle_relay::metrics::Snapshot {
            regions: vec![Default::default(); 3],
            ..Default::default()
        }
    );
    for id in m.hist_ids() {
        assert_eq!(m.histogram(id).len(), 0, "{id:?}");
        assert_eq!(m.histogram_sum_ns(id), 0, "{id:?}");
    }
    // The accounting (counted apart from metrics) has nothing in it: it adds up, at zero.
    assert_eq!(
        m.accounting(),
        vec![bundle_relay::metrics::Accounting {
            region: "all".into(),
            admitted: 0,
            settled_or_held: 0,
        }]
    );
}

#[test]
fn with_metrics_off_the_exposition_says_so_and_serves_the_relay_accounting_unlabelled() {
    let m = recorded_with_metrics_off();
    m.set_config_generation(2);
    // The relay's accounting, as the reactor threads count it whether metrics are on or off.
    let (a, b) = (m.stats(0), m.stats(1));
    a.requests.set(10);
    b.requests.set(2);
    a.region(0).admitted.set(6);
    b.region(2).admitted.set(4);
    a.region(0).delivered.set(5);
    b.region(2).delivered.set(2);
    a.region(0).rejected.set(1);
    b.region(2).expired.set(1);
    b.region(2).in_flight.set(1);
    a.refused_cap.set(2);
    a.region(0).leader_routed.set(3);
    b.region(2).leader_routed.set(1);
    b.region(2).throttles.set(2);
    a.arena_capacity.set(1000);
    b.arena_capacity.set(1000);
    let mut text = String::new();
    m.render_prometheus(&mut text);
    let e = metrics_support::check(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    assert!(text.contains("# metrics are disabled"), "{text}");
    assert_eq!(e.value("bundle_relay_metrics_enabled", &[]), Some(0.0));
    for (name, v) in [
        ("bundle_relay_requests_total", 12.0),
        ("bundle_relay_requests_refused_cap_total", 2.0),
        ("bundle_relay_bundles_admitted_total", 10.0),
        ("bundle_relay_bundles_delivered_total", 7.0),
        ("bundle_relay_bundles_rejected_total", 1.0),
        ("bundle_relay_bundles_expired_total", 1.0),
        ("bundle_relay_bundles_failed_total", 0.0),
        ("bundle_relay_bundles_in_flight", 1.0),
        ("bundle_relay_config_generation", 2.0),
        ("bundle_relay_leader_routed_total", 4.0),
        ("bundle_relay_region_throttles_total", 2.0),
        ("bundle_relay_arena_capacity_slots", 2000.0),
        ("bundle_relay_arena_in_use_slots", 1.0),
    ] {
        assert_eq!(e.value(name, &[]), Some(v), "{name}\n{text}");
    }
    assert!(
        e.samples.iter().all(|s| s
            .labels
            .iter()
            .all(|(k, _)| !["region", "method", "outcome", "le", "code"].contains(&k.as_str()))),
        "no per-region, per-method or histogram series: {text}"
    );
    assert_eq!(
        m.accounting(),
        vec![bundle_relay::metrics::Accounting {
            region: "all".into(),
            admitted: 10,
            settled_or_held: 10,
        }]
    );
    let mut h = String::new();
    m.render_histograms(&mut h);
    assert!(h.starts_with("# metrics are disabled"), "{h}");
}

#[test]
fn with_metrics_on_the_exposition_says_so_too() {
    let mut text = String::new();
    recorded().render_prometheus(&mut text);
    let e = metrics_support::check(&text).unwrap();
    assert_eq!(e.value("bundle_relay_metrics_enabled", &[]), Some(1.0));
    assert!(!text.contains("metrics are disabled"));
}

/// With tenants (their counts, quota leases and delivery latency), the exposition is still
/// well formed, and each family is one family to a reader that names counters without
/// `_total` (OpenMetrics): a gauge beside a counter of the same name plus `_total` is not.
#[test]
fn the_tenants_families_are_well_formed_and_distinct() {
    use std::sync::Arc;
    let m = recorded();
    let stats = Arc::new(bundle_relay::metrics::tenants::TenantStats::new(2));
    m.set_tenants(
        stats,
        Box::new(|each| {
            each("default", 0, "the default policy");
            each("alpha", 1, "keys sha256:0a1b2c3d");
        }),
    );
    let mut text = String::new();
    m.render_prometheus(&mut text);
    let e = metrics_support::check(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    assert!(
        e.types
            .keys()
            .any(|n| n.starts_with("bundle_relay_tenant_")),
        "{text}"
    );
}

/// The rows of a percentile table as (value, percentile, total count) text.
fn table_rows(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|c| c.len() >= 3 && c[0].starts_with(|ch: char| ch.is_ascii_digit()))
        .map(|c| (c[0].to_string(), c[1].to_string(), c[2].to_string()))
        .collect()
}

#[test]
fn a_percentile_on_an_exact_sample_count_is_that_sample() {
    let m = Metrics::new(&regions(), 1);
    // 1, 2, … 10 µs: 30 % of the values are at or below 3 µs, so the 0.3 row says 3 µs (the
    // top of its bucket, 3.001), not 4.
    for us in 1..=10 {
        m.thread(0).record_overhead_ns(us * 1_000);
    }
    let mut text = String::new();
    m.render_histograms(&mut text);
    let overhead = text.split("# delivery_latency").next().unwrap();
    let rows = table_rows(overhead);
    for (q, value, total) in [
        ("0.100000000000", "1.000", "1"),
        ("0.300000000000", "3.001", "3"),
        ("0.500000000000", "5.003", "5"),
        ("0.600000000000", "6.003", "6"),
        ("0.700000000000", "7.003", "7"),
        ("0.800000000000", "8.003", "8"),
        ("0.900000000000", "9.007", "9"),
        ("1.000000000000", "10.007", "10"),
    ] {
        let row = rows
            .iter()
            .find(|r| r.1 == q)
            .unwrap_or_else(|| panic!("no row {q}:\n{overhead}"));
        assert_eq!(
            (row.0.as_str(), row.2.as_str()),
            (value, total),
            "{q}:\n{overhead}"
        );
    }
}
