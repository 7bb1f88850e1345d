//! The end-to-end scenario every measurement rests on, for either relay kind: bench-load sends
//! really signed bundles over HTTP to the relay, which relays them as gRPC through 64 egress
//! addresses x 8 regions to bench-engine, which enforces Jito's per-(source IP, region) rule at
//! a 10 ms interval and throws a 30 s cooldown storm at half of the sources mid-run.
//! [`through_a_storm`] checks what must hold for both: every request answered at once with its
//! bundle's Jito id, every admitted bundle delivered and accounted for, each arriving at the
//! engine exactly once, byte-identical, never early, and the storm honoured. It hands back the
//! relay and the engine's counts for what a test checks of one kind alone.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use bundle_relay::metrics::accounting::Totals;
use bundle_relay::runtime::Relay;
use bundle_relay_bench::baseline::config::parse_egress;
use bundle_relay_bench::baseline::{Baseline, BaselineConfig};
use bundle_relay_bench::demo::{RelayKind, RunningRelay};
use bundle_relay_bench::engine::{
    Engine, EngineConfig, EngineHandle, EngineStats, MAINNET_REGIONS,
};
use bundle_relay_bench::load::{self, LoadConfig, Outcome};
use bundle_relay_bench::sentlog::SentLog;
use bundle_relay_bench::txgen::{self, TxGenConfig};

use super::poll;
use super::relay::{spec, wait_pairs_up};

pub const BUNDLES: u64 = 2_000;
const RATE_PER_S: f64 = 400.0;
const INTERVAL_MS: u64 = 10;
/// 64 addresses x 8 regions.
const PAIRS: u64 = 64 * 8;
const STORM: &str = "storm@1500ms:fraction=0.5,retry_ms=30000";

/// The scenario's relay and engine, after every check that holds for both relay kinds.
pub struct StormRun {
    pub relay: RunningRelay,
    pub engine: EngineHandle,
    pub engine_stats: EngineStats,
    dir: PathBuf,
}

impl StormRun {
    /// Shuts the relay and then the engine down, removes the run's files, and returns the
    /// relay's final counters.
    pub async fn shutdown(self) -> Totals {
        let end = self.relay.shutdown().await;
        self.engine.shutdown().await;
        std::fs::remove_dir_all(self.dir).ok();
        end.totals
    }
}

async fn start_relay(kind: RelayKind, engine: &EngineHandle, egress: &str) -> RunningRelay {
    match kind {
        RelayKind::BundleRelay => {
            let relay = Relay::start(spec(&engine.region_addrs(), egress, INTERVAL_MS)).unwrap();
            // Every pair connected before the load starts.
            let t = wait_pairs_up(&relay, PAIRS, Duration::from_secs(10)).await;
            assert_eq!(t.pairs_up, PAIRS, "{t:?}");
            RunningRelay::BundleRelay(relay, None)
        }
        RelayKind::Baseline => {
            let relay = Baseline::start(BaselineConfig {
                rotating_addr: "127.0.0.1:0".parse().unwrap(),
                pinned_base: "127.0.0.1:0".parse().unwrap(),
                admin_addr: None,
                regions: engine.region_addrs(),
                egress: parse_egress(egress).unwrap(),
                interval_ms: INTERVAL_MS,
                connect_at_startup: true,
                ..BaselineConfig::default()
            })
            .await
            .unwrap();
            RunningRelay::Baseline(relay)
        }
    }
}

/// Runs the scenario through `kind` from `egress` (a /26), its bundles numbered by `run`.
pub async fn through_a_storm(kind: RelayKind, run: u32, egress: &str) -> StormRun {
    let dir = std::env::temp_dir().join(format!("e2e-{kind}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sent_log = dir.join("sent.log");

    let mut engine_cfg = EngineConfig::for_tests(&MAINNET_REGIONS);
    engine_cfg.interval_ms = INTERVAL_MS;
    engine_cfg.record = true;
    engine_cfg.sent_log = Some(sent_log.clone());
    engine_cfg.run_id = Some(run);
    engine_cfg.faults = vec![STORM.parse().unwrap()];
    // The sent log must exist before the engine opens it.
    let log = SentLog::create(&sent_log, BUNDLES as usize).unwrap();
    let engine = Engine::start(engine_cfg).await.unwrap();
    let relay = start_relay(kind, &engine, egress).await;

    let (bundles, _) = txgen::generate(
        TxGenConfig {
            run_id: run,
            seed: run as u64,
            keep_raw_txs: true,
            ..TxGenConfig::default()
        },
        0,
        BUNDLES,
    )
    .unwrap();
    let mut targets = vec![relay.rotating_addr()];
    targets.extend(relay.pinned_addrs());
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
    let settled = poll(Duration::from_secs(20), Duration::from_millis(50), || {
        Some(relay.stats()).filter(|t| t.in_flight == 0)
    })
    .await;
    let stats = settled.unwrap_or_else(|| relay.stats());
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
    StormRun {
        relay,
        engine,
        engine_stats: es,
        dir,
    }
}
