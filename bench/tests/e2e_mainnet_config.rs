//! The shipped `configs/mainnet.toml`, unchanged, against bench-engine in TLS mode standing in
//! for Jito's eight regions: the production host names are mapped to the bench engines'
//! loopback addresses with `--resolve`-style overrides, the bench CA is trusted with
//! `--ca-file`, and the placeholder egress addresses are replaced with loopback ones
//! (`--egress`), exactly as `bundle-relay run --config configs/mainnet.toml --resolve … --ca-file …
//! --egress …` does. Everything else (TLS on 443 with SNI and `:authority` the real names,
//! ALPN h2, pacing at 1 per second per pair, the pinned ports' routing) comes from the file.
//!
//! Two things the test sizes down to fit a test run, on the running shape rather than the
//! file: the listeners move to ephemeral ports (8080–8088 may be taken on a shared host) and
//! the arena to 4,096 slots (the file's 65,536 is 850 MB of prefaulted memory).

mod support;

use std::path::Path;
use std::time::Duration;

use bundle_relay::config::{Config, Overrides, Resolve, Source};
use bundle_relay::jito::ENGINE_PORT;
use bundle_relay::relay::Spec;
use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{Engine, EngineConfig, MAINNET_REGIONS};
use support::engine_host;
use support::relay::{bundles, pinned, run_load, wait_for, wait_pairs_up};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mainnet_config_runs_unchanged_against_tls_stand_ins_for_every_region() {
    let mut ecfg = EngineConfig::for_tests(&MAINNET_REGIONS);
    ecfg.tls = true;
    ecfg.record = true;
    ecfg.interval_ms = 1_000;
    let engine = Engine::start(ecfg).await.unwrap();
    let dir = std::env::temp_dir().join(format!("e2e-mainnet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("bench-ca.pem");
    std::fs::write(&ca_file, engine.ca_pem().unwrap()).unwrap();

    let mut overrides = Overrides {
        ca_file: Some(ca_file.clone()),
        egress: Some(vec!["127.1.68.0/30".into()]),
        ..Overrides::default()
    };
    for (name, addr) in engine.region_addrs() {
        let arg = format!("{}:{ENGINE_PORT}:{addr}", engine_host(&name));
        overrides
            .resolve
            .push(Overrides::parse_resolve(&arg).unwrap());
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/mainnet.toml");
    let cfg = Config::load_overridden(&path, Resolve::Now, &overrides).unwrap();
    assert_eq!(cfg.regions.len(), 8);
    for r in &cfg.regions {
        assert!(r.tls, "{} speaks TLS", r.name);
        assert_eq!(r.port, ENGINE_PORT);
        assert_eq!(r.authority, engine_host(&r.name));
    }
    assert_eq!(cfg.egress.sources.len(), 4);
    assert!(
        cfg.warnings.iter().any(|w| w.contains("override")),
        "{:?}",
        cfg.warnings
    );

    let mut spec = Spec::from_config(&cfg).unwrap();
    assert!(spec.regions.iter().all(|r| r.tls.is_some()));
    assert!(matches!(spec.sources[0], Source::Local(_)));
    spec.threads = 2;
    spec.pin_threads = false;
    spec.arena_slots = 4_096;
    spec.rotating = Some("127.0.0.1:0".parse().unwrap());
    for r in &mut spec.regions {
        r.pinned = Some("127.0.0.1:0".parse().unwrap());
    }
    let relay = Relay::start(spec).unwrap();
    let t = wait_pairs_up(&relay, 32, Duration::from_secs(15)).await;
    assert_eq!(t.tls_handshakes, 32, "{t:?}");

    // One bundle per region through its pinned port, then 8 through the rotating port: half
    // the pool, so none waits for a pair's next second (the file's 2 s age limit holds even
    // on a loaded machine).
    let mut first = 0;
    let mut pinned_ids = Vec::new();
    for region in MAINNET_REGIONS {
        let one = bundles(40, first, 1);
        pinned_ids.push((
            region,
            String::from_utf8(one[0].bundle_id.to_vec()).unwrap(),
        ));
        let report = run_load(vec![pinned(&relay, region)], 50.0, one).await;
        assert_eq!(report.summary.result_ids_matching, 1, "{region}");
        first += 1;
    }
    let report = run_load(
        vec![relay.rotating_addr().unwrap()],
        200.0,
        bundles(40, first, 8),
    )
    .await;
    assert_eq!(report.summary.result_ids_matching, 8);
    let t = wait_for(&relay, "16 delivered", Duration::from_secs(15), |t| {
        t.delivered == 16 && t.in_flight == 0
    })
    .await;
    assert!(t.identity_holds(), "{t:?}");
    relay.shutdown(Duration::from_secs(1));

    let recorded = engine.recorded();
    assert_eq!(recorded.len(), 16);
    for (region, id) in &pinned_ids {
        let got = recorded.iter().find(|b| &b.id == id);
        assert_eq!(
            got.map(|b| b.region.as_str()),
            Some(*region),
            "the bundle sent to {region}'s pinned port"
        );
    }
    let stats = engine.shutdown().await;
    assert!(stats.early_sends_by_source.is_empty(), "{stats:?}");
    assert_eq!(stats.tls_handshake_failures, 0);
    let _ = std::fs::remove_dir_all(&dir);
}
