//! bench-socks5: a small SOCKS5 proxy (RFC 1928 CONNECT, no-auth or RFC 1929
//! username/password) that relays bytes, for testing the relay's SOCKS5 egress on loopback.
//!
//! It records, per client connection, the client's source address it saw, the target asked
//! for, the local address it used for the outbound connection, how the handshake ended and the
//! bytes relayed each way, so a test can check which source address an engine saw.
//!
//! Fault modes: refuse every CONNECT with a chosen reply code, or close the connection after
//! reading the greeting without answering.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// A client that does not finish its handshake in this long is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Outbound connects that take longer fail with "host unreachable".
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct ProxyConfig {
    pub listen: SocketAddr,
    /// Require username/password with these credentials; `None`: no authentication.
    pub auth: Option<(String, String)>,
    /// Answer every CONNECT with this reply code (e.g. 0x02 not allowed, 0x05 refused).
    pub refuse: Option<u8>,
    /// Close each connection after reading its greeting, without a reply.
    pub close_mid_handshake: bool,
    /// Bind outbound connections to this address (port chosen by the kernel).
    pub outbound_source: Option<IpAddr>,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 1080)),
            auth: None,
            refuse: None,
            close_mid_handshake: false,
            outbound_source: None,
        }
    }
}

/// One client connection, as the proxy saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    /// The client's address (its source IP is the relay's egress address).
    pub client: SocketAddr,
    pub target: Option<SocketAddr>,
    /// The proxy's local address on the outbound connection: the source the engine saw.
    pub outbound_local: Option<SocketAddr>,
    /// `relayed`, `auth failed`, `refused 0x05`, `closed mid-handshake`, ...
    pub outcome: String,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

type Records = Arc<Mutex<Vec<SessionRecord>>>;

pub struct Socks5Proxy;

impl Socks5Proxy {
    /// Binds and serves on the caller's tokio runtime until [`ProxyHandle::shutdown`].
    pub async fn start(cfg: ProxyConfig) -> io::Result<ProxyHandle> {
        let listener = TcpListener::bind(cfg.listen).await.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("binding SOCKS5 proxy to {}: {e}", cfg.listen),
            )
        })?;
        let addr = listener.local_addr()?;
        let records: Records = Arc::default();
        let (shutdown, rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, Arc::new(cfg), records.clone(), rx));
        Ok(ProxyHandle {
            addr,
            records,
            shutdown,
            task,
        })
    }
}

pub struct ProxyHandle {
    addr: SocketAddr,
    records: Records,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ProxyHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every connection so far whose handshake has ended, in order.
    pub fn sessions(&self) -> Vec<SessionRecord> {
        self.records.lock().expect("records lock").clone()
    }

    /// Stops accepting, drops every tunnel and returns the records.
    pub async fn shutdown(self) -> Vec<SessionRecord> {
        self.shutdown.send_replace(true);
        let _ = self.task.await;
        self.records.lock().expect("records lock").clone()
    }
}

async fn accept_loop(
    listener: TcpListener,
    cfg: Arc<ProxyConfig>,
    records: Records,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tunnels = JoinSet::new();
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((sock, client)) = r else { continue };
                let _ = sock.set_nodelay(true);
                tunnels.spawn(serve(sock, client, cfg.clone(), records.clone()));
            }
            Some(_) = tunnels.join_next(), if !tunnels.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    tunnels.abort_all();
    while tunnels.join_next().await.is_some() {}
}

/// The record is pushed once the handshake has ended; its byte counts are filled in when the
/// tunnel closes.
async fn serve(mut sock: TcpStream, client: SocketAddr, cfg: Arc<ProxyConfig>, records: Records) {
    let mut rec = SessionRecord {
        client,
        target: None,
        outbound_local: None,
        outcome: String::new(),
        bytes_up: 0,
        bytes_down: 0,
    };
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut sock, &cfg, &mut rec));
    let out = match handshake.await {
        Ok(Ok(out)) => out,
        Ok(Err(outcome)) => {
            rec.outcome = outcome;
            records.lock().expect("records lock").push(rec);
            return;
        }
        Err(_) => {
            rec.outcome = "handshake timed out".into();
            records.lock().expect("records lock").push(rec);
            return;
        }
    };
    rec.outcome = "relayed".into();
    let index = {
        let mut r = records.lock().expect("records lock");
        r.push(rec);
        r.len() - 1
    };
    let mut out = out;
    if let Ok((up, down)) = tokio::io::copy_bidirectional(&mut sock, &mut out).await {
        let mut r = records.lock().expect("records lock");
        r[index].bytes_up = up;
        r[index].bytes_down = down;
    }
}

/// Runs the server side of the handshake; `Err` is the outcome to record (the socket is
/// dropped, closing it).
async fn handshake(
    sock: &mut TcpStream,
    cfg: &ProxyConfig,
    rec: &mut SessionRecord,
) -> Result<TcpStream, String> {
    let io_err = |what: &str| {
        let what = what.to_string();
        move |e: io::Error| format!("{what}: {e}")
    };
    let mut head = [0u8; 2];
    sock.read_exact(&mut head)
        .await
        .map_err(io_err("greeting"))?;
    if head[0] != 5 {
        return Err(format!("greeting version {:#04x}", head[0]));
    }
    let mut methods = vec![0u8; head[1] as usize];
    sock.read_exact(&mut methods)
        .await
        .map_err(io_err("greeting methods"))?;
    if cfg.close_mid_handshake {
        return Err("closed mid-handshake".into());
    }
    let want = if cfg.auth.is_some() { 0x02 } else { 0x00 };
    if !methods.contains(&want) {
        let _ = sock.write_all(&[5, 0xff]).await;
        return Err(format!("no acceptable method in {methods:?}"));
    }
    sock.write_all(&[5, want]).await.map_err(io_err("method"))?;
    if let Some((user, pass)) = &cfg.auth {
        let mut v = [0u8; 2];
        sock.read_exact(&mut v).await.map_err(io_err("auth"))?;
        let mut u = vec![0u8; v[1] as usize];
        sock.read_exact(&mut u).await.map_err(io_err("username"))?;
        let mut plen = [0u8; 1];
        sock.read_exact(&mut plen).await.map_err(io_err("auth"))?;
        let mut p = vec![0u8; plen[0] as usize];
        sock.read_exact(&mut p).await.map_err(io_err("password"))?;
        let ok = v[0] == 1 && u == user.as_bytes() && p == pass.as_bytes();
        let _ = sock.write_all(&[1, if ok { 0 } else { 1 }]).await;
        if !ok {
            return Err("auth failed".into());
        }
    }
    let mut req = [0u8; 4];
    sock.read_exact(&mut req).await.map_err(io_err("request"))?;
    let target = match req[3] {
        1 => {
            let mut a = [0u8; 6];
            sock.read_exact(&mut a).await.map_err(io_err("address"))?;
            SocketAddr::from(([a[0], a[1], a[2], a[3]], u16::from_be_bytes([a[4], a[5]])))
        }
        4 => {
            let mut a = [0u8; 18];
            sock.read_exact(&mut a).await.map_err(io_err("address"))?;
            let ip: [u8; 16] = a[..16].try_into().expect("16 bytes");
            SocketAddr::from((ip, u16::from_be_bytes([a[16], a[17]])))
        }
        3 => {
            let mut len = [0u8; 1];
            sock.read_exact(&mut len).await.map_err(io_err("address"))?;
            let mut a = vec![0u8; len[0] as usize + 2];
            sock.read_exact(&mut a).await.map_err(io_err("address"))?;
            let port = u16::from_be_bytes([a[a.len() - 2], a[a.len() - 1]]);
            let host = String::from_utf8_lossy(&a[..a.len() - 2]).into_owned();
            match tokio::net::lookup_host((host.as_str(), port))
                .await
                .ok()
                .and_then(|mut i| i.next())
            {
                Some(t) => t,
                None => {
                    reply(sock, 4, None).await;
                    return Err(format!("cannot resolve {host}"));
                }
            }
        }
        other => {
            reply(sock, 8, None).await;
            return Err(format!("address type {other:#04x}"));
        }
    };
    rec.target = Some(target);
    if req[0] != 5 || req[1] != 1 {
        reply(sock, 7, None).await;
        return Err(format!("command {:#04x}", req[1]));
    }
    if let Some(code) = cfg.refuse {
        reply(sock, code, None).await;
        return Err(format!("refused {code:#04x}"));
    }
    let connected = tokio::time::timeout(CONNECT_TIMEOUT, connect(target, cfg.outbound_source));
    let out = match connected.await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let code = match e.kind() {
                io::ErrorKind::ConnectionRefused => 5,
                io::ErrorKind::HostUnreachable => 4,
                io::ErrorKind::NetworkUnreachable => 3,
                _ => 1,
            };
            reply(sock, code, None).await;
            return Err(format!("connect {target}: {e}"));
        }
        Err(_) => {
            reply(sock, 4, None).await;
            return Err(format!("connect {target}: timed out"));
        }
    };
    let local = out.local_addr().ok();
    rec.outbound_local = local;
    reply(sock, 0, local).await;
    Ok(out)
}

async fn connect(target: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let s = if target.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = source {
        s.bind(SocketAddr::new(ip, 0))?;
    }
    let out = s.connect(target).await?;
    out.set_nodelay(true)?;
    Ok(out)
}

async fn reply(sock: &mut TcpStream, code: u8, bound: Option<SocketAddr>) {
    let mut b = Vec::with_capacity(22);
    b.extend_from_slice(&[5, code, 0]);
    match bound {
        Some(SocketAddr::V6(a)) => {
            b.push(4);
            b.extend_from_slice(&a.ip().octets());
            b.extend_from_slice(&a.port().to_be_bytes());
        }
        Some(SocketAddr::V4(a)) => {
            b.push(1);
            b.extend_from_slice(&a.ip().octets());
            b.extend_from_slice(&a.port().to_be_bytes());
        }
        None => b.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0]),
    }
    let _ = sock.write_all(&b).await;
}
