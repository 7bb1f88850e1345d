//! What the intake tests share: a relay whose one region cannot be reached, a bot's requests
//! and a reader of the relay's answers over a real socket.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use base64::Engine as _;
use bundle_relay::relay::{RegionSpec, Spec};
use bundle_relay::runtime::Relay;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::wire_support::{Shape, serialize, signed_tx};

/// One region on a closed port (9, discard, is closed here: connects are refused and
/// retried), one egress source per `sources`, a pinned port when `pinned`.
pub fn nowhere(sources: &[&str], pinned: bool) -> Spec {
    let region = RegionSpec {
        interval_ms: 1_000,
        pinned: pinned.then(|| "127.0.0.1:0".parse().unwrap()),
        ..RegionSpec::plain("nowhere", "127.0.0.1:9".parse().unwrap())
    };
    Spec::local(
        vec![region],
        sources.iter().map(|s| s.parse().unwrap()).collect(),
    )
}

pub fn start(max_age_ms: u64) -> Relay {
    let mut spec = nowhere(&["127.0.0.1"], true);
    spec.bundle_max_age_ms = max_age_ms;
    spec.arena_slots = 64;
    Relay::start(spec).unwrap()
}

pub fn connect(relay: &Relay) -> TcpStream {
    let c = TcpStream::connect(relay.rotating_addr().unwrap()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

pub fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one response (head + Content-Length body).
pub fn read_response(c: &mut TcpStream) -> (u16, String, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
                let status = head[9..12].parse().unwrap();
                // Keep what belongs to the next response.
                let rest = buf.split_off(end + 4 + len);
                PENDING.with(|p| p.borrow_mut().extend(rest));
                return (status, head, body);
            }
        }
        let pending = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
        if !pending.is_empty() {
            buf.extend(pending);
            continue;
        }
        let n = c.read(&mut chunk).unwrap();
        assert!(
            n > 0,
            "connection closed mid-response: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

thread_local! {
    static PENDING: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

pub fn exchange(c: &mut TcpStream, req: &[u8]) -> (u16, String, String) {
    c.write_all(req).unwrap();
    read_response(c)
}

/// `n` really signed transactions (base64) and the bundle id Jito computes for them.
pub fn bundle(seed: u64, n: usize) -> (Vec<String>, String, String) {
    let mut rng = StdRng::seed_from_u64(seed);
    let txs: Vec<_> = (0..n)
        .map(|_| {
            signed_tx(
                &mut rng,
                Shape {
                    signers: 1,
                    instructions: 1,
                    accounts_per_ix: 2,
                    data_len_max: 16,
                    v0_tables: None,
                },
            )
        })
        .collect();
    let sigs: Vec<[u8; 64]> = txs.iter().map(|t| t.signatures[0].into()).collect();
    let id = bundle_relay::wire::bundle_id(&sigs).to_string();
    let first_sig = bs58::encode(sigs[0]).into_string();
    let encoded = txs
        .iter()
        .map(|t| base64::engine::general_purpose::STANDARD.encode(serialize(t)))
        .collect();
    (encoded, id, first_sig)
}

pub fn send_bundle_body(txs: &[String], id: u64) -> String {
    let list = txs
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(",");
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"sendBundle","params":[[{list}],{{"encoding":"base64"}}]}}"#
    )
}
