//! The admin listener: a plain blocking HTTP/1.1 server on its own thread, off the request
//! path. It serves
//!
//! - `GET /metrics`: the Prometheus text format ([`Metrics::render_prometheus`]);
//! - `GET /debug/histograms`: every histogram's percentile distribution;
//! - `GET /debug/pairs`: text from the callback the relay provides (pairs per region by state);
//! - `GET /ping`: `pong`;
//!
//! 404 for any other path, 405 for any other method, 400 for a request it cannot read.
//! One request per connection (`Connection: close`), one connection at a time: scrapes are
//! rare and small, and a slow client is cut off by [`IO_TIMEOUT`]. Bind it to loopback (the
//! default the relay uses) unless the network in front of it is trusted: it has no auth.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use crate::metrics::Metrics;

/// Default address: loopback only.
pub const ADDR_DEFAULT: &str = "127.0.0.1:9464";
/// Largest request head read: an admin GET is a few hundred bytes.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;
/// Read and write timeout of one admin connection, so a stalled client cannot hold the thread.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long, and how much, to read of a refused request's remaining bytes before closing.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(200);
const DRAIN_BYTES_MAX: usize = 64 * 1024;

/// Writes `/debug/pairs`'s text.
pub type PairsFn = Box<dyn Fn(&mut String) + Send + Sync>;

/// The running listener.
pub struct AdminHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    join: Option<thread::JoinHandle<()>>,
}

impl AdminHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and joins the thread (after any request in progress).
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept; the loop sees the flag and ends.
        let _ = TcpStream::connect_timeout(&self.addr, IO_TIMEOUT);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for AdminHandle {
    fn drop(&mut self) {
        if self.join.is_some() {
            self.stop_and_join();
        }
    }
}

/// The admin listener.
pub struct Admin;

impl Admin {
    /// Binds `addr` (port 0 picks one) and serves on a thread named `admin`.
    pub fn start(
        addr: SocketAddr,
        metrics: Arc<Metrics>,
        pairs: PairsFn,
    ) -> io::Result<AdminHandle> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let join = thread::Builder::new().name("admin".into()).spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(s) = conn {
                    // A broken admin connection concerns only its client.
                    let _ = serve(s, &metrics, &pairs);
                }
            }
        })?;
        Ok(AdminHandle {
            addr,
            stop,
            join: Some(join),
        })
    }
}

/// Reads one request head; answers it.
fn serve(mut s: TcpStream, metrics: &Metrics, pairs: &PairsFn) -> io::Result<()> {
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = vec![0u8; REQUEST_HEAD_BYTES_MAX];
    let mut len = 0;
    let head_end = loop {
        if let Some(i) = buf[..len].windows(4).position(|w| w == b"\r\n\r\n") {
            break Some(i);
        }
        if len == buf.len() {
            break None;
        }
        let n = s.read(&mut buf[len..])?;
        if n == 0 {
            break None;
        }
        len += n;
    };
    let Some(head_end) = head_end else {
        respond(
            &mut s,
            "400 Bad Request",
            "text/plain",
            "request head unreadable\n",
        )?;
        return drain(&mut s);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]);
    let mut parts = head.lines().next().unwrap_or("").split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if method != "GET" && method != "HEAD" {
        respond(&mut s, "405 Method Not Allowed", "text/plain", "GET only\n")?;
        return drain(&mut s);
    }
    let mut body = String::new();
    let (status, ctype) = match path {
        "/metrics" => {
            metrics.render_prometheus(&mut body);
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8")
        }
        "/debug/histograms" => {
            metrics.render_histograms(&mut body);
            ("200 OK", "text/plain; charset=utf-8")
        }
        "/debug/pairs" => {
            pairs(&mut body);
            ("200 OK", "text/plain; charset=utf-8")
        }
        "/ping" => {
            body.push_str("pong\n");
            ("200 OK", "text/plain")
        }
        _ => {
            body.push_str("not found; try /metrics /debug/histograms /debug/pairs /ping\n");
            ("404 Not Found", "text/plain")
        }
    };
    if method == "HEAD" {
        body.clear();
    }
    respond(&mut s, status, ctype, &body)
}

/// Reads what the client still sends (briefly) after an error answer, so closing the socket
/// with unread bytes does not reset the connection before the client reads the answer.
fn drain(s: &mut TcpStream) -> io::Result<()> {
    s.shutdown(std::net::Shutdown::Write)?;
    s.set_read_timeout(Some(DRAIN_TIMEOUT))?;
    let mut sink = [0u8; 4096];
    let mut left = DRAIN_BYTES_MAX;
    while left > 0 {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
    Ok(())
}

fn respond(s: &mut TcpStream, status: &str, ctype: &str, body: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body.as_bytes())?;
    s.flush()
}
