//! The admin listener: a plain blocking HTTP/1.1 server on threads of its own, off the request
//! path. It serves
//!
//! - `GET /metrics`: the Prometheus text format ([`Metrics::render_prometheus`]);
//! - `GET /debug/histograms`: every histogram's percentile distribution;
//! - `GET /debug/pairs`: text from the callback the relay provides (pairs per region by state);
//! - `GET /debug/tenants`: each tenant's policy and counts;
//! - `GET /ping`: `ok` (as the intake's `/ping`, the convention health checks match), or
//!   `503 draining` once the relay is stopping (a load balancer in front takes it out of
//!   rotation before its listeners close);
//!
//! `HEAD` of any of them: the same head, no body. 404 for any other path, 405 (with `Allow`)
//! for any other method, 400 for a request it cannot read, 408 for one that did not arrive in
//! time. One request per connection (`Connection: close`); what the client sends after its
//! head is read and dropped before the close, so the answer is never cut off by a reset.
//!
//! # Slow clients
//!
//! Scrapes must keep working while something misbehaves, so no client can hold what another
//! needs. An `admin` thread only accepts and hands connections to [`THREADS`] serving threads
//! through a queue of [`QUEUE_MAX`]; a connection that finds the queue full is answered 503 with
//! `Retry-After` at once, so a scraper learns it should retry instead of hanging. Each served
//! connection has one [`REQUEST_DEADLINE`] for reading its head and writing its answer together:
//! every read and write waits only for what is left of it, so a client trickling a byte at a
//! time is cut off as surely as one that sends nothing. Up to `THREADS - 1` stalled clients cost
//! a scrape nothing; past that, each costs it at most one deadline, and past the queue, a 503.
//! Shutdown closes the connections being served instead of waiting out their deadlines.
//!
//! # Access
//!
//! With a [`Token`] (`[admin] token_file`), every request except `GET /ping` (a liveness probe
//! reveals nothing) must carry `Authorization: Bearer <token>`; without it, or with another
//! token, the answer is 401 with `WWW-Authenticate: Bearer`. The comparison takes the same time
//! whatever the token holds, and the token is never printed. Without a token anyone who can
//! reach the port reads metrics and `/debug`: bind it to loopback (the default) unless the
//! network in front of it is trusted, which the config's warnings say at startup.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread;
use std::time::{Duration, Instant};

pub use crate::config::Token;
use crate::metrics::Metrics;

/// Default address: loopback only.
pub const ADDR_DEFAULT: &str = "127.0.0.1:9464";
/// Largest request head read: an admin GET is a few hundred bytes.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;
/// Serving threads: a Prometheus HA pair and an operator's curl at once, with one thread to
/// spare for a stalled client. Scrapes are rare and cheap; more threads would only let more
/// stalled clients pile up.
pub const THREADS: usize = 4;
/// Accepted connections waiting for a serving thread. With every thread held by a stalled
/// client a queued one waits at most one [`REQUEST_DEADLINE`], and that wait plus its answer
/// still fits Prometheus's default 10 s scrape timeout; a longer queue would only make
/// scrapers time out instead of getting a 503 they can act on.
pub const QUEUE_MAX: usize = THREADS;
/// Time one connection has to send its request head and take its answer, counted from when a
/// serving thread takes it. An honest scrape needs milliseconds; half Prometheus's default
/// scrape timeout lets a scraper that waited behind a stalled client still get its answer.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// How long, and how much, to read of a refused request's remaining bytes before closing.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(200);
const DRAIN_BYTES_MAX: usize = 64 * 1024;
/// Time given to a 408 or 503: a few hundred bytes into a fresh send buffer never wait, so
/// this only bounds a client whose window is already shut.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_millis(100);
/// Pause after a failed accept: the usual cause (out of file descriptors) persists, and
/// retrying at once would spin a core.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);
/// How long shutdown's wake-up connection may take to reach the blocked accept.
const WAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Writes `/debug/pairs`'s text.
pub type PairsFn = Box<dyn Fn(&mut String) + Send + Sync>;

/// How the listener serves; [`Default`] is the production setting (the constants above, no
/// token). Tests shorten the deadline.
#[derive(Debug, Clone)]
pub struct AdminOptions {
    /// Serving threads, at least 1.
    pub threads: usize,
    /// Accepted connections waiting for a thread; 0 answers 503 unless a thread is idle.
    pub queue: usize,
    /// Time to read a request head and write its answer, together.
    pub request_deadline: Duration,
    /// Required on everything but `GET /ping` when set.
    pub token: Option<Token>,
}

impl Default for AdminOptions {
    fn default() -> AdminOptions {
        AdminOptions {
            threads: THREADS,
            queue: QUEUE_MAX,
            request_deadline: REQUEST_DEADLINE,
            token: None,
        }
    }
}

/// What serving threads share.
struct Shared {
    metrics: Arc<Metrics>,
    pairs: PairsFn,
    token: RwLock<Option<Token>>,
    stop: AtomicBool,
    /// The relay is stopping: `/ping` answers 503.
    draining: AtomicBool,
    /// Per serving thread, a handle on the connection it is serving, so shutdown can close it.
    serving: Vec<Mutex<Option<TcpStream>>>,
}

/// The running listener.
pub struct AdminHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<thread::JoinHandle<()>>,
    workers: Vec<thread::JoinHandle<()>>,
}

impl AdminHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on `/ping` answers `503 draining`: the relay is stopping.
    pub fn set_draining(&self) {
        self.shared.draining.store(true, Ordering::Relaxed);
    }

    /// Replaces the token (a config reload's new `token_file`); `None` opens every endpoint.
    /// Requests already past their check keep their answer.
    pub fn set_token(&self, token: Option<Token>) {
        *self
            .shared
            .token
            .write()
            .unwrap_or_else(PoisonError::into_inner) = token;
    }

    /// Stops accepting, closes the connections being served, drops those still queued, and
    /// joins every thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            // Wake the blocking accept; the loop sees the flag and ends, dropping the queue's
            // sender so idle serving threads wake too.
            let _ = TcpStream::connect_timeout(&self.addr, WAKE_TIMEOUT);
            let _ = acceptor.join();
        }
        for slot in &self.shared.serving {
            if let Some(s) = slot.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for AdminHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The admin listener.
pub struct Admin;

impl Admin {
    /// Binds `addr` (port 0 picks one) and serves with the production [`AdminOptions`].
    pub fn start(
        addr: SocketAddr,
        metrics: Arc<Metrics>,
        pairs: PairsFn,
    ) -> io::Result<AdminHandle> {
        Admin::start_with(addr, metrics, pairs, AdminOptions::default())
    }

    /// Binds `addr` (port 0 picks one); a thread named `admin` accepts and threads named
    /// `admin-1`.. serve.
    pub fn start_with(
        addr: SocketAddr,
        metrics: Arc<Metrics>,
        pairs: PairsFn,
        options: AdminOptions,
    ) -> io::Result<AdminHandle> {
        if options.threads == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the admin listener needs at least one serving thread",
            ));
        }
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            metrics,
            pairs,
            token: RwLock::new(options.token),
            stop: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            serving: (0..options.threads).map(|_| Mutex::new(None)).collect(),
        });
        // From here a failed spawn drops the handle, which stops what did start.
        let mut handle = AdminHandle {
            addr,
            shared: Arc::clone(&shared),
            acceptor: None,
            workers: Vec::with_capacity(options.threads),
        };
        let (tx, rx) = mpsc::sync_channel::<TcpStream>(options.queue);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..options.threads {
            let (shared, rx) = (Arc::clone(&shared), Arc::clone(&rx));
            let deadline = options.request_deadline;
            handle.workers.push(
                thread::Builder::new()
                    .name(format!("admin-{}", i + 1))
                    .spawn(move || work(i, &shared, &rx, deadline))?,
            );
        }
        let busy = format!(
            "admin busy: {} connections served and {} waiting; retry\n",
            options.threads, options.queue
        );
        handle.acceptor = Some(thread::Builder::new().name("admin".into()).spawn(move || {
            for conn in listener.incoming() {
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                match conn {
                    Ok(s) => match tx.try_send(s) {
                        Ok(()) => {}
                        Err(TrySendError::Full(s)) => refuse_busy(s, &busy),
                        Err(TrySendError::Disconnected(_)) => break,
                    },
                    Err(_) => thread::sleep(ACCEPT_ERROR_PAUSE),
                }
            }
        })?);
        Ok(handle)
    }
}

/// One serving thread: takes connections off the queue until it closes.
fn work(i: usize, shared: &Shared, rx: &Mutex<Receiver<TcpStream>>, deadline: Duration) {
    loop {
        let next = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(mut s) = next else { return };
        {
            // Under the slot's lock, so shutdown either sees this connection or we see it.
            let mut slot = shared.serving[i]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if shared.stop.load(Ordering::SeqCst) {
                continue;
            }
            *slot = s.try_clone().ok();
        }
        // A broken admin connection concerns only its client.
        let _ = serve(&mut s, Instant::now() + deadline, shared);
        *shared.serving[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// A fast 503 from the accepting thread, which must never wait on a client.
fn refuse_busy(mut s: TcpStream, body: &str) {
    let answer = answer(
        "503 Service Unavailable",
        "text/plain",
        "Retry-After: 1\r\n",
        body,
    );
    if s.set_write_timeout(Some(REFUSAL_WRITE_TIMEOUT)).is_ok() {
        let _ = s.write_all(answer.as_bytes());
    }
}

/// What the client said about authorization.
#[derive(Debug, PartialEq, Eq)]
enum Presented<'a> {
    Nothing,
    NotBearer,
    Bearer(&'a [u8]),
}

/// The first `Authorization` header of `head` (request line included).
fn presented(head: &[u8]) -> Presented<'_> {
    for line in head.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if !line[..colon].eq_ignore_ascii_case(b"authorization") {
            continue;
        }
        let value = line[colon + 1..].trim_ascii();
        let scheme_end = value.iter().position(|&b| b == b' ').unwrap_or(value.len());
        // RFC 9110: the scheme is case-insensitive.
        if !value[..scheme_end].eq_ignore_ascii_case(b"bearer") {
            return Presented::NotBearer;
        }
        return Presented::Bearer(value[scheme_end..].trim_ascii_start());
    }
    Presented::Nothing
}

/// Reads one request head by `deadline`; answers it by the same deadline.
fn serve(s: &mut TcpStream, deadline: Instant, shared: &Shared) -> io::Result<()> {
    let mut buf = vec![0u8; REQUEST_HEAD_BYTES_MAX];
    let mut len = 0;
    let head_end = loop {
        if let Some(i) = head_end(&buf[..len]) {
            break Some(i);
        }
        if len == buf.len() {
            break None;
        }
        let Some(left) = left(deadline) else {
            return refuse_late(s);
        };
        s.set_read_timeout(Some(left))?;
        let n = match s.read(&mut buf[len..]) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return refuse_late(s);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break None;
        }
        len += n;
    };
    let Some(head_end) = head_end else {
        let a = answer(
            "400 Bad Request",
            "text/plain",
            "",
            "request head unreadable\n",
        );
        write_by(s, a.as_bytes(), deadline)?;
        return drain(s, deadline);
    };
    let head = &buf[..head_end];
    let request_line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or(b"");
    let request_line = String::from_utf8_lossy(request_line);
    let mut parts = request_line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    // An absolute-form target (`http://host/metrics`) is served as its path, as RFC 9112
    // §3.2.2 requires.
    let (path, _query) = crate::http1::split_target(target.as_bytes());
    let path = std::str::from_utf8(path).unwrap_or("");
    if method != "GET" && method != "HEAD" {
        let a = answer(
            "405 Method Not Allowed",
            "text/plain",
            "Allow: GET, HEAD\r\n",
            "GET and HEAD only\n",
        );
        write_by(s, a.as_bytes(), deadline)?;
        return drain(s, deadline);
    }
    let head_only = method == "HEAD";
    if path != "/ping"
        && let Some(refusal) = unauthorized(shared, presented(head))
    {
        write_by(s, without_body(&refusal, head_only), deadline)?;
        return drain(s, deadline);
    }
    let mut body = String::new();
    let (status, ctype) = match path {
        "/metrics" => {
            shared.metrics.render_prometheus(&mut body);
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8")
        }
        "/debug/histograms" => {
            shared.metrics.render_histograms(&mut body);
            ("200 OK", "text/plain; charset=utf-8")
        }
        "/debug/pairs" => {
            (shared.pairs)(&mut body);
            ("200 OK", "text/plain; charset=utf-8")
        }
        "/debug/tenants" => {
            shared.metrics.render_tenants_debug(&mut body);
            ("200 OK", "text/plain; charset=utf-8")
        }
        "/ping" if shared.draining.load(Ordering::Relaxed) => {
            body.push_str("draining\n");
            ("503 Service Unavailable", "text/plain")
        }
        "/ping" => {
            body.push_str("ok\n");
            ("200 OK", "text/plain")
        }
        _ => {
            body.push_str(
                "not found; try /metrics /debug/histograms /debug/pairs /debug/tenants /ping\n",
            );
            ("404 Not Found", "text/plain")
        }
    };
    let a = answer(status, ctype, "", &body);
    write_by(s, without_body(&a, head_only), deadline)?;
    drain(s, deadline)
}

/// `answer` as HEAD gets it when `head_only`: its head alone, `Content-Length` as GET's.
fn without_body(answer: &str, head_only: bool) -> &[u8] {
    let end = match answer.find("\r\n\r\n") {
        Some(i) if head_only => i + 4,
        _ => answer.len(),
    };
    &answer.as_bytes()[..end]
}

/// Where the head in `buf` ends (the empty line's start): CRLF lines, or bare LF ones, which
/// RFC 9112 (2.2) lets a server take as line ends.
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = buf.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The 401 answer when a token is required and `presented` is not it.
fn unauthorized(shared: &Shared, presented: Presented<'_>) -> Option<String> {
    let token = shared.token.read().unwrap_or_else(PoisonError::into_inner);
    let token = token.as_ref()?;
    let (challenge, body) = match presented {
        Presented::Bearer(t) if token.matches(t) => return None,
        Presented::Bearer(_) => ("Bearer error=\"invalid_token\"", "wrong bearer token\n"),
        Presented::NotBearer => ("Bearer", "the Authorization header is not a Bearer token\n"),
        Presented::Nothing => ("Bearer", "missing Authorization: Bearer <token>\n"),
    };
    Some(answer(
        "401 Unauthorized",
        "text/plain",
        &format!("WWW-Authenticate: {challenge}\r\n"),
        body,
    ))
}

/// What is left until `deadline`; `None` once it has passed.
fn left(deadline: Instant) -> Option<Duration> {
    Some(deadline.saturating_duration_since(Instant::now())).filter(|d| !d.is_zero())
}

/// Writes all of `bytes` by `deadline`: each write waits only for what is left, so a client
/// reading slowly cannot stretch the answer past it.
fn write_by(s: &mut TcpStream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        let left = left(deadline).ok_or(io::ErrorKind::TimedOut)?;
        s.set_write_timeout(Some(left))?;
        match s.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A 408 to a client whose head did not arrive by the deadline, then close.
fn refuse_late(s: &mut TcpStream) -> io::Result<()> {
    let a = answer(
        "408 Request Timeout",
        "text/plain",
        "",
        "request head not received in time\n",
    );
    s.set_write_timeout(Some(REFUSAL_WRITE_TIMEOUT))?;
    s.write_all(a.as_bytes())
}

/// Says the answer is whole (FIN) and reads what the client still sends (briefly, and not
/// past `deadline`): closed with bytes unread (a body after the head, a pipelined request),
/// the socket would reset the connection and the kernel drop the part of the answer the
/// client had not yet received. A client that reads its answer and closes ends it at once.
fn drain(s: &mut TcpStream, deadline: Instant) -> io::Result<()> {
    s.shutdown(Shutdown::Write)?;
    let until = deadline.min(Instant::now() + DRAIN_TIMEOUT);
    let mut sink = [0u8; 4096];
    let mut left_bytes = DRAIN_BYTES_MAX;
    while left_bytes > 0 {
        let Some(wait) = left(until) else { break };
        s.set_read_timeout(Some(wait))?;
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left_bytes = left_bytes.saturating_sub(n),
        }
    }
    Ok(())
}

/// A whole answer, head and body, to go out in one write.
fn answer(status: &str, ctype: &str, extra_headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra_headers}\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_header_is_found_case_insensitively_and_its_scheme_checked() {
        let head = |h: &str| format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{h}");
        assert_eq!(presented(head("").as_bytes()), Presented::Nothing);
        assert_eq!(
            presented(head("authorization:   bearer  abc ").as_bytes()),
            Presented::Bearer(b"abc")
        );
        assert_eq!(
            presented(head("Authorization: Bearer abc\r\nAuthorization: Bearer def").as_bytes()),
            Presented::Bearer(b"abc")
        );
        assert_eq!(
            presented(head("Authorization: Basic dTpw").as_bytes()),
            Presented::NotBearer
        );
        assert_eq!(
            presented(head("Authorization: Bearer").as_bytes()),
            Presented::Bearer(b"")
        );
        assert_eq!(
            presented(head("X-Authorization: Bearer abc").as_bytes()),
            Presented::Nothing
        );
        // The request line is not a header.
        assert_eq!(
            presented(b"Authorization: Bearer abc\r\nHost: x"),
            Presented::Nothing
        );
    }
}
