//! The scanner against serde_json: on random and mutated documents, `parse_request` says
//! "not JSON" (-32700) exactly when `serde_json::from_slice::<Value>` fails, never panics, and
//! what it accepts it reads as serde_json does (ids, transaction strings).
//!
//! Two known, documented differences are excluded: serde_json refuses numbers beyond `f64`
//! ("number out of range") which RFC 8259's grammar allows, and the two nesting limits differ
//! (ours is `DEPTH_MAX`, serde_json's 128).

use bundle_relay::jsonrpc::{
    Call, ERROR_RESPONSE_LEN_MAX, ErrorKind, Expected, parse_request, write_error,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

/// Checks one document; returns whether serde_json accepted it (None when excluded).
fn check(doc: &[u8]) -> Option<bool> {
    let ours = parse_request(doc);
    let theirs = serde_json::from_slice::<Value>(doc);
    if let Err(e) = &theirs {
        let m = e.to_string();
        if m.contains("out of range") || m.contains("recursion limit") {
            return None;
        }
    }
    let mut buf = [0u8; ERROR_RESPONSE_LEN_MAX];
    match &ours {
        Err(e) => {
            if let ErrorKind::Parse { offset, expected } = e.kind {
                assert!(offset <= doc.len(), "offset {offset} past the end");
                if expected == Expected::ShallowerNesting {
                    return None;
                }
            }
            // Every refusal renders within the error buffer.
            let out = write_error(&mut buf, e.id, e).expect("error response fits");
            serde_json::from_slice::<Value>(out).expect("error response is JSON");
        }
        Ok(req) => {
            let v = theirs
                .as_ref()
                .expect("we accepted what serde_json refused");
            let id: Value = serde_json::from_slice(req.id.raw()).unwrap();
            assert_eq!(&id, v.get("id").unwrap_or(&Value::Null));
            if let Call::SendBundle { transactions, .. } = req.call {
                for (i, tx) in transactions.iter().enumerate() {
                    let mut out = [0u8; 4096];
                    let ours = tx.unescape_into(&mut out).unwrap();
                    assert_eq!(
                        ours,
                        v["params"][0][i].as_str().unwrap().as_bytes(),
                        "transaction {i}"
                    );
                    assert_eq!(tx.to_string().as_bytes(), ours);
                }
            }
        }
    }
    let our_valid = !matches!(&ours, Err(e) if matches!(e.kind, ErrorKind::Parse { .. }));
    assert_eq!(
        our_valid,
        theirs.is_ok(),
        "verdicts differ on {:?}: ours {:?}, serde_json {:?}",
        String::from_utf8_lossy(doc),
        ours.err(),
        theirs.err()
    );
    Some(our_valid)
}

fn ws(rng: &mut StdRng, out: &mut Vec<u8>) {
    if rng.random_bool(0.2) {
        for _ in 0..rng.random_range(1..3) {
            out.push(b" \t\n\r"[rng.random_range(0..4)]);
        }
    }
}

fn number(rng: &mut StdRng, out: &mut Vec<u8>) {
    if rng.random_bool(0.3) {
        out.push(b'-');
    }
    if rng.random_bool(0.2) {
        out.push(b'0');
    } else {
        out.push(b'1' + rng.random_range(0..9u8));
        for _ in 0..rng.random_range(0..15) {
            out.push(b'0' + rng.random_range(0..10u8));
        }
    }
    if rng.random_bool(0.3) {
        out.push(b'.');
        for _ in 0..rng.random_range(1..5) {
            out.push(b'0' + rng.random_range(0..10u8));
        }
    }
    if rng.random_bool(0.2) {
        out.push(if rng.random_bool(0.5) { b'e' } else { b'E' });
        match rng.random_range(0..3) {
            0 => out.push(b'+'),
            1 => out.push(b'-'),
            _ => {}
        }
        for _ in 0..rng.random_range(1..3) {
            out.push(b'0' + rng.random_range(0..10u8));
        }
    }
}

fn string(rng: &mut StdRng, out: &mut Vec<u8>) {
    out.push(b'"');
    for _ in 0..rng.random_range(0..12) {
        match rng.random_range(0..10) {
            0 => {
                let e: &[u8] = [
                    &b"\\\""[..],
                    b"\\\\",
                    b"\\/",
                    b"\\b",
                    b"\\f",
                    b"\\n",
                    b"\\r",
                    b"\\t",
                ][rng.random_range(0..8)];
                out.extend_from_slice(e);
            }
            1 => {
                let unit = loop {
                    let u = rng.random_range(0..0x1_0000u32);
                    if !(0xD800..0xE000).contains(&u) {
                        break u;
                    }
                };
                out.extend_from_slice(format!("\\u{unit:04X}").as_bytes());
            }
            2 => {
                let hi = rng.random_range(0xD800..0xDC00u32);
                let lo = rng.random_range(0xDC00..0xE000u32);
                out.extend_from_slice(format!("\\u{hi:04x}\\u{lo:04x}").as_bytes());
            }
            3 => {
                let c = loop {
                    if let Some(c) = char::from_u32(rng.random_range(0x80..0x11_0000u32)) {
                        break c;
                    }
                };
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
            _ => {
                const PLAIN: &[u8] =
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/= ";
                for _ in 0..rng.random_range(1..20) {
                    out.push(PLAIN[rng.random_range(0..PLAIN.len())]);
                }
            }
        }
    }
    out.push(b'"');
}

fn value(rng: &mut StdRng, depth: usize, out: &mut Vec<u8>) {
    let kinds = if depth >= 5 { 5 } else { 7 };
    match rng.random_range(0..kinds) {
        0 => out.extend_from_slice(b"null"),
        1 => out.extend_from_slice(if rng.random_bool(0.5) {
            b"true"
        } else {
            b"false"
        }),
        2 => number(rng, out),
        3 | 4 => string(rng, out),
        5 => {
            out.push(b'[');
            ws(rng, out);
            for i in 0..rng.random_range(0..4) {
                if i > 0 {
                    out.push(b',');
                    ws(rng, out);
                }
                value(rng, depth + 1, out);
                ws(rng, out);
            }
            out.push(b']');
        }
        _ => {
            out.push(b'{');
            ws(rng, out);
            for i in 0..rng.random_range(0..4) {
                if i > 0 {
                    out.push(b',');
                    ws(rng, out);
                }
                string(rng, out);
                ws(rng, out);
                out.push(b':');
                ws(rng, out);
                value(rng, depth + 1, out);
                ws(rng, out);
            }
            out.push(b'}');
        }
    }
}

/// A request-shaped document, mostly valid, so the params paths are exercised too.
fn request(rng: &mut StdRng, out: &mut Vec<u8>) {
    const METHODS: [&str; 6] = [
        "sendBundle",
        "sendTransaction",
        "getTipAccounts",
        "getBundleStatuses",
        "getInflightBundleStatuses",
        "getBalance",
    ];
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    match rng.random_range(0..3) {
        0 => number(rng, out),
        1 => string(rng, out),
        _ => out.extend_from_slice(b"null"),
    }
    let method = METHODS[rng.random_range(0..METHODS.len())];
    out.extend_from_slice(format!(r#","method":"{method}","params":["#).as_bytes());
    ws(rng, out);
    if method == "sendTransaction" {
        string(rng, out);
    } else {
        out.push(b'[');
        for i in 0..rng.random_range(0..7) {
            if i > 0 {
                out.push(b',');
            }
            if rng.random_bool(0.9) {
                string(rng, out);
            } else {
                value(rng, 3, out);
            }
        }
        out.push(b']');
    }
    if rng.random_bool(0.5) {
        let enc = ["base64", "base58", "hex"][rng.random_range(0..3)];
        out.extend_from_slice(
            format!(r#",{{"skipPreflight":true,"encoding":"{enc}"}}"#).as_bytes(),
        );
    }
    out.extend_from_slice(b"]}");
}

const INTERESTING: &[u8] =
    b"{}[]\":,\\/ u0123456789eE+-.tfnrl\x00\x1f\x7f\x80\xbf\xc3\xed\xf0\xf4\xff";

fn mutate(rng: &mut StdRng, doc: &mut Vec<u8>) {
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(0..=doc.len());
        match rng.random_range(0..5) {
            0 if at < doc.len() => doc[at] = INTERESTING[rng.random_range(0..INTERESTING.len())],
            1 if at < doc.len() => {
                doc.remove(at);
            }
            2 => doc.insert(at, INTERESTING[rng.random_range(0..INTERESTING.len())]),
            3 => doc.truncate(at),
            _ => {
                let end = rng.random_range(at..=doc.len().min(at + 8));
                let span = doc[at..end].to_vec();
                let to = rng.random_range(0..=doc.len());
                doc.splice(to..to, span);
            }
        }
    }
}

#[test]
fn verdicts_agree_with_serde_json_on_seeded_random_and_mutated_documents() {
    let mut rng = StdRng::seed_from_u64(0x6a73_6f6e_7270_6331);
    let (mut valid, mut invalid) = (0usize, 0usize);
    let mut doc = Vec::new();
    for i in 0..20_000 {
        doc.clear();
        ws(&mut rng, &mut doc);
        if i % 2 == 0 {
            request(&mut rng, &mut doc);
        } else {
            value(&mut rng, 0, &mut doc);
        }
        ws(&mut rng, &mut doc);
        if rng.random_bool(0.5) {
            mutate(&mut rng, &mut doc);
        }
        match check(&doc) {
            Some(true) => valid += 1,
            Some(false) => invalid += 1,
            None => {}
        }
    }
    // Both verdicts must be well represented, or the comparison proves little.
    assert!(
        valid > 5_000 && invalid > 5_000,
        "valid {valid}, invalid {invalid}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn verdicts_agree_with_serde_json_on_arbitrary_bytes_from_json_alphabet(
        doc in proptest::collection::vec(proptest::sample::select(INTERESTING.to_vec()), 0..40)
    ) {
        check(&doc);
    }

    #[test]
    fn arbitrary_bytes_never_panic(doc in proptest::collection::vec(any::<u8>(), 0..64)) {
        check(&doc);
    }
}
