//! TLS mode, the stats endpoint, delivery latency from the sent log, and the binary itself.

use crate::support;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::Duration;

use bundle_relay::proto::searcher::GetRegionsRequest;
use bundle_relay_bench::engine::{EngineConfig, EngineStats, testkit};
use bundle_relay_bench::searcher_grpc::searcher_service_client::SearcherServiceClient;
use bundle_relay_bench::sentlog::{SentLog, monotonic_ns};
use support::engine::*;

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("engine-test-{}-{name}", std::process::id()))
}

#[tokio::test]
async fn tls_mode_serves_h2_with_generated_certificate() {
    let cert = tmp("ca.pem");
    let h = start(EngineConfig {
        tls: true,
        tls_cert_out: Some(cert.clone()),
        ..EngineConfig::for_tests(&["ny", "tokyo"])
    })
    .await;
    let pem = std::fs::read_to_string(&cert).unwrap();
    assert_eq!(Some(pem.as_str()), h.ca_pem());
    // Jito's real host name and the loopback address both verify against the written CA.
    for domain in [support::engine_host("tokyo"), "127.0.0.1".into()] {
        let tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&pem))
            .domain_name(domain.clone());
        let ch =
            tonic::transport::Endpoint::from_shared(format!("https://{}", addr_of(&h, "tokyo")))
                .unwrap()
                .tls_config(tls)
                .unwrap()
                .connect()
                .await
                .unwrap_or_else(|e| panic!("{domain}: {e:?}"));
        let mut c = SearcherServiceClient::new(ch);
        let r = c
            .get_regions(GetRegionsRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.current_region, "tokyo");
    }
    // ALPN: the server picks h2.
    let mut roots = rustls::RootCertStore::empty();
    let der = rustls::pki_types::CertificateDer::from(pem_to_der(&pem));
    roots.add(der).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut cc = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cc.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cc));
    let tcp = tokio::net::TcpStream::connect(addr_of(&h, "ny"))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from(support::engine_host("ny")).unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let _ = std::fs::remove_file(cert);
}

fn pem_to_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

#[tokio::test]
async fn stats_endpoint_serves_json() {
    let h = start(EngineConfig {
        stats_addr: Some("127.0.0.1:0".parse().unwrap()),
        ..EngineConfig::for_tests(&["ny"])
    })
    .await;
    let mut c = client(addr_of(&h, "ny"), src(1)).await;
    c.send_bundle(bundle(1)).await.unwrap();
    let addr = h.stats_addr().unwrap();
    let (status, body) = tokio::task::spawn_blocking(move || http_get(addr, "/stats"))
        .await
        .unwrap();
    assert_eq!(status, 200);
    let s: EngineStats = serde_json::from_str(&body).unwrap();
    assert_eq!((s.accepted, s.regions[0].name.as_str()), (1, "ny"));
    assert_eq!(
        s,
        EngineStats {
            uptime_ms: s.uptime_ms,
            // Landing moves with time on its own (the bundle lands land_ms after it came).
            bundles_landed: s.bundles_landed,
            ..h.stats()
        }
    );
    let (status, _) = tokio::task::spawn_blocking(move || http_get(addr, "/other"))
        .await
        .unwrap();
    assert_eq!(status, 404);
}

fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head[9..12].parse().unwrap(), body.to_string())
}

#[tokio::test]
async fn delivery_latency_is_measured_from_the_sent_log() {
    let path = tmp("sentlog");
    let log = SentLog::create(&path, 16).unwrap();
    let h = start(EngineConfig {
        sent_log: Some(path.clone()),
        run_id: Some(9),
        ..EngineConfig::for_tests(&["ny"])
    })
    .await;
    let ny = addr_of(&h, "ny");
    // Bundle 3 of run 9, sent 5 ms "ago"; bundle 4 never logged; bundle 5 of another run.
    log.record(3, monotonic_ns() - 5_000_000);
    for (n, run, seq) in [(1u8, 9, 3u64), (2, 9, 4), (3, 8, 5)] {
        let txs = testkit::bench_bundle(&testkit::key(n as u64), run, seq, 2, 250);
        let mut c = client(ny, src(n)).await;
        c.send_bundle(testkit::send_bundle_request(&txs))
            .await
            .unwrap();
    }
    let mut c = client(ny, src(4)).await;
    c.send_bundle(bundle_untagged()).await.unwrap();
    let l = h.stats().latency;
    assert_eq!(
        (l.percentiles.count, l.unsent, l.other_run, l.untagged),
        (1, 1, 1, 1)
    );
    let p = &l.percentiles;
    assert!(p.p50_us >= 5_000.0 && p.max_us < 5_000_000.0, "{l:?}");
    assert!(p.p50_us <= p.p99_us && p.p99_us <= p.max_us);
    let _ = std::fs::remove_file(path);
}

fn bundle_untagged() -> bundle_relay::proto::searcher::SendBundleRequest {
    let tx = testkit::signed_tx(&testkit::key(77), [0x42; 32], b"plain");
    testkit::send_bundle_request(&[tx])
}

const BIN: &str = env!("CARGO_BIN_EXE_bench-engine");

#[test]
fn binary_runs_for_its_duration_and_writes_stats_json() {
    let out = tmp("stats.json");
    let status = Command::new(BIN)
        .args([
            "--regions",
            "ny,tokyo",
            "--base-ip",
            "127.0.0.1",
            "--ip-step",
            "0",
            "--port",
            "0",
        ])
        .args([
            "--stats-addr",
            "127.0.0.1:0",
            "--duration-s",
            "0.3",
            "--interval-ms",
            "5",
        ])
        .args(["--fault", "rst@1s:every=3"])
        .arg("--stats-out")
        .arg(&out)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let s: EngineStats = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(s.interval_ms, 5);
    assert_eq!(
        s.regions
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["ny", "tokyo"]
    );
    assert_eq!(s.fault_rules[0].rule, "rst@1s:every=3");
    let _ = std::fs::remove_file(out);
}

#[test]
fn binary_refuses_a_bad_fault_naming_it() {
    let out = Command::new(BIN)
        .args([
            "--fault",
            "rst@1s:fraction=0.5",
            "--port",
            "0",
            "--stats-addr",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("option `fraction` does not apply to rst faults"),
        "{err}"
    );
}

#[test]
fn accept_reports_the_fd_limit_and_keeps_serving() {
    // A tiny descriptor limit for the engine alone, then more connections than it allows.
    let port_file = tmp("emfile.json");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 40 && exec {BIN} --regions ny --base-ip 127.0.0.1 --port 0 --stats-addr 127.0.0.1:0 --duration-s 2.5 --stats-out {}",
            port_file.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    // The engine announces its region address on stderr first.
    let mut seen = Vec::new();
    let addr: SocketAddr = loop {
        let mut b = [0u8; 256];
        let n = stderr.read(&mut b).unwrap();
        assert!(
            n > 0,
            "engine exited early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&b[..n]);
        let text = String::from_utf8_lossy(&seen);
        // Only whole lines: a read may end mid-address.
        let mut whole = text.split_inclusive('\n').filter(|l| l.ends_with('\n'));
        if let Some(line) = whole.find(|l| l.contains("region ny on ")) {
            break line.trim_end().rsplit(' ').next().unwrap().parse().unwrap();
        }
    };
    let held: Vec<_> = (0..60)
        .filter_map(|_| std::net::TcpStream::connect(addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    // Still serving once descriptors are free again.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = client(addr, IpAddr::V4(Ipv4Addr::new(127, 0, 1, 1))).await;
        c.get_regions(GetRegionsRequest {})
            .await
            .expect("served after EMFILE");
    });
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    let text = String::from_utf8_lossy(&seen).to_string() + &rest;
    assert!(text.contains("too many open files"), "{text}");
    assert!(text.contains("at most 40 file descriptors"), "{text}");
    let s: EngineStats =
        serde_json::from_str(&std::fs::read_to_string(&port_file).unwrap()).unwrap();
    assert!(s.accept_emfile > 0);
    let _ = std::fs::remove_file(port_file);
}

/// A region named twice would share its name's counters and faults with the other: refused,
/// naming it.
#[tokio::test]
async fn a_region_named_twice_is_refused_naming_it() {
    let e =
        bundle_relay_bench::engine::Engine::start(EngineConfig::for_tests(&["ny", "tokyo", "ny"]))
            .await
            .err()
            .expect("refused");
    assert_eq!(e.to_string(), "region ny is named twice (regions 0 and 2)");
}
