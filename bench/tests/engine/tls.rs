//! The TLS session over real loopback sockets against bench-engine in TLS mode (rcgen
//! certificate, ALPN h2), carrying a real gRPC SendBundle with the relay's own HTTP/2 and gRPC
//! code; and against small rustls servers for the failures the reactor must name.

use crate::support;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use bundle_relay::tls::{self, TlsError, TlsSession};
use bundle_relay_bench::engine::{Engine, EngineConfig, EngineHandle, testkit};
use rustls::HandshakeKind;
use support::tls::{connect, send_bundle, server_pki, tls_handshake};

/// A production host name: the bench certificate covers it, so a relay configured with the
/// real names reaches the bench engine by overriding only the address.
fn ny() -> String {
    support::engine_host("ny")
}

fn tls_engine(rt: &tokio::runtime::Runtime) -> (EngineHandle, SocketAddr) {
    let cfg = EngineConfig {
        tls: true,
        record: true,
        ..EngineConfig::for_tests(&["ny"])
    };
    let h = rt.block_on(Engine::start(cfg)).expect("engine starts");
    let addr = h.region_addrs()[0].1;
    (h, addr)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn handshake_to(
    addr: SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
    sni: &str,
) -> Result<TlsSession, TlsError> {
    let mut sock = connect(addr);
    let mut t = TlsSession::new(cfg, sni)?;
    tls_handshake(&mut sock, &mut t, &[])?;
    Ok(t)
}

#[test]
fn send_bundle_over_tls_to_bench_engine_then_resume_on_reconnect() {
    let rt = runtime();
    let (engine, addr) = tls_engine(&rt);
    let cfg = tls::client_config_from_pem(engine.ca_pem().unwrap().as_bytes()).unwrap();

    let mut sock = connect(addr);
    let mut t = TlsSession::new(cfg.clone(), &ny()).unwrap();
    tls_handshake(&mut sock, &mut t, &[]).unwrap();
    assert_eq!(t.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(t.handshake_kind(), Some(HandshakeKind::Full));
    let txs = testkit::bench_bundle(&testkit::key(1), 0, 1, 3, 400);
    let uuid = send_bundle(&mut sock, Some(&mut t), &[], &ny(), &txs).expect("SendBundle accepted");
    let recorded = engine.recorded();
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        recorded[0].id, uuid,
        "the engine's answer is the bundle it recorded"
    );
    assert_eq!(
        recorded[0].packets, txs,
        "transactions arrive byte for byte"
    );
    assert_eq!(engine.stats().tls_handshake_failures, 0);
    drop(sock);

    // A reconnect resumes with a ticket from the first session.
    let again = handshake_to(addr, cfg, &ny()).unwrap();
    assert_eq!(again.handshake_kind(), Some(HandshakeKind::Resumed));
    rt.block_on(engine.shutdown());
}

#[test]
fn bench_engine_rejected_by_the_webpki_roots_as_unknown_issuer() {
    let rt = runtime();
    let (engine, addr) = tls_engine(&rt);
    let e = handshake_to(addr, tls::client_config(None).unwrap(), &ny()).unwrap_err();
    assert_eq!(e, TlsError::UnknownIssuer);
    let (other_ca, _) = server_pki(&[ny().as_str()], &[b"h2"]);
    let e = handshake_to(
        addr,
        tls::client_config_from_pem(other_ca.as_bytes()).unwrap(),
        &ny(),
    )
    .unwrap_err();
    assert_eq!(e, TlsError::UnknownIssuer, "{e}");
    rt.block_on(engine.shutdown());
}

#[test]
fn bench_engine_under_a_name_it_does_not_have_is_a_name_mismatch() {
    let rt = runtime();
    let (engine, addr) = tls_engine(&rt);
    let cfg = tls::client_config_from_pem(engine.ca_pem().unwrap().as_bytes()).unwrap();
    let e = handshake_to(addr, cfg, "wrong.example.com").unwrap_err();
    match &e {
        TlsError::NameMismatch {
            expected,
            presented,
        } => {
            assert_eq!(expected, "wrong.example.com");
            assert!(
                presented.iter().any(|p| p.contains(&ny())),
                "the certificate's names are listed: {presented:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("name mismatch"), "{e}");
    rt.block_on(engine.shutdown());
}

#[test]
fn a_server_without_alpn_h2_is_no_alpn_h2() {
    let rt = runtime();
    let (ca, addr) = rt.block_on(support::tls::rustls_server(&[]));
    let cfg = tls::client_config_from_pem(ca.as_bytes()).unwrap();
    let e = handshake_to(addr, cfg.clone(), "engine.test").unwrap_err();
    assert_eq!(e, TlsError::NoAlpnH2 { negotiated: None });

    let (ca, addr) = rt.block_on(support::tls::rustls_server(&[b"http/1.1"]));
    let cfg = tls::client_config_from_pem(ca.as_bytes()).unwrap();
    let e = handshake_to(addr, cfg, "engine.test").unwrap_err();
    assert_eq!(e, TlsError::NoAlpnH2 { negotiated: None }, "{e}");
}

#[test]
fn a_peer_that_closes_during_the_handshake_is_named() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 5];
        s.read_exact(&mut hello).unwrap();
        assert_eq!(hello[0], 0x16, "a TLS handshake record arrived");
    });
    let (ca, _) = server_pki(&["engine.test"], &[b"h2"]);
    let cfg = tls::client_config_from_pem(ca.as_bytes()).unwrap();
    let e = handshake_to(addr, cfg, "engine.test").unwrap_err();
    peer.join().unwrap();
    assert_eq!(e, TlsError::PeerClosedDuringHandshake);
}
