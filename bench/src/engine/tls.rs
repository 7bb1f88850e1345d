//! TLS mode: a throwaway CA and a server certificate for every name a relay may dial.
//!
//! A CA plus a leaf (rather than one self-signed leaf) because webpki-based clients accept a CA
//! as a trust anchor everywhere, whereas a self-signed end-entity certificate as its own anchor is
//! refused by some. Clients trust the CA PEM written to `--tls-cert-out`.

use std::net::SocketAddr;
use std::sync::Arc;

use bundle_relay::jito::MAINNET_DOMAIN;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

/// Loopback addresses the default layout uses (127.0.0.11..=18), always covered so a
/// certificate written once serves later runs on the same layout.
const DEFAULT_LOOPBACK: std::ops::RangeInclusive<u8> = 11..=18;

pub struct TlsMaterial {
    pub acceptor: TlsAcceptor,
    /// The CA certificate clients should trust (PEM).
    pub ca_pem: String,
}

/// The names the certificate covers: localhost, the regions' loopback addresses and Jito's real
/// host names, so a relay configured with production names can be pointed here by /etc/hosts or
/// by overriding only the address.
pub fn subject_names(regions: &[String], addrs: &[SocketAddr]) -> Vec<String> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    names.extend(DEFAULT_LOOPBACK.map(|i| format!("127.0.0.{i}")));
    for a in addrs {
        let ip = a.ip().to_string();
        if !names.contains(&ip) {
            names.push(ip);
        }
    }
    names.push(MAINNET_DOMAIN.to_string());
    names.extend(regions.iter().map(|r| format!("{r}.{MAINNET_DOMAIN}")));
    names
}

pub fn generate(regions: &[String], addrs: &[SocketAddr]) -> Result<TlsMaterial, String> {
    let err = |what: &str, e: &dyn std::fmt::Display| format!("TLS setup: {what}: {e}");
    let ca_key = KeyPair::generate().map_err(|e| err("CA key", &e))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| err("CA", &e))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "bench-engine test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(|e| err("CA cert", &e))?;
    let leaf_key = KeyPair::generate().map_err(|e| err("server key", &e))?;
    let mut leaf_params =
        CertificateParams::new(subject_names(regions, addrs)).map_err(|e| err("names", &e))?;
    leaf_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "bench-engine");
    let leaf = leaf_params
        .signed_by(&leaf_key, &ca)
        .map_err(|e| err("server cert", &e))?;
    let chain: Vec<CertificateDer<'static>> = vec![leaf.der().clone(), ca.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err("protocol versions", &e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| err("certificate", &e))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsMaterial {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        ca_pem: ca.pem(),
    })
}
