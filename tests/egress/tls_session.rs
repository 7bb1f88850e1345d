//! The TLS session against an in-memory rustls server: what a handshake agrees, each way it
//! fails and how that failure is named, resumption, and bytes through the fixed buffers.

use crate::tls_support;

use std::sync::Arc;

use bundle_relay::egress::transport::{Received, TlsTarget, Transport};
use bundle_relay::tls::{self, TlsError, TlsSession};
use rustls::{HandshakeKind, ServerConnection};
use tls_support::{handshake, pki, server_config, server_read, server_write, shuttle};

const NAME: &str = "ny.mainnet.block-engine.jito.wtf";

fn session(ca_pem: &str, sni: &str) -> TlsSession {
    let cfg = tls::client_config_from_pem(ca_pem.as_bytes()).unwrap();
    TlsSession::new(cfg, sni).unwrap()
}

#[test]
fn handshake_with_the_engine_ca_agrees_h2_and_carries_bytes_both_ways() {
    let p = pki(&[NAME]);
    let mut c = session(&p.ca_pem, NAME);
    assert!(c.is_handshaking());
    assert!(
        !c.poll_transmit().is_empty(),
        "ClientHello is queued at once"
    );
    assert_eq!(
        c.write_plaintext(b"early").unwrap(),
        0,
        "no data before the handshake"
    );
    let mut s = ServerConnection::new(server_config(&p, &[b"h2"])).unwrap();
    handshake(&mut c, &mut s).unwrap();
    assert!(!c.is_handshaking());
    assert_eq!(c.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(c.handshake_kind(), Some(HandshakeKind::Full));
    assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));

    assert_eq!(c.write_plaintext(b"PRI * HTTP/2.0").unwrap(), 14);
    shuttle(&mut c, &mut s).unwrap();
    let mut out = [0u8; 64];
    let n = server_read(&mut s, &mut out);
    assert_eq!(&out[..n], b"PRI * HTTP/2.0");

    server_write(&mut s, b"settings");
    shuttle(&mut c, &mut s).unwrap();
    assert_eq!(c.plaintext_len(), 8);
    let n = c.read_plaintext(&mut out);
    assert_eq!(&out[..n], b"settings");
    assert_eq!(c.read_plaintext(&mut out), 0);
}

#[test]
fn a_certificate_from_another_ca_is_an_unknown_issuer() {
    let engine = pki(&[NAME]);
    let other = pki(&[NAME]);
    let mut c = session(&other.ca_pem, NAME);
    let mut s = ServerConnection::new(server_config(&engine, &[b"h2"])).unwrap();
    let e = handshake(&mut c, &mut s).unwrap_err();
    assert_eq!(e, TlsError::UnknownIssuer);
    assert!(e.to_string().contains("unknown issuer"), "{e}");
    assert_eq!(c.error(), Some(&e), "the failure is kept");
    assert_eq!(c.feed_ciphertext(b"more").unwrap_err(), e, "and final");
}

#[test]
fn the_bundled_webpki_roots_do_not_trust_a_private_ca() {
    let engine = pki(&[NAME]);
    let mut c = TlsSession::new(tls::client_config(None).unwrap(), NAME).unwrap();
    let mut s = ServerConnection::new(server_config(&engine, &[b"h2"])).unwrap();
    assert_eq!(
        handshake(&mut c, &mut s).unwrap_err(),
        TlsError::UnknownIssuer
    );
}

#[test]
fn a_certificate_for_other_names_is_a_name_mismatch_naming_both() {
    let p = pki(&["other.example.com"]);
    let mut c = session(&p.ca_pem, NAME);
    let mut s = ServerConnection::new(server_config(&p, &[b"h2"])).unwrap();
    let e = handshake(&mut c, &mut s).unwrap_err();
    assert_eq!(
        e,
        TlsError::NameMismatch {
            expected: NAME.to_string(),
            presented: vec!["DnsName(\"other.example.com\")".to_string()],
        }
    );
    let text = e.to_string();
    assert!(
        text.contains("name mismatch") && text.contains(NAME),
        "{text}"
    );
}

#[test]
fn an_engine_without_alpn_is_no_alpn_h2() {
    let p = pki(&[NAME]);
    let mut c = session(&p.ca_pem, NAME);
    let mut s = ServerConnection::new(server_config(&p, &[])).unwrap();
    let e = handshake(&mut c, &mut s).unwrap_err();
    assert_eq!(e, TlsError::NoAlpnH2 { negotiated: None });
    assert!(e.to_string().contains("h2 is required"), "{e}");
}

#[test]
fn an_engine_offering_only_http1_is_no_alpn_h2() {
    let p = pki(&[NAME]);
    let mut c = session(&p.ca_pem, NAME);
    let mut s = ServerConnection::new(server_config(&p, &[b"http/1.1"])).unwrap();
    assert_eq!(
        handshake(&mut c, &mut s).unwrap_err(),
        TlsError::NoAlpnH2 { negotiated: None }
    );
}

#[test]
fn eof_during_the_handshake_is_named_and_after_it_is_not_a_tls_error() {
    let p = pki(&[NAME]);
    let mut c = session(&p.ca_pem, NAME);
    let e = c.handle_transport_closed().unwrap();
    assert_eq!(e, TlsError::PeerClosedDuringHandshake);
    assert!(e.to_string().contains("during the TLS handshake"), "{e}");

    let mut c = session(&p.ca_pem, NAME);
    let mut s = ServerConnection::new(server_config(&p, &[b"h2"])).unwrap();
    handshake(&mut c, &mut s).unwrap();
    assert_eq!(c.handle_transport_closed(), None);
}

#[test]
fn close_notify_from_the_engine_is_seen() {
    let p = pki(&[NAME]);
    let mut c = session(&p.ca_pem, NAME);
    let mut s = ServerConnection::new(server_config(&p, &[b"h2"])).unwrap();
    handshake(&mut c, &mut s).unwrap();
    assert!(!c.is_peer_closed());
    s.send_close_notify();
    shuttle(&mut c, &mut s).unwrap();
    assert!(c.is_peer_closed());
}

#[test]
fn the_transport_reports_close_notify_as_the_engine_closing_after_handing_up_what_came_before() {
    let (mut t, mut s) = transport_and_engine(&pki(&[NAME]));
    let mut got = Vec::new();
    let mut exchange = |t: &mut Transport, s: &mut ServerConnection| {
        let back = to_engine_and_back(t, s);
        t.receive(&back, &mut |b| got.extend_from_slice(b))
    };
    for _ in 0..4 {
        assert_eq!(exchange(&mut t, &mut s).unwrap(), Received::Open);
    }
    assert!(t.is_open());
    server_write(&mut s, b"goodbye");
    s.send_close_notify();
    assert_eq!(exchange(&mut t, &mut s).unwrap(), Received::PeerClosed);
    assert_eq!(got, b"goodbye");
}

/// An answer and a record that fails (a corrupt one: a bad MAC) in one read: the answer goes
/// up before the error ends the connection, so a bundle the engine answered counts as
/// answered, not as lost after it was sent.
#[test]
fn the_plaintext_before_a_failing_record_in_the_same_read_goes_up_before_the_error() {
    let (mut t, mut s) = transport_and_engine(&pki(&[NAME]));
    for _ in 0..4 {
        let back = to_engine_and_back(&mut t, &mut s);
        assert_eq!(t.receive(&back, &mut |_| {}).unwrap(), Received::Open);
    }
    assert!(t.is_open());
    let mut read = Vec::new();
    server_write(&mut s, b"the answer");
    while s.wants_write() {
        s.write_tls(&mut read).unwrap();
    }
    let whole = read.len();
    server_write(&mut s, b"what follows");
    while s.wants_write() {
        s.write_tls(&mut read).unwrap();
    }
    assert!(read.len() > whole, "a second record");
    *read.last_mut().unwrap() ^= 0x55;
    let mut got = Vec::new();
    let r = t.receive(&read, &mut |b| got.extend_from_slice(b));
    assert_eq!(got, b"the answer");
    assert!(r.is_err(), "{r:?}");
}

#[test]
fn a_second_session_from_the_same_config_resumes() {
    let p = pki(&[NAME]);
    let cfg = tls::client_config_from_pem(p.ca_pem.as_bytes()).unwrap();
    let scfg = server_config(&p, &[b"h2"]);
    let mut first = TlsSession::new(cfg.clone(), NAME).unwrap();
    let mut s = ServerConnection::new(scfg.clone()).unwrap();
    handshake(&mut first, &mut s).unwrap();
    assert_eq!(first.handshake_kind(), Some(HandshakeKind::Full));
    let mut second = TlsSession::new(cfg, NAME).unwrap();
    let mut s = ServerConnection::new(scfg).unwrap();
    handshake(&mut second, &mut s).unwrap();
    assert_eq!(second.handshake_kind(), Some(HandshakeKind::Resumed));
    assert_eq!(second.alpn_protocol(), Some(&b"h2"[..]));
}

/// More than every buffer holds, both ways: partial acceptance, back-pressure, order kept.
#[test]
fn large_transfers_pass_through_the_fixed_buffers_in_order() {
    let p = pki(&[NAME]);
    let mut c = session(&p.ca_pem, NAME);
    let mut s = ServerConnection::new(server_config(&p, &[b"h2"])).unwrap();
    handshake(&mut c, &mut s).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();

    let mut at = 0;
    let mut got = Vec::new();
    let mut out = vec![0u8; 50_000];
    let mut partial = false;
    while at < data.len() {
        let n = c.write_plaintext(&data[at..]).unwrap();
        partial |= n < data.len() - at;
        at += n;
        shuttle(&mut c, &mut s).unwrap();
        loop {
            let n = server_read(&mut s, &mut out);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&out[..n]);
        }
    }
    assert!(partial, "the transmit buffer took it in pieces");
    assert_eq!(got, data);

    // The server's records all at once: the session takes what fits and the rest after the
    // plaintext is drained.
    s.set_buffer_limit(None);
    server_write(&mut s, &data);
    let mut wire = Vec::new();
    while s.wants_write() {
        s.write_tls(&mut wire).unwrap();
    }
    let mut rest = &wire[..];
    let mut got = Vec::new();
    let mut refused = false;
    while !rest.is_empty() || c.plaintext_len() > 0 {
        let took = c.feed_ciphertext(rest).unwrap();
        refused |= took < rest.len();
        rest = &rest[took..];
        let n = c.read_plaintext(&mut out[..7_000]);
        got.extend_from_slice(&out[..n]);
    }
    assert!(refused, "the incoming buffer pushed back");
    assert_eq!(got.len(), data.len());
    assert!(got == data);
}

#[test]
fn configuration_errors_name_the_cause() {
    let missing = std::path::Path::new("/nonexistent/engine-ca.pem");
    match tls::client_config(Some(missing)) {
        Err(TlsError::CaFileUnreadable { path, .. }) => assert!(path.contains("engine-ca.pem")),
        other => panic!("{other:?}"),
    }
    let e = tls::client_config_from_pem(b"not a certificate").unwrap_err();
    assert!(e.to_string().contains("no PEM CERTIFICATE"), "{e}");
    let dir = std::env::temp_dir().join(format!("tls-session-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ca.pem");
    std::fs::write(&file, pki(&[NAME]).ca_pem).unwrap();
    let cfg = tls::client_config(Some(&file)).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(cfg.alpn_protocols, vec![b"h2".to_vec()]);
    let e = TlsSession::new(cfg, "not a name!").unwrap_err();
    assert!(
        matches!(&e, TlsError::InvalidServerName { name } if name == "not a name!"),
        "{e:?}"
    );
    let webpki = tls::client_config(None).unwrap();
    assert_eq!(webpki.alpn_protocols, vec![b"h2".to_vec()]);
    let _: Arc<rustls::ClientConfig> = webpki;
}

/// An in-flight send points at `poll_transmit`'s bytes: nothing but `advance_transmit` may move
/// them, even after a partial send.
#[test]
fn unsent_ciphertext_stays_in_place_until_reported() {
    let p = pki(&[NAME]);
    let mut c = session(&p.ca_pem, NAME);
    let mut s = ServerConnection::new(server_config(&p, &[b"h2"])).unwrap();
    handshake(&mut c, &mut s).unwrap();
    c.write_plaintext(&[1u8; 3000]).unwrap();
    c.advance_transmit(100);
    let pending = c.poll_transmit().to_vec();
    let at = c.poll_transmit().as_ptr();
    c.write_plaintext(&[2u8; 3000]).unwrap();
    server_write(&mut s, b"window update");
    let mut wire = Vec::new();
    s.write_tls(&mut wire).unwrap();
    c.feed_ciphertext(&wire).unwrap();
    let mut out = [0u8; 64];
    assert_eq!(c.read_plaintext(&mut out), 13);
    assert_eq!(c.poll_transmit().as_ptr(), at);
    assert_eq!(&c.poll_transmit()[..pending.len()], &pending[..]);
    assert!(
        c.poll_transmit().len() > pending.len(),
        "new records go after them"
    );
}

/// An engine whose handshake message (its certificate chain) is larger than a session's
/// receive buffer cannot be reached; the error says that, not that a record was larger than
/// TLS allows (none was).
#[test]
fn a_certificate_chain_larger_than_the_session_buffers_is_named_as_such() {
    // Some 700 extra names make the engine's certificate about 40 KB.
    let names: Vec<String> = (0..700)
        .map(|i| format!("host-{i:04}.padding.mainnet.block-engine.jito.wtf"))
        .collect();
    let mut all: Vec<&str> = vec![NAME];
    all.extend(names.iter().map(String::as_str));
    let (mut t, mut s) = transport_and_engine(&pki(&all));
    let back = to_engine_and_back(&mut t, &mut s);
    assert!(
        back.len() > 32_000,
        "the chain is large: {} bytes",
        back.len()
    );
    let e = t.receive(&back, &mut |_| {}).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "TLS: the engine's handshake (its certificate chain) is larger than the {} bytes a \
             TLS session buffers",
            tls::INCOMING_BYTES
        )
    );
}

/// A TLS transport to `NAME` trusting `p`'s CA, and an engine presenting `p`'s certificate.
fn transport_and_engine(p: &tls_support::Pki) -> (Transport, ServerConnection) {
    let target = TlsTarget {
        config: tls::client_config_from_pem(p.ca_pem.as_bytes()).unwrap(),
        sni: NAME.into(),
    };
    let t = Transport::new(None, Some(&target)).unwrap();
    let s = ServerConnection::new(server_config(p, &[b"h2"])).unwrap();
    (t, s)
}

/// Moves the transport's records to the engine once; what the engine sends back.
fn to_engine_and_back(t: &mut Transport, s: &mut ServerConnection) -> Vec<u8> {
    let mut out = t.poll_transmit();
    let n = out.len();
    while !out.is_empty() {
        s.read_tls(&mut out).unwrap();
        s.process_new_packets().unwrap();
    }
    t.advance_transmit(n);
    let mut back = Vec::new();
    while s.wants_write() {
        s.write_tls(&mut back).unwrap();
    }
    back
}
