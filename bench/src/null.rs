//! bench-null: the trivial responder.
//!
//! Answers every HTTP/1.1 request with a JSON-RPC result, as fast as one epoll loop per thread
//! can: keep-alive, pipelining (every complete request in a read is answered in one write),
//! `Content-Length` bodies only. It is bench-load's self-test and the floor that the relay's
//! intake cost per request is compared with.
//!
//! The answer is `{"jsonrpc":"2.0","result":"<64 hex>","id":<the request's id, echoed>}`. The
//! result is 64 zeros unless [`NullConfig::bundle_ids`] is set; then it is the real Jito bundle
//! id of a `sendBundle` body (each transaction decoded, first signatures hashed), so bench-load's
//! id check has something true to check. The id is found by a plain scan for `"id":`, which is
//! enough for the bodies bench-load sends; this is not a JSON parser.
//!
//! Each thread has its own `SO_REUSEPORT` listener; the kernel spreads connections.
//!
//! Measured CPU per request (utime + stime from `/proc/<pid>/stat`, release build, one thread,
//! on a contended 2-core host): 3.7 µs at 60,000 req/s with bench-load pipelining 16 deep on 16
//! connections (many requests per read and write); 10 µs without pipelining (one read and one
//! write per request).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use bundle_relay::jito::code::INVALID_PARAMS;
use bundle_relay::wire::PACKET_DATA_SIZE;
use sha2::{Digest, Sha256};

use crate::load::epoll::{self, Epoll};

/// A request (head and body) must fit here; the largest sendBundle is about 8.5 KiB.
pub const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Echoed ids longer than this are replaced by `null`: nobody sends such ids.
const ID_BYTES_MAX: usize = 64;
/// Connections one thread serves; beyond it, new ones are closed at once.
pub const CONNECTIONS_PER_THREAD_MAX: usize = 16_384;
/// How often an idle loop checks the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

#[derive(Clone, Debug)]
pub struct NullConfig {
    pub listen: SocketAddr,
    pub threads: usize,
    /// Answer with each sendBundle's real bundle id instead of a fixed one.
    pub bundle_ids: bool,
}

impl Default for NullConfig {
    fn default() -> Self {
        NullConfig {
            listen: "127.0.0.1:8999".parse().expect("literal"),
            threads: 1,
            bundle_ids: false,
        }
    }
}

/// A running responder; dropping it stops it.
pub struct NullServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    served: Arc<AtomicU64>,
    threads: Vec<JoinHandle<io::Result<()>>>,
}

fn listener(addr: SocketAddr) -> io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

impl NullServer {
    pub fn start(cfg: &NullConfig) -> io::Result<NullServer> {
        let first = listener(cfg.listen)?;
        let addr = first.local_addr()?;
        let mut listeners = vec![first];
        for _ in 1..cfg.threads.max(1) {
            listeners.push(listener(addr)?);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicU64::new(0));
        let threads = listeners
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let (stop, served, ids) = (stop.clone(), served.clone(), cfg.bundle_ids);
                std::thread::Builder::new()
                    .name(format!("null-{i}"))
                    .spawn(move || serve(l, ids, &stop, &served))
            })
            .collect::<io::Result<_>>()?;
        Ok(NullServer {
            addr,
            stop,
            served,
            threads,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests answered so far (updated once per loop iteration).
    pub fn requests_served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// Blocks until the threads end (they run until [`NullServer::stop`] or an error).
    pub fn join(mut self) -> io::Result<()> {
        for t in self.threads.drain(..) {
            t.join().expect("null thread panicked")?;
        }
        Ok(())
    }

    pub fn stop(self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }
}

impl Drop for NullServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

struct Conn {
    stream: TcpStream,
    rbuf: Box<[u8]>,
    rlen: usize,
    wbuf: Vec<u8>,
    wpos: usize,
}

const LISTENER: u64 = u64::MAX;

fn serve(l: TcpListener, ids: bool, stop: &AtomicBool, served: &AtomicU64) -> io::Result<()> {
    let mut ep = Epoll::new(256)?;
    ep.add(l.as_raw_fd(), LISTENER, epoll::IN)?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut ready: Vec<(u64, u32)> = Vec::with_capacity(256);
    while !stop.load(Ordering::Relaxed) {
        ready.clear();
        ready.extend(ep.wait(Some(STOP_POLL))?);
        for &(token, flags) in &ready {
            if token == LISTENER {
                accept_all(&l, &ep, &mut conns, &mut free)?;
                continue;
            }
            let i = token as usize;
            let Some(c) = conns[i].as_mut() else { continue };
            let keep = service(c, flags, ids, served);
            if !keep {
                let _ = ep.delete(c.stream.as_raw_fd());
                conns[i] = None;
                free.push(i);
            }
        }
    }
    Ok(())
}

fn accept_all(
    l: &TcpListener,
    ep: &Epoll,
    conns: &mut Vec<Option<Conn>>,
    free: &mut Vec<usize>,
) -> io::Result<()> {
    loop {
        let (stream, _) = match l.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            // Out of fds: drop this wake-up; the backlog waits for a close.
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => return Ok(()),
            Err(e) => return Err(e),
        };
        let live = conns.len() - free.len();
        if live >= CONNECTIONS_PER_THREAD_MAX {
            continue; // dropped: closes at once
        }
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        let i = free.pop().unwrap_or_else(|| {
            conns.push(None);
            conns.len() - 1
        });
        ep.add(
            stream.as_raw_fd(),
            i as u64,
            epoll::IN | epoll::OUT | epoll::ET | epoll::RDHUP,
        )?;
        conns[i] = Some(Conn {
            stream,
            rbuf: vec![0u8; READ_BUFFER_BYTES].into_boxed_slice(),
            rlen: 0,
            wbuf: Vec::with_capacity(READ_BUFFER_BYTES),
            wpos: 0,
        });
    }
}

/// Reads, answers and writes what it can; false when the connection is done.
fn service(c: &mut Conn, flags: u32, ids: bool, served: &AtomicU64) -> bool {
    let mut open = flags & (epoll::ERR) == 0;
    let mut answered = 0u64;
    if flags & (epoll::IN | epoll::RDHUP | epoll::HUP) != 0 {
        loop {
            if c.rlen == c.rbuf.len() {
                return false; // a request larger than the buffer
            }
            match c.stream.read(&mut c.rbuf[c.rlen..]) {
                Ok(0) => {
                    open = false;
                    break;
                }
                Ok(n) => {
                    c.rlen += n;
                    match answer_all(&c.rbuf[..c.rlen], ids, &mut c.wbuf) {
                        Ok((used, count)) => {
                            c.rbuf.copy_within(used..c.rlen, 0);
                            c.rlen -= used;
                            answered += count;
                        }
                        Err(BadRequest) => open = false,
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
    }
    // Counted before the write: a client that has read an answer must find it counted.
    if answered > 0 {
        served.fetch_add(answered, Ordering::Relaxed);
    }
    while c.wpos < c.wbuf.len() {
        match c.stream.write(&c.wbuf[c.wpos..]) {
            Ok(n) => c.wpos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    if c.wpos == c.wbuf.len() {
        c.wbuf.clear();
        c.wpos = 0;
    }
    open || c.wpos < c.wbuf.len()
}

/// A request that is not HTTP/1.1 or is too large; the connection is closed after a 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadRequest;

/// Answers every complete request in `buf`; returns bytes consumed and requests answered.
/// `Err` on a malformed request (after writing a 400 answer).
pub fn answer_all(buf: &[u8], ids: bool, out: &mut Vec<u8>) -> Result<(usize, u64), BadRequest> {
    let mut used = 0;
    let mut count = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[used..]) {
            Ok(httparse::Status::Complete(head)) => {
                let mut len = 0usize;
                for h in req.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        len = match std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.trim().parse().ok())
                        {
                            Some(n) => n,
                            None => return bad_request(out),
                        };
                    }
                }
                if head + len > READ_BUFFER_BYTES {
                    return bad_request(out);
                }
                if used + head + len > buf.len() {
                    return Ok((used, count));
                }
                let body = &buf[used + head..used + head + len];
                respond(body, ids, out);
                used += head + len;
                count += 1;
            }
            Ok(httparse::Status::Partial) => return Ok((used, count)),
            Err(_) => return bad_request(out),
        }
    }
}

fn bad_request(out: &mut Vec<u8>) -> Result<(usize, u64), BadRequest> {
    out.extend_from_slice(
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    Err(BadRequest)
}

/// Writes the answer to one request body.
fn respond(body: &[u8], ids: bool, out: &mut Vec<u8>) {
    let id = find_id(body).unwrap_or(b"null");
    let result = if ids {
        bundle_id_of(body)
    } else {
        Some([b'0'; 64])
    };
    let mut json = [0u8; 256];
    let n = {
        let mut w = &mut json[..];
        let _ = match result {
            Some(r) => write!(
                w,
                r#"{{"jsonrpc":"2.0","result":"{}","id":"#,
                std::str::from_utf8(&r).expect("hex")
            ),
            None => write!(
                w,
                r#"{{"jsonrpc":"2.0","error":{{"code":{INVALID_PARAMS},"message":"bad transaction"}},"id":"#
            ),
        };
        let _ = w.write_all(id);
        let _ = w.write_all(b"}");
        256 - w.len()
    };
    let _ = write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {n}\r\n\r\n"
    );
    out.extend_from_slice(&json[..n]);
}

/// The raw JSON value after `"id":` (number, `null` or a string without escapes).
fn find_id(body: &[u8]) -> Option<&[u8]> {
    let at = find(body, b"\"id\":")? + 5;
    let rest = &body[at..];
    let start = rest.iter().position(|c| !c.is_ascii_whitespace())?;
    let rest = &rest[start..];
    let end = if rest.first() == Some(&b'"') {
        1 + rest[1..].iter().position(|&c| c == b'"' || c == b'\\')? + 1
    } else {
        rest.iter()
            .position(|&c| c == b',' || c == b'}' || c.is_ascii_whitespace())?
    };
    let v = &rest[..end];
    (end <= ID_BYTES_MAX && v.last() != Some(&b'\\')).then_some(v)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The Jito bundle id of a sendBundle body: every transaction string decoded, its first
/// signature (bytes 1..65) re-encoded in base58 and hashed. `None` if a string does not decode.
fn bundle_id_of(body: &[u8]) -> Option<[u8; 64]> {
    let base64 = find(body, br#""encoding":"base64""#).is_some();
    let mut rest = &body[find(body, b"\"params\":[[")? + 11..];
    let mut h = Sha256::new();
    let mut tx = [0u8; PACKET_DATA_SIZE];
    let mut sig58 = [0u8; 96];
    let mut first = true;
    loop {
        rest = &rest[rest.iter().position(|c| !c.is_ascii_whitespace())?..];
        if rest[0] == b']' {
            break;
        }
        if rest[0] == b',' {
            rest = &rest[1..];
            continue;
        }
        if rest[0] != b'"' {
            return None;
        }
        let end = rest[1..].iter().position(|&c| c == b'"')? + 1;
        let s = &rest[1..end];
        rest = &rest[end + 1..];
        let n = if base64 {
            base64::engine::general_purpose::STANDARD
                .decode_slice(s, &mut tx)
                .ok()?
        } else {
            bs58::decode(s).onto(&mut tx[..]).ok()?
        };
        if n < 65 {
            return None;
        }
        let m = bs58::encode(&tx[1..65]).onto(&mut sig58[..]).ok()?;
        if !first {
            h.update(b",");
        }
        first = false;
        h.update(&sig58[..m]);
    }
    if first {
        return None;
    }
    Some(crate::txgen::hex64(&h.finalize().into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelined_requests_are_answered_in_order_with_their_ids() {
        let req = |id: &str| {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x"}}"#);
            format!(
                "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let buf = format!("{}{}{}", req("7"), req("\"a\""), &req("9")[..10]);
        let mut out = Vec::new();
        let (used, n) = answer_all(buf.as_bytes(), false, &mut out).unwrap();
        assert_eq!(n, 2);
        assert_eq!(used, req("7").len() + req("\"a\"").len());
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains(&format!(r#""result":"{}","id":7}}"#, "0".repeat(64))));
        assert!(s.ends_with(r#","id":"a"}"#));
    }

    #[test]
    fn garbage_gets_a_400_and_closes() {
        let mut out = Vec::new();
        assert!(answer_all(b"\x01\x02 nonsense\r\n\r\n", false, &mut out).is_err());
        assert!(out.starts_with(b"HTTP/1.1 400"));
    }
}
