//! The intake rules as decision tables: each test's name is the rule it holds the parser to.

use bundle_relay::http1::{
    BODY_BYTES_MAX_DEFAULT, ERROR_RESPONSE_LEN_MAX, Framed, HEAD_BYTES_MAX_DEFAULT, HEADERS_MAX,
    HttpError, Limits, Method, Needed, Request, frame, needed, parse, reason, write_error,
};

fn limits() -> Limits {
    Limits::default()
}

fn ok(buf: &[u8]) -> Request<'_> {
    match parse(buf, &limits()) {
        Ok(Some(r)) => r,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
    }
}

fn err(buf: &[u8]) -> HttpError {
    match parse(buf, &limits()) {
        Err(e) => e,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
    }
}

/// A POST with the given extra header lines and body.
fn post(headers: &str, body: &str) -> Vec<u8> {
    format!("POST /api/v1/bundles HTTP/1.1\r\nHost: relay\r\n{headers}\r\n{body}").into_bytes()
}

/// A GET whose head is exactly `len` bytes, padded with one header.
fn get_with_head_len(len: usize) -> Vec<u8> {
    let fixed = "GET / HTTP/1.1\r\nx-pad: \r\n\r\n".len();
    format!(
        "GET / HTTP/1.1\r\nx-pad: {}\r\n\r\n",
        "a".repeat(len - fixed)
    )
    .into_bytes()
}

#[test]
fn defaults_are_the_documented_limits() {
    let l = Limits::default();
    assert_eq!(l.head_bytes_max, 8 * 1024);
    assert_eq!(l.body_bytes_max, 64 * 1024);
    assert_eq!(l.head_bytes_max, HEAD_BYTES_MAX_DEFAULT);
    assert_eq!(l.body_bytes_max, BODY_BYTES_MAX_DEFAULT);
    assert_eq!(l.request_bytes_max(), 72 * 1024);
}

#[test]
fn head_of_exactly_head_bytes_max_is_accepted() {
    let buf = get_with_head_len(HEAD_BYTES_MAX_DEFAULT);
    assert_eq!(buf.len(), HEAD_BYTES_MAX_DEFAULT);
    assert_eq!(ok(&buf).len, HEAD_BYTES_MAX_DEFAULT);
}

#[test]
fn head_larger_than_head_bytes_max_is_431() {
    let buf = get_with_head_len(HEAD_BYTES_MAX_DEFAULT + 1);
    assert_eq!(err(&buf), HttpError::HEAD_TOO_LARGE);
    assert_eq!(err(&buf).status, 431);
}

#[test]
fn head_still_open_after_head_bytes_max_bytes_is_431_without_waiting_for_its_end() {
    let buf = get_with_head_len(HEAD_BYTES_MAX_DEFAULT + 100);
    let limit = HEAD_BYTES_MAX_DEFAULT;
    assert_eq!(parse(&buf[..limit - 1], &limits()), Ok(None));
    assert_eq!(
        needed(&buf[..limit - 1], &limits()),
        Ok(Needed::Head {
            len_max: limits().request_bytes_max()
        })
    );
    assert_eq!(
        parse(&buf[..limit], &limits()),
        Err(HttpError::HEAD_TOO_LARGE)
    );
}

#[test]
fn head_limit_is_configurable() {
    let small = Limits {
        head_bytes_max: 64,
        body_bytes_max: 16,
    };
    assert!(matches!(parse(&get_with_head_len(64), &small), Ok(Some(_))));
    assert_eq!(
        parse(&get_with_head_len(65), &small),
        Err(HttpError::HEAD_TOO_LARGE)
    );
}

#[test]
fn sixty_four_header_fields_are_accepted_and_sixty_five_are_431() {
    let head = |n: usize| {
        let mut s = String::from("GET / HTTP/1.1\r\n");
        for i in 0..n {
            s += &format!("x-{i}: v\r\n");
        }
        s + "\r\n"
    };
    assert_eq!(HEADERS_MAX, 64);
    assert!(ok(head(64).as_bytes()).header("x-63").is_some());
    assert_eq!(err(head(65).as_bytes()), HttpError::TOO_MANY_HEADERS);
    assert_eq!(err(head(65).as_bytes()).status, 431);
}

#[test]
fn content_length_over_body_bytes_max_is_413_from_the_head_alone() {
    let over = BODY_BYTES_MAX_DEFAULT + 1;
    // Only the head has arrived: the refusal does not wait for the body.
    let buf = post(&format!("Content-Length: {over}\r\n"), "");
    assert_eq!(err(&buf), HttpError::BODY_TOO_LARGE);
    assert_eq!(err(&buf).status, 413);
}

#[test]
fn content_length_of_exactly_body_bytes_max_is_accepted() {
    let body = "x".repeat(BODY_BYTES_MAX_DEFAULT);
    let buf = post(&format!("Content-Length: {}\r\n", body.len()), &body);
    assert_eq!(ok(&buf).body.len(), BODY_BYTES_MAX_DEFAULT);
}

#[test]
fn content_length_beyond_u64_is_413_not_an_overflow() {
    let buf = post("Content-Length: 99999999999999999999999999999999\r\n", "");
    assert_eq!(err(&buf), HttpError::BODY_TOO_LARGE);
}

#[test]
fn post_without_content_length_is_411() {
    assert_eq!(err(&post("", "")), HttpError::LENGTH_REQUIRED);
    assert_eq!(err(&post("", "")).status, 411);
}

#[test]
fn get_without_content_length_has_an_empty_body() {
    let buf = b"GET /ping HTTP/1.1\r\nHost: relay\r\n\r\nleftover";
    let r = ok(buf);
    assert_eq!(r.body, b"");
    assert_eq!(r.len, buf.len() - "leftover".len());
}

#[test]
fn get_with_content_length_carries_that_body() {
    let r = ok(b"GET / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!((r.method, r.body), (Method::Get, &b"abc"[..]));
}

#[test]
fn chunked_transfer_encoding_is_501_asking_for_content_length() {
    for te in ["chunked", "Chunked", "gzip, chunked", " chunked "] {
        let e = err(&post(&format!("Transfer-Encoding: {te}\r\n"), ""));
        assert_eq!(e, HttpError::CHUNKED_NOT_SUPPORTED, "{te}");
        assert_eq!(e.status, 501);
        assert_eq!(
            e.what,
            "chunked request bodies are not supported; send Content-Length"
        );
    }
}

#[test]
fn other_transfer_encoding_is_501() {
    let e = err(&post("Transfer-Encoding: gzip\r\n", ""));
    assert_eq!(e, HttpError::TRANSFER_CODING_NOT_SUPPORTED);
    assert_eq!(e.status, 501);
}

#[test]
fn content_length_with_transfer_encoding_is_400() {
    for headers in [
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        "Transfer-Encoding: identity\r\nContent-Length: 5\r\n",
    ] {
        let e = err(&post(headers, "hello"));
        assert_eq!(
            e,
            HttpError::CONTENT_LENGTH_WITH_TRANSFER_ENCODING,
            "{headers}"
        );
        assert_eq!(e.status, 400);
    }
}

#[test]
fn duplicate_content_length_is_400_even_when_the_values_agree() {
    for headers in [
        "Content-Length: 5\r\nContent-Length: 5\r\n",
        "Content-Length: 5\r\ncontent-length: 6\r\n",
    ] {
        let e = err(&post(headers, "hello!"));
        assert_eq!(e, HttpError::CONTENT_LENGTH_DUPLICATE, "{headers}");
        assert_eq!(e.status, 400);
    }
}

#[test]
fn content_length_that_is_not_a_decimal_number_is_400() {
    for value in ["abc", "", "-1", "+1", "1.0", "0x10", "1 2", "5, 5", "5;"] {
        let e = err(&post(&format!("Content-Length: {value}\r\n"), "hello"));
        assert_eq!(e, HttpError::CONTENT_LENGTH_NOT_A_NUMBER, "{value:?}");
        assert_eq!(e.status, 400);
    }
}

#[test]
fn content_length_allows_surrounding_whitespace_and_leading_zeros() {
    assert_eq!(
        ok(&post("Content-Length:  005 \r\n", "hello")).body,
        b"hello"
    );
    assert_eq!(ok(&post("Content-Length:\t0\r\n", "")).body, b"");
}

#[test]
fn http2_prior_knowledge_preface_is_505_naming_http2() {
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let e = err(preface);
    assert_eq!(e, HttpError::HTTP2_NOT_SUPPORTED);
    assert_eq!(e.status, 505);
    assert!(e.what.contains("HTTP/2"));
    // Decided as soon as the version token shows it.
    assert_eq!(err(b"PRI * HTTP/2"), HttpError::HTTP2_NOT_SUPPORTED);
    assert_eq!(
        err(b"GET / HTTP/2.0\r\n\r\n"),
        HttpError::HTTP2_NOT_SUPPORTED
    );
}

#[test]
fn unknown_http_version_is_505_and_a_garbage_version_is_400() {
    let table: &[(&[u8], HttpError)] = &[
        (b"GET / HTTP/1.2\r\n\r\n", HttpError::VERSION_NOT_SUPPORTED),
        (b"GET / HTTP/3.0\r\n\r\n", HttpError::VERSION_NOT_SUPPORTED),
        (b"GET / HTTP/0.9\r\n\r\n", HttpError::VERSION_NOT_SUPPORTED),
        (
            b"\r\nGET / HTTP/3\r\n\r\n",
            HttpError::VERSION_NOT_SUPPORTED,
        ),
        (b"GET / HTXP/1.1\r\n\r\n", HttpError::MALFORMED_VERSION),
        (b"GET / http/1.1\r\n\r\n", HttpError::MALFORMED_VERSION),
    ];
    for (buf, want) in table {
        assert_eq!(err(buf), *want, "{:?}", String::from_utf8_lossy(buf));
    }
    assert_eq!(HttpError::VERSION_NOT_SUPPORTED.status, 505);
    assert_eq!(HttpError::MALFORMED_VERSION.status, 400);
}

#[test]
fn malformed_head_is_400_naming_the_httparse_error() {
    let table: &[(&[u8], HttpError, &str)] = &[
        (
            b"GET / HTTP/1.1\r\nbad name: v\r\n\r\n",
            HttpError::MALFORMED_HEADER_NAME,
            "HeaderName",
        ),
        (
            b"GET / HTTP/1.1\r\nx: a\x01b\r\n\r\n",
            HttpError::MALFORMED_HEADER_VALUE,
            "HeaderValue",
        ),
        (
            b"GET / HTTP/1.1\rx\n\r\n",
            HttpError::MALFORMED_NEW_LINE,
            "NewLine",
        ),
        (
            b"G(T / HTTP/1.1\r\n\r\n",
            HttpError::MALFORMED_TOKEN,
            "Token",
        ),
        (
            b"GET / HTXP/1.1\r\n\r\n",
            HttpError::MALFORMED_VERSION,
            "Version",
        ),
    ];
    for (buf, want, name) in table {
        let e = err(buf);
        assert_eq!(e, *want, "{:?}", String::from_utf8_lossy(buf));
        assert_eq!(e.status, 400);
        assert!(e.what.contains(&format!("httparse: {name}")), "{}", e.what);
    }
}

#[test]
fn keep_alive_is_http11_unless_close_and_http10_only_with_keep_alive() {
    let table = [
        ("1.1", "", true),
        ("1.1", "Connection: close\r\n", false),
        ("1.1", "Connection: Close\r\n", false),
        ("1.1", "Connection: keep-alive\r\n", true),
        ("1.1", "Connection: keep-alive, close\r\n", false),
        (
            "1.1",
            "Connection: keep-alive\r\nConnection: close\r\n",
            false,
        ),
        ("1.1", "Connection: upgrade\r\n", true),
        ("1.0", "", false),
        ("1.0", "Connection: keep-alive\r\n", true),
        ("1.0", "Connection: Keep-Alive\r\n", true),
        ("1.0", "Connection: close\r\n", false),
    ];
    for (version, headers, want) in table {
        let buf = format!("GET / HTTP/{version}\r\n{headers}\r\n");
        let r = ok(buf.as_bytes());
        assert_eq!(r.keep_alive, want, "{buf:?}");
        assert_eq!(r.minor_version, if version == "1.1" { 1 } else { 0 });
    }
}

#[test]
fn expect_100_continue_without_its_body_asks_for_continue() {
    let buf = post(
        "Expect: 100-continue\r\nContent-Length: 5\r\n",
        "", // the client waits for 100 Continue before it sends the body
    );
    let head_len = buf.len();
    assert_eq!(parse(&buf, &limits()), Ok(None));
    assert_eq!(
        needed(&buf, &limits()),
        Ok(Needed::Body {
            len: head_len + 5,
            expect_continue: true
        })
    );
    assert_eq!(
        frame(&buf, &limits()),
        Ok(Framed::NeedBody {
            len: head_len + 5,
            expect_continue: true
        })
    );
    let mut full = buf.clone();
    full.extend_from_slice(b"hello");
    let r = ok(&full);
    assert!(r.expect_continue);
    assert_eq!(r.body, b"hello");
}

#[test]
fn body_without_expect_is_awaited_without_continue() {
    let buf = post("Content-Length: 5\r\n", "he");
    assert_eq!(
        needed(&buf, &limits()),
        Ok(Needed::Body {
            len: buf.len() + 3,
            expect_continue: false
        })
    );
}

#[test]
fn expect_100_continue_from_http10_is_ignored() {
    let buf = b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(
        needed(buf, &limits()),
        Ok(Needed::Body {
            len: buf.len() + 5,
            expect_continue: false
        })
    );
}

#[test]
fn expect_100_continue_with_too_large_a_body_is_413_before_any_continue() {
    let buf = post(
        &format!(
            "Expect: 100-continue\r\nContent-Length: {}\r\n",
            BODY_BYTES_MAX_DEFAULT + 1
        ),
        "",
    );
    assert_eq!(needed(&buf, &limits()), Err(HttpError::BODY_TOO_LARGE));
}

#[test]
fn other_expectations_are_ignored() {
    let buf = post("Expect: something\r\nContent-Length: 0\r\n", "");
    let r = ok(&buf);
    assert!(!r.expect_continue);
}

#[test]
fn path_excludes_the_query_string_which_is_kept_apart() {
    let table: &[(&str, &str, &str)] = &[
        ("/api/v1/bundles", "/api/v1/bundles", ""),
        ("/api/v1/bundles?uuid=abc", "/api/v1/bundles", "uuid=abc"),
        (
            "/api/v1/transactions?bundleOnly=true&uuid=x",
            "/api/v1/transactions",
            "bundleOnly=true&uuid=x",
        ),
        ("/?", "/", ""),
        ("/a?b?c", "/a", "b?c"),
        ("*", "*", ""),
    ];
    for (target, path, query) in table {
        let buf = format!("GET {target} HTTP/1.1\r\n\r\n");
        let r = ok(buf.as_bytes());
        assert_eq!(
            (r.path, r.query),
            (path.as_bytes(), query.as_bytes()),
            "{target}"
        );
    }
}

#[test]
fn absolute_form_target_is_reduced_to_its_path() {
    let table: &[(&str, &str, &str)] = &[
        ("http://relay:8080/api/v1/bundles", "/api/v1/bundles", ""),
        (
            "HTTPS://relay/api/v1/bundles?uuid=1",
            "/api/v1/bundles",
            "uuid=1",
        ),
        ("http://relay", "/", ""),
        ("http://relay?uuid=1", "/", "uuid=1"),
    ];
    for (target, path, query) in table {
        let buf = format!("GET {target} HTTP/1.1\r\n\r\n");
        let r = ok(buf.as_bytes());
        assert_eq!(
            (r.path, r.query),
            (path.as_bytes(), query.as_bytes()),
            "{target}"
        );
    }
}

#[test]
fn only_get_and_post_are_named_methods_and_they_are_case_sensitive() {
    let table = [
        ("GET", Method::Get),
        ("POST", Method::Post),
        ("PUT", Method::Other),
        ("OPTIONS", Method::Other),
        ("get", Method::Other),
        ("Post", Method::Other),
    ];
    for (name, want) in table {
        let buf = format!("{name} / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(ok(buf.as_bytes()).method, want, "{name}");
    }
}

#[test]
fn pipelined_requests_are_returned_one_at_a_time_with_their_length() {
    let first = post("Content-Length: 5\r\n", "hello");
    let second = b"GET /ping HTTP/1.1\r\n\r\n".to_vec();
    let third = post("Content-Length: 2\r\nConnection: close\r\n", "hi");
    let stream = [first.clone(), second.clone(), third.clone()].concat();
    let mut at = 0;
    let mut seen = Vec::new();
    while at < stream.len() {
        let r = ok(&stream[at..]);
        seen.push((
            r.method,
            r.path.to_vec(),
            r.body.to_vec(),
            r.keep_alive,
            r.len,
        ));
        at += r.len;
    }
    assert_eq!(
        seen,
        vec![
            (
                Method::Post,
                b"/api/v1/bundles".to_vec(),
                b"hello".to_vec(),
                true,
                first.len()
            ),
            (Method::Get, b"/ping".to_vec(), vec![], true, second.len()),
            (
                Method::Post,
                b"/api/v1/bundles".to_vec(),
                b"hi".to_vec(),
                false,
                third.len()
            ),
        ]
    );
}

#[test]
fn a_bad_request_behind_a_good_one_does_not_spoil_the_good_one() {
    let stream = [
        &b"GET /ping HTTP/1.1\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
    ]
    .concat();
    let r = ok(&stream);
    assert_eq!(r.path, b"/ping");
    assert_eq!(err(&stream[r.len..]), HttpError::CHUNKED_NOT_SUPPORTED);
}

#[test]
fn empty_lines_before_the_request_line_are_skipped_and_counted() {
    let buf = b"\r\n\r\nGET /ping HTTP/1.1\r\n\r\n";
    let r = ok(buf);
    assert_eq!(r.path, b"/ping");
    assert_eq!(r.len, buf.len());
}

#[test]
fn bare_line_feeds_end_lines_too() {
    let r = ok(b"POST /x HTTP/1.1\nContent-Length: 2\nX-Jito-Auth: u\n\nhi");
    assert_eq!(r.body, b"hi");
    assert_eq!(r.header("x-jito-auth"), Some(&b"u"[..]));
}

#[test]
fn header_lookup_is_case_insensitive_trims_whitespace_and_takes_the_first() {
    let buf = post(
        "x-jito-auth:  0b1f-uuid \r\nX-Jito-Auth: second\r\nContent-Type: application/json\r\nContent-Length: 2\r\n",
        "{}",
    );
    let r = ok(&buf);
    assert_eq!(r.header("X-JITO-AUTH"), Some(&b"0b1f-uuid"[..]));
    assert_eq!(r.header("content-type"), Some(&b"application/json"[..]));
    assert_eq!(r.header("host"), Some(&b"relay"[..]));
    assert_eq!(r.header("accept"), None);
    // The body is not searched.
    let buf = post("Content-Length: 10\r\n", "\r\nx-a: b\r\n");
    let r = ok(&buf);
    assert_eq!(r.body.len(), 10);
    assert_eq!(r.header("x-a"), None);
}

#[test]
fn the_last_of_several_fields_is_the_nearest_hops_and_the_first_is_the_first() {
    let r = ok(
        b"POST / HTTP/1.1\r\nX-Forwarded-For: 198.51.100.1\r\nHost: relay\r\n\
x-forwarded-for:  10.0.0.1, 203.0.113.9 \r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(r.header("x-forwarded-for"), Some(&b"198.51.100.1"[..]));
    assert_eq!(
        r.last_header("X-Forwarded-For"),
        Some(&b"10.0.0.1, 203.0.113.9"[..])
    );
    assert_eq!(r.last_header("host"), Some(&b"relay"[..]));
    assert_eq!(r.last_header("x-real-ip"), None);
}

#[test]
fn an_empty_buffer_needs_a_head() {
    assert_eq!(parse(b"", &limits()), Ok(None));
    assert_eq!(
        needed(b"", &limits()),
        Ok(Needed::Head {
            len_max: limits().request_bytes_max()
        })
    );
}

#[test]
fn every_error_has_a_reason_phrase_and_an_answer_that_fits_error_response_len_max() {
    for e in HttpError::ALL {
        assert!(!reason(e.status).is_empty(), "{e:?}");
        let mut out = [0u8; ERROR_RESPONSE_LEN_MAX];
        assert!(write_error(&mut out, &e).is_some(), "{e:?}");
        assert!(!e.what.is_empty());
    }
}
