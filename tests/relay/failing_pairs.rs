//! What an operator sees of pairs that cannot connect: the log lines and the `/debug/pairs`
//! lines about them. A dozen misbehaving proxies or an expired certificate must not flood the
//! log, and each failing proxy must be told apart from the others.

use crate::dispatcher_support::sent;
use crate::tls_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::config::Source;
use bundle_relay::egress::transport::TlsTarget;
use bundle_relay::limiter::PairId;
use bundle_relay::metrics::accounting::Stats;
use bundle_relay::relay::dispatch::{ConnectOrder, Dispatcher, Link};
use bundle_relay::relay::tuning::Tuning;
use bundle_relay::relay::{RegionSpec, Spec};
use rustls::pki_types::UnixTime;

const MS: u64 = 1_000_000;

fn proxy(port: u16) -> Source {
    Source::Socks5 {
        proxy: SocketAddr::from(([127, 0, 0, 1], port)),
        auth: None,
    }
}

/// One thread's dispatcher for region "ny" from `sources`, retrying every 10 ms, at 1 ms.
fn relay(sources: Vec<Source>, tweak: impl FnOnce(&mut Spec)) -> (Dispatcher, Instant) {
    let region = RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap());
    let mut spec = Spec::local(vec![region], Vec::new());
    spec.source_group = vec![0; sources.len()];
    spec.sources = sources;
    spec.reconnect_min_ms = 10;
    spec.reconnect_max_ms = 10;
    spec.connect_timeout_ms = 400;
    tweak(&mut spec);
    let metrics = bundle_relay::metrics::Metrics::new(&["ny".to_string()], 1);
    let now = Instant(MS);
    let d = Dispatcher::new(
        &spec.thread(0),
        TickRate::NANOS,
        now,
        Arc::new(Stats::default()),
        metrics.thread(0),
    );
    (d, now)
}

/// The log lines queued since the last call.
fn logged(d: &Dispatcher) -> Vec<String> {
    let mut lines = Vec::new();
    d.log().drain(|l| lines.push(l.to_string()));
    lines
}

/// The `/debug/pairs` lines about failing pairs.
fn failing(d: &mut Dispatcher, now: Instant) -> Vec<String> {
    let mut text = String::new();
    d.render_pairs(now, &mut text);
    text.lines()
        .filter(|l| l.contains("failing"))
        .map(str::to_string)
        .collect()
}

/// Every connect due by `now` fails with the errno `errno_of` gives its proxy's port; returns
/// how many did.
fn fail_due_connects(d: &mut Dispatcher, now: Instant, errno_of: impl Fn(u16) -> i32) -> usize {
    let mut n = 0;
    while let Some(order) = d.poll_connect(now) {
        d.connect_failed(order.pair, now, errno_of(order.remote.port()));
        n += 1;
    }
    n
}

#[test]
fn two_proxies_failing_in_turn_for_ten_seconds_log_one_line_each() {
    // One proxy refuses, the other is unreachable: the two errors alternate 100 times and
    // more. Each is logged once, naming its proxy.
    let (mut d, mut now) = relay(vec![proxy(1080), proxy(1081)], |_| {});
    let mut failures = 0;
    let mut lines = Vec::new();
    while now.0 < 9_000 * MS {
        failures += fail_due_connects(&mut d, now, |port| {
            if port == 1080 {
                libc::ECONNREFUSED
            } else {
                libc::EHOSTUNREACH
            }
        });
        lines.extend(logged(&d));
        now = Instant(now.0 + 20 * MS);
    }
    assert!(failures >= 200, "{failures}");
    assert_eq!(
        lines.len(),
        2,
        "{failures} failures logged as:\n{}",
        lines.join("\n")
    );
    assert!(
        lines[0].contains("via 127.0.0.1:1080: connect failed"),
        "{lines:?}"
    );
    assert!(
        lines[1].contains("via 127.0.0.1:1081: connect failed"),
        "{lines:?}"
    );
}

#[test]
fn an_error_that_persists_is_logged_again_after_ten_seconds_with_how_often_it_came_meanwhile() {
    let (mut d, mut now) = relay(vec![proxy(1080)], |_| {});
    let start = now;
    let mut failures = 0;
    let mut lines = Vec::new();
    while now.since(start).0 < 12_000 * MS {
        let n = fail_due_connects(&mut d, now, |_| libc::ECONNREFUSED);
        failures += n;
        for line in logged(&d) {
            lines.push((failures, now.since(start).0 / MS, line));
        }
        now = Instant(now.0 + 50 * MS);
    }
    assert_eq!(lines.len(), 2, "{lines:?}");
    let (first, _, ref line) = lines[0];
    assert_eq!(first, 1);
    assert!(!line.contains("more like this"), "{line}");
    // The second line comes with the first failure 10 s on, and counts those in between.
    let (second, at_ms, ref line) = lines[1];
    assert!((10_000..10_100).contains(&at_ms), "{at_ms}");
    assert!(
        line.contains(&format!("[{} more like this in 10 s]", second - 2)),
        "{line}"
    );
    assert!(
        line.contains("via 127.0.0.1:1080: connect failed: Connection refused"),
        "{line}"
    );
}

#[test]
fn more_kinds_of_error_than_a_region_keeps_still_log_a_bounded_number_of_lines() {
    let proxies = 40;
    let (mut d, mut now) = relay((0..proxies).map(|i| proxy(2000 + i)).collect(), |_| {});
    let mut lines = Vec::new();
    let mut failures = 0;
    // Two ERROR_RELOG_MS windows and a little.
    while now.0 < 20_500 * MS {
        failures += fail_due_connects(&mut d, now, |_| libc::ECONNREFUSED);
        lines.extend(logged(&d));
        now = Instant(now.0 + 50 * MS);
    }
    assert!(failures > 10_000, "{failures}");
    // At most a line per kind kept and one for all others, per window.
    assert!(
        lines.len() <= 3 * 17,
        "{} lines:\n{}",
        lines.len(),
        lines.join("\n")
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("errors of other kinds not logged")),
        "{}",
        lines.join("\n")
    );
}

#[test]
fn dead_and_silent_proxies_are_listed_apart_each_naming_its_proxy() {
    let (mut d, mut now) = relay(vec![proxy(1080), proxy(1081), proxy(1082)], |_| {});
    let mut silent = None;
    while let Some(order) = d.poll_connect(now) {
        if order.remote.port() == 1082 {
            // Takes the connection and never answers the greeting.
            d.connected(order.pair, now);
            silent = Some(order.pair);
        } else {
            d.connect_failed(order.pair, now, libc::ECONNREFUSED);
        }
    }
    let silent = silent.expect("the silent proxy's pair connected");
    now = Instant(now.0 + 500 * MS);
    d.sweep(now);
    while let Some(p) = d.poll_close() {
        d.socket_released(p, now, 0);
    }
    assert_eq!(d.link(silent), Link::Down);
    let mut lines = failing(&mut d, now);
    lines.sort();
    assert_eq!(
        lines,
        [
            "  region 0 (ny): 1 pairs failing: via 127.0.0.1:1080: connect failed: Connection refused (os error 111)",
            "  region 0 (ny): 1 pairs failing: via 127.0.0.1:1081: connect failed: Connection refused (os error 111)",
            "  region 0 (ny): 1 pairs failing: via 127.0.0.1:1082: the SOCKS5 handshake did not finish within 400 ms",
        ]
    );
}

/// What the TLS verifier takes for now: a test moves it.
#[derive(Debug)]
struct TestTime(AtomicU64);

impl rustls::time_provider::TimeProvider for TestTime {
    fn current_time(&self) -> Option<UnixTime> {
        Some(UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            self.0.load(Ordering::Relaxed),
        )))
    }
}

/// A TLS handshake of `pair` against an engine presenting `pki`'s certificate, until the
/// client gives up on it.
fn handshake_failing(d: &mut Dispatcher, pair: PairId, pki: &tls_support::Pki, now: Instant) {
    let mut server =
        rustls::ServerConnection::new(tls_support::server_config(pki, &[b"h2"])).unwrap();
    d.connected(pair, now);
    for _ in 0..8 {
        while let Some(p) = d.poll_dirty() {
            let bytes = d.transmit(p, now).to_vec();
            d.transmitted(p, bytes.len(), now);
            let mut rd = &bytes[..];
            while !rd.is_empty() {
                server.read_tls(&mut rd).unwrap();
                // The client's alert about the certificate fails the server: expected.
                let _ = server.process_new_packets();
            }
        }
        let mut out = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut out).unwrap();
        }
        if !out.is_empty() {
            d.received(pair, &out, now);
        }
        while let Some(p) = d.poll_close() {
            d.socket_released(p, now, 0);
        }
        if d.link(pair) == Link::Down {
            return;
        }
    }
    panic!("the handshake of {pair:?} did not fail: {:?}", d.link(pair));
}

/// Two pairs to a region whose engine's certificate expired, failing their handshakes a second
/// apart: their errors' texts name the verification time, so they differ.
fn two_pairs_failing_on_an_expired_certificate_a_second_apart() -> (Dispatcher, Instant) {
    let pki = tls_support::pki(&["engine.test"]);
    // After rcgen's default not_after (year 4096).
    let time = Arc::new(TestTime(AtomicU64::new(70_000_000_000)));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.chain[1].clone()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_details(
        Arc::new(rustls::crypto::ring::default_provider()),
        time.clone(),
    )
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let sources = vec![
        Source::Local("127.1.0.1".parse().unwrap()),
        Source::Local("127.1.0.2".parse().unwrap()),
    ];
    let (mut d, now) = relay(sources, |s| {
        s.regions[0].tls = Some(TlsTarget {
            config: Arc::new(config),
            sni: "engine.test".into(),
        });
    });
    let pairs: Vec<PairId> = std::iter::from_fn(|| d.poll_connect(now))
        .map(|o| o.pair)
        .collect();
    assert_eq!(pairs.len(), 2);
    handshake_failing(&mut d, pairs[0], &pki, now);
    time.0.fetch_add(1, Ordering::Relaxed);
    let later = Instant(now.0 + 1_000 * MS);
    handshake_failing(&mut d, pairs[1], &pki, later);
    (d, later)
}

#[test]
fn an_expired_certificate_is_logged_once_though_its_text_names_the_time() {
    let (d, _) = two_pairs_failing_on_an_expired_certificate_a_second_apart();
    let lines = logged(&d);
    assert_eq!(lines.len(), 1, "{}", lines.join("\n"));
    assert!(
        lines[0].contains("certificate expired: verification time 70000000000 (UNIX)"),
        "the line shows the real text: {}",
        lines[0]
    );
}

#[test]
fn pairs_failing_on_an_expired_certificate_are_one_line_in_debug_pairs() {
    let (mut d, now) = two_pairs_failing_on_an_expired_certificate_a_second_apart();
    let listed = failing(&mut d, now);
    assert_eq!(listed.len(), 1, "{}", listed.join("\n"));
    assert!(
        listed[0].contains(
            "2 pairs failing: TLS: bad certificate: certificate expired: verification time 70000000000 (UNIX)"
        ),
        "{}",
        listed[0]
    );
}

#[test]
fn a_pair_failing_again_and_again_allocates_nothing() {
    // Noting and logging a failed connect runs on the reactor: fixed room only, as the rest
    // of a reconnect.
    let (mut d, mut now) = relay(vec![proxy(1080), proxy(1081)], |_| {});
    let errno_of = |port| {
        if port == 1080 {
            libc::ECONNREFUSED
        } else {
            libc::EHOSTUNREACH
        }
    };
    fail_due_connects(&mut d, now, errno_of);
    let before = crate::counting_alloc::allocations();
    let mut failures = 0;
    // Past ERROR_RELOG_MS, so lines are logged again too.
    for _ in 0..1_000 {
        now = Instant(now.0 + 20 * MS);
        failures += fail_due_connects(&mut d, now, errno_of);
        d.log().drain(|_| {});
    }
    assert!(failures >= 1_000, "{failures}");
    assert_eq!(crate::counting_alloc::allocations() - before, 0);
}

/// How a pair's connection ended, for [`only_what_reached_the_engines_address_has_its_name_looked_up_again`].
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// Its connect was refused.
    Refused,
    /// It connected, and the peer closed it at once (a proxy: before its greeting reply).
    Closed,
    /// A proxy asked to CONNECT to the engine's address answered this RFC 1928 failure code.
    ConnectReply(u8),
    /// A proxy asked to CONNECT to the engine's address closed before it answered.
    ClosedAtConnect,
}

/// A refused connect to the engine's address, or a connection to it that ended, has the
/// region's host name looked up again (the engine may have moved). So does a proxy's CONNECT
/// to that address that failed, named the failure or not: the proxy dialled the address.
/// A proxy that refuses the connect, or takes it and closes before it is asked for the engine,
/// says nothing of the engine's address, so a dead or silent proxy does not have the engine's
/// name looked up at every reconnect.
#[test]
fn only_what_reached_the_engines_address_has_its_name_looked_up_again() {
    let local = || Source::Local("127.1.0.1".parse().unwrap());
    // (source, how it ended, looked up again)
    let rows: [(Source, Ending, bool); 9] = [
        (local(), Ending::Refused, true),
        (proxy(1080), Ending::Refused, false),
        (local(), Ending::Closed, true),
        (proxy(1080), Ending::Closed, false),
        (proxy(1080), Ending::ConnectReply(3), true), // network unreachable
        (proxy(1080), Ending::ConnectReply(4), true), // host unreachable
        (proxy(1080), Ending::ConnectReply(5), true), // connection refused
        (proxy(1080), Ending::ConnectReply(6), true), // TTL expired
        (proxy(1080), Ending::ClosedAtConnect, true),
    ];
    for (source, ending, stale) in rows {
        let addrs = bundle_relay::egress::resolve::HostAddrs::named(
            "ny",
            "engine.test",
            10000,
            vec!["127.0.0.1:10000".parse().unwrap()],
        );
        let held = addrs.clone();
        let (mut d, now) = relay(vec![source.clone()], |spec| {
            spec.regions[0].addrs = addrs;
        });
        let order = d.poll_connect(now).expect("a connect is due");
        end_first_connection(&mut d, &order, ending, now);
        assert_eq!(held.is_stale(), stale, "{source:?}, {ending:?}");
    }
}

/// Ends `order`'s connection attempt, begun at `now`, as `ending` says. Returns when it ended,
/// and the engine address it went to where it got as far as naming one (a direct connect, or a
/// proxy asked to CONNECT).
fn end_first_connection(
    d: &mut Dispatcher,
    order: &ConnectOrder,
    ending: Ending,
    mut now: Instant,
) -> (Instant, Option<SocketAddr>) {
    let pair = order.pair;
    let mut engine = order.local.map(|_| order.remote);
    match ending {
        Ending::Refused => d.connect_failed(pair, now, libc::ECONNREFUSED),
        Ending::Closed => {
            d.connected(pair, now);
            now = Instant(now.0 + MS);
            d.socket_released(pair, now, 0);
        }
        Ending::ConnectReply(_) | Ending::ClosedAtConnect => {
            d.connected(pair, now);
            engine = Some(connect_target(d, pair, now));
            now = Instant(now.0 + MS);
            if let Ending::ConnectReply(rep) = ending {
                d.received(pair, &[5, rep, 0, 1, 0, 0, 0, 0, 0, 0], now);
                assert_eq!(d.poll_close(), Some(pair), "the failed tunnel is closed");
            }
            d.socket_released(pair, now, 0);
        }
    }
    (now, engine)
}

/// Takes a proxied pair through the greeting to its CONNECT, and returns the engine address
/// the CONNECT asks for.
fn connect_target(d: &mut Dispatcher, pair: PairId, now: Instant) -> SocketAddr {
    assert_eq!(sent(d, pair, now), [5, 1, 0], "the greeting");
    d.received(pair, &[5, 0], now);
    let connect = sent(d, pair, now);
    assert_eq!(connect[..4], [5, 1, 0, 1], "CONNECT to an IPv4 engine");
    let ip = std::net::Ipv4Addr::new(connect[4], connect[5], connect[6], connect[7]);
    SocketAddr::from((ip, u16::from_be_bytes([connect[8], connect[9]])))
}

/// The engine address `order`'s connection goes to: the connect's own address, or through a
/// proxy the address its CONNECT asks for.
fn engine_of(d: &mut Dispatcher, order: &ConnectOrder, now: Instant) -> SocketAddr {
    if order.local.is_some() {
        return order.remote;
    }
    d.connected(order.pair, now);
    connect_target(d, order.pair, now)
}

/// A region name with two engine addresses, one of them dead while DNS goes on listing it: a
/// pair whose connection reached its engine address and failed there tries the name's next
/// address at its reconnect, so no pair stays down on a dead address. What never reached the
/// engine's address (a proxy refusing the connect, or closing before it was asked for the
/// engine) says nothing of that address: the pair keeps it. The rows are those of
/// [`only_what_reached_the_engines_address_has_its_name_looked_up_again`].
#[test]
fn only_what_reached_the_engines_address_moves_the_pair_to_the_names_next_address() {
    let local = || Source::Local("127.1.0.1".parse().unwrap());
    let first: SocketAddr = "127.0.0.1:10000".parse().unwrap();
    let second: SocketAddr = "127.0.0.2:10000".parse().unwrap();
    // (source, how its first connection ended, the engine address its next connection goes to)
    let rows: [(Source, Ending, SocketAddr); 9] = [
        (local(), Ending::Refused, second),
        (proxy(1080), Ending::Refused, first),
        (local(), Ending::Closed, second),
        (proxy(1080), Ending::Closed, first),
        (proxy(1080), Ending::ConnectReply(3), second), // network unreachable
        (proxy(1080), Ending::ConnectReply(4), second), // host unreachable
        (proxy(1080), Ending::ConnectReply(5), second), // connection refused
        (proxy(1080), Ending::ConnectReply(6), second), // TTL expired
        (proxy(1080), Ending::ClosedAtConnect, second),
    ];
    for (source, ending, next) in rows {
        let addrs = bundle_relay::egress::resolve::HostAddrs::named(
            "ny",
            "engine.test",
            10000,
            vec![first, second],
        );
        let (mut d, now) = relay(vec![source.clone()], |spec| {
            spec.regions[0].addrs = addrs;
        });
        let order = d.poll_connect(now).expect("a connect is due");
        let (ended, engine) = end_first_connection(&mut d, &order, ending, now);
        if let Some(engine) = engine {
            assert_eq!(engine, first, "{source:?}: its own address first");
        }
        let later = Instant(ended.0 + 20 * MS);
        let order = d.poll_connect(later).expect("a reconnect is due");
        assert_eq!(
            engine_of(&mut d, &order, later),
            next,
            "{source:?}, {ending:?}"
        );
    }
}

/// Three engine addresses, the first dead and six sources: the two pairs whose own address it
/// is go one to each of the other two, not both to the one after it. A pair failing on every
/// address goes round them all and back to its own.
#[test]
fn the_pairs_of_a_dead_engine_address_spread_over_the_others_and_a_pair_failing_everywhere_tries_each()
 {
    let engines: Vec<SocketAddr> = ["127.0.0.1:10000", "127.0.0.2:10000", "127.0.0.3:10000"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let sources: Vec<Source> = (1..=6)
        .map(|i| Source::Local(format!("127.1.0.{i}").parse().unwrap()))
        .collect();
    let addrs = bundle_relay::egress::resolve::HostAddrs::fixed("ny", engines.clone());
    let (mut d, mut now) = relay(sources, |spec| spec.regions[0].addrs = addrs);
    let mut moved = Vec::new();
    let mut home = Vec::new();
    while let Some(order) = d.poll_connect(now) {
        home.push((order.pair, order.remote));
        if order.remote == engines[0] {
            d.connect_failed(order.pair, now, libc::ECONNREFUSED);
        } else {
            d.connected(order.pair, now);
        }
    }
    assert_eq!(
        home.iter().filter(|(_, e)| *e == engines[0]).count(),
        2,
        "{home:?}"
    );
    now = Instant(now.0 + 20 * MS);
    while let Some(order) = d.poll_connect(now) {
        moved.push(order.remote);
    }
    moved.sort();
    assert_eq!(moved, [engines[1], engines[2]], "one to each of the others");

    // One source, every address refusing: its connects go to each address in turn.
    let addrs = bundle_relay::egress::resolve::HostAddrs::fixed("ny", engines.clone());
    let (mut d, mut now) = relay(vec![Source::Local("127.1.0.1".parse().unwrap())], |spec| {
        spec.regions[0].addrs = addrs
    });
    let mut tried = Vec::new();
    for _ in 0..6 {
        let order = d.poll_connect(now).expect("a reconnect is due");
        tried.push(order.remote);
        d.connect_failed(order.pair, now, libc::ECONNREFUSED);
        now = Instant(now.0 + 20 * MS);
    }
    let mut first_round = tried[..3].to_vec();
    first_round.sort();
    assert_eq!(first_round, engines, "every address once: {tried:?}");
    assert_eq!(tried[..3], tried[3..], "and round again in the same order");
}

/// Sources listed IPv4 and IPv6 in turn, a name with two IPv4 addresses: the IPv4 sources'
/// pairs spread over both, by their places among the IPv4 sources. By their places in the
/// whole list every one of them would sit at an even place, all on the first address.
#[test]
fn sources_of_two_families_in_turn_spread_over_their_familys_addresses() {
    let sources: Vec<Source> = ["127.1.0.1", "::2", "127.1.0.3", "::4"]
        .iter()
        .map(|a| Source::Local(a.parse().unwrap()))
        .collect();
    let engines: Vec<SocketAddr> = ["127.0.0.1:10000", "127.0.0.2:10000", "[::1]:10000"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let addrs = bundle_relay::egress::resolve::HostAddrs::fixed("ny", engines.clone());
    let (mut d, now) = relay(sources, |spec| spec.regions[0].addrs = addrs);
    let mut v4 = Vec::new();
    while let Some(order) = d.poll_connect(now) {
        if order.remote.is_ipv4() {
            v4.push(order.remote);
        } else {
            assert_eq!(order.remote, engines[2]);
        }
    }
    v4.sort();
    assert_eq!(v4, engines[..2], "one IPv4 source on each IPv4 address");
}

/// Three threads of one source each, a name with two addresses: the sources' places count
/// over the whole pool, so the threads' pairs go two to one over the addresses, not all three
/// to the first (each the first source of its own thread).
#[test]
fn the_sources_of_every_thread_spread_over_a_names_addresses_together() {
    let engines: Vec<SocketAddr> = ["127.0.0.1:10000", "127.0.0.2:10000"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let mut region = RegionSpec::plain("ny", engines[0]);
    region.addrs = bundle_relay::egress::resolve::HostAddrs::fixed("ny", engines.clone());
    let sources = ["127.1.0.1", "127.1.0.2", "127.1.0.3"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let mut spec = Spec::local(vec![region], sources);
    spec.threads = 3;
    let now = Instant(MS);
    let mut went = Vec::new();
    for t in 0..3 {
        let (mut d, _) = crate::dispatcher_support::unconnected(&spec, t, now);
        while let Some(order) = d.poll_connect(now) {
            went.push(order.remote);
        }
    }
    went.sort();
    assert_eq!(went, [engines[0], engines[0], engines[1]]);
}

/// What failed on this host, not at the engine's address, keeps the pair on its address:
/// every address would fail alike. A source address not on the host, descriptors run out,
/// and a close of the relay's own with no error (a reload retiring the source mid-setup).
/// What the path said of the address moves it.
#[test]
fn a_failure_of_this_hosts_own_keeps_the_pair_on_its_address() {
    let engines: Vec<SocketAddr> = ["127.0.0.1:10000", "127.0.0.2:10000"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    for errno in [
        libc::EADDRNOTAVAIL,
        libc::EMFILE,
        libc::ENOBUFS,
        libc::EPERM,
    ] {
        let addrs = bundle_relay::egress::resolve::HostAddrs::fixed("ny", engines.clone());
        let (mut d, now) = relay(vec![Source::Local("127.1.0.1".parse().unwrap())], |spec| {
            spec.regions[0].addrs = addrs
        });
        let order = d.poll_connect(now).expect("a connect is due");
        assert_eq!(order.remote, engines[0]);
        d.connect_failed(order.pair, now, errno);
        let later = Instant(now.0 + 20 * MS);
        let order = d.poll_connect(later).expect("a reconnect is due");
        assert_eq!(order.remote, engines[0], "errno {errno}");
    }

    // What the path says of the engine's address moves it: a refusal, no answer, no route,
    // and the ICMP refusals connect reports as EACCES, ENONET or ENOPROTOOPT.
    for errno in [
        libc::ECONNREFUSED,
        libc::ETIMEDOUT,
        libc::EHOSTUNREACH,
        libc::ENETUNREACH,
        libc::EACCES,
        libc::ENONET,
        libc::ENOPROTOOPT,
    ] {
        let addrs = bundle_relay::egress::resolve::HostAddrs::fixed("ny", engines.clone());
        let (mut d, now) = relay(vec![Source::Local("127.1.0.1".parse().unwrap())], |spec| {
            spec.regions[0].addrs = addrs
        });
        let order = d.poll_connect(now).expect("a connect is due");
        d.connect_failed(order.pair, now, errno);
        let later = Instant(now.0 + 20 * MS);
        let order = d.poll_connect(later).expect("a reconnect is due");
        assert_eq!(order.remote, engines[1], "errno {errno}");
    }

    // A reload takes the source out while its pair sets up, and lists it again.
    let mut region = RegionSpec::plain("ny", engines[0]);
    region.addrs = bundle_relay::egress::resolve::HostAddrs::fixed("ny", engines.clone());
    let spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
    let now = Instant(MS);
    let (mut d, _) = crate::dispatcher_support::unconnected(&spec, 0, now);
    let order = d.poll_connect(now).expect("the pair connects at start");
    assert_eq!(order.remote, engines[0]);
    let mut none = Tuning::of_spec(&spec);
    none.sources.clear();
    d.retune(&none, now);
    d.connected(order.pair, now);
    crate::dispatcher_support::flush(&mut d, now);
    d.received(order.pair, &crate::h2_support::engine_hello(), now);
    assert_eq!(
        d.poll_close(),
        Some(order.pair),
        "retired, it closes once set up"
    );
    d.socket_released(order.pair, now, 0);
    let later = Instant(now.0 + 60_000 * MS);
    d.retune(&Tuning::of_spec(&spec), later);
    let order = d.poll_connect(later).expect("listed again, it connects");
    assert_eq!(order.remote, engines[0], "our own close moved it");
}

/// One proxy gateway, a username per source: the gateway refusing one user's password, and
/// two proxies each cutting the tunnel before the engine's TLS, are each a line of their own
/// in `/debug/pairs` and in the log, naming the proxy and the user, whatever the error says
/// of itself.
#[test]
fn each_proxy_and_user_failing_is_a_line_of_its_own_naming_them() {
    let user = |name: &str| Source::Socks5 {
        proxy: SocketAddr::from(([127, 0, 0, 1], 7000)),
        auth: Some((name.to_string(), "pw".to_string())),
    };
    let (mut d, now) = relay(vec![user("alice"), user("bob")], |_| {});
    while let Some(order) = d.poll_connect(now) {
        d.connected(order.pair, now);
        let greeting = sent(&mut d, order.pair, now);
        assert_eq!(greeting, [5, 1, 2]);
        d.received(order.pair, &[5, 2], now);
        sent(&mut d, order.pair, now);
        d.received(order.pair, &[1, 1], now);
        assert_eq!(d.poll_close(), Some(order.pair));
        d.socket_released(order.pair, now, 0);
    }
    let mut lines = failing(&mut d, now);
    lines.sort();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("via alice@127.0.0.1:7000: "), "{lines:?}");
    assert!(lines[1].contains("via bob@127.0.0.1:7000: "), "{lines:?}");

    let ca = tls_support::pki(&["engine.test"]).ca_pem;
    let (mut d, now) = relay(vec![proxy(1080), proxy(1081)], |spec| {
        spec.regions[0].tls = Some(TlsTarget {
            config: bundle_relay::tls::client_config_from_pem(ca.as_bytes()).unwrap(),
            sni: "engine.test".into(),
        });
    });
    while let Some(order) = d.poll_connect(now) {
        d.connected(order.pair, now);
        assert_eq!(sent(&mut d, order.pair, now), [5, 1, 0]);
        d.received(order.pair, &[5, 0], now);
        sent(&mut d, order.pair, now);
        d.received(order.pair, &[5, 0, 0, 1, 127, 0, 0, 1, 0x27, 0x10], now);
        assert!(!sent(&mut d, order.pair, now).is_empty(), "the ClientHello");
        // The tunnel ends mid-handshake.
        d.socket_released(order.pair, now, 0);
    }
    let mut lines = failing(&mut d, now);
    lines.sort();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("via 127.0.0.1:1080: TLS: "), "{lines:?}");
    assert!(lines[1].contains("via 127.0.0.1:1081: TLS: "), "{lines:?}");
}
