//! The `socks5_reply` fuzz target's body under a short seeded proptest, so `cargo test` covers
//! it where cargo-fuzz is not installed: random bytes, and well-formed replies with random
//! fields, which reach the later phases.

use bundle_relay::egress::socks5;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        rng_seed: RngSeed::Fixed(2026),
        ..ProptestConfig::default()
    }
}

/// A control byte, then a method reply, an auth reply and a CONNECT reply, each mostly valid.
fn replies() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u8>(),
        prop_oneof![Just(0u8), Just(2), any::<u8>()],
        prop_oneof![Just(0u8), any::<u8>()],
        prop_oneof![Just(0u8), 1u8..10],
        prop_oneof![Just(1u8), Just(3), Just(4), any::<u8>()],
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(ctl, method, auth, rep, atyp, tail)| {
            let mut v = vec![ctl, 5, method, 1, auth, 5, rep, 0, atyp];
            v.extend(tail);
            v
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn socks5_reply_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        socks5::fuzz_handle_bytes(&data);
    }

    #[test]
    fn socks5_reply_shaped_replies(data in replies()) {
        socks5::fuzz_handle_bytes(&data);
    }
}
