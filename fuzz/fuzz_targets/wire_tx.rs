//! Differential: the zero-copy validator must reach the Solana crates' verdict (bincode as Solana
//! RPC configures it, whole input consumed, then sanitize) on any bytes, and report the same facts.
#![no_main]

use bincode::Options;
use bundle_relay::wire::{PACKET_DATA_SIZE, validate};
use libfuzzer_sys::fuzz_target;
use solana_transaction::versioned::VersionedTransaction;

fn oracle(bytes: &[u8]) -> Option<VersionedTransaction> {
    let mut reader = bytes;
    let tx: VersionedTransaction = bincode::options()
        .with_limit(PACKET_DATA_SIZE as u64)
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .deserialize_from(&mut reader)
        .ok()?;
    if !reader.is_empty() {
        return None;
    }
    tx.sanitize().ok()?;
    Some(tx)
}

fuzz_target!(|data: &[u8]| {
    match (validate(data), oracle(data)) {
        (Ok(info), Some(tx)) => {
            assert_eq!(info.signature_count, tx.signatures.len());
            assert_eq!(info.first_signature, *tx.signatures[0].as_array());
            assert_eq!(info.recent_blockhash, tx.message.recent_blockhash().to_bytes());
            assert_eq!(info.message_offset + info.message_len, data.len());
        }
        (Err(_), None) => {}
        (ours, theirs) => panic!(
            "validator {ours:?} but Solana crates {}",
            if theirs.is_some() { "accept" } else { "reject" }
        ),
    }
});
