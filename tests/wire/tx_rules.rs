//! The validator's rules as a decision table: one test per row, named for the row. Each row checks
//! the exact error (and its message) and that the Solana crates reach the same verdict.

use crate::wire_support;

use bundle_relay::wire::{Field, MessageVersion, TxError, read_compact_u16, validate};
use wire_support::{RawTx, oracle};

fn rejected(bytes: &[u8], expected: TxError, message: &str) {
    assert_eq!(validate(bytes), Err(expected));
    assert_eq!(expected.to_string(), message);
    assert!(oracle(bytes).is_none(), "the Solana crates accept it");
}

fn accepted(bytes: &[u8]) -> bundle_relay::wire::TxInfo {
    assert!(oracle(bytes).is_some(), "the Solana crates reject it");
    validate(bytes).expect("valid")
}

#[test]
fn minimal_legacy_transaction_is_accepted_with_its_facts() {
    let raw = RawTx::legacy();
    let info = accepted(&raw.to_bytes());
    assert_eq!(info.signature_count, 1);
    assert_eq!(info.first_signature, [7; 64]);
    assert_eq!(info.version, MessageVersion::Legacy);
    assert_eq!(info.message_offset, 65);
    assert_eq!(info.message_len, raw.to_bytes().len() - 65);
    assert_eq!(info.recent_blockhash, [9; 32]);
}

#[test]
fn v0_transaction_with_a_lookup_is_accepted() {
    let info = accepted(&RawTx::v0().to_bytes());
    assert_eq!(info.version, MessageVersion::V0);
    assert_eq!(info.recent_blockhash, [9; 32]);
}

#[test]
fn v0_instruction_may_use_looked_up_account_indexes() {
    let mut raw = RawTx::v0();
    // 2 static + 2 looked up: indexes 2 and 3 name the looked-up accounts.
    raw.instructions = vec![(1, vec![0, 2, 3], vec![])];
    accepted(&raw.to_bytes());
}

#[test]
fn empty_input_is_rejected_as_truncated_signature_count() {
    rejected(
        &[],
        TxError::Truncated {
            field: Field::SignatureCount,
            offset: 0,
        },
        "transaction ends inside the signature count (at byte 0)",
    );
}

#[test]
fn signature_count_with_zero_continuation_byte_is_rejected() {
    let mut bytes = RawTx::legacy().to_bytes();
    bytes.splice(0..1, [0x81, 0x00]);
    rejected(
        &bytes,
        TxError::NonCanonicalLength {
            field: Field::SignatureCount,
            offset: 0,
        },
        "signature count at byte 0 is not canonically encoded (zero continuation byte)",
    );
}

#[test]
fn signature_count_whose_third_byte_continues_is_rejected() {
    let mut bytes = RawTx::legacy().to_bytes();
    bytes.splice(0..1, [0x81, 0x80, 0x80]);
    rejected(
        &bytes,
        TxError::LengthTooLong {
            field: Field::SignatureCount,
            offset: 0,
        },
        "signature count at byte 0 is encoded in more than 3 bytes",
    );
}

#[test]
fn signature_count_over_16_bits_is_rejected() {
    let mut bytes = RawTx::legacy().to_bytes();
    bytes.splice(0..1, [0xff, 0xff, 0x04]);
    rejected(
        &bytes,
        TxError::LengthOverflow {
            field: Field::SignatureCount,
            offset: 0,
        },
        "signature count at byte 0 overflows 16 bits",
    );
}

#[test]
fn compact_u16_strict_forms_decode_and_aliases_do_not() {
    assert_eq!(read_compact_u16(&[0x00]), Ok((0, 1)));
    assert_eq!(read_compact_u16(&[0x7f]), Ok((127, 1)));
    assert_eq!(read_compact_u16(&[0x80, 0x01]), Ok((128, 2)));
    assert_eq!(read_compact_u16(&[0x80, 0x80, 0x01]), Ok((16384, 3)));
    assert_eq!(read_compact_u16(&[0xff, 0xff, 0x03]), Ok((65535, 3)));
    assert!(matches!(
        read_compact_u16(&[0x80, 0x00]),
        Err(TxError::NonCanonicalLength { .. })
    ));
    assert!(matches!(
        read_compact_u16(&[0x80]),
        Err(TxError::Truncated { offset: 1, .. })
    ));
}

#[test]
fn signatures_cut_short_are_rejected() {
    let bytes = RawTx::legacy().to_bytes();
    rejected(
        &bytes[..40],
        TxError::Truncated {
            field: Field::Signatures,
            offset: 1,
        },
        "transaction ends inside the signatures (at byte 1)",
    );
}

#[test]
fn instruction_data_cut_short_is_rejected_naming_the_instruction() {
    let bytes = RawTx::legacy().to_bytes();
    let cut = bytes.len() - 1;
    rejected(
        &bytes[..cut],
        TxError::Truncated {
            field: Field::Data { instruction: 0 },
            offset: cut - 2,
        },
        &format!(
            "transaction ends inside the data of instruction 0 (at byte {})",
            cut - 2
        ),
    );
}

#[test]
fn message_version_1_is_rejected() {
    let mut raw = RawTx::v0();
    raw.version = Some(1);
    rejected(
        &raw.to_bytes(),
        TxError::UnsupportedVersion { version: 1 },
        "unsupported message version 1",
    );
}

#[test]
fn message_version_127_off_chain_is_rejected() {
    let mut raw = RawTx::v0();
    raw.version = Some(127);
    rejected(
        &raw.to_bytes(),
        TxError::UnsupportedVersion { version: 127 },
        "unsupported message version 127 (reserved for off-chain messages)",
    );
}

#[test]
fn trailing_bytes_after_the_message_are_rejected() {
    let mut bytes = RawTx::legacy().to_bytes();
    bytes.extend_from_slice(&[0; 5]);
    rejected(
        &bytes,
        TxError::TrailingBytes { count: 5 },
        "5 trailing bytes after the message",
    );
}

#[test]
fn transaction_over_1232_bytes_is_rejected() {
    let mut raw = RawTx::legacy();
    raw.instructions[0].2 = vec![0; 1200];
    rejected(
        &raw.to_bytes(),
        TxError::TooLong {
            len: raw.to_bytes().len(),
        },
        &format!(
            "transaction is {} bytes; the limit is 1232",
            raw.to_bytes().len()
        ),
    );
}

#[test]
fn header_needing_more_static_keys_than_exist_is_rejected() {
    let mut raw = RawTx::legacy();
    raw.header = [1, 0, 2];
    rejected(
        &raw.to_bytes(),
        TxError::HeaderExceedsAccounts {
            required_signatures: 1,
            readonly_unsigned: 2,
            static_accounts: 2,
        },
        "message header needs 1 signers and 2 read-only unsigned accounts but the message has 2 \
         static accounts",
    );
}

#[test]
fn header_with_every_signer_read_only_is_rejected() {
    let mut raw = RawTx::v0();
    raw.header = [1, 1, 1];
    rejected(
        &raw.to_bytes(),
        TxError::NoWritableFeePayer {
            required_signatures: 1,
            readonly_signed: 1,
        },
        "message header marks 1 of its 1 signers read-only, leaving no writable fee payer",
    );
}

#[test]
fn message_requiring_no_signatures_is_rejected() {
    let mut raw = RawTx::legacy();
    raw.signatures.clear();
    raw.header = [0, 0, 0];
    rejected(
        &raw.to_bytes(),
        TxError::NoWritableFeePayer {
            required_signatures: 0,
            readonly_signed: 0,
        },
        "message header marks 0 of its 0 signers read-only, leaving no writable fee payer",
    );
}

#[test]
fn v0_lookup_loading_no_accounts_is_rejected() {
    let mut raw = RawTx::v0();
    raw.lookups.push((vec![], vec![]));
    rejected(
        &raw.to_bytes(),
        TxError::EmptyLookup { lookup: 1 },
        "address table lookup 1 loads no accounts",
    );
}

#[test]
fn v0_message_with_257_accounts_is_rejected() {
    let mut raw = RawTx::v0();
    raw.lookups = vec![((0..=254).collect(), vec![])];
    rejected(
        &raw.to_bytes(),
        TxError::TooManyAccounts {
            static_accounts: 2,
            lookup_accounts: 255,
        },
        "message uses 257 accounts (2 static + 255 from lookup tables); at most 256 are \
         addressable",
    );
}

#[test]
fn v0_message_with_256_accounts_is_accepted() {
    let mut raw = RawTx::v0();
    raw.lookups = vec![((0..=253).collect(), vec![])];
    raw.instructions = vec![(1, vec![255], vec![])];
    accepted(&raw.to_bytes());
}

#[test]
fn legacy_message_with_program_id_index_zero_is_rejected() {
    let mut raw = RawTx::legacy();
    raw.instructions[0].0 = 0;
    rejected(
        &raw.to_bytes(),
        TxError::ProgramIdIsFeePayer { instruction: 0 },
        "instruction 0 uses program id index 0, which is the fee payer",
    );
}

#[test]
fn legacy_program_id_index_beyond_the_keys_is_rejected() {
    let mut raw = RawTx::legacy();
    raw.instructions.push((2, vec![], vec![]));
    rejected(
        &raw.to_bytes(),
        TxError::ProgramIdOutOfRange {
            instruction: 1,
            index: 2,
            static_accounts: 2,
        },
        "instruction 1 uses program id index 2 but the message has 2 static accounts",
    );
}

#[test]
fn v0_program_id_from_a_lookup_table_is_rejected() {
    let mut raw = RawTx::v0();
    raw.instructions[0].0 = 2;
    rejected(
        &raw.to_bytes(),
        TxError::ProgramIdOutOfRange {
            instruction: 0,
            index: 2,
            static_accounts: 2,
        },
        "instruction 0 uses program id index 2 but the message has 2 static accounts",
    );
}

#[test]
fn account_index_beyond_the_accounts_is_rejected_naming_instruction_and_index() {
    let mut raw = RawTx::legacy();
    raw.keys = 4;
    raw.instructions = vec![
        (1, vec![0], vec![]),
        (2, vec![3], vec![]),
        (3, vec![], vec![]),
        (1, vec![0, 9], vec![]),
    ];
    rejected(
        &raw.to_bytes(),
        TxError::AccountIndexOutOfRange {
            instruction: 3,
            index: 9,
            accounts: 4,
        },
        "instruction 3 uses account index 9 but the transaction has 4 accounts",
    );
}

#[test]
fn v0_account_index_beyond_static_and_looked_up_accounts_is_rejected() {
    let mut raw = RawTx::v0();
    raw.instructions[0].1 = vec![4];
    rejected(
        &raw.to_bytes(),
        TxError::AccountIndexOutOfRange {
            instruction: 0,
            index: 4,
            accounts: 4,
        },
        "instruction 0 uses account index 4 but the transaction has 4 accounts",
    );
}

#[test]
fn more_signatures_than_required_is_rejected() {
    let mut raw = RawTx::legacy();
    raw.signatures.push([8; 64]);
    rejected(
        &raw.to_bytes(),
        TxError::SignatureCountMismatch {
            signatures: 2,
            required: 1,
        },
        "signature count 2 does not match the 1 signatures the message requires",
    );
}

#[test]
fn fewer_signatures_than_required_is_rejected() {
    let mut raw = RawTx::legacy();
    raw.header = [2, 0, 0];
    rejected(
        &raw.to_bytes(),
        TxError::SignatureCountMismatch {
            signatures: 1,
            required: 2,
        },
        "signature count 1 does not match the 2 signatures the message requires",
    );
}

#[test]
fn deserialization_errors_come_before_sanitize_errors() {
    // Program id 0 (a sanitize error) and trailing bytes (a deserialization error): the latter wins.
    let mut raw = RawTx::legacy();
    raw.instructions[0].0 = 0;
    let mut bytes = raw.to_bytes();
    bytes.push(0);
    assert_eq!(validate(&bytes), Err(TxError::TrailingBytes { count: 1 }));
}
