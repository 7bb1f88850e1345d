//! The bench tag: how a bench bundle tells the engine which bundle it is.
//!
//! Every transaction bench-load generates carries, in its `recent_blockhash` (32 bytes that a
//! synthetic engine never checks against a ledger), a tag: magic `BRLY`, the run id, the bundle's
//! sequence number and the transaction's index in the bundle. The engine reads it from bytes it
//! already decodes, so no clock value has to travel inside a signed transaction: send times live
//! in the shared [`crate::sentlog::SentLog`], indexed by `seq`.
//!
//! Layout (little-endian): `b"BRLY"` ‖ run_id u32 ‖ seq u64 ‖ tx_index u8 ‖ 15 zero bytes.

/// Marks a blockhash as a bench tag.
pub const MAGIC: [u8; 4] = *b"BRLY";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tag {
    /// Distinguishes runs, so an engine left running across runs does not join stale bundles.
    pub run_id: u32,
    /// The bundle's sequence number in its run, from 0.
    pub seq: u64,
    /// The transaction's position in its bundle.
    pub tx_index: u8,
}

impl Tag {
    pub fn to_blockhash(self) -> [u8; 32] {
        let mut h = [0u8; 32];
        h[..4].copy_from_slice(&MAGIC);
        h[4..8].copy_from_slice(&self.run_id.to_le_bytes());
        h[8..16].copy_from_slice(&self.seq.to_le_bytes());
        h[16] = self.tx_index;
        h
    }

    /// Reads a tag back; `None` for any blockhash that is not one.
    pub fn from_blockhash(h: &[u8; 32]) -> Option<Tag> {
        if h[..4] != MAGIC || h[17..].iter().any(|&b| b != 0) {
            return None;
        }
        Some(Tag {
            run_id: u32::from_le_bytes(h[4..8].try_into().unwrap()),
            seq: u64::from_le_bytes(h[8..16].try_into().unwrap()),
            tx_index: h[16],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trips_through_a_blockhash() {
        let t = Tag {
            run_id: 7,
            seq: 1 << 40,
            tx_index: 4,
        };
        assert_eq!(Tag::from_blockhash(&t.to_blockhash()), Some(t));
    }

    #[test]
    fn a_real_blockhash_is_not_a_tag() {
        let mut h = Tag {
            run_id: 1,
            seq: 2,
            tx_index: 0,
        }
        .to_blockhash();
        h[31] = 1;
        assert_eq!(Tag::from_blockhash(&h), None);
        assert_eq!(Tag::from_blockhash(&[0x42; 32]), None);
    }
}
