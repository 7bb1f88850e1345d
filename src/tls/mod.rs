//! TLS client sessions to the block engines, sans-IO: ciphertext and plaintext in and out of
//! fixed buffers, no sockets, no runtime. The reactor moves bytes between the socket, a
//! [`TlsSession`] and the HTTP/2 [`crate::h2::conn::Connection`].
//!
//! Built on rustls' unbuffered API (`UnbufferedClientConnection`): records are encrypted
//! straight into the session's transmit buffer and handshake state never queues unbounded
//! output. Jito's engines require TLS with ALPN `h2` and the region's host name as SNI; a
//! session that negotiates anything but `h2` fails with [`TlsError::NoAlpnH2`].
//!
//! The relay drives it through [`crate::egress::transport::Transport`] (SOCKS5 tunnel, then
//! TLS, then HTTP/2), which follows these steps:
//!
//! 1. [`TlsSession::new`] queues the ClientHello; send [`TlsSession::poll_transmit`] and report
//!    it with [`TlsSession::advance_transmit`]. Those bytes stay in place until then, whatever
//!    else is called (new records are appended after them), so an in-flight send may point at
//!    them; keep one send per session in flight.
//! 2. Give every received byte to [`TlsSession::feed_ciphertext`]; it takes what fits and says
//!    how many. Then drain [`TlsSession::read_plaintext`] until it returns 0 (into the h2
//!    connection) and feed the rest.
//! 3. Once [`TlsSession::is_handshaking`] is false, pass h2's transmit bytes to
//!    [`TlsSession::write_plaintext`], which encrypts as much as fits.
//! 4. A socket EOF goes to [`TlsSession::handle_transport_closed`], which names what it meant.
//!    A close_notify from the engine is [`TlsSession::is_peer_closed`]: the connection is over
//!    as after an EOF, and the transport reports it so (the socket itself may stay open).
//!    The handshake deadline is the dispatcher's: `[egress] connect_timeout_ms` covers the
//!    connect, the SOCKS5 tunnel and the TLS handshake together.
//!
//! Allocation (measured by `tests/alloc/tls_session.rs` with the counting allocator): after the
//! handshake each 2 KiB frame costs one heap allocation to encrypt (ring's sealing buffer) and
//! one to decrypt (rustls 0.23 hands each received record over as an owned chunk); nothing
//! here adds to that. The buffered API does the same two (read from rustls' source, not
//! measured) and also queues output in its own growable buffers, hence the unbuffered one.
//!
//! Cost per 2 KiB frame after the handshake (`cargo bench --workspace --profile dev --bench tls`,
//! dependencies at opt-level 2, TLS 1.3 AES-256-GCM via ring, a contended 2-core host):
//! encrypting in the session 1.45 µs; encrypt here + decrypt in a rustls server 3.1 µs; encrypt
//! in the server + decrypt here 2.7 µs; the plaintext path's two copies 0.12 µs.
//! End to end, `bench-demo --tls-cost` measures the whole steady-state TLS cost per delivered
//! bundle (encrypt, decrypt, the extra copies) against plaintext HTTP/2 in the same run.
//! Kernel TLS offload is not used: with one ~2 KiB record per bundle the user-space seal is
//! about 1.5 µs of that, so the kernel could save at most that much per bundle, at the price of
//! a second record layer to keep in step with rustls (key updates, alerts).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::{Resumption, UnbufferedClientConnection};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use rustls::{AlertDescription, CertificateError, ClientConfig, HandshakeKind, RootCertStore};

/// The one application protocol Jito's gRPC endpoints speak.
pub const ALPN_H2: &[u8] = b"h2";

/// Server names whose resumption tickets the config remembers. One region config dials one
/// host name, so a few slots suffice; rustls keeps up to 8 TLS 1.3 tickets per name.
pub const RESUMPTION_SERVER_NAMES_MAX: usize = 16;

/// The largest TLS record on the wire: 5-byte header, 16 KiB plaintext, and TLS 1.2's
/// allowed 2 KiB of expansion (RFC 5246 section 6.2.3).
pub const RECORD_BYTES_MAX: usize = 5 + 16_384 + 2_048;

/// Received ciphertext: one whole largest record must fit, since rustls decrypts a record only
/// once all of it is here, plus room for the next read.
pub const INCOMING_BYTES: usize = RECORD_BYTES_MAX + 4_096;

/// Decrypted bytes waiting for [`TlsSession::read_plaintext`]: at least one record's plaintext.
pub const PLAINTEXT_BYTES: usize = 16_384 + 4_096;

/// Ciphertext waiting for the socket: a few SendBundle frames per send.
pub const TRANSMIT_BYTES: usize = 32 * 1024;

/// A session's three fixed buffers together (the budget counts them per TLS pair).
pub const SESSION_BUFFER_BYTES: usize = INCOMING_BYTES + PLAINTEXT_BYTES + TRANSMIT_BYTES;

/// Transmit space kept free of application data, so handshake, KeyUpdate and close_notify
/// records always fit (a client's are well under 1 KiB).
pub const TRANSMIT_RESERVE_BYTES: usize = 2_048;

/// Per-record cost of encryption: header (5) + content type (1) + AEAD tag (16), with margin
/// for TLS 1.2's explicit nonce (8).
const RECORD_OVERHEAD_BYTES: usize = 64;
const FRAGMENT_BYTES: usize = 16_384;

/// Why a TLS session (or its configuration) failed.
#[derive(Debug, Clone, PartialEq)]
pub enum TlsError {
    /// The CA file could not be read.
    CaFileUnreadable { path: String, why: String },
    /// The CA file holds no PEM certificate, or one that is not a valid trust anchor.
    CaFileInvalid { path: String, why: String },
    /// The SNI is neither a DNS name nor an IP address.
    InvalidServerName { name: String },
    /// The engine's certificate chain does not lead to a trusted CA.
    UnknownIssuer,
    /// The engine's certificate is valid but not for the name we dialled.
    NameMismatch {
        expected: String,
        presented: Vec<String>,
    },
    /// Some other certificate fault (expired, revoked, bad signature, ...).
    BadCertificate(CertificateError),
    /// The engine did not agree to HTTP/2 (no ALPN, or another protocol).
    NoAlpnH2 { negotiated: Option<Vec<u8>> },
    /// The transport ended (EOF or close_notify) before the handshake finished.
    PeerClosedDuringHandshake,
    /// The reactor's handshake deadline passed.
    HandshakeTimeout { after_ms: u64 },
    /// The engine sent a fatal alert.
    AlertReceived(AlertDescription),
    /// Any other protocol failure, as rustls reports it.
    Protocol(rustls::Error),
    /// A handshake record did not fit the transmit buffer (a sizing bug, not a peer fault).
    TransmitOverflow { required: usize },
    /// The engine's handshake message (its certificate chain) does not fit the `buffered`
    /// bytes a session receives into: rustls needs a handshake message whole, and a buffer
    /// for the largest it allows (64 KiB) in each of thousands of sessions costs more than
    /// chains of a few KiB, as CAs issue them, need.
    HandshakeTooLarge { buffered: usize },
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::CaFileUnreadable { path, why } => {
                write!(f, "TLS CA file {path} cannot be read: {why}")
            }
            TlsError::CaFileInvalid { path, why } => {
                write!(f, "TLS CA file {path} is not usable: {why}")
            }
            TlsError::InvalidServerName { name } => {
                write!(
                    f,
                    "TLS server name {name:?} is neither a DNS name nor an IP"
                )
            }
            TlsError::UnknownIssuer => write!(
                f,
                "bad certificate: unknown issuer (the chain does not lead to a trusted CA)"
            ),
            TlsError::NameMismatch {
                expected,
                presented,
            } => write!(
                f,
                "bad certificate: name mismatch (dialled {expected}, certificate is for {})",
                if presented.is_empty() {
                    "other names".to_string()
                } else {
                    presented.join(", ")
                }
            ),
            TlsError::BadCertificate(e) => write!(f, "bad certificate: {e}"),
            TlsError::NoAlpnH2 { negotiated: None } => {
                write!(f, "engine negotiated no ALPN protocol; h2 is required")
            }
            TlsError::NoAlpnH2 {
                negotiated: Some(p),
            } => write!(
                f,
                "engine negotiated ALPN {:?}; h2 is required",
                String::from_utf8_lossy(p)
            ),
            TlsError::PeerClosedDuringHandshake => {
                write!(f, "engine closed the connection during the TLS handshake")
            }
            TlsError::HandshakeTimeout { after_ms } => {
                write!(f, "TLS handshake did not finish within {after_ms} ms")
            }
            TlsError::AlertReceived(a) => write!(f, "engine sent TLS alert {a:?}"),
            TlsError::Protocol(e) => write!(f, "TLS protocol error: {e}"),
            TlsError::TransmitOverflow { required } => write!(
                f,
                "TLS record of {required} bytes does not fit the transmit buffer"
            ),
            TlsError::HandshakeTooLarge { buffered } => write!(
                f,
                "the engine's handshake (its certificate chain) is larger than the {buffered} \
                 bytes a TLS session buffers"
            ),
        }
    }
}

impl std::error::Error for TlsError {}

impl TlsError {
    fn from_rustls(e: rustls::Error, sni: &str) -> TlsError {
        use rustls::Error as E;
        match e {
            E::InvalidCertificate(CertificateError::UnknownIssuer) => TlsError::UnknownIssuer,
            E::InvalidCertificate(CertificateError::NotValidForName) => TlsError::NameMismatch {
                expected: sni.to_string(),
                presented: Vec::new(),
            },
            E::InvalidCertificate(CertificateError::NotValidForNameContext {
                presented, ..
            }) => TlsError::NameMismatch {
                expected: sni.to_string(),
                presented,
            },
            E::InvalidCertificate(c) => TlsError::BadCertificate(c),
            E::NoApplicationProtocol
            | E::AlertReceived(AlertDescription::NoApplicationProtocol) => {
                TlsError::NoAlpnH2 { negotiated: None }
            }
            E::AlertReceived(a) => TlsError::AlertReceived(a),
            other => TlsError::Protocol(other),
        }
    }
}

/// A client config with the bundled webpki root set (no system files needed), or only the CAs
/// in `ca_file` (PEM) when given. Build once per region at startup and share it: it holds the
/// resumption store.
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, TlsError> {
    let roots = match ca_file {
        None => {
            let mut roots = RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            roots
        }
        Some(path) => {
            let shown = path.display().to_string();
            let pem = std::fs::read(path).map_err(|e| TlsError::CaFileUnreadable {
                path: shown.clone(),
                why: e.to_string(),
            })?;
            roots_from_pem(&pem).map_err(|why| TlsError::CaFileInvalid { path: shown, why })?
        }
    };
    Ok(config_with_roots(roots))
}

/// As [`client_config`] with the trusted CAs given as PEM text (tests, embedded configs).
pub fn client_config_from_pem(ca_pem: &[u8]) -> Result<Arc<ClientConfig>, TlsError> {
    let roots = roots_from_pem(ca_pem).map_err(|why| TlsError::CaFileInvalid {
        path: "(inline PEM)".to_string(),
        why,
    })?;
    Ok(config_with_roots(roots))
}

/// Whether `pem` holds CAs a region can trust (what [`client_config`] will find there), so a
/// config naming it is refused when read rather than when the relay starts.
pub fn check_ca_pem(pem: &[u8]) -> Result<(), String> {
    roots_from_pem(pem).map(|_| ())
}

fn roots_from_pem(pem: &[u8]) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for (i, cert) in CertificateDer::pem_slice_iter(pem).enumerate() {
        let cert = cert.map_err(|e| format!("certificate {i}: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("certificate {i} is not a valid trust anchor: {e}"))?;
    }
    if roots.is_empty() {
        return Err("no PEM CERTIFICATE block found".to_string());
    }
    Ok(roots)
}

fn config_with_roots(roots: RootCertStore) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![ALPN_H2.to_vec()];
    cfg.resumption = Resumption::in_memory_sessions(RESUMPTION_SERVER_NAMES_MAX);
    Arc::new(cfg)
}

/// One TLS client connection's state and its three fixed buffers
/// (`INCOMING_BYTES + PLAINTEXT_BYTES + TRANSMIT_BYTES`, 75,781 bytes).
pub struct TlsSession {
    conn: UnbufferedClientConnection,
    sni: Box<str>,
    incoming: Box<[u8]>,
    incoming_len: usize,
    plaintext: Box<[u8]>,
    plaintext_start: usize,
    plaintext_end: usize,
    transmit: Box<[u8]>,
    transmit_start: usize,
    transmit_end: usize,
    handshake_done: bool,
    peer_closed: bool,
    /// Complete records wait for plaintext room.
    paused_for_plaintext: bool,
    failed: Option<TlsError>,
}

impl fmt::Debug for TlsSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSession")
            .field("sni", &self.sni)
            .field("handshaking", &!self.handshake_done)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl TlsSession {
    /// Starts a handshake to `sni` (a DNS name, or an IP literal checked against the
    /// certificate's IP names); the ClientHello is ready in [`TlsSession::poll_transmit`].
    pub fn new(cfg: Arc<ClientConfig>, sni: &str) -> Result<TlsSession, TlsError> {
        let name =
            ServerName::try_from(sni.to_string()).map_err(|_| TlsError::InvalidServerName {
                name: sni.to_string(),
            })?;
        let conn = UnbufferedClientConnection::new(cfg, name)
            .map_err(|e| TlsError::from_rustls(e, sni))?;
        let mut s = TlsSession {
            conn,
            sni: sni.into(),
            incoming: vec![0; INCOMING_BYTES].into_boxed_slice(),
            incoming_len: 0,
            plaintext: vec![0; PLAINTEXT_BYTES].into_boxed_slice(),
            plaintext_start: 0,
            plaintext_end: 0,
            transmit: vec![0; TRANSMIT_BYTES].into_boxed_slice(),
            transmit_start: 0,
            transmit_end: 0,
            handshake_done: false,
            peer_closed: false,
            paused_for_plaintext: false,
            failed: None,
        };
        s.pump()?;
        Ok(s)
    }

    /// Starts a new session (as [`TlsSession::new`]) in this one's buffers: a pair that
    /// reconnects allocates only what rustls does for its handshake.
    pub fn restart(&mut self, cfg: Arc<ClientConfig>, sni: &str) -> Result<(), TlsError> {
        let name =
            ServerName::try_from(sni.to_string()).map_err(|_| TlsError::InvalidServerName {
                name: sni.to_string(),
            })?;
        self.conn = UnbufferedClientConnection::new(cfg, name)
            .map_err(|e| TlsError::from_rustls(e, sni))?;
        if &*self.sni != sni {
            self.sni = sni.into();
        }
        self.incoming_len = 0;
        self.plaintext_start = 0;
        self.plaintext_end = 0;
        self.transmit_start = 0;
        self.transmit_end = 0;
        self.handshake_done = false;
        self.peer_closed = false;
        self.paused_for_plaintext = false;
        self.failed = None;
        self.pump()
    }

    /// Takes received ciphertext, as much as the incoming buffer holds, and decrypts what is
    /// complete. Returns the bytes taken; give the rest again after draining
    /// [`TlsSession::read_plaintext`]. An error is final for this session.
    pub fn feed_ciphertext(&mut self, input: &[u8]) -> Result<usize, TlsError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let n = input.len().min(self.incoming.len() - self.incoming_len);
        self.incoming[self.incoming_len..self.incoming_len + n].copy_from_slice(&input[..n]);
        self.incoming_len += n;
        self.pump()?;
        Ok(n)
    }

    /// Copies decrypted bytes into `out`; returns how many. When decryption had paused for
    /// room, it resumes here, so reading until 0 drains every complete record taken so far
    /// (a failure found then is kept for [`TlsSession::error`] and the next call that returns
    /// a `Result`).
    pub fn read_plaintext(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.plaintext_end - self.plaintext_start);
        out[..n].copy_from_slice(&self.plaintext[self.plaintext_start..self.plaintext_start + n]);
        self.plaintext_start += n;
        if self.plaintext_start == self.plaintext_end {
            self.plaintext_start = 0;
            self.plaintext_end = 0;
        }
        if self.paused_for_plaintext && self.failed.is_none() {
            let _ = self.pump();
        }
        n
    }

    /// Hands every decrypted byte to `f`, in order and in place (no copy out), resuming
    /// decryption that paused for room, until nothing complete is left. `f` must take all of
    /// each slice it is given. A failure found meanwhile is kept for [`TlsSession::error`].
    pub fn drain_plaintext(&mut self, mut f: impl FnMut(&[u8])) {
        loop {
            if self.plaintext_start == self.plaintext_end {
                if !self.paused_for_plaintext || self.failed.is_some() {
                    return;
                }
                let _ = self.pump();
                if self.plaintext_start == self.plaintext_end {
                    return;
                }
            }
            f(&self.plaintext[self.plaintext_start..self.plaintext_end]);
            self.plaintext_start = 0;
            self.plaintext_end = 0;
        }
    }

    /// Decrypted bytes waiting in [`TlsSession::read_plaintext`].
    pub fn plaintext_len(&self) -> usize {
        self.plaintext_end - self.plaintext_start
    }

    /// Encrypts as much of `input` as the transmit buffer takes; returns the bytes accepted
    /// (0 while handshaking, after a failure, or when the buffer is full: send first).
    pub fn write_plaintext(&mut self, input: &[u8]) -> Result<usize, TlsError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if !self.handshake_done || input.is_empty() {
            return Ok(0);
        }
        let free = (self.transmit.len() - self.transmit_end).saturating_sub(TRANSMIT_RESERVE_BYTES);
        let n = input.len().min(plaintext_fitting(free));
        if n == 0 {
            return Ok(0);
        }
        for _ in 0..2 {
            match self.try_encrypt(&input[..n]) {
                Ok(Encrypted::Wrote(w)) => {
                    self.transmit_end += w;
                    return Ok(n);
                }
                // Decrypted records wait for plaintext room: the caller drains, then writes.
                Ok(Encrypted::ReadFirst) => return Ok(0),
                // Handshake-layer output (a KeyUpdate, say) goes out first.
                Ok(Encrypted::PumpFirst) => self.pump()?,
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(0)
    }

    fn try_encrypt(&mut self, input: &[u8]) -> Result<Encrypted, TlsError> {
        let Self {
            conn,
            transmit,
            transmit_end,
            sni,
            ..
        } = self;
        // An empty record slice: writing must not consume received records.
        let UnbufferedStatus { state, .. } = conn.process_tls_records(&mut []);
        let result = match state {
            Ok(ConnectionState::WriteTraffic(mut w)) => {
                w.encrypt(input, &mut transmit[*transmit_end..])
            }
            Ok(ConnectionState::ReadTraffic(_)) => return Ok(Encrypted::ReadFirst),
            Ok(_) => return Ok(Encrypted::PumpFirst),
            Err(e) => return Err(TlsError::from_rustls(e, sni)),
        };
        match result {
            Ok(w) => Ok(Encrypted::Wrote(w)),
            Err(EncryptError::InsufficientSize(s)) => Err(TlsError::TransmitOverflow {
                required: s.required_size,
            }),
            Err(e) => Err(TlsError::Protocol(rustls::Error::General(e.to_string()))),
        }
    }

    /// Ciphertext to send, in order. It stays at this address until reported by
    /// [`TlsSession::advance_transmit`].
    pub fn poll_transmit(&self) -> &[u8] {
        &self.transmit[self.transmit_start..self.transmit_end]
    }

    /// Reports `n` bytes of [`TlsSession::poll_transmit`] as sent. The only call that moves
    /// unsent bytes (after a partial send, to the front): the send that used them has ended.
    pub fn advance_transmit(&mut self, n: usize) {
        debug_assert!(n <= self.transmit_end - self.transmit_start);
        self.transmit_start = (self.transmit_start + n).min(self.transmit_end);
        if self.transmit_start == self.transmit_end {
            self.transmit_start = 0;
            self.transmit_end = 0;
        } else {
            self.transmit
                .copy_within(self.transmit_start..self.transmit_end, 0);
            self.transmit_end -= self.transmit_start;
            self.transmit_start = 0;
        }
    }

    /// True until the handshake has completed (and ALPN was checked).
    pub fn is_handshaking(&self) -> bool {
        !self.handshake_done
    }

    /// The engine sent close_notify: no more plaintext will come.
    pub fn is_peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// The error that ended this session, if any.
    pub fn error(&self) -> Option<&TlsError> {
        self.failed.as_ref()
    }

    /// The ALPN protocol agreed (after the handshake: always `h2`, else the session failed).
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// Full or resumed handshake (after it completes).
    pub fn handshake_kind(&self) -> Option<HandshakeKind> {
        self.conn.handshake_kind()
    }

    /// The TLS version negotiated.
    pub fn protocol_version(&self) -> Option<rustls::ProtocolVersion> {
        self.conn.protocol_version()
    }

    /// The SNI this session dials.
    pub fn server_name(&self) -> &str {
        &self.sni
    }

    /// The socket reached EOF (or failed). During the handshake that is
    /// [`TlsError::PeerClosedDuringHandshake`]; afterwards `None` (h2 reports the closed
    /// transport itself).
    pub fn handle_transport_closed(&mut self) -> Option<TlsError> {
        if let Some(e) = &self.failed {
            return Some(e.clone());
        }
        if self.handshake_done {
            return None;
        }
        Some(self.fail(TlsError::PeerClosedDuringHandshake))
    }

    /// Queues close_notify (after the handshake); send [`TlsSession::poll_transmit`] then.
    pub fn close(&mut self) {
        if !self.handshake_done || self.failed.is_some() {
            return;
        }
        let Self {
            conn,
            transmit,
            transmit_end,
            ..
        } = self;
        let UnbufferedStatus { state, .. } = conn.process_tls_records(&mut []);
        if let Ok(ConnectionState::WriteTraffic(mut w)) = state {
            if let Ok(n) = w.queue_close_notify(&mut transmit[*transmit_end..]) {
                *transmit_end += n;
            }
        }
    }

    fn fail(&mut self, e: TlsError) -> TlsError {
        self.failed = Some(e.clone());
        e
    }

    /// Runs rustls until it needs more input or has nothing to do: decrypted records into the
    /// plaintext buffer, handshake records into the transmit buffer.
    fn pump(&mut self) -> Result<(), TlsError> {
        loop {
            if self.plaintext_start > 0 {
                self.plaintext
                    .copy_within(self.plaintext_start..self.plaintext_end, 0);
                self.plaintext_end -= self.plaintext_start;
                self.plaintext_start = 0;
            }
            let Self {
                conn,
                incoming,
                incoming_len,
                plaintext,
                plaintext_end,
                transmit,
                transmit_end,
                peer_closed,
                paused_for_plaintext,
                ..
            } = self;
            *paused_for_plaintext = false;
            let UnbufferedStatus { discard, state } =
                conn.process_tls_records(&mut incoming[..*incoming_len]);
            let mut again = false;
            let outcome: Result<(), TlsError> = match state {
                Err(e) => Err(TlsError::from_rustls(e, &self.sni)),
                Ok(ConnectionState::ReadTraffic(mut r)) => {
                    let mut res = Ok(());
                    while let Some(len) = r.peek_len() {
                        if plaintext.len() - *plaintext_end < len.get() {
                            *paused_for_plaintext = true; // read_plaintext resumes
                            break;
                        }
                        match r.next_record().expect("peeked") {
                            Ok(rec) => {
                                plaintext[*plaintext_end..*plaintext_end + rec.payload.len()]
                                    .copy_from_slice(rec.payload);
                                *plaintext_end += rec.payload.len();
                                again = true;
                            }
                            Err(e) => {
                                res = Err(TlsError::from_rustls(e, &self.sni));
                                break;
                            }
                        }
                    }
                    res
                }
                Ok(ConnectionState::EncodeTlsData(mut enc)) => {
                    match enc.encode(&mut transmit[*transmit_end..]) {
                        Ok(n) => {
                            *transmit_end += n;
                            again = true;
                            Ok(())
                        }
                        Err(EncodeError::InsufficientSize(s)) => Err(TlsError::TransmitOverflow {
                            required: s.required_size,
                        }),
                        Err(e) => Err(TlsError::Protocol(rustls::Error::General(e.to_string()))),
                    }
                }
                Ok(ConnectionState::TransmitTlsData(t)) => {
                    // The records are queued in order in `transmit`; the reactor sends them.
                    t.done();
                    again = true;
                    Ok(())
                }
                Ok(ConnectionState::PeerClosed) => {
                    *peer_closed = true;
                    again = true;
                    Ok(())
                }
                Ok(_) => Ok(()),
            };
            if discard > 0 {
                incoming.copy_within(discard..*incoming_len, 0);
                *incoming_len -= discard;
            }
            outcome.map_err(|e| self.fail(e))?;
            if !self.handshake_done && !self.conn.is_handshaking() {
                self.handshake_done = true;
                if self.conn.alpn_protocol() != Some(ALPN_H2) {
                    let negotiated = self.conn.alpn_protocol().map(<[u8]>::to_vec);
                    return Err(self.fail(TlsError::NoAlpnH2 { negotiated }));
                }
            }
            if self.peer_closed && !self.handshake_done {
                return Err(self.fail(TlsError::PeerClosedDuringHandshake));
            }
            if !again {
                return Ok(());
            }
        }
    }
}

enum Encrypted {
    Wrote(usize),
    ReadFirst,
    PumpFirst,
}

/// The most plaintext whose records fit in `free` bytes of ciphertext.
fn plaintext_fitting(free: usize) -> usize {
    let records = free.div_ceil(FRAGMENT_BYTES + RECORD_OVERHEAD_BYTES).max(1);
    free.saturating_sub(records * RECORD_OVERHEAD_BYTES)
}
