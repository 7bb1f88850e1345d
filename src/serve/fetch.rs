//! One HTTP/1.1 GET of the `[tenants_from]` document, within its timeout: connect, send, read
//! to the end, all inside one deadline.
//!
//! What it is NOT: the request path's HTTP. This runs on the poller thread a few times a minute;
//! blocking std sockets with timeouts are the simplest thing that holds a deadline. The answer
//! is parsed with httparse; the body is `Content-Length` bytes, chunked, or everything up to
//! the close (`Connection: close` is asked for).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::config::TenantsFrom;

/// A document larger than this is not a tenant list (16,384 tenants at a generous 1 KiB each).
pub const BODY_BYTES_MAX: usize = 16 << 20;

/// The document `from` serves now, or why not (naming the URL).
pub fn get(from: &TenantsFrom) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_millis(from.timeout_ms);
    let why = |m: String| format!("GET {}: {m}", from.url);
    let addrs: Vec<_> = (from.host.as_str(), from.port)
        .to_socket_addrs()
        .map_err(|e| why(format!("resolving {}: {e}", from.host)))?
        .collect();
    if addrs.is_empty() {
        return Err(why(format!("{} has no address", from.host)));
    }
    let left = |deadline: Instant| {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| why(format!("no answer within {} ms", from.timeout_ms)))
    };
    let mut s = connect_first(&addrs, deadline).map_err(why)?;
    let host = if from.host.contains(':') {
        format!("[{}]:{}", from.host, from.port)
    } else {
        format!("{}:{}", from.host, from.port)
    };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\nUser-Agent: \
         bundle-relay/{}\r\nConnection: close\r\n\r\n",
        from.path,
        env!("CARGO_PKG_VERSION")
    );
    s.set_write_timeout(Some(left(deadline)?))
        .and_then(|()| s.write_all(request.as_bytes()))
        .map_err(|e| why(format!("sending: {e}")))?;
    let mut raw = Vec::with_capacity(64 << 10);
    let mut chunk = [0u8; 64 << 10];
    loop {
        s.set_read_timeout(Some(left(deadline)?))
            .map_err(|e| why(e.to_string()))?;
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(why(format!("no answer within {} ms", from.timeout_ms)));
            }
            Err(e) => return Err(why(format!("reading: {e}"))),
        }
        if raw.len() > BODY_BYTES_MAX {
            return Err(why(format!("answer over {BODY_BYTES_MAX} bytes")));
        }
        // Done once a sized body is complete (or the answer is wrong), without waiting for
        // the close.
        if let Some(body) = body_of(&raw, false).map_err(why)? {
            return text(body).map_err(why);
        }
    }
    match body_of(&raw, true).map_err(why)? {
        Some(body) => text(body).map_err(why),
        None => Err(why("the connection closed before the answer ended".into())),
    }
}

/// A connection to the first of `addrs` that takes one before `deadline`, in the resolver's
/// order (a name that gives `::1` before `127.0.0.1` reaches an endpoint listening on either);
/// else why each did not.
fn connect_first(addrs: &[SocketAddr], deadline: Instant) -> Result<TcpStream, String> {
    let mut why = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let Some(left) = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        else {
            why.push(format!("{addr}: no time left"));
            break;
        };
        // An even share of what is left: an address that drops packets (a firewall, a dead
        // route) does not take the whole deadline from the ones after it.
        let share = left / (addrs.len() - i) as u32;
        match TcpStream::connect_timeout(addr, share) {
            Ok(s) => return Ok(s),
            Err(e) => why.push(format!("{addr}: {e}")),
        }
    }
    Err(format!("connecting to {}", why.join("; ")))
}

fn text(body: Vec<u8>) -> Result<String, String> {
    String::from_utf8(body).map_err(|_| "the body is not UTF-8".to_string())
}

/// The answer's body once `raw` holds all of it (`None`: not yet); an error is an answer that
/// is not HTTP or not 200. A body without length or chunks ends at the close: everything
/// after the head once `closed`.
fn body_of(raw: &[u8], closed: bool) -> Result<Option<Vec<u8>>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut answer = httparse::Response::new(&mut headers);
    let head = match answer.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("not an HTTP answer: {e}")),
    };
    let code = answer.code.unwrap_or(0);
    if code != 200 {
        let reason = answer.reason.unwrap_or("");
        return Err(format!("answered {code} {reason}"));
    }
    let header = |name: &str| {
        answer
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
    };
    let rest = &raw[head..];
    if header("transfer-encoding").is_some_and(|v| v.ends_with("chunked")) {
        return Ok(dechunk(rest));
    }
    if let Some(len) = header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| format!("Content-Length {len:?} is not a number"))?;
        return Ok((rest.len() >= len).then(|| rest[..len].to_vec()));
    }
    Ok(closed.then(|| rest.to_vec()))
}

/// A chunked body once its last chunk arrived (`None`: not yet, or malformed; a malformed one
/// never completes and ends at the close or the deadline).
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&rest[..eol]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Some(body);
        }
        // The cap first: a size near usize::MAX would overflow the sum.
        if size > BODY_BYTES_MAX || rest.len() < size + 2 {
            return None;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Fuzz body (`fuzz/fuzz_targets/tenants_answer.rs`, and a seeded proptest in
/// `tests/run_tenants_from.rs`): an endpoint's answer, read as the poller reads it (a prefix,
/// then all of it, then at the close), never panics; an answer complete at a prefix is the
/// same answer with more bytes behind it; and a body that is text goes through the tenants
/// document's checks without panicking.
pub fn fuzz_answer(data: &[u8]) {
    let Some((&cut, raw)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cut).min(raw.len());
    let early = body_of(&raw[..cut], false);
    let whole = body_of(raw, false);
    if let Ok(Some(body)) = &early {
        assert_eq!(whole.as_ref().ok(), Some(&Some(body.clone())), "{raw:?}");
    }
    if let Ok(Some(body)) = body_of(raw, true)
        && let Ok(doc) = text(body)
    {
        let cfg = crate::config::Config::parse(
            "[intake]\nrotating = \"127.0.0.1:0\"\n[[region]]\nname = \"r\"\nhost = \"127.0.0.1\"\n\
             port = 9\ntls = false\n[egress]\naddresses = [\"127.0.0.1\"]\n[tenants_from]\n\
             url = \"http://127.0.0.1:9/t\"\n",
            "fuzz",
            crate::config::Resolve::Now,
        )
        .expect("the fuzz config loads");
        let _ = cfg.with_tenants_json(&doc, "fuzz");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sized_body_is_complete_at_its_length() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{}\r\n";
        assert_eq!(body_of(raw, false).unwrap().unwrap(), b"{}\r\n");
        assert!(body_of(&raw[..raw.len() - 1], false).unwrap().is_none());
    }

    #[test]
    fn a_chunked_body_is_complete_at_its_last_chunk() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\n3;x=1\r\nab\"\r\n0\r\n\r\n";
        assert_eq!(body_of(raw, false).unwrap().unwrap(), b"{\"ab\"");
        assert!(body_of(&raw[..raw.len() - 7], false).unwrap().is_none());
    }

    #[test]
    fn an_answer_other_than_200_names_its_status() {
        let raw = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            body_of(raw, false).unwrap_err(),
            "answered 503 Service Unavailable"
        );
        assert!(
            body_of(b"SSH-2.0-x\r\n\r\n", false)
                .unwrap_err()
                .contains("not an HTTP")
        );
    }

    #[test]
    fn an_endpoint_whose_name_gives_several_addresses_is_reached_at_the_first_that_answers() {
        let live = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let live_addr = live.local_addr().unwrap();
        // A port nothing listens on: bound and dropped.
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let s = connect_first(&[dead, live_addr], deadline).expect("the second answers");
        assert_eq!(s.peer_addr().unwrap(), live_addr);
        // First an address that drops every SYN (a listener whose accept queue is full): the
        // live one still gets its share of a 1 s deadline.
        let full =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        full.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        full.listen(0).unwrap();
        let dropping = full.local_addr().unwrap().as_socket().unwrap();
        let fillers: Vec<_> = (0..2)
            .map(|_| {
                let f = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .unwrap();
                f.set_nonblocking(true).unwrap();
                let _ = f.connect(&dropping.into());
                f
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        let s = connect_first(
            &[dropping, live_addr],
            Instant::now() + Duration::from_secs(1),
        )
        .expect("the live one answers within its share");
        assert_eq!(s.peer_addr().unwrap(), live_addr);
        drop(fillers);
        drop(live);
        let e = connect_first(&[dead, live_addr], deadline).unwrap_err();
        assert!(
            e.starts_with(&format!("connecting to {dead}: "))
                && e.contains(&format!("; {live_addr}: ")),
            "{e}"
        );
    }

    #[test]
    fn a_chunk_size_past_any_body_never_completes_and_never_panics() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nab\r\n0\r\n\r\n";
        assert!(body_of(raw, false).unwrap().is_none());
    }

    #[test]
    fn a_body_without_length_ends_at_the_close() {
        let raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"tenant\": []}";
        assert!(body_of(raw, false).unwrap().is_none());
        assert_eq!(body_of(raw, true).unwrap().unwrap(), b"{\"tenant\": []}");
    }
}
