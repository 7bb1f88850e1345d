//! `parse_request` beside serde_json on the same realistic body, in the same run.
//!
//! Run: `cargo bench --bench jsonrpc -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use bundle_relay::jsonrpc::{Call, parse_request};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde::Deserialize;

/// A 3-transaction base64 sendBundle as bots send it: transactions of 300 to 400 bytes
/// (a swap plus a tip), base64 of pseudo-random bytes so every character class appears.
fn body() -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut tx = |bytes: usize| {
        let chars = bytes.div_ceil(3) * 4;
        let mut s = String::with_capacity(chars);
        for _ in 0..chars - 1 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            s.push(char::from(ALPHABET[(state % 64) as usize]));
        }
        s.push('=');
        s
    };
    let txs = [tx(380), tx(350), tx(400)];
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["{}","{}","{}"],{{"encoding":"base64"}}]}}"#,
        txs[0], txs[1], txs[2]
    )
    .into_bytes()
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Options {
    encoding: Option<String>,
}

/// The conventional path: serde structs with owned strings.
#[derive(Deserialize)]
#[allow(dead_code)]
struct SendBundle {
    jsonrpc: String,
    id: serde_json::Value,
    method: String,
    params: (Vec<String>, Option<Options>),
}

fn bench(c: &mut Criterion) {
    let body = body();
    let mut g = c.benchmark_group("send_bundle_3x_base64");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("parse_request", |b| {
        b.iter(|| {
            let r = parse_request(black_box(&body)).unwrap();
            match r.call {
                Call::SendBundle { transactions, .. } => transactions.len(),
                _ => unreachable!(),
            }
        })
    });
    g.bench_function("serde_json_typed", |b| {
        b.iter(|| {
            let r: SendBundle = serde_json::from_slice(black_box(&body)).unwrap();
            r.params.0.len()
        })
    });
    g.bench_function("serde_json_value", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(&body)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
