//! Idle upstream connections and lost packets. An idle connection is watched by one mechanism:
//! HTTP/2 PINGs when `ping_idle_ms` is set (they travel as data, so TCP retransmits a lost one),
//! the kernel's keepalive when PINGs are off. Either way a healthy connection survives lost
//! packets for as long as its timeouts promise, and a reload that switches between the two
//! reaches the connections already open, not only the next ones.
//!
//! Loss is real: an nftables rule drops every packet from the engine's port to the relay's
//! source address (Debian's nftables; `.ci/run` installs it), so the relay's probes leave and
//! their answers never come back.
//!
//! A relay that stops closes each connection with HTTP/2's GOAWAY (NO_ERROR) first, so the
//! engine reads a graceful close, not a bare FIN.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{BorrowedFd, RawFd};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bundle_relay::config::{Resolve, Shared};
use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{Engine, EngineConfig, EngineHandle};
use socket2::SockRef;
use support::relay::{spec, wait_for, wait_pairs_up};

/// Drops every packet from `engine` to `source` while it lives.
struct Blackhole {
    table: String,
}

impl Blackhole {
    /// `None` where nft is not installed outside CI (the test then checks nothing); under CI a
    /// missing nft fails the test.
    fn engine_to_relay(name: &str, engine: SocketAddr, source: IpAddr) -> Option<Blackhole> {
        if !support::installed("nft", "--version", "nftables") {
            return None;
        }
        let table = format!("bundle_relay_{name}_{}", std::process::id());
        let rules = format!(
            "table ip {table} {{\n chain out {{\n  type filter hook output priority 0;\n  \
             ip saddr {} tcp sport {} ip daddr {source} drop\n }}\n}}\n",
            engine.ip(),
            engine.port()
        );
        let rules_file = std::env::temp_dir().join(format!("{table}.nft"));
        std::fs::write(&rules_file, rules).unwrap();
        let out = Command::new("nft")
            .arg("-f")
            .arg(&rules_file)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&rules_file);
        assert!(
            out.status.success(),
            "nft refused the rule: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Blackhole { table })
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", &self.table])
            .status();
    }
}

/// The relay's open sockets from `source` to `engine` (the relay runs in this process).
fn relay_sockets(source: IpAddr, engine: SocketAddr) -> Vec<RawFd> {
    let mut fds = Vec::new();
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()) else {
            continue;
        };
        let is_socket =
            std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            continue;
        }
        // SAFETY: borrowed for these calls only; the fd stays open (at worst it is another
        // socket by now, which the addresses then do not match).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let s = SockRef::from(&fd);
        let local = s.local_addr().ok().and_then(|a| a.as_socket());
        let peer = s.peer_addr().ok().and_then(|a| a.as_socket());
        if local.map(|a| a.ip()) == Some(source) && peer == Some(engine) {
            fds.push(std::os::fd::AsRawFd::as_raw_fd(&fd));
        }
    }
    fds
}

/// (SO_KEEPALIVE, TCP_USER_TIMEOUT in ms) of the relay's one socket from `source` to `engine`.
fn options(source: IpAddr, engine: SocketAddr) -> (bool, u128) {
    let fds = relay_sockets(source, engine);
    assert_eq!(fds.len(), 1, "one socket from {source} to {engine}");
    // SAFETY: as in `relay_sockets`.
    let fd = unsafe { BorrowedFd::borrow_raw(fds[0]) };
    let s = SockRef::from(&fd);
    (
        s.keepalive().unwrap(),
        s.tcp_user_timeout().unwrap().map_or(0, |d| d.as_millis()),
    )
}

/// Waits until the relay has fetched the tip accounts: its one call of its own (the first
/// try comes before any pair is up, the next one a retry period later), after which an idle
/// pair carries nothing for minutes.
async fn tips_fetched(engine: &EngineHandle) {
    let fetched = support::poll(Duration::from_secs(10), Duration::from_millis(20), || {
        (engine.stats().other_calls > 0).then_some(())
    })
    .await;
    assert!(
        fetched.is_some(),
        "the relay never asked for the tip accounts"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// One source, one region, one thread; the pair up and idle.
async fn one_pair(
    source: &str,
    ping_idle_ms: u64,
    tcp_user_timeout_ms: u64,
) -> (EngineHandle, Relay) {
    let engine = Engine::start(EngineConfig::for_tests(&["ny"]))
        .await
        .unwrap();
    let mut s = spec(&engine.region_addrs(), source, 50);
    s.threads = 1;
    s.ping_idle_ms = ping_idle_ms;
    s.tcp_user_timeout_ms = tcp_user_timeout_ms;
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 1, Duration::from_secs(10)).await;
    tips_fetched(&engine).await;
    (engine, relay)
}

/// Drops the engine's packets to `source` for `hold`, then checks that the pair's one
/// connection is still the one it had.
async fn survives(
    name: &str,
    engine: &EngineHandle,
    relay: &Relay,
    source: IpAddr,
    hold: Duration,
) {
    let addr = engine.region_addrs()[0].1;
    let before = relay.totals();
    {
        let Some(_hole) = Blackhole::engine_to_relay(name, addr, source) else {
            return;
        };
        tokio::time::sleep(hold).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t = relay.totals();
    assert_eq!(
        (t.disconnects, t.connects, t.pairs_up),
        (before.disconnects, before.connects, 1),
        "the idle connection ended while its answers were lost for {hold:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pings_on_an_idle_connection_survives_12_s_of_lost_answers() {
    // PINGs every 60 s (none in the window) and the default 5 s user timeout: no kernel
    // keepalive probe may be sent, since one lost probe would end the connection a second later.
    let source: IpAddr = "127.1.82.0".parse().unwrap();
    let (engine, relay) = one_pair("127.1.82.0/32", 60_000, 5_000).await;
    let addr = engine.region_addrs()[0].1;
    survives("pings", &engine, &relay, source, Duration::from_secs(12)).await;
    assert_eq!(options(source, addr), (false, 5_000));
    relay.shutdown(Duration::from_millis(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pings_off_kernel_keepalive_survives_two_lost_probes() {
    // Probes at 10, 11 and 12 s of silence; the first two answers are lost, the third comes
    // back. A 13 s user timeout is the least the config accepts with PINGs off.
    let source: IpAddr = "127.1.82.1".parse().unwrap();
    let (engine, relay) = one_pair("127.1.82.1/32", 0, 13_000).await;
    let addr = engine.region_addrs()[0].1;
    assert_eq!(options(source, addr), (true, 13_000));
    survives(
        "probes",
        &engine,
        &relay,
        source,
        Duration::from_millis(11_500),
    )
    .await;
    relay.shutdown(Duration::from_millis(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_switching_pings_off_and_on_reaches_the_open_connection() {
    let engine = Engine::start(EngineConfig::for_tests(&["ny"]))
        .await
        .unwrap();
    let addr = engine.region_addrs()[0].1;
    let source: IpAddr = "127.1.82.2".parse().unwrap();
    let dir = std::env::temp_dir().join(format!("relay-idle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("relay.toml");
    let config = |ping_idle_ms: u64, tcp_user_timeout_ms: u64| {
        format!(
            "threads = 1\n[intake]\nrotating = \"127.0.0.1:0\"\n[[region]]\nname = \"ny\"\n\
             host = \"{}\"\nport = {}\ntls = false\ninterval_ms = 50\n[egress]\n\
             addresses = [\"{source}\"]\nping_idle_ms = {ping_idle_ms}\n\
             tcp_user_timeout_ms = {tcp_user_timeout_ms}\n",
            addr.ip(),
            addr.port()
        )
    };
    std::fs::write(&path, config(30_000, 5_000)).unwrap();
    let live = Arc::new(Shared::from_file(&path, Resolve::Now).unwrap());
    let mut s = spec(&engine.region_addrs(), "127.1.82.2/32", 50);
    s.threads = 1;
    s.go_live(live.clone());
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 1, Duration::from_secs(10)).await;
    assert_eq!(options(source, addr), (false, 5_000));
    let connects = relay.totals().connects;

    for (generation, ping_idle_ms, tcp_user_timeout_ms, keepalive) in
        [(2, 0, 15_000, true), (3, 20_000, 4_000, false)]
    {
        std::fs::write(&path, config(ping_idle_ms, tcp_user_timeout_ms)).unwrap();
        assert_eq!(live.reload().unwrap(), generation);
        wait_for(&relay, "the reload applied", Duration::from_secs(5), |_| {
            relay.config_generations().iter().all(|&g| g == generation)
        })
        .await;
        // Applied with the thread's next submit, after the generation shows.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            options(source, addr),
            (keepalive, u128::from(tcp_user_timeout_ms)),
            "generation {generation}"
        );
    }
    assert_eq!(
        relay.totals().connects,
        connects,
        "the connection was kept, not redone"
    );
    relay.shutdown(Duration::from_millis(200));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An engine that greets each connection (SETTINGS, a window, the ACKs of the relay's SETTINGS
/// and first PING), then records what the relay sends until it closes.
fn recording_engine() -> (SocketAddr, std::sync::mpsc::Receiver<Vec<u8>>) {
    use bundle_relay::h2::frame;
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.20:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut hello = vec![0u8; 9 + 13 + 9 + 17];
                frame::write_settings(&mut hello, &[]).unwrap();
                frame::write_window_update(&mut hello[9..], 0, 1 << 30).unwrap();
                hello[22..31].copy_from_slice(&[
                    0,
                    0,
                    0,
                    frame::SETTINGS,
                    frame::FLAG_ACK,
                    0,
                    0,
                    0,
                    0,
                ]);
                frame::write_ping(&mut hello[31..], true, 1u64.to_be_bytes()).unwrap();
                let _ = c.write_all(&hello);
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                let _ = tx.send(got);
            });
        }
    });
    (addr, rx)
}

/// The (kind, payload) of each whole frame after the client preface.
fn frames(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = &bytes[bundle_relay::h2::frame::PREFACE.len().min(bytes.len())..];
    while rest.len() >= 9 {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        if rest.len() < 9 + len {
            break;
        }
        out.push((rest[3], rest[9..9 + len].to_vec()));
        rest = &rest[9 + len..];
    }
    out
}

#[test]
fn a_relay_that_stops_says_goaway_on_each_connection_before_it_closes() {
    let (addr, recorded) = recording_engine();
    let mut s = spec(&[("ny".to_string(), addr)], "127.1.82.1", 1_000);
    s.threads = 1;
    let relay = Relay::start(s).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while relay.totals().pairs_up < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the pair never came up"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    relay.shutdown(Duration::from_millis(200));
    let got = recorded
        .recv_timeout(Duration::from_secs(5))
        .expect("the connection closed");
    let goaway = frames(&got)
        .into_iter()
        .find(|(kind, _)| *kind == bundle_relay::h2::frame::GOAWAY);
    let (_, payload) = goaway.expect("a GOAWAY before the close");
    assert_eq!(&payload[4..8], &[0, 0, 0, 0], "NO_ERROR");
}
