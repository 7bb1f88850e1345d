//! The few pieces of gRPC-over-HTTP/2 the engine needs, written on `h2` directly.
//!
//! Why not tonic's server: the faults need control tonic hides (reset one stream, send GOAWAY at a
//! chosen moment, withhold flow-control credit, drop the TCP connection), and a hand-driven h2
//! server is also cheaper per call than tonic's tower stack (see the module docs of `engine`).

use bytes::{BufMut, Bytes, BytesMut};
use h2::server::SendResponse;
use http::{HeaderMap, HeaderValue, Response};

/// gRPC status codes used here (grpc/doc/statuscodes.md).
pub const OK: u32 = 0;
pub const INVALID_ARGUMENT: u32 = 3;
pub const PERMISSION_DENIED: u32 = 7;
pub const RESOURCE_EXHAUSTED: u32 = 8;
pub const UNIMPLEMENTED: u32 = 12;
pub const INTERNAL: u32 = 13;
pub const UNAUTHENTICATED: u32 = 16;

/// The length-prefixed message framing: flag byte (0: not compressed) and u32 BE length.
pub const PREFIX_LEN: usize = 5;

/// Splits one length-prefixed message out of a request body.
pub fn unframe(body: &[u8]) -> Result<&[u8], String> {
    if body.len() < PREFIX_LEN {
        return Err(format!(
            "gRPC body of {} bytes is shorter than the 5-byte prefix",
            body.len()
        ));
    }
    if body[0] != 0 {
        return Err(format!(
            "gRPC compressed flag {} is not supported (no grpc-encoding negotiated)",
            body[0]
        ));
    }
    let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
    if body.len() != PREFIX_LEN + len {
        return Err(format!(
            "gRPC prefix says {len} bytes but the body carries {}",
            body.len() - PREFIX_LEN
        ));
    }
    Ok(&body[PREFIX_LEN..])
}

/// Frames `msg` for a DATA frame.
pub fn frame(msg: &impl prost::Message) -> Bytes {
    let len = msg.encoded_len();
    let mut buf = BytesMut::with_capacity(PREFIX_LEN + len);
    buf.put_u8(0);
    buf.put_u32(len as u32);
    msg.encode(&mut buf).expect("buffer sized by encoded_len");
    buf.freeze()
}

/// Percent-encodes a `grpc-message` as the gRPC spec asks: every byte outside printable ASCII
/// (0x20..=0x7E), and `%` itself, becomes `%XX`.
pub fn percent_encode(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    for &b in msg.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn grpc_head() -> http::response::Builder {
    Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
}

/// Answers with a message and `grpc-status: 0` trailers.
pub fn send_ok(respond: &mut SendResponse<Bytes>, msg: &impl prost::Message) {
    let head = grpc_head().body(()).expect("static head");
    let Ok(mut stream) = respond.send_response(head, false) else {
        return; // the client reset the stream; nothing to answer
    };
    if stream.send_data(frame(msg), false).is_err() {
        return;
    }
    let mut trailers = HeaderMap::with_capacity(1);
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let _ = stream.send_trailers(trailers);
}

/// Answers with a status only (a trailers-only response: one HEADERS frame with END_STREAM).
pub fn send_status(respond: &mut SendResponse<Bytes>, code: u32, message: &str) {
    let mut head = grpc_head().header("grpc-status", code);
    if !message.is_empty() {
        head = head.header("grpc-message", percent_encode(message));
    }
    let head = head
        .body(())
        .expect("percent-encoded header values are valid");
    let _ = respond.send_response(head, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding_follows_the_grpc_spec() {
        let jito = bundle_relay::jito::rate_limit_message(5);
        assert_eq!(percent_encode(&jito), jito, "Jito's texts pass as they are");
        assert_eq!(percent_encode("50% off\n"), "50%25 off%0A");
        assert_eq!(percent_encode("é"), "%C3%A9");
    }

    #[test]
    fn unframe_checks_flag_and_length() {
        assert_eq!(unframe(&[0, 0, 0, 0, 2, 7, 8]).unwrap(), &[7, 8]);
        assert!(
            unframe(&[1, 0, 0, 0, 0])
                .unwrap_err()
                .contains("compressed")
        );
        assert!(
            unframe(&[0, 0, 0, 0, 3, 1])
                .unwrap_err()
                .contains("says 3 bytes")
        );
        assert!(unframe(&[0, 0]).unwrap_err().contains("shorter"));
    }
}
