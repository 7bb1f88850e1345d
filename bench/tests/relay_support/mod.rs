//! Helpers shared by the relay's end-to-end tests: a loopback [`Spec`] for bench-engine's
//! regions, waiting on the relay's counters, bundles, and a bounded open-loop load.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bundle_relay::metrics::accounting::Totals;
use bundle_relay::relay::{RegionSpec, Spec};
use bundle_relay::runtime::Relay;
use bundle_relay_bench::baseline::config::parse_egress;
use bundle_relay_bench::load::{self, LoadConfig};
use bundle_relay_bench::txgen::{self, GeneratedBundle, TxGenConfig};

pub fn spec(regions: &[(String, SocketAddr)], egress: &str, interval_ms: u64) -> Spec {
    let regions = regions
        .iter()
        .map(|(name, addr)| RegionSpec {
            interval_ms,
            pinned: Some("127.0.0.1:0".parse().unwrap()),
            ..RegionSpec::plain(name, *addr)
        })
        .collect();
    let mut s = Spec::local(regions, parse_egress(egress).unwrap());
    s.threads = 2;
    s.reconnect_min_ms = 50;
    s.reconnect_max_ms = 200;
    s
}

pub async fn wait_for(
    relay: &Relay,
    what: &str,
    limit: Duration,
    ok: impl Fn(&Totals) -> bool,
) -> Totals {
    let deadline = Instant::now() + limit;
    loop {
        let t = relay.totals();
        if ok(&t) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {t:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn bundles(run: u64, first: u64, count: u64) -> Vec<GeneratedBundle> {
    txgen::generate(
        TxGenConfig {
            run_id: run as u32,
            seed: run,
            ..TxGenConfig::default()
        },
        first,
        count,
    )
    .unwrap()
    .0
}

pub async fn run_load(
    targets: Vec<SocketAddr>,
    rate: f64,
    bundles: Vec<GeneratedBundle>,
) -> load::LoadReport {
    let cfg = LoadConfig {
        targets,
        rate_per_s: rate,
        duration: None,
        requests: Some(bundles.len() as u64),
        connections: 8,
        timeout: Duration::from_secs(5),
        ..LoadConfig::default()
    };
    tokio::task::spawn_blocking(move || load::run(&cfg, &bundles))
        .await
        .unwrap()
        .unwrap()
}

pub fn pinned(relay: &Relay, region: &str) -> SocketAddr {
    relay
        .pinned_addrs()
        .iter()
        .find(|(n, _)| n == region)
        .map(|(_, a)| *a)
        .unwrap()
}
