//! One HTTP/1.1 GET of the `[tenants_from]` document, within its timeout: connect, send, read
//! to the end, all inside one deadline.
//!
//! What it is NOT: the request path's HTTP. This runs on the poller thread a few times a minute;
//! blocking std sockets with timeouts are the simplest thing that holds a deadline. The answer
//! is parsed with httparse; the body is `Content-Length` bytes, chunked, or everything up to
//! the close (`Connection: close` is asked for).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::config::TenantsFrom;

/// A document larger than this is not a tenant list (16,384 tenants at a generous 1 KiB each).
pub const BODY_BYTES_MAX: usize = 16 << 20;

/// The document `from` serves now, or why not (naming the URL).
pub fn get(from: &TenantsFrom) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_millis(from.timeout_ms);
    let why = |m: String| format!("GET {}: {m}", from.url);
    let addr = (from.host.as_str(), from.port)
        .to_socket_addrs()
        .map_err(|e| why(format!("resolving {}: {e}", from.host)))?
        .next()
        .ok_or_else(|| why(format!("{} has no address", from.host)))?;
    let left = |deadline: Instant| {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| why(format!("no answer within {} ms", from.timeout_ms)))
    };
    let mut s = TcpStream::connect_timeout(&addr, left(deadline)?)
        .map_err(|e| why(format!("connecting to {addr}: {e}")))?;
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
        // Done once a sized body is complete, without waiting for the close.
        if let Ok(Some(body)) = body_of(&raw) {
            return finish(body).map_err(why);
        }
    }
    match body_of(&raw) {
        Ok(Some(body)) => finish(body).map_err(why),
        Ok(None) => Err(why("the connection closed before the answer ended".into())),
        Err(m) => Err(why(m)),
    }
}

fn finish(body: Result<Vec<u8>, String>) -> Result<String, String> {
    String::from_utf8(body?).map_err(|_| "the body is not UTF-8".to_string())
}

/// The answer's body once `raw` holds all of it (`Ok(None)`: not yet, or not known until the
/// close); the inner error is an answer that is not 200 or a body that does not decode.
/// Read to the close, a body without length is everything after the head.
#[allow(clippy::type_complexity)]
fn body_of(raw: &[u8]) -> Result<Option<Result<Vec<u8>, String>>, String> {
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
        return Ok(Some(Err(format!("answered {code} {reason}"))));
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
        return Ok(dechunk(rest).map(Ok));
    }
    if let Some(len) = header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| format!("Content-Length {len:?} is not a number"))?;
        return Ok((rest.len() >= len).then(|| Ok(rest[..len].to_vec())));
    }
    Ok(None)
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
        if rest.len() < size + 2 || size > BODY_BYTES_MAX {
            return None;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sized_body_is_complete_at_its_length() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{}\r\n";
        assert_eq!(body_of(raw).unwrap().unwrap().unwrap(), b"{}\r\n");
        assert!(body_of(&raw[..raw.len() - 1]).unwrap().is_none());
    }

    #[test]
    fn a_chunked_body_is_complete_at_its_last_chunk() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\n3;x=1\r\nab\"\r\n0\r\n\r\n";
        assert_eq!(body_of(raw).unwrap().unwrap().unwrap(), b"{\"ab\"");
        assert!(body_of(&raw[..raw.len() - 7]).unwrap().is_none());
    }

    #[test]
    fn an_answer_other_than_200_names_its_status() {
        let raw = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            body_of(raw).unwrap().unwrap().unwrap_err(),
            "answered 503 Service Unavailable"
        );
        assert!(
            body_of(b"SSH-2.0-x\r\n\r\n")
                .unwrap_err()
                .contains("not an HTTP")
        );
    }
}
