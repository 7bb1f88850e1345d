//! A reload applied to one thread's dispatcher, driven without sockets: a region the config
//! no longer lists takes no new bundle (its pinned port says so by name) while the bundles
//! already waiting for it still go, and its connection closes once nothing waits; a shorter
//! max age judges waiting bundles by the new age; a source no longer listed closes its idle
//! connection and does not reconnect, and listed again it connects; PINGs turned on, off or
//! given a new timeout reach the connections already open; a proxy's new password keeps its
//! pairs and their pace, and their next connects present it.

use crate::dispatcher_support;
use crate::h2_support;

use bundle_relay::clock::Instant;
use bundle_relay::config::{Config, Resolve, Source};
use bundle_relay::h2::frame;
use bundle_relay::limiter::PairId;
use bundle_relay::relay::dispatch::{Dispatcher, Link};
use bundle_relay::relay::intake::Verdict;
use bundle_relay::relay::tuning::Tuning;
use bundle_relay::relay::{RegionSpec, Spec};
use dispatcher_support::{MS, Sim, sent};

/// One thread, one region (ny, pinned), one source, its pair in rotation and idle.
fn one(interval_ms: u64, max_age_ms: u64) -> (Sim, Spec, Instant) {
    dispatcher_support::one_region(interval_ms, max_age_ms)
}

#[test]
fn a_retired_region_takes_no_new_bundle_sends_what_waits_and_then_closes() {
    let (mut t, spec, mut now) = one(100, 10_000);
    // One goes at once; the second waits for the pair's next interval.
    assert_eq!(t.post_bundle(1, now), Verdict::Admitted);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    assert_eq!(t.post_bundle(2, now), Verdict::Admitted);
    let mut tuning = Tuning::of_spec(&spec);
    tuning.regions[0] = None;
    t.d.retune(&tuning, now);
    assert_eq!(t.post_bundle(3, now), Verdict::Unavailable);
    let answer = t.response();
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        answer.contains("region ny is no longer in the relay's config"),
        "{answer}"
    );
    t.answer(now);
    t.d.dispatch(now);
    assert_eq!(
        t.d.poll_close(),
        None,
        "a bundle still waits: the connection stays"
    );
    now = Instant(now.0 + 101 * MS);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0, "the bundle that waited went");
    t.answer(now);
    t.d.dispatch(now);
    assert_eq!(
        t.d.poll_close(),
        Some(t.pair),
        "nothing waits: the connection closes"
    );
    let s = t.totals();
    assert_eq!((s.admitted, s.delivered, s.in_flight), (2, 2, 0), "{s:?}");
    assert!(t.d.check_accounting());
}

/// The region is removed while its last bundle is at the engine, which answers UNAVAILABLE
/// (not processed: send it again). The bundle was already answered to its bot, so the region's
/// connection comes back for it, it is delivered, and only then does the region close for
/// good; it does not sit until its max age.
#[test]
fn a_bundle_a_retired_regions_engine_sends_back_is_sent_again_not_left_to_expire() {
    let (mut t, spec, mut now) = one(100, 10_000);
    assert_eq!(t.post_bundle(1, now), Verdict::Admitted);
    t.d.dispatch(now);
    assert!(t.flush(now) > 0);
    let mut tuning = Tuning::of_spec(&spec);
    tuning.regions[0] = None;
    t.d.retune(&tuning, now);
    t.d.dispatch(now);
    t.answer_error(14, "try again", now);
    t.d.dispatch(now);
    // The retiring pair closes once its call ended.
    while let Some(p) = t.d.poll_close() {
        t.d.socket_released(p, now, 0);
    }
    for _ in 0..50 {
        now = Instant(now.0 + 100 * MS);
        t.d.dispatch(now);
        if let Some(order) = t.d.poll_connect(now) {
            t.d.connected(order.pair, now);
            t.flush(now);
            t.d.received(order.pair, &h2_support::engine_hello(), now);
            t.stream = 1;
        }
        t.d.dispatch(now);
        if t.flush(now) > 0 {
            t.answer(now);
        }
        while let Some(p) = t.d.poll_close() {
            t.d.socket_released(p, now, 0);
        }
    }
    let s = t.totals();
    assert_eq!(
        (s.admitted, s.delivered, s.expired, s.in_flight),
        (1, 1, 0, 0),
        "{s:?}"
    );
    assert!(t.d.check_accounting());
}

#[test]
fn a_shorter_max_age_judges_bundles_already_waiting() {
    let (mut t, spec, now) = one(1_000, 10_000);
    assert_eq!(t.post_bundle(1, now), Verdict::Admitted);
    t.d.dispatch(now);
    t.flush(now);
    assert_eq!(t.post_bundle(2, now), Verdict::Admitted);
    let mut tuning = Tuning::of_spec(&spec);
    tuning.bundle_max_age_ms = 200;
    t.d.retune(&tuning, now);
    let later = Instant(now.0 + 201 * MS);
    t.d.dispatch(later);
    let s = t.totals();
    assert_eq!(
        (s.expired, s.in_flight),
        (1, 1),
        "the waiting one expired by the new age: {s:?}"
    );
    assert!(t.d.check_accounting());
}

#[test]
fn a_source_no_longer_listed_closes_and_stays_down_until_listed_again() {
    let (mut t, spec, now) = one(100, 10_000);
    let mut tuning = Tuning::of_spec(&spec);
    tuning.sources.clear();
    t.d.retune(&tuning, now);
    assert_eq!(t.d.poll_close(), Some(t.pair), "idle: it closes at once");
    t.d.socket_released(t.pair, now, 0);
    let later = Instant(now.0 + 60_000 * MS);
    t.d.dispatch(later);
    assert!(t.d.poll_connect(later).is_none(), "it does not reconnect");
    assert_eq!(t.d.sources_listed(), 0);
    t.d.retune(&Tuning::of_spec(&spec), later);
    let order = t.d.poll_connect(later).expect("listed again, it connects");
    assert_eq!(order.pair, t.pair);
}

#[test]
fn a_source_retired_while_its_pair_connects_never_joins_rotation() {
    let region = RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap());
    let spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
    let now = Instant(MS);
    let (mut d, stats) = dispatcher_support::unconnected(&spec, 0, now);
    let order = d.poll_connect(now).expect("the pair connects at start");
    let mut tuning = Tuning::of_spec(&spec);
    tuning.sources.clear();
    d.retune(&tuning, now);
    d.connected(order.pair, now);
    dispatcher_support::flush(&mut d, now);
    d.received(order.pair, &h2_support::engine_hello(), now);
    assert_eq!(stats.totals().pairs_up, 0, "a retired pair takes no calls");
    assert_eq!(d.poll_close(), Some(order.pair), "it closes once set up");
}

/// The pair of [`one`] watched by PINGs after `ping_idle_ms` of silence (0: by the kernel's
/// keepalive, no PINGs), answered within `ping_timeout_ms`.
fn idle_pair(ping_idle_ms: u64, ping_timeout_ms: u64) -> (Sim, Spec, Instant) {
    dispatcher_support::one_region_with(100, 10_000, |s| {
        s.ping_idle_ms = ping_idle_ms;
        s.ping_timeout_ms = ping_timeout_ms;
    })
}

/// The thread's loop at `now`: timers run, everything sent; the kinds of the frames that went.
fn frames_at(t: &mut Sim, now: Instant) -> Vec<u8> {
    t.d.file_timers();
    t.d.run_timers(now);
    t.d.dispatch(now);
    let mut kinds = Vec::new();
    while let Some(p) = t.d.poll_dirty() {
        let bytes = t.d.transmit(p, now).to_vec();
        t.d.transmitted(p, bytes.len(), now);
        let mut at = 0;
        while at + 9 <= bytes.len() {
            let h = frame::Head::parse(bytes[at..at + 9].try_into().unwrap());
            kinds.push(h.kind);
            at += 9 + h.len as usize;
        }
    }
    kinds
}

fn reload(t: &mut Sim, spec: &Spec, now: Instant, change: impl FnOnce(&mut Tuning)) {
    let mut tuning = Tuning::of_spec(spec);
    change(&mut tuning);
    t.d.retune(&tuning, now);
}

#[test]
fn pings_a_reload_turns_on_reach_a_connection_already_open() {
    let (mut t, spec, now) = idle_pair(0, 10_000);
    // The kernel's keepalive watches it: a minute of silence sends nothing.
    let later = Instant(now.0 + 60_000 * MS);
    assert!(!frames_at(&mut t, later).contains(&frame::PING));
    reload(&mut t, &spec, later, |u| u.ping_idle_ms = 2_000);
    // Silent for longer than the new idle time already: the PING goes at once, and the next
    // one an idle time after the engine's answer.
    let pinged = frames_at(&mut t, later);
    assert!(pinged.contains(&frame::PING), "{pinged:?}");
}

#[test]
fn pings_a_reload_turns_off_stop_on_a_connection_already_open() {
    let (mut t, spec, now) = idle_pair(2_000, 10_000);
    reload(&mut t, &spec, now, |u| u.ping_idle_ms = 0);
    let later = Instant(now.0 + 60_000 * MS);
    let sent = frames_at(&mut t, later);
    assert!(!sent.contains(&frame::PING), "{sent:?}");
    assert_eq!(t.d.link(t.pair), Link::InRotation);
}

#[test]
fn a_ping_timeout_a_reload_shortens_holds_for_a_connection_already_open() {
    let (mut t, spec, now) = idle_pair(2_000, 10_000);
    reload(&mut t, &spec, now, |u| u.ping_timeout_ms = 500);
    let ping_at = Instant(now.0 + 2_001 * MS);
    assert!(frames_at(&mut t, ping_at).contains(&frame::PING));
    // The engine never answers: past the new timeout, not the old one, the pair leaves
    // rotation.
    frames_at(&mut t, Instant(ping_at.0 + 501 * MS));
    assert_ne!(t.d.link(t.pair), Link::InRotation);
}

// ---- a proxy's password ----

/// Alice's account on a SOCKS5 proxy, with `password`.
fn alice(password: &str) -> Source {
    Source::Socks5 {
        proxy: "127.0.0.1:1080".parse().unwrap(),
        auth: Some(("alice".into(), password.into())),
    }
}

/// One thread, region ny (100 ms apart), one source: alice's account on the proxy.
fn through_alice(password: &str) -> Spec {
    let region = RegionSpec {
        interval_ms: 100,
        ..RegionSpec::plain("ny", "127.0.0.1:10000".parse().unwrap())
    };
    let mut spec = Spec::local(vec![region], vec!["127.1.0.1".parse().unwrap()]);
    spec.sources = vec![alice(password)];
    spec.upstream_timeout_ms = 600_000;
    spec
}

/// A reload of a config file whose one source is alice's account, with `password`.
fn alice_reloaded(spec: &Spec, password: &str) -> Tuning {
    let file = format!(
        "[[region]]\nname = \"ny\"\nhost = \"127.0.0.1\"\nport = 10000\ninterval_ms = 100\n\
         [egress]\nsocks5 = [{{ proxy = \"127.0.0.1:1080\", username = \"alice\", \
         password = \"{password}\" }}]\n"
    );
    let cfg = Config::parse(&file, "config.toml", Resolve::Deferred).unwrap();
    Tuning::of(&cfg, &spec.regions)
}

/// The proxy's side of `pair`'s connect up to the credentials: it chooses username/password
/// (RFC 1929), and the request the pair then sends is returned.
fn credentials_sent(d: &mut Dispatcher, pair: PairId, now: Instant) -> Vec<u8> {
    assert_eq!(
        sent(d, pair, now),
        [5, 1, 2],
        "the greeting offers username/password"
    );
    d.received(pair, &[5, 2], now);
    sent(d, pair, now)
}

/// An RFC 1929 request for `user` and `password`.
fn auth_request(user: &str, password: &str) -> Vec<u8> {
    let mut r = vec![1, user.len() as u8];
    r.extend(user.as_bytes());
    r.push(password.len() as u8);
    r.extend(password.as_bytes());
    r
}

/// The proxy takes the credentials and opens the tunnel to the engine: HTTP/2 starts.
fn tunnel_up(d: &mut Dispatcher, pair: PairId, now: Instant) {
    d.received(pair, &[1, 0], now);
    let connect = sent(d, pair, now);
    assert_eq!(connect[..4], [5, 1, 0, 1], "CONNECT to an IPv4 engine");
    d.received(pair, &[5, 0, 0, 1, 127, 0, 0, 1, 0x27, 0x10], now);
}

/// The audit's first case: a wrong password, corrected by a reload. The proxy stays one of the
/// relay's sources, and the pair's next connect presents the corrected password.
#[test]
fn a_corrected_proxy_password_is_presented_by_the_next_connect() {
    let spec = through_alice("wrong");
    let now = Instant(MS);
    let (mut d, stats) = dispatcher_support::unconnected(&spec, 0, now);
    let order = d.poll_connect(now).expect("the pair connects at start");
    d.connected(order.pair, now);
    assert_eq!(
        credentials_sent(&mut d, order.pair, now),
        auth_request("alice", "wrong")
    );
    d.received(order.pair, &[1, 1], now);
    assert_eq!(d.poll_close(), Some(order.pair), "the proxy refused alice");
    d.socket_released(order.pair, now, 0);

    d.retune(&alice_reloaded(&spec, "right"), now);
    assert_eq!(
        d.sources_listed(),
        1,
        "the proxy is still one of the relay's sources"
    );
    // Past the longest back-off: the pair has tried again.
    let later = Instant(now.0 + 30_001 * MS);
    d.dispatch(later);
    let order = d
        .poll_connect(later)
        .expect("the pair connects again through the proxy");
    d.connected(order.pair, later);
    assert_eq!(
        credentials_sent(&mut d, order.pair, later),
        auth_request("alice", "right")
    );
    tunnel_up(&mut d, order.pair, later);
    sent(&mut d, order.pair, later);
    d.received(order.pair, &h2_support::engine_hello(), later);
    assert_eq!(stats.totals().pairs_up, 1, "in rotation");
}

/// The audit's second case: a working proxy's password rotated. The connection open stays in
/// rotation, keeps its pace (a bundle that waited for the pair's interval still waits for it),
/// and when it closes the reconnect presents the new password.
#[test]
fn a_rotated_proxy_password_keeps_the_pair_and_its_pace_and_the_reconnect_presents_it() {
    let spec = through_alice("old-secret");
    let mut now = Instant(MS);
    let mut t = Sim::connected_through(&spec, 0, None, now, |d, pair, now| {
        assert_eq!(
            credentials_sent(d, pair, now),
            auth_request("alice", "old-secret")
        );
        tunnel_up(d, pair, now);
    });
    // The tip-account refresh sent at start, then one bundle: the next waits 100 ms.
    assert!(t.send(now));
    t.answer(now);
    now = Instant(now.0 + 101 * MS);
    assert_eq!(t.post_bundle(1, now), Verdict::Admitted);
    assert!(t.send(now));
    t.answer(now);
    assert_eq!(t.post_bundle(2, now), Verdict::Admitted);

    t.d.retune(&alice_reloaded(&spec, "new-secret"), now);
    assert_eq!(t.d.poll_close(), None, "the connection open stays");
    assert_eq!(t.d.link(t.pair), Link::InRotation);
    assert_eq!(t.d.sources_listed(), 1);
    assert!(
        !t.send(now),
        "the waiting bundle still waits for the pair's interval"
    );
    now = Instant(now.0 + 101 * MS);
    assert!(t.send(now), "and goes once it passed");
    t.answer(now);
    let s = t.totals();
    assert_eq!((s.delivered, s.expired, s.in_flight), (2, 0, 0), "{s:?}");

    // The engine ends the connection: the reconnect through the proxy uses the new password.
    let mut goaway = vec![0u8; 9 + 8];
    frame::write_goaway(&mut goaway, t.stream, frame::Reason::NO_ERROR).unwrap();
    t.d.received(t.pair, &goaway, now);
    t.flush(now);
    assert_eq!(t.d.poll_close(), Some(t.pair), "the engine closed it");
    t.d.socket_released(t.pair, now, 0);
    let later = Instant(now.0 + 30_001 * MS);
    t.d.dispatch(later);
    let order = t.d.poll_connect(later).expect("the pair reconnects");
    t.d.connected(order.pair, later);
    assert_eq!(
        credentials_sent(&mut t.d, order.pair, later),
        auth_request("alice", "new-secret")
    );
    assert!(t.d.check_accounting());
}
