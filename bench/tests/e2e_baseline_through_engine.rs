//! The bench end to end, as every later measurement uses it: bench-load's generator and open-loop
//! driver send really signed bundles over HTTP to bench-baseline, which relays them as gRPC
//! through 64 egress addresses x 8 regions to bench-engine, which enforces Jito's per-(source IP,
//! region) rule at a 10 ms interval and throws a 30 s cooldown storm at half of the sources
//! mid-run. Every accepted bundle must arrive exactly once, byte-identical, under its Jito id, and
//! the engine must never see an early send.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bundle_relay_bench::baseline::config::parse_egress;
use bundle_relay_bench::baseline::{Baseline, BaselineConfig};
use bundle_relay_bench::engine::{Engine, EngineConfig, MAINNET_REGIONS};
use bundle_relay_bench::load::{self, LoadConfig, Outcome};
use bundle_relay_bench::txgen::{self, TxGenConfig};

const BUNDLES: u64 = 2_000;
const RATE_PER_S: f64 = 400.0;
const INTERVAL_MS: u64 = 10;
const EGRESS: &str = "127.1.60.0/26";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_delivers_every_bundle_once_byte_identical_with_no_early_sends_through_a_storm() {
    let dir = std::env::temp_dir().join(format!("e2e-baseline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sent_log = dir.join("sent.log");

    let mut engine_cfg = EngineConfig::for_tests(&MAINNET_REGIONS);
    engine_cfg.interval_ms = INTERVAL_MS;
    engine_cfg.record = true;
    engine_cfg.sent_log = Some(sent_log.clone());
    engine_cfg.run_id = Some(7);
    engine_cfg.faults = vec!["storm@1500ms:fraction=0.5,retry_ms=30000".parse().unwrap()];
    // The sent log must exist before the engine opens it.
    let log = bundle_relay_bench::sentlog::SentLog::create(&sent_log, BUNDLES as usize).unwrap();
    let engine = Engine::start(engine_cfg).await.unwrap();

    let relay = Baseline::start(BaselineConfig {
        rotating_addr: "127.0.0.1:0".parse().unwrap(),
        pinned_base: "127.0.0.1:0".parse().unwrap(),
        admin_addr: None,
        regions: engine.region_addrs(),
        egress: parse_egress(EGRESS).unwrap(),
        interval_ms: INTERVAL_MS,
        connect_at_startup: true,
        ..BaselineConfig::default()
    })
    .await
    .unwrap();

    let (bundles, _) = txgen::generate(
        TxGenConfig {
            run_id: 7,
            seed: 7,
            keep_raw_txs: true,
            ..TxGenConfig::default()
        },
        0,
        BUNDLES,
    )
    .unwrap();
    let mut targets = vec![relay.rotating_addr()];
    targets.extend(relay.pinned_addrs().into_iter().map(|(_, a)| a));
    let load_cfg = LoadConfig {
        targets,
        rate_per_s: RATE_PER_S,
        duration: None,
        requests: Some(BUNDLES),
        connections: 18,
        timeout: Duration::from_secs(5),
        sent_log: Some(sent_log.clone()),
        ..LoadConfig::default()
    };
    let report = {
        let bundles = bundles.clone();
        tokio::task::spawn_blocking(move || load::run(&load_cfg, &bundles))
            .await
            .unwrap()
            .unwrap()
    };
    drop(log);

    // Every request was answered at once with its bundle's Jito id.
    let s = &report.summary;
    assert_eq!(s.counts.sent, BUNDLES, "{s:?}");
    assert_eq!(s.result_ids_matching, BUNDLES, "{s:?}");
    assert!(report.outcomes.iter().all(|o| matches!(
        o.outcome,
        Outcome::Answered(a) if a.status == 200 && a.result_matches == Some(true)
    )));

    // The relay settles every admitted bundle as delivered.
    let deadline = Instant::now() + Duration::from_secs(20);
    let stats = loop {
        let st = relay.totals();
        if st.in_flight == 0 || Instant::now() > deadline {
            break st;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(stats.identity_holds(), "{stats:?}");
    assert_eq!(
        (stats.admitted, stats.delivered),
        (BUNDLES, BUNDLES),
        "{stats:?}"
    );

    // The engine received each bundle exactly once, byte-identical, under its id, never early,
    // and the storm happened and was honoured for its whole 30 s.
    let es = engine.stats();
    assert_eq!(es.early_sends, 0, "{:?}", es.early_sends_by_source);
    assert_eq!(es.duplicates, 0);
    assert_eq!(es.decode_failures, 0);
    assert!(
        es.faults.get("storm").copied().unwrap_or(0) > 0,
        "{:?}",
        es.faults
    );
    assert_eq!(
        stats.cooldowns, es.faults["storm"],
        "one cooldown per storm answer"
    );
    assert_eq!(es.accepted, BUNDLES);
    assert_eq!(
        es.latency.count, BUNDLES,
        "delivery latency for every bundle"
    );
    let recorded = engine.recorded();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for r in &recorded {
        *by_id.entry(r.id.as_str()).or_default() += 1;
    }
    for b in &bundles {
        let id = b.bundle_id_str();
        assert_eq!(
            by_id.get(id),
            Some(&1),
            "bundle {} arrived {:?} times",
            b.seq,
            by_id.get(id)
        );
        let r = recorded.iter().find(|r| r.id == id).unwrap();
        assert_eq!(r.packets.len(), b.txs.len());
        for (got, want) in r.packets.iter().zip(&b.txs) {
            assert_eq!(&got[..], &want[..], "bundle {} changed on the way", b.seq);
        }
    }

    relay.shutdown().await;
    engine.shutdown().await;
    std::fs::remove_dir_all(dir).ok();
}
