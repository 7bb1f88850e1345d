//! The `local_routes` fuzz target's body under a short seeded proptest, so `cargo test` covers
//! it where cargo-fuzz is not installed: random bytes, and lines shaped as the kernel writes
//! them with random fields.

use bundle_relay::egress::local;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        rng_seed: RngSeed::Fixed(2026),
        ..ProptestConfig::default()
    }
}

/// A fib_trie leaf and its route line, then an ipv6_route line, each with random fields.
fn shaped() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<[u8; 4]>(),
        0u8..40,
        prop_oneof![Just("LOCAL"), Just("UNICAST"), Just("BROADCAST")],
        any::<u128>(),
        0u8..140,
        any::<u32>(),
    )
        .prop_map(|(a, len, kind, v6, len6, flags)| {
            format!(
                "     |-- {}.{}.{}.{}\n        /{len} host {kind}\n\0{v6:032x} {len6:02x} {z:032x} 00 {z:032x} 00000000 00000001 00000000 {flags:08x}     lo\n",
                a[0], a[1], a[2], a[3], z = 0u128
            )
            .into_bytes()
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn local_routes_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        local::fuzz_parse(&data);
    }

    #[test]
    fn local_routes_shaped_lines(data in shaped()) {
        local::fuzz_parse(&data);
    }
}
