//! Faults on a schedule: storms, throttles, resets, GOAWAY, close, stalls, latency.

use crate::support;

use std::time::Duration;

use bundle_relay::jito::{GLOBAL_THROTTLE_MESSAGE, rate_limit_message};
use bundle_relay_bench::engine::{EngineConfig, FaultSpec, storm_picks};
use support::engine::*;
use tonic::Code;

fn cfg(interval_ms: u64, faults: &[&str]) -> EngineConfig {
    EngineConfig {
        interval_ms,
        seed: 42,
        faults: faults
            .iter()
            .map(|f| f.parse::<FaultSpec>().unwrap())
            .collect(),
        ..EngineConfig::for_tests(&["ny", "tokyo"])
    }
}

#[tokio::test]
async fn storm_sources_are_told_30000ms_and_held_to_it() {
    let h = start(cfg(100, &["storm@0s:fraction=0.5,retry_ms=30000"])).await;
    let ny = addr_of(&h, "ny");
    let sources: Vec<u8> = (1..=16).collect();
    let picked: Vec<u8> = sources
        .iter()
        .copied()
        .filter(|&n| storm_picks(42, 0.5, src(n)))
        .collect();
    assert!(!picked.is_empty() && picked.len() < sources.len());
    let mut clients = Vec::new();
    for &n in &sources {
        clients.push((n, client(ny, src(n)).await));
    }
    for (n, c) in &mut clients {
        let r = c.send_bundle(bundle(*n as u64)).await;
        if picked.contains(n) {
            let e = r.unwrap_err();
            assert_eq!(e.code(), Code::ResourceExhausted);
            assert_eq!(e.message(), rate_limit_message(30000));
        } else {
            r.expect("not picked by the storm");
        }
    }
    // Well past the 100 ms interval: only the storm's cooldown can refuse now.
    tokio::time::sleep(Duration::from_millis(150)).await;
    for (n, c) in &mut clients {
        let r = c.send_bundle(bundle(100 + *n as u64)).await;
        if picked.contains(n) {
            let e = r.unwrap_err();
            let retry = retry_ms_of(e.message());
            assert!(
                (29_000..30_000).contains(&retry),
                "held to the cooldown: {retry}"
            );
        } else {
            r.expect("still not picked");
        }
    }
    let s = h.stats();
    let k = picked.len() as u64;
    assert_eq!(s.faults["storm"], k);
    assert_eq!(
        s.early_sends, k,
        "sends inside the cooldown are early sends"
    );
    let early: Vec<String> = picked.iter().map(|&n| src(n).to_string()).collect();
    assert_eq!(
        s.early_sends_by_source
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .len(),
        early.len()
    );
    for ip in early {
        assert_eq!(s.early_sends_by_source[&ip], 1);
    }
    assert_eq!(s.accepted, 2 * (sources.len() as u64 - k));
}

#[tokio::test]
async fn global_throttle_has_no_retry_hint() {
    let h = start(cfg(1_000, &["throttle@0s:every=2"])).await;
    let ny = addr_of(&h, "ny");
    let mut a = client(ny, src(1)).await;
    let mut b = client(ny, src(2)).await;
    a.send_bundle(bundle(1)).await.expect("1st request passes");
    let e = b.send_bundle(bundle(2)).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert_eq!(e.message(), GLOBAL_THROTTLE_MESSAGE);
    // The throttled source's turn was not used: its next (3rd overall) send is accepted.
    b.send_bundle(bundle(3))
        .await
        .expect("throttle does not book the source");
    let s = h.stats();
    assert_eq!((s.faults["throttle"], s.accepted, s.early_sends), (1, 2, 0));
    assert_eq!(s.rejected["throttled"], 1);
}

#[tokio::test]
async fn rst_stream_fault_resets_the_stream() {
    let h = start(cfg(1, &["rst@0s:every=2,region=ny"])).await;
    let (mut send, _conn) = h2_connect(addr_of(&h, "ny"), src(1)).await;
    let ok = h2_call(&mut send, "SendBundle", grpc_body(&bundle(1)))
        .await
        .unwrap();
    assert_eq!(ok.status, 0);
    tokio::time::sleep(Duration::from_millis(3)).await;
    let err = h2_call(&mut send, "SendBundle", grpc_body(&bundle(2)))
        .await
        .unwrap_err();
    assert!(err.is_reset(), "{err}");
    assert_eq!(err.reason(), Some(h2::Reason::INTERNAL_ERROR));
    // The connection survives a stream reset.
    let again = h2_call(&mut send, "SendBundle", grpc_body(&bundle(3)))
        .await
        .unwrap();
    assert_eq!(again.status, 0);
    // region=ny: tokyo is untouched.
    let (mut t, _c) = h2_connect(addr_of(&h, "tokyo"), src(1)).await;
    for n in 0..2 {
        tokio::time::sleep(Duration::from_millis(3)).await;
        let r = h2_call(&mut t, "SendBundle", grpc_body(&bundle(10 + n)))
            .await
            .unwrap();
        assert_eq!(r.status, 0);
    }
    let s = h.stats();
    assert_eq!((s.faults["rst"], s.accepted), (1, 4));
    assert_eq!(s.fault_rules[0].injected, 1);
}

#[tokio::test]
async fn goaway_fault_ends_the_connection_gracefully() {
    let h = start(cfg(1, &["goaway@300ms"])).await;
    let ny = addr_of(&h, "ny");
    let (mut send, conn) = h2_connect(ny, src(1)).await;
    let r = h2_call(&mut send, "SendBundle", grpc_body(&bundle(1)))
        .await
        .unwrap();
    assert_eq!(r.status, 0);
    let ended = tokio::time::timeout(Duration::from_secs(5), conn)
        .await
        .expect("connection ends after GOAWAY")
        .unwrap();
    assert!(ended.is_ok(), "graceful GOAWAY closes cleanly: {ended:?}");
    assert!(
        h2_call(&mut send, "SendBundle", grpc_body(&bundle(2)))
            .await
            .is_err()
    );
    // The instant has passed: a new connection is served.
    let (mut fresh, _c) = h2_connect(ny, src(1)).await;
    let r = h2_call(&mut fresh, "SendBundle", grpc_body(&bundle(3)))
        .await
        .unwrap();
    assert_eq!(r.status, 0);
    assert_eq!(h.stats().faults["goaway"], 1);
}

#[tokio::test]
async fn close_fault_drops_connections_without_goaway() {
    let h = start(cfg(1, &["close@200ms+300ms"])).await;
    let ny = addr_of(&h, "ny");
    let (mut send, conn) = h2_connect(ny, src(1)).await;
    assert_eq!(
        h2_call(&mut send, "GetRegions", grpc_body(&()))
            .await
            .unwrap()
            .status,
        0
    );
    let ended = tokio::time::timeout(Duration::from_secs(5), conn).await;
    assert!(ended.is_ok(), "connection was closed");
    // Inside the window a new connection is closed at once, with no GOAWAY: read as raw bytes
    // (an HTTP/2 client would hide a GOAWAY) until the engine hangs up.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sock = tokio::net::TcpStream::connect(ny).await.unwrap();
    let _ = sock
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 4096];
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let mut at = 0;
    while at + 9 <= got.len() {
        assert_ne!(got[at + 3], 0x7, "a GOAWAY frame in {got:02x?}");
        at += 9 + ((got[at] as usize) << 16 | (got[at + 1] as usize) << 8 | got[at + 2] as usize);
    }
    assert!(read.is_ok(), "the engine hung up within 5 s");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (mut after, _c) = h2_connect(ny, src(1)).await;
    assert_eq!(
        h2_call(&mut after, "GetRegions", grpc_body(&()))
            .await
            .unwrap()
            .status,
        0
    );
    assert_eq!(h.stats().faults["close"], 2);
}

#[tokio::test]
async fn stall_fault_answers_nothing_until_the_window_ends() {
    let h = start(cfg(1, &["stall@0s+600ms"])).await;
    let (mut send, _conn) = h2_connect(addr_of(&h, "ny"), src(1)).await;
    let t0 = std::time::Instant::now();
    let stalled =
        tokio::spawn(async move { h2_call(&mut send, "SendBundle", grpc_body(&bundle(1))).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!stalled.is_finished(), "no answer inside the stall");
    assert_eq!(
        h.stats().send_bundle_calls,
        0,
        "the stalled request is not processed yet"
    );
    let r = stalled.await.unwrap().unwrap();
    assert_eq!(r.status, 0, "served once the stall ends");
    assert!(t0.elapsed() >= Duration::from_millis(550));
    let s = h.stats();
    assert_eq!((s.faults["stall"], s.accepted), (1, 1));
}

#[tokio::test]
async fn latency_fault_delays_the_answer() {
    let h = start(cfg(1, &["latency@0s:ms=200,region=tokyo"])).await;
    let mut c = client(addr_of(&h, "tokyo"), src(1)).await;
    let t0 = std::time::Instant::now();
    c.send_bundle(bundle(1)).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert_eq!(h.stats().faults["latency"], 1);
}

#[test]
fn fault_flags_reject_unknown_regions() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(bundle_relay_bench::engine::Engine::start(cfg(
            1,
            &["rst@0s:region=mars"],
        )))
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("region `mars` is not one of ny, tokyo"),
        "{err}"
    );
}
