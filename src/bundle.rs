//! A bundle as the relay holds it: the glue between JSON-RPC params (`jsonrpc`) and the wire
//! layer (`wire`). Each transaction string is decoded straight into its fixed buffer, validated
//! without copying, and the bundle id computed from the first signatures: no allocation.
//!
//! A rejection is a -32602 naming the offending transaction's index and the cause, e.g.
//! `transaction 2: 5 trailing bytes after the message`.

use crate::arena::SlotMut;
use crate::jsonrpc::{JsonStr, RpcError};
use crate::wire::{
    self, BASE58_LEN_MAX, BASE64_LEN_MAX, BUNDLE_TXS_MAX, BundleId, Encoding, PACKET_DATA_SIZE,
    TxInfo,
};

/// The longest transaction string any encoding allows: the size of the stack buffer an escaped
/// string (`\/` in base64) is unescaped into.
const ENCODED_LEN_MAX: usize = if BASE58_LEN_MAX > BASE64_LEN_MAX {
    BASE58_LEN_MAX
} else {
    BASE64_LEN_MAX
};

/// Up to [`BUNDLE_TXS_MAX`] transactions in their wire form, with what the relay needs of each.
/// Sized for the worst case so it can live in a preallocated slot.
#[derive(Clone)]
pub struct BundleBuf {
    txs: [[u8; PACKET_DATA_SIZE]; BUNDLE_TXS_MAX],
    lens: [u16; BUNDLE_TXS_MAX],
    count: u8,
    first_signatures: [[u8; 64]; BUNDLE_TXS_MAX],
}

impl core::fmt::Debug for BundleBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BundleBuf")
            .field("lens", &&self.lens[..self.len()])
            .finish()
    }
}

impl Default for BundleBuf {
    fn default() -> Self {
        BundleBuf::new()
    }
}

impl BundleBuf {
    pub const fn new() -> BundleBuf {
        BundleBuf {
            txs: [[0; PACKET_DATA_SIZE]; BUNDLE_TXS_MAX],
            lens: [0; BUNDLE_TXS_MAX],
            count: 0,
            first_signatures: [[0; 64]; BUNDLE_TXS_MAX],
        }
    }

    /// Number of transactions held.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Transaction `i`'s wire bytes.
    pub fn tx(&self, i: usize) -> &[u8] {
        assert!(
            i < self.len(),
            "transaction {i} of a {}-transaction bundle",
            self.len()
        );
        &self.txs[i][..self.lens[i] as usize]
    }

    /// The transactions' wire bytes in bundle order.
    pub fn txs(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        (0..self.len()).map(|i| self.tx(i))
    }

    /// Transaction `i`'s first signature (its transaction id).
    pub fn first_signature(&self, i: usize) -> &[u8; 64] {
        assert!(i < self.len());
        &self.first_signatures[i]
    }

    /// Jito's bundle id for the transactions held.
    pub fn id(&self) -> BundleId {
        wire::bundle_id(&self.first_signatures[..self.len()])
    }

    /// Decodes and validates `transactions` into this buffer, replacing what it held, and
    /// returns the bundle id. On error the buffer is left empty.
    pub fn decode<'r>(
        &mut self,
        transactions: &[JsonStr<'_>],
        encoding: TxEncoding,
    ) -> Result<BundleId, RpcError<'r>> {
        self.count = 0;
        assert!(
            (1..=BUNDLE_TXS_MAX).contains(&transactions.len()),
            "the JSON-RPC layer checks the transaction count"
        );
        for (i, text) in transactions.iter().enumerate() {
            let (len, info) = decode_one(text, encoding.encoding, &mut self.txs[i])
                .map_err(|e| RpcError::invalid_transaction(i, &e.with(encoding)))?;
            self.lens[i] = len as u16;
            distinct(&self.first_signatures[..i], &info.first_signature, i)?;
            self.first_signatures[i] = info.first_signature;
        }
        self.count = transactions.len() as u8;
        Ok(self.id())
    }
}

/// What [`decode_into_slot`] learnt of a bundle besides its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub id: BundleId,
    /// The first transaction's first signature: `sendTransaction`'s result.
    pub first_signature: [u8; 64],
}

/// Decodes and validates `transactions` into a held arena slot's decode room (each into its
/// fixed region; lengths, count and id into the slot's metadata), from which the caller encodes
/// the slot's frame: the relay's request path. On error the slot's metadata says zero
/// transactions.
pub fn decode_into_slot<'r>(
    slot: &mut SlotMut<'_>,
    transactions: &[JsonStr<'_>],
    encoding: TxEncoding,
) -> Result<Decoded, RpcError<'r>> {
    slot.meta.tx_count = 0;
    assert!(
        (1..=BUNDLE_TXS_MAX).contains(&transactions.len()),
        "the JSON-RPC layer checks the transaction count"
    );
    let mut sigs = [[0u8; 64]; BUNDLE_TXS_MAX];
    for (i, text) in transactions.iter().enumerate() {
        let region: &mut [u8; PACKET_DATA_SIZE] = slot
            .tx_region(i)
            .try_into()
            .expect("a slot's transaction region is one packet");
        let (len, info) = decode_one(text, encoding.encoding, region)
            .map_err(|e| RpcError::invalid_transaction(i, &e.with(encoding)))?;
        slot.meta.tx_len[i] = len as u16;
        distinct(&sigs[..i], &info.first_signature, i)?;
        sigs[i] = info.first_signature;
    }
    let id = wire::bundle_id(&sigs[..transactions.len()]);
    slot.meta.tx_count = transactions.len() as u8;
    slot.meta.bundle_id = id.0;
    Ok(Decoded {
        id,
        first_signature: sigs[0],
    })
}

/// Transaction `i` (first signature `sig`) is none of those before it (`earlier`): the
/// validator refuses a bundle that holds a transaction twice, so it could never land. A
/// transaction's first signature signs its message, so the same one is the same transaction.
fn distinct<'r>(earlier: &[[u8; 64]], sig: &[u8; 64], i: usize) -> Result<(), RpcError<'r>> {
    match earlier.iter().position(|s| s == sig) {
        Some(first) => Err(RpcError::invalid_transaction(i, &Repeats(first))),
        None => Ok(()),
    }
}

/// A transaction that is an earlier one of the same bundle again (its index).
struct Repeats(usize);

impl core::fmt::Display for Repeats {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "repeats transaction {} (same signature): a bundle's transactions must differ",
            self.0
        )
    }
}

/// The encoding a request's transactions are decoded in, and whether the request named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxEncoding {
    pub encoding: Encoding,
    /// Else it is base58, Jito's default.
    pub given: bool,
}

impl TxEncoding {
    pub const fn new(encoding: Encoding, given: bool) -> TxEncoding {
        TxEncoding { encoding, given }
    }
}

/// A refused transaction string's error as the bot reads it: base64 sent without naming its
/// encoding fails as base58 at its first `+`, `/`, `=`, `0`, `O`, `I` or `l`, and the error
/// then says why base58 was read, since that is the mistake to fix.
struct Told {
    error: TxStrError,
    defaulted: bool,
}

impl TxStrError {
    fn with(self, encoding: TxEncoding) -> Told {
        Told {
            error: self,
            defaulted: !encoding.given,
        }
    }
}

impl core::fmt::Display for Told {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.error.fmt(f)?;
        if self.defaulted
            && let TxStrError::Wire(wire::WireError::Decode(wire::DecodeError::InvalidCharacter {
                encoding: Encoding::Base58,
                ..
            })) = self.error
        {
            f.write_str(r#" (base58 is the default; base64 needs {"encoding":"base64"})"#)?;
        }
        Ok(())
    }
}

/// Why a transaction string was refused before or by the wire layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxStrError {
    /// After unescaping, the string holds more bytes than any encoded transaction may: it has
    /// characters outside the base58/base64 alphabets.
    NotAscii,
    Wire(wire::WireError),
}

impl core::fmt::Display for TxStrError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TxStrError::NotAscii => {
                f.write_str("contains characters outside the base58 and base64 alphabets")
            }
            TxStrError::Wire(e) => e.fmt(f),
        }
    }
}

fn decode_one(
    text: &JsonStr<'_>,
    encoding: Encoding,
    out: &mut [u8; PACKET_DATA_SIZE],
) -> Result<(usize, TxInfo), TxStrError> {
    if !text.has_escapes() {
        return wire::decode_and_validate(encoding, text.raw(), out).map_err(TxStrError::Wire);
    }
    let mut unescaped = [0u8; ENCODED_LEN_MAX];
    let s = text
        .unescape_into(&mut unescaped)
        .map_err(|_| TxStrError::NotAscii)?;
    wire::decode_and_validate(encoding, s, out).map_err(TxStrError::Wire)
}
