//! One pair's byte stack: the SOCKS5 tunnel and TLS (when the pair has them) under its HTTP/2
//! connection. Bytes from the socket go up through it into HTTP/2; HTTP/2's bytes come down
//! through it to the socket. Sans-IO, like the layers it stacks: the dispatcher feeds it what
//! the reactor received and takes from it what the reactor should send.
//!
//! It is NOT the connection's life (connecting, rotation, back-off: the dispatcher's) and
//! NOT the calls on it (`grpc`). It owns the storage of both layers for the pair's whole life:
//! a reconnect starts the next connection in the previous one's HTTP/2, TLS and transport
//! buffers, so only rustls allocates anything (inside a handshake).
//!
//! "Fully sent" is exact here: HTTP/2 records where each request's last byte sits in its
//! transmit stream; through TLS the stack records where the record carrying it ends in the
//! ciphertext, so the dispatcher can tell a request that never reached the socket whole (safe
//! to send again) from one that may have been processed.

use std::net::SocketAddr;

use super::socks5::Socks5;
use super::transport::{Received, Stage, TlsTarget, Transport, TransportError};
use crate::h2::conn::{Config, Connection, StreamId};
use crate::tls::TlsSession;

/// A request whose end the stack watches for.
#[derive(Clone, Copy, Debug)]
struct Tracked {
    stream: StreamId,
    /// Through TLS: the ciphertext offset just past the record carrying the request's last
    /// byte, once it was encrypted.
    wire_end: Option<u64>,
}

/// See the module docs.
#[derive(Default)]
pub struct PairStack {
    /// The current connection's HTTP/2, once started.
    conn: Option<Box<Connection>>,
    /// The previous connection's HTTP/2 storage, for the next one.
    spare_conn: Option<Box<Connection>>,
    /// The tunnel and TLS layers' storage, created on the first connection that needs them.
    transport: Option<Box<Transport>>,
    /// The current connection goes through `transport` (plaintext pairs never do).
    layered: bool,
    tracked: Option<Tracked>,
}

impl PairStack {
    pub fn new() -> PairStack {
        PairStack::default()
    }

    /// A new TCP connection is up. Through `socks` (the proxy and the CONNECT it asks for)
    /// and/or TLS to `tls` when given, their first bytes queued; with neither, HTTP/2 may start
    /// at once and this returns false.
    pub fn connected(
        &mut self,
        socks: Option<(SocketAddr, Socks5)>,
        tls: Option<&TlsTarget>,
    ) -> Result<bool, TransportError> {
        self.tracked = None;
        self.layered = socks.is_some() || tls.is_some();
        if !self.layered {
            return Ok(false);
        }
        match self.transport.as_deref_mut() {
            Some(t) => t.restart(socks, tls)?,
            None => self.transport = Some(Box::new(Transport::new(socks, tls)?)),
        }
        Ok(true)
    }

    /// The layers of the current connection, if it has any.
    pub fn transport(&self) -> Option<&Transport> {
        self.transport.as_deref().filter(|_| self.layered)
    }

    /// The tunnel and TLS (if any) are done: HTTP/2 may run.
    pub fn is_open(&self) -> bool {
        self.transport().is_none_or(Transport::is_open)
    }

    /// Where the current connection's setup is.
    pub fn stage(&self) -> Stage {
        self.transport().map_or(Stage::Open, Transport::stage)
    }

    /// Whether the current connection asked for the engine's address
    /// ([`Transport::asked_for_engine`]); a connection with no transport layer is direct.
    pub fn asked_for_engine(&self) -> bool {
        self.transport().is_none_or(Transport::asked_for_engine)
    }

    /// Starts HTTP/2 on the current connection (in the previous one's storage when there is
    /// one); a no-op when it runs already.
    pub fn open_h2(&mut self, cfg: &Config, now_ns: u64) -> &mut Connection {
        let spare = &mut self.spare_conn;
        self.conn
            .get_or_insert_with(|| fresh_connection(spare, cfg, now_ns))
    }

    pub fn conn(&self) -> Option<&Connection> {
        self.conn.as_deref()
    }

    pub fn conn_mut(&mut self) -> Option<&mut Connection> {
        self.conn.as_deref_mut()
    }

    /// Watch where `stream`'s request ends on the wire (see [`PairStack::left_whole`]).
    pub fn track(&mut self, stream: StreamId) {
        self.tracked = Some(Tracked {
            stream,
            wire_end: None,
        });
    }

    /// Moves HTTP/2's pending bytes into TLS records, as many as the TLS buffer takes. An
    /// error ends the connection.
    pub fn encrypt_pending(&mut self) -> Result<(), TransportError> {
        let (Some(t), Some(c)) = (self.transport.as_deref_mut(), self.conn.as_deref_mut()) else {
            return Ok(());
        };
        if !self.layered || !t.encrypts() || !t.is_open() {
            return Ok(());
        }
        loop {
            let data = c.poll_transmit();
            if data.is_empty() {
                return Ok(());
            }
            let before = c.transmitted_total();
            let n = t.write_app(data)?;
            if n == 0 {
                return Ok(());
            }
            c.advance_transmit(n);
            // Where the tracked request's last byte lands in the ciphertext.
            if let Some(tr) = self.tracked.as_mut()
                && tr.wire_end.is_none()
                && c.request_end(tr.stream)
                    .is_some_and(|end| end > before && end <= before + n as u64)
            {
                tr.wire_end = Some(t.wire_produced());
            }
        }
    }

    /// The bytes to send now, pinned until [`PairStack::transmitted`]: HTTP/2's own buffer on a
    /// plaintext connection (no copy), else the tunnel's request or TLS records (call
    /// [`PairStack::encrypt_pending`] first).
    pub fn transmit(&mut self) -> &[u8] {
        match self.transport.as_deref().filter(|_| self.layered) {
            Some(t) if !t.poll_transmit().is_empty() || t.encrypts() || !t.is_open() => {
                t.poll_transmit()
            }
            _ => match self.conn.as_deref_mut() {
                Some(c) => c.pin_transmit(),
                None => &[],
            },
        }
    }

    /// Whether the bytes [`PairStack::transmit`] gives are all the connection has to send
    /// until something arrives: not when HTTP/2 holds bytes the TLS buffer had no room for
    /// yet (they go once this transmit has).
    pub fn transmit_is_whole(&self) -> bool {
        match self.transport() {
            Some(t) if t.encrypts() && t.is_open() => self
                .conn
                .as_deref()
                .is_none_or(|c| c.poll_transmit().is_empty()),
            _ => true,
        }
    }

    /// `n` bytes of the pinned transmit went out; true when more wait.
    pub fn transmitted(&mut self, n: usize) -> bool {
        let conn = self.conn.as_deref_mut();
        match self.transport.as_deref_mut().filter(|_| self.layered) {
            Some(t) if !t.poll_transmit().is_empty() => {
                t.advance_transmit(n);
                !t.poll_transmit().is_empty() || conn.is_some_and(|c| !c.poll_transmit().is_empty())
            }
            _ => match conn {
                Some(c) => {
                    c.advance_transmit(n);
                    !c.poll_transmit().is_empty()
                }
                None => false,
            },
        }
    }

    /// Bytes arrived from the socket: through the tunnel and TLS when the connection has them,
    /// into HTTP/2 (started here when its first bytes arrive through the layers). An error ends
    /// the connection; so does [`Received::PeerClosed`] (TLS close_notify), as the socket's EOF
    /// would (a plaintext connection learns that from the socket alone, so it is always open
    /// here).
    pub fn receive(
        &mut self,
        bytes: &[u8],
        cfg: &Config,
        now_ns: u64,
    ) -> Result<Received, TransportError> {
        match self.transport.as_deref_mut().filter(|_| self.layered) {
            Some(t) => {
                let (conn, spare) = (&mut self.conn, &mut self.spare_conn);
                t.receive(bytes, &mut |plain| {
                    conn.get_or_insert_with(|| fresh_connection(spare, cfg, now_ns))
                        .handle_bytes(now_ns, plain);
                })
            }
            None => {
                if let Some(c) = self.conn.as_deref_mut() {
                    c.handle_bytes(now_ns, bytes);
                }
                Ok(Received::Open)
            }
        }
    }

    /// The layers have bytes of their own to send (handshake records, the tunnel's request).
    pub fn layers_pending(&self) -> bool {
        self.transport()
            .is_some_and(|t| !t.poll_transmit().is_empty())
    }

    /// Whether the tracked request `stream` (ending at `request_end` in HTTP/2's transmit
    /// stream) can have reached the engine whole. A gRPC unary call cannot be processed before
    /// its last byte arrived, so one whose last byte (or, through TLS, the record carrying it)
    /// never reached the socket is safe to send again.
    pub fn left_whole(&self, stream: StreamId, request_end: Option<u64>) -> bool {
        let Some(end) = request_end else {
            return false;
        };
        match self.transport() {
            Some(t) if t.encrypts() => self
                .tracked
                .filter(|tr| tr.stream == stream)
                .and_then(|tr| tr.wire_end)
                .is_some_and(|w| t.wire_sent() >= w),
            _ => self
                .conn
                .as_deref()
                .is_some_and(|c| c.transmitted_total() >= end),
        }
    }

    /// The socket ended: HTTP/2 learns it (its calls end as the loss decides).
    pub fn h2_closed(&mut self) {
        if let Some(c) = self.conn.as_deref_mut() {
            c.handle_transport_closed();
        }
    }

    /// What the socket's end meant to the tunnel or TLS during setup (`None` once open, or
    /// with no layers).
    pub fn setup_closed(&mut self) -> Option<TransportError> {
        match self.transport.as_deref_mut().filter(|_| self.layered) {
            Some(t) => t.handle_transport_closed(),
            None => None,
        }
    }

    /// The connection is over: its storage waits for the next one.
    pub fn retire(&mut self) {
        if let Some(c) = self.conn.take() {
            self.spare_conn = Some(c);
        }
        if let Some(t) = self.transport.as_deref_mut() {
            t.retire();
        }
        self.layered = false;
        self.tracked = None;
    }

    /// Leaks the stack's buffers: the kernel may still be reading or writing them (the
    /// reactor could not confirm otherwise at teardown).
    pub fn forget(&mut self) {
        std::mem::forget(self.conn.take());
        std::mem::forget(self.spare_conn.take());
        std::mem::forget(self.transport.take());
    }

    /// The TLS session of the current connection, once started.
    pub fn tls(&self) -> Option<&TlsSession> {
        self.transport().and_then(Transport::tls)
    }
}

/// The HTTP/2 connection for a pair's new connection: in the storage of its previous one when
/// there is one.
fn fresh_connection(
    spare: &mut Option<Box<Connection>>,
    cfg: &Config,
    now_ns: u64,
) -> Box<Connection> {
    match spare.take() {
        Some(mut c) => {
            c.reset(now_ns);
            c
        }
        None => Box::new(Connection::new(cfg.clone(), now_ns)),
    }
}
