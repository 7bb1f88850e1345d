//! Framing requests and writing answers allocate nothing: a counting global allocator proves it.

use crate::counting_alloc;
use counting_alloc::allocations;

use bundle_relay::http1::{
    ERROR_RESPONSE_LEN_MAX, Limits, frame, needed, parse, write_error, write_response,
};

#[test]
fn parsing_and_writing_responses_allocate_nothing() {
    // Built before counting starts.
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["{}"]]}}"#,
        "A".repeat(1600)
    );
    let good = format!(
        "POST /api/v1/bundles?uuid=x HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n\
         Expect: 100-continue\r\nContent-Length: {}\r\n\r\n{body}GET /ping HTTP/1.1\r\n\r\n",
        body.len()
    );
    let bad: Vec<Vec<u8>> = vec![
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(),
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
        b"POST / HTTP/1.1\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nbad name: x\r\n\r\n".to_vec(),
        format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(9000)).into_bytes(),
    ];
    let limits = Limits::default();
    let mut out = [0u8; 4096];
    let mut err_out = [0u8; ERROR_RESPONSE_LEN_MAX];

    let before = allocations();
    let mut written = 0usize;
    let mut at = 0;
    while let Some(r) = parse(&good.as_bytes()[at..], &limits).unwrap() {
        written += r.header("content-type").map_or(0, <[u8]>::len);
        written += write_response(
            &mut out,
            200,
            r.keep_alive,
            "application/json",
            &[("x-bundle-id", b"892b79ed")],
            r.body,
        )
        .unwrap();
        at += r.len;
    }
    let partial = &good.as_bytes()[..good.len() / 2];
    assert!(needed(partial, &limits).is_ok());
    assert!(frame(partial, &limits).is_ok());
    for b in &bad {
        let e = parse(b, &limits).unwrap_err();
        written += write_error(&mut err_out, &e).unwrap();
    }
    let during = allocations() - before;

    assert_eq!(at, good.len());
    assert!(written > 0);
    assert_eq!(during, 0, "framing and answering allocated {during} times");
}
