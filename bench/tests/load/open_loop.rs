//! bench-load against bench-null and scripted loopback servers: counts, histograms, logs,
//! pipelining and coordinated-omission correction.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bundle_relay_bench::load::{self, LoadConfig, LoadReport, Outcome};
use bundle_relay_bench::null::{self, NullConfig, NullServer};
use bundle_relay_bench::sentlog::SentLog;
use bundle_relay_bench::txgen::{self, GeneratedBundle, TxGenConfig};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

fn bundles(n: u64, seed: u64) -> Vec<GeneratedBundle> {
    let cfg = TxGenConfig {
        seed,
        txs_mix: vec![(1, 2), (2, 1)],
        encoding_mix: vec![(bundle_relay::wire::Encoding::Base64, 1)],
        ..TxGenConfig::default()
    };
    txgen::generate(cfg, 0, n).unwrap().0
}

fn null_server(bundle_ids: bool) -> NullServer {
    NullServer::start(&NullConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        bundle_ids,
    })
    .unwrap()
}

fn cfg(target: SocketAddr, rate: f64, requests: u64) -> LoadConfig {
    LoadConfig {
        targets: vec![target],
        rate_per_s: rate,
        duration: None,
        requests: Some(requests),
        connections: 4,
        timeout: Duration::from_secs(2),
        ..LoadConfig::default()
    }
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("bench-load-{}-{name}", std::process::id()))
}

fn assert_counts_add_up(r: &LoadReport) {
    let s = &r.summary;
    assert_eq!(
        s.counts.sent,
        s.counts.answered + s.counts.errors + s.counts.timeouts,
        "sent = answered + errors + timeouts"
    );
    assert_eq!(s.counts.sent + s.unsent, s.scheduled);
    // Answered requests, and timed-out ones at the time they ended.
    assert_eq!(r.histogram.len(), s.counts.answered + s.counts.timeouts);
    assert_eq!(r.outcomes.len() as u64, s.scheduled);
    let answered = r
        .outcomes
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Answered(_)))
        .count() as u64;
    assert_eq!(answered, s.counts.answered);
}

#[test]
fn against_bench_null_every_request_is_answered_and_counts_add_up() {
    let server = null_server(false);
    let b = bundles(400, 1);
    let r = load::run(&cfg(server.local_addr(), 2000.0, 400), &b).unwrap();
    eprintln!("{}", r.summary);
    assert_counts_add_up(&r);
    let s = &r.summary;
    assert_eq!(
        (s.scheduled, s.counts.sent, s.counts.answered),
        (400, 400, 400)
    );
    assert_eq!(s.by_status.get(&200), Some(&400));
    assert!(s.by_rpc_error.is_empty());
    // bench-null answers zeros by default: every id differs from the expected one.
    assert_eq!((s.result_ids_matching, s.result_ids_differing), (0, 400));
    assert_eq!(server.requests_served(), 400);
    for (i, o) in r.outcomes.iter().enumerate() {
        assert_eq!(o.seq, i as u64);
    }
}

#[test]
fn pipelined_requests_on_one_connection_get_their_own_answers_in_order() {
    // bench-null computes each bundle's real id, so a matching id proves the answer was paired
    // with its own request.
    let server = null_server(true);
    let b = bundles(600, 2);
    let c = LoadConfig {
        connections: 1,
        pipeline_depth: 16,
        ..cfg(server.local_addr(), 6000.0, 600)
    };
    let r = load::run(&c, &b).unwrap();
    eprintln!("{}", r.summary);
    assert_counts_add_up(&r);
    assert_eq!(r.summary.counts.answered, 600);
    assert_eq!(
        (
            r.summary.result_ids_matching,
            r.summary.result_ids_differing
        ),
        (600, 0)
    );
}

/// A loopback server answering with bench-null's logic; `hold` decides, per batch of requests
/// read, how long to pause before answering (the request count so far is its argument).
fn scripted_server(hold: impl Fn(u64, usize) -> Duration + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let hold = Arc::new(hold);
    let count = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let (hold, count) = (hold.clone(), count.clone());
            std::thread::spawn(move || {
                s.set_nodelay(true).unwrap();
                let mut buf = vec![0u8; 1 << 16];
                let mut len = 0;
                loop {
                    match s.read(&mut buf[len..]) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => len += n,
                    }
                    let mut out = Vec::new();
                    let (used, answered) = null::answer_all(&buf[..len], false, &mut out).unwrap();
                    buf.copy_within(used..len, 0);
                    len -= used;
                    if answered == 0 {
                        continue;
                    }
                    let before = count.fetch_add(answered, Ordering::Relaxed);
                    let pause = hold(before, answered as usize);
                    if pause == Duration::MAX {
                        continue; // never answers
                    }
                    std::thread::sleep(pause);
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn a_200ms_stall_inflates_every_request_scheduled_during_it() {
    // One pause of 200 ms at the 200th request. Measured from the schedule, the ~400 requests
    // due during the pause all wait for it: latencies spread from 200 ms down to 0. Measured
    // from the actual send (coordinated omission), only one request would show it.
    let addr = scripted_server(|before, n| {
        if before < 200 && before + n as u64 >= 200 {
            Duration::from_millis(200)
        } else {
            Duration::ZERO
        }
    });
    let b = bundles(1000, 3);
    let c = LoadConfig {
        connections: 1,
        ..cfg(addr, 2000.0, 1000)
    };
    let r = load::run(&c, &b).unwrap();
    eprintln!("{}", r.summary);
    assert_counts_add_up(&r);
    assert_eq!(r.summary.counts.answered, 1000);
    let max_ms = r.histogram.max() / 1_000_000;
    assert!(max_ms >= 190, "max {max_ms} ms");
    let p99_ms = r.histogram.value_at_quantile(0.99) / 1_000_000;
    assert!(p99_ms >= 150, "p99 {p99_ms} ms");
    let over_50ms = r
        .outcomes
        .iter()
        .filter(|o| o.latency_ns >= 50_000_000)
        .count();
    // Requests due in the first 150 ms of the stall waited at least 50 ms: about 300 of them.
    assert!(
        over_50ms >= 200,
        "{over_50ms} requests waited 50 ms or more"
    );
}

/// 20 requests at 400/s over 2 connections to a server that never answers, timed out at
/// 150 ms.
fn against_a_server_that_never_answers() -> LoadReport {
    let addr = scripted_server(|_, _| Duration::MAX);
    let b = bundles(20, 4);
    let c = LoadConfig {
        connections: 2,
        timeout: Duration::from_millis(150),
        ..cfg(addr, 400.0, 20)
    };
    load::run(&c, &b).unwrap()
}

#[test]
fn a_server_that_never_answers_ends_in_timeouts_and_the_run_still_stops() {
    let r = against_a_server_that_never_answers();
    eprintln!("{}", r.summary);
    assert_counts_add_up(&r);
    assert_eq!(r.summary.counts.answered, 0);
    assert!(r.summary.counts.timeouts >= 2, "{:?}", r.summary.counts);
    assert!(r.outcomes.iter().all(|o| matches!(
        o.outcome,
        Outcome::Timeout | Outcome::Error | Outcome::Unsent
    )));
}

/// A request that timed out is in the answer latency at the time it ended (at least the
/// timeout), not left out: a server that stalls a connection past the timeout must not read
/// better in the tail than one that stalls it just under.
#[test]
fn a_request_that_timed_out_counts_in_the_latency_at_its_timeout() {
    let r = against_a_server_that_never_answers();
    let s = &r.summary;
    assert!(s.counts.timeouts >= 2, "{:?}", s.counts);
    assert_eq!(
        s.latency.count,
        s.counts.answered + s.counts.timeouts,
        "{s}"
    );
    assert!(s.latency.max_us >= 150_000.0, "{s}");
}

#[test]
fn a_connection_closed_mid_request_counts_as_errors() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut buf = [0u8; 16];
            let _ = s.read(&mut buf); // read a little, then hang up
        }
    });
    let b = bundles(30, 5);
    let r = load::run(&cfg(addr, 1000.0, 30), &b).unwrap();
    eprintln!("{}", r.summary);
    assert_counts_add_up(&r);
    assert_eq!(r.summary.counts.answered, 0);
    assert!(r.summary.counts.errors > 0);
}

#[test]
fn the_hlog_reads_back_with_the_same_total_count() {
    let server = null_server(false);
    let b = bundles(1500, 6);
    let path = temp("hlog");
    let c = LoadConfig {
        hlog: Some(path.clone()),
        ..cfg(server.local_addr(), 1000.0, 1500)
    };
    let r = load::run(&c, &b).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut total = 0;
    let mut intervals = 0;
    let mut d = Deserializer::new();
    for e in IntervalLogIterator::new(&bytes) {
        if let LogEntry::Interval(i) = e.unwrap() {
            use base64::Engine as _;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(i.encoded_histogram())
                .unwrap();
            let h: Histogram<u64> = d.deserialize(&mut &raw[..]).unwrap();
            total += h.len();
            intervals += 1;
        }
    }
    assert_eq!(total, r.histogram.len());
    assert_eq!(total, 1500);
    assert!(intervals >= 2, "one interval per second: {intervals}");
}

#[test]
fn the_sent_log_holds_the_scheduled_time_of_every_sent_seq() {
    let server = null_server(false);
    let b = bundles(300, 7);
    let path = temp("sentlog");
    let c = LoadConfig {
        sent_log: Some(path.clone()),
        ..cfg(server.local_addr(), 3000.0, 300)
    };
    let r = load::run(&c, &b).unwrap();
    let log = SentLog::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let t0 = log.get(0).expect("seq 0 recorded");
    for o in &r.outcomes {
        assert_ne!(o.outcome, Outcome::Unsent);
        let t = log.get(o.seq).expect("every sent seq recorded");
        // The schedule: one request every 1/3000 s from t0.
        let expected = (o.seq as f64 * 1e9 / 3000.0) as i64;
        assert!(((t - t0) as i64 - expected).abs() <= 1, "seq {}", o.seq);
    }
}

#[test]
fn connections_round_robin_over_several_targets() {
    let (a, b_srv) = (null_server(false), null_server(false));
    let b = bundles(200, 8);
    let c = LoadConfig {
        targets: vec![a.local_addr(), b_srv.local_addr()],
        connections: 4,
        threads: 2,
        ..cfg(a.local_addr(), 2000.0, 200)
    };
    let r = load::run(&c, &b).unwrap();
    eprintln!("{}", r.summary);
    assert_counts_add_up(&r);
    assert_eq!(r.summary.counts.answered, 200);
    assert!(a.requests_served() > 20 && b_srv.requests_served() > 20);
    assert_eq!(a.requests_served() + b_srv.requests_served(), 200);
}

#[test]
fn an_answer_a_client_has_read_is_already_counted_as_served() {
    // Eight connections each with a request in flight: the server answers them in one
    // wake-up, so a count kept until the end of that wake-up lags the answers already out.
    let server = null_server(false);
    let b = bundles(8, 10);
    let mut conns: Vec<std::net::TcpStream> = (0..8)
        .map(|_| std::net::TcpStream::connect(server.local_addr()).unwrap())
        .collect();
    let mut read_so_far = 0u64;
    for round in 0..60 {
        for (c, bundle) in conns.iter_mut().zip(&b) {
            c.write_all(&bundle.request).unwrap();
        }
        for c in conns.iter_mut() {
            read_answer(c);
            read_so_far += 1;
            let served = server.requests_served();
            assert!(
                served >= read_so_far,
                "round {round}: {read_so_far} answers read, {served} counted as served"
            );
        }
    }
}

/// Reads one HTTP/1.1 answer with a Content-Length body.
fn read_answer(c: &mut std::net::TcpStream) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        c.read_exact(&mut byte).unwrap();
        buf.push(byte[0]);
    }
    let head = std::str::from_utf8(&buf).unwrap();
    let mut body = vec![0u8; crate::content_length(head)];
    c.read_exact(&mut body).unwrap();
}

#[test]
fn configurations_that_cannot_run_are_refused_with_a_reason() {
    let b = bundles(10, 9);
    let t: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let err = |c: LoadConfig| load::run(&c, &b).err().expect("refused").to_string();
    let e = err(LoadConfig {
        connections: 30_000,
        ..cfg(t, 100.0, 10)
    });
    assert!(e.contains("open files") && e.contains("20000"), "{e}");
    let e = err(LoadConfig {
        requests: None,
        duration: None,
        ..cfg(t, 100.0, 10)
    });
    assert!(e.contains("unbounded"), "{e}");
    let e = err(cfg(t, 100.0, 11));
    assert!(e.contains("11 unique bundles"), "{e}");
    let e = err(cfg("10.0.0.1:80".parse().unwrap(), 100.0, 10));
    assert!(e.contains("loopback"), "{e}");
    // No time to answer: the run would end at its last send and call the answers in flight
    // neither answered nor timed out.
    let e = err(LoadConfig {
        timeout: Duration::ZERO,
        ..cfg(t, 100.0, 10)
    });
    assert_eq!(
        e,
        "bad load configuration: --timeout-ms 0: a request needs at least 1 ms to be answered in"
    );
    // A depth no HTTP/1.1 server holds (and that sized a buffer past memory: a panic).
    let e = err(LoadConfig {
        pipeline_depth: 1_000_000_000,
        ..cfg(t, 100.0, 10)
    });
    assert_eq!(
        e,
        format!(
            "bad load configuration: pipeline depth 1000000000: at most {} requests in flight \
             per connection",
            load::PIPELINE_MAX
        )
    );
}

/// A server that answers for `for_ms`, then closes every connection and stops listening.
fn dying_server(for_ms: u64) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let until = std::time::Instant::now() + Duration::from_millis(for_ms);
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while std::time::Instant::now() < until {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            std::thread::spawn(move || {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
                let mut buf = vec![0u8; 1 << 16];
                let mut len = 0;
                while std::time::Instant::now() < until {
                    match s.read(&mut buf[len..]) {
                        Ok(0) => return,
                        Ok(n) => len += n,
                        Err(_) => continue,
                    }
                    let mut out = Vec::new();
                    let (used, _) = null::answer_all(&buf[..len], false, &mut out).unwrap();
                    buf.copy_within(used..len, 0);
                    len -= used;
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A target that dies a third of the way into the schedule: the rate achieved is what was
/// sent over the whole schedule, not over the time the load could still send, and the
/// latency line says how many of the scheduled requests its percentiles cover.
#[test]
fn a_target_that_dies_midway_achieves_what_was_sent_over_the_whole_schedule() {
    let addr = dying_server(300);
    let b = bundles(900, 7);
    let c = LoadConfig {
        timeout: Duration::from_millis(200),
        ..cfg(addr, 1000.0, 900)
    };
    let r = load::run(&c, &b).unwrap();
    let s = &r.summary;
    eprintln!("{s}");
    assert_counts_add_up(&r);
    assert!(s.unsent > 300, "{s}");
    let over_schedule = s.counts.sent as f64 / 0.9;
    assert!(
        (s.achieved_rate_per_s - over_schedule).abs() < 0.05 * over_schedule,
        "achieved {} against {over_schedule:.0} sent a second of the schedule\n{s}",
        s.achieved_rate_per_s
    );
    let text = s.to_string();
    assert!(
        text.contains(&format!("of {} scheduled", s.scheduled)),
        "{text}"
    );
}
