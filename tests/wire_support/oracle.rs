//! The Solana crates' verdict on one serialized transaction, the oracle the zero-copy validator
//! is held to. Shared by the wire tests and the `wire_tx` fuzz target (included by path there).

use bincode::Options;
use bundle_relay::wire::PACKET_DATA_SIZE;
use solana_transaction::versioned::VersionedTransaction;

/// The Solana crates' verdict on one serialized transaction: bincode as Solana RPC configures it
/// (fixed-width ints, reading at most one packet), the whole input consumed, then `sanitize`.
/// (bincode 1.x ignores the limit when deserializing from a slice, hence the reader.)
pub fn oracle(bytes: &[u8]) -> Option<VersionedTransaction> {
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
