//! bundle-relay through TLS and SOCKS5 end to end on loopback: real signed bundles over HTTP to
//! the io_uring relay, gRPC over TLS (rustls, ALPN h2, the production host names as SNI) to
//! bench-engine in TLS mode, part of the pool through real SOCKS5 proxies. Every way a
//! connection's setup can fail (wrong CA, wrong name, no ALPN h2, a stalled handshake, a
//! refusing proxy, wrong credentials, a proxy that hangs up) must end as a clear error for that
//! pair alone, the pair out of rotation, every other pair delivering.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bundle_relay::config::Source;
use bundle_relay::egress::transport::TlsTarget;
use bundle_relay::metrics::accounting::Totals;
use bundle_relay::relay::{RegionSpec, Spec};
use bundle_relay::runtime::Relay;
use bundle_relay::tls;
use bundle_relay_bench::engine::{Engine, EngineConfig};
use bundle_relay_bench::socks5::{ProxyConfig, ProxyHandle, Socks5Proxy};
use support::engine_host;
use support::relay::{bundles, pinned, run_load, wait_for, wait_for_pairs_text, wait_pairs_up};

const INTERVAL_MS: u64 = 10;

/// A region as the mainnet config has it (TLS, SNI and authority the production host name),
/// its address the bench engine's.
fn tls_region(name: &str, addr: SocketAddr, ca_pem: &str) -> RegionSpec {
    let host = engine_host(name);
    RegionSpec {
        authority: host.clone(),
        interval_ms: INTERVAL_MS,
        pinned: Some("127.0.0.1:0".parse().unwrap()),
        tls: Some(TlsTarget {
            config: tls::client_config_from_pem(ca_pem.as_bytes()).unwrap(),
            sni: host.into(),
        }),
        ..RegionSpec::plain(name, addr)
    }
}

fn locals(prefix: &str, n: u8) -> Vec<Source> {
    (1..=n)
        .map(|i| Source::Local(format!("{prefix}.{i}").parse::<IpAddr>().unwrap()))
        .collect()
}

/// `regions` through `sources` on `threads` threads, reconnecting after `reconnect_ms`
/// (first wait, longest wait).
fn spec(
    regions: Vec<RegionSpec>,
    sources: Vec<Source>,
    threads: usize,
    reconnect_ms: (u64, u64),
) -> Spec {
    let mut spec = Spec::local(regions, vec![]);
    spec.sources = sources;
    spec.threads = threads;
    (spec.reconnect_min_ms, spec.reconnect_max_ms) = reconnect_ms;
    spec
}

fn delivered_all(n: u64) -> impl Fn(&Totals) -> bool {
    move |t| t.delivered >= n && t.in_flight == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_every_bundle_arrives_and_reconnects_resume_their_sessions() {
    let mut cfg = EngineConfig::for_tests(&["ny", "tokyo"]);
    cfg.tls = true;
    cfg.record = true;
    cfg.interval_ms = INTERVAL_MS;
    cfg.faults = vec!["close@2500ms".parse().unwrap()];
    let engine = Engine::start(cfg).await.unwrap();
    let ca = engine.ca_pem().unwrap().to_string();
    let regions = engine
        .region_addrs()
        .iter()
        .map(|(name, addr)| tls_region(name, *addr, &ca))
        .collect();
    let relay = Relay::start(spec(regions, locals("127.1.64", 16), 2, (50, 200))).unwrap();
    let t = wait_pairs_up(&relay, 32, Duration::from_secs(10)).await;
    assert_eq!(t.tls_handshakes, 32, "{t:?}");
    // Pairs of one region share its session store: later ones may already resume.
    let resumed_before = t.tls_resumed;

    let first = bundles(31, 0, 300);
    let report = run_load(vec![relay.rotating_addr().unwrap()], 300.0, first).await;
    assert_eq!(
        report.summary.result_ids_matching, 300,
        "{:?}",
        report.summary
    );
    wait_for(
        &relay,
        "300 delivered",
        Duration::from_secs(10),
        delivered_all(300),
    )
    .await;

    // The engine closes every connection at 2.5 s: each pair reconnects and resumes.
    let t = wait_for(&relay, "every pair back", Duration::from_secs(15), |t| {
        t.disconnects >= 32 && t.pairs_up == 32 && t.tls_handshakes >= 64
    })
    .await;
    // rustls keeps 8 tickets per server name: at least that many reconnects per region resume.
    assert!(t.tls_resumed - resumed_before >= 16, "{t:?}");

    let second = bundles(31, 300, 100);
    let report = run_load(vec![pinned(&relay, "tokyo")], 200.0, second).await;
    assert_eq!(
        report.summary.result_ids_matching, 100,
        "{:?}",
        report.summary
    );
    let t = wait_for(
        &relay,
        "400 delivered",
        Duration::from_secs(10),
        delivered_all(400),
    )
    .await;
    assert!(t.identity_holds(), "{t:?}");
    let final_totals = relay.shutdown(Duration::from_secs(2));
    assert_eq!(final_totals.failed, 0, "{final_totals:?}");

    let recorded = engine.recorded();
    assert_eq!(recorded.len(), 400, "each bundle once");
    let mut ids: Vec<&str> = recorded.iter().map(|b| b.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 400, "no bundle twice");
    assert!(recorded.iter().filter(|b| b.region == "tokyo").count() >= 100);
    let stats = engine.shutdown().await;
    assert!(stats.early_sends_by_source.is_empty(), "{stats:?}");
    assert_eq!(stats.tls_handshake_failures, 0);
}

/// Accepts connections and never says a word.
async fn silent_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tls_setup_failure_is_its_pairs_own_error_and_other_pairs_deliver() {
    let mut cfg = EngineConfig::for_tests(&["ny", "tokyo", "dublin"]);
    cfg.tls = true;
    cfg.record = true;
    cfg.interval_ms = INTERVAL_MS;
    let engine = Engine::start(cfg).await.unwrap();
    let ca = engine.ca_pem().unwrap().to_string();
    let addrs = engine.region_addrs();
    let (other_ca, _) = support::tls::server_pki(&["engine.test"], &[b"h2"]);
    let (no_alpn_ca, no_alpn) = support::tls::rustls_server(&[b"http/1.1"]).await;
    let silent = silent_server().await;

    let good = tls_region("ny", addrs[0].1, &ca);
    let wrong_ca = tls_region("tokyo", addrs[1].1, &other_ca);
    let mut wrong_name = tls_region("dublin", addrs[2].1, &ca);
    wrong_name.tls.as_mut().unwrap().sni = "engine.elsewhere.example".into();
    let mut no_h2 = tls_region("noalpn", no_alpn, &no_alpn_ca);
    no_h2.tls.as_mut().unwrap().sni = "engine.test".into();
    let stalled = tls_region("stalled", silent, &ca);
    let regions = vec![good, wrong_ca, wrong_name, no_h2, stalled];
    let mut spec = spec(regions, locals("127.1.65", 4), 2, (200, 400));
    spec.connect_timeout_ms = 400;
    spec.bundle_max_age_ms = 500;
    let relay = Relay::start(spec).unwrap();

    let text = wait_for_pairs_text(
        &relay,
        &[
            "(tokyo): 2 pairs failing: TLS: bad certificate: unknown issuer",
            "(dublin): 2 pairs failing: TLS: bad certificate: name mismatch (dialled engine.elsewhere.example",
            "(noalpn): 2 pairs failing: TLS: engine negotiated no ALPN protocol; h2 is required",
            "(stalled): 2 pairs failing: the TLS handshake did not finish within 400 ms",
        ],
        Duration::from_secs(10),
    )
    .await;
    // Only the good region's pairs are in rotation; its four pairs show no error.
    assert!(
        !text
            .lines()
            .any(|l| l.contains("(ny)") && l.contains("failing")),
        "{text}"
    );
    let t = relay.totals();
    assert_eq!(t.pairs_up, 4, "{t:?}\n{text}");

    let report = run_load(vec![pinned(&relay, "ny")], 200.0, bundles(32, 0, 100)).await;
    assert_eq!(report.summary.result_ids_matching, 100);
    wait_for(
        &relay,
        "the good region delivers",
        Duration::from_secs(10),
        delivered_all(100),
    )
    .await;
    // Bundles for a region whose every pair fails wait, then expire: counted, never lost.
    let report = run_load(vec![pinned(&relay, "tokyo")], 200.0, bundles(32, 100, 20)).await;
    assert_eq!(report.summary.result_ids_matching, 20);
    let t = wait_for(
        &relay,
        "the unreachable region's bundles expire",
        Duration::from_secs(10),
        |t| t.expired == 20 && t.in_flight == 0,
    )
    .await;
    assert!(t.identity_holds(), "{t:?}");
    assert_eq!(t.pairs_up, 4, "{t:?}");
    relay.shutdown(Duration::from_secs(1));
    assert_eq!(engine.recorded().len(), 100);
    engine.shutdown().await;
}

async fn proxy(cfg: ProxyConfig) -> ProxyHandle {
    Socks5Proxy::start(ProxyConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..cfg
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn part_of_the_pool_behind_socks5_delivers_over_tls_and_bad_proxies_fail_alone() {
    let mut cfg = EngineConfig::for_tests(&["ny"]);
    cfg.tls = true;
    cfg.record = true;
    cfg.interval_ms = INTERVAL_MS;
    let engine = Engine::start(cfg).await.unwrap();
    let ca = engine.ca_pem().unwrap().to_string();
    let (name, addr) = engine.region_addrs()[0].clone();

    let open = proxy(ProxyConfig {
        outbound_source: Some("127.1.66.10".parse().unwrap()),
        ..ProxyConfig::default()
    })
    .await;
    let authed = proxy(ProxyConfig {
        auth: Some(("searcher".into(), "hunter2".into())),
        outbound_source: Some("127.1.66.11".parse().unwrap()),
        ..ProxyConfig::default()
    })
    .await;
    let refusing = proxy(ProxyConfig {
        refuse: Some(0x05),
        ..ProxyConfig::default()
    })
    .await;
    let hanging_up = proxy(ProxyConfig {
        close_mid_handshake: true,
        ..ProxyConfig::default()
    })
    .await;

    let mut sources = locals("127.1.66", 2);
    sources.push(Source::Socks5 {
        proxy: open.local_addr(),
        auth: None,
    });
    sources.push(Source::Socks5 {
        proxy: authed.local_addr(),
        auth: Some(("searcher".into(), "hunter2".into())),
    });
    sources.push(Source::Socks5 {
        proxy: authed.local_addr(),
        auth: Some(("searcher".into(), "wrong".into())),
    });
    sources.push(Source::Socks5 {
        proxy: refusing.local_addr(),
        auth: None,
    });
    sources.push(Source::Socks5 {
        proxy: hanging_up.local_addr(),
        auth: None,
    });
    let regions = vec![tls_region(&name, addr, &ca)];
    let relay = Relay::start(spec(regions, sources, 1, (200, 400))).unwrap();

    let text = wait_for_pairs_text(
        &relay,
        &[
            &format!(
                "via searcher@{}: SOCKS5 proxy rejected the username/password",
                authed.local_addr()
            ),
            &format!("via {}: SOCKS5 CONNECT failed", refusing.local_addr()),
            &format!(
                "via {}: SOCKS5 proxy closed the connection",
                hanging_up.local_addr()
            ),
        ],
        Duration::from_secs(10),
    )
    .await;
    let t = wait_pairs_up(&relay, 4, Duration::from_secs(10)).await;
    assert_eq!(t.pairs_up, 4, "{t:?}\n{text}");

    let report = run_load(
        vec![relay.rotating_addr().unwrap()],
        400.0,
        bundles(33, 0, 200),
    )
    .await;
    assert_eq!(report.summary.result_ids_matching, 200);
    let t = wait_for(
        &relay,
        "200 delivered",
        Duration::from_secs(10),
        delivered_all(200),
    )
    .await;
    assert!(t.identity_holds(), "{t:?}");
    relay.shutdown(Duration::from_secs(1));

    // The engine saw four sources: two local addresses and the two working proxies' own.
    let recorded = engine.recorded();
    assert_eq!(recorded.len(), 200);
    let mut seen: Vec<IpAddr> = recorded.iter().map(|b| b.source).collect();
    seen.sort_unstable();
    seen.dedup();
    let want: Vec<IpAddr> = ["127.1.66.1", "127.1.66.2", "127.1.66.10", "127.1.66.11"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(seen, want);
    let stats = engine.shutdown().await;
    assert!(stats.early_sends_by_source.is_empty(), "{stats:?}");
    for p in [open, authed, refusing, hanging_up] {
        p.shutdown().await;
    }
}
