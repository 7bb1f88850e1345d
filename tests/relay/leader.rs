//! The next leader as an engine answers GetNextScheduledLeader, decoded by hand on the reactor:
//! exactly what prost decodes (slots, and the region matched among the relay's by name), for
//! Jito's answers, answers a later schema may extend, and any bytes at all. The `next_leader`
//! fuzz target's body runs here under a short seeded proptest, so `cargo test` covers it where
//! cargo-fuzz is not installed.

use bundle_relay::proto::searcher::{NextScheduledLeaderRequest, NextScheduledLeaderResponse};
use bundle_relay::relay::leader::{self, NextLeader, decode_next_leader, encode_request};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use prost::Message;

const REGIONS: [&str; 3] = ["frankfurt", "ny", "tokyo"];

fn index(name: &str) -> Option<u8> {
    REGIONS.iter().position(|r| *r == name).map(|i| i as u8)
}

fn answer(current: u64, next: u64, region: &str) -> Vec<u8> {
    NextScheduledLeaderResponse {
        current_slot: current,
        next_leader_slot: next,
        next_leader_identity: "96gYZGLnJYVFmbjzopPSU6QiEV5fGqZNyN9nmNhvrZU5".into(),
        next_leader_region: region.into(),
    }
    .encode_to_vec()
}

#[test]
fn an_engines_answer_names_the_slots_and_the_relays_region() {
    let l = decode_next_leader(&answer(380_000_123, 380_000_124, "ny"), index);
    assert_eq!(
        l,
        Some(NextLeader {
            current_slot: 380_000_123,
            next_leader_slot: 380_000_124,
            region: Some(1),
        })
    );
}

#[test]
fn a_region_the_relay_does_not_run_or_none_at_all_is_no_leader_known() {
    for region in ["dublin", "", "NY"] {
        let l = decode_next_leader(&answer(1, 4, region), index).unwrap();
        assert_eq!(l.region, None, "{region:?}");
        assert_eq!((l.current_slot, l.next_leader_slot), (1, 4));
    }
}

#[test]
fn a_known_field_of_the_wrong_wire_type_or_a_cut_message_refuses_the_answer() {
    let good = answer(1, 4, "tokyo");
    for bad in [
        vec![0x0a, 1, b'x'],             // current_slot as bytes
        vec![0x25, 1, 2, 3, 4],          // next_leader_region as fixed32
        vec![0x22, 2, 0xff, 0xfe],       // a region that is not UTF-8
        good[..good.len() - 1].to_vec(), // a second answer, cut short
    ] {
        let mut m = good.clone();
        m.extend_from_slice(&bad);
        assert_eq!(decode_next_leader(&m, index), None, "{bad:?}");
        assert_eq!(leader::fuzz_answer(&m), None, "{bad:?}");
    }
}

#[test]
fn the_request_names_every_region_as_prost_reads_it() {
    let mut buf = [0u8; 256];
    let n = encode_request(REGIONS, &mut buf).unwrap();
    let req = NextScheduledLeaderRequest::decode(&buf[..n]).unwrap();
    assert_eq!(req.regions, REGIONS);
    assert_eq!(
        encode_request(REGIONS, &mut buf[..10]),
        None,
        "too small a buffer"
    );
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        rng_seed: RngSeed::Fixed(2026),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Real answers with any slots and any region name, followed by fields a later schema may
    /// add: decoded as prost decodes them.
    #[test]
    fn answers_decode_as_prost_decodes_them(
        current in any::<u64>(),
        next in any::<u64>(),
        region in prop_oneof![Just("ny".to_string()), Just("tokyo".to_string()), ".{0,12}"],
        extra in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut m = answer(current, next, &region);
        // An unknown string field (number 9) holding arbitrary bytes.
        m.extend([0x4a, extra.len() as u8]);
        m.extend(&extra);
        let l = leader::fuzz_answer(&m).expect("a valid answer decodes");
        prop_assert_eq!(l.region, index(&region));
    }

    /// Any bytes at all: the fuzz target's body.
    #[test]
    fn any_bytes_decode_as_prost_decodes_them(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        leader::fuzz_answer(&data);
    }
}

#[test]
fn a_known_field_sent_as_a_group_refuses_the_answer_as_prost_does() {
    // Found by the fuzz target: field 4 (the region) as a group holding a varint.
    let msg = [8, 0, 8, 8, 8, 8, 35, 8, 2, 36];
    assert_eq!(leader::fuzz_answer(&msg), None);
    // An unknown field as a group is skipped.
    let mut m = answer(1, 4, "ny");
    m.extend([0x2b, 8, 2, 0x2c]); // field 5, a group
    assert_eq!(leader::fuzz_answer(&m).unwrap().region, Some(1));
}

#[test]
fn a_region_that_is_not_utf8_refuses_the_answer_even_when_a_later_one_is() {
    // Found by the fuzz target: prost checks every occurrence of a string field.
    let msg = [
        8, 1, 34, 2, 110, 255, 8, 1, 34, 2, 110, 69, 69, 69, 69, 69, 121,
    ];
    assert_eq!(leader::fuzz_answer(&msg), None);
}
