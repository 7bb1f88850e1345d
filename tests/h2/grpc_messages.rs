//! Hand-written protobuf for the hot path, checked byte for byte against prost.

use bundle_relay::grpc::{
    self, percent_decode, retry_after_from_message, retry_after_from_metadata,
};
use bundle_relay::proto::{bundle::Bundle, packet, searcher};
use proptest::prelude::*;
use prost::Message;

fn prost_send_bundle(txs: &[Vec<u8>]) -> Vec<u8> {
    searcher::SendBundleRequest {
        bundle: Some(Bundle {
            header: None,
            packets: txs
                .iter()
                .map(|tx| packet::Packet {
                    data: tx.clone(),
                    meta: Some(packet::Meta {
                        size: tx.len() as u64,
                        ..Default::default()
                    }),
                })
                .collect(),
        }),
    }
    .encode_to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(7), ..ProptestConfig::default() })]

    #[test]
    fn send_bundle_encoding_matches_prost(txs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..=1232), 1..=5)) {
        let mut out = vec![0; 8192];
        let n = grpc::encode_send_bundle(txs.iter().map(|t| t.as_slice()), &mut out).unwrap();
        let want = prost_send_bundle(&txs);
        prop_assert_eq!(&out[..n], want.as_slice());
    }

    #[test]
    fn send_bundle_uuid_reads_what_prost_writes(uuid in "[a-f0-9-]{0,80}") {
        let bytes = searcher::SendBundleResponse { uuid: uuid.clone() }.encode_to_vec();
        prop_assert_eq!(grpc::send_bundle_uuid(&bytes), Some(uuid.as_str()));
    }
}

#[test]
fn five_largest_transactions_fit_the_default_request_buffer() {
    let txs = vec![vec![0xab; 1232]; 5];
    let mut out =
        vec![0; bundle_relay::h2::config::REQUEST_BODY_BYTES_MAX_DEFAULT - grpc::PREFIX_LEN];
    let n = grpc::encode_send_bundle(txs.iter().map(|t| t.as_slice()), &mut out).unwrap();
    assert_eq!(&out[..n], prost_send_bundle(&txs).as_slice());
    assert!(
        grpc::encode_send_bundle(txs.iter().map(|t| t.as_slice()), &mut out[..n - 1]).is_none()
    );
}

#[test]
fn cold_path_messages_encode_through_prost() {
    let m = searcher::NextScheduledLeaderRequest {
        regions: vec!["ny".into(), "tokyo".into()],
    };
    let mut out = [0; 64];
    let n = grpc::encode_prost(&m, &mut out).unwrap();
    assert_eq!(
        searcher::NextScheduledLeaderRequest::decode(&out[..n]).unwrap(),
        m
    );
    assert_eq!(
        grpc::encode_prost(&searcher::GetTipAccountsRequest {}, &mut out),
        Some(0)
    );
}

#[test]
fn percent_decoding_follows_the_grpc_spec() {
    let cases: &[(&str, &str)] = &[
        ("plain", "plain"),
        ("a%20b", "a b"),
        ("100%25", "100%"),
        ("%E2%9C%93", "\u{2713}"),
        ("bad%zzescape", "bad%zzescape"),
        ("cut%2", "cut%2"),
    ];
    for (input, want) in cases {
        let mut out = [0; 64];
        let n = percent_decode(input.as_bytes(), &mut out);
        assert_eq!(std::str::from_utf8(&out[..n]).unwrap(), *want, "{input}");
    }
}

#[test]
fn retry_hints_are_parsed_from_text_and_metadata() {
    assert_eq!(
        retry_after_from_message(b"Back-off triggered: Retry after 1606ms"),
        Some(1606)
    );
    assert_eq!(retry_after_from_message(b"retry after 2s"), Some(2000));
    assert_eq!(retry_after_from_message(b"Network congested."), None);
    assert_eq!(retry_after_from_message(b"Retry after soon"), None);
    assert_eq!(retry_after_from_metadata(b"250ms"), Some(250));
    assert_eq!(retry_after_from_metadata(b"2"), Some(2000));
    assert_eq!(retry_after_from_metadata(b"x"), None);
}
