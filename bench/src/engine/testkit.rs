//! Real signed Solana transactions and SendBundle requests for tests and the CPU probe.
//!
//! Transactions are written in the legacy wire format by hand (one signer, one memo-style
//! instruction) and signed with ed25519-dalek; the tests check the Solana crates decode them.

use bundle_relay::proto::bundle::Bundle;
use bundle_relay::proto::packet::{Meta, Packet};
use bundle_relay::proto::searcher::SendBundleRequest;
use ed25519_dalek::{Signer, SigningKey};

use crate::tag::Tag;

/// The memo program's address: any non-signer program id would do.
const PROGRAM_ID: [u8; 32] = [
    5, 74, 83, 90, 153, 41, 33, 6, 77, 36, 232, 113, 96, 218, 56, 124, 124, 53, 181, 221, 188, 146,
    187, 129, 228, 31, 168, 64, 65, 5, 68, 141,
];
/// Bytes of a one-signer transaction with an empty instruction payload of ≤127 bytes:
/// sig count (1) + signature (64) + header (3) + key count (1) + keys (64) + blockhash (32)
/// + instruction count (1) + program index (1) + account count (1) + account (1) + data len (1).
const FIXED_TX_BYTES: usize = 170;

fn compact_u16(out: &mut Vec<u8>, mut v: u16) {
    loop {
        let mut b = (v & 0x7f) as u8;
        v >>= 7;
        if v != 0 {
            b |= 0x80;
        }
        out.push(b);
        if v == 0 {
            break;
        }
    }
}

/// A signed legacy transaction from `key` with the given recent blockhash and instruction data.
pub fn signed_tx(key: &SigningKey, recent_blockhash: [u8; 32], data: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(FIXED_TX_BYTES + data.len());
    msg.extend_from_slice(&[1, 0, 1]); // 1 signer, 0 read-only signed, 1 read-only unsigned
    compact_u16(&mut msg, 2);
    msg.extend_from_slice(key.verifying_key().as_bytes());
    msg.extend_from_slice(&PROGRAM_ID);
    msg.extend_from_slice(&recent_blockhash);
    compact_u16(&mut msg, 1);
    msg.push(1); // program id index
    compact_u16(&mut msg, 1);
    msg.push(0); // the payer, as the instruction's one account
    compact_u16(&mut msg, data.len() as u16);
    msg.extend_from_slice(data);
    let sig = key.sign(&msg).to_bytes();
    let mut tx = Vec::with_capacity(1 + 64 + msg.len());
    compact_u16(&mut tx, 1);
    tx.extend_from_slice(&sig);
    tx.extend_from_slice(&msg);
    tx
}

/// A signed transaction of exactly `tx_bytes` bytes (at least 178), tagged for bench run
/// `run_id`, bundle `seq`, position `tx_index`. `nonce` makes otherwise equal ones differ.
pub fn tagged_tx(key: &SigningKey, tag: Tag, nonce: u64, tx_bytes: usize) -> Vec<u8> {
    let mut data_len = tx_bytes.saturating_sub(FIXED_TX_BYTES).max(8);
    if data_len > 127 {
        data_len -= 1; // the compact-u16 length takes a second byte
    }
    let mut data = vec![0u8; data_len];
    data[..8].copy_from_slice(&nonce.to_le_bytes());
    signed_tx(key, tag.to_blockhash(), &data)
}

/// Wraps raw transactions as Jito's clients do: data unchanged, `meta.size = data.len()`.
pub fn send_bundle_request(txs: &[Vec<u8>]) -> SendBundleRequest {
    SendBundleRequest {
        bundle: Some(Bundle {
            header: None,
            packets: txs
                .iter()
                .map(|d| Packet {
                    data: d.clone(),
                    meta: Some(Meta {
                        size: d.len() as u64,
                        ..Meta::default()
                    }),
                })
                .collect(),
        }),
    }
}

/// A bench bundle of `txs` transactions of `tx_bytes` each, all tagged with `seq`.
pub fn bench_bundle(
    key: &SigningKey,
    run_id: u32,
    seq: u64,
    txs: u8,
    tx_bytes: usize,
) -> Vec<Vec<u8>> {
    (0..txs)
        .map(|i| {
            let tag = Tag {
                run_id,
                seq,
                tx_index: i,
            };
            tagged_tx(key, tag, seq, tx_bytes)
        })
        .collect()
}

/// A deterministic signing key from a number.
pub fn key(n: u64) -> SigningKey {
    let mut seed = [7u8; 32];
    seed[..8].copy_from_slice(&n.to_le_bytes());
    SigningKey::from_bytes(&seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bincode::Options;
    use solana_transaction::versioned::VersionedTransaction;

    #[test]
    fn solana_crates_decode_and_sanitize_what_we_build() {
        for size in [178, 250, 300, 1232] {
            let tx = tagged_tx(
                &key(1),
                Tag {
                    run_id: 1,
                    seq: 2,
                    tx_index: 0,
                },
                9,
                size,
            );
            assert_eq!(tx.len(), size, "size {size}");
            let vt: VersionedTransaction = bincode::DefaultOptions::new()
                .with_fixint_encoding()
                .reject_trailing_bytes()
                .deserialize(&tx)
                .unwrap();
            vt.sanitize().unwrap();
            let sig = ed25519_dalek::Signature::from_bytes(tx[1..65].try_into().unwrap());
            key(1)
                .verifying_key()
                .verify_strict(&tx[65..], &sig)
                .unwrap();
        }
    }
}
