//! The request arena: the in-flight cap, generations against stale handles, slot contents,
//! and the frame bound checked against prost's encoding of the largest SendBundle.

use bundle_relay::arena::{
    Arena, ArenaFull, BUNDLE_BYTES_MAX, FRAME_BYTES_MAX, GRPC_PREFIX_BYTES, H2_FRAME_HEADER_BYTES,
    SEND_BUNDLE_BYTES_MAX, SlotHandle, StaleHandle, varint_len,
};
use bundle_relay::clock::Instant;
use bundle_relay::proto::{bundle, packet, searcher, shared};
use bundle_relay::wire::{BUNDLE_TXS_MAX, PACKET_DATA_SIZE};
use proptest::prelude::*;
use prost::Message;

#[test]
fn acquire_fails_at_once_when_every_slot_is_held() {
    let mut arena = Arena::new(3);
    let held: Vec<SlotHandle> = (0..3).map(|_| arena.acquire(Instant(1)).unwrap()).collect();
    assert_eq!(arena.acquire(Instant(2)), Err(ArenaFull { capacity: 3 }));
    assert_eq!(arena.available(), 0);
    arena.release(held[1]).unwrap();
    let again = arena.acquire(Instant(3)).unwrap();
    assert_eq!(again.index, held[1].index);
    assert_ne!(again.generation, held[1].generation);
    assert_eq!(
        ArenaFull { capacity: 3 }.to_string(),
        "all 3 request slots are in flight"
    );
}

#[test]
fn releasing_a_slot_twice_is_rejected() {
    let mut arena = Arena::new(2);
    let h = arena.acquire(Instant(0)).unwrap();
    arena.release(h).unwrap();
    assert_eq!(arena.release(h), Err(StaleHandle { handle: h }));
    assert_eq!(arena.in_use(), 0);
    arena.check_invariants();
}

#[test]
fn using_a_slot_after_release_is_rejected_even_once_it_is_reused() {
    let mut arena = Arena::new(1);
    let old = arena.acquire(Instant(0)).unwrap();
    arena.release(old).unwrap();
    assert!(arena.get(old).is_err());
    let new = arena.acquire(Instant(1)).unwrap();
    assert_eq!(new.index, old.index);
    assert!(arena.get(old).is_err());
    assert!(arena.get_mut(old).is_err());
    assert_eq!(arena.release(old), Err(StaleHandle { handle: old }));
    assert!(arena.get(new).is_ok());
    assert!(
        StaleHandle { handle: old }
            .to_string()
            .contains("slot 0 generation 0")
    );
}

#[test]
fn a_handle_naming_no_slot_is_rejected() {
    let mut arena = Arena::new(4);
    let bogus = SlotHandle {
        index: 99,
        generation: 0,
    };
    assert!(arena.get(bogus).is_err());
    assert_eq!(arena.release(bogus), Err(StaleHandle { handle: bogus }));
}

#[test]
fn a_slot_holds_a_bundle_and_starts_fresh_for_the_next() {
    let mut arena = Arena::new(1);
    let h = arena.acquire(Instant(42)).unwrap();
    {
        let mut slot = arena.get_mut(h).unwrap();
        assert_eq!(slot.meta.admitted_at, Instant(42));
        for i in 0..BUNDLE_TXS_MAX {
            let len = PACKET_DATA_SIZE - i;
            slot.tx_region(i)[..len].fill(i as u8 + 1);
            slot.meta.tx_len[i] = len as u16;
        }
        slot.meta.tx_count = BUNDLE_TXS_MAX as u8;
        slot.meta.bundle_id = [7; 32];
        slot.meta.region = 3;
        slot.meta.attempts = [2, 1, 0, 0];
        slot.frame[..3].copy_from_slice(b"abc");
        slot.meta.frame_len = 3;
        // The transactions are in the arena's decode room until the frame is encoded.
        for i in 0..BUNDLE_TXS_MAX {
            assert_eq!(slot.tx(i).len(), PACKET_DATA_SIZE - i);
            assert!(slot.tx(i).iter().all(|&b| b == i as u8 + 1));
        }
    }
    let slot = arena.get(h).unwrap();
    assert_eq!(slot.meta.tx_count, BUNDLE_TXS_MAX as u8);
    assert_eq!(slot.meta.region, 3);
    assert_eq!(slot.frame.len(), FRAME_BYTES_MAX);
    assert_eq!(slot.encoded_frame(), b"abc");
    arena.release(h).unwrap();
    let h = arena.acquire(Instant(43)).unwrap();
    let slot = arena.get(h).unwrap();
    assert_eq!(slot.meta.tx_count, 0);
    assert_eq!(slot.meta.attempts, [0; 4]);
    assert_eq!(slot.meta.frame_len, 0);
    assert_eq!(slot.meta.admitted_at, Instant(43));
}

fn largest_send_bundle(header: Option<shared::Header>) -> searcher::SendBundleRequest {
    let packets = (0..BUNDLE_TXS_MAX)
        .map(|i| packet::Packet {
            data: vec![i as u8; PACKET_DATA_SIZE],
            meta: Some(packet::Meta {
                size: PACKET_DATA_SIZE as u64,
                ..Default::default()
            }),
        })
        .collect();
    searcher::SendBundleRequest {
        bundle: Some(bundle::Bundle { header, packets }),
    }
}

#[test]
fn the_frame_area_is_exactly_the_largest_send_bundle_frame() {
    let widest_header = shared::Header {
        ts: Some(prost_types::Timestamp {
            seconds: -1,
            nanos: -1,
        }),
    };
    let widest = largest_send_bundle(Some(widest_header));
    assert_eq!(widest.encoded_len(), SEND_BUNDLE_BYTES_MAX);
    assert_eq!(
        widest.bundle.as_ref().unwrap().encoded_len(),
        BUNDLE_BYTES_MAX
    );
    // What the relay actually sends (no header, as Jito's clients) fits with room to spare.
    let as_sent = largest_send_bundle(None);
    assert!(as_sent.encoded_len() < SEND_BUNDLE_BYTES_MAX);
    assert_eq!(
        FRAME_BYTES_MAX,
        H2_FRAME_HEADER_BYTES + GRPC_PREFIX_BYTES + SEND_BUNDLE_BYTES_MAX
    );
    assert_eq!(FRAME_BYTES_MAX, 6_258);
}

#[test]
fn varint_lengths_match_protobuf() {
    for (v, len) in [
        (0u64, 1),
        (127, 1),
        (128, 2),
        (16_383, 2),
        (16_384, 3),
        (u64::MAX, 10),
    ] {
        assert_eq!(varint_len(v), len, "varint {v}");
        assert_eq!(prost::encoding::encoded_len_varint(v), len);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Acquire,
    Release(usize),
    ReleaseStale(usize),
    ReadStale(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Acquire),
        3 => (0usize..64).prop_map(Op::Release),
        1 => (0usize..64).prop_map(Op::ReleaseStale),
        1 => (0usize..64).prop_map(Op::ReadStale),
    ]
}

proptest! {
    #[test]
    fn the_arena_never_exceeds_capacity_never_hands_a_slot_out_twice_and_rejects_stale_handles(
        capacity in 1u32..12,
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let mut arena = Arena::new(capacity);
        let mut held: Vec<SlotHandle> = Vec::new();
        let mut released: Vec<SlotHandle> = Vec::new();
        for (t, op) in ops.into_iter().enumerate() {
            match op {
                Op::Acquire => match arena.acquire(Instant(t as u64)) {
                    Ok(h) => {
                        prop_assert!(held.len() < capacity as usize, "acquired beyond capacity");
                        prop_assert!(held.iter().all(|o| o.index != h.index), "slot {} handed out twice", h.index);
                        prop_assert!(!released.contains(&h), "a released handle came back alive");
                        held.push(h);
                    }
                    Err(full) => {
                        prop_assert_eq!(held.len(), capacity as usize, "refused with a free slot");
                        prop_assert_eq!(full.capacity, capacity);
                    }
                },
                Op::Release(k) if !held.is_empty() => {
                    let h = held.swap_remove(k % held.len());
                    prop_assert!(arena.release(h).is_ok());
                    released.push(h);
                }
                Op::ReleaseStale(k) if !released.is_empty() => {
                    let h = released[k % released.len()];
                    prop_assert_eq!(arena.release(h), Err(StaleHandle { handle: h }));
                }
                Op::ReadStale(k) if !released.is_empty() => {
                    let h = released[k % released.len()];
                    prop_assert!(arena.get(h).is_err());
                }
                _ => {}
            }
            prop_assert_eq!(arena.in_use() as usize, held.len());
            arena.check_invariants();
        }
    }
}
