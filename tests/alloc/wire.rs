//! The request path's wire work allocates nothing: decode, validate and bundle id run under a
//! counting allocator that counts this thread's allocations.

use crate::counting_alloc;
use counting_alloc::allocations;

use crate::wire_support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bundle_relay::wire::{
    Encoding, PACKET_DATA_SIZE, bundle_id, decode_and_validate, signature_base58,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use wire_support::{Shape, serialize, signed_tx};

#[test]
fn decode_validate_and_bundle_id_allocate_nothing() {
    let mut rng = StdRng::seed_from_u64(0xa110c);
    let mut texts = Vec::new();
    for i in 0..5 {
        let shape = Shape {
            v0_tables: if i % 2 == 0 { Some(2) } else { None },
            ..Shape::random(&mut rng)
        };
        let bytes = serialize(&signed_tx(&mut rng, shape));
        texts.push((Encoding::Base58, bs58::encode(&bytes).into_string()));
        texts.push((Encoding::Base64, STANDARD.encode(&bytes)));
    }
    let mut slots = [[0u8; PACKET_DATA_SIZE]; 10];
    let mut sigs = [[0u8; 64]; 10];
    let mut ids = [[0u8; 64]; 2];
    let mut rejects = 0;

    let before = allocations();
    for (i, (enc, text)) in texts.iter().enumerate() {
        let (_, info) = decode_and_validate(*enc, text.as_bytes(), &mut slots[i]).expect("valid");
        sigs[i] = info.first_signature;
        // Errors are built and formatted without allocating too.
        let mut junk = [0u8; PACKET_DATA_SIZE];
        if let Err(e) = decode_and_validate(*enc, &text.as_bytes()[1..], &mut junk) {
            use std::fmt::Write;
            let mut sink = Sink(0);
            write!(sink, "transaction {i}: {e}").unwrap();
            rejects += usize::from(sink.0 > 0);
        }
    }
    ids[0] = bundle_id(sigs.iter().step_by(2)).to_hex();
    ids[1] = bundle_id(sigs.iter().skip(1).step_by(2)).to_hex();
    let mut text = [0u8; 88];
    let first = signature_base58(&sigs[0], &mut text).len();
    let after = allocations();

    assert_eq!(after - before, 0, "allocations on the wire path");
    // The work really happened: both encodings gave the same transactions, hence the same id.
    assert_eq!(ids[0], ids[1]);
    assert!(first >= 86 && rejects == texts.len());
}

/// A `fmt::Write` that only counts bytes, so formatting errors needs no buffer.
struct Sink(usize);

impl std::fmt::Write for Sink {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}
