//! The `http1_request` fuzz target's body under a short seeded proptest, so `cargo test` covers
//! it where cargo-fuzz is not installed. Inputs are random bytes, and heads assembled from
//! HTTP fragments, which reach the framing rules behind httparse.

use bundle_relay::http1::fuzz;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        rng_seed: RngSeed::Fixed(2026),
        ..ProptestConfig::default()
    }
}

const FRAGMENTS: &[&[u8]] = &[
    b"GET ",
    b"POST ",
    b"PUT ",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"/api/v1/bundles",
    b"http://relay:80/x",
    b"?uuid=1",
    b" HTTP/1.1\r\n",
    b" HTTP/1.0\r\n",
    b" HTTP/1.2\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: 0\r\n",
    b"Content-Length: 99999999999\r\n",
    b"Content-Length: x\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Connection: close\r\n",
    b"Connection: keep-alive\r\n",
    b"Expect: 100-continue\r\n",
    b"x-jito-auth: u\r\n",
    b"X-Forwarded-For: 203.0.113.9\r\n",
    b"x-forwarded-for: 10.0.0.1, [2001:db8::7]:443\r\n",
    b"X-Forwarded-For:",
    b", ",
    b"\r\n",
    b"\n",
    b"\r",
    b":",
    b" ",
    b"hello",
];

/// The limits byte, then fragments and the odd random byte.
fn assembled() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u8>(),
        proptest::collection::vec(
            prop_oneof![
                4 => (0..FRAGMENTS.len()).prop_map(|i| FRAGMENTS[i].to_vec()),
                1 => any::<u8>().prop_map(|b| vec![b]),
            ],
            0..24,
        ),
    )
        .prop_map(|(pick, parts)| {
            let mut out = vec![pick];
            out.extend(parts.concat());
            out
        })
}

/// A well-formed start, so the random tail lands in headers and bodies.
fn well_started() -> impl Strategy<Value = Vec<u8>> {
    (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..256)).prop_map(|(pick, tail)| {
        let mut out = vec![pick];
        out.extend_from_slice(b"POST /api/v1/bundles HTTP/1.1\r\nContent-Length: 8\r\n");
        out.extend(tail);
        out
    })
}

#[test]
fn the_fuzz_bodys_own_checks_hold_for_a_real_pipelined_request_and_an_http2_preface() {
    fuzz::request(
        b"\0POST /api/v1/bundles HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}GET / HTTP/1.1\r\n\r\n",
    );
    fuzz::request(b"\0PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn framing_never_panics_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz::request(&data);
    }

    #[test]
    fn framing_never_panics_on_assembled_heads(data in assembled()) {
        fuzz::request(&data);
    }

    #[test]
    fn framing_never_panics_on_well_started_heads(data in well_started()) {
        fuzz::request(&data);
    }
}
