//! Parsing and answering allocate nothing: a counting global allocator proves it.

use crate::counting_alloc;
use counting_alloc::allocations;

use std::fmt;

use bundle_relay::jsonrpc::{
    Call, ERROR_RESPONSE_LEN_MAX, RpcError, parse_request, write_error, write_result_raw,
    write_result_str,
};

/// A wire-layer style error cause.
struct Cause(u32);

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} signatures for 2 required signers", self.0)
    }
}

#[test]
fn parsing_and_writing_responses_allocate_nothing() {
    // Built before counting starts.
    let tx = "QUJD".repeat(300);
    let good = format!(
        r#"{{"jsonrpc":"2.0","id":"r-1","method":"sendBundle","params":[["{tx}","{tx}","ab\/cd"],{{"encoding":"base64","skipPreflight":true}}]}}"#
    );
    let bad: Vec<String> = vec![
        "{".into(),
        r#"[{"jsonrpc":"2.0"}]"#.into(),
        r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","method":"x"}"#.into(),
        r#"{"jsonrpc":"2.0","id":1,"method":"nope\u0001"}"#.into(),
        r#"{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["a","b","c","d","e","f"]]}"#
            .into(),
        r#"{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["a"],{"encoding":"x"}]}"#
            .into(),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["{}"],{{"encoding":"base64"}}]}}"#,
            "A".repeat(1700)
        ),
        "[".repeat(10_000),
    ];
    let mut response = [0u8; ERROR_RESPONSE_LEN_MAX];
    let mut unescaped = [0u8; 2048];

    let before = allocations();
    let mut written = 0usize;

    let req = parse_request(good.as_bytes()).unwrap();
    let Call::SendBundle { transactions, .. } = req.call else {
        panic!("not sendBundle")
    };
    for t in &transactions {
        written += t.unescape_into(&mut unescaped).unwrap().len();
    }
    written += write_result_str(&mut response, req.id, "892b79ed49138bfb")
        .unwrap()
        .len();
    written += write_result_raw(&mut response, req.id, br#"["a","b"]"#)
        .unwrap()
        .len();
    let wire_error = RpcError::invalid_transaction(1, &Cause(3));
    written += write_error(&mut response, req.id, &wire_error)
        .unwrap()
        .len();
    written += write_error(&mut response, req.id, &RpcError::rate_limited(1606))
        .unwrap()
        .len();
    for body in &bad {
        let e = parse_request(body.as_bytes()).unwrap_err();
        written += write_error(&mut response, e.id, &e).unwrap().len();
    }

    let during = allocations() - before;
    assert!(written > 0);
    assert_eq!(
        during, 0,
        "parse and response writing allocated {during} times"
    );

    // The counter does see allocations, so the zero above means something.
    let v = std::hint::black_box(vec![1u8; 16]);
    assert!(allocations() > before, "{v:?}");
}
