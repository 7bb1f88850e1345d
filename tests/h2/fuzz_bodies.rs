//! The cargo-fuzz target bodies under a short seeded proptest, so `cargo test` covers them
//! where cargo-fuzz is not installed. Inputs are random bytes, and valid frames with random
//! payloads, which reach deeper.

use bundle_relay::fuzz::h2_connection_receive;
use bundle_relay::h2::frame;
use bundle_relay::h2::fuzz;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        rng_seed: RngSeed::Fixed(2026),
        ..ProptestConfig::default()
    }
}

/// Well-formed frame headers around random payloads: every kind, flags, and small stream ids.
fn frames() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        (
            0u8..12,
            any::<u8>(),
            0u32..8,
            proptest::collection::vec(any::<u8>(), 0..64),
        ),
        0..24,
    )
    .prop_map(|fs| {
        let mut out = Vec::new();
        for (kind, flags, stream, payload) in fs {
            let mut b = vec![0; 9 + payload.len()];
            frame::write(&mut b, kind, flags, stream, &payload).unwrap();
            out.extend(b);
        }
        out
    })
}

/// Inputs that once crashed a fuzz target.
#[test]
fn fuzz_regressions() {
    fuzz::hpack_decoder(&[
        0x47, 0x0a, 0x60, 0xff, 0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
        0xff,
    ]);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn frame_decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz::frame_decoder(&data);
    }

    #[test]
    fn frame_decoder_never_panics_on_well_framed_input(data in frames()) {
        fuzz::frame_decoder(&data);
    }

    #[test]
    fn hpack_decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz::hpack_decoder(&data);
    }

    #[test]
    fn connection_receive_never_panics(data in proptest::collection::vec(any::<u8>(), 0..1024)) {
        h2_connection_receive(&data);
    }

    #[test]
    fn connection_receive_never_panics_on_well_framed_input(data in frames()) {
        h2_connection_receive(&data);
    }
}
