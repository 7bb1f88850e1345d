//! Steady-state TLS cost per SendBundle-sized frame (2 KiB): a [`TlsSession`] against an
//! in-memory rustls server, after the handshake, against a plaintext copy of the same bytes.
//! Run: `cargo bench --workspace --profile dev --bench tls` (figures in `src/tls/mod.rs`).

use std::hint::black_box;

use bundle_relay::tls::{self, TlsSession};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rustls::ServerConnection;

#[path = "../tests/tls_support/mod.rs"]
mod tls_support;

/// About one five-transaction SendBundle with its gRPC and HTTP/2 framing.
const FRAME_BYTES: usize = 2 * 1024;

fn pair() -> (TlsSession, ServerConnection) {
    let pki = tls_support::pki(&["engine.test"]);
    let cfg = tls::client_config_from_pem(pki.ca_pem.as_bytes()).unwrap();
    let mut client = TlsSession::new(cfg, "engine.test").unwrap();
    let mut server =
        ServerConnection::new(tls_support::server_config(&pki, &[tls::ALPN_H2])).unwrap();
    tls_support::handshake(&mut client, &mut server).unwrap();
    (client, server)
}

fn bench(c: &mut Criterion) {
    let frame = [0x5au8; FRAME_BYTES];
    let mut out = vec![0u8; FRAME_BYTES * 2];
    let mut g = c.benchmark_group("tls_2KiB_frame");
    g.throughput(Throughput::Bytes(FRAME_BYTES as u64));

    let (mut client, _server) = pair();
    g.bench_function("client_encrypt", |b| {
        b.iter(|| {
            let n = client.write_plaintext(black_box(&frame)).unwrap();
            assert_eq!(n, FRAME_BYTES);
            let sent = client.poll_transmit().len();
            client.advance_transmit(sent);
        })
    });

    let (mut client, mut server) = pair();
    g.bench_function("client_encrypt_server_decrypt", |b| {
        b.iter(|| {
            client.write_plaintext(black_box(&frame)).unwrap();
            let mut rd = client.poll_transmit();
            let len = rd.len();
            server.read_tls(&mut rd).unwrap();
            server.process_new_packets().unwrap();
            client.advance_transmit(len);
            assert_eq!(tls_support::server_read(&mut server, &mut out), FRAME_BYTES);
        })
    });

    let (mut client, mut server) = pair();
    let mut wire = Vec::with_capacity(FRAME_BYTES * 2);
    g.bench_function("server_encrypt_client_decrypt", |b| {
        b.iter(|| {
            tls_support::server_write(&mut server, black_box(&frame));
            wire.clear();
            server.write_tls(&mut wire).unwrap();
            client.feed_ciphertext(&wire).unwrap();
            assert_eq!(client.read_plaintext(&mut out), FRAME_BYTES);
        })
    });

    // The plaintext path's equivalent: the bytes copied into a transmit buffer and out again.
    let mut transmit = vec![0u8; FRAME_BYTES];
    g.bench_function("plaintext_copy", |b| {
        b.iter(|| {
            transmit.copy_from_slice(black_box(&frame));
            out[..FRAME_BYTES].copy_from_slice(black_box(&transmit));
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
