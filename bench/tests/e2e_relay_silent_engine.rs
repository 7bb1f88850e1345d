//! bundle-relay against an engine that stops answering without saying so, and one that refuses
//! some sources: end to end on loopback, bounded in count and time.
//!
//! A black hole (nothing read or written: no answers, no PING ACKs, no RST, no GOAWAY) costs
//! only the calls the relay had sent into it before it noticed; from then on the region gets no
//! bundle until its engine answers a probe, and it comes back by itself. A source the engine
//! refuses leaves rotation with one call, not one bundle per interval. An engine host that
//! drops connects (a full accept queue, a firewall) is named as what it is: connects that
//! timed out, and one that resets connections during their setup as reset.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use bundle_relay::runtime::Relay;
use bundle_relay_bench::engine::{Engine, EngineConfig, EngineHandle, MAINNET_REGIONS};
use support::relay::{bundles, pinned, run_load, spec, wait_ended, wait_pairs_up};

const SILENT: &str = MAINNET_REGIONS[0];

async fn engine_uptime_past(engine: &EngineHandle, ms: u64) {
    while engine.stats().uptime_ms < ms {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_engine_costs_only_the_calls_sent_before_the_relay_noticed() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS);
    ec.interval_ms = 100;
    ec.faults = vec![format!("blackhole@2s+3s:region={SILENT}").parse().unwrap()];
    let engine = Engine::start(ec).await.unwrap();
    let mut s = spec(&engine.region_addrs(), "127.1.80.0/26", 100);
    s.upstream_timeout_ms = 1_000;
    s.ping_timeout_ms = 300;
    s.connect_timeout_ms = 1_000;
    s.reconnect_max_ms = 1_000;
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 512, Duration::from_secs(10)).await;
    let silent_port = pinned(&relay, SILENT);

    // Six seconds of load across the hole: the rotating port at 200/s, the silent region's own
    // port at 60/s. The region sends about 85 calls a second, more than its 64 pairs could lose
    // if each went on sending until its own call deadline.
    let rotating = tokio::spawn(run_load(
        vec![relay.rotating_addr().unwrap()],
        200.0,
        bundles(30, 0, 1_200),
    ));
    let own = tokio::spawn(run_load(vec![silent_port], 60.0, bundles(30, 1_200, 360)));

    // Inside the hole (2 s to 5 s), once the calls sent before the relay noticed have met
    // their 1 s deadline: the losses stop growing.
    engine_uptime_past(&engine, 3_800).await;
    let noticed = relay.totals();
    // Noticed after a quarter of the 1 s deadline: about 85 x 0.25 = 21 calls went in before
    // (half the region's 64 pairs allowed for a loaded machine); without it, each pair goes on
    // until its own call times out, and one per pair is lost.
    assert!(
        noticed.failed <= 32,
        "more calls lost than were sent before the relay could notice: {noticed:?}"
    );
    engine_uptime_past(&engine, 4_900).await;
    let late = relay.totals();
    assert_eq!(
        late.failed, noticed.failed,
        "bundles kept going into the hole after it was noticed: {late:?}"
    );
    assert!(
        late.silences >= 1,
        "the region was never found silent: {late:?}"
    );

    let rotating = rotating.await.unwrap();
    let own = own.await.unwrap();
    assert_eq!(rotating.summary.result_ids_matching, 1_200);
    assert_eq!(own.summary.result_ids_matching, 360);
    // The region is back by itself: its pairs reconnected and it delivers again.
    wait_pairs_up(&relay, 512, Duration::from_secs(15)).await;
    let after = run_load(vec![silent_port], 50.0, bundles(30, 1_560, 50)).await;
    assert_eq!(after.summary.result_ids_matching, 50);
    let end = wait_ended(&relay, Duration::from_secs(15)).await;
    assert!(end.identity_holds(), "{end:?}");
    assert_eq!(end.admitted, 1_610, "{end:?}");
    assert_eq!(end.failed, noticed.failed, "{end:?}");
    // Every rotating-port bundle went elsewhere once the region was silent; the silent
    // region's own bundles waited and expired, counted.
    assert!(end.delivered >= 1_200 + 50 - end.failed, "{end:?}");
    let es = engine.stats();
    assert_eq!(es.early_sends, 0);
    assert_eq!(es.duplicates, 0);
    assert!(es.faults["blackhole"] > 0, "{:?}", es.faults);
    relay.shutdown(Duration::from_millis(200));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_the_engine_refuses_leaves_rotation_and_its_bundles_go_elsewhere() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..2]);
    ec.interval_ms = 20;
    ec.faults = vec!["deny@0s:fraction=0.25,seed=5".parse().unwrap()];
    let engine = Engine::start(ec).await.unwrap();
    let relay = Relay::start(spec(&engine.region_addrs(), "127.1.82.0/27", 20)).unwrap();
    wait_pairs_up(&relay, 64, Duration::from_secs(10)).await;
    let targets: Vec<SocketAddr> = relay.pinned_addrs().iter().map(|(_, a)| *a).collect();
    let report = run_load(targets, 300.0, bundles(31, 0, 900)).await;
    assert_eq!(report.summary.result_ids_matching, 900);
    let end = wait_ended(&relay, Duration::from_secs(10)).await;
    assert!(end.identity_holds(), "{end:?}");
    assert_eq!(
        (end.delivered, end.failed, end.rejected),
        (900, 0, 0),
        "{end:?}"
    );
    let es = engine.stats();
    let denied = es.faults["deny"];
    // About a quarter of 64 pairs are refused, each once: then they are out of rotation.
    assert!(
        (1..=32).contains(&denied),
        "refused calls {denied}: a refused pair kept being used"
    );
    assert!(end.pairs_up < 64, "refused pairs left rotation: {end:?}");
    assert_eq!(es.accepted, 900);
    assert_eq!(es.early_sends, 0);
    relay.shutdown(Duration::from_millis(200));
    engine.shutdown().await;
}

/// `/debug/pairs` once it lists failing pairs (5 s at most).
async fn pairs_failing(relay: &Relay) -> String {
    let pairs = relay.pairs_fn();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut text = String::new();
        pairs(&mut text);
        if text.contains("pairs failing") {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no failing pair in {text}"
        );
    }
}

/// An engine address whose connects get no answer (its accept queue full: the kernel drops
/// the SYNs): the relay's own connect deadline ends each connect, and the pair's error says
/// the connect timed out, not that it was canceled (the cancel is how the relay ends it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_the_relay_gives_up_at_its_deadline_is_named_as_timed_out() {
    let listener =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let addr: SocketAddr = "127.0.0.19:0".parse().unwrap();
    listener.bind(&addr.into()).unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    // Fill the accept queue (never accepted): the relay's SYNs are dropped from then on.
    let mut fillers = Vec::new();
    for _ in 0..2 {
        let f = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        f.set_nonblocking(true).unwrap();
        let _ = f.connect(&addr.into());
        fillers.push(f);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut s = spec(&[("dropped".to_string(), addr)], "127.1.81.1", 1_000);
    s.threads = 1;
    s.connect_timeout_ms = 300;
    let relay = Relay::start(s).unwrap();
    let text = pairs_failing(&relay).await;
    assert!(text.contains("timed out"), "{text}");
    assert!(!text.contains("canceled"), "{text}");
    relay.shutdown(Duration::from_millis(100));
    drop(fillers);
}

/// An engine address that resets every connection once the relay has written its preface (a
/// firewall that resets by what it sees, a half-dead front end): the pair's error names the
/// kernel's reset and the setup stage it came in, not a close by the engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_during_its_setup_is_named_as_the_reset() {
    let listener = std::net::TcpListener::bind("127.0.0.20:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let resetting = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            listener.set_nonblocking(true).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((mut c, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                c.set_nonblocking(false).unwrap();
                // Read the client's preface, then close with SO_LINGER 0: a RST.
                let mut b = [0u8; 24];
                let _ = std::io::Read::read_exact(&mut c, &mut b);
                socket2::SockRef::from(&c)
                    .set_linger(Some(Duration::ZERO))
                    .unwrap();
            }
        })
    };
    let mut s = spec(&[("resetting".to_string(), addr)], "127.1.81.2", 1_000);
    s.threads = 1;
    let relay = Relay::start(s).unwrap();
    let text = pairs_failing(&relay).await;
    assert!(
        text.contains("the connection broke during the connection setup: Connection reset by peer"),
        "{text}"
    );
    relay.shutdown(Duration::from_millis(100));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    resetting.join().unwrap();
}

/// A region whose name lists two addresses, one of them dead (nothing listens there, and DNS
/// goes on listing it): the pairs whose own address is the dead one move to the live one, so
/// every pair comes up and every bundle is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_comes_up_when_one_of_a_regions_addresses_is_dead() {
    let mut ec = EngineConfig::for_tests(&MAINNET_REGIONS[..1]);
    ec.interval_ms = 20;
    let engine = Engine::start(ec).await.unwrap();
    let (name, live) = engine.region_addrs()[0].clone();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.22:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut s = spec(&[(name.clone(), live)], "127.1.83.0/28", 20);
    s.regions[0].addrs = bundle_relay::egress::resolve::HostAddrs::fixed(&name, vec![dead, live]);
    let relay = Relay::start(s).unwrap();
    wait_pairs_up(&relay, 16, Duration::from_secs(5)).await;
    let report = run_load(vec![pinned(&relay, &name)], 200.0, bundles(32, 0, 200)).await;
    assert_eq!(report.summary.result_ids_matching, 200);
    let end = wait_ended(&relay, Duration::from_secs(10)).await;
    assert_eq!((end.delivered, end.failed), (200, 0), "{end:?}");
    assert_eq!(engine.stats().early_sends, 0);
    relay.shutdown(Duration::from_millis(200));
    engine.shutdown().await;
}
