//! Shared by the wire tests and the decode benchmark: real signed transactions built with the
//! Solana crates, the Solana crates' verdict (the oracle), a raw byte-level transaction builder for
//! decision-table tests, and structure-aware mutations.
#![allow(dead_code, unused_imports)]

mod oracle;
pub use oracle::oracle;

use rand::rngs::StdRng;
use rand::{Rng, RngCore};
use solana_address::Address;
use solana_hash::Hash;
use solana_instruction::{AccountMeta, Instruction};
use solana_keypair::Keypair;
use solana_message::{AddressLookupTableAccount, Message, VersionedMessage, v0};
use solana_transaction::versioned::VersionedTransaction;

pub const PACKET_DATA_SIZE: usize = 1232;

pub fn serialize(tx: &VersionedTransaction) -> Vec<u8> {
    bincode::serialize(tx).expect("serializable")
}

fn address(rng: &mut StdRng) -> Address {
    Address::new_from_array(rng.random())
}

/// Shape knobs for [`signed_tx`].
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub signers: usize,
    pub instructions: usize,
    pub accounts_per_ix: usize,
    pub data_len_max: usize,
    pub v0_tables: Option<usize>,
}

impl Shape {
    pub fn random(rng: &mut StdRng) -> Shape {
        Shape {
            signers: rng.random_range(1..=4),
            instructions: rng.random_range(0..=4),
            accounts_per_ix: rng.random_range(0..=6),
            data_len_max: rng.random_range(0..=80),
            v0_tables: if rng.random_bool(0.5) {
                Some(rng.random_range(0..=3))
            } else {
                None
            },
        }
    }
}

/// A transaction signed for real by `shape.signers` seeded keypairs.
pub fn signed_tx(rng: &mut StdRng, shape: Shape) -> VersionedTransaction {
    let keypairs: Vec<Keypair> = (0..shape.signers)
        .map(|_| Keypair::new_from_array(rng.random()))
        .collect();
    let signer_keys: Vec<Address> = keypairs.iter().map(solana_signer::Signer::pubkey).collect();
    // Accounts that lookup tables may hold: never signers or programs.
    let lookup_pool: Vec<Address> = (0..8).map(|_| address(rng)).collect();

    let mut ixs = Vec::new();
    for i in 0..shape.instructions.max(usize::from(shape.signers > 1)) {
        let mut accounts = Vec::new();
        if i == 0 {
            // Every extra signer must appear somewhere to be a required signer.
            for k in &signer_keys[1..] {
                accounts.push(AccountMeta::new(*k, true));
            }
        }
        for _ in 0..shape.accounts_per_ix {
            let key = match rng.random_range(0..3) {
                0 => signer_keys[rng.random_range(0..signer_keys.len())],
                1 => lookup_pool[rng.random_range(0..lookup_pool.len())],
                _ => address(rng),
            };
            let is_signer = signer_keys.contains(&key);
            accounts.push(if rng.random_bool(0.5) {
                AccountMeta::new(key, is_signer)
            } else {
                AccountMeta::new_readonly(key, is_signer)
            });
        }
        let mut data = vec![0u8; rng.random_range(0..=shape.data_len_max)];
        rng.fill_bytes(&mut data);
        ixs.push(Instruction {
            program_id: address(rng),
            accounts,
            data,
        });
    }
    let blockhash = Hash::new_from_array(rng.random());
    let message = match shape.v0_tables {
        None => VersionedMessage::Legacy(Message::new_with_blockhash(
            &ixs,
            Some(&signer_keys[0]),
            &blockhash,
        )),
        Some(tables) => {
            let tables: Vec<AddressLookupTableAccount> = (0..tables)
                .map(|_| AddressLookupTableAccount {
                    key: address(rng),
                    addresses: (0..rng.random_range(1..=6))
                        .map(|_| lookup_pool[rng.random_range(0..lookup_pool.len())])
                        .collect(),
                })
                .collect();
            VersionedMessage::V0(
                v0::Message::try_compile(&signer_keys[0], &ixs, &tables, blockhash)
                    .expect("compilable"),
            )
        }
    };
    let refs: Vec<&Keypair> = keypairs.iter().collect();
    VersionedTransaction::try_new(message, &refs).expect("signable")
}

/// Where the compact-u16 counts and the index bytes of a well-formed transaction lie.
#[derive(Default, Debug)]
pub struct Layout {
    pub message_offset: usize,
    /// Offsets of every compact-u16 count (all single-byte in generated transactions).
    pub counts: Vec<usize>,
    pub header: usize,
    pub program_ids: Vec<usize>,
    pub account_indexes: Vec<usize>,
    pub lookup_indexes: Vec<usize>,
}

fn compact_len(n: usize) -> usize {
    match n {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        _ => 3,
    }
}

pub fn layout(tx: &VersionedTransaction) -> Layout {
    let mut l = Layout::default();
    let mut at = 0;
    l.counts.push(at);
    at += compact_len(tx.signatures.len()) + 64 * tx.signatures.len();
    l.message_offset = at;
    let msg = &tx.message;
    if matches!(msg, VersionedMessage::V0(_)) {
        at += 1;
    }
    l.header = at;
    at += 3;
    let keys = msg.static_account_keys().len();
    l.counts.push(at);
    at += compact_len(keys) + 32 * keys + 32;
    l.counts.push(at);
    at += compact_len(msg.instructions().len());
    for ix in msg.instructions() {
        l.program_ids.push(at);
        at += 1;
        l.counts.push(at);
        at += compact_len(ix.accounts.len());
        for _ in &ix.accounts {
            l.account_indexes.push(at);
            at += 1;
        }
        l.counts.push(at);
        at += compact_len(ix.data.len()) + ix.data.len();
    }
    if let Some(lookups) = msg.address_table_lookups() {
        l.counts.push(at);
        at += compact_len(lookups.len());
        for lookup in lookups {
            at += 32;
            for idx in [&lookup.writable_indexes, &lookup.readonly_indexes] {
                l.counts.push(at);
                at += compact_len(idx.len());
                for _ in idx.iter() {
                    l.lookup_indexes.push(at);
                    at += 1;
                }
            }
        }
    }
    l
}

/// One random mutation of a well-formed transaction, aimed at the rules the validator enforces.
pub fn mutate(rng: &mut StdRng, bytes: &mut Vec<u8>, l: &Layout) {
    // Earlier mutations may have shortened the bytes: structured edits skip offsets now past the end.
    let len = bytes.len();
    let pick = |rng: &mut StdRng, v: &[usize]| -> Option<usize> {
        (!v.is_empty())
            .then(|| v[rng.random_range(0..v.len())])
            .filter(|&at| at < len)
    };
    if len < l.header + 3 || len < 65 {
        let i = rng.random_range(0..len);
        bytes[i] ^= 1 << rng.random_range(0..8);
        return;
    }
    match rng.random_range(0..14) {
        0 => {
            let i = rng.random_range(0..bytes.len());
            bytes[i] ^= 1 << rng.random_range(0..8);
        }
        1 => {
            let i = rng.random_range(0..bytes.len());
            bytes[i] = rng.random();
        }
        2 => {
            let n = rng.random_range(0..bytes.len());
            bytes.truncate(n);
        }
        3 => {
            for _ in 0..rng.random_range(1..=8) {
                bytes.push(rng.random());
            }
        }
        4 => {
            let i = rng.random_range(0..=bytes.len());
            bytes.insert(i, rng.random());
        }
        5 => {
            let i = rng.random_range(0..bytes.len());
            bytes.remove(i);
        }
        6 => {
            // Header counts: nudge or replace one of the three header bytes.
            let i = l.header + rng.random_range(0..3);
            bytes[i] = match rng.random_range(0..3) {
                0 => bytes[i].wrapping_add(1),
                1 => bytes[i].wrapping_sub(1),
                _ => rng.random_range(0..8),
            };
        }
        7 => {
            // Non-canonical, overlong and overflowing compact-u16 spellings of a count.
            let Some(at) = pick(rng, &l.counts) else {
                return;
            };
            let v = bytes[at];
            let spelling: Vec<u8> = match rng.random_range(0..6) {
                0 => vec![v | 0x80, 0x00],
                1 => vec![v | 0x80, 0x80, 0x00],
                2 => vec![0xff, 0xff, 0x04],
                3 => vec![0xff, 0xff, 0xff],
                4 => vec![0x80 | rng.random::<u8>(), rng.random_range(1..=3)],
                _ => vec![rng.random_range(0..=0x7f)],
            };
            bytes.splice(at..at + 1, spelling);
        }
        8 => {
            let Some(at) = pick(rng, &l.program_ids) else {
                return;
            };
            bytes[at] = match rng.random_range(0..3) {
                0 => 0,
                1 => bytes[at].wrapping_add(1),
                _ => rng.random(),
            };
        }
        9 => {
            let Some(at) = pick(rng, &l.account_indexes) else {
                return;
            };
            bytes[at] = match rng.random_range(0..3) {
                0 => bytes[at].wrapping_add(rng.random_range(1..4)),
                1 => 255,
                _ => rng.random(),
            };
        }
        10 => {
            // Version byte: other versions, the off-chain marker, or a legacy/v0 swap.
            let at = l.message_offset;
            match rng.random_range(0..3) {
                0 => bytes.insert(at, 0x80 | rng.random_range(0..0x80)),
                1 if bytes[at] & 0x80 != 0 => {
                    bytes.remove(at);
                }
                _ => bytes[at] = 0x80 | rng.random_range(0..0x80),
            }
        }
        11 => {
            // Signature count: drop or duplicate a signature, or just change the count.
            match rng.random_range(0..3) {
                0 if bytes[0] > 0 && bytes.len() >= 65 => {
                    bytes[0] -= 1;
                    bytes.drain(1..65);
                }
                1 => {
                    bytes[0] += 1;
                    let sig: Vec<u8> = bytes[1..65].to_vec();
                    bytes.splice(1..1, sig);
                }
                _ => bytes[0] = rng.random_range(0..4),
            }
        }
        12 => {
            // Lookup table indexes and counts (v0 only); empty a lookup's index lists.
            if let Some(at) = pick(rng, &l.lookup_indexes) {
                bytes[at] = rng.random();
            } else if let Some(at) = l.counts.last().copied().filter(|&at| at < len) {
                bytes[at] = bytes[at].wrapping_add(1);
            }
        }
        _ => {
            // Account key count off by one: keys and everything after shift.
            let Some(at) = Some(l.counts[1]).filter(|&at| at < len) else {
                return;
            };
            bytes[at] = if rng.random_bool(0.5) {
                bytes[at].wrapping_add(1)
            } else {
                bytes[at].wrapping_sub(1)
            };
        }
    }
}

/// A transaction spelled byte by byte, for rules the Solana crates would never produce.
#[derive(Clone, Debug)]
pub struct RawTx {
    pub signatures: Vec<[u8; 64]>,
    /// `None` for legacy, `Some(v)` for a versioned message (`0x80 | v` on the wire).
    pub version: Option<u8>,
    pub header: [u8; 3],
    pub keys: usize,
    pub blockhash: [u8; 32],
    /// (program id index, account indexes, data)
    pub instructions: Vec<(u8, Vec<u8>, Vec<u8>)>,
    /// (writable indexes, read-only indexes)
    pub lookups: Vec<(Vec<u8>, Vec<u8>)>,
}

pub fn compact_u16(out: &mut Vec<u8>, mut v: usize) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

impl RawTx {
    /// One signer, two static keys (payer, program), one instruction of program 1 on account 0.
    pub fn legacy() -> RawTx {
        RawTx {
            signatures: vec![[7; 64]],
            version: None,
            header: [1, 0, 1],
            keys: 2,
            blockhash: [9; 32],
            instructions: vec![(1, vec![0], vec![1, 2, 3])],
            lookups: vec![],
        }
    }

    /// Like [`RawTx::legacy`] as v0, with one lookup loading one writable and one read-only account.
    pub fn v0() -> RawTx {
        RawTx {
            version: Some(0),
            lookups: vec![(vec![0], vec![1])],
            ..RawTx::legacy()
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        compact_u16(&mut b, self.signatures.len());
        for s in &self.signatures {
            b.extend_from_slice(s);
        }
        if let Some(v) = self.version {
            b.push(0x80 | v);
        }
        b.extend_from_slice(&self.header);
        compact_u16(&mut b, self.keys);
        for k in 0..self.keys {
            b.extend_from_slice(&[k as u8 + 1; 32]);
        }
        b.extend_from_slice(&self.blockhash);
        compact_u16(&mut b, self.instructions.len());
        for (p, accounts, data) in &self.instructions {
            b.push(*p);
            compact_u16(&mut b, accounts.len());
            b.extend_from_slice(accounts);
            compact_u16(&mut b, data.len());
            b.extend_from_slice(data);
        }
        if self.version.is_some() {
            compact_u16(&mut b, self.lookups.len());
            for (w, r) in &self.lookups {
                b.extend_from_slice(&[0xAB; 32]);
                compact_u16(&mut b, w.len());
                b.extend_from_slice(w);
                compact_u16(&mut b, r.len());
                b.extend_from_slice(r);
            }
        }
        b
    }
}
