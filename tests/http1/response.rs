//! The response writer: exact bytes for known answers, reason phrases, and "does not fit".

use bundle_relay::http1::{
    CONTINUE, ERROR_RESPONSE_LEN_MAX, HttpError, reason, write_error, write_response,
};

fn written(status: u16, keep_alive: bool, extra: &[(&str, &[u8])], body: &[u8]) -> String {
    let mut out = [0u8; 512];
    let n = write_response(
        &mut out,
        status,
        keep_alive,
        "application/json",
        extra,
        body,
    )
    .expect("fits");
    String::from_utf8(out[..n].to_vec()).unwrap()
}

#[test]
fn response_is_status_line_content_type_length_connection_extras_then_body() {
    assert_eq!(
        written(200, true, &[], br#"{"jsonrpc":"2.0","result":"ab","id":1}"#),
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 38\r\n\
         Connection: keep-alive\r\n\r\n{\"jsonrpc\":\"2.0\",\"result\":\"ab\",\"id\":1}"
    );
}

#[test]
fn extra_headers_follow_in_the_given_order() {
    let id = b"892b79ed49138bfb3aa5441f0df6e06ef34f9ee8f3976c15b323605bae0cf51d";
    assert_eq!(
        written(
            429,
            false,
            &[("Retry-After", b"1"), ("x-bundle-id", id)],
            b""
        ),
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\
         Connection: close\r\nRetry-After: 1\r\nx-bundle-id: \
         892b79ed49138bfb3aa5441f0df6e06ef34f9ee8f3976c15b323605bae0cf51d\r\n\r\n"
    );
}

#[test]
fn response_has_no_date_header() {
    assert!(
        !written(200, true, &[], b"ok")
            .to_ascii_lowercase()
            .contains("date:")
    );
}

#[test]
fn response_that_does_not_fit_is_none_at_every_shorter_length() {
    let mut out = [0u8; 256];
    let full = write_response(
        &mut out,
        503,
        true,
        "text/plain",
        &[("Retry-After", b"1")],
        b"busy",
    )
    .unwrap();
    for len in 0..full {
        let mut short = vec![0u8; len];
        assert_eq!(
            write_response(
                &mut short,
                503,
                true,
                "text/plain",
                &[("Retry-After", b"1")],
                b"busy"
            ),
            None,
            "{len}"
        );
    }
    let mut exact = vec![0u8; full];
    assert_eq!(
        write_response(
            &mut exact,
            503,
            true,
            "text/plain",
            &[("Retry-After", b"1")],
            b"busy"
        ),
        Some(full)
    );
    assert_eq!(exact[..], out[..full]);
}

#[test]
fn status_outside_three_digits_is_refused() {
    let mut out = [0u8; 256];
    assert_eq!(write_response(&mut out, 99, true, "a", &[], b""), None);
    assert_eq!(write_response(&mut out, 1000, true, "a", &[], b""), None);
}

#[test]
fn reason_phrases_for_every_status_the_relay_sends() {
    let table = [
        (100, "Continue"),
        (200, "OK"),
        (400, "Bad Request"),
        (401, "Unauthorized"),
        (403, "Forbidden"),
        (404, "Not Found"),
        (405, "Method Not Allowed"),
        (408, "Request Timeout"),
        (411, "Length Required"),
        (413, "Content Too Large"),
        (429, "Too Many Requests"),
        (431, "Request Header Fields Too Large"),
        (500, "Internal Server Error"),
        (501, "Not Implemented"),
        (503, "Service Unavailable"),
        (505, "HTTP Version Not Supported"),
        (299, ""),
    ];
    for (status, phrase) in table {
        assert_eq!(reason(status), phrase, "{status}");
    }
    assert_eq!(
        written(404, true, &[], b""),
        "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\
         Connection: keep-alive\r\n\r\n"
    );
}

#[test]
fn error_answer_is_text_naming_the_problem_and_closes_the_connection() {
    let mut out = [0u8; ERROR_RESPONSE_LEN_MAX];
    let n = write_error(&mut out, &HttpError::CHUNKED_NOT_SUPPORTED).unwrap();
    assert_eq!(
        std::str::from_utf8(&out[..n]).unwrap(),
        "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: 62\r\nConnection: close\r\n\r\n\
         chunked request bodies are not supported; send Content-Length\n"
    );
}

#[test]
fn continue_is_the_bare_interim_response() {
    assert_eq!(CONTINUE, b"HTTP/1.1 100 Continue\r\n\r\n");
}
