//! Zero-copy structural validator of one serialized `VersionedTransaction`. It is NOT a
//! deserializer and NOT a signature check: it builds no transaction, verifies no signature,
//! and reads only the facts the relay needs ([`TxInfo`]).
//!
//! The verdict is exactly the Solana crates' verdict: bincode (fixed-width integers, rejecting
//! trailing bytes, limited to [`PACKET_DATA_SIZE`]) deserialization of
//! `solana_transaction::versioned::VersionedTransaction`, then `.sanitize()`. The differential tests
//! and the `wire_tx` fuzz target hold it to that. Deserialization problems are reported before
//! sanitize problems because that is the order the crates find them in; within each phase the
//! first problem in wire order (then in `sanitize`'s own order) is the one reported.
//!
//! Wire layout (all counts are compact-u16, see [`read_compact_u16`]):
//!
//! ```text
//! signature count, signatures (64 B each)
//! message:
//!   legacy: num_required_signatures (< 0x80), num_readonly_signed, num_readonly_unsigned
//!   v0:     0x80 | version (0), then the same three header bytes
//!   account key count, keys (32 B each), recent blockhash (32 B)
//!   instruction count, per instruction: program id index (1 B), account index count,
//!     account indexes (1 B each), data length, data
//!   v0 only: lookup count, per lookup: table key (32 B), writable index count, indexes,
//!     read-only index count, indexes
//! ```

use core::fmt;

use super::limits::PACKET_DATA_SIZE;

const SIGNATURE_LEN: usize = 64;
const PUBKEY_LEN: usize = 32;
const BLOCKHASH_LEN: usize = 32;
/// The top bit of a message's first byte marks a versioned message; a legacy message starts with
/// `num_required_signatures`, which therefore stays below 128.
const VERSION_PREFIX: u8 = 0x80;
/// Account indexes are u8, so a message can address at most 256 accounts (static + looked up).
const ACCOUNTS_MAX: usize = 256;

/// Message format of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageVersion {
    Legacy,
    V0,
}

/// What the relay needs from a valid transaction, copied out so it outlives no borrow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxInfo {
    /// Number of signatures (equals the message's required signers).
    pub signature_count: usize,
    /// The first signature: the transaction id and the input to the bundle id.
    pub first_signature: [u8; SIGNATURE_LEN],
    pub version: MessageVersion,
    /// Byte offset of the message in the transaction (just after the signatures).
    pub message_offset: usize,
    /// Byte length of the message (to the end of the transaction).
    pub message_len: usize,
    pub recent_blockhash: [u8; BLOCKHASH_LEN],
}

/// A part of the transaction, named in truncation and encoding errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    SignatureCount,
    Signatures,
    MessageHeader,
    AccountKeyCount,
    AccountKeys,
    RecentBlockhash,
    InstructionCount,
    ProgramIdIndex { instruction: usize },
    AccountIndexCount { instruction: usize },
    AccountIndexes { instruction: usize },
    DataLength { instruction: usize },
    Data { instruction: usize },
    LookupCount,
    LookupTableKey { lookup: usize },
    WritableIndexCount { lookup: usize },
    WritableIndexes { lookup: usize },
    ReadonlyIndexCount { lookup: usize },
    ReadonlyIndexes { lookup: usize },
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Field::SignatureCount => f.write_str("signature count"),
            Field::Signatures => f.write_str("signatures"),
            Field::MessageHeader => f.write_str("message header"),
            Field::AccountKeyCount => f.write_str("account key count"),
            Field::AccountKeys => f.write_str("account keys"),
            Field::RecentBlockhash => f.write_str("recent blockhash"),
            Field::InstructionCount => f.write_str("instruction count"),
            Field::ProgramIdIndex { instruction } => {
                write!(f, "program id index of instruction {instruction}")
            }
            Field::AccountIndexCount { instruction } => {
                write!(f, "account index count of instruction {instruction}")
            }
            Field::AccountIndexes { instruction } => {
                write!(f, "account indexes of instruction {instruction}")
            }
            Field::DataLength { instruction } => {
                write!(f, "data length of instruction {instruction}")
            }
            Field::Data { instruction } => write!(f, "data of instruction {instruction}"),
            Field::LookupCount => f.write_str("address table lookup count"),
            Field::LookupTableKey { lookup } => {
                write!(f, "table key of address table lookup {lookup}")
            }
            Field::WritableIndexCount { lookup } => {
                write!(f, "writable index count of address table lookup {lookup}")
            }
            Field::WritableIndexes { lookup } => {
                write!(f, "writable indexes of address table lookup {lookup}")
            }
            Field::ReadonlyIndexCount { lookup } => {
                write!(f, "read-only index count of address table lookup {lookup}")
            }
            Field::ReadonlyIndexes { lookup } => {
                write!(f, "read-only indexes of address table lookup {lookup}")
            }
        }
    }
}

/// Why a transaction was rejected. Each Display names the problem and where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxError {
    /// More bytes than one packet can carry.
    TooLong { len: usize },
    /// The transaction ends inside `field`, which starts at byte `offset`.
    Truncated { field: Field, offset: usize },
    /// A compact-u16 with a zero continuation byte (another encoding of a smaller number).
    NonCanonicalLength { field: Field, offset: usize },
    /// A compact-u16 whose third byte asks for a fourth.
    LengthTooLong { field: Field, offset: usize },
    /// A compact-u16 whose third byte carries bits above 16.
    LengthOverflow { field: Field, offset: usize },
    /// A versioned message with a version other than 0.
    UnsupportedVersion { version: u8 },
    /// Bytes left after a complete transaction.
    TrailingBytes { count: usize },
    /// The header's signers and read-only unsigned accounts need more static keys than exist.
    HeaderExceedsAccounts {
        required_signatures: u8,
        readonly_unsigned: u8,
        static_accounts: usize,
    },
    /// Every signer is read-only, so there is no writable fee payer.
    NoWritableFeePayer {
        required_signatures: u8,
        readonly_signed: u8,
    },
    /// A v0 address table lookup that loads no account.
    EmptyLookup { lookup: usize },
    /// More accounts than a u8 index can address.
    TooManyAccounts {
        static_accounts: usize,
        lookup_accounts: usize,
    },
    /// A program id index beyond the static account keys.
    ProgramIdOutOfRange {
        instruction: usize,
        index: u8,
        static_accounts: usize,
    },
    /// A program id index of 0: the fee payer cannot be a program.
    ProgramIdIsFeePayer { instruction: usize },
    /// An account index beyond the transaction's accounts.
    AccountIndexOutOfRange {
        instruction: usize,
        index: u8,
        accounts: usize,
    },
    /// Signature count differs from the message's required signers.
    SignatureCountMismatch { signatures: usize, required: u8 },
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TxError::TooLong { len } => write!(
                f,
                "transaction is {len} bytes; the limit is {PACKET_DATA_SIZE}"
            ),
            TxError::Truncated { field, offset } => {
                write!(f, "transaction ends inside the {field} (at byte {offset})")
            }
            TxError::NonCanonicalLength { field, offset } => write!(
                f,
                "{field} at byte {offset} is not canonically encoded (zero continuation byte)"
            ),
            TxError::LengthTooLong { field, offset } => write!(
                f,
                "{field} at byte {offset} is encoded in more than 3 bytes"
            ),
            TxError::LengthOverflow { field, offset } => {
                write!(f, "{field} at byte {offset} overflows 16 bits")
            }
            TxError::UnsupportedVersion { version: 127 } => {
                f.write_str("unsupported message version 127 (reserved for off-chain messages)")
            }
            TxError::UnsupportedVersion { version } => {
                write!(f, "unsupported message version {version}")
            }
            TxError::TrailingBytes { count } => {
                write!(f, "{count} trailing bytes after the message")
            }
            TxError::HeaderExceedsAccounts {
                required_signatures,
                readonly_unsigned,
                static_accounts,
            } => write!(
                f,
                "message header needs {required_signatures} signers and {readonly_unsigned} \
                 read-only unsigned accounts but the message has {static_accounts} static accounts"
            ),
            TxError::NoWritableFeePayer {
                required_signatures,
                readonly_signed,
            } => write!(
                f,
                "message header marks {readonly_signed} of its {required_signatures} signers \
                 read-only, leaving no writable fee payer"
            ),
            TxError::EmptyLookup { lookup } => {
                write!(f, "address table lookup {lookup} loads no accounts")
            }
            TxError::TooManyAccounts {
                static_accounts,
                lookup_accounts,
            } => write!(
                f,
                "message uses {} accounts ({static_accounts} static + {lookup_accounts} from \
                 lookup tables); at most {ACCOUNTS_MAX} are addressable",
                static_accounts + lookup_accounts
            ),
            TxError::ProgramIdOutOfRange {
                instruction,
                index,
                static_accounts,
            } => write!(
                f,
                "instruction {instruction} uses program id index {index} but the message has \
                 {static_accounts} static accounts"
            ),
            TxError::ProgramIdIsFeePayer { instruction } => write!(
                f,
                "instruction {instruction} uses program id index 0, which is the fee payer"
            ),
            TxError::AccountIndexOutOfRange {
                instruction,
                index,
                accounts,
            } => write!(
                f,
                "instruction {instruction} uses account index {index} but the transaction has \
                 {accounts} accounts"
            ),
            TxError::SignatureCountMismatch {
                signatures,
                required,
            } => write!(
                f,
                "signature count {signatures} does not match the {required} signatures the \
                 message requires"
            ),
        }
    }
}

impl core::error::Error for TxError {}

/// A cursor over the transaction bytes; every read names the field for its error.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, field: Field) -> Result<&'a [u8], TxError> {
        let start = self.at;
        match self.bytes.get(start..start.saturating_add(len)) {
            Some(s) => {
                self.at = start + len;
                Ok(s)
            }
            None => Err(TxError::Truncated {
                field,
                offset: start,
            }),
        }
    }

    fn byte(&mut self, field: Field) -> Result<u8, TxError> {
        Ok(self.take(1, field)?[0])
    }

    /// Reads a compact-u16 (`solana_short_vec::ShortU16`): 7 bits per byte, least significant
    /// first, high bit = more. Strict form only, as short_vec enforces: a byte after the first may
    /// not be 0x00, the third byte may not continue, and the value must fit 16 bits.
    fn compact_u16(&mut self, field: Field) -> Result<usize, TxError> {
        let offset = self.at;
        let mut value = 0usize;
        for nth in 0..3 {
            let b = self.bytes.get(self.at).copied().ok_or(TxError::Truncated {
                field,
                offset: self.at,
            })?;
            self.at += 1;
            if b == 0 && nth != 0 {
                return Err(TxError::NonCanonicalLength { field, offset });
            }
            let done = b & 0x80 == 0;
            if nth == 2 && !done {
                return Err(TxError::LengthTooLong { field, offset });
            }
            value |= usize::from(b & 0x7F) << (7 * nth);
            if value > usize::from(u16::MAX) {
                return Err(TxError::LengthOverflow { field, offset });
            }
            if done {
                return Ok(value);
            }
        }
        unreachable!("the third byte either ends the value or is rejected")
    }

    /// Reads a compact-u16 count, then that many `item_len`-byte items.
    fn vec(
        &mut self,
        item_len: usize,
        count_field: Field,
        items_field: Field,
    ) -> Result<&'a [u8], TxError> {
        let count = self.compact_u16(count_field)?;
        self.take(count * item_len, items_field)
    }
}

/// Reads a compact-u16 from `bytes`; exposed for tests of the encoding rules.
pub fn read_compact_u16(bytes: &[u8]) -> Result<(u16, usize), TxError> {
    let mut r = Reader { bytes, at: 0 };
    let v = r.compact_u16(Field::SignatureCount)?;
    Ok((v as u16, r.at))
}

/// Validates one serialized transaction; see the module doc for the rules it enforces.
pub fn validate(tx: &[u8]) -> Result<TxInfo, TxError> {
    if tx.len() > PACKET_DATA_SIZE {
        return Err(TxError::TooLong { len: tx.len() });
    }
    let mut r = Reader { bytes: tx, at: 0 };

    // Deserialization: structure only, in wire order.
    let signatures = r.vec(SIGNATURE_LEN, Field::SignatureCount, Field::Signatures)?;
    let signature_count = signatures.len() / SIGNATURE_LEN;
    let message_offset = r.at;

    let first = r.byte(Field::MessageHeader)?;
    let version = if first & VERSION_PREFIX != 0 {
        let v = first & !VERSION_PREFIX;
        if v != 0 {
            return Err(TxError::UnsupportedVersion { version: v });
        }
        MessageVersion::V0
    } else {
        MessageVersion::Legacy
    };
    let header = match version {
        MessageVersion::Legacy => {
            let rest = r.take(2, Field::MessageHeader)?;
            [first, rest[0], rest[1]]
        }
        MessageVersion::V0 => {
            let h = r.take(3, Field::MessageHeader)?;
            [h[0], h[1], h[2]]
        }
    };
    let [required_signatures, readonly_signed, readonly_unsigned] = header;

    let static_accounts = r
        .vec(PUBKEY_LEN, Field::AccountKeyCount, Field::AccountKeys)?
        .len()
        / PUBKEY_LEN;
    let blockhash = r.take(BLOCKHASH_LEN, Field::RecentBlockhash)?;

    let instruction_count = r.compact_u16(Field::InstructionCount)?;
    let instructions_at = r.at;
    for instruction in 0..instruction_count {
        r.byte(Field::ProgramIdIndex { instruction })?;
        r.vec(
            1,
            Field::AccountIndexCount { instruction },
            Field::AccountIndexes { instruction },
        )?;
        r.vec(
            1,
            Field::DataLength { instruction },
            Field::Data { instruction },
        )?;
    }

    let mut lookup_accounts = 0usize;
    let mut empty_lookup = None;
    if version == MessageVersion::V0 {
        let lookups = r.compact_u16(Field::LookupCount)?;
        for lookup in 0..lookups {
            r.take(PUBKEY_LEN, Field::LookupTableKey { lookup })?;
            let writable = r.vec(
                1,
                Field::WritableIndexCount { lookup },
                Field::WritableIndexes { lookup },
            )?;
            let readonly = r.vec(
                1,
                Field::ReadonlyIndexCount { lookup },
                Field::ReadonlyIndexes { lookup },
            )?;
            let n = writable.len() + readonly.len();
            if n == 0 && empty_lookup.is_none() {
                empty_lookup = Some(lookup);
            }
            lookup_accounts += n;
        }
    }
    if r.at != tx.len() {
        return Err(TxError::TrailingBytes {
            count: tx.len() - r.at,
        });
    }

    // Sanitize, in `VersionedTransaction::sanitize`'s order: message first, then signatures.
    if usize::from(required_signatures) + usize::from(readonly_unsigned) > static_accounts {
        return Err(TxError::HeaderExceedsAccounts {
            required_signatures,
            readonly_unsigned,
            static_accounts,
        });
    }
    if readonly_signed >= required_signatures {
        return Err(TxError::NoWritableFeePayer {
            required_signatures,
            readonly_signed,
        });
    }
    if let Some(lookup) = empty_lookup {
        return Err(TxError::EmptyLookup { lookup });
    }
    // Legacy messages have no lookups; their indexes are bounded by the static keys alone.
    let accounts = static_accounts + lookup_accounts;
    if version == MessageVersion::V0 && accounts > ACCOUNTS_MAX {
        return Err(TxError::TooManyAccounts {
            static_accounts,
            lookup_accounts,
        });
    }
    // Second walk over instructions already known to be well formed.
    let mut at = instructions_at;
    for instruction in 0..instruction_count {
        let program_id_index = tx[at];
        at += 1;
        let (n, len) = read_compact_u16(&tx[at..]).expect("instruction parsed above");
        at += len;
        let indexes = &tx[at..at + usize::from(n)];
        at += usize::from(n);
        let (data_len, len) = read_compact_u16(&tx[at..]).expect("instruction parsed above");
        at += len + usize::from(data_len);

        if usize::from(program_id_index) >= static_accounts {
            return Err(TxError::ProgramIdOutOfRange {
                instruction,
                index: program_id_index,
                static_accounts,
            });
        }
        if program_id_index == 0 {
            return Err(TxError::ProgramIdIsFeePayer { instruction });
        }
        if let Some(&index) = indexes.iter().find(|&&i| usize::from(i) >= accounts) {
            return Err(TxError::AccountIndexOutOfRange {
                instruction,
                index,
                accounts,
            });
        }
    }
    if signature_count != usize::from(required_signatures) {
        return Err(TxError::SignatureCountMismatch {
            signatures: signature_count,
            required: required_signatures,
        });
    }
    // `sanitize_signatures` also requires signatures <= static keys; the header check above already
    // bounds required signers (= signatures here) by the static keys.
    debug_assert!(signature_count <= static_accounts);

    let mut first_signature = [0u8; SIGNATURE_LEN];
    // A valid transaction has at least one signature: its fee payer must be a writable signer.
    first_signature.copy_from_slice(&signatures[..SIGNATURE_LEN]);
    let mut recent_blockhash = [0u8; BLOCKHASH_LEN];
    recent_blockhash.copy_from_slice(blockhash);
    Ok(TxInfo {
        signature_count,
        first_signature,
        version,
        message_offset,
        message_len: tx.len() - message_offset,
        recent_blockhash,
    })
}
