//! Decoding transaction strings: known-answer vectors, the error for each rejection, and seeded
//! differential runs against the `bs58` and `base64` crates (what Solana RPC decodes with).

use crate::wire_support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bundle_relay::wire::{
    BASE58_LEN_MAX, BASE64_LEN_MAX, DecodeError, Encoding, PACKET_DATA_SIZE, WireError, decode,
    decode_and_validate,
};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use wire_support::{Shape, serialize, signed_tx};

fn decoded(enc: Encoding, text: &str) -> Result<Vec<u8>, DecodeError> {
    let mut out = [0u8; PACKET_DATA_SIZE];
    decode(enc, text.as_bytes(), &mut out).map(|n| out[..n].to_vec())
}

#[test]
fn base58_known_answers() {
    // Vectors from the bs58 crate and the Bitcoin base58 test suite.
    let vectors: &[(&str, &[u8])] = &[
        ("", b""),
        ("1", &[0]),
        ("11", &[0, 0]),
        ("2", &[1]),
        ("z", &[57]),
        ("21", &[58]),
        ("2g", b"a"),
        ("a3gV", b"bbb"),
        ("aPEr", b"ccc"),
        ("StV1DL6CwTryKyV", b"hello world"),
        ("1111111111", &[0; 10]),
        ("11StV1DL6CwTryKyV", b"\0\0hello world"),
        ("5Q", &[0xff]),
        ("LUv", &[0xff, 0xff]),
        ("LUw", &[1, 0, 0]),
        ("3yQ", &[0x27, 0x0f]),
        ("JxF12TrwUP45BMd", b"Hello World"),
    ];
    for (text, bytes) in vectors {
        assert_eq!(
            decoded(Encoding::Base58, text).as_deref(),
            Ok(*bytes),
            "{text}"
        );
    }
}

#[test]
fn base64_known_answers() {
    // RFC 4648 section 10.
    let vectors: &[(&str, &[u8])] = &[
        ("", b""),
        ("Zg==", b"f"),
        ("Zm8=", b"fo"),
        ("Zm9v", b"foo"),
        ("Zm9vYg==", b"foob"),
        ("Zm9vYmE=", b"fooba"),
        ("Zm9vYmFy", b"foobar"),
        ("+/+/", &[0xfb, 0xff, 0xbf]),
    ];
    for (text, bytes) in vectors {
        assert_eq!(
            decoded(Encoding::Base64, text).as_deref(),
            Ok(*bytes),
            "{text}"
        );
    }
}

#[test]
fn base58_string_over_the_cap_is_rejected_before_its_characters_are_read() {
    let text = "0".repeat(BASE58_LEN_MAX + 1);
    let err = decoded(Encoding::Base58, &text).unwrap_err();
    assert_eq!(
        err,
        DecodeError::TooLong {
            encoding: Encoding::Base58,
            len: 1684,
            max: 1683
        }
    );
    assert_eq!(
        err.to_string(),
        "base58 string is 1684 characters; the limit is 1683"
    );
}

#[test]
fn base64_string_over_the_cap_is_rejected_before_its_characters_are_read() {
    let text = "!".repeat(BASE64_LEN_MAX + 4);
    let err = decoded(Encoding::Base64, &text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "base64 string is 1648 characters; the limit is 1644"
    );
}

#[test]
fn base58_zero_capital_o_capital_i_and_small_l_are_invalid_characters() {
    for (text, c, at) in [
        ("2220", '0', 3),
        ("O", 'O', 0),
        ("11I", 'I', 2),
        ("zzzzl", 'l', 4),
    ] {
        let err = decoded(Encoding::Base58, text).unwrap_err();
        assert_eq!(
            err,
            DecodeError::InvalidCharacter {
                encoding: Encoding::Base58,
                byte: c as u8,
                position: at
            }
        );
        assert_eq!(
            err.to_string(),
            format!("invalid base58 character '{c}' at position {at}")
        );
    }
}

#[test]
fn non_printable_invalid_bytes_are_named_in_hex() {
    let err = decoded(Encoding::Base64, "Zm9v\u{e9}==").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid base64 character (byte 0xc3) at position 4"
    );
}

#[test]
fn base64_url_safe_characters_are_invalid() {
    let err = decoded(Encoding::Base64, "Zm9-").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid base64 character '-' at position 3"
    );
}

#[test]
fn base64_without_padding_is_rejected() {
    let err = decoded(Encoding::Base64, "Zm8").unwrap_err();
    assert_eq!(err, DecodeError::Base64LengthNotQuad { len: 3 });
    assert_eq!(
        err.to_string(),
        "base64 string length 3 is not a multiple of 4 (padding is required)"
    );
}

#[test]
fn base64_padding_inside_the_string_is_rejected() {
    let err = decoded(Encoding::Base64, "Zg==Zm9v").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid base64 character '=' at position 2"
    );
    let err = decoded(Encoding::Base64, "Z===").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid base64 character '=' at position 1"
    );
}

#[test]
fn base64_with_nonzero_bits_after_the_last_byte_is_rejected() {
    let err = decoded(Encoding::Base64, "Zh==").unwrap_err();
    assert_eq!(err, DecodeError::Base64TrailingBits { position: 1 });
    assert_eq!(
        err.to_string(),
        "base64 character at position 1 has nonzero bits after the last byte"
    );
    assert_eq!(
        decoded(Encoding::Base64, "Zm9=").unwrap_err(),
        DecodeError::Base64TrailingBits { position: 2 }
    );
}

#[test]
fn decoded_length_over_1232_bytes_is_rejected_naming_the_length() {
    let text = STANDARD.encode([1u8; 1233]);
    assert!(text.len() <= BASE64_LEN_MAX);
    let err = decoded(Encoding::Base64, &text).unwrap_err();
    assert_eq!(
        err,
        DecodeError::DecodedTooLong {
            len: 1233,
            max: 1232
        }
    );
    assert_eq!(
        err.to_string(),
        "decoded transaction is 1233 bytes; the limit is 1232"
    );

    let mut bytes = [1u8; 1233];
    bytes[..20].fill(0);
    let text = bs58::encode(bytes).into_string();
    assert!(text.len() <= BASE58_LEN_MAX);
    assert_eq!(
        decoded(Encoding::Base58, &text).unwrap_err(),
        DecodeError::DecodedTooLong {
            len: 1233,
            max: 1232
        }
    );
    // Leading '1's count as zero bytes toward the length.
    let text = "1".repeat(1300);
    assert_eq!(
        decoded(Encoding::Base58, &text).unwrap_err(),
        DecodeError::DecodedTooLong {
            len: 1300,
            max: 1232
        }
    );
}

#[test]
fn a_full_1232_byte_packet_decodes_in_both_encodings() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut bytes = [0u8; 1232];
    rng.fill_bytes(&mut bytes);
    bytes[0] = 0xff;
    let b58 = bs58::encode(bytes).into_string();
    assert!(b58.len() <= BASE58_LEN_MAX);
    assert_eq!(decoded(Encoding::Base58, &b58).unwrap(), bytes);
    let b64 = STANDARD.encode(bytes);
    assert_eq!(b64.len(), BASE64_LEN_MAX);
    assert_eq!(decoded(Encoding::Base64, &b64).unwrap(), bytes);
}

#[test]
fn decode_and_validate_returns_the_bytes_and_the_facts_of_a_signed_transaction() {
    let mut rng = StdRng::seed_from_u64(11);
    let shape = Shape::random(&mut rng);
    let tx = signed_tx(&mut rng, shape);
    let bytes = serialize(&tx);
    for (enc, text) in [
        (Encoding::Base58, bs58::encode(&bytes).into_string()),
        (Encoding::Base64, STANDARD.encode(&bytes)),
    ] {
        let mut out = [0u8; PACKET_DATA_SIZE];
        let (len, info) = decode_and_validate(enc, text.as_bytes(), &mut out).unwrap();
        assert_eq!(&out[..len], &bytes[..]);
        assert_eq!(info.first_signature, *tx.signatures[0].as_array());
    }
    let mut out = [0u8; PACKET_DATA_SIZE];
    let err = decode_and_validate(Encoding::Base64, b"AQAA", &mut out).unwrap_err();
    assert!(matches!(err, WireError::Tx(_)));
    assert_eq!(
        err.to_string(),
        "transaction ends inside the signatures (at byte 1)"
    );
    let err = decode_and_validate(Encoding::Base58, b"0", &mut out).unwrap_err();
    assert!(matches!(err, WireError::Decode(_)));
}

/// Random strings drawn mostly from the alphabet, with some foreign characters, some valid
/// encodings of random bytes, and some of those edited.
fn random_text(rng: &mut StdRng, alphabet: &[u8], encode: impl Fn(&[u8]) -> String) -> Vec<u8> {
    match rng.random_range(0..3) {
        0 => {
            let len = rng.random_range(0..60);
            (0..len)
                .map(|_| {
                    if rng.random_bool(0.03) {
                        rng.random()
                    } else {
                        alphabet[rng.random_range(0..alphabet.len())]
                    }
                })
                .collect()
        }
        _ => {
            // Mostly transaction-sized; sometimes around the 1232-byte limit.
            let len = if rng.random_bool(0.1) {
                rng.random_range(1200..1300)
            } else {
                rng.random_range(0..400)
            };
            let mut bytes = vec![0u8; len];
            rng.fill_bytes(&mut bytes);
            let zeros = rng.random_range(0..4).min(bytes.len());
            bytes[..zeros].fill(0);
            let mut text = encode(&bytes).into_bytes();
            if rng.random_bool(0.5) && !text.is_empty() {
                let i = rng.random_range(0..text.len());
                match rng.random_range(0..3) {
                    0 => text[i] = alphabet[rng.random_range(0..alphabet.len())],
                    1 => {
                        text.remove(i);
                    }
                    _ => text.insert(i, alphabet[rng.random_range(0..alphabet.len())]),
                }
            }
            text
        }
    }
}

#[test]
fn base58_agrees_with_the_bs58_crate() {
    let mut rng = StdRng::seed_from_u64(0x5157_0058);
    let alphabet = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0OIl";
    for case in 0..3000 {
        let text = random_text(&mut rng, alphabet, |b| bs58::encode(b).into_string());
        let theirs = bs58::decode(&text)
            .into_vec()
            .ok()
            .filter(|v| text.len() <= BASE58_LEN_MAX && v.len() <= PACKET_DATA_SIZE);
        let mut out = [0u8; PACKET_DATA_SIZE];
        let ours = decode(Encoding::Base58, &text, &mut out).map(|n| out[..n].to_vec());
        assert_eq!(
            ours.ok(),
            theirs,
            "case {case}: {:?}",
            String::from_utf8_lossy(&text)
        );
    }
}

#[test]
fn base64_agrees_with_the_base64_standard_engine() {
    let mut rng = StdRng::seed_from_u64(0x5157_0064);
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_";
    for case in 0..3000 {
        let text = random_text(&mut rng, alphabet, |b| STANDARD.encode(b));
        let theirs = STANDARD
            .decode(&text)
            .ok()
            .filter(|v| text.len() <= BASE64_LEN_MAX && v.len() <= PACKET_DATA_SIZE);
        let mut out = [0u8; PACKET_DATA_SIZE];
        let ours = decode(Encoding::Base64, &text, &mut out).map(|n| out[..n].to_vec());
        assert_eq!(
            ours.ok(),
            theirs,
            "case {case}: {:?}",
            String::from_utf8_lossy(&text)
        );
    }
}

#[test]
fn base64_short_strings_agree_exhaustively_over_a_small_alphabet() {
    // Every string of up to 4 characters over the symbols that matter to padding and trailing bits.
    let symbols = b"AQgh/=";
    let mut texts = vec![Vec::new()];
    for len in 1..=4 {
        let mut next = Vec::new();
        for t in texts.iter().filter(|t| t.len() == len - 1) {
            for &s in symbols {
                let mut t = t.clone();
                t.push(s);
                next.push(t);
            }
        }
        texts.extend(next);
    }
    for text in texts {
        let mut out = [0u8; PACKET_DATA_SIZE];
        let ours = decode(Encoding::Base64, &text, &mut out).map(|n| out[..n].to_vec());
        assert_eq!(
            ours.ok(),
            STANDARD.decode(&text).ok(),
            "{:?}",
            String::from_utf8_lossy(&text)
        );
    }
}
