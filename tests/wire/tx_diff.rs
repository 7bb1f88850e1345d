//! Differential tests: the zero-copy validator against the Solana crates (bincode + sanitize) on
//! real signed transactions, their mutations and random bytes. Seeded; a failure prints the seed
//! and the bytes.

use crate::wire_support;

use bundle_relay::wire::{MessageVersion, validate};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use solana_message::VersionedMessage;
use wire_support::{Shape, layout, mutate, oracle, serialize, signed_tx};

/// Checks one input: same verdict, and for accepted inputs the same facts.
fn agree(bytes: &[u8], context: &str) -> bool {
    let ours = validate(bytes);
    let theirs = oracle(bytes);
    match (&ours, &theirs) {
        (Ok(info), Some(tx)) => {
            assert_eq!(info.signature_count, tx.signatures.len(), "{context}");
            assert_eq!(
                info.first_signature,
                *tx.signatures[0].as_array(),
                "{context}"
            );
            let version = match tx.message {
                VersionedMessage::Legacy(_) => MessageVersion::Legacy,
                VersionedMessage::V0(_) => MessageVersion::V0,
            };
            assert_eq!(info.version, version, "{context}");
            assert_eq!(
                info.recent_blockhash,
                tx.message.recent_blockhash().to_bytes(),
                "{context}"
            );
            let message = tx.message.serialize();
            assert_eq!(
                &bytes[info.message_offset..info.message_offset + info.message_len],
                &message[..],
                "{context}"
            );
            true
        }
        (Err(_), None) => false,
        _ => panic!(
            "{context}: validator says {ours:?}, Solana crates say {}; bytes {bytes:02x?}",
            if theirs.is_some() { "valid" } else { "invalid" }
        ),
    }
}

#[test]
fn signed_transactions_of_every_shape_are_accepted_with_the_same_facts() {
    let mut rng = StdRng::seed_from_u64(0x5157_0001);
    for case in 0..400 {
        let shape = Shape::random(&mut rng);
        let tx = signed_tx(&mut rng, shape);
        let bytes = serialize(&tx);
        assert!(
            agree(&bytes, &format!("case {case} {shape:?}")),
            "case {case} rejected"
        );
    }
}

#[test]
fn mutated_transactions_get_the_solana_verdict() {
    let mut rng = StdRng::seed_from_u64(0x5157_0002);
    let (mut accepted, mut rejected) = (0, 0);
    for case in 0..600 {
        let shape = Shape::random(&mut rng);
        let tx = signed_tx(&mut rng, shape);
        let good = serialize(&tx);
        let l = layout(&tx);
        for m in 0..8 {
            let mut bytes = good.clone();
            for _ in 0..rng.random_range(1..=3) {
                if bytes.is_empty() {
                    break;
                }
                mutate(&mut rng, &mut bytes, &l);
            }
            if agree(&bytes, &format!("case {case} mutation {m}")) {
                accepted += 1;
            } else {
                rejected += 1;
            }
        }
    }
    eprintln!("accepted {accepted}, rejected {rejected}");
    // Both verdicts must be well represented, or the mutations test nothing.
    assert!(
        accepted > 300 && rejected > 2000,
        "accepted {accepted}, rejected {rejected}"
    );
}

#[test]
fn random_bytes_get_the_solana_verdict() {
    let mut rng = StdRng::seed_from_u64(0x5157_0003);
    for case in 0..20_000 {
        let mut bytes = vec![0u8; rng.random_range(0..400)];
        rng.fill_bytes(&mut bytes);
        // Half the cases start like a transaction so the parse gets past the signatures.
        if case % 2 == 0 && bytes.len() > 70 {
            bytes[0] = 1;
            bytes[65] = rng.random_range(0..4);
            bytes[66] = rng.random_range(0..2);
            bytes[67] = rng.random_range(0..3);
            bytes[68] = rng.random_range(0..4);
        }
        agree(&bytes, &format!("case {case}"));
    }
}

#[test]
fn oversized_transactions_are_rejected_by_both() {
    let bytes = vec![0u8; 1233];
    assert!(!agree(&bytes, "1233 zero bytes"));
}
