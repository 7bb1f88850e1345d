//! The answers a connection refused at accept is sent before its close: the intake's
//! connection table is full, or the client's address holds its share of it. They are fixed
//! bytes, built at compile time: the refusal reads nothing from the client and owns no slot,
//! so its answer cannot live in a connection's buffers, and a `static` outlives the send.
//!
//! Both say which setting refused it and `Retry-After: 1`, with `Connection: close`. A client
//! usually reads them: the answer and the close are sent as soon as the connection is
//! accepted, mostly before its request arrives, and Linux hands a reader the bytes that came
//! before a reset.

/// `HTTP/1.1 <status>` with the relay's error headers and `$body`; `$len` is the body's
/// length, checked against it by the tests below.
macro_rules! refusal {
    ($status:literal, $len:literal, $body:literal) => {
        concat!(
            "HTTP/1.1 ",
            $status,
            "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ",
            $len,
            "\r\nConnection: close\r\nRetry-After: 1\r\n\r\n",
            $body
        )
        .as_bytes()
    };
}

/// The thread's connection table (`intake.connections_max`) is full: anyone's connection is
/// refused until one closes.
pub const TABLE_FULL: &[u8] = refusal!(
    "503 Service Unavailable",
    "145",
    "connection refused: the relay thread's connection table is full (intake.connections_max): come back in a moment or send on a connection you have\n"
);

/// The client's address holds `intake.connections_per_source_max` of the thread's table.
pub const SHARE_TAKEN: &[u8] = refusal!(
    "429 Too Many Requests",
    "144",
    "connection refused: this address holds its share of the relay thread's connections (intake.connections_per_source_max): send on the ones it has\n"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::write_response;

    /// Each answer is byte for byte what the relay's own writer makes of its status, headers
    /// and body: its Content-Length is its body's.
    fn same_as_written(answer: &[u8], status: u16) {
        let text = std::str::from_utf8(answer).unwrap();
        let (_, body) = text.split_once("\r\n\r\n").unwrap();
        let mut out = [0u8; 512];
        let n = write_response(
            &mut out,
            status,
            false,
            "text/plain; charset=utf-8",
            &[("Retry-After", b"1")],
            body.as_bytes(),
        )
        .unwrap();
        assert_eq!(std::str::from_utf8(&out[..n]).unwrap(), text);
    }

    #[test]
    fn a_full_table_is_answered_503_as_the_writer_would() {
        same_as_written(TABLE_FULL, 503);
    }

    #[test]
    fn an_address_at_its_share_is_answered_429_as_the_writer_would() {
        same_as_written(SHARE_TAKEN, 429);
    }
}
