//! Framing and reading one HTTP/1.1 answer (sans-IO): bytes in, what the answer said out.

/// What one answer said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The JSON-RPC `"error":{"code":N` if present.
    pub rpc_error: Option<i32>,
    /// Whether `"result":"<s>"` equals the expected bundle id; `None` when there is no string
    /// result.
    pub result_matches: Option<bool>,
    /// The server said `Connection: close`: it reads nothing more on this connection.
    pub close: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Not an HTTP/1.1 response head.
    Malformed,
    /// No `Content-Length` (chunked bodies are not supported: nothing we test sends them).
    NoContentLength,
}

/// Headers a response may carry before we give up on it.
const HEADERS_MAX: usize = 32;

/// Frames one response at the start of `buf`: `Ok(None)` until it is complete, then the bytes
/// it spans and what it said, checking the result against `expected_id`.
pub fn parse(buf: &[u8], expected_id: &[u8]) -> Result<Option<(usize, Answer)>, FrameError> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut resp = httparse::Response::new(&mut headers);
    let head = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(FrameError::Malformed),
    };
    let status = resp.code.ok_or(FrameError::Malformed)?;
    let mut len = None;
    let mut close = false;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            close |= h
                .value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok());
            if len.is_none() {
                return Err(FrameError::Malformed);
            }
        }
    }
    let len = len.ok_or(FrameError::NoContentLength)?;
    if buf.len() < head + len {
        return Ok(None);
    }
    let body = &buf[head..head + len];
    Ok(Some((
        head + len,
        Answer {
            status,
            rpc_error: rpc_error_code(body),
            result_matches: string_result(body).map(|r| r == expected_id),
            close,
        },
    )))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rpc_error_code(body: &[u8]) -> Option<i32> {
    let at = find(body, b"\"error\":{\"code\":")? + 16;
    let rest = &body[at..];
    let end = rest
        .iter()
        .position(|c| !(c.is_ascii_digit() || *c == b'-'))
        .unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

fn string_result(body: &[u8]) -> Option<&[u8]> {
    let at = find(body, b"\"result\":\"")? + 10;
    let rest = &body[at..];
    let end = rest.iter().position(|&c| c == b'"')?;
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(status: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    #[test]
    fn connection_close_is_seen_among_the_tokens() {
        let r = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\n{}";
        let (_, a) = parse(r, b"abc").unwrap().unwrap();
        assert!(a.close);
        let (_, a) = parse(&resp("200 OK", "{}"), b"abc").unwrap().unwrap();
        assert!(!a.close);
    }

    #[test]
    fn a_matching_result_is_recognised() {
        let r = resp("200 OK", r#"{"jsonrpc":"2.0","result":"abc","id":1}"#);
        let (n, a) = parse(&r, b"abc").unwrap().unwrap();
        assert_eq!(n, r.len());
        assert_eq!(
            a,
            Answer {
                status: 200,
                rpc_error: None,
                result_matches: Some(true),
                close: false
            }
        );
        assert_eq!(
            parse(&r, b"abd").unwrap().unwrap().1.result_matches,
            Some(false)
        );
    }

    #[test]
    fn a_rate_limit_error_reports_status_and_code() {
        use bundle_relay::jito::code::RATE_LIMITED;
        let body = format!(
            r#"{{"jsonrpc":"2.0","error":{{"code":{RATE_LIMITED},"message":"Rate limit"}},"id":1}}"#
        );
        let r = resp("429 Too Many Requests", &body);
        let a = parse(&r, b"x").unwrap().unwrap().1;
        assert_eq!(
            (a.status, a.rpc_error, a.result_matches),
            (429, Some(RATE_LIMITED), None)
        );
    }

    #[test]
    fn an_incomplete_body_waits_for_more() {
        let r = resp("200 OK", r#"{"result":"abc"}"#);
        assert_eq!(parse(&r[..r.len() - 1], b"abc"), Ok(None));
        assert_eq!(parse(&r[..5], b"abc"), Ok(None));
    }

    #[test]
    fn a_chunked_or_garbage_answer_is_an_error() {
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(parse(r, b""), Err(FrameError::NoContentLength));
        assert_eq!(
            parse(b"\x00\x01garbage\r\n\r\n", b""),
            Err(FrameError::Malformed)
        );
    }
}
