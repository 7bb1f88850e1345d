//! A blocking loopback `TcpStream` driving the sans-IO layers the reactor drives (SOCKS5, then
//! TLS, then HTTP/2 + gRPC), with real peers on the other end; throwaway PKI for those peers.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bundle_relay::egress::socks5::{Progress, Socks5, Socks5Error};
use bundle_relay::grpc::{self, CallConfig, Method, Outcome};
use bundle_relay::h2::conn::{Config, Connection, Event, StreamId};
use bundle_relay::tls::{TlsError, TlsSession};

#[path = "../../../tests/tls_support/mod.rs"]
mod root_tls;

/// Whole exchanges end well within this on loopback.
const DEADLINE: Duration = Duration::from_secs(10);
/// Read poll, so one thread can both send and receive.
const READ_POLL: Duration = Duration::from_millis(2);

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connects");
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(READ_POLL)).unwrap();
    s
}

/// `Ok(None)`: nothing yet; `Ok(Some(0))`: EOF.
fn read_some(sock: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
    match sock.read(buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Runs a SOCKS5 CONNECT handshake on `sock`; returns bytes that came after the reply.
pub fn socks5_connect(
    sock: &mut TcpStream,
    target: SocketAddr,
    auth: Option<(&str, &str)>,
) -> Result<Vec<u8>, Socks5Error> {
    let mut s = Socks5::new(target, auth)?;
    let mut buf = [0u8; 512];
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < DEADLINE, "SOCKS5 handshake stalled");
        while !s.poll_transmit().is_empty() {
            let n = sock.write(s.poll_transmit()).expect("write to proxy");
            s.advance_transmit(n);
        }
        match read_some(sock, &mut buf) {
            Ok(None) => {}
            Ok(Some(0)) | Err(_) => return Err(s.handle_transport_closed().expect("not done")),
            Ok(Some(n)) => {
                if let Progress::Done { leftover } = s.handle_bytes(&buf[..n])? {
                    return Ok(buf[n - leftover..n].to_vec());
                }
            }
        }
    }
}

/// Sends what the session has queued.
fn flush_tls(sock: &mut TcpStream, tls: &mut TlsSession) {
    while !tls.poll_transmit().is_empty() {
        let n = sock.write(tls.poll_transmit()).expect("write");
        tls.advance_transmit(n);
    }
}

/// Feeds all of `input`, handing decrypted bytes to `sink` as they come.
fn feed_all(
    tls: &mut TlsSession,
    mut input: &[u8],
    mut sink: impl FnMut(&[u8]),
) -> Result<(), TlsError> {
    let mut plain = [0u8; 16 * 1024];
    loop {
        let took = tls.feed_ciphertext(input)?;
        input = &input[took..];
        loop {
            let n = tls.read_plaintext(&mut plain);
            if n == 0 {
                break;
            }
            sink(&plain[..n]);
        }
        if input.is_empty() {
            return Ok(());
        }
    }
}

/// Completes a TLS handshake over `sock` (after `early`, bytes already read from it).
pub fn tls_handshake(
    sock: &mut TcpStream,
    tls: &mut TlsSession,
    early: &[u8],
) -> Result<(), TlsError> {
    feed_all(tls, early, |_| panic!("no plaintext before the handshake"))?;
    let mut buf = vec![0u8; 32 * 1024];
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < DEADLINE, "TLS handshake stalled");
        flush_tls(sock, tls);
        if !tls.is_handshaking() {
            return Ok(());
        }
        match read_some(sock, &mut buf) {
            Ok(None) => {}
            Ok(Some(0)) | Err(_) => {
                return Err(tls.handle_transport_closed().expect("handshaking"));
            }
            Ok(Some(n)) => feed_all(tls, &buf[..n], |_| panic!("no plaintext yet"))?,
        }
    }
}

/// One gRPC SendBundle over `sock` (through `tls` when given) with the relay's own HTTP/2 and
/// gRPC code; returns the engine's uuid, or the outcome's description. `early`: plaintext
/// bytes already read (a server's preface can arrive with the SOCKS5 reply).
pub fn send_bundle(
    sock: &mut TcpStream,
    mut tls: Option<&mut TlsSession>,
    early: &[u8],
    authority: &str,
    txs: &[Vec<u8>],
) -> Result<String, String> {
    let start = Instant::now();
    let now = || start.elapsed().as_nanos() as u64;
    let mut conn = Connection::new(Config::default(), now());
    conn.handle_bytes(now(), early);
    let call = CallConfig::new(
        if tls.is_some() { "https" } else { "http" },
        authority.to_string(),
    );
    let mut id: Option<StreamId> = None;
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        assert!(start.elapsed() < DEADLINE, "SendBundle stalled");
        if id.is_none() && conn.is_ready() && conn.can_start() {
            let started = grpc::start_call(
                &mut conn,
                &call,
                now(),
                Method::SendBundle,
                Some(5_000),
                |b| grpc::encode_send_bundle(txs.iter().map(Vec::as_slice), b),
            );
            id = Some(started.map_err(|e| format!("start: {e:?}"))?);
        }
        // h2 → (TLS →) socket
        match tls.as_deref_mut() {
            Some(t) => {
                while !conn.poll_transmit().is_empty() {
                    let n = t
                        .write_plaintext(conn.poll_transmit())
                        .map_err(|e| e.to_string())?;
                    conn.advance_transmit(n);
                    flush_tls(sock, t);
                }
                flush_tls(sock, t);
            }
            None => {
                while !conn.poll_transmit().is_empty() {
                    let n = sock.write(conn.poll_transmit()).expect("write");
                    conn.advance_transmit(n);
                }
            }
        }
        // socket → (TLS →) h2
        match read_some(sock, &mut buf) {
            Ok(None) => {}
            Ok(Some(0)) | Err(_) => conn.handle_transport_closed(),
            Ok(Some(n)) => match tls.as_deref_mut() {
                Some(t) => feed_all(t, &buf[..n], |p| conn.handle_bytes(now(), p))
                    .map_err(|e| e.to_string())?,
                None => conn.handle_bytes(now(), &buf[..n]),
            },
        }
        if conn.poll_timeout().is_some_and(|t| t <= now()) {
            conn.handle_timeout(now());
        }
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::StreamEnded(s) => {
                    let resp = conn.response(s).expect("ended stream");
                    return match grpc::outcome(&resp, grpc::RETRY_AFTER_MS_DEFAULT) {
                        Outcome::Ok(msg) => Ok(grpc::send_bundle_uuid(msg)
                            .ok_or("malformed SendBundleResponse")?
                            .to_string()),
                        other => Err(format!("{other:?}")),
                    };
                }
                Event::GoAway { .. } | Event::PingAcked | Event::PingTimedOut { .. } => {}
                Event::Closed(e) => return Err(format!("connection closed: {e:?}")),
            }
        }
    }
}

/// A throwaway CA and a leaf certificate for `names`: the CA's PEM, and a rustls server config
/// that offers `alpn` (the root crate's test PKI, shared).
pub fn server_pki(names: &[&str], alpn: &[&[u8]]) -> (String, Arc<rustls::ServerConfig>) {
    let pki = root_tls::pki(names);
    let cfg = root_tls::server_config(&pki, alpn);
    (pki.ca_pem, cfg)
}

/// A tokio-rustls server for `engine.test` that completes handshakes offering `alpn` and then
/// holds each connection open, on the caller's runtime; returns its CA (PEM) and address.
pub async fn rustls_server(alpn: &[&[u8]]) -> (String, SocketAddr) {
    let (ca, cfg) = server_pki(&["engine.test"], alpn);
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut s) = acceptor.accept(sock).await {
                    let mut b = [0u8; 64];
                    let _ = tokio::io::AsyncReadExt::read(&mut s, &mut b).await;
                }
            });
        }
    });
    (ca, addr)
}
