//! An in-memory TLS peer for the session tests and the benchmark: a throwaway CA, a server
//! certificate, and a rustls server driven over byte buffers against a [`TlsSession`].
#![allow(dead_code)]

use std::io::{Read, Write};
use std::sync::Arc;

use bundle_relay::tls::{TlsError, TlsSession};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::ServerConnection;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct Pki {
    pub ca_pem: String,
    pub chain: Vec<CertificateDer<'static>>,
    pub key_der: Vec<u8>,
}

/// A CA and a leaf for `names`, signed by it. Each CA has its own name, so another test CA is
/// an unknown issuer rather than a same-named impostor (which fails as a bad signature).
pub fn pki(names: &[&str]) -> Pki {
    static CAS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let ca_name = format!(
        "test CA {}",
        CAS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ca_name);
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let leaf = CertificateParams::new(names)
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        chain: vec![leaf.der().clone(), ca.der().clone()],
        key_der: leaf_key.serialize_der(),
    }
}

/// A rustls server config for `pki` offering `alpn`.
pub fn server_config(pki: &Pki, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.key_der.clone()));
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), key)
        .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(cfg)
}

/// Moves every pending byte both ways once; returns whether anything moved.
pub fn shuttle(client: &mut TlsSession, server: &mut ServerConnection) -> Result<bool, TlsError> {
    let mut moved = false;
    let out = client.poll_transmit();
    if !out.is_empty() {
        let mut rd = out;
        while !rd.is_empty() {
            server.read_tls(&mut rd).unwrap();
            // A server-side failure (say, no common ALPN) still leaves its alert to send.
            if server.process_new_packets().is_err() {
                break;
            }
        }
        let n = out.len();
        client.advance_transmit(n);
        moved = true;
    }
    let mut buf = Vec::new();
    while server.wants_write() {
        server.write_tls(&mut buf).unwrap();
    }
    let mut at = 0;
    while at < buf.len() {
        at += client.feed_ciphertext(&buf[at..])?;
        moved = true;
    }
    Ok(moved)
}

/// Runs the handshake to completion (or the client's error).
pub fn handshake(client: &mut TlsSession, server: &mut ServerConnection) -> Result<(), TlsError> {
    for _ in 0..16 {
        shuttle(client, server)?;
        if !client.is_handshaking() && !server.is_handshaking() {
            // Let post-handshake messages (tickets) arrive.
            shuttle(client, server)?;
            return Ok(());
        }
    }
    panic!("handshake did not finish in 16 exchanges");
}

/// Reads all the server has decrypted.
pub fn server_read(server: &mut ServerConnection, out: &mut [u8]) -> usize {
    match server.reader().read(out) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(e) => panic!("server read: {e}"),
    }
}

pub fn server_write(server: &mut ServerConnection, data: &[u8]) {
    server.writer().write_all(data).unwrap();
}
