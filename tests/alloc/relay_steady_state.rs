//! The request path allocates nothing in steady state: a bot's sendBundle request is parsed,
//! decoded into an arena slot, admitted, answered, dispatched on a paced pair, framed as a gRPC
//! call and settled by the engine's reply — all through the sans-IO dispatcher, with a counting
//! allocator watching, after a warm-up. (Connecting a pair allocates its HTTP/2 buffers; that
//! happens once, before.) The bot then asks after its bundle (getInflightBundleStatuses and
//! getBundleDelivery), answered from the record without allocating either.

use crate::counting_alloc;
use crate::relay_path_support;
use crate::wire_support;

use base64::Engine as _;
use bundle_relay::clock::Instant;
use bundle_relay::http1;
use bundle_relay::relay::dispatch::Dispatcher;
use bundle_relay::relay::intake::{self, Port, Verdict};
use bundle_relay::relay::tenancy::Claim;
use counting_alloc::allocations;
use rand::SeedableRng;
use rand::rngs::StdRng;
use relay_path_support::{EngineOk, MS, OnePair};
use wire_support::{Shape, serialize, signed_tx};

const CALLS: u32 = 500;

/// A bot's JSON-RPC `body` on the region's pinned port, answered into `out`.
fn post(d: &mut Dispatcher, body: &str, now: Instant, out: &mut [u8]) -> (usize, Verdict) {
    let (n, verdict, _) = intake::handle(
        d,
        Port::Pinned(0),
        bundle_relay::relay::queries::ConnRef::DETACHED,
        Claim::LOOPBACK,
        http1::Method::Post,
        b"/api/v1/bundles",
        b"",
        body.as_bytes(),
        true,
        now,
        out,
    );
    (n, verdict)
}

#[test]
fn steady_state_requests_allocate_nothing_from_intake_to_engine_reply() {
    let ms = MS;
    let mut now = Instant(ms);
    let OnePair {
        mut d,
        stats,
        metrics,
    } = OnePair::connect(now);
    // The engine's OK reply; its stream id is set per call.
    let mut reply = EngineOk::new();

    // A bot's requests: three really signed transactions each, base64, a new bundle every
    // call (one sent again after an engine took it would be asked of the engine), built
    // before any is counted.
    let mut rng = StdRng::seed_from_u64(3);
    let calls: Vec<(String, [String; 2])> = (0..10 + CALLS)
        .map(|_| {
            let txs: Vec<String> = (0..3)
                .map(|_| {
                    let tx = signed_tx(
                        &mut rng,
                        Shape {
                            signers: 1,
                            instructions: 2,
                            accounts_per_ix: 3,
                            data_len_max: 40,
                            v0_tables: None,
                        },
                    );
                    base64::engine::general_purpose::STANDARD.encode(serialize(&tx))
                })
                .collect();
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["{}","{}","{}"],{{"encoding":"base64"}}]}}"#,
                txs[0], txs[1], txs[2]
            );
            // The bot asks after it, both ways, while the relay holds it (one an engine took
            // would be asked of the engine): the record's answers allocate nothing either.
            let first_signatures: Vec<[u8; 64]> = txs
                .iter()
                .map(|t| {
                    let raw = base64::engine::general_purpose::STANDARD.decode(t).unwrap();
                    raw[1..65].try_into().unwrap()
                })
                .collect();
            let id = bundle_relay::wire::bundle_id(first_signatures.iter()).to_hex();
            let id = std::str::from_utf8(&id).unwrap().to_string();
            let queries = [
                format!(
                    r#"{{"jsonrpc":"2.0","id":2,"method":"getInflightBundleStatuses","params":[["{id}"]]}}"#
                ),
                format!(
                    r#"{{"jsonrpc":"2.0","id":3,"method":"getBundleDelivery","params":["{id}"]}}"#
                ),
            ];
            (body, queries)
        })
        .collect();
    let mut calls = calls.iter();
    let mut out = vec![0u8; 8192];
    let mut stream_id = 1u32;

    let mut one = |d: &mut Dispatcher, now: Instant, reply: &mut EngineOk| {
        let (body, queries) = calls.next().expect("built for every call");
        let (n, verdict) = post(d, body, now, &mut out);
        assert_eq!(
            verdict,
            Verdict::Admitted,
            "{}",
            String::from_utf8_lossy(&out[..n])
        );
        for q in queries {
            let (n, verdict) = post(d, q, now, &mut out);
            let answer = &out[..n];
            assert_eq!(
                verdict,
                Verdict::Answered,
                "{}",
                String::from_utf8_lossy(answer)
            );
            assert!(
                answer
                    .windows(9)
                    .any(|w| w == b"\"Pending\"" || w == b"in_flight"),
                "{}",
                String::from_utf8_lossy(answer)
            );
        }
        d.dispatch(now);
        let p = d.poll_dirty().expect("the bundle went to the pair");
        let n = d.transmit(p, now).len();
        assert!(n > 500, "headers and the bundle are queued");
        d.transmitted(p, n, now);
        reply.set_stream(stream_id);
        stream_id += 2;
        d.received(p, reply.next(), now);
        while let Some(p) = d.poll_dirty() {
            let n = d.transmit(p, now).len();
            d.transmitted(p, n, now);
        }
    };
    for _ in 0..10 {
        now = Instant(now.0 + 2 * ms);
        one(&mut d, now, &mut reply);
    }
    let probe = allocations();
    drop(std::hint::black_box(vec![1u8; 10]));
    assert!(allocations() > probe, "the counter sees allocations");
    let before = allocations();
    for _ in 0..CALLS {
        now = Instant(now.0 + 2 * ms);
        one(&mut d, now, &mut reply);
    }
    assert_eq!(allocations() - before, 0, "allocations in {CALLS} requests");
    assert_eq!(stats.totals().delivered, 10 + CALLS as u64);
    // The metrics saw it all too (recorded without allocating).
    assert_eq!(metrics.check_accounting(), Ok(()));
    assert!(d.check_accounting());
}
