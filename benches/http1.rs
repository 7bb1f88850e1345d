//! HTTP/1.1 intake: framing one request beside bare httparse on the same bytes (the framing
//! rules' own cost is the difference), a re-parse of a head whose body has not arrived (what
//! each partial receive costs), and writing a 200 answer.
//!
//! Run: `cargo bench --bench http1 -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use bundle_relay::http1::{HEADERS_MAX, Limits, parse, write_response};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

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

criterion_group!(benches, bench);
criterion_main!(benches);
