//! HTTP/1.1 intake: framing one request beside bare httparse on the same bytes (the framing
//! rules' own cost is the difference), a re-parse of a head whose body has not arrived (what
//! each partial receive costs), writing a 200 answer, and a request trickled one byte per
//! receive (`trickle/`): through the intake connection ([`Conn`], linear in the request's
//! length) beside framing the whole buffer again on every receive (quadratic), at four sizes.
//!
//! Run: `cargo bench --bench http1 -- --warm-up-time 1 --measurement-time 3`
//! (one group: `cargo bench --bench http1 -- trickle/`)

use std::hint::black_box;

use bundle_relay::clock::{Instant, Ticks};
use bundle_relay::http1::conn::{Conn, ConnConfig};
use bundle_relay::http1::{HEADERS_MAX, Limits, parse, write_response};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// python-requests' header set and order around a 1.6 KB sendBundle body.
fn request() -> Vec<u8> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["{}","{}","{}"],{{"encoding":"base64"}}]}}"#,
        "A".repeat(508),
        "B".repeat(468),
        "C".repeat(536)
    );
    format!(
        "POST /api/v1/bundles?uuid=0b1f HTTP/1.1\r\nHost: mainnet.block-engine.jito.wtf\r\n\
         User-Agent: python-requests/2.31.0\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\n\
         Connection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn bench(c: &mut Criterion) {
    let req = request();
    let limits = Limits::default();
    let mut g = c.benchmark_group("send_bundle_request");
    g.throughput(Throughput::Bytes(req.len() as u64));
    g.bench_function("http1_parse", |b| {
        b.iter(|| parse(black_box(&req), &limits).unwrap().unwrap().len)
    });
    g.bench_function("httparse_head_only", |b| {
        b.iter(|| {
            let mut fields = [httparse::EMPTY_HEADER; HEADERS_MAX];
            let mut r = httparse::Request::new(&mut fields);
            match r.parse(black_box(&req)).unwrap() {
                httparse::Status::Complete(n) => n,
                httparse::Status::Partial => 0,
            }
        })
    });
    g.bench_function("http1_parse_body_missing", |b| {
        let partial = &req[..req.len() - 1];
        b.iter(|| parse(black_box(partial), &limits).unwrap().is_none())
    });
    g.finish();

    let result = br#"{"jsonrpc":"2.0","result":"892b79ed49138bfb3aa5441f0df6e06ef34f9ee8f3976c15b323605bae0cf51d","id":1}"#;
    let mut out = [0u8; 512];
    c.bench_function("write_response_200", |b| {
        b.iter(|| {
            write_response(
                &mut out,
                200,
                true,
                "application/json",
                &[],
                black_box(&result[..]),
            )
            .unwrap()
        })
    });
}

/// A request of about `bytes` bytes: padding headers, then a short body.
fn padded_request(bytes: usize) -> Vec<u8> {
    let mut r = b"POST /api/v1/bundles HTTP/1.1\r\nHost: x\r\n".to_vec();
    while r.len() + 40 < bytes {
        // Long values: a head of 8 KB stays under the 64-field limit.
        r.extend_from_slice(format!("X-Padding: {}\r\n", "a".repeat(150)).as_bytes());
    }
    r.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
    r
}

fn trickle(c: &mut Criterion) {
    let cfg = ConnConfig {
        limits: Limits::default(),
        response_bytes_max: 256,
        out_bytes: 1024,
        head_timeout: Ticks(u64::MAX / 4),
        idle_timeout: Ticks(u64::MAX / 4),
        send_timeout: Ticks(u64::MAX / 4),
        linger: Ticks(u64::MAX / 4),
    };
    let mut g = c.benchmark_group("trickle");
    for bytes in [1_024, 2_048, 4_096, 8_000] {
        let req = padded_request(bytes);
        g.throughput(Throughput::Bytes(req.len() as u64));
        let mut conn = Conn::new(&cfg);
        g.bench_with_input(BenchmarkId::new("conn", bytes), &req, |b, req| {
            b.iter(|| {
                conn.reset(Instant(0));
                let mut answered = 0;
                for byte in req.iter() {
                    conn.handle_bytes(std::slice::from_ref(byte), Instant(1));
                    answered += conn.serve(&cfg, Instant(1), |_, _| 0).requests;
                }
                assert_eq!(answered, 1);
            })
        });
        g.bench_with_input(
            BenchmarkId::new("reframe_each_receive", bytes),
            &req,
            |b, req| {
                b.iter(|| {
                    for end in 1..=req.len() {
                        black_box(parse(black_box(&req[..end]), &cfg.limits).ok());
                    }
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench, trickle);
criterion_main!(benches);
