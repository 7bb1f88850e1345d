//! The intake against clients that misbehave, over real sockets: a client that half-closes
//! after sending still gets every answer it is owed; a client that never reads is closed at
//! the send deadline, one that reads slowly gets every answer; one address cannot take more than its share of the connection table
//! (a trusted proxy can, and only its last `X-Forwarded-For` line is believed);
//! a listener out of file descriptors neither spins nor stays dead; a client still writing a
//! request the relay refused reads the refusal, not a reset; no client's connection outlives
//! the relay in a process it starts (an upgrade's successor), and none waits unaccepted on a
//! port of a successor that failed to listen on another.

mod intake_support;
mod wire_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bundle_relay::runtime::Relay;
use intake_support::{bundle, connect, nowhere, post, read_response, send_bundle_body};

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A relay with a `send_timeout_ms` send deadline, and a client connected to it with a small
/// receive buffer, so the answers back up into the relay quickly.
fn relay_and_small_window_client(send_timeout_ms: u64) -> (Relay, TcpStream) {
    let mut spec = nowhere(&["127.0.0.1"], false);
    spec.send_timeout_ms = send_timeout_ms;
    spec.idle_timeout_ms = 60_000;
    let relay = Relay::start(spec).unwrap();
    let addr = relay.rotating_addr().unwrap();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&addr.into()).unwrap();
    (relay, sock.into())
}

/// Reads `count` answers, each 200 and ending with its request's id in order, pausing 20 ms
/// every `pause_every`: a client slower to read than to write.
fn read_answers_in_order(c: &mut TcpStream, count: u64, pause_every: u64) {
    for i in 0..count {
        let (status, _, body) = read_response(c);
        assert_eq!(status, 200, "answer {i}: {body}");
        assert!(
            body.ends_with(&format!(r#""id":{i}}}"#)),
            "answer {i}: {body}"
        );
        if i % pause_every == 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// curl and HTTP/1.0-style clients send their request and shut their write side: every
/// bundle admitted from such a client is answered with its id before the connection closes.
#[test]
fn a_client_that_half_closes_after_sending_gets_an_answer_for_every_bundle() {
    let mut spec = nowhere(&["127.0.0.1"], false);
    spec.arena_slots = 256;
    let relay = Relay::start(spec).unwrap();
    let mut c = connect(&relay);
    // Answers that take many sends (the tip accounts are about 600 bytes each), then bundles:
    // everything is still being answered when the client's end-of-stream arrives.
    let tips = r#"{"jsonrpc":"2.0","id":0,"method":"getTipAccounts","params":[]}"#;
    let mut all = Vec::new();
    for _ in 0..80 {
        all.extend(post("/api/v1/bundles", tips));
    }
    let mut ids = Vec::new();
    for i in 0..10u64 {
        let (txs, id, _) = bundle(500 + i, 1);
        all.extend(post("/api/v1/bundles", &send_bundle_body(&txs, i)));
        ids.push(id);
    }
    c.write_all(&all).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    for _ in 0..80 {
        let (status, _, body) = read_response(&mut c);
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains("96gYZGLnJYVFmbjzopPSU6QiEV5fGqZNyN9nmNhvrZU5"),
            "{body}"
        );
    }
    for (i, id) in ids.iter().enumerate() {
        let (status, _, body) = read_response(&mut c);
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body,
            format!(r#"{{"jsonrpc":"2.0","result":"{id}","id":{i}}}"#)
        );
    }
    let mut rest = [0u8; 16];
    assert_eq!(
        c.read(&mut rest).unwrap(),
        0,
        "closed once everything was answered"
    );
    let t = relay.totals();
    assert_eq!(t.admitted, 10, "{t:?}");
    wait_until(
        "the connection's slot to free",
        Duration::from_secs(2),
        || relay.totals().intake_conns == 0,
    );
    relay.shutdown(Duration::from_millis(100));
}

/// A client that sends a bundle's head and part of its body, then shuts its write side, waits
/// for an answer its request can never earn: it reads a 400 saying how much of the body came,
/// then the close, and the request is counted as a bad one.
#[test]
fn a_client_that_half_closes_in_the_middle_of_a_body_reads_400_naming_how_much_came() {
    let relay = Relay::start(nowhere(&["127.0.0.1"], false)).unwrap();
    let mut c = connect(&relay);
    let (txs, _, _) = bundle(900, 1);
    let whole = post("/api/v1/bundles", &send_bundle_body(&txs, 1));
    let head_len = whole.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body_len = whole.len() - head_len;
    c.write_all(&whole[..head_len + 100]).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let (status, head, body) = read_response(&mut c);
    assert_eq!(status, 400, "{head}\n{body}");
    assert_eq!(
        body,
        format!(
            "request body cut short: the client closed its side before all of its Content-Length (100 of {body_len} bytes came)\n"
        )
    );
    let mut rest = [0u8; 16];
    assert_eq!(c.read(&mut rest).unwrap(), 0, "closed after the answer");
    let t = relay.totals();
    assert_eq!((t.bad_requests, t.admitted), (1, 0), "{t:?}");
    // Its end-of-stream came already: nothing to linger for.
    wait_until(
        "the connection's slot to free",
        Duration::from_millis(1_000),
        || relay.totals().intake_conns == 0,
    );
    relay.shutdown(Duration::from_millis(100));
}

/// A client that pipelines requests and never reads its answers: once the socket stops taking
/// them for the send deadline, the relay closes the connection and frees its slot.
#[test]
fn a_client_that_never_reads_is_closed_at_the_send_deadline() {
    let (relay, mut c) = relay_and_small_window_client(300);
    // Requests that fit the relay's input, whose answers (the tip accounts, about 600 bytes
    // each) are more than the client's tiny receive buffer and the relay's send buffer hold.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"getTipAccounts","params":[]}"#;
    let one = post("/api/v1/bundles", body);
    let count = 60_000 / one.len();
    let requests: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * count)
        .collect();
    c.write_all(&requests).unwrap();
    wait_until(
        "the send deadline to close it",
        Duration::from_secs(5),
        || relay.totals().intake_send_timeouts == 1,
    );
    wait_until("the slot to free", Duration::from_secs(2), || {
        relay.totals().intake_conns == 0
    });
    // The relay still serves others.
    let mut other = connect(&relay);
    other
        .write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_response(&mut other);
    assert_eq!((status, body.as_str()), (200, "ok"));
    relay.shutdown(Duration::from_millis(100));
}

/// A client that asks for more answers than the sockets between it and the relay hold before
/// it reads any, then reads them slowly, gets every one in order on the same connection: a
/// full socket is waited on, not taken for a broken connection.
#[test]
fn a_client_that_reads_slowly_gets_every_answer_in_order() {
    let (relay, mut c) = relay_and_small_window_client(20_000);
    let count = 400u64;
    // One request at a time, each answered while the client reads nothing, until the answers
    // fill every buffer on the way and the relay finds the socket full.
    for i in 0..count {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"getTipAccounts","params":[]}}"#);
        c.write_all(&post("/api/v1/bundles", &body)).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    read_answers_in_order(&mut c, count, 50);
    c.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_response(&mut c);
    assert_eq!(
        (status, body.as_str()),
        (200, "ok"),
        "the same connection serves on"
    );
    let t = relay.totals();
    assert_eq!(t.intake_send_timeouts, 0, "{t:?}");
    relay.shutdown(Duration::from_millis(100));
}

/// A client that pipelines far ahead of its reads (one thread writes 2,000 requests as fast as
/// it can, another reads the answers slowly): the relay stops reading while answers wait
/// unread, so TCP holds the client back, and every request is answered in order. Reading on,
/// the relay would fill its input and refuse the connection with 413, losing the requests it
/// held.
#[test]
fn a_client_that_pipelines_far_ahead_of_its_reads_gets_every_answer_in_order() {
    let (relay, mut c) = relay_and_small_window_client(20_000);
    let count = 2_000u64;
    let mut writer = c.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        for i in 0..count {
            let body =
                format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"getTipAccounts","params":[]}}"#);
            writer.write_all(&post("/api/v1/bundles", &body)).unwrap();
        }
    });
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    read_answers_in_order(&mut c, count, 200);
    sender.join().unwrap();
    let t = relay.totals();
    assert_eq!((t.bad_requests, t.intake_send_timeouts), (0, 0), "{t:?}");
    relay.shutdown(Duration::from_millis(100));
}

/// One address opening connection after connection gets its share of the table and no more;
/// the refused ones are answered 429 naming the setting, closed at once and counted, and other
/// clients still get in. A trusted
/// proxy has no share: its connections are many clients'.
#[test]
fn one_client_address_cannot_take_more_than_its_share_of_the_table_unless_it_is_a_trusted_proxy() {
    let mut spec = nowhere(&["127.0.0.1"], false);
    spec.intake_conns_max = 16;
    spec.intake_per_source_max = 4;
    let Ok(table) = std::sync::Arc::try_unwrap(spec.tenants) else {
        panic!("the spec's table is its own");
    };
    let proxy = bundle_relay::config::Cidr::parse("127.0.0.3").unwrap();
    spec.tenants = std::sync::Arc::new(table.trusting(&[proxy]));
    let relay = Relay::start(spec).unwrap();
    let addr = relay.rotating_addr().unwrap();
    let from = |ip: &str| connect_from(ip, addr);
    let flood: Vec<TcpStream> = (0..10).map(|_| from("127.0.0.1")).collect();
    wait_until(
        "every flood connection to be accepted or refused",
        Duration::from_secs(5),
        || {
            let t = relay.totals();
            t.intake_conns + t.intake_refused_per_source == 10
        },
    );
    let t = relay.totals();
    assert_eq!(
        (t.intake_conns, t.intake_refused_per_source),
        (4, 6),
        "{t:?}"
    );
    let (mut served, mut refused) = (0, 0);
    for mut c in flood {
        c.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n").ok();
        let (status, head, body) = read_response(&mut c);
        match status {
            200 => served += 1,
            429 => {
                assert!(
                    head.contains("Connection: close") && head.contains("Retry-After: 1"),
                    "{head}"
                );
                assert_eq!(
                    body,
                    "connection refused: this address holds its share of the relay thread's \
                     connections (intake.connections_per_source_max): send on the ones it has\n"
                );
                closed_after_the_answer(&mut c);
                refused += 1;
            }
            _ => panic!("{head}\n{body}"),
        }
    }
    assert_eq!(
        (served, refused),
        (4, 6),
        "only the share was served, the rest told why"
    );
    let mut other = from("127.0.0.2");
    other
        .write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_response(&mut other);
    assert_eq!((status, body.as_str()), (200, "ok"));
    // The proxy opens twice the share, and each connection is served.
    let proxied: Vec<TcpStream> = (0..8).map(|_| from("127.0.0.3")).collect();
    for mut c in proxied {
        c.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let (status, _, body) = read_response(&mut c);
        assert_eq!((status, body.as_str()), (200, "ok"));
    }
    assert_eq!(
        relay.totals().intake_refused_per_source,
        6,
        "none of the proxy's"
    );
    relay.shutdown(Duration::from_millis(100));
}

/// A connection to `addr` from local address `ip`, reads timing out after 5 s.
fn connect_from(ip: &str, addr: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::new(ip.parse().unwrap(), 0).into())
        .unwrap();
    s.connect(&addr.into()).unwrap();
    let c: TcpStream = s.into();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

/// The relay closed `c` after the answer just read: end of stream, or a reset (the client
/// wrote its request after the close); not a read that timed out.
fn closed_after_the_answer(c: &mut TcpStream) {
    let mut rest = [0u8; 16];
    match c.read(&mut rest) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("not closed after the answer: {other:?}"),
    }
}

/// A full connection table refuses the next client, whoever it is, with a 503 naming the
/// setting and when to come back, then the close; a slot that frees lets the next one in.
#[test]
fn a_client_beyond_a_full_connection_table_reads_503_then_the_close() {
    let mut spec = nowhere(&["127.0.0.1"], false);
    spec.intake_conns_max = 2;
    spec.intake_per_source_max = 2;
    let relay = Relay::start(spec).unwrap();
    let addr = relay.rotating_addr().unwrap();
    let from = |ip: &str| connect_from(ip, addr);
    let first = from("127.0.0.1");
    let _second = from("127.0.0.2");
    wait_until("both to be accepted", Duration::from_secs(5), || {
        relay.totals().intake_conns == 2
    });
    let mut third = from("127.0.0.4");
    third
        .write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok();
    let (status, head, body) = read_response(&mut third);
    assert_eq!(status, 503, "{head}\n{body}");
    assert!(
        head.contains("Connection: close") && head.contains("Retry-After: 1"),
        "{head}"
    );
    assert_eq!(
        body,
        "connection refused: the relay thread's connection table is full \
         (intake.connections_max): come back in a moment or send on a connection you have\n"
    );
    closed_after_the_answer(&mut third);
    assert_eq!(relay.totals().intake_refused, 1);
    drop(first);
    wait_until("a slot to free", Duration::from_secs(5), || {
        relay.totals().intake_conns == 1
    });
    let mut fourth = from("127.0.0.4");
    fourth
        .write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_response(&mut fourth);
    assert_eq!((status, body.as_str()), (200, "ok"));
    relay.shutdown(Duration::from_millis(100));
}

/// Through the reactor, as a proxy's bytes arrive: a trusted proxy's last `X-Forwarded-For`
/// line names the client (an earlier line is the client's own word and is not believed), a
/// trusted proxy that names none is refused, and anyone else's header is ignored.
#[test]
fn a_trusted_proxys_last_forwarded_line_names_the_client_and_anyone_elses_header_is_ignored() {
    let text = r#"
threads = 1
arena_slots = 64
[intake]
rotating = "127.0.0.1:0"
trusted_proxies = ["127.0.0.3"]
[[region]]
name = "nowhere"
host = "127.0.0.1"
port = 9
tls = false
[egress]
addresses = ["127.0.0.1"]
[admin]
listen = "off"
[[tenant]]
name = "desk"
cidrs = ["203.0.113.0/24"]
"#;
    use bundle_relay::config::{Config, Resolve};
    let cfg = Config::parse(text, "relay.toml", Resolve::Now).unwrap();
    let relay = Relay::start(bundle_relay::relay::Spec::from_config(&cfg).unwrap()).unwrap();
    let addr = relay.rotating_addr().unwrap();
    let status = |from: &str, headers: &str, seed: u64| {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&SocketAddr::new(from.parse().unwrap(), 0).into())
            .unwrap();
        s.connect(&addr.into()).unwrap();
        let mut c: TcpStream = s.into();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (txs, _, _) = bundle(seed, 1);
        let body = send_bundle_body(&txs, seed);
        write!(
            c,
            "POST /api/v1/bundles HTTP/1.1\r\nHost: relay\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let (status, _, body) = read_response(&mut c);
        (status, body)
    };
    let rows: [(&str, &str, u16); 6] = [
        ("127.0.0.3", "X-Forwarded-For: 203.0.113.9\r\n", 200),
        (
            "127.0.0.3",
            "X-Forwarded-For: 198.51.100.1\r\nx-forwarded-for: 10.0.0.1, 203.0.113.9\r\n",
            200,
        ),
        (
            "127.0.0.3",
            "X-Forwarded-For: 203.0.113.9\r\nX-Forwarded-For: 198.51.100.1\r\n",
            401,
        ),
        ("127.0.0.3", "", 400),
        ("127.0.0.3", "X-Forwarded-For: unknown\r\n", 400),
        ("127.0.0.4", "X-Forwarded-For: 203.0.113.9\r\n", 401),
    ];
    for (i, (from, headers, want)) in rows.into_iter().enumerate() {
        let (got, body) = status(from, headers, 100 + i as u64);
        assert_eq!(got, want, "from {from} with {headers:?}: {body}");
    }
    relay.shutdown(Duration::from_millis(100));
}

/// The child side of the next test: a relay in a process started with few file descriptors
/// (io_uring reads the limit when an accept is prepared, so it is set before the relay starts).
/// Run by the test below in a process of its own, so its limit touches no other test.
#[test]
fn child_relay_with_few_file_descriptors() {
    if std::env::var_os("RELAY_FEW_FDS_CHILD").is_none() {
        return;
    }
    let relay = Relay::start(nowhere(&["127.0.0.1"], false)).unwrap();
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: fills `limit`.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    // The limit caps descriptor numbers, not their count: say how many numbers are free.
    let open = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .filter(|&fd| fd < limit.rlim_cur)
        .count() as u64;
    println!(
        "READY {} {}",
        relay.rotating_addr().unwrap(),
        limit.rlim_cur - open
    );
    let mut line = String::new();
    let mut stdin = std::io::stdin().lock();
    stdin.read_line(&mut line).unwrap(); // the parent's clients are connected
    std::thread::sleep(Duration::from_millis(300));
    let cpu = || {
        // SAFETY: all-zero is a valid rusage, filled by the call.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: fills `u`.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
        let ms = |t: libc::timeval| t.tv_sec as u64 * 1_000 + t.tv_usec as u64 / 1_000;
        ms(u.ru_utime) + ms(u.ru_stime)
    };
    let (cpu0, err0) = (cpu(), relay.totals().accept_errors);
    std::thread::sleep(Duration::from_millis(1_000));
    let (cpu1, err1) = (cpu(), relay.totals().accept_errors);
    println!(
        "STATS accept_errors={} cpu_ms={} conns={}",
        err1 - err0,
        cpu1 - cpu0,
        relay.totals().intake_conns
    );
    line.clear();
    let _ = stdin.read_line(&mut line); // EOF: the parent is done
    relay.shutdown(Duration::from_millis(100));
}

/// The child's open-file limit: the test harness and a relay fit, with a few to spare.
const FEW_FDS: u64 = 32;

/// Accepts failing for lack of file descriptors are counted and retried from the sweep, not
/// re-armed in a loop that burns a core; once descriptors are free again the listener serves.
#[test]
fn accepts_failing_for_lack_of_file_descriptors_neither_spin_nor_stay_dead() {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_relay_with_few_file_descriptors",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("RELAY_FEW_FDS_CHILD", "1")
    .stdin(Stdio::piped())
    .stdout(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let l = libc::rlimit {
                rlim_cur: FEW_FDS,
                rlim_max: FEW_FDS,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    };
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    let line = |out: &mut BufReader<_>, prefix: &str| -> String {
        let mut l = String::new();
        loop {
            l.clear();
            assert!(
                out.read_line(&mut l).unwrap() > 0,
                "the child ended before {prefix}"
            );
            // libtest may print its "test name ... " before the child's own words.
            if let Some(i) = l.find(prefix) {
                return l[i + prefix.len()..].trim().to_string();
            }
        }
    };
    let ready = line(&mut out, "READY");
    let (addr, free) = ready.split_once(' ').unwrap();
    let addr: SocketAddr = addr.parse().unwrap();
    let free: usize = free.parse().unwrap();
    // More clients than the child has descriptors left: the rest wait in the backlog.
    let count = free + 8;
    let clients: Vec<TcpStream> = (0..count)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    stdin.write_all(b"go\n").unwrap();
    let stats = line(&mut out, "STATS");
    let field = |name: &str| -> u64 {
        stats
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    let (errors, cpu_ms, conns) = (field("accept_errors"), field("cpu_ms"), field("conns"));
    assert!((conns as usize) < count, "the limit bit: {stats}");
    assert!(errors >= 1, "failed accepts are counted: {stats}");
    // Re-armed from the 50 ms sweep: about 20 failures a second, not a loop.
    assert!(errors <= 100, "accept re-armed in a loop: {stats}");
    assert!(
        cpu_ms < 300,
        "the child burnt {cpu_ms} ms of CPU in one second: {stats}"
    );
    // Descriptors come back: the waiting clients and a new one are served.
    drop(clients);
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_response(&mut c);
    assert_eq!((status, body.as_str()), (200, "ok"));
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// A client that writes its whole request before it reads (what most HTTP clients do) and
/// whose body is over the limit: the relay answers 413 from the head alone and must not reset
/// the connection under it while the body still arrives, or the client sees "connection reset"
/// where it should read what was wrong.
#[test]
fn a_client_that_writes_a_body_over_the_limit_before_reading_reads_the_413() {
    let relay = Relay::start(nowhere(&["127.0.0.1"], false)).unwrap();
    for body_len in [96 * 1024, 1024 * 1024] {
        let mut c = connect(&relay);
        let mut request = format!(
            "POST /api/v1/bundles HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n"
        )
        .into_bytes();
        request.resize(request.len() + body_len, b' ');
        c.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(&request)
            .unwrap_or_else(|e| panic!("writing a {body_len}-byte body: {e}"));
        let (status, _, body) = read_response(&mut c);
        assert_eq!(status, 413, "{body}");
        assert!(
            body.contains("(intake.body_bytes_max = 65536 bytes)"),
            "names the limit: {body}"
        );
        let mut rest = [0u8; 16];
        assert_eq!(c.read(&mut rest).unwrap(), 0, "then end-of-stream");
        drop(c);
        wait_until(
            "the connection's slot to free once the client closed",
            Duration::from_secs(2),
            || relay.totals().intake_conns == 0,
        );
    }
    relay.shutdown(Duration::from_millis(100));
}

/// A refused client that neither finishes nor closes is not kept: the lingering connection
/// closes at the head deadline and its slot is free again.
#[test]
fn a_refused_client_that_never_closes_is_closed_at_the_head_deadline() {
    let mut spec = nowhere(&["127.0.0.1"], false);
    spec.head_timeout_ms = 300;
    spec.idle_timeout_ms = 60_000;
    let relay = Relay::start(spec).unwrap();
    let mut c = connect(&relay);
    c.write_all(b"POST /api/v1/bundles HTTP/1.1\r\nHost: relay\r\nContent-Length: 100000\r\n\r\n")
        .unwrap();
    let (status, _, body) = read_response(&mut c);
    assert_eq!(status, 413, "{body}");
    let started = Instant::now();
    c.write_all(&[b' '; 1000]).unwrap();
    wait_until(
        "the lingering connection to close",
        Duration::from_secs(3),
        || relay.totals().intake_conns == 0,
    );
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "not before the deadline: {:?}",
        started.elapsed()
    );
    relay.shutdown(Duration::from_millis(100));
}

/// An upgrade starts its successor with exec: a bot's connection the relay accepted must not
/// be inherited, or every upgrade would leave the successor holding the old process's bot
/// sockets, more with each upgrade, against its open-file limit. Every socket of this process
/// (the relay's, and the std sockets of the tests beside it) closes on exec; what the test
/// runner itself passed down (its jobserver's pipe, a /dev/null) is no socket.
#[test]
fn a_clients_connection_is_not_inherited_by_a_process_the_relay_starts() {
    let relay = Relay::start(nowhere(&["127.0.0.1"], false)).unwrap();
    let mut c = connect(&relay);
    c.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, _, _) = read_response(&mut c);
    assert_eq!(status, 200);
    let mut inherited = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let fd: i32 = entry
            .unwrap()
            .file_name()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        if fd <= 2 {
            continue;
        }
        // SAFETY: F_GETFD reads a flag; a descriptor closed since the listing reads -1.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        let what = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap_or_default();
        if flags >= 0
            && flags & libc::FD_CLOEXEC == 0
            && what.to_string_lossy().starts_with("socket:")
        {
            inherited.push(format!("{fd}: {}", what.display()));
        }
    }
    assert!(inherited.is_empty(), "inherited on exec: {inherited:?}");
    drop(c);
    relay.shutdown(Duration::from_millis(100));
}

/// A takeover's successor whose listen fails on one of its ports (another socket took it)
/// fails to start; the ports it had already put in listen stop listening again, so no
/// client's connection waits there for accepts that never come (the old process serves on).
#[test]
fn a_listen_that_fails_partway_leaves_no_port_listening_unserved() {
    let relay = Relay::start_unlistened(nowhere(&["127.0.0.1"], true)).unwrap();
    let rotating = relay.rotating_addr().unwrap();
    let (_, pinned) = relay.pinned_addrs()[0].clone();
    // Another socket listens on the pinned port first (not in the relay's reuse group).
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    other.set_reuse_address(true).unwrap();
    other.bind(&pinned.into()).unwrap();
    other.listen(8).unwrap();
    assert!(relay.listen().is_err(), "the pinned port's listen fails");
    // The rotating port listened first: a connect there is refused, not left unanswered.
    match TcpStream::connect_timeout(&rotating, Duration::from_millis(500)) {
        Err(_) => {}
        Ok(mut c) => {
            c.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            c.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n").ok();
            let mut buf = [0u8; 64];
            assert!(
                !matches!(c.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut),
                "a connection sat in a backlog no thread accepts from"
            );
        }
    }
    drop(other);
    relay.shutdown(Duration::from_millis(100));
}
