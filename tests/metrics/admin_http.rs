//! The admin listener over a real TCP socket: each endpoint's status, content type and body,
//! 404/405/400 for what it does not serve, loopback by default, and a clean shutdown; stalled
//! and trickling clients delay no one and are cut off at the deadline; the bearer token.

use crate::metrics_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bundle_relay::admin::{ADDR_DEFAULT, Admin, AdminHandle, AdminOptions, Token};
use bundle_relay::jsonrpc::Method;
use bundle_relay::metrics::{Metrics, ReqOutcome};

fn start() -> (Arc<Metrics>, AdminHandle) {
    start_with(None)
}

fn metrics() -> Arc<Metrics> {
    Arc::new(Metrics::new(
        &["frankfurt".to_string(), "ny".to_string()],
        2,
    ))
}

fn pairs() -> bundle_relay::admin::PairsFn {
    Box::new(|out: &mut String| {
        out.push_str("region frankfurt: ready 3 booked 1 cooling 0 down 0 soonest_ready_ms 0\n")
    })
}

/// The production listener, or with `options` when given.
fn start_with(options: Option<AdminOptions>) -> (Arc<Metrics>, AdminHandle) {
    let m = metrics();
    let addr = "127.0.0.1:0".parse().unwrap();
    let h = match options {
        None => Admin::start(addr, Arc::clone(&m), pairs()),
        Some(o) => Admin::start_with(addr, Arc::clone(&m), pairs(), o),
    }
    .unwrap();
    (m, h)
}

/// Sends `request` raw, returns (status line, headers, body).
fn exchange(addr: SocketAddr, request: &[u8]) -> (String, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    let text = String::from_utf8(resp).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    let len: usize = headers
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length")
        .parse()
        .unwrap();
    assert_eq!(len, body.len(), "Content-Length matches the body");
    (status.to_string(), headers.to_string(), body.to_string())
}

fn get(addr: SocketAddr, path: &str) -> (String, String, String) {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n").as_bytes(),
    )
}

#[test]
fn metrics_endpoint_serves_the_prometheus_text_of_live_counters() {
    let (m, h) = start();
    let tm = m.thread(1);
    tm.request(Some(Method::SendBundle), ReqOutcome::Ok);
    tm.request(Some(Method::SendBundle), ReqOutcome::Ok);
    tm.record_overhead_ns(12_000);
    let (status, headers, body) = get(h.local_addr(), "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{headers}"
    );
    let e = metrics_support::check(&body).unwrap();
    let sb = [("method", "sendBundle"), ("outcome", "ok")];
    assert_eq!(e.value("bundle_relay_requests_total", &sb), Some(2.0));
    assert_eq!(
        e.value("bundle_relay_relay_overhead_seconds_count", &[]),
        Some(1.0)
    );
    // A second scrape sees what was recorded since.
    tm.request(Some(Method::SendBundle), ReqOutcome::Ok);
    let (_, _, body) = get(h.local_addr(), "/metrics?x=1");
    let e = metrics_support::check(&body).unwrap();
    assert_eq!(e.value("bundle_relay_requests_total", &sb), Some(3.0));
    h.shutdown();
}

#[test]
fn debug_endpoints_and_ping() {
    let (m, h) = start();
    m.thread(0).record_delivery_ns(3_000_000);
    let (status, _, body) = get(h.local_addr(), "/debug/histograms");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("# delivery_latency "), "{body}");
    assert!(body.contains("1/(1-Percentile)"));
    let (status, _, body) = get(h.local_addr(), "/debug/pairs");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        body,
        "region frankfurt: ready 3 booked 1 cooling 0 down 0 soonest_ready_ms 0\n"
    );
    let (status, _, body) = get(h.local_addr(), "/ping");
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 200 OK", "ok\n")
    );
    h.shutdown();
}

#[test]
fn ping_answers_503_draining_once_the_relay_is_stopping_and_the_rest_still_serves() {
    let (_m, h) = start();
    h.set_draining();
    let (status, _, body) = get(h.local_addr(), "/ping");
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 503 Service Unavailable", "draining\n")
    );
    let (status, _, _) = get(h.local_addr(), "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    h.shutdown();
}

#[test]
fn unknown_paths_methods_and_garbage_get_404_405_400() {
    let (_m, h) = start();
    let (status, _, _) = get(h.local_addr(), "/metricz");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _, _) = exchange(
        h.local_addr(),
        b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    // A head that never ends within the limit.
    let mut junk = b"GET /".to_vec();
    junk.extend(std::iter::repeat_n(b'a', 9_000));
    let (status, _, _) = exchange(h.local_addr(), &junk);
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    // Still serving after all that.
    let (status, _, _) = get(h.local_addr(), "/ping");
    assert_eq!(status, "HTTP/1.1 200 OK");
    h.shutdown();
}

#[test]
fn default_address_is_loopback_and_shutdown_closes_the_port() {
    let default: SocketAddr = ADDR_DEFAULT.parse().unwrap();
    assert!(default.ip().is_loopback());
    let (_m, h) = start();
    let addr = h.local_addr();
    assert!(addr.ip().is_loopback());
    h.shutdown();
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
}

/// Two recording threads play bundles through (request answered, admitted, delivered or
/// rejected) while /metrics is scraped over TCP; counters never go backwards between scrapes,
/// and once the threads are done the scraped text adds up: the accounting identity per region
/// and one overhead sample per request.
#[test]
fn scrapes_during_load_are_monotonic_and_add_up_at_rest() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const BUNDLES_PER_THREAD: u64 = 20_000;
    let (m, h) = start();
    let threads = 2;
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (tm, st) = (m.thread(t), m.stats(t));
            std::thread::spawn(move || {
                let mut held = [0u64; 2];
                for i in 0..BUNDLES_PER_THREAD {
                    let r = (i % 2) as usize;
                    tm.request(Some(Method::SendBundle), ReqOutcome::Ok);
                    tm.record_overhead_ns(5_000 + i % 1_000);
                    let bundles = st.region(r);
                    bundles.admitted.inc();
                    held[r] += 1;
                    bundles.in_flight.set(held[r]);
                    if i % 3 != 0 {
                        if i % 7 == 0 {
                            bundles.rejected.inc();
                        } else {
                            bundles.delivered.inc();
                        }
                        held[r] -= 1;
                        bundles.in_flight.set(held[r]);
                    }
                }
            })
        })
        .collect();
    let scraper = {
        let (addr, stop) = (h.local_addr(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let sb = [("method", "sendBundle"), ("outcome", "ok")];
            let (mut last_req, mut last_count, mut scrapes) = (0.0, 0.0, 0);
            while !stop.load(Ordering::SeqCst) || scrapes == 0 {
                let (_, _, body) = get(addr, "/metrics");
                let e = metrics_support::check(&body).unwrap();
                let req = e.value("bundle_relay_requests_total", &sb).unwrap();
                let count = e
                    .value("bundle_relay_relay_overhead_seconds_count", &[])
                    .unwrap();
                assert!(req >= last_req && count >= last_count, "went backwards");
                (last_req, last_count) = (req, count);
                scrapes += 1;
            }
            scrapes
        })
    };
    for w in workers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    assert!(scraper.join().unwrap() > 0);

    let (_, _, body) = get(h.local_addr(), "/metrics");
    let e = metrics_support::check(&body).unwrap();
    let total = (threads as u64 * BUNDLES_PER_THREAD) as f64;
    let sb = [("method", "sendBundle"), ("outcome", "ok")];
    assert_eq!(e.value("bundle_relay_requests_total", &sb), Some(total));
    assert_eq!(
        e.value("bundle_relay_relay_overhead_seconds_count", &[]),
        Some(total)
    );
    let mut admitted_all = 0.0;
    for region in ["frankfurt", "ny"] {
        let l = [("region", region)];
        let v = |n: &str| e.value(n, &l).unwrap();
        let admitted = v("bundle_relay_bundles_admitted_total");
        let settled = v("bundle_relay_bundles_delivered_total")
            + v("bundle_relay_bundles_rejected_total")
            + v("bundle_relay_bundles_expired_total")
            + v("bundle_relay_bundles_failed_total")
            + v("bundle_relay_bundles_in_flight");
        assert_eq!(admitted, settled, "{region}");
        assert!(v("bundle_relay_bundles_in_flight") > 0.0);
        admitted_all += admitted;
    }
    assert_eq!(admitted_all, total);
    assert_eq!(m.check_accounting(), Ok(()));
    h.shutdown();
}

// ---- slow clients ----

/// A connection that sends `sent` and then nothing.
fn stalled(addr: SocketAddr, sent: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(sent).unwrap();
    s
}

/// Reads until the server closes; how long that took from `since`. A reset counts as closed.
fn closed_after(s: &mut TcpStream, since: Instant) -> Duration {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = Vec::new();
    match s.read_to_end(&mut sink) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    since.elapsed()
}

#[test]
fn stalled_clients_do_not_delay_another_clients_scrape() {
    // Production settings: the stalled clients would hold a connection for the whole 5 s.
    let (_m, h) = start();
    let addr = h.local_addr();
    let _silent = stalled(addr, b"");
    let _half_head = stalled(addr, b"GET /metrics HTTP/1.1\r\nHost: loc");
    let _no_end = stalled(addr, b"GET /metrics HTTP/1.1\r\n");
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    for _ in 0..3 {
        let (status, _, body) = get(addr, "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK");
        metrics_support::check(&body).unwrap();
    }
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "three scrapes took {:?} beside three stalled clients",
        t.elapsed()
    );
    // Shutdown closes the stalled connections instead of waiting out their deadline.
    let t = Instant::now();
    h.shutdown();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

#[test]
fn a_trickling_client_is_cut_off_at_the_whole_request_deadline() {
    let deadline = Duration::from_millis(600);
    let (_m, h) = start_with(Some(AdminOptions {
        request_deadline: deadline,
        ..AdminOptions::default()
    }));
    let mut s = TcpStream::connect(h.local_addr()).unwrap();
    let since = Instant::now();
    // One byte every 50 ms: every read finds something well inside any per-read timeout, and
    // the head never ends.
    let mut writer = s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        writer
            .write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
            .unwrap();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if writer.write_all(b"a").is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    });
    let took = closed_after(&mut s, since);
    assert!(
        took >= deadline - Duration::from_millis(50) && took < deadline + Duration::from_secs(1),
        "closed after {took:?}, deadline {deadline:?}"
    );
    drop(s);
    assert!(trickle.join().unwrap(), "the server never closed");
    h.shutdown();
}

#[test]
fn a_client_that_does_not_read_its_answer_is_cut_off_at_the_deadline_too() {
    // An answer far bigger than loopback's socket buffers, so writing it waits on the client.
    const ANSWER_BYTES: usize = 32 << 20;
    let deadline = Duration::from_millis(600);
    let h = Admin::start_with(
        "127.0.0.1:0".parse().unwrap(),
        metrics(),
        Box::new(|out: &mut String| out.push_str(&"x".repeat(ANSWER_BYTES))),
        AdminOptions {
            threads: 1,
            queue: 1,
            request_deadline: deadline,
            token: None,
        },
    )
    .unwrap();
    let addr = h.local_addr();
    let mut deaf = stalled(addr, b"GET /debug/pairs HTTP/1.1\r\n\r\n");
    std::thread::sleep(Duration::from_millis(100));
    // Queued behind it on the one thread: served once the deadline frees the thread.
    let t = Instant::now();
    let (status, _, _) = get(addr, "/ping");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        t.elapsed() < deadline + Duration::from_secs(1),
        "{:?}",
        t.elapsed()
    );
    let mut got = Vec::new();
    deaf.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = deaf.read_to_end(&mut got);
    assert!(got.len() < ANSWER_BYTES, "the whole answer went out");
    h.shutdown();
}

#[test]
fn connections_beyond_the_threads_and_queue_get_a_fast_503() {
    let (_m, h) = start_with(Some(AdminOptions {
        threads: 1,
        queue: 1,
        request_deadline: Duration::from_secs(5),
        token: None,
    }));
    let addr = h.local_addr();
    let _served = stalled(addr, b"");
    std::thread::sleep(Duration::from_millis(100));
    let _queued = stalled(addr, b"");
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(
        resp.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{resp}"
    );
    assert!(resp.contains("\r\nRetry-After: 1\r\n"), "{resp}");
    let t = Instant::now();
    h.shutdown();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

// ---- the bearer token ----

const TOKEN: &str = "s3cret-t0ken";

fn get_with(addr: SocketAddr, path: &str, auth: &str) -> (String, String, String) {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n").as_bytes(),
    )
}

#[test]
fn with_a_token_every_endpoint_but_ping_needs_the_bearer_token() {
    let (_m, h) = start_with(Some(AdminOptions {
        token: Some(Token::new(TOKEN).unwrap()),
        ..AdminOptions::default()
    }));
    let addr = h.local_addr();
    for path in ["/metrics", "/debug/histograms", "/debug/pairs", "/nowhere"] {
        let (status, headers, body) = get(addr, path);
        assert_eq!(status, "HTTP/1.1 401 Unauthorized", "{path}");
        assert!(headers.contains("WWW-Authenticate: Bearer"), "{headers}");
        assert_eq!(body, "missing Authorization: Bearer <token>\n");
    }
    for wrong in [
        "Authorization: Bearer s3cret-t0kem\r\n",
        "Authorization: Bearer s3cret\r\n",
        "Authorization: Bearer s3cret-t0ken-and-more\r\n",
        "Authorization: Bearer\r\n",
    ] {
        let (status, headers, body) = get_with(addr, "/metrics", wrong);
        assert_eq!(status, "HTTP/1.1 401 Unauthorized", "{wrong}");
        assert!(
            headers.contains("WWW-Authenticate: Bearer error=\"invalid_token\""),
            "{headers}"
        );
        assert_eq!(body, "wrong bearer token\n");
        assert!(!body.contains(TOKEN) && !headers.contains(TOKEN));
    }
    let (status, headers, body) = get_with(addr, "/metrics", "Authorization: Basic dTpw\r\n");
    assert_eq!(status, "HTTP/1.1 401 Unauthorized");
    assert!(headers.contains("WWW-Authenticate: Bearer"), "{headers}");
    assert_eq!(body, "the Authorization header is not a Bearer token\n");

    let right = format!("Authorization: Bearer {TOKEN}\r\n");
    let (status, _, body) = get_with(addr, "/metrics", &right);
    assert_eq!(status, "HTTP/1.1 200 OK");
    metrics_support::check(&body).unwrap();
    let (status, _, _) = get_with(
        addr,
        "/debug/pairs",
        &format!("authorization: bearer {TOKEN}\r\n"),
    );
    assert_eq!(
        status, "HTTP/1.1 200 OK",
        "scheme and header name are case-insensitive"
    );
    let (status, _, _) = get_with(addr, "/nowhere", &right);
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    let (status, _, body) = get(addr, "/ping");
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 200 OK", "ok\n")
    );
    h.shutdown();
}

#[test]
fn a_replaced_token_takes_effect_on_the_next_request() {
    let (_m, h) = start_with(Some(AdminOptions {
        token: Some(Token::new("old-token").unwrap()),
        ..AdminOptions::default()
    }));
    let addr = h.local_addr();
    let old = "Authorization: Bearer old-token\r\n";
    let new = "Authorization: Bearer new-token\r\n";
    assert_eq!(get_with(addr, "/metrics", old).0, "HTTP/1.1 200 OK");
    h.set_token(Some(Token::new("new-token").unwrap()));
    assert_eq!(
        get_with(addr, "/metrics", old).0,
        "HTTP/1.1 401 Unauthorized"
    );
    assert_eq!(get_with(addr, "/metrics", new).0, "HTTP/1.1 200 OK");
    h.set_token(None);
    assert_eq!(get(addr, "/metrics").0, "HTTP/1.1 200 OK");
    h.shutdown();
}

/// The whole raw answer to `request`, read to the end (or the error that cut it).
fn raw_exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    String::from_utf8(resp).unwrap()
}

/// A 405 says which methods are (RFC 9110 15.5.6: `Allow`), and its text says both.
#[test]
fn a_refused_method_is_told_which_are_allowed() {
    let (_m, h) = start();
    let (status, headers, body) = exchange(
        h.local_addr(),
        b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    assert!(
        headers.contains("\r\nAllow: GET, HEAD\r\n") || headers.starts_with("Allow: GET, HEAD\r\n"),
        "{headers}"
    );
    assert_eq!(body, "GET and HEAD only\n");
    h.shutdown();
}

/// HEAD gets the head of the answer GET would get, and no body, a 401 as well.
#[test]
fn head_is_answered_without_a_body_whatever_the_status() {
    let (_m, h) = start_with(Some(AdminOptions {
        token: Some(Token::new(TOKEN).unwrap()),
        ..AdminOptions::default()
    }));
    for path in ["/metrics", "/ping"] {
        let get = raw_exchange(
            h.local_addr(),
            format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        let head = raw_exchange(
            h.local_addr(),
            format!("HEAD {path} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        let (get_head, get_body) = get.split_once("\r\n\r\n").unwrap();
        assert!(!get_body.is_empty(), "{get}");
        assert_eq!(head, format!("{get_head}\r\n\r\n"), "{path}");
    }
    h.shutdown();
}

/// Bytes a client sends after its head (a body, a second request) are read and dropped before
/// the connection closes: closed with them unread, the kernel would reset the connection and
/// throw away the part of the answer the client had not yet received.
#[test]
fn an_answer_is_not_cut_off_by_bytes_the_client_sent_after_its_head() {
    // Over 200 KiB of /debug/pairs: far more than the client's window below.
    let big: bundle_relay::admin::PairsFn = Box::new(|out: &mut String| {
        for i in 0..4096 {
            out.push_str(&format!(
                "region {i:>6}: ready 3 booked 1 cooling 0 down 0 ......\n"
            ));
        }
    });
    let h = Admin::start("127.0.0.1:0".parse().unwrap(), metrics(), big).unwrap();
    let (_, _, full) = get(h.local_addr(), "/debug/pairs");
    assert!(full.len() > 200 * 1024, "{}", full.len());
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&h.local_addr().into()).unwrap();
    let mut s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /debug/pairs HTTP/1.1\r\nContent-Length: 10\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    s.write_all(b"0123456789").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut resp = Vec::new();
    let read = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    assert!(
        read.is_ok(),
        "{read:?} after {} of {} body bytes",
        body.len(),
        full.len()
    );
    assert_eq!(body.len(), full.len());
    h.shutdown();
}

/// A head whose lines end in a bare LF (RFC 9112 2.2 lets a server take them) is answered at
/// once, not after the whole deadline as a head that never came.
#[test]
fn a_head_with_bare_line_feeds_is_answered_at_once() {
    let (_m, h) = start();
    let started = Instant::now();
    let answer = raw_exchange(h.local_addr(), b"GET /ping HTTP/1.0\n\n");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("ok\n"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    h.shutdown();
}

/// A request target in absolute form (`GET http://host:port/metrics`, as a forward proxy or
/// some scrapers send it; RFC 9112 §3.2.2 says a server must accept it) reaches the same
/// endpoint as its path.
#[test]
fn an_absolute_form_target_is_served_as_its_path() {
    let (_m, h) = start();
    let addr = h.local_addr();
    for (target, status, says) in [
        (format!("http://{addr}/metrics"), "200", "bundle_relay_"),
        (format!("HTTP://{addr}/ping"), "200", "ok"),
        (format!("http://{addr}/ping?x=1"), "200", "ok"),
        (format!("https://{addr}/nothing"), "404", "not found"),
    ] {
        let req = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let (status_line, _, body) = exchange(addr, req.as_bytes());
        assert!(status_line.contains(status), "{target}: {status_line}");
        assert!(body.contains(says), "{target}: {body}");
    }
    h.shutdown();
}
