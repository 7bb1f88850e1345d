//! The relay's metrics as an operator scrapes them, during and after real load through
//! bench-engine: the accounting identity holds in /metrics, the histogram counts match the
//! requests, and /debug/pairs shows every pair; with metrics off (`Spec::metrics`), /metrics
//! says so and serves the accounting counters while nothing is recorded.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bundle_relay::admin::{Admin, AdminHandle};
use bundle_relay::metrics::Metrics;
use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{Engine, EngineConfig, MAINNET_REGIONS};
use support::relay::{bundles, run_load, spec, wait_ended, wait_for, wait_pairs_up};

fn get(addr: SocketAddr, path: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    s
}

/// A request the relay cannot even frame as HTTP: answered 400 and closed.
fn send_unframable(target: SocketAddr) {
    let mut c = TcpStream::connect(target).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"NOT HTTP AT ALL\r\n\r\n").unwrap();
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    assert!(s.starts_with("HTTP/1.1 400 "), "{s}");
}

/// The sum over every label set of a sample family.
fn sum(text: &str, family: &str) -> u64 {
    text.lines()
        .filter(|l| {
            l.starts_with(family) && matches!(l.as_bytes().get(family.len()), Some(b'{' | b' '))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64)
        .sum()
}

/// The relay's admin listener on an ephemeral loopback port.
fn admin_for(relay: &Relay) -> AdminHandle {
    Admin::start(
        "127.0.0.1:0".parse().unwrap(),
        relay.metrics(),
        relay.pairs_fn(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraped_counters_add_up_and_histograms_count_every_request() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 10;
    ec.faults = vec!["storm@500ms:fraction=0.25,retry_ms=2000".parse().unwrap()];
    let engine = Engine::start(ec).await.unwrap();
    let relay = Relay::start(spec(&engine.region_addrs(), "127.1.78.0/28", 10)).unwrap();
    let admin = admin_for(&relay);
    let addr = admin.local_addr();
    wait_pairs_up(&relay, 128, Duration::from_secs(10)).await;

    let target = relay.rotating_addr().unwrap();
    let load = tokio::spawn(run_load(vec![target], 300.0, bundles(25, 0, 900)));
    // Mid-run scrapes parse and never go backwards.
    let mut last = 0;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let m = get(addr, "/metrics");
        let admitted = sum(&m, "bundle_relay_bundles_admitted_total");
        assert!(admitted >= last, "admitted went from {last} to {admitted}");
        last = admitted;
    }
    let report = load.await.unwrap();
    assert_eq!(report.summary.result_ids_matching, 900);
    wait_ended(&relay, Duration::from_secs(15)).await;
    // Gauges are published on the reactor's sweep period.
    tokio::time::sleep(Duration::from_millis(1_200)).await;

    let m = get(addr, "/metrics");
    let admitted = sum(&m, "bundle_relay_bundles_admitted_total");
    let delivered = sum(&m, "bundle_relay_bundles_delivered_total");
    let ended = delivered
        + sum(&m, "bundle_relay_bundles_rejected_total")
        + sum(&m, "bundle_relay_bundles_expired_total")
        + sum(&m, "bundle_relay_bundles_failed_total");
    assert_eq!(admitted, 900, "{m}");
    assert_eq!(ended + sum(&m, "bundle_relay_bundles_in_flight"), admitted);
    assert_eq!(delivered, 900);
    assert_eq!(sum(&m, "bundle_relay_requests_total"), 900);
    assert_eq!(sum(&m, "bundle_relay_relay_overhead_seconds_count"), 900);
    // A request that is not HTTP is answered too, and counted as invalid.
    send_unframable(target);
    let m = get(addr, "/metrics");
    assert_eq!(sum(&m, "bundle_relay_requests_total"), 901);
    assert!(
        m.contains("\nbundle_relay_requests_total{method=\"other\",outcome=\"invalid\"} 1\n"),
        "{m}"
    );
    assert_eq!(sum(&m, "bundle_relay_delivery_latency_seconds_count"), 900);
    let storm = engine.stats().faults["storm"];
    assert!(storm > 0);
    assert_eq!(sum(&m, "bundle_relay_cooldowns_started_total"), storm);
    assert_eq!(relay.metrics().check_accounting(), Ok(()));

    let pairs = get(addr, "/debug/pairs");
    // Each region by its name, as the config names it.
    for name in MAINNET_REGIONS {
        assert!(pairs.contains(&format!("({name}): ready ")), "{pairs}");
    }
    let h = get(addr, "/debug/histograms");
    assert!(h.contains("Percentile"), "{h}");

    admin.shutdown();
    relay.shutdown(Duration::from_millis(200));
    engine.shutdown().await;
}

/// Every histogram's recorded count and every per-thread metric's sum: all zero when nothing
/// was recorded (the accounting, which runs either way, is not a metric).
fn recorded(m: &Metrics) -> (u64, u64) {
    let hist: u64 = m
        .hist_ids()
        .into_iter()
        .map(|id| m.histogram(id).len())
        .sum();
    let s = m.snapshot();
    let counters: u64 = s.requests.iter().flatten().sum::<u64>()
        + s.regions
            .iter()
            .map(|r| {
                r.cooldowns_active
                    + r.upstream.iter().sum::<u64>()
                    + r.conns.iter().sum::<u64>()
                    + r.reconnects
            })
            .sum::<u64>();
    (hist, counters)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_metrics_off_the_scrape_serves_the_accounting_and_nothing_is_recorded() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 10;
    let engine = Engine::start(ec).await.unwrap();
    let mut spec = spec(&engine.region_addrs(), "127.1.79.0/29", 10);
    spec.metrics = false;
    let relay = Relay::start(spec).unwrap();
    let admin = admin_for(&relay);
    let addr = admin.local_addr();
    wait_pairs_up(&relay, 64, Duration::from_secs(10)).await;

    let target = relay.rotating_addr().unwrap();
    let report = run_load(vec![target], 400.0, bundles(26, 0, 200)).await;
    assert_eq!(report.summary.result_ids_matching, 200);
    wait_for(
        &relay,
        "every bundle delivered",
        Duration::from_secs(10),
        |t| t.delivered == 200,
    )
    .await;
    // Past one gauge-publishing sweep, which must publish nothing either.
    tokio::time::sleep(Duration::from_millis(1_200)).await;

    let m = get(addr, "/metrics");
    assert!(m.contains("\nbundle_relay_metrics_enabled 0\n"), "{m}");
    assert!(m.contains("# metrics are disabled"), "{m}");
    assert_eq!(sum(&m, "bundle_relay_requests_total"), 200, "{m}");
    assert_eq!(sum(&m, "bundle_relay_requests_invalid_total"), 0, "{m}");
    // Every invalid request is one of the requests answered.
    send_unframable(target);
    let m = get(addr, "/metrics");
    assert_eq!(sum(&m, "bundle_relay_requests_total"), 201, "{m}");
    assert_eq!(sum(&m, "bundle_relay_requests_invalid_total"), 1, "{m}");
    assert_eq!(sum(&m, "bundle_relay_bundles_admitted_total"), 200);
    assert_eq!(sum(&m, "bundle_relay_bundles_delivered_total"), 200);
    assert_eq!(sum(&m, "bundle_relay_bundles_in_flight"), 0);
    assert_eq!(sum(&m, "bundle_relay_bundles_failed_total"), 0);
    assert!(
        !m.contains("_bucket") && !m.contains("region=\""),
        "no histogram and no per-region series with metrics off: {m}"
    );
    let t = relay.totals();
    assert_eq!((t.requests, t.admitted, t.delivered), (201, 200, 200));

    let metrics = relay.metrics();
    assert!(!metrics.enabled());
    assert_eq!(recorded(&metrics), (0, 0));
    assert_eq!(metrics.check_accounting(), Ok(()));
    let h = get(addr, "/debug/histograms");
    assert!(h.contains("metrics are disabled"), "{h}");

    admin.shutdown();
    relay.shutdown(Duration::from_millis(200));
    engine.shutdown().await;
}
