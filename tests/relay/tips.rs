//! The GetTipAccounts answer decoder against prost: answers prost encodes, with the fields a
//! later schema may add, must be kept exactly when every account is a key (and read back with
//! serde_json as that list), and refused otherwise. The `tip_accounts` fuzz target's body runs
//! here too under a short seeded proptest, so `cargo test` covers it where cargo-fuzz is not
//! installed.

use bundle_relay::proto::searcher::GetTipAccountsResponse;
use bundle_relay::relay::tips::{self, TIP_ACCOUNTS_MAX, TIP_JSON_BYTES, decode_accounts};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use prost::Message;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        rng_seed: RngSeed::Fixed(2026),
        ..ProptestConfig::default()
    }
}

/// `GetTipAccountsResponse` as a later schema might extend it: the same field 1, then fields
/// the relay does not know, one of each wire type, and the largest field number.
#[derive(Clone, PartialEq, prost::Message)]
struct FutureAnswer {
    #[prost(string, repeated, tag = "1")]
    accounts: Vec<String>,
    #[prost(uint64, optional, tag = "2")]
    slot: Option<u64>,
    #[prost(fixed64, optional, tag = "3")]
    stamp: Option<u64>,
    #[prost(bytes = "vec", optional, tag = "4")]
    blob: Option<Vec<u8>>,
    #[prost(fixed32, optional, tag = "5")]
    weight: Option<u32>,
    #[prost(group, optional, tag = "6")]
    group: Option<Nested>,
    #[prost(string, repeated, tag = "536870911")]
    regions: Vec<String>,
}

/// A group's body: holds its own field 1, which is not an account.
#[derive(Clone, PartialEq, prost::Message)]
struct Nested {
    #[prost(string, repeated, tag = "1")]
    accounts: Vec<String>,
}

fn key() -> impl Strategy<Value = String> {
    any::<[u8; 32]>().prop_map(|k| bs58::encode(k).into_string())
}

/// Mostly keys; else text that is not one (too long, too short, outside the alphabet, a
/// number past 2^256) or random.
fn account() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => key(),
        1 => key().prop_map(|k| format!("{k}1")),
        1 => key().prop_map(|k| k[1..].to_string()),
        1 => key().prop_map(|k| k.replacen(|_| true, "0", 1)),
        1 => Just("z".repeat(44)),
        1 => "[1-9A-HJ-NP-Za-km-z]{0,50}",
        1 => ".{0,50}",
    ]
}

fn future_answer() -> impl Strategy<Value = FutureAnswer> {
    (
        proptest::collection::vec(account(), 0..6),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        // Up to 300 bytes, so lengths of two-byte varints come up.
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
        proptest::option::of(any::<u32>()),
        proptest::option::of(proptest::collection::vec(account(), 0..3)),
        proptest::collection::vec(".{0,8}", 0..3),
    )
        .prop_map(
            |(accounts, slot, stamp, blob, weight, group, regions)| FutureAnswer {
                accounts,
                slot,
                stamp,
                blob,
                weight,
                group: group.map(|accounts| Nested { accounts }),
                regions,
            },
        )
}

fn is_key(a: &str) -> bool {
    bs58::decode(a).into_vec().is_ok_and(|k| k.len() == 32)
}

/// What the relay must do with an answer whose accounts are these: keep them, or refuse.
fn expected(accounts: &[String]) -> Option<Vec<String>> {
    let keep =
        (1..=TIP_ACCOUNTS_MAX).contains(&accounts.len()) && accounts.iter().all(|a| is_key(a));
    keep.then(|| accounts.to_vec())
}

/// The decoder's answer as the list a bot reads.
fn decoded(msg: &[u8]) -> Option<Vec<String>> {
    let mut out = [0u8; TIP_JSON_BYTES];
    let n = decode_accounts(msg, &mut out)?;
    Some(serde_json::from_slice(&out[..n]).expect("a JSON array of strings"))
}

/// The fuzz body (which holds the decoder to prost and the cache to the decoder), then
/// serde_json on what it kept.
fn check_fuzz_body(data: &[u8]) {
    if let Some(json) = tips::fuzz_answer(data) {
        let accounts: Vec<String> = serde_json::from_slice(&json).expect("a JSON array");
        assert!(accounts.iter().all(|a| is_key(a)), "{accounts:?}");
    }
}

#[test]
fn the_fuzz_body_accepts_jitos_list() {
    let accounts: Vec<String> =
        serde_json::from_slice(bundle_relay::jito::TIP_ACCOUNTS_JSON).unwrap();
    let msg = GetTipAccountsResponse {
        accounts: accounts.clone(),
    }
    .encode_to_vec();
    assert_eq!(
        tips::fuzz_answer(&msg),
        Some(bundle_relay::jito::TIP_ACCOUNTS_JSON.to_vec())
    );
    assert_eq!(decoded(&msg), Some(accounts));
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn prost_encoded_answers_are_kept_exactly_when_every_account_is_a_key(
        accounts in proptest::collection::vec(account(), 0..TIP_ACCOUNTS_MAX + 3),
    ) {
        let msg = GetTipAccountsResponse { accounts: accounts.clone() }.encode_to_vec();
        prop_assert_eq!(decoded(&msg), expected(&accounts));
        check_fuzz_body(&msg);
    }

    /// Concatenated messages merge (repeated fields append), so unknown fields land between
    /// accounts, in every wire type.
    #[test]
    fn unknown_fields_between_accounts_change_nothing(
        parts in proptest::collection::vec(future_answer(), 1..5),
    ) {
        let msg: Vec<u8> = parts.iter().flat_map(|p| p.encode_to_vec()).collect();
        let accounts: Vec<String> = parts.iter().flat_map(|p| p.accounts.clone()).collect();
        prop_assert_eq!(decoded(&msg), expected(&accounts));
        check_fuzz_body(&msg);
    }

    #[test]
    fn the_fuzz_body_holds_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        check_fuzz_body(&data);
    }

    /// A prost-encoded answer with one byte changed: mostly still protobuf, so the damage
    /// lands in lengths, keys and accounts rather than at the first byte.
    #[test]
    fn the_fuzz_body_holds_on_damaged_answers(
        part in future_answer(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut msg = part.encode_to_vec();
        if !msg.is_empty() {
            let i = at.index(msg.len());
            msg[i] = byte;
        }
        check_fuzz_body(&msg);
    }
}
