//! The abusive clients the matrix sets on the relay's intake while the load runs: pipelining
//! clients that never read, clients trickling a head a byte at a time, clients that half-close
//! after sending their bundles, clients that half-close in the middle of a body, and a flood
//! of connections from one address. Each returns what
//! it saw, for the matrix's verdicts.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use crate::txgen::GeneratedBundle;

fn post(body: &str) -> Vec<u8> {
    format!(
        "POST /api/v1/bundles HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Clients that pipeline tip-account requests (big answers) and never read: returns the
/// requests they got out before the relay hung up.
pub(super) fn slow_readers(addr: SocketAddr, n: usize) -> usize {
    let one = post(r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params":[]}"#);
    let burst: Vec<u8> = one.iter().copied().cycle().take(one.len() * 300).collect();
    let conns: Vec<TcpStream> = (0..n)
        .filter_map(|_| {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
            s.set_recv_buffer_size(4096).ok()?;
            s.connect(&addr.into()).ok()?;
            Some(s.into())
        })
        .collect();
    let mut sent = 0;
    for mut c in &conns {
        if c.write_all(&burst).is_ok() {
            sent += 300;
        }
    }
    // Hold them, unread, until the relay gives up on them (its send deadline is 1 s).
    std::thread::sleep(Duration::from_secs(3));
    sent
}

/// Clients that send a request head one byte per 100 ms: how many got a 408.
pub(super) fn tricklers(addr: SocketAddr, n: usize) -> usize {
    let head =
        b"POST /api/v1/bundles HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n";
    let handles: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                let Ok(mut c) = TcpStream::connect(addr) else {
                    return false;
                };
                c.set_read_timeout(Some(Duration::from_millis(100))).ok();
                let mut answer = Vec::new();
                for b in head.iter().cycle().take(60) {
                    if c.write_all(std::slice::from_ref(b)).is_err() {
                        break;
                    }
                    let mut buf = [0u8; 512];
                    match c.read(&mut buf) {
                        Ok(0) => break,
                        Ok(k) => answer.extend_from_slice(&buf[..k]),
                        Err(_) => {}
                    }
                }
                answer.starts_with(b"HTTP/1.1 408")
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap_or(false))
        .filter(|ok| *ok)
        .count()
}

/// What half-closing clients read back.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct HalfClosed {
    /// Answers carrying their bundle's id.
    pub with_id: usize,
    /// Answers refusing the bundle for a region's backlog (429, -32097, in its words).
    pub refused: usize,
}

/// Clients that send their bundles, shut their write side and read every answer: how many
/// answers carried the right bundle id, and how many refused a bundle for a backlog.
pub(super) fn half_closers(addr: SocketAddr, n: usize, bundles: &[GeneratedBundle]) -> HalfClosed {
    let per = bundles.len() / n.max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = bundles
            .chunks(per.max(1))
            .take(n)
            .map(|chunk| {
                s.spawn(move || {
                    let Ok(mut c) = TcpStream::connect(addr) else {
                        return HalfClosed::default();
                    };
                    c.set_read_timeout(Some(Duration::from_secs(5))).ok();
                    let all: Vec<u8> = chunk
                        .iter()
                        .flat_map(|b| b.request.iter().copied())
                        .collect();
                    if c.write_all(&all).is_err() || c.shutdown(Shutdown::Write).is_err() {
                        return HalfClosed::default();
                    }
                    let mut text = Vec::new();
                    let _ = c.read_to_end(&mut text);
                    let text = String::from_utf8_lossy(&text);
                    HalfClosed {
                        with_id: chunk
                            .iter()
                            .filter(|b| text.contains(b.bundle_id_str()))
                            .count(),
                        // The backlog refusal's own words: the in-flight cap's is -32097 too.
                        refused: text
                            .matches("cannot send this bundle within its max age")
                            .count(),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .fold(HalfClosed::default(), |a, b| HalfClosed {
                with_id: a.with_id + b.with_id,
                refused: a.refused + b.refused,
            })
    })
}

/// Clients that send `request`'s head and half its body, then shut their write side: how many
/// read a 400 saying the body was cut short, and then the close.
pub(super) fn cut_short(addr: SocketAddr, n: usize, request: &[u8]) -> usize {
    let Some(head_len) = request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
    else {
        return 0;
    };
    let cut = head_len + (request.len() - head_len) / 2;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(move || {
                    let Ok(mut c) = TcpStream::connect(addr) else {
                        return false;
                    };
                    c.set_read_timeout(Some(Duration::from_secs(5))).ok();
                    if c.write_all(&request[..cut]).is_err() || c.shutdown(Shutdown::Write).is_err()
                    {
                        return false;
                    }
                    let mut text = Vec::new();
                    // read_to_end: the answer, then the relay's close (a timeout fails it).
                    c.read_to_end(&mut text).is_ok()
                        && text.starts_with(b"HTTP/1.1 400")
                        && String::from_utf8_lossy(&text).contains("request body cut short")
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .filter(|ok| *ok)
            .count()
    })
}

/// What the flood of connections from one address saw.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Flooded {
    /// Connections the relay held open.
    pub open: usize,
    /// Connections refused with a 429 naming the per-address share.
    pub told_429: usize,
}

/// `n` connections from 127.3.0.1, held a second: how many the relay kept open, and how many
/// it refused with a 429 saying why.
pub(super) fn flood(addr: SocketAddr, n: usize) -> Flooded {
    let from = SocketAddr::from(([127, 3, 0, 1], 0));
    let conns: Vec<TcpStream> = (0..n)
        .filter_map(|_| {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
            s.bind(&from.into()).ok()?;
            s.connect(&addr.into()).ok()?;
            Some(s.into())
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    // The refused ones read their answer and end-of-stream; the ones held open time out
    // waiting.
    let mut seen = Flooded::default();
    for c in &conns {
        c.set_read_timeout(Some(Duration::from_millis(20))).ok();
        let mut b = [0u8; 512];
        match (&mut &*c).read(&mut b) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                seen.open += 1
            }
            Ok(k)
                if b[..k].starts_with(b"HTTP/1.1 429")
                    && String::from_utf8_lossy(&b[..k])
                        .contains("intake.connections_per_source_max") =>
            {
                seen.told_429 += 1
            }
            _ => {}
        }
    }
    seen
}
