//! bench-null's answers: what bench-load's checks rely on.

use bundle_relay_bench::null::{self, BadRequest};
use bundle_relay_bench::txgen::{self, TxGenConfig};

fn answer_body(out: &[u8]) -> serde_json::Value {
    let text = std::str::from_utf8(out).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"));
    assert_eq!(crate::content_length(head), body.len());
    serde_json::from_str(body).unwrap()
}

#[test]
fn with_bundle_ids_it_answers_each_bundles_real_id_in_both_encodings() {
    let (bundles, _) = txgen::generate(TxGenConfig::default(), 0, 60).unwrap();
    for b in &bundles {
        let mut out = Vec::new();
        let (used, n) = null::answer_all(&b.request, true, &mut out).unwrap();
        assert_eq!((used, n), (b.request.len(), 1));
        let v = answer_body(&out);
        assert_eq!(
            v["result"],
            b.bundle_id_str(),
            "bundle {} ({:?})",
            b.seq,
            b.encoding
        );
        assert_eq!(v["id"], b.seq);
    }
}

#[test]
fn without_bundle_ids_it_answers_zeros_and_echoes_the_id() {
    let (bundles, _) = txgen::generate(TxGenConfig::default(), 5, 1).unwrap();
    let mut out = Vec::new();
    null::answer_all(&bundles[0].request, false, &mut out).unwrap();
    let v = answer_body(&out);
    assert_eq!(v["result"], "0".repeat(64));
    assert_eq!(v["id"], 5);
    assert_eq!(v["jsonrpc"], "2.0");
}

#[test]
fn an_undecodable_transaction_gets_an_invalid_params_error() {
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"sendBundle","params":[["!!!"],{"encoding":"base64"}]}"#;
    let req = format!(
        "POST /api/v1/bundles HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut out = Vec::new();
    null::answer_all(req.as_bytes(), true, &mut out).unwrap();
    let v = answer_body(&out);
    assert_eq!(v["error"]["code"], bundle_relay::jito::code::INVALID_PARAMS);
    assert_eq!(v["id"], 3);
}

#[test]
fn an_oversized_body_is_refused() {
    let req = format!(
        "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        null::READ_BUFFER_BYTES + 1
    );
    let mut out = Vec::new();
    assert_eq!(
        null::answer_all(req.as_bytes(), false, &mut out),
        Err(BadRequest)
    );
    assert!(out.starts_with(b"HTTP/1.1 400"));
}
