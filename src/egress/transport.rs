//! The layers under HTTP/2 on one upstream connection, sans-IO: an optional SOCKS5 tunnel
//! (when the source is a proxy), then optional TLS (when the region wants it). A plaintext
//! connection from a local address has no [`Transport`] at all and its HTTP/2 bytes go to the
//! socket untouched, so the common path pays nothing for the layers it does not use.
//!
//! Order of events on one connection: TCP connect → SOCKS5 greeting, auth, CONNECT (each
//! request offered only after the previous reply) → TLS handshake on the tunnel (ALPN h2
//! checked) → [`Transport::is_open`]: HTTP/2 starts. Bytes that arrive with the last SOCKS5
//! reply already belong to TLS and are fed to it; TLS plaintext goes to HTTP/2 in place.
//!
//! Every failure is a [`TransportError`] that names the layer and what went wrong, so one
//! pair's bad proxy or bad certificate is reported for that pair alone.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::ClientConfig;

use super::socks5::{Progress, Socks5, Socks5Error};
use crate::tls::{TlsError, TlsSession};

/// What a TLS region's connections need: the shared client config (trust roots, ALPN h2, the
/// resumption store every reconnect draws on) and the name to send as SNI and verify.
#[derive(Clone)]
pub struct TlsTarget {
    pub config: Arc<ClientConfig>,
    pub sni: Arc<str>,
}

impl fmt::Debug for TlsTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsTarget")
            .field("sni", &self.sni)
            .finish_non_exhaustive()
    }
}

/// Why a pair's connection could not be set up or was lost below HTTP/2.
#[derive(Clone, Debug, PartialEq)]
pub enum TransportError {
    /// The TCP connect failed (errno as the kernel gave it); to `proxy` when the pair goes
    /// through one.
    Connect {
        errno: i32,
        proxy: Option<SocketAddr>,
    },
    /// The SOCKS5 proxy refused or broke the tunnel.
    Socks5 {
        proxy: SocketAddr,
        error: Socks5Error,
    },
    Tls(TlsError),
    /// The tunnel and handshakes did not finish in time (through `proxy` when the pair goes
    /// through one).
    HandshakeTimeout {
        after_ms: u64,
        stage: Stage,
        proxy: Option<SocketAddr>,
    },
    /// The engine (or something in front of it) closed the connection before it joined
    /// rotation, with nothing the tunnel or TLS could name.
    ClosedDuringSetup {
        stage: Stage,
    },
    /// The kernel ended the connection with an error (`errno`: a reset, an ICMP error, the
    /// TCP user timeout) before it joined rotation, during `stage`.
    Broken {
        errno: i32,
        stage: Stage,
        proxy: Option<SocketAddr>,
    },
    /// HTTP/2 ended the connection before it joined rotation: the engine broke the protocol
    /// (a server that does not speak HTTP/2 included), said GOAWAY, or did not acknowledge
    /// our SETTINGS in time.
    Http2(crate::h2::ConnError),
    /// The engine (or something in front of it) sent its SETTINGS but did not answer the
    /// PING that admits a new connection within `after_ms`: the relay closed it.
    PingUnanswered {
        after_ms: u64,
        proxy: Option<SocketAddr>,
    },
    /// The engine refuses this source (gRPC PERMISSION_DENIED or UNAUTHENTICATED, with the
    /// engine's message).
    Refused {
        code: u32,
        message: String,
        /// When the pair asks again.
        retry_ms: u64,
    },
}

impl TransportError {
    /// The SOCKS5 proxy the failed connection went through, when the error names one: a dead
    /// or silent proxy is told apart from the others failing alike.
    pub fn proxy(&self) -> Option<SocketAddr> {
        match self {
            TransportError::Connect { proxy, .. }
            | TransportError::HandshakeTimeout { proxy, .. }
            | TransportError::PingUnanswered { proxy, .. }
            | TransportError::Broken { proxy, .. } => *proxy,
            TransportError::Socks5 { proxy, .. } => Some(*proxy),
            _ => None,
        }
    }

    /// What went wrong without the proxy: the text follows `via PROXY: ` when there is one.
    pub fn detail(&self) -> impl fmt::Display + '_ {
        Detail(self)
    }
}

/// See [`TransportError::detail`].
struct Detail<'a>(&'a TransportError);

impl fmt::Display for Detail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            TransportError::Connect { errno, .. } => {
                write!(f, "connect failed: {}", OsError(*errno))
            }
            TransportError::Socks5 { error, .. } => write!(f, "{error}"),
            TransportError::Tls(e) => write!(f, "TLS: {e}"),
            TransportError::HandshakeTimeout {
                after_ms, stage, ..
            } => write!(
                f,
                "{} did not finish within {after_ms} ms",
                stage.describe()
            ),
            TransportError::ClosedDuringSetup { stage } => write!(
                f,
                "the engine closed the connection during {}",
                stage.describe()
            ),
            TransportError::Broken { errno, stage, .. } => write!(
                f,
                "the connection broke during {}: {}",
                stage.describe(),
                OsError(*errno)
            ),
            TransportError::Http2(e) => match e {
                crate::h2::ConnError::PeerProtocol { reason, what } => write!(
                    f,
                    "HTTP/2: the engine broke the protocol ({reason}: {what}): the relay \
                     closed the connection"
                ),
                crate::h2::ConnError::GoAway { reason } => write!(
                    f,
                    "HTTP/2: the engine said GOAWAY ({reason}) before the connection was in use"
                ),
                crate::h2::ConnError::Timeout { what } => {
                    write!(f, "HTTP/2: {what} in time: the relay closed the connection")
                }
                crate::h2::ConnError::TransportClosed | crate::h2::ConnError::Local => {
                    write!(f, "HTTP/2 ended the connection during its setup")
                }
            },
            TransportError::PingUnanswered { after_ms, .. } => write!(
                f,
                "the engine did not answer the PING that admits a new connection within \
                 {after_ms} ms"
            ),
            TransportError::Refused {
                code,
                message,
                retry_ms,
            } => write!(
                f,
                "the engine refuses this source ({}: {message}); retried within {} s",
                crate::grpc::Code(*code).name(),
                retry_ms / 1_000
            ),
        }
    }
}

/// An errno as `std::io::Error` shows it ("Connection refused (os error 111)"), without the
/// `String` that allocates: a failed connect is noted and logged on the reactor, which
/// allocates nothing after startup.
struct OsError(i32);

impl fmt::Display for OsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0 as libc::c_char; 128];
        // SAFETY: `buf` is writable for its whole length, which strerror_r is told; on success
        // it holds a NUL-terminated text.
        if unsafe { libc::strerror_r(self.0, buf.as_mut_ptr(), buf.len()) } != 0 {
            return write!(f, "os error {}", self.0);
        }
        // SAFETY: NUL-terminated within `buf` (above).
        let text = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        write!(f, "{} (os error {})", text.to_string_lossy(), self.0)
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(proxy) = self.proxy() {
            write!(f, "via {proxy}: ")?;
        }
        self.detail().fmt(f)
    }
}

impl std::error::Error for TransportError {}

/// What a connection is after the bytes [`Transport::receive`] took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Received {
    /// More may come.
    Open,
    /// The engine closed the connection with TLS close_notify, the TCP connection still open:
    /// nothing more will come, as after a TCP EOF, so it is ended as an EOF is.
    PeerClosed,
}

/// Where a connection's setup is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for the SOCKS5 proxy.
    Tunnel,
    /// TLS handshaking.
    Tls,
    /// HTTP/2 may run.
    Open,
}

impl Stage {
    /// The part of a connection's setup this stage is, for error texts.
    pub fn describe(self) -> &'static str {
        match self {
            Stage::Tunnel => "the SOCKS5 handshake",
            Stage::Tls => "the TLS handshake",
            Stage::Open => "the connection setup",
        }
    }
}

/// The SOCKS5 and TLS layers of one connection.
pub struct Transport {
    socks: Option<(SocketAddr, Socks5)>,
    /// TLS waiting for the tunnel.
    tls_pending: Option<TlsTarget>,
    tls: Option<Box<TlsSession>>,
    /// A previous connection's session whose buffers TLS starts in.
    spare: Option<Box<TlsSession>>,
    /// TLS record bytes reported sent: with the offsets the dispatcher records, whether a
    /// request's last record reached the socket.
    wire_sent: u64,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("stage", &self.stage())
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// The layers for one new TCP connection: through `socks` (the proxy's address and the
    /// handshake asking it for the engine) when given, then TLS to `tls` when given. With no
    /// tunnel the TLS ClientHello is queued at once.
    pub fn new(
        socks: Option<(SocketAddr, Socks5)>,
        tls: Option<&TlsTarget>,
    ) -> Result<Transport, TransportError> {
        Transport::reusing(socks, tls, None)
    }

    /// As [`Transport::new`], starting TLS in `spare`'s buffers (a session the pair's previous
    /// connection used; see [`Transport::into_tls`]) instead of new ones.
    pub fn reusing(
        socks: Option<(SocketAddr, Socks5)>,
        tls: Option<&TlsTarget>,
        spare: Option<Box<TlsSession>>,
    ) -> Result<Transport, TransportError> {
        let mut t = Transport {
            socks,
            tls_pending: tls.cloned(),
            tls: None,
            spare,
            wire_sent: 0,
        };
        if t.socks.is_none() {
            t.start_tls()?;
        }
        Ok(t)
    }

    /// The TLS session's storage, for the pair's next connection.
    pub fn into_tls(self) -> Option<Box<TlsSession>> {
        self.tls.or(self.spare)
    }

    /// The connection ended: its TLS session's storage waits for the next one
    /// ([`Transport::restart`]).
    pub fn retire(&mut self) {
        if let Some(t) = self.tls.take() {
            self.spare = Some(t);
        }
        self.socks = None;
        self.tls_pending = None;
        self.wire_sent = 0;
    }

    /// As [`Transport::new`] for the pair's next connection, in this one's storage (its TLS
    /// session restarts in the previous session's buffers).
    pub fn restart(
        &mut self,
        socks: Option<(SocketAddr, Socks5)>,
        tls: Option<&TlsTarget>,
    ) -> Result<(), TransportError> {
        self.retire();
        self.socks = socks;
        self.tls_pending = tls.cloned();
        if self.socks.is_none() {
            self.start_tls()?;
        }
        Ok(())
    }

    fn start_tls(&mut self) -> Result<(), TransportError> {
        if let Some(target) = self.tls_pending.take() {
            let session = match self.spare.take() {
                Some(mut session) => {
                    session
                        .restart(target.config, &target.sni)
                        .map_err(TransportError::Tls)?;
                    session
                }
                None => Box::new(
                    TlsSession::new(target.config, &target.sni).map_err(TransportError::Tls)?,
                ),
            };
            self.tls = Some(session);
        }
        Ok(())
    }

    pub fn stage(&self) -> Stage {
        if self
            .socks
            .as_ref()
            .is_some_and(|(_, s)| s.phase() != super::socks5::Phase::Done)
        {
            Stage::Tunnel
        } else if self.tls.as_ref().is_some_and(|t| t.is_handshaking()) {
            Stage::Tls
        } else {
            Stage::Open
        }
    }

    /// Whether this connection has asked for the engine's address: it is direct, or its
    /// proxy has been sent the CONNECT. A CONNECT the proxy failed, or never answered, still
    /// had the proxy dial that address.
    pub fn asked_for_engine(&self) -> bool {
        self.socks.as_ref().is_none_or(|(_, s)| {
            matches!(
                s.phase(),
                super::socks5::Phase::Connect | super::socks5::Phase::Done
            )
        })
    }

    /// The tunnel is up and TLS (if any) handshaken: HTTP/2 may start.
    pub fn is_open(&self) -> bool {
        self.stage() == Stage::Open
    }

    /// Application bytes go through TLS (rather than straight to the socket once open).
    pub fn encrypts(&self) -> bool {
        self.tls.is_some()
    }

    /// The TLS session, once started (handshake details for logs and tests).
    pub fn tls(&self) -> Option<&TlsSession> {
        self.tls.as_deref()
    }

    /// Bytes from the socket. Application plaintext (TLS decrypted, or the bytes after the
    /// tunnel when there is no TLS) is handed to `app`, in order, only once the transport is
    /// open; then whether the engine closed the connection (close_notify, after the plaintext
    /// before it). An error is final for this connection.
    pub fn receive(
        &mut self,
        input: &[u8],
        app: &mut dyn FnMut(&[u8]),
    ) -> Result<Received, TransportError> {
        let mut rest = input;
        if let Some((proxy, s)) = self.socks.as_mut()
            && s.phase() != super::socks5::Phase::Done
        {
            match s.handle_bytes(rest) {
                Ok(Progress::NeedMore) => return Ok(Received::Open),
                Ok(Progress::Done { leftover }) => {
                    rest = &rest[rest.len() - leftover..];
                    self.start_tls()?;
                }
                Err(error) => {
                    return Err(TransportError::Socks5 {
                        proxy: *proxy,
                        error,
                    });
                }
            }
        }
        let Some(tls) = self.tls.as_deref_mut() else {
            if !rest.is_empty() {
                app(rest);
            }
            return Ok(Received::Open);
        };
        loop {
            let fed = tls.feed_ciphertext(rest);
            let mut drained = false;
            // What records before a failing one held goes up first: an answer the engine
            // sent just before the failure still counts.
            tls.drain_plaintext(|p| {
                drained = true;
                app(p);
            });
            let taken = fed.map_err(TransportError::Tls)?;
            rest = &rest[taken..];
            if let Some(e) = tls.error() {
                return Err(TransportError::Tls(e.clone()));
            }
            if rest.is_empty() || (taken == 0 && !drained) {
                // The incoming buffer holds a whole largest record, so no progress with input
                // left is, during the handshake, a handshake message (rustls keeps its records
                // until the whole message is in) larger than the buffer: in practice a
                // certificate chain of tens of KiB; after it, records larger than TLS allows.
                if !rest.is_empty() {
                    return Err(TransportError::Tls(if tls.is_handshaking() {
                        TlsError::HandshakeTooLarge {
                            buffered: crate::tls::INCOMING_BYTES,
                        }
                    } else {
                        TlsError::Protocol(rustls::Error::General(
                            "record larger than TLS allows".into(),
                        ))
                    }));
                }
                // Said only after the plaintext before the close_notify went up: an answer the
                // engine sent just before closing still counts.
                return Ok(if tls.is_peer_closed() {
                    Received::PeerClosed
                } else {
                    Received::Open
                });
            }
        }
    }

    /// Encrypts application bytes (TLS only, once open); returns how many were taken. Zero
    /// when the transmit buffer is full: send what is there first.
    pub fn write_app(&mut self, data: &[u8]) -> Result<usize, TransportError> {
        match self.tls.as_deref_mut() {
            Some(tls) => tls.write_plaintext(data).map_err(TransportError::Tls),
            None => Ok(0),
        }
    }

    /// Bytes for the socket: the proxy's next request, or TLS records. They stay in place until
    /// [`Transport::advance_transmit`].
    ///
    /// A SOCKS5 request not yet reported sent comes first even once the tunnel is up: the
    /// proxy's reply can arrive before the send of the CONNECT completes, and that send still
    /// points at the request.
    pub fn poll_transmit(&self) -> &[u8] {
        if let Some((_, s)) = &self.socks {
            if !s.poll_transmit().is_empty() || s.phase() != super::socks5::Phase::Done {
                return s.poll_transmit();
            }
        }
        match &self.tls {
            Some(t) => t.poll_transmit(),
            None => &[],
        }
    }

    pub fn advance_transmit(&mut self, n: usize) {
        if let Some((_, s)) = self.socks.as_mut()
            && !s.poll_transmit().is_empty()
        {
            s.advance_transmit(n);
            return;
        }
        if let Some(t) = self.tls.as_deref_mut() {
            t.advance_transmit(n);
            self.wire_sent += n as u64;
        }
    }

    /// TLS record bytes reported sent since the connection began.
    pub fn wire_sent(&self) -> u64 {
        self.wire_sent
    }

    /// TLS record bytes produced so far (sent, or waiting in the transmit buffer).
    pub fn wire_produced(&self) -> u64 {
        self.wire_sent
            + self
                .tls
                .as_ref()
                .map_or(0, |t| t.poll_transmit().len() as u64)
    }

    /// The socket ended: what that meant during setup (`None` once open).
    pub fn handle_transport_closed(&mut self) -> Option<TransportError> {
        if let Some((proxy, s)) = self.socks.as_mut()
            && let Some(error) = s.handle_transport_closed()
        {
            return Some(TransportError::Socks5 {
                proxy: *proxy,
                error,
            });
        }
        self.tls
            .as_deref_mut()
            .and_then(|t| t.handle_transport_closed())
            .map(TransportError::Tls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::socks5::Socks5;

    fn target() -> SocketAddr {
        "127.0.0.11:443".parse().unwrap()
    }

    #[test]
    fn a_tunnel_without_tls_hands_bytes_after_the_connect_reply_to_the_application() {
        let proxy: SocketAddr = "127.0.0.1:1080".parse().unwrap();
        let mut t = Transport::new(Some((proxy, Socks5::new(target(), None).unwrap())), None)
            .expect("transport");
        assert_eq!(t.stage(), Stage::Tunnel);
        assert_eq!(t.poll_transmit(), &[5, 1, 0], "greeting offers no-auth");
        t.advance_transmit(3);
        let mut got = Vec::new();
        let received = t.receive(&[5, 0], &mut |b| got.extend_from_slice(b));
        assert_eq!(received, Ok(Received::Open));
        assert_eq!(t.stage(), Stage::Tunnel);
        let connect = t.poll_transmit().to_vec();
        assert_eq!(&connect[..4], &[5, 1, 0, 1], "CONNECT to an IPv4 target");
        t.advance_transmit(connect.len());
        let mut reply = vec![5, 0, 0, 1, 127, 0, 0, 1, 0x04, 0x38];
        reply.extend_from_slice(b"PRI * HTTP/2.0");
        let received = t.receive(&reply, &mut |b| got.extend_from_slice(b));
        assert_eq!(received, Ok(Received::Open));
        assert!(t.is_open());
        assert!(!t.encrypts());
        assert_eq!(got, b"PRI * HTTP/2.0", "leftover goes up, nothing else");
    }

    #[test]
    fn a_connect_reply_that_beats_its_send_completion_still_reports_the_request_first() {
        let proxy: SocketAddr = "127.0.0.1:1080".parse().unwrap();
        let config = crate::tls::client_config(None).expect("webpki roots");
        let tls = TlsTarget {
            config,
            sni: "ny.mainnet.block-engine.jito.wtf".into(),
        };
        let mut t = Transport::new(
            Some((proxy, Socks5::new(target(), None).unwrap())),
            Some(&tls),
        )
        .unwrap();
        t.advance_transmit(3);
        assert_eq!(t.receive(&[5, 0], &mut |_| {}), Ok(Received::Open));
        let connect_len = t.poll_transmit().len();
        // The CONNECT is in flight; the reply arrives before its send completes.
        let received = t.receive(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 80], &mut |_| {});
        assert_eq!(received, Ok(Received::Open));
        assert_eq!(t.stage(), Stage::Tls);
        assert_eq!(t.poll_transmit().len(), connect_len, "still the CONNECT");
        t.advance_transmit(connect_len);
        assert_eq!(t.poll_transmit()[0], 22, "then the ClientHello");
    }

    #[test]
    fn a_proxy_that_refuses_names_itself_and_the_reply() {
        let proxy: SocketAddr = "127.0.0.1:1080".parse().unwrap();
        let mut t =
            Transport::new(Some((proxy, Socks5::new(target(), None).unwrap())), None).unwrap();
        t.advance_transmit(3);
        assert_eq!(t.receive(&[5, 0], &mut |_| {}), Ok(Received::Open));
        let n = t.poll_transmit().len();
        t.advance_transmit(n);
        let e = t
            .receive(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0], &mut |_| {})
            .expect_err("refused");
        let text = e.to_string();
        assert!(text.contains("127.0.0.1:1080"), "{text}");
        assert!(text.contains("refused"), "{text}");
    }

    #[test]
    fn a_proxy_closing_mid_handshake_is_a_tunnel_error_and_after_open_is_none() {
        let proxy: SocketAddr = "127.0.0.1:1080".parse().unwrap();
        let mut t =
            Transport::new(Some((proxy, Socks5::new(target(), None).unwrap())), None).unwrap();
        let e = t.handle_transport_closed().expect("closed during greeting");
        assert!(matches!(e, TransportError::Socks5 { .. }), "{e:?}");
    }

    #[test]
    fn tls_without_a_tunnel_queues_the_client_hello_at_once() {
        let config = crate::tls::client_config(None).expect("webpki roots");
        let t = Transport::new(
            None,
            Some(&TlsTarget {
                config,
                sni: "ny.mainnet.block-engine.jito.wtf".into(),
            }),
        )
        .unwrap();
        assert_eq!(t.stage(), Stage::Tls);
        let hello = t.poll_transmit();
        assert_eq!(hello[0], 22, "a handshake record");
        assert!(t.encrypts());
    }

    #[test]
    fn a_closed_tls_handshake_says_so() {
        let config = crate::tls::client_config(None).expect("webpki roots");
        let mut t = Transport::new(
            None,
            Some(&TlsTarget {
                config,
                sni: "ny.mainnet.block-engine.jito.wtf".into(),
            }),
        )
        .unwrap();
        let e = t.handle_transport_closed().expect("closed during TLS");
        assert_eq!(e, TransportError::Tls(TlsError::PeerClosedDuringHandshake));
    }
}
