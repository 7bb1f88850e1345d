//! The admin listener over a real TCP socket: each endpoint's status, content type and body,
//! 404/405/400 for what it does not serve, loopback by default, and a clean shutdown.

mod metrics_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use bundle_relay::admin::{ADDR_DEFAULT, Admin, AdminHandle};
use bundle_relay::metrics::{Method, Metrics, ReqOutcome};

fn start() -> (Arc<Metrics>, AdminHandle) {
    let m = Arc::new(Metrics::new(
        &["frankfurt".to_string(), "ny".to_string()],
        2,
    ));
    let h = Admin::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::clone(&m),
        Box::new(|out: &mut String| {
            out.push_str("region frankfurt: ready 3 booked 1 cooling 0 down 0 soonest_ready_ms 0\n")
        }),
    )
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
    tm.request(Method::SendBundle, ReqOutcome::Ok);
    tm.request(Method::SendBundle, ReqOutcome::Ok);
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
    tm.request(Method::SendBundle, ReqOutcome::Ok);
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
        ("HTTP/1.1 200 OK", "pong\n")
    );
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
            let tm = m.thread(t);
            std::thread::spawn(move || {
                let mut held = [0u64; 2];
                for i in 0..BUNDLES_PER_THREAD {
                    let r = (i % 2) as usize;
                    tm.request(Method::SendBundle, ReqOutcome::Ok);
                    tm.record_overhead_ns(5_000 + i % 1_000);
                    tm.admitted(r);
                    held[r] += 1;
                    tm.set_in_flight(r, held[r]);
                    if i % 3 != 0 {
                        if i % 7 == 0 {
                            tm.rejected(r);
                        } else {
                            tm.delivered(r);
                        }
                        held[r] -= 1;
                        tm.set_in_flight(r, held[r]);
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
