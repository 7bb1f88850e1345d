//! txgen: every generated bundle is what a real searcher would send.

use base64::Engine as _;
use bincode::Options as _;
use bundle_relay::wire::{BASE58_LEN_MAX, BASE64_LEN_MAX, Encoding, PACKET_DATA_SIZE};
use bundle_relay_bench::tag::Tag;
use bundle_relay_bench::txgen::{
    self, GeneratedBundle, TIP_ACCOUNTS, TIP_LAMPORTS_MIN, TxGenConfig, bundle_id_hex,
};
use ed25519_dalek::{Signature, Verifier as _, VerifyingKey};
use solana_transaction::VersionedMessage;
use solana_transaction::versioned::VersionedTransaction;

fn cfg(seed: u64) -> TxGenConfig {
    TxGenConfig {
        seed,
        run_id: 42,
        keep_raw_txs: true,
        ..TxGenConfig::default()
    }
}

fn generate(c: TxGenConfig, n: u64) -> Vec<GeneratedBundle> {
    txgen::generate(c, 0, n).unwrap().0
}

fn decode_tx(raw: &[u8]) -> VersionedTransaction {
    // Solana's own deserialisation options: fixed-int encoding, no trailing bytes.
    bincode::options()
        .with_limit(PACKET_DATA_SIZE as u64)
        .with_fixint_encoding()
        .reject_trailing_bytes()
        .deserialize(raw)
        .expect("decodes as a VersionedTransaction")
}

fn split_request(req: &[u8]) -> (String, serde_json::Value) {
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut r = httparse::Request::new(&mut headers);
    let head = match r.parse(req).unwrap() {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => panic!("incomplete request head"),
    };
    assert_eq!(r.method, Some("POST"));
    assert_eq!(r.path, Some("/api/v1/bundles"));
    let h = |name: &str| {
        r.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| std::str::from_utf8(h.value).unwrap().to_string())
    };
    assert_eq!(h("content-type").as_deref(), Some("application/json"));
    assert!(h("host").is_some());
    let len: usize = h("content-length").unwrap().parse().unwrap();
    assert_eq!(len, req.len() - head, "Content-Length is the body length");
    let body = String::from_utf8(req[head..].to_vec()).unwrap();
    let json = serde_json::from_str(&body).unwrap();
    (body, json)
}

#[test]
fn every_transaction_decodes_sanitizes_and_round_trips_with_the_solana_crates() {
    for b in generate(cfg(1), 150) {
        for raw in &b.txs {
            assert!(raw.len() <= PACKET_DATA_SIZE, "{} bytes", raw.len());
            let tx = decode_tx(raw);
            tx.sanitize().expect("sanitize accepts it");
            assert_eq!(&bincode::serialize(&tx).unwrap()[..], &raw[..]);
        }
    }
}

#[test]
fn every_signature_verifies_over_the_message_bytes() {
    for b in generate(cfg(2), 100) {
        for raw in &b.txs {
            let tx = decode_tx(raw);
            assert_eq!(tx.signatures.len(), 1);
            let payer: [u8; 32] = tx.message.static_account_keys()[0].to_bytes();
            let key = VerifyingKey::from_bytes(&payer).unwrap();
            let sig = Signature::from_slice(tx.signatures[0].as_ref()).unwrap();
            key.verify(&tx.message.serialize(), &sig)
                .expect("signature verifies");
            assert_eq!(&raw[65..], &tx.message.serialize()[..]);
        }
    }
}

#[test]
fn every_blockhash_is_the_bench_tag_of_its_bundle_and_position() {
    for b in generate(cfg(3), 60) {
        for (i, raw) in b.txs.iter().enumerate() {
            let tx = decode_tx(raw);
            let tag = Tag {
                run_id: 42,
                seq: b.seq,
                tx_index: i as u8,
            };
            assert_eq!(tx.message.recent_blockhash().to_bytes(), tag.to_blockhash());
        }
    }
}

fn tips_of(tx: &VersionedTransaction) -> Vec<(String, u64)> {
    let keys = tx.message.static_account_keys();
    let tips: Vec<String> = TIP_ACCOUNTS.iter().map(|s| s.to_string()).collect();
    tx.message
        .instructions()
        .iter()
        .filter(|ix| keys[ix.program_id_index as usize].to_bytes() == [0u8; 32])
        .filter_map(|ix| {
            assert_eq!(&ix.data[..4], &[2, 0, 0, 0], "system transfer");
            assert_eq!(ix.accounts[0], 0, "transfers come from the signer");
            let to = bs58::encode(keys[ix.accounts[1] as usize].to_bytes()).into_string();
            let lamports = u64::from_le_bytes(ix.data[4..12].try_into().unwrap());
            tips.contains(&to).then_some((to, lamports))
        })
        .collect()
}

#[test]
fn only_the_last_transaction_tips_one_jito_tip_account_at_least_1000_lamports() {
    for b in generate(cfg(4), 100) {
        let n = b.txs.len();
        for (i, raw) in b.txs.iter().enumerate() {
            let tips = tips_of(&decode_tx(raw));
            if i + 1 == n {
                assert_eq!(tips.len(), 1, "bundle {} tx {i}", b.seq);
                assert!(tips[0].1 >= TIP_LAMPORTS_MIN);
            } else {
                assert!(tips.is_empty(), "bundle {} tx {i} tips", b.seq);
            }
        }
    }
}

#[test]
fn the_mixes_produce_legacy_and_v0_messages_with_and_without_compute_budget() {
    let (mut v0, mut legacy, mut cb, mut plain) = (0, 0, 0, 0);
    let compute_budget = bs58::decode(txgen::COMPUTE_BUDGET_PROGRAM)
        .into_vec()
        .unwrap();
    for b in generate(cfg(5), 100) {
        for raw in &b.txs {
            let tx = decode_tx(raw);
            match tx.message {
                VersionedMessage::V0(_) => v0 += 1,
                VersionedMessage::Legacy(_) => legacy += 1,
            }
            if tx
                .message
                .static_account_keys()
                .iter()
                .any(|k| k.to_bytes()[..] == compute_budget[..])
            {
                cb += 1;
            } else {
                plain += 1;
            }
        }
    }
    assert!(
        v0 > 50 && legacy > 50 && cb > 50 && plain > 50,
        "{v0} {legacy} {cb} {plain}"
    );
}

#[test]
fn the_request_is_a_complete_send_bundle_whose_strings_decode_to_the_raw_transactions() {
    let (mut b64, mut b58_explicit, mut b58_default) = (0, 0, 0);
    for b in generate(cfg(6), 120) {
        let (_, json) = split_request(&b.request);
        assert_eq!(json["jsonrpc"], "2.0");
        assert_eq!(json["id"], b.seq);
        assert_eq!(json["method"], "sendBundle");
        let params = json["params"].as_array().unwrap();
        let encoding = match params.get(1).map(|o| o["encoding"].as_str().unwrap()) {
            Some("base64") => {
                b64 += 1;
                Encoding::Base64
            }
            Some("base58") => {
                b58_explicit += 1;
                Encoding::Base58
            }
            None => {
                b58_default += 1;
                Encoding::Base58
            }
            Some(other) => panic!("unexpected encoding {other}"),
        };
        assert_eq!(encoding, b.encoding);
        let strings = params[0].as_array().unwrap();
        assert_eq!(strings.len(), b.txs.len());
        assert_eq!(strings.len(), b.tx_count as usize);
        for (s, raw) in strings.iter().zip(&b.txs) {
            let s = s.as_str().unwrap();
            let decoded = match encoding {
                Encoding::Base64 => {
                    assert!(s.len() <= BASE64_LEN_MAX);
                    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
                }
                Encoding::Base58 => {
                    assert!(s.len() <= BASE58_LEN_MAX);
                    bs58::decode(s).into_vec().unwrap()
                }
            };
            assert_eq!(&decoded[..], &raw[..]);
        }
    }
    assert!(
        b64 > 20 && b58_explicit > 10 && b58_default > 10,
        "{b64} {b58_explicit} {b58_default}"
    );
}

#[test]
fn bundle_id_matches_jitos_known_answer() {
    let sig = |s: &str| -> [u8; 64] { bs58::decode(s).into_vec().unwrap().try_into().unwrap() };
    let id = bundle_id_hex(&[
        sig(
            "3bC2M9fiACSjkTXZDgeNAuQ4ScTsdKGwR42ytFdhUvikqTmBheUxfsR1fDVsM5ADCMMspuwGkdm1uKbU246x5aE3",
        ),
        sig(
            "8t9hKYEYNbLvNqiSzP96S13XF1C2f1ro271Kdf7bkZ6EpjPLuDff1ywRy4gfaGSTubsM2FeYGDoT64ZwPm1cQUt",
        ),
    ]);
    assert_eq!(
        std::str::from_utf8(&id).unwrap(),
        "892b79ed49138bfb3aa5441f0df6e06ef34f9ee8f3976c15b323605bae0cf51d"
    );
}

#[test]
fn each_bundle_id_is_the_hash_of_its_first_signatures_and_all_are_unique() {
    let bundles = generate(cfg(7), 200);
    let mut ids = std::collections::HashSet::new();
    for b in &bundles {
        let sigs: Vec<[u8; 64]> = b.txs.iter().map(|t| t[1..65].try_into().unwrap()).collect();
        assert_eq!(b.bundle_id, bundle_id_hex(&sigs));
        assert!(ids.insert(b.bundle_id), "bundle id repeated");
    }
}

#[test]
fn generation_is_deterministic_for_a_seed_and_differs_across_seeds() {
    let a = generate(cfg(9), 40);
    let b = generate(cfg(9), 40);
    let c = generate(cfg(10), 40);
    for i in 0..40 {
        assert_eq!(a[i].request, b[i].request);
        assert_ne!(a[i].request, c[i].request);
    }
    // Bundle `seq` does not depend on which range it was generated in.
    let tail = txgen::generate(cfg(9), 30, 10).unwrap().0;
    assert_eq!(tail[0].seq, 30);
    assert_eq!(tail[0].request, a[30].request);
}

#[test]
fn the_txs_mix_decides_how_many_transactions_a_bundle_has() {
    let c = TxGenConfig {
        txs_mix: txgen::parse_txs_mix("2:1,5:1").unwrap(),
        ..cfg(11)
    };
    let bundles = generate(c, 100);
    assert!(bundles.iter().all(|b| b.txs.len() == 2 || b.txs.len() == 5));
    assert!(bundles.iter().any(|b| b.txs.len() == 2) && bundles.iter().any(|b| b.txs.len() == 5));
    let single = generate(
        TxGenConfig {
            txs_mix: vec![(1, 1)],
            ..cfg(12)
        },
        20,
    );
    assert!(single.iter().all(|b| b.txs.len() == 1));
}

#[test]
fn a_bad_mix_is_refused_naming_the_item() {
    let e = txgen::parse_txs_mix("1:20,9:5").unwrap_err();
    assert!(e.0.contains("item 1"), "{e}");
    let e = txgen::parse_txs_mix("1:20,3").unwrap_err();
    assert!(e.0.contains("item 1"), "{e}");
    let e = txgen::parse_encoding_mix("base64:1,hex:2").unwrap_err();
    assert!(e.0.contains("item 1"), "{e}");
    assert!(txgen::parse_txs_mix("1:0").is_err());
    assert_eq!(
        txgen::parse_encoding_mix("base64:3,base58:1").unwrap(),
        vec![(Encoding::Base64, 3), (Encoding::Base58, 1)]
    );
}

#[test]
fn generation_reports_its_rate() {
    let (bundles, stats) = txgen::generate(cfg(13), 0, 50).unwrap();
    assert_eq!(stats.bundles, 50);
    assert_eq!(
        stats.transactions,
        bundles.iter().map(|b| b.txs.len() as u64).sum::<u64>()
    );
    assert!(stats.bundles_per_s() > 0.0 && stats.threads >= 1);
}
