//! The wire layer's request-path work for one 3-transaction bundle (decode + validate + bundle
//! id), beside the same work done with the Solana crates (decode to a Vec, bincode, sanitize,
//! bs58 strings joined and hashed), in the same run. Also each decoder alone against the crate it
//! replaces. Run: `cargo bench --bench decode -- --warm-up-time 1 --measurement-time 3`; the five-transaction
//! bundle in each encoding alone: `cargo bench --bench decode -- bundle5`.

#[path = "../tests/wire_support/mod.rs"]
mod wire_support;

use std::hint::black_box;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bundle_relay::wire::{
    BundleId, Encoding, PACKET_DATA_SIZE, bundle_id, decode, decode_and_validate, validate,
};
use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::StdRng;
use sha2::{Digest, Sha256};
use wire_support::{Shape, oracle, serialize, signed_tx};

/// `n` signed transactions of realistic size (200–400 bytes): the first legacy, the rest v0 with
/// tables.
fn bundle(n: usize) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(0xbe7c);
    let mut txs = Vec::new();
    while txs.len() < n {
        let shape = Shape {
            signers: 1 + txs.len() % 2,
            instructions: 3,
            accounts_per_ix: 4,
            data_len_max: 40,
            v0_tables: if txs.is_empty() { None } else { Some(2) },
        };
        let bytes = serialize(&signed_tx(&mut rng, shape));
        if (200..=400).contains(&bytes.len()) {
            txs.push(bytes);
        }
    }
    txs
}

fn relay_path<const N: usize>(
    enc: Encoding,
    texts: &[String],
    slots: &mut [[u8; PACKET_DATA_SIZE]; N],
) -> BundleId {
    let mut sigs = [[0u8; 64]; N];
    for (i, text) in texts.iter().enumerate() {
        let (_, info) = decode_and_validate(enc, text.as_bytes(), &mut slots[i]).unwrap();
        sigs[i] = info.first_signature;
    }
    bundle_id(&sigs)
}

fn solana_path(enc: Encoding, texts: &[String]) -> String {
    let mut sigs = Vec::with_capacity(texts.len());
    for text in texts {
        let bytes = match enc {
            Encoding::Base58 => bs58::decode(text).into_vec().unwrap(),
            Encoding::Base64 => STANDARD.decode(text).unwrap(),
        };
        let tx = oracle(&bytes).unwrap();
        sigs.push(tx.signatures[0].to_string());
    }
    let digest = Sha256::digest(sigs.join(",").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The relay's path for a bundle with the `bs58` crate's decoder in place of the relay's own.
fn bs58_path<const N: usize>(
    texts: &[String],
    slots: &mut [[u8; PACKET_DATA_SIZE]; N],
) -> BundleId {
    let mut sigs = [[0u8; 64]; N];
    for (i, text) in texts.iter().enumerate() {
        let len = bs58::decode(text).onto(&mut slots[i][..]).unwrap();
        sigs[i] = validate(&slots[i][..len]).unwrap().first_signature;
    }
    bundle_id(&sigs)
}

/// A five-transaction bundle's request-path work in each encoding, one group: base58's cost
/// as a multiple of base64's is the figure the README gives.
fn bundle5(c: &mut Criterion) {
    let txs = bundle(5);
    let b64: Vec<String> = txs.iter().map(|t| STANDARD.encode(t)).collect();
    let b58: Vec<String> = txs.iter().map(|t| bs58::encode(t).into_string()).collect();
    let mut slots = [[0u8; PACKET_DATA_SIZE]; 5];
    let id = relay_path(Encoding::Base64, &b64, &mut slots);
    assert_eq!(relay_path(Encoding::Base58, &b58, &mut slots), id);
    assert_eq!(bs58_path(&b58, &mut slots), id);
    let mut g = c.benchmark_group("bundle5");
    g.bench_function("relay_base64", |b| {
        b.iter(|| relay_path(Encoding::Base64, black_box(&b64), &mut slots))
    });
    g.bench_function("relay_base58", |b| {
        b.iter(|| relay_path(Encoding::Base58, black_box(&b58), &mut slots))
    });
    g.bench_function("bs58_crate_base58", |b| {
        b.iter(|| bs58_path(black_box(&b58), &mut slots))
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    let txs = bundle(3);
    for (enc, encode) in [
        (
            Encoding::Base64,
            (|b: &[u8]| STANDARD.encode(b)) as fn(&[u8]) -> String,
        ),
        (Encoding::Base58, |b: &[u8]| bs58::encode(b).into_string()),
    ] {
        let texts: Vec<String> = txs.iter().map(|t| encode(t)).collect();
        let mut slots = [[0u8; PACKET_DATA_SIZE]; 3];
        assert_eq!(
            relay_path(enc, &texts, &mut slots).to_string(),
            solana_path(enc, &texts)
        );
        let mut g = c.benchmark_group(format!("bundle3_{}", enc.name()));
        g.bench_function("relay", |b| {
            b.iter(|| relay_path(enc, black_box(&texts), &mut slots))
        });
        g.bench_function("solana_crates", |b| {
            b.iter(|| solana_path(enc, black_box(&texts)))
        });
        g.finish();

        if enc == Encoding::Base64 {
            let mut g = c.benchmark_group("validate_one");
            g.bench_function("relay", |b| {
                b.iter(|| validate(black_box(&txs[2])).unwrap())
            });
            g.bench_function("solana_crates", |b| {
                b.iter(|| oracle(black_box(&txs[2])).unwrap())
            });
            g.finish();
            let sigs: Vec<[u8; 64]> = txs
                .iter()
                .map(|t| validate(t).unwrap().first_signature)
                .collect();
            let mut g = c.benchmark_group("bundle_id_3");
            g.bench_function("relay", |b| b.iter(|| bundle_id(black_box(&sigs))));
            g.bench_function("bs58_strings_sha2", |b| {
                b.iter(|| {
                    let joined = black_box(&sigs)
                        .iter()
                        .map(|s| bs58::encode(s).into_string())
                        .collect::<Vec<_>>()
                        .join(",");
                    Sha256::digest(joined.as_bytes())
                })
            });
            g.finish();
        }

        let mut g = c.benchmark_group(format!("decode_one_{}", enc.name()));
        let text = &texts[2];
        let mut out = [0u8; PACKET_DATA_SIZE];
        g.bench_function("relay", |b| {
            b.iter(|| decode(enc, black_box(text.as_bytes()), &mut out).unwrap())
        });
        match enc {
            Encoding::Base58 => g.bench_function("bs58_onto", |b| {
                b.iter(|| bs58::decode(black_box(text)).onto(&mut out[..]).unwrap())
            }),
            Encoding::Base64 => g.bench_function("base64_decode_slice", |b| {
                b.iter(|| {
                    STANDARD
                        .decode_slice(black_box(text), &mut out[..])
                        .unwrap()
                })
            }),
        };
        g.finish();
    }
}

criterion_group!(benches, bundle5, bench);
criterion_main!(benches);
