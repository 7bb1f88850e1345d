//! Tenants end to end: two bots, each with its own key, through the relay's io_uring intake to
//! the synthetic engine. One tenant's flood (ten times its rate) fills only its own share.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bundle_relay::config::{KeyDigest, Policy, Tenant, TenantTable, Tenants};
use bundle_relay::metrics::tenants::{Refused, TenantStats};
use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{Engine, EngineConfig, MAINNET_REGIONS};
use bundle_relay_bench::load::{self, LoadConfig, Outcome};
use bundle_relay_bench::txgen::{self, GeneratedBundle, TxGenConfig};
use support::relay::{spec, wait_ended, wait_pairs_up};

fn tenant(name: &str, key: &str, rate: u32) -> Tenant {
    Tenant {
        name: name.to_string(),
        keys: vec![KeyDigest::of(key.as_bytes())],
        cidrs: Vec::new(),
        ports: Vec::new(),
        policy: Policy {
            in_flight_max: 4096,
            rate: Some((rate, rate)),
            ..Policy::open()
        },
    }
}

fn signed(run: u64, first: u64, count: u64, key: &str) -> Vec<GeneratedBundle> {
    txgen::generate(
        TxGenConfig {
            run_id: run as u32,
            seed: run,
            auth: Some(key.to_string()),
            ..TxGenConfig::default()
        },
        first,
        count,
    )
    .unwrap()
    .0
}

async fn load(
    target: std::net::SocketAddr,
    rate: f64,
    b: Vec<GeneratedBundle>,
) -> load::LoadReport {
    let cfg = LoadConfig {
        targets: vec![target],
        rate_per_s: rate,
        duration: None,
        requests: Some(b.len() as u64),
        connections: 4,
        timeout: Duration::from_secs(5),
        ..LoadConfig::default()
    };
    tokio::task::spawn_blocking(move || load::run(&cfg, &b))
        .await
        .unwrap()
        .unwrap()
}

fn ok(r: &load::LoadReport) -> usize {
    r.outcomes
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Answered(a) if a.status == 200 && a.rpc_error.is_none()))
        .count()
}

/// B alone at 100/s, then B at 100/s while A sends 200/s against its 20/s: B's every bundle is
/// answered and delivered both times, A is refused beyond its rate with Jito's 429, and the
/// relay counts each tenant apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenants_flood_fills_only_its_own_share() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 1_000;
    let engine = Engine::start(ec).await.unwrap();
    // 32 addresses × 8 regions: 256 bundles/s, above B's 100 and A's 20 together.
    let mut s = spec(&engine.region_addrs(), "127.1.74.0/27", 1_000);
    let names: Vec<String> = s.regions.iter().map(|r| r.name.clone()).collect();
    let tenants = Tenants {
        max: 4,
        list: vec![tenant("a", "key-a", 20), tenant("b", "key-b", 100)],
        default: None,
    };
    let stats = Arc::new(TenantStats::new(4));
    let table = TenantTable::build(
        &tenants,
        &names,
        &names,
        &[],
        &[],
        s.arena_slots,
        None,
        &stats,
    )
    .unwrap();
    let (slot_a, slot_b) = (table.entries()[0].slot, table.entries()[1].slot);
    s.tenants = Arc::new(table);
    s.tenant_stats = stats.clone();
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 256, Duration::from_secs(10)).await;
    let target = relay.rotating_addr().unwrap();

    let alone = load(target, 100.0, signed(41, 0, 300, "key-b")).await;
    let (flood, with) = tokio::join!(
        load(target, 200.0, signed(42, 0, 600, "key-a")),
        load(target, 100.0, signed(41, 300, 300, "key-b")),
    );
    let t = wait_ended(&relay, Duration::from_secs(10)).await;

    let (b, a) = (stats.counts(slot_b), stats.counts(slot_a));
    eprintln!(
        "B answer p99 alone {:.0} µs, beside A's flood {:.0} µs ({:.2}×); A admitted {} of 600",
        alone.summary.latency.p99_us,
        with.summary.latency.p99_us,
        with.summary.latency.p99_us / alone.summary.latency.p99_us,
        a.admitted
    );
    assert_eq!(ok(&alone), 300, "{}", alone.summary);
    assert_eq!(ok(&with), 300, "B beside A's flood: {}", with.summary);
    assert_eq!((b.admitted, b.delivered), (600, 600), "{b:?}");
    assert_eq!(b.refused, [0; Refused::ALL.len()], "{b:?}");
    // A: its burst (20) and 20/s over the 3 s, with a little slack for the schedule's edges.
    assert!((60..=90).contains(&a.admitted), "{a:?}");
    assert_eq!(a.delivered, a.admitted, "{a:?}");
    let refused_a = flood
        .outcomes
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Answered(x) if x.status == 429 && x.rpc_error == Some(-32097)))
        .count() as u64;
    assert_eq!(refused_a, 600 - a.admitted, "{}", flood.summary);
    assert_eq!(a.refused[Refused::Rate as usize], refused_a);
    assert!(t.identity_holds(), "{t:?}");
    assert_eq!(engine.stats().early_sends, 0);
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}

/// Tenant A owns one egress address, B shares the other fifteen: every bundle of A's reaches
/// the engine from A's address (also the ones the thread without it accepted: they are sent
/// by the thread that has it), and none of B's ever does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_with_an_egress_address_of_its_own_leaves_only_through_it() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 1_000;
    ec.record = true;
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), "127.1.76.0/28", 1_000);
    let own: std::net::IpAddr = "127.1.76.15".parse().unwrap();
    s.source_group = (0..16).map(|i| u8::from(i == 15)).collect();
    s.egress_groups = vec!["a-only".to_string()];
    let names: Vec<String> = s.regions.iter().map(|r| r.name.clone()).collect();
    let mut a = tenant("a", "key-a", 100);
    a.policy.egress = Some("a-only".to_string());
    let tenants = Tenants {
        max: 4,
        list: vec![a, tenant("b", "key-b", 1_000)],
        default: None,
    };
    let stats = Arc::new(TenantStats::new(4));
    let table = TenantTable::build(
        &tenants,
        &names,
        &names,
        &s.egress_groups,
        &[],
        s.arena_slots,
        None,
        &stats,
    )
    .unwrap();
    let (slot_a, slot_b) = (table.entries()[0].slot, table.entries()[1].slot);
    s.tenants = Arc::new(table);
    s.tenant_stats = stats.clone();
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 128, Duration::from_secs(10)).await;
    let target = relay.rotating_addr().unwrap();

    // A: one address × 8 regions sends 8 a second; B: 15 × 8.
    let (bundles_a, bundles_b) = (signed(51, 0, 12, "key-a"), signed(52, 0, 200, "key-b"));
    let ids = |b: &[GeneratedBundle]| -> std::collections::HashSet<String> {
        b.iter()
            .map(|g| String::from_utf8(g.bundle_id.to_vec()).unwrap())
            .collect()
    };
    let (ids_a, ids_b) = (ids(&bundles_a), ids(&bundles_b));
    let (la, lb) = tokio::join!(load(target, 6.0, bundles_a), load(target, 100.0, bundles_b));
    let t = wait_ended(&relay, Duration::from_secs(10)).await;
    assert_eq!(ok(&la), 12, "{}", la.summary);
    assert_eq!(ok(&lb), 200, "{}", lb.summary);
    let (ca, cb) = (stats.counts(slot_a), stats.counts(slot_b));
    assert_eq!((ca.admitted, ca.delivered), (12, 12), "{ca:?}");
    assert_eq!((cb.admitted, cb.delivered), (200, 200), "{cb:?}");

    let recorded = engine.recorded();
    let from = |ids: &std::collections::HashSet<String>| -> Vec<std::net::IpAddr> {
        recorded
            .iter()
            .filter(|r| ids.contains(&r.id))
            .map(|r| r.source)
            .collect()
    };
    let (sources_a, sources_b) = (from(&ids_a), from(&ids_b));
    assert_eq!(sources_a.len(), 12);
    assert!(sources_a.iter().all(|s| *s == own), "{sources_a:?}");
    assert_eq!(sources_b.len(), 200);
    assert!(!sources_b.contains(&own), "B left through A's address");
    assert!(t.identity_holds(), "{t:?}");
    assert_eq!(engine.stats().early_sends, 0);
    let end = relay.shutdown(Duration::from_millis(200));
    assert!(end.identity_holds(), "{end:?}");
    engine.shutdown().await;
}
