//! `bundle-relay run` with `[tenants_from]`, for real: a test HTTP endpoint serves the tenants
//! document and the relay's log says what it did with each answer. No document at startup:
//! the relay refuses to start, naming the URL. A changed document: applied as a reload. An
//! endpoint that fails or a document that does not check: the last good tenants kept, said
//! and counted. The `tenants_answer` fuzz target's body runs here too under a short seeded
//! proptest, so `cargo test` covers the answer's decoding where cargo-fuzz is not installed.

mod h2_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the endpoint answers: a status and a body.
/// How long a test waits for a reload's outcome: the reload runs at the scheduler's idle
/// priority, which a CI host busy with other tests may hold back for seconds (a bound, not a
/// wait: it passes as soon as the line comes). The shortened-period check still tells a poll at
/// once from one after the old 60 s period.
const RELOAD_WAIT_S: u64 = 20;

type Answer = Arc<Mutex<(u16, String)>>;

/// Whether an endpoint answers (true) or holds each request it reads until it does.
type Gate = Arc<(Mutex<bool>, Condvar)>;

fn gate(open: bool) -> Gate {
    Arc::new((Mutex::new(open), Condvar::new()))
}

fn set_gate(g: &Gate, open: bool) {
    *g.0.lock().unwrap() = open;
    g.1.notify_all();
}

/// A tenants endpoint answering every GET with the current `Answer` (chunked when asked, to
/// cover both body framings the relay reads).
fn endpoint(answer: Answer) -> SocketAddr {
    gated_endpoint(answer, gate(true))
}

/// `endpoint`, each request held while the gate is shut and answered with what `answer` holds
/// once it opens; a thread a connection, so one held does not hold the others.
fn gated_endpoint(answer: Answer, gate: Gate) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { continue };
            let (answer, gate) = (answer.clone(), gate.clone());
            std::thread::spawn(move || answer_one(c, &answer, &gate));
        }
    });
    addr
}

fn answer_one(mut c: std::net::TcpStream, answer: &Answer, gate: &Gate) {
    {
        let mut head = Vec::new();
        let mut b = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut b) {
                Ok(n) if n > 0 => head.extend_from_slice(&b[..n]),
                _ => break,
            }
        }
        let mut open = gate.0.lock().unwrap();
        while !*open {
            open = gate.1.wait(open).unwrap();
        }
        drop(open);
        let (status, body) = answer.lock().unwrap().clone();
        let out = if body.len() % 2 == 0 {
            format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        } else {
            format!(
                "HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            )
        };
        let _ = c.write_all(out.as_bytes());
    }
}

fn config(dir: &std::path::Path, engine: SocketAddr, url: &str) -> std::path::PathBuf {
    let path = dir.join("relay.toml");
    std::fs::write(
        &path,
        format!(
            "threads = 1\npin_threads = false\narena_slots = 64\n\
             [intake]\nrotating = \"127.0.0.1:0\"\nconnections_max = 16\n\
             [[region]]\nname = \"local\"\nhost = \"{}\"\nport = {}\ntls = false\n\
             [egress]\naddresses = [\"127.1.93.0/31\"]\n[admin]\nlisten = \"off\"\n\
             [tenants_from]\nurl = \"{url}\"\nevery_ms = 150\ntimeout_ms = 100\n",
            engine.ip(),
            engine.port()
        ),
    )
    .unwrap();
    path
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("br-tenants-from-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start(config: &std::path::Path) -> (Child, Receiver<String>) {
    start_with(Command::new(env!("CARGO_BIN_EXE_bundle-relay")), config)
}

/// `start` with `cmd`, which may carry an environment of its own.
fn start_with(mut cmd: Command, config: &std::path::Path) -> (Child, Receiver<String>) {
    let mut child = cmd
        .arg("run")
        .arg("--config")
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = channel();
    for out in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    (child, rx)
}

/// Lines until one contains `what` (returned with the lines before it), or panics with all
/// seen after `limit`.
fn wait_for(rx: &Receiver<String>, what: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if let Ok(line) = rx.recv_timeout(left) {
            let hit = line.contains(what);
            seen.push(line);
            if hit {
                return seen;
            }
        }
    }
    panic!("no line with {what:?} in {limit:?}:\n{}", seen.join("\n"));
}

/// The lines until the reload that applied a tenants change, which must be `generation`.
fn tenants_applied_at(rx: &Receiver<String>, generation: u64, limit: Duration) -> Vec<String> {
    let lines = wait_for(rx, "applied: tenants:", limit);
    let reloaded = format!("config reloaded: generation {generation}");
    assert!(lines.iter().any(|l| l.contains(&reloaded)), "{lines:?}");
    lines
}

/// How `child` ended, within 5 s.
fn exited(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "still running");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stop(mut child: Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
}

const ONE: &str = r#"{"tenant": [{"name": "alpha", "keys": ["alpha-key"], "rate": 5}]}"#;
const TWO: &str = r#"{"tenant": [{"name": "alpha", "keys": ["alpha-key"], "rate": 5}, {"name": "beta", "cidrs": ["10.0.0.0/8"]}], "default_tenant": {}}"#;

#[test]
fn with_no_tenants_document_at_startup_the_relay_refuses_to_start_naming_the_url() {
    let dir = scratch("down");
    // A port nothing listens on: bound, then closed.
    let gone = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{gone}/tenants");
    let (mut child, rx) = start(&config(&dir, h2_support::hello_engine(), &url));
    let lines = wait_for(&rx, "not starting", Duration::from_secs(10));
    let why = lines.last().unwrap();
    assert!(why.contains(&format!("GET {url}")), "{why}");
    let status = exited(&mut child);
    assert_eq!(
        status.code(),
        Some(75),
        "the endpoint may answer later: restarted"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A document the endpoint serves wrong at startup is the endpoint's to mend, not the config's:
/// the start is refused as one the host may allow later (75, restarted), not as a bad config
/// (2, which the units never restart).
#[test]
fn a_bad_tenants_document_at_startup_is_refused_for_now_naming_the_key() {
    let dir = scratch("bad-at-start");
    let answer: Answer = Arc::new(Mutex::new((
        200,
        r#"{"tenant": [{"name": "gamma", "keys": ["k"], "regions": ["mars"]}]}"#.to_string(),
    )));
    let url = format!("http://{}/tenants", endpoint(answer));
    let (mut child, rx) = start(&config(&dir, h2_support::hello_engine(), &url));
    let lines = wait_for(&rx, "mars", Duration::from_secs(10));
    assert!(
        lines.last().unwrap().contains("tenant[0].regions"),
        "{lines:?}"
    );
    let status = exited(&mut child);
    assert_eq!(status.code(), Some(75));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_changed_document_is_applied_and_a_failed_poll_or_bad_document_keeps_the_last_good_one() {
    let dir = scratch("live");
    let answer: Answer = Arc::new(Mutex::new((200, ONE.to_string())));
    let url = format!("http://{}/tenants", endpoint(answer.clone()));
    let (child, rx) = start(&config(&dir, h2_support::hello_engine(), &url));
    let lines = wait_for(&rx, "tenants from", Duration::from_secs(10));
    assert!(
        lines
            .last()
            .unwrap()
            .contains("1 listed, polled every 150 ms"),
        "{lines:?}"
    );

    // A second tenant and a default: the next poll reloads with them.
    *answer.lock().unwrap() = (200, TWO.to_string());
    wait_for(
        &rx,
        "tenants document changed: reloading",
        Duration::from_secs(10),
    );
    let lines = tenants_applied_at(&rx, 2, Duration::from_secs(RELOAD_WAIT_S));
    assert!(
        lines.last().unwrap().contains("1 added (beta), 0 removed"),
        "{lines:?}"
    );

    // The endpoint fails: said once, generation 2 kept.
    *answer.lock().unwrap() = (503, String::new());
    let lines = wait_for(&rx, "tenants poll failed", Duration::from_secs(10));
    assert!(
        lines
            .last()
            .unwrap()
            .contains("generation 2 kept: GET http://"),
        "{lines:?}"
    );
    assert!(lines.last().unwrap().contains("answered 503"), "{lines:?}");

    // A document that does not check: refused, naming the key, generation 2 kept.
    *answer.lock().unwrap() = (
        200,
        r#"{"tenant": [{"name": "gamma", "keys": ["k"], "regions": ["mars"]}]}"#.to_string(),
    );
    let lines = wait_for(&rx, "config reload refused", Duration::from_secs(10));
    let line = lines.last().unwrap();
    assert!(line.contains("generation 2 kept"), "{line}");
    assert!(line.contains("mars"), "{line}");

    // An empty document would let everyone in: refused too.
    *answer.lock().unwrap() = (200, "{}".to_string());
    let lines = wait_for(&rx, "config reload refused", Duration::from_secs(10));
    assert!(
        lines.last().unwrap().contains("would let anyone in"),
        "{lines:?}"
    );
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

mod fuzz_body {
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: 512,
            rng_seed: RngSeed::Fixed(2026),
            ..ProptestConfig::default()
        }
    }

    /// An answer as an endpoint might send it: any status, the body sized, chunked in pieces,
    /// or ended by the close, the body a tenants document or any bytes.
    fn answer() -> impl Strategy<Value = Vec<u8>> {
        let body = prop_oneof![
            Just(super::TWO.as_bytes().to_vec()),
            Just(super::ONE.as_bytes().to_vec()),
            proptest::collection::vec(any::<u8>(), 0..64),
        ];
        (
            prop_oneof![Just(200u16), Just(503), Just(404)],
            0..3u8,
            body,
            1..8usize,
        )
            .prop_map(|(status, framing, body, piece)| {
                let mut a = format!("HTTP/1.1 {status} X\r\n").into_bytes();
                match framing {
                    0 => {
                        a.extend(format!("Content-Length: {}\r\n\r\n", body.len()).bytes());
                        a.extend(&body);
                    }
                    1 => {
                        a.extend(b"Transfer-Encoding: chunked\r\n\r\n");
                        for c in body.chunks(piece) {
                            a.extend(format!("{:x}\r\n", c.len()).bytes());
                            a.extend(c);
                            a.extend(b"\r\n");
                        }
                        a.extend(b"0\r\n\r\n");
                    }
                    _ => {
                        a.extend(b"Connection: close\r\n\r\n");
                        a.extend(&body);
                    }
                }
                a
            })
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn the_fuzz_body_holds_on_answers_in_every_framing(cut in any::<u8>(), a in answer()) {
            let mut data = vec![cut];
            data.extend(a);
            bundle_relay::serve::fuzz_tenants_answer(&data);
        }

        #[test]
        fn the_fuzz_body_holds_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..256)) {
            bundle_relay::serve::fuzz_tenants_answer(&data);
        }
    }
}

fn hup(child: &Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
}

/// `[tenants_from]` added by a reload: the endpoint is asked then, and its document is the
/// reload's tenants (none, no reload, as at start). A reload that shortens `every_ms` is
/// followed by a poll at once, not after the old period.
#[test]
fn tenants_from_added_by_a_reload_is_asked_then_and_a_shortened_period_polls_at_once() {
    let dir = scratch("added");
    let answer: Answer = Arc::new(Mutex::new((200, ONE.to_string())));
    let url = format!("http://{}/tenants", endpoint(answer.clone()));
    let path = config(&dir, h2_support::hello_engine(), &url);
    let with = std::fs::read_to_string(&path).unwrap();
    let without = with[..with.find("[tenants_from]").unwrap()].to_string();
    std::fs::write(&path, &without).unwrap();
    let (child, rx) = start(&path);
    wait_for(&rx, "intake (rotating)", Duration::from_secs(10));
    std::fs::write(&path, with.replace("every_ms = 150", "every_ms = 60000")).unwrap();
    hup(&child);
    let lines = tenants_applied_at(&rx, 2, Duration::from_secs(RELOAD_WAIT_S));
    assert!(lines.last().unwrap().contains("1 added"), "{lines:?}");
    // The next poll is a minute away; a reload to 150 ms polls at once.
    *answer.lock().unwrap() = (200, TWO.to_string());
    std::fs::write(&path, &with).unwrap();
    hup(&child);
    wait_for(
        &rx,
        "config reloaded: generation 3",
        Duration::from_secs(RELOAD_WAIT_S),
    );
    tenants_applied_at(&rx, 4, Duration::from_secs(RELOAD_WAIT_S));
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A document refused for what the file said then (a global rate with no `[quota]` store) is
/// tried again once the file changes, and applied if the file now allows it; against the same
/// file it is not tried again at every poll.
#[test]
fn a_refused_document_is_tried_again_once_the_file_changes() {
    let dir = scratch("retry");
    let answer: Answer = Arc::new(Mutex::new((200, ONE.to_string())));
    let url = format!("http://{}/tenants", endpoint(answer.clone()));
    let path = config(&dir, h2_support::hello_engine(), &url);
    let (child, rx) = start(&path);
    wait_for(&rx, "tenants from", Duration::from_secs(10));
    *answer.lock().unwrap() = (
        200,
        r#"{"tenant": [{"name": "alpha", "keys": ["alpha-key"], "global_rate": 50}]}"#.to_string(),
    );
    let lines = wait_for(
        &rx,
        "config reload refused",
        Duration::from_secs(RELOAD_WAIT_S),
    );
    assert!(lines.last().unwrap().contains("[quota]"), "{lines:?}");
    // Polls go on every 150 ms; the same document against the same file is not refused again.
    let deadline = Instant::now() + Duration::from_millis(800);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if let Ok(line) = rx.recv_timeout(left) {
            assert!(!line.contains("refused"), "tried again: {line}");
        }
    }
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}[quota]\nredis = \"127.0.0.1:1\"\n")).unwrap();
    hup(&child);
    wait_for(
        &rx,
        "config reloaded: generation 2",
        Duration::from_secs(RELOAD_WAIT_S),
    );
    tenants_applied_at(&rx, 3, Duration::from_secs(RELOAD_WAIT_S));
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A relay whose tenants document was refused, its unit's status saying so, reloaded with
/// `[tenants_from]` taken out: the status the reload says no longer holds that refusal, since
/// no document is read any more; kept, `systemctl status` would show a refusal of nothing
/// until the next totals.
#[test]
fn taking_tenants_from_out_ends_its_documents_refusal_in_the_status_the_reload_says() {
    let dir = scratch("standing");
    let sock = std::os::unix::net::UnixDatagram::bind(dir.join("notify")).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let answer: Answer = Arc::new(Mutex::new((200, ONE.to_string())));
    let url = format!("http://{}/tenants", endpoint(answer.clone()));
    let path = config(&dir, h2_support::hello_engine(), &url);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bundle-relay"));
    cmd.env("NOTIFY_SOCKET", dir.join("notify"));
    let (child, rx) = start_with(cmd, &path);
    wait_for(&rx, "tenants from", Duration::from_secs(10));
    *answer.lock().unwrap() = (
        200,
        r#"{"tenant": [{"name": "alpha", "keys": ["alpha-key"], "global_rate": 50}]}"#.to_string(),
    );
    wait_for(
        &rx,
        "config reload refused",
        Duration::from_secs(RELOAD_WAIT_S),
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let cut = text.find("[tenants_from]").unwrap();
    // Whole at once, as an editor saves it: the file watcher never reads half of it.
    let next = dir.join("relay.toml.next");
    std::fs::write(&next, &text[..cut]).unwrap();
    std::fs::rename(&next, &path).unwrap();
    hup(&child);
    wait_for(
        &rx,
        "config reloaded: generation 2",
        Duration::from_secs(RELOAD_WAIT_S),
    );
    // The manager is told after the log says it: read until that message came.
    let mut said = Vec::new();
    let mut b = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(RELOAD_WAIT_S);
    while Instant::now() < deadline
        && !said
            .iter()
            .any(|m: &String| m.contains("config reloaded: generation 2"))
    {
        if let Ok(n) = sock.recv(&mut b) {
            said.push(String::from_utf8_lossy(&b[..n]).into_owned());
        }
    }
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
    let refused = said
        .iter()
        .position(|m| m.contains("STATUS=config reload refused"))
        .unwrap_or_else(|| panic!("the refusal was never said: {said:?}"));
    let reloaded = said
        .iter()
        .position(|m| m.contains("config reloaded: generation 2"))
        .unwrap_or_else(|| panic!("the reload was never said: {said:?}"));
    assert!(refused < reloaded, "{said:?}");
    assert!(
        said[reloaded].contains("STATUS=config reloaded: generation 2"),
        "the reload's status holds the refusal of a document no longer read: {:?}",
        said[reloaded]
    );
}

/// `config`'s file with the poll period and the fetch timeout both `ms`.
fn period(path: &std::path::Path, url: &str, ms: u64) {
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("[tenants_from]").unwrap();
    let mut text = text[..start].to_string();
    text.push_str(&format!(
        "[tenants_from]\nurl = \"{url}\"\nevery_ms = {ms}\ntimeout_ms = {ms}\n"
    ));
    std::fs::write(path, text).unwrap();
}

/// A relay polling endpoint A every 8 s (moved there by a reload, so its poll of A goes out
/// at once), A holding that poll: the relay's tenants come from A's first answer.
fn polling_a_held(
    dir: &std::path::Path,
    a_gate: &Gate,
    a_answer: &Answer,
) -> (Child, Receiver<String>, std::path::PathBuf, String) {
    let url = format!(
        "http://{}/tenants",
        gated_endpoint(a_answer.clone(), a_gate.clone())
    );
    let path = config(dir, h2_support::hello_engine(), &url);
    let (child, rx) = start(&path);
    wait_for(&rx, "intake (rotating)", Duration::from_secs(10));
    set_gate(a_gate, false);
    period(&path, &url, 8_000);
    hup(&child);
    wait_for(
        &rx,
        "config reloaded: generation 2",
        Duration::from_secs(RELOAD_WAIT_S),
    );
    // Polls asked before the reload give up after their 100 ms; the one asked after it is
    // held for up to 8 s.
    std::thread::sleep(Duration::from_millis(400));
    (child, rx, path, url)
}

/// A reload moves `[tenants_from]` from A to B while a poll of A is still out: B's document
/// is the reload's tenants, and A's answer, coming after, is not applied (it would bring back
/// tenants and keys that B no longer lists).
#[test]
fn a_document_from_the_url_a_reload_left_is_never_applied() {
    let dir = scratch("moved");
    let (a_gate, a_answer) = (gate(true), Arc::new(Mutex::new((200, ONE.to_string()))));
    let (child, rx, path, _) = polling_a_held(&dir, &a_gate, &a_answer);
    *a_answer.lock().unwrap() = (
        200,
        r#"{"tenant": [{"name": "revoked", "keys": ["revoked-key"]}]}"#.to_string(),
    );
    let b_gate = gate(true);
    let b = gated_endpoint(Arc::new(Mutex::new((200, TWO.to_string()))), b_gate.clone());
    period(&path, &format!("http://{b}/tenants"), 8_000);
    hup(&child);
    tenants_applied_at(&rx, 3, Duration::from_secs(RELOAD_WAIT_S));
    // B's polls from now on are held too, so A's answer is the only one that comes.
    set_gate(&b_gate, false);
    set_gate(&a_gate, true);
    let deadline = Instant::now() + Duration::from_millis(1_500);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if let Ok(line) = rx.recv_timeout(left) {
            assert!(
                !line.contains("tenants document changed") && !line.contains("generation 4"),
                "A's answer applied after the reload moved to B: {line}"
            );
        }
    }
    stop(child);
    set_gate(&b_gate, true);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reload that takes `[tenants_from]` out while a poll of it is held by its endpoint: the
/// relay does not wait for that poll to end, so a stop right after is as quick as ever (the
/// supervision loop that pings the watchdog and reads signals is not held for the fetch's
/// timeout).
#[test]
fn taking_tenants_from_out_while_its_endpoint_holds_a_poll_does_not_hold_the_relay() {
    let dir = scratch("removed");
    let (a_gate, a_answer) = (gate(true), Arc::new(Mutex::new((200, ONE.to_string()))));
    let (mut child, rx, path, _) = polling_a_held(&dir, &a_gate, &a_answer);
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("[tenants_from]").unwrap();
    std::fs::write(
        &path,
        format!(
            "{}[[tenant]]\nname = \"alpha\"\nkeys = [\"alpha-key\"]\n",
            &text[..start]
        ),
    )
    .unwrap();
    hup(&child);
    wait_for(
        &rx,
        "config reloaded: generation 3",
        Duration::from_secs(RELOAD_WAIT_S),
    );
    // Let the loop reach the poller it no longer wants.
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = asked + Duration::from_secs(4);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "still running 4 s after SIGTERM, held by a poll of an endpoint the config dropped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    set_gate(&a_gate, true);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A relay half a second into its start, held there by its tenants endpoint until the gate
/// opens: its scratch folder, that gate, its config file, the relay and its output.
fn held_at_start(
    name: &str,
) -> (
    std::path::PathBuf,
    Gate,
    std::path::PathBuf,
    Child,
    Receiver<String>,
) {
    let dir = scratch(name);
    let (a_gate, a_answer) = (gate(false), Arc::new(Mutex::new((200, ONE.to_string()))));
    let url = format!(
        "http://{}/tenants",
        gated_endpoint(a_answer, a_gate.clone())
    );
    let path = config(&dir, h2_support::hello_engine(), &url);
    period(&path, &url, 5_000);
    let (child, rx) = start(&path);
    std::thread::sleep(Duration::from_millis(500));
    (dir, a_gate, path, child, rx)
}

/// An edit saved while the relay is still starting (here while it waits on the tenants
/// endpoint) is seen as a change once it serves, and reloaded: the file is watched as it was
/// read, not as it was when the wait ended.
#[test]
fn an_edit_saved_while_the_relay_starts_is_reloaded() {
    let (dir, a_gate, path, child, rx) = held_at_start("edited");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(
            "arena_slots = 64\n",
            "arena_slots = 64\nupstream_timeout_ms = 4000\n",
        ),
    )
    .unwrap();
    set_gate(&a_gate, true);
    wait_for(&rx, "intake (rotating)", Duration::from_secs(10));
    let lines = wait_for(
        &rx,
        "config reloaded: generation 2",
        Duration::from_secs(RELOAD_WAIT_S),
    );
    assert!(
        lines.iter().any(|l| l.contains("changed on disk")),
        "{lines:?}"
    );
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGHUP while the relay is still starting (here while it waits on the tenants endpoint),
/// as a deployment tool that saves and signals may send it: the relay is not killed by it,
/// and reloads once it serves.
#[test]
fn a_sighup_while_the_relay_starts_is_a_reload_once_it_serves() {
    let (dir, a_gate, _, mut child, rx) = held_at_start("early-hup");
    hup(&child);
    std::thread::sleep(Duration::from_millis(100));
    set_gate(&a_gate, true);
    let lines = std::panic::catch_unwind(|| {
        wait_for(
            &rx,
            "config reloaded: generation 2",
            Duration::from_secs(RELOAD_WAIT_S),
        )
    });
    let ended = child.try_wait().unwrap();
    assert!(lines.is_ok(), "no reload; the relay ended: {ended:?}");
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}
