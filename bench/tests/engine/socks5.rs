//! SOCKS5 egress over real loopback sockets: the sans-IO client through bench-socks5 to
//! bench-engine, then a real SendBundle (plaintext and TLS) on the tunnel; and each way a
//! proxy can say no.

use crate::support;

use std::io::BufRead;
use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};

use bundle_relay::egress::socks5::{Phase, ReplyCode, Socks5Error};
use bundle_relay::tls::{self, TlsSession};
use bundle_relay_bench::engine::{Engine, EngineConfig, EngineHandle, testkit};
use bundle_relay_bench::socks5::{ProxyConfig, ProxyHandle, Socks5Proxy};
use support::tls::{connect, send_bundle, socks5_connect, tls_handshake};

fn ny() -> String {
    support::engine_host("ny")
}
/// The proxy's outbound source: what the engine should see instead of the relay's address.
const PROXY_SOURCE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 2, 9));

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn engine(rt: &tokio::runtime::Runtime, tls: bool) -> (EngineHandle, SocketAddr) {
    let cfg = EngineConfig {
        tls,
        record: true,
        ..EngineConfig::for_tests(&["ny"])
    };
    let h = rt.block_on(Engine::start(cfg)).expect("engine starts");
    let addr = h.region_addrs()[0].1;
    (h, addr)
}

fn proxy(rt: &tokio::runtime::Runtime, cfg: ProxyConfig) -> ProxyHandle {
    let cfg = ProxyConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        outbound_source: Some(PROXY_SOURCE),
        ..cfg
    };
    rt.block_on(Socks5Proxy::start(cfg)).expect("proxy starts")
}

#[test]
fn no_auth_connect_then_send_bundle_in_plaintext() {
    let rt = runtime();
    let (engine, target) = engine(&rt, false);
    let proxy = proxy(&rt, ProxyConfig::default());
    let mut sock = connect(proxy.local_addr());
    // The engine's HTTP/2 preface may come with the reply: it belongs to the h2 layer.
    let early = socks5_connect(&mut sock, target, None).unwrap();
    let txs = testkit::bench_bundle(&testkit::key(2), 0, 2, 2, 300);
    let uuid = send_bundle(&mut sock, None, &early, &target.to_string(), &txs).unwrap();
    let recorded = engine.recorded();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].id, uuid);
    assert_eq!(recorded[0].packets, txs);
    assert_eq!(
        recorded[0].source, PROXY_SOURCE,
        "the engine saw the proxy's address"
    );
    drop(sock);
    let sessions = rt.block_on(proxy.shutdown());
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].client.ip(), IpAddr::from([127, 0, 0, 1]));
    assert_eq!(sessions[0].target, Some(target));
    assert_eq!(
        sessions[0].outbound_local.map(|a| a.ip()),
        Some(PROXY_SOURCE)
    );
    assert_eq!(sessions[0].outcome, "relayed");
    rt.block_on(engine.shutdown());
}

#[test]
fn username_password_connect_then_tls_then_send_bundle() {
    let rt = runtime();
    let (engine, target) = engine(&rt, true);
    let proxy = proxy(
        &rt,
        ProxyConfig {
            auth: Some(("searcher".into(), "hunter2".into())),
            ..ProxyConfig::default()
        },
    );
    let mut sock = connect(proxy.local_addr());
    let early = socks5_connect(&mut sock, target, Some(("searcher", "hunter2"))).unwrap();
    let cfg = tls::client_config_from_pem(engine.ca_pem().unwrap().as_bytes()).unwrap();
    let mut t = TlsSession::new(cfg, &ny()).unwrap();
    tls_handshake(&mut sock, &mut t, &early).unwrap();
    let txs = testkit::bench_bundle(&testkit::key(3), 0, 3, 5, 1232);
    let uuid = send_bundle(&mut sock, Some(&mut t), &[], &ny(), &txs).unwrap();
    let recorded = engine.recorded();
    assert_eq!(recorded[0].id, uuid);
    assert_eq!(recorded[0].packets, txs);
    assert_eq!(recorded[0].source, PROXY_SOURCE);
    // The tunnel's bytes are counted when it closes.
    drop(sock);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while proxy.sessions()[0].bytes_up == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let up = proxy.sessions()[0].bytes_up;
    assert!(
        up > 5 * 1232,
        "the bundle's five transactions went up: {up} bytes"
    );
    rt.block_on(proxy.shutdown());
    rt.block_on(engine.shutdown());
}

#[test]
fn wrong_credentials_are_auth_failed() {
    let rt = runtime();
    let proxy = proxy(
        &rt,
        ProxyConfig {
            auth: Some(("searcher".into(), "hunter2".into())),
            ..ProxyConfig::default()
        },
    );
    let target: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut sock = connect(proxy.local_addr());
    let e = socks5_connect(&mut sock, target, Some(("searcher", "wrong"))).unwrap_err();
    assert_eq!(e, Socks5Error::AuthFailed { status: 1 });
    // Without credentials against a proxy that demands them: the method is refused.
    let mut sock = connect(proxy.local_addr());
    let e = socks5_connect(&mut sock, target, None).unwrap_err();
    assert!(matches!(e, Socks5Error::MethodRefused { .. }), "{e}");
    rt.block_on(proxy.shutdown());
}

#[test]
fn a_proxy_that_refuses_names_the_reply_code() {
    let rt = runtime();
    for (code, name) in [
        (2, ReplyCode::NotAllowedByRuleset),
        (5, ReplyCode::ConnectionRefused),
    ] {
        let proxy = proxy(
            &rt,
            ProxyConfig {
                refuse: Some(code),
                ..ProxyConfig::default()
            },
        );
        let mut sock = connect(proxy.local_addr());
        let e = socks5_connect(&mut sock, "127.0.0.1:9".parse().unwrap(), None).unwrap_err();
        assert_eq!(e, Socks5Error::ConnectFailed(name));
        rt.block_on(proxy.shutdown());
    }
}

#[test]
fn a_target_that_is_down_is_connection_refused() {
    let rt = runtime();
    let proxy = proxy(&rt, ProxyConfig::default());
    // A port just released: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut sock = connect(proxy.local_addr());
    let e = socks5_connect(&mut sock, closed, None).unwrap_err();
    assert_eq!(e, Socks5Error::ConnectFailed(ReplyCode::ConnectionRefused));
    rt.block_on(proxy.shutdown());
}

#[test]
fn a_proxy_that_closes_mid_handshake_is_named() {
    let rt = runtime();
    let proxy = proxy(
        &rt,
        ProxyConfig {
            close_mid_handshake: true,
            ..ProxyConfig::default()
        },
    );
    let mut sock = connect(proxy.local_addr());
    let e = socks5_connect(&mut sock, "127.0.0.1:9".parse().unwrap(), None).unwrap_err();
    assert_eq!(
        e,
        Socks5Error::ProxyClosed {
            phase: Phase::Greeting
        }
    );
    rt.block_on(proxy.shutdown());
}

#[test]
fn the_bench_socks5_binary_relays_with_credentials() {
    let rt = runtime();
    let (engine, target) = engine(&rt, false);
    let mut child = Command::new(env!("CARGO_BIN_EXE_bench-socks5"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--user",
            "u",
            "--pass",
            "p",
            "--duration-s",
            "20",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .parse()
        .unwrap();
    let mut sock = connect(addr);
    let early = socks5_connect(&mut sock, target, Some(("u", "p"))).unwrap();
    let txs = testkit::bench_bundle(&testkit::key(4), 0, 4, 1, 200);
    let uuid = send_bundle(&mut sock, None, &early, &target.to_string(), &txs).unwrap();
    assert_eq!(engine.recorded()[0].id, uuid);
    child.kill().unwrap();
    child.wait().unwrap();
    rt.block_on(engine.shutdown());
}
