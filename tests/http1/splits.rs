//! However the bytes arrive, the same requests come out: every split point of real clients'
//! requests, and seeded random splits of random pipelined streams checked against the model
//! they were generated from.

use bundle_relay::http1::{Limits, Method, Needed, needed, parse};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// What a test expects of one request (owned, so streams can be compared).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    method: Method,
    path: Vec<u8>,
    query: Vec<u8>,
    body: Vec<u8>,
    keep_alive: bool,
    expect_continue: bool,
    len: usize,
}

/// A receiving connection: bytes arrive in chunks, requests are taken off the front.
fn receive(chunks: &[&[u8]], limits: &Limits) -> Vec<Seen> {
    let mut buf = Vec::new();
    let mut seen = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match parse(&buf, limits) {
                Ok(Some(r)) => {
                    assert!(r.len <= buf.len());
                    seen.push(Seen {
                        method: r.method,
                        path: r.path.to_vec(),
                        query: r.query.to_vec(),
                        body: r.body.to_vec(),
                        keep_alive: r.keep_alive,
                        expect_continue: r.expect_continue,
                        len: r.len,
                    });
                    let n = r.len;
                    buf.drain(..n);
                }
                Ok(None) => {
                    match needed(&buf, limits) {
                        Ok(Needed::Head { len_max }) => {
                            assert_eq!(len_max, limits.request_bytes_max())
                        }
                        Ok(Needed::Body { len, .. }) => assert!(len > buf.len()),
                        other => panic!("parse said None, needed said {other:?}"),
                    }
                    break;
                }
                Err(e) => panic!("{e} at {:?}", String::from_utf8_lossy(&buf)),
            }
        }
    }
    assert!(
        buf.is_empty(),
        "left over: {:?}",
        String::from_utf8_lossy(&buf)
    );
    seen
}

const SEND_BUNDLE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["AVXo5X7UNzpuOmYzkZ+fqHDGiRLTSMlWlUCcZKzEV5CIKlrdvZa3/2GrJJfPrXgZqJbYDaGiOnP99tI/sRJfiwwBAAEDRQ/n5E5CLbMbHanUG3+iVvBAWZu0WFM6NoB5xfybQ7kNwwgfIhv6odn2qTUu/gOisDtaeCW1qlwW/gx3ccr/4wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAvsInicc+E3IZzLqeA+iM5cn9kSaeFzOuClz1Z2kZQy0BAgIAAQwCAAAAAOh2SBcAAAA="],{"encoding":"base64"}]}"#;

/// Requests as real clients write them (header order and fields as sent by each).
fn real_requests() -> Vec<(Vec<u8>, Seen)> {
    let n = SEND_BUNDLE.len();
    let curl = format!(
        "POST /api/v1/bundles HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/8.5.0\r\n\
         Accept: */*\r\nContent-Type: application/json\r\nContent-Length: {n}\r\n\r\n{SEND_BUNDLE}"
    );
    let python = format!(
        "POST /api/v1/bundles?uuid=0b1f HTTP/1.1\r\nHost: mainnet.block-engine.jito.wtf\r\n\
         User-Agent: python-requests/2.31.0\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\n\
         Connection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: {n}\r\n\r\n\
         {SEND_BUNDLE}"
    );
    let axios = format!(
        "POST /api/v1/bundles HTTP/1.1\r\nAccept: application/json, text/plain, */*\r\n\
         Content-Type: application/json\r\nUser-Agent: axios/1.6.2\r\nContent-Length: {n}\r\n\
         Accept-Encoding: gzip, compress, deflate, br\r\nHost: relay\r\nConnection: close\r\n\r\n\
         {SEND_BUNDLE}"
    );
    let curl_expect = format!(
        "POST /api/v1/transactions?bundleOnly=true HTTP/1.1\r\nHost: relay\r\n\
         User-Agent: curl/7.68.0\r\nContent-Type: application/json\r\nContent-Length: {n}\r\n\
         Expect: 100-continue\r\n\r\n{SEND_BUNDLE}"
    );
    let ping = "GET /ping HTTP/1.1\r\nHost: relay\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n"
        .to_string();
    let http10 = "GET /ping HTTP/1.0\r\n\r\n".to_string();
    let seen = |method, path: &str, query: &str, body: &str, keep_alive, expect, len| Seen {
        method,
        path: path.into(),
        query: query.into(),
        body: body.into(),
        keep_alive,
        expect_continue: expect,
        len,
    };
    vec![
        (
            curl.clone().into_bytes(),
            seen(
                Method::Post,
                "/api/v1/bundles",
                "",
                SEND_BUNDLE,
                true,
                false,
                curl.len(),
            ),
        ),
        (
            python.clone().into_bytes(),
            seen(
                Method::Post,
                "/api/v1/bundles",
                "uuid=0b1f",
                SEND_BUNDLE,
                true,
                false,
                python.len(),
            ),
        ),
        (
            axios.clone().into_bytes(),
            seen(
                Method::Post,
                "/api/v1/bundles",
                "",
                SEND_BUNDLE,
                false,
                false,
                axios.len(),
            ),
        ),
        (
            curl_expect.clone().into_bytes(),
            seen(
                Method::Post,
                "/api/v1/transactions",
                "bundleOnly=true",
                SEND_BUNDLE,
                true,
                true,
                curl_expect.len(),
            ),
        ),
        (
            ping.clone().into_bytes(),
            seen(Method::Get, "/ping", "", "", true, false, ping.len()),
        ),
        (
            http10.clone().into_bytes(),
            seen(Method::Get, "/ping", "", "", false, false, http10.len()),
        ),
    ]
}

#[test]
fn every_prefix_of_a_real_request_needs_more_bytes_and_the_whole_is_that_request() {
    let limits = Limits::default();
    for (bytes, want) in real_requests() {
        for i in 0..bytes.len() {
            assert_eq!(
                parse(&bytes[..i], &limits),
                Ok(None),
                "prefix {i} of {want:?}"
            );
        }
        assert_eq!(receive(&[&bytes], &limits), vec![want]);
    }
}

#[test]
fn every_two_way_split_of_pipelined_real_requests_yields_the_same_requests() {
    let limits = Limits::default();
    let all = real_requests();
    let stream: Vec<u8> = all.iter().flat_map(|(b, _)| b.clone()).collect();
    let want: Vec<Seen> = all.into_iter().map(|(_, s)| s).collect();
    for i in 0..=stream.len() {
        let (a, b) = stream.split_at(i);
        assert_eq!(receive(&[a, b], &limits), want, "split at {i}");
    }
}

#[test]
fn one_byte_at_a_time_yields_the_same_requests() {
    let limits = Limits::default();
    let all = real_requests();
    let stream: Vec<u8> = all.iter().flat_map(|(b, _)| b.clone()).collect();
    let want: Vec<Seen> = all.into_iter().map(|(_, s)| s).collect();
    let chunks: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(receive(&chunks, &limits), want);
}

#[test]
fn body_needs_exactly_the_missing_bytes_at_every_split() {
    let limits = Limits::default();
    let (bytes, want) = real_requests().swap_remove(3);
    let head_len = bytes.len() - SEND_BUNDLE.len();
    for i in head_len..bytes.len() {
        assert_eq!(
            needed(&bytes[..i], &limits),
            Ok(Needed::Body {
                len: want.len,
                expect_continue: true
            }),
            "split at {i}"
        );
    }
    for i in 0..head_len {
        assert_eq!(
            needed(&bytes[..i], &limits),
            Ok(Needed::Head {
                len_max: limits.request_bytes_max()
            })
        );
    }
}

/// One generated request: its bytes and what parsing them must give.
fn request() -> impl Strategy<Value = (Vec<u8>, Seen)> {
    let method = prop_oneof![Just("GET"), Just("POST"), Just("PUT"), Just("DELETE")];
    let path =
        proptest::collection::vec(proptest::sample::select(b"abcxyz019-_./~%".to_vec()), 0..20);
    let query = proptest::option::of(proptest::collection::vec(
        proptest::sample::select(b"abz09=&?/".to_vec()),
        0..12,
    ));
    let connection = prop_oneof![
        Just(None),
        Just(Some("close")),
        Just(Some("keep-alive")),
        Just(Some("Keep-Alive")),
        Just(Some("keep-alive, close")),
    ];
    let extra = proptest::collection::vec(
        (
            proptest::sample::select(vec!["Host", "User-Agent", "x-jito-auth", "Accept", "X-Pad"]),
            proptest::collection::vec(proptest::sample::select(b"abc XYZ/*,;=09".to_vec()), 0..30),
        ),
        0..6,
    );
    let body = proptest::collection::vec(any::<u8>(), 0..300);
    (
        method,
        path,
        query,
        any::<bool>(),
        connection,
        extra,
        body,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                method,
                path,
                query,
                http11,
                connection,
                extra,
                body,
                expect,
                crlf,
                length_on_get,
            )| {
                let eol = if crlf { "\r\n" } else { "\n" };
                let mut target = b"/".to_vec();
                target.extend(&path);
                let mut t = target.clone();
                if let Some(q) = &query {
                    t.push(b'?');
                    t.extend(q);
                }
                let mut head = format!(
                    "{method} {} HTTP/1.{}{eol}",
                    String::from_utf8(t).unwrap(),
                    u8::from(http11)
                );
                for (name, value) in &extra {
                    head += &format!("{name}: {}{eol}", String::from_utf8(value.clone()).unwrap());
                }
                if let Some(c) = connection {
                    head += &format!("Connection: {c}{eol}");
                }
                if expect {
                    head += &format!("Expect: 100-continue{eol}");
                }
                let with_body = method != "GET" || length_on_get;
                let body = if with_body { body } else { Vec::new() };
                if with_body {
                    head += &format!("Content-Length: {}{eol}", body.len());
                }
                head += eol;
                let mut bytes = head.into_bytes();
                bytes.extend(&body);
                let close = connection.is_some_and(|c| c.contains("close"));
                let keep = connection.is_some_and(|c| c.eq_ignore_ascii_case("keep-alive"));
                let seen = Seen {
                    method: match method {
                        "GET" => Method::Get,
                        "POST" => Method::Post,
                        _ => Method::Other,
                    },
                    path: target,
                    query: query.unwrap_or_default(),
                    body,
                    keep_alive: !close && (http11 || keep),
                    expect_continue: expect && http11,
                    len: bytes.len(),
                };
                (bytes, seen)
            },
        )
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        rng_seed: RngSeed::Fixed(2026),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_split_of_a_valid_pipelined_stream_yields_the_same_requests(
        requests in proptest::collection::vec(request(), 1..8),
        cuts in proptest::collection::vec(1usize..96, 1..40),
    ) {
        let limits = Limits::default();
        let stream: Vec<u8> = requests.iter().flat_map(|(b, _)| b.clone()).collect();
        let want: Vec<Seen> = requests.into_iter().map(|(_, s)| s).collect();
        prop_assert_eq!(&receive(&[&stream], &limits), &want);
        // Chunk sizes from `cuts`, cycled until the stream is used up.
        let mut chunks = Vec::new();
        let mut at = 0;
        for size in cuts.iter().cycle() {
            if at == stream.len() {
                break;
            }
            let end = (at + size).min(stream.len());
            chunks.push(&stream[at..end]);
            at = end;
        }
        prop_assert_eq!(&receive(&chunks, &limits), &want);
    }
}
