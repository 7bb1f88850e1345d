//! Differential: the zero-copy validator must reach the Solana crates' verdict (bincode as Solana
//! RPC configures it, whole input consumed, then sanitize) on any bytes, and report the same facts.
#![no_main]

use bundle_relay::wire::validate;
use libfuzzer_sys::fuzz_target;

#[path = "../../tests/wire_support/oracle.rs"]
mod oracle;
use oracle::oracle;

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
