//! A JSON-RPC sendBundle body, end to end through the request path's decoding: parse, decode
//! each transaction into the bundle buffer, validate, and derive Jito's bundle id. The Solana
//! crates build and sign the transactions; the id is checked against an independent derivation.

use crate::wire_support;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bundle_relay::bundle::{BundleBuf, TxEncoding};
use bundle_relay::jito::code;
use bundle_relay::jsonrpc::{Call, parse_request};
use rand::SeedableRng;
use rand::rngs::StdRng;
use sha2::{Digest, Sha256};
use wire_support::{RawTx, Shape, serialize, signed_tx};

fn signed_bundle(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let shape = Shape::random(&mut rng);
            serialize(&signed_tx(&mut rng, shape))
        })
        .collect()
}

/// Jito's rule, written independently: SHA-256 of the base58 first signatures joined by ",".
fn expected_id(txs: &[Vec<u8>]) -> String {
    let joined: Vec<String> = txs
        .iter()
        .map(|t| bs58::encode(&t[1..65]).into_string())
        .collect();
    Sha256::digest(joined.join(",").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn body(strings: &[String], options: &str) -> Vec<u8> {
    let list: Vec<String> = strings.iter().map(|s| format!("\"{s}\"")).collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"sendBundle","params":[[{}]{options}]}}"#,
        list.join(",")
    )
    .into_bytes()
}

fn decode(body: &[u8]) -> Result<(String, BundleBuf), (i32, String)> {
    let req = parse_request(body).map_err(|e| (e.code, e.to_string()))?;
    let Call::SendBundle {
        transactions,
        encoding,
        encoding_given,
    } = req.call
    else {
        panic!("not a sendBundle: {:?}", req.call);
    };
    let mut buf = BundleBuf::new();
    let id = buf
        .decode(
            transactions.as_slice(),
            TxEncoding::new(encoding, encoding_given),
        )
        .map_err(|e| (e.code, e.to_string()))?;
    Ok((String::from_utf8(id.to_hex().to_vec()).unwrap(), buf))
}

#[test]
fn base64_bundle_decodes_byte_identical_with_jitos_id() {
    for n in 1..=5 {
        let txs = signed_bundle(n as u64, n);
        let strings: Vec<String> = txs.iter().map(|t| STANDARD.encode(t)).collect();
        let (id, buf) = decode(&body(&strings, r#",{"encoding":"base64"}"#)).unwrap();
        assert_eq!(id, expected_id(&txs));
        assert_eq!(buf.len(), n);
        for (i, t) in txs.iter().enumerate() {
            assert_eq!(buf.tx(i), &t[..], "transaction {i}");
        }
    }
}

#[test]
fn bundle_without_options_is_base58() {
    let txs = signed_bundle(11, 3);
    let strings: Vec<String> = txs.iter().map(|t| bs58::encode(t).into_string()).collect();
    let (id, buf) = decode(&body(&strings, "")).unwrap();
    assert_eq!(id, expected_id(&txs));
    assert_eq!(buf.txs().count(), txs.len());
    for (i, (a, b)) in buf.txs().zip(&txs).enumerate() {
        assert_eq!(a, &b[..], "transaction {i}");
    }
}

#[test]
fn escaped_slash_in_base64_decodes_like_the_plain_string() {
    // Find a bundle whose base64 contains '/', then send it as a JSON encoder that escapes
    // slashes would.
    let (txs, plain) = (0..64)
        .map(|seed| {
            let txs = signed_bundle(100 + seed, 2);
            let strings: Vec<String> = txs.iter().map(|t| STANDARD.encode(t)).collect();
            (txs, strings)
        })
        .find(|(_, s)| s.iter().any(|x| x.contains('/')))
        .expect("some seed yields a '/'");
    let escaped: Vec<String> = plain.iter().map(|s| s.replace('/', "\\/")).collect();
    let (id, buf) = decode(&body(&escaped, r#",{"encoding":"base64"}"#)).unwrap();
    assert_eq!(id, expected_id(&txs));
    assert_eq!(buf.tx(0), &txs[0][..]);
}

#[test]
fn bad_transaction_is_invalid_params_naming_its_index_and_cause() {
    let txs = signed_bundle(21, 3);
    let mut strings: Vec<String> = txs.iter().map(|t| STANDARD.encode(t)).collect();
    let mut trailing = txs[2].clone();
    trailing.extend_from_slice(&[0, 0, 0]);
    strings[2] = STANDARD.encode(&trailing);
    let (code, message) = decode(&body(&strings, r#",{"encoding":"base64"}"#)).unwrap_err();
    assert_eq!(code, code::INVALID_PARAMS);
    assert!(
        message.starts_with("transaction 2: ") && message.contains("trailing"),
        "{message}"
    );
}

#[test]
fn a_refused_transactions_reason_reaches_the_bot_whole() {
    // Two signers and one read-only unsigned account need three static keys; there are two.
    let mut raw = RawTx::legacy();
    raw.signatures = vec![[7; 64], [8; 64]];
    raw.header = [2, 0, 1];
    let strings = [STANDARD.encode(raw.to_bytes())];
    let (code, message) = decode(&body(&strings, r#",{"encoding":"base64"}"#)).unwrap_err();
    assert_eq!(code, code::INVALID_PARAMS);
    assert_eq!(
        message,
        "transaction 0: message header needs 2 signers and 1 read-only unsigned accounts but the \
         message has 2 static accounts"
    );
}

#[test]
fn wrong_encoding_is_invalid_params_naming_the_character() {
    let txs = signed_bundle(31, 1);
    // base64 text declared as base58: '+', '/', '=' or a 0/O/I/l are outside base58.
    let s = STANDARD.encode(&txs[0]) + "+";
    const BASE58: &str = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    let (position, bad) = s
        .char_indices()
        .find(|&(_, c)| !BASE58.contains(c))
        .expect("the trailing '+' at least");
    let (code, message) = decode(&body(&[s], r#",{"encoding":"base58"}"#)).unwrap_err();
    assert_eq!(code, code::INVALID_PARAMS);
    assert_eq!(
        message,
        format!("transaction 0: invalid base58 character '{bad}' at position {position}")
    );
}

/// Base64 sent with no encoding named (easy with Jito's Python SDK, which gives no way to
/// pass the options): read as base58, Jito's default, it fails at its first character outside
/// base58, and the error says why base58 was read. Named base58, the error is the character
/// alone (above).
#[test]
fn base64_sent_without_naming_its_encoding_is_refused_saying_base58_is_the_default() {
    let txs = signed_bundle(32, 2);
    let strings: Vec<String> = txs.iter().map(|t| STANDARD.encode(t) + "+").collect();
    const BASE58: &str = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    let (position, bad) = strings[0]
        .char_indices()
        .find(|&(_, c)| !BASE58.contains(c))
        .expect("the trailing '+' at least");
    for options in ["", ",null", r#",{"skipPreflight":true}"#] {
        let (code, message) = decode(&body(&strings, options)).unwrap_err();
        assert_eq!(code, code::INVALID_PARAMS);
        assert_eq!(
            message,
            format!(
                "transaction 0: invalid base58 character '{bad}' at position {position} \
                 (base58 is the default; base64 needs {{\"encoding\":\"base64\"}})"
            ),
            "options {options:?}"
        );
    }
}

#[test]
fn non_ascii_escape_is_refused_not_truncated() {
    let (code, message) =
        decode(br#"{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["\u00e9AAAA"]]}"#)
            .unwrap_err();
    assert_eq!(code, code::INVALID_PARAMS);
    assert!(message.starts_with("transaction 0: "), "{message}");
}

/// The same transaction twice is refused however it is written: the second copy's string may
/// differ (an escaped slash) while its bytes, and so its signature, are the same.
#[test]
fn a_transaction_twice_in_one_bundle_is_refused_even_written_differently() {
    let txs = signed_bundle(21, 2);
    let plain = STANDARD.encode(&txs[0]);
    let escaped = plain.replace('/', "\\/");
    assert_ne!(plain, escaped, "the seed's encoding has a slash to escape");
    let strings = [STANDARD.encode(&txs[1]), plain, escaped];
    let (code, message) = decode(&body(&strings, r#",{"encoding":"base64"}"#)).unwrap_err();
    assert_eq!(code, code::INVALID_PARAMS);
    assert_eq!(
        message,
        "transaction 2: repeats transaction 1 (same signature): a bundle's transactions must differ"
    );
}
