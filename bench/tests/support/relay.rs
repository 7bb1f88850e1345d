//! bundle-relay on loopback against bench-engine's regions: a [`Spec`] for them, waiting on the
//! relay's counters and on its `/debug/pairs` text, bundles, and a bounded open-loop load.

use std::net::SocketAddr;
use std::time::Duration;

use bundle_relay::metrics::accounting::Totals;
use bundle_relay::relay::{RegionSpec, Spec};
use bundle_relay::runtime::Relay;
use bundle_relay_bench::baseline::config::parse_egress;
use bundle_relay_bench::load::{self, LoadConfig};
use bundle_relay_bench::txgen::{self, GeneratedBundle, TxGenConfig};

use super::poll;

/// How often the waits read the relay's counters.
const TOTALS_POLL: Duration = Duration::from_millis(20);
/// How often the wait on `/debug/pairs` reads it (the relay refreshes it each second).
const PAIRS_TEXT_POLL: Duration = Duration::from_millis(100);

/// Every region pinned on an ephemeral port, the egress range's addresses as sources, two
/// threads, quick reconnects.
pub fn spec(regions: &[(String, SocketAddr)], egress: &str, interval_ms: u64) -> Spec {
    let regions = regions
        .iter()
        .map(|(name, addr)| RegionSpec {
            interval_ms,
            pinned: Some("127.0.0.1:0".parse().unwrap()),
            ..RegionSpec::plain(name, *addr)
        })
        .collect();
    let mut s = Spec::local(regions, parse_egress(egress).unwrap());
    s.threads = 2;
    s.reconnect_min_ms = 50;
    s.reconnect_max_ms = 200;
    s
}

/// Waits until the relay's totals satisfy `ok`, failing the test with `what` after `limit`.
pub async fn wait_for(
    relay: &Relay,
    what: &str,
    limit: Duration,
    ok: impl Fn(&Totals) -> bool,
) -> Totals {
    let seen = poll(limit, TOTALS_POLL, || {
        let t = relay.totals();
        ok(&t).then_some(t)
    })
    .await;
    seen.unwrap_or_else(|| panic!("timed out waiting for {what}: {:?}", relay.totals()))
}

/// Waits until exactly `pairs` (egress, region) pairs are connected.
pub async fn wait_pairs_up(relay: &Relay, pairs: u64, limit: Duration) -> Totals {
    wait_for(relay, &format!("{pairs} pairs up"), limit, |t| {
        t.pairs_up == pairs
    })
    .await
}

/// Waits until every admitted bundle has ended. A bundle on its way between two threads is
/// in neither's counts until the receiving thread takes it, so the handoffs must balance too.
/// The counters are read one by one while the threads run: a read that straddles the last
/// bundle's end can see its in-flight count gone but not yet its end (a snapshot with a bundle
/// in no column), so it waits for a snapshot whose identity holds as well. A bundle really lost
/// still fails: the wait then runs out and says so.
pub async fn wait_ended(relay: &Relay, limit: Duration) -> Totals {
    wait_for(relay, "every bundle ended", limit, |t| {
        t.in_flight == 0 && t.handoffs_in == t.handoffs_out && t.identity_holds()
    })
    .await
}

/// The relay's /debug/pairs text.
pub fn pairs_text(relay: &Relay) -> String {
    let mut s = String::new();
    (relay.pairs_fn())(&mut s);
    s
}

/// Waits until /debug/pairs shows every `want` line fragment.
pub async fn wait_for_pairs_text(relay: &Relay, want: &[&str], limit: Duration) -> String {
    let seen = poll(limit, PAIRS_TEXT_POLL, || {
        let text = pairs_text(relay);
        want.iter().all(|w| text.contains(w)).then_some(text)
    })
    .await;
    seen.unwrap_or_else(|| panic!("/debug/pairs never showed {want:?}:\n{}", pairs_text(relay)))
}

/// `count` signed bundles of run `run` from bundle number `first`.
pub fn bundles(run: u64, first: u64, count: u64) -> Vec<GeneratedBundle> {
    txgen::generate(
        TxGenConfig {
            run_id: run as u32,
            seed: run,
            ..TxGenConfig::default()
        },
        first,
        count,
    )
    .unwrap()
    .0
}

/// Sends every bundle once at `rate` over 8 connections spread over `targets`.
pub async fn run_load(
    targets: Vec<SocketAddr>,
    rate: f64,
    bundles: Vec<GeneratedBundle>,
) -> load::LoadReport {
    let cfg = LoadConfig {
        targets,
        rate_per_s: rate,
        duration: None,
        requests: Some(bundles.len() as u64),
        connections: 8,
        timeout: Duration::from_secs(5),
        ..LoadConfig::default()
    };
    tokio::task::spawn_blocking(move || load::run(&cfg, &bundles))
        .await
        .unwrap()
        .unwrap()
}

/// One JSON-RPC call over a connection of its own, as a Jito client makes it: the answer's
/// HTTP status, its head (lower-cased) and its JSON body.
pub fn rpc_call(addr: SocketAddr, path: &str, body: &str) -> (u16, String, serde_json::Value) {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    let (head, json) = out.split_once("\r\n\r\n").expect("a head and a body");
    let status = head[9..12].parse().unwrap();
    let json = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {out}"));
    (status, head.to_ascii_lowercase(), json)
}

/// The relay's pinned port for `region`.
pub fn pinned(relay: &Relay, region: &str) -> SocketAddr {
    relay
        .pinned_addrs()
        .iter()
        .find(|(n, _)| n == region)
        .map(|(_, a)| *a)
        .unwrap()
}
