//! Jito's bundle id: known answer from Jito's docs, and agreement with the obvious allocating
//! construction (bs58 strings joined with "," and hashed with sha2).

use bundle_relay::wire::{BundleId, bundle_id, signature_base58};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

fn sig(text: &str) -> [u8; 64] {
    bs58::decode(text).into_vec().unwrap().try_into().unwrap()
}

#[test]
fn jito_docs_two_signature_bundle_has_the_documented_id() {
    let a = sig(
        "3bC2M9fiACSjkTXZDgeNAuQ4ScTsdKGwR42ytFdhUvikqTmBheUxfsR1fDVsM5ADCMMspuwGkdm1uKbU246x5aE3",
    );
    let b = sig(
        "8t9hKYEYNbLvNqiSzP96S13XF1C2f1ro271Kdf7bkZ6EpjPLuDff1ywRy4gfaGSTubsM2FeYGDoT64ZwPm1cQUt",
    );
    let id = bundle_id([&a, &b]);
    let expected = "892b79ed49138bfb3aa5441f0df6e06ef34f9ee8f3976c15b323605bae0cf51d";
    assert_eq!(&id.to_hex()[..], expected.as_bytes());
    assert_eq!(id.to_string(), expected);
}

#[test]
fn bundle_order_changes_the_id() {
    let (a, b) = ([1u8; 64], [2u8; 64]);
    assert_ne!(bundle_id([&a, &b]), bundle_id([&b, &a]));
}

#[test]
fn one_transaction_bundle_id_is_the_hash_of_its_signature_text() {
    let a = [5u8; 64];
    let expected: [u8; 32] = Sha256::digest(bs58::encode(a).into_string()).into();
    assert_eq!(bundle_id([&a]), BundleId(expected));
}

#[test]
fn bundle_ids_agree_with_bs58_strings_joined_and_hashed() {
    let mut rng = StdRng::seed_from_u64(0x5157_001d);
    for _ in 0..500 {
        let n = (rng.next_u32() % 5 + 1) as usize;
        let sigs: Vec<[u8; 64]> = (0..n)
            .map(|_| {
                let mut s = [0u8; 64];
                rng.fill_bytes(&mut s);
                // Leading zero bytes become leading '1's: cover them.
                let zeros = (rng.next_u32() % 4) as usize;
                s[..zeros].fill(0);
                s
            })
            .collect();
        let joined = sigs
            .iter()
            .map(|s| bs58::encode(s).into_string())
            .collect::<Vec<_>>()
            .join(",");
        let expected: [u8; 32] = Sha256::digest(joined.as_bytes()).into();
        assert_eq!(bundle_id(&sigs), BundleId(expected));
    }
}

#[test]
fn signature_base58_matches_bs58() {
    let mut rng = StdRng::seed_from_u64(0x5157_0058);
    let mut buf = [0u8; 88];
    for zeros in 0..=64 {
        let mut s = [0u8; 64];
        rng.fill_bytes(&mut s);
        s[..zeros].fill(0);
        assert_eq!(
            signature_base58(&s, &mut buf),
            bs58::encode(s).into_string()
        );
    }
}
