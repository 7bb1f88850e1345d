//! `parse_request` on arbitrary bodies: never panics, its "not JSON" verdict (-32700) matches
//! serde_json's, what it accepts reads as serde_json reads it, and every answer fits its buffer.
#![no_main]

use bundle_relay::jsonrpc::{
    Call, ERROR_RESPONSE_LEN_MAX, ErrorKind, Expected, parse_request, write_error, write_result_str,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|body: &[u8]| {
    let ours = parse_request(body);
    let theirs = serde_json::from_slice::<Value>(body);
    let mut buf = [0u8; ERROR_RESPONSE_LEN_MAX];
    match &ours {
        Err(e) => {
            let out = write_error(&mut buf, e.id, e).expect("error response fits");
            assert!(serde_json::from_slice::<Value>(out).is_ok());
            if let ErrorKind::Parse { offset, expected } = e.kind {
                assert!(offset <= body.len());
                if expected == Expected::ShallowerNesting {
                    return;
                }
            }
        }
        Ok(req) => {
            let out = write_result_str(&mut buf, req.id, "id").expect("result fits");
            assert!(serde_json::from_slice::<Value>(out).is_ok());
            if let (Ok(v), Call::SendBundle { transactions, .. }) = (&theirs, req.call) {
                for (i, tx) in transactions.iter().enumerate() {
                    let mut s = [0u8; 8192];
                    let ours = tx.unescape_into(&mut s).expect("fits");
                    assert_eq!(Some(ours), v["params"][0][i].as_str().map(str::as_bytes));
                }
            }
        }
    }
    // Documented differences: serde_json refuses numbers beyond f64 and nests to 128.
    if let Err(e) = &theirs {
        let m = e.to_string();
        if m.contains("out of range") || m.contains("recursion limit") {
            return;
        }
    }
    let our_valid = !matches!(&ours, Err(e) if matches!(e.kind, ErrorKind::Parse { .. }));
    assert_eq!(
        our_valid,
        theirs.is_ok(),
        "{:?} vs {:?}",
        ours.err(),
        theirs.err()
    );
});
