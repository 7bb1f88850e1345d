//! The relay's intake as a bot sees it, over real sockets: routing, Jito's JSON-RPC methods,
//! answers at once, keep-alive and pipelining, HTTP limits, and accounting for bundles whose
//! region cannot be reached. The region here points at a closed port, so nothing is delivered
//! and every admitted bundle must end expired.

use crate::intake_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bundle_relay::runtime::Relay;
use intake_support::{
    bundle, connect, exchange, nowhere, post, read_response, send_bundle_body, start,
};

#[test]
fn ping_answers_ok() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    let (status, _, body) = exchange(&mut c, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((status, body.as_str()), (200, "ok"));
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn send_bundle_is_answered_at_once_with_its_jito_id_on_both_path_styles() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    for (i, path) in ["/api/v1/bundles", "/api/v1/sendBundle"].iter().enumerate() {
        let (txs, id, _) = bundle(i as u64, 3);
        let (status, _, body) = exchange(&mut c, &post(path, &send_bundle_body(&txs, 7)));
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body,
            format!(r#"{{"jsonrpc":"2.0","result":"{id}","id":7}}"#)
        );
    }
    assert_eq!(relay.totals().admitted, 2);
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn send_transaction_answers_its_signature_and_bundle_only_adds_x_bundle_id() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    let (txs, id, sig) = bundle(11, 1);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"a","method":"sendTransaction","params":["{}",{{"encoding":"base64"}}]}}"#,
        txs[0]
    );
    let (status, head, answer) = exchange(&mut c, &post("/api/v1/transactions", &body));
    assert_eq!(status, 200);
    assert_eq!(
        answer,
        format!(r#"{{"jsonrpc":"2.0","result":"{sig}","id":"a"}}"#)
    );
    assert!(!head.contains("x-bundle-id"), "{head}");
    let (_, head, _) = exchange(&mut c, &post("/api/v1/transactions?bundleOnly=true", &body));
    assert!(head.contains(&format!("x-bundle-id: {id}")), "{head}");
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn pipelined_requests_are_answered_in_order_on_one_connection() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    let mut all = Vec::new();
    let mut ids = Vec::new();
    for i in 0..8u64 {
        let (txs, id, _) = bundle(100 + i, 1 + (i as usize % 5));
        all.extend(post("/api/v1/bundles", &send_bundle_body(&txs, i)));
        ids.push(id);
    }
    c.write_all(&all).unwrap();
    for (i, id) in ids.iter().enumerate() {
        let (status, _, body) = read_response(&mut c);
        assert_eq!(status, 200);
        assert_eq!(
            body,
            format!(r#"{{"jsonrpc":"2.0","result":"{id}","id":{i}}}"#)
        );
    }
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn the_other_methods_answer_as_jito_does_or_say_clearly_what_is_not_served() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    let tips = r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params":[]}"#;
    let (status, _, body) = exchange(&mut c, &post("/api/v1/getTipAccounts", tips));
    assert_eq!(status, 200);
    assert!(
        body.contains("96gYZGLnJYVFmbjzopPSU6QiEV5fGqZNyN9nmNhvrZU5"),
        "{body}"
    );
    assert_eq!(
        body.matches('"').count(),
        2 * 8 + 8,
        "eight accounts: {body}"
    );

    let statuses = r#"{"jsonrpc":"2.0","id":2,"method":"getBundleStatuses","params":[["x"]]}"#;
    let (_, _, body) = exchange(&mut c, &post("/api/v1/bundles", statuses));
    // "x" is no bundle id: it has no status, and no engine is asked.
    assert_eq!(
        body,
        r#"{"jsonrpc":"2.0","result":{"context":{"slot":0},"value":[null]},"id":2}"#
    );

    let unknown = r#"{"jsonrpc":"2.0","id":3,"method":"getThings","params":[]}"#;
    let (_, _, body) = exchange(&mut c, &post("/api/v1/bundles", unknown));
    assert!(
        body.contains("-32601") && body.contains("getThings"),
        "{body}"
    );

    let (txs, _, _) = bundle(5, 2);
    let broken = send_bundle_body(&[txs[0].clone(), "AAAA".into()], 4);
    let (_, _, body) = exchange(&mut c, &post("/api/v1/bundles", &broken));
    assert!(
        body.contains("-32602") && body.contains("transaction 1"),
        "{body}"
    );

    let (status, _, body) = exchange(&mut c, &post("/api/v2/nothing", tips));
    assert_eq!(status, 404, "{body}");
    let (status, head, _) = exchange(
        &mut c,
        b"PUT /api/v1/bundles HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(status, 405);
    assert!(head.contains("Allow: POST"), "{head}");
    // Nothing above was admitted; the connection is still usable.
    let (status, _, _) = exchange(&mut c, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, 200);
    let t = relay.totals();
    assert_eq!(t.admitted, 0, "{t:?}");
    assert_eq!(t.requests, 7, "{t:?}");
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn http_limits_answer_with_the_status_that_names_the_problem_and_close() {
    let relay = start(2_000);
    for (req, status) in [
        (
            b"POST /api/v1/bundles HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\n\r\n".to_vec(),
            413,
        ),
        (
            b"POST /api/v1/bundles HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec(),
            501,
        ),
        (
            b"POST /api/v1/bundles HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            411,
        ),
    ] {
        let mut c = connect(&relay);
        let (got, head, body) = exchange(&mut c, &req);
        assert_eq!(got, status, "{head}\n{body}");
        assert!(head.contains("Connection: close"), "{head}");
        let mut rest = [0u8; 16];
        assert_eq!(c.read(&mut rest).unwrap(), 0, "closed after the error");
    }
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn connection_close_is_honoured_after_the_answer() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    let (status, _, _) = exchange(
        &mut c,
        b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    let mut rest = [0u8; 16];
    assert_eq!(c.read(&mut rest).unwrap(), 0);
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn bundles_for_an_unreachable_region_expire_and_every_one_is_counted() {
    let relay = start(300);
    let mut c = connect(&relay);
    for i in 0..10 {
        let (txs, _, _) = bundle(200 + i, 1);
        let (status, _, _) = exchange(&mut c, &post("/api/v1/bundles", &send_bundle_body(&txs, i)));
        assert_eq!(status, 200);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let t = loop {
        let t = relay.totals();
        if t.in_flight == 0 || Instant::now() > deadline {
            break t;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(t.identity_holds(), "{t:?}");
    assert_eq!((t.admitted, t.expired, t.delivered), (10, 10, 0), "{t:?}");
    assert!(t.connect_failures > 0, "{t:?}");
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn lazy_connecting_opens_a_regions_pairs_on_its_first_bundle() {
    let mut spec = nowhere(&["127.0.0.1"], false);
    spec.connect_eagerly = false;
    spec.bundle_max_age_ms = 200;
    let relay = Relay::start(spec).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        relay.totals().connect_failures,
        0,
        "nothing connects before a bundle"
    );
    let mut c = connect(&relay);
    let (txs, _, _) = bundle(300, 1);
    let (status, _, _) = exchange(&mut c, &post("/api/v1/bundles", &send_bundle_body(&txs, 1)));
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    while relay.totals().connect_failures == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(relay.totals().connect_failures > 0, "{:?}", relay.totals());
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn a_slow_head_is_answered_408_then_closed_and_idle_connections_are_cut_off() {
    let mut spec = nowhere(&["127.0.0.1"], false);
    spec.head_timeout_ms = 200;
    spec.idle_timeout_ms = 400;
    let relay = Relay::start(spec).unwrap();
    let addr = relay.rotating_addr().unwrap();

    // A head that never ends is answered 408 after its limit, then closed.
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    slow.write_all(b"POST /api/v1/bundles HTTP/1.1\r\nHost:")
        .unwrap();
    let started = Instant::now();
    let (status, head, body) = read_response(&mut slow);
    let waited = started.elapsed();
    assert_eq!(status, 408, "{head}");
    assert!(head.contains("Connection: close"), "{head}");
    assert!(body.contains("request head not received in time"), "{body}");
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    closed_by_the_relay(&mut slow, "closed after the 408");
    assert_eq!(relay.totals().intake_head_timeouts, 1);

    // A kept-alive connection with nothing to say is closed after the idle limit, not before.
    // Timed from before the request: the relay's idle clock starts when it has answered, which
    // is later, so a slow read of the answer here cannot make the wait look short.
    let mut idle = connect(&relay);
    let started = Instant::now();
    let (status, _, _) = exchange(&mut idle, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, 200);
    closed_by_the_relay(&mut idle, "an idle connection is closed");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert_eq!(relay.totals().intake_idle_closes, 1);
    relay.shutdown(Duration::from_millis(100));
}

/// The relay closed `c` (end of stream, or a reset): not a read that timed out (the
/// connection's 5 s read timeout) and not an answer.
fn closed_by_the_relay(c: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 64];
    match c.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Ok(n) => panic!("{what}: read {n} bytes instead"),
        Err(e) => panic!("{what}: {e} instead"),
    }
}

#[test]
fn a_config_reload_reaches_every_reactor_thread_and_a_bad_one_changes_nothing() {
    use bundle_relay::config::{Resolve, Shared};
    let dir = std::env::temp_dir().join(format!("relay-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("relay.toml");
    let good = "[intake]\nrotating = \"127.0.0.1:0\"\n\n[[region]]\nname = \"nowhere\"\nhost = \"127.0.0.1\"\nport = 9\ntls = false\n\n[egress]\naddresses = [\"127.0.0.1\", \"127.0.0.2\"]\n";
    std::fs::write(&path, good).unwrap();
    let live = std::sync::Arc::new(Shared::from_file(&path, Resolve::Now).unwrap());
    let mut spec = nowhere(&["127.0.0.1", "127.0.0.2"], false);
    spec.threads = 2;
    spec.go_live(live.clone());
    let relay = Relay::start(spec).unwrap();
    let settle = |want: u64| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while relay.config_generations().iter().any(|&g| g != want) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        relay.config_generations()
    };
    assert_eq!(settle(1), vec![1, 1]);
    std::fs::write(&path, good.replace("port = 9", "port = 10")).unwrap();
    assert_eq!(live.reload().unwrap(), 2);
    assert_eq!(settle(2), vec![2, 2]);
    std::fs::write(&path, "threads = \"many\"\n").unwrap();
    let err = live.reload().unwrap_err().to_string();
    assert!(err.contains("threads"), "{err}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(relay.config_generations(), vec![2, 2]);
    assert_eq!(live.load().config.regions[0].port, 10);
    relay.shutdown(Duration::from_millis(100));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn expect_100_continue_is_answered_once_before_the_body_is_sent() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    let (txs, id, _) = bundle(11, 5);
    let body = send_bundle_body(&txs, 9);
    let head = format!(
        "POST /api/v1/bundles HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n\
         Expect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).unwrap();
    let mut interim = [0u8; 25];
    c.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    // Half the body, then the rest: still one 100 Continue, then the answer.
    let (first, rest) = body.as_bytes().split_at(body.len() / 2);
    c.write_all(first).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    c.write_all(rest).unwrap();
    let (status, _, answer) = read_response(&mut c);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        format!(r#"{{"jsonrpc":"2.0","result":"{id}","id":9}}"#)
    );
    // A request without Expect on the same connection gets no interim answer.
    let (txs, id, _) = bundle(12, 1);
    let (status, _, answer) = exchange(
        &mut c,
        &post("/api/v1/bundles", &send_bundle_body(&txs, 10)),
    );
    assert_eq!(status, 200);
    assert_eq!(
        answer,
        format!(r#"{{"jsonrpc":"2.0","result":"{id}","id":10}}"#)
    );
    relay.shutdown(Duration::from_millis(100));
}

#[test]
fn a_bundle_waiting_for_its_region_reads_pending_in_jitos_shape() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    let (txs, id, _) = bundle(6, 2);
    let (status, _, _) = exchange(&mut c, &post("/api/v1/bundles", &send_bundle_body(&txs, 5)));
    assert_eq!(status, 200);
    let inflight = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"getInflightBundleStatuses","params":[["{id}"]]}}"#
    );
    let (status, _, body) = exchange(
        &mut c,
        &post("/api/v1/getInflightBundleStatuses", &inflight),
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        format!(
            r#"{{"jsonrpc":"2.0","result":{{"context":{{"slot":0}},"value":[{{"bundle_id":"{id}","status":"Pending","landed_slot":null}}]}},"id":6}}"#
        )
    );
    // The relay's own call has its method's path too, as each of Jito's does.
    let delivery =
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":"getBundleDelivery","params":["{id}"]}}"#);
    let (status, _, body) = exchange(&mut c, &post("/api/v1/getBundleDelivery", &delivery));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!("\"bundle_id\":\"{id}\"")), "{body}");

    relay.shutdown(Duration::from_millis(100));
}

/// Method by path, as RFC 9110 has it: a path the relay serves answers a method it does not
/// take with 405 and `Allow` naming the one it does; a path it does not serve is 404 whatever
/// the method. A bot that GETs its RPC URL learns to POST, not that the URL is wrong.
#[test]
fn a_method_a_served_path_does_not_take_is_405_naming_the_one_it_does_and_an_unknown_path_is_404() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    for (method, path, status, allow) in [
        ("GET", "/ping", 200, None),
        ("POST", "/ping", 405, Some("GET, HEAD")),
        ("DELETE", "/ping", 405, Some("GET, HEAD")),
        ("GET", "/api/v1/bundles", 405, Some("POST")),
        ("GET", "/api/v1/transactions", 405, Some("POST")),
        ("GET", "/api/v1/getTipAccounts", 405, Some("POST")),
        ("GET", "/nowhere/api/v1/bundles", 405, Some("POST")),
        ("GET", "/elsewhere/api/v1/bundles", 404, None),
        ("POST", "/elsewhere/api/v1/bundles", 404, None),
        ("PUT", "/api/v1/bundles", 405, Some("POST")),
        ("GET", "/api/v2/nothing", 404, None),
        ("POST", "/api/v2/nothing", 404, None),
        ("PUT", "/api/v2/nothing", 404, None),
    ] {
        let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}");
        let (got, head, body) = exchange(&mut c, req.as_bytes());
        assert_eq!(got, status, "{method} {path}: {head}\n{body}");
        match allow {
            Some(allow) => {
                assert!(
                    head.contains(&format!("Allow: {allow}\r"))
                        || head.ends_with(&format!("Allow: {allow}")),
                    "{method} {path}: {head}"
                );
                let first = allow.split(',').next().unwrap();
                assert!(
                    body.contains(&format!("with {first}"))
                        || body.contains(&format!("takes {first}")),
                    "{method} {path}: {body}"
                );
            }
            None => assert!(!head.contains("Allow:"), "{method} {path}: {head}"),
        }
    }
    assert_eq!(relay.totals().admitted, 0);
    relay.shutdown(Duration::from_millis(100));
}

/// Reads one response head (up to the blank line) and nothing more: a HEAD answer has no body.
fn read_head(c: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(c.read(&mut byte).unwrap(), 1, "closed mid-head: {head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// HEAD (a load balancer's health check, `option httpchk HEAD /ping`) is answered as GET would
/// be, without the body: the same status and `Content-Length`, so the connection's next
/// answer is framed right.
#[test]
fn head_is_answered_as_get_without_a_body_and_the_connection_stays_framed() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    for (path, status, allow) in [
        ("/ping", "200", None),
        ("/api/v1/bundles", "405", Some("Allow: POST")),
        ("/api/v2/nothing", "404", None),
    ] {
        c.write_all(format!("HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        let head = read_head(&mut c);
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status}")),
            "HEAD {path}: {head}"
        );
        if let Some(allow) = allow {
            assert!(head.contains(allow), "HEAD {path}: {head}");
        }
        let (_, get_head, get_body) = exchange(
            &mut c,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        );
        assert!(
            head.contains(&format!("Content-Length: {}\r\n", get_body.len())),
            "HEAD {path} says GET's length: {head} / {get_head}"
        );
    }
    relay.shutdown(Duration::from_millis(100));
}

/// A request that names a method the relay serves but gives it bad parameters (six
/// transactions, an encoding Jito does not take, no transaction list) is counted under that
/// method, as refused: an operator sees sendBundle's own error rate, not an "other" that
/// hides it.
#[test]
fn a_known_method_with_bad_parameters_is_counted_under_its_method_as_invalid() {
    let relay = start(2_000);
    let mut c = connect(&relay);
    let (txs, _, _) = bundle(7, 1);
    let six = vec![txs[0].clone(); 6];
    for body in [
        send_bundle_body(&six, 1),
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"sendBundle","params":[["{}"],{{"encoding":"hex"}}]}}"#,
            txs[0]
        ),
        r#"{"jsonrpc":"2.0","id":3,"method":"sendBundle","params":[]}"#.to_string(),
    ] {
        let (status, _, answer) = exchange(&mut c, &post("/api/v1/bundles", &body));
        assert_eq!(status, 200);
        assert!(answer.contains("-32602"), "{answer}");
    }
    let unknown = r#"{"jsonrpc":"2.0","id":4,"method":"getThings","params":[]}"#;
    exchange(&mut c, &post("/api/v1/bundles", unknown));
    let mut text = String::new();
    relay.metrics().render_prometheus(&mut text);
    let count = |method: &str| {
        let series =
            format!(r#"bundle_relay_requests_total{{method="{method}",outcome="invalid"}} "#);
        text.lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .unwrap_or_else(|| panic!("{series} in {text}"))
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!((count("sendBundle"), count("other")), (3, 1), "{text}");
    relay.shutdown(Duration::from_millis(100));
}
