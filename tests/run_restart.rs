//! A restart under load loses nothing: bench-load sends bundles over keep-alive connections and
//! another client opens a fresh connection per request, both through a takeover (SIGUSR2: the
//! relay starts its own binary, which binds the same listeners, brings its pool up, listens and
//! tells the old process to drain). Counted: every request answered 200 with its bundle id, no
//! connection refused or reset, every bundle accepted once by bench-engine, no send early by
//! the engine's pacing while both processes send, and the two processes' accounting adds up to
//! what was sent.
//!
//! Needs the bench tools built beside the relay (`cargo test --workspace` builds them; alone:
//! `cargo build -p bundle-relay-bench --bin bench-engine --bin bench-load`).

mod process_support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use process_support::{collect_lines, free_port, http_get, json_u64, tool, wait_line};

#[test]
fn a_takeover_under_load_refuses_no_connection_and_leaves_no_request_unanswered() {
    let load_bin = tool("bench-load");
    let bench = Bench::start(
        "restart",
        "127.0.0.41",
        "127.1.95.0/28",
        50,
        Shape {
            threads: 2,
            top: "arena_slots = 4096\n",
            connections: 128,
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    let (mut old, lines) = bench.relay(&[], false);
    wait_line(
        &lines,
        "ready: listening, 16 of 16 pairs up",
        Duration::from_secs(20),
    );

    // A client opening a new connection per request, through the whole switch.
    let addr = bench.intake;
    let done = Arc::new(AtomicBool::new(false));
    let (fresh_ok, fresh_failed) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let churn = {
        let (done, ok, failed) = (done.clone(), fresh_ok.clone(), fresh_failed.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                match http_get(addr, "/ping") {
                    Ok(r) if r.starts_with("HTTP/1.1 200") && r.ends_with("ok") => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => failed.lock().unwrap().push(format!("answer {r:?}")),
                    Err(e) => failed.lock().unwrap().push(e.to_string()),
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let load_json = bench.dir.join("load.json");
    let load = Command::new(&load_bin)
        .args([
            "--target",
            &addr.to_string(),
            "--rate",
            "250",
            "--duration-s",
            "5",
        ])
        .args(["--connections", "8", "--quiet", "--json"])
        .arg(&load_json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(old.id() as i32, libc::SIGUSR2) };
    let started = wait_line(&lines, "upgrade: started", Duration::from_secs(5));
    let new_pid: i32 = started
        .split("as pid ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    wait_line(&lines, "taking over from pid", Duration::from_secs(20));
    wait_line(
        &lines,
        "taken over: closing the listeners",
        Duration::from_secs(5),
    );
    let old_status = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = old.try_wait().unwrap() {
                break s.code();
            }
            assert!(
                Instant::now() < deadline,
                "the old process did not finish draining"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let load_out = load.wait_with_output().unwrap();
    done.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    // SAFETY: the process that took over (our grandchild).
    unsafe { libc::kill(new_pid, libc::SIGTERM) };
    let stopped = {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let n = lines
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.starts_with("stopped: admitted "))
                .count();
            if n == 2 {
                break lines.lock().unwrap().clone();
            }
            assert!(Instant::now() < deadline, "the new process did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let engine_stats = bench.engine_stats();
    let summary = std::fs::read_to_string(&load_json).unwrap_or_else(|_| {
        panic!(
            "bench-load wrote no summary: {}",
            String::from_utf8_lossy(&load_out.stderr)
        )
    });
    bench.end();
    assert_eq!(old_status, Some(0));
    let scheduled = json_u64(&summary, "scheduled");
    assert_eq!(scheduled, 1_250);
    for (key, want) in [
        ("answered", scheduled),
        ("result_ids_matching", scheduled),
        ("errors", 0),
        ("timeouts", 0),
        ("unsent", 0),
    ] {
        assert_eq!(json_u64(&summary, key), want, "{key}: {summary}");
    }
    let failed = fresh_failed.lock().unwrap();
    assert!(failed.is_empty(), "fresh connections failed: {failed:?}");
    assert!(
        fresh_ok.load(Ordering::Relaxed) > 100,
        "the churn client ran"
    );
    // Both processes' books, and the engine's: every bundle delivered once.
    let admitted: u64 = stopped
        .iter()
        .filter_map(|l| l.strip_prefix("stopped: admitted "))
        .map(|l| {
            assert!(l.contains("+ expired 0 + failed 0 + in flight 0"), "{l}");
            l.split(' ').next().unwrap().parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(admitted, scheduled, "{stopped:?}");
    let body = &engine_stats;
    assert_eq!(json_u64(body, "accepted"), scheduled, "{body}");
    assert_eq!(json_u64(body, "duplicates"), 0, "{body}");
    // Both processes book in one pacing ledger: while both send, neither uses a pair the
    // other used within its interval.
    assert_eq!(
        json_u64(body, "early_sends"),
        0,
        "early sends at the engine across the switch: {body}"
    );
}

/// `GET /metrics` with `Authorization: Bearer token`: the status line.
fn metrics_with(addr: SocketAddr, token: &str) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        c,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

fn spawn_engine(engine_bin: &std::path::Path, port: u16) -> std::process::Child {
    Command::new(engine_bin)
        .args(["--regions", "amsterdam", "--base-ip", "127.0.0.42"])
        .args(["--port", &port.to_string()])
        .args(["--stats-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A scratch folder with a one-thread relay config whose admin asks for the token in
/// `token` (holding "old-token"), egress `sources`, one region on a bench-engine port of its
/// own: (folder, config, token file, engine port, admin address).
fn token_setup(name: &str, sources: &str) -> (PathBuf, PathBuf, PathBuf, u16, SocketAddr) {
    let dir = std::env::temp_dir().join(format!("br-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (intake, engine_port, admin) = (free_port(), free_port(), free_port());
    let token = dir.join("token");
    std::fs::write(&token, "old-token\n").unwrap();
    let config = dir.join("relay.toml");
    std::fs::write(
        &config,
        format!(
            "threads = 1\npin_threads = false\narena_slots = 64\n\
             [intake]\nrotating = \"127.0.0.1:{intake}\"\nconnections_max = 16\n\
             [[region]]\nname = \"amsterdam\"\nhost = \"127.0.0.42\"\nport = {engine_port}\n\
             tls = false\n\
             [egress]\naddresses = [\"{sources}\"]\n\
             [admin]\nlisten = \"127.0.0.1:{admin}\"\ntoken_file = \"{}\"\n",
            token.display()
        ),
    )
    .unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    (dir, config, token, engine_port, admin)
}

/// A reload while a takeover waits for its pool (here: the engine is down) changes the admin
/// token; the admin the new process opens when it takes over asks for that token, not the one
/// it started with.
#[test]
fn a_token_a_reload_changed_during_a_takeover_is_the_one_the_new_admin_asks_for() {
    let engine_bin = tool("bench-engine");
    let (dir, config, token, engine_port, addr) = token_setup("restart-token", "127.1.96.0/30");
    let mut engine = spawn_engine(&engine_bin, engine_port);
    let mut old = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let old_lines = collect_lines(&mut old);
    wait_line(&old_lines, "ready: listening", Duration::from_secs(20));
    let _ = engine.kill();
    let _ = engine.wait();
    let mut new = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--ready-pairs-percent", "100", "--takeover"])
        .arg(old.id().to_string())
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let new_lines = collect_lines(&mut new);
    wait_line(&new_lines, "intake (rotating)", Duration::from_secs(10));
    std::fs::write(&token, "new-token\n").unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(new.id() as i32, libc::SIGHUP) };
    wait_line(
        &new_lines,
        "config reloaded: generation 2",
        Duration::from_secs(10),
    );
    let mut engine = spawn_engine(&engine_bin, engine_port);
    wait_line(&new_lines, "taking over from pid", Duration::from_secs(30));
    assert!(
        !new_lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("no changes")),
        "a new token is a change"
    );
    wait_line(&new_lines, "admin: http://", Duration::from_secs(10));
    let answers = (
        metrics_with(addr, "new-token"),
        metrics_with(addr, "old-token"),
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(new.id() as i32, libc::SIGTERM) };
    let _ = new.wait();
    let _ = old.wait();
    let _ = engine.kill();
    let _ = engine.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        answers,
        (
            "HTTP/1.1 200 OK".to_string(),
            "HTTP/1.1 401 Unauthorized".to_string()
        )
    );
}

/// The admin token file edited on disk (a secret rotated where it is mounted) is read again as
/// the config file is, without a signal: the admin asks for the new token from then on.
#[test]
fn an_edited_token_file_is_read_again_without_a_signal() {
    let engine_bin = tool("bench-engine");
    let (dir, config, token, engine_port, addr) = token_setup("token-watch", "127.1.97.0/30");
    let mut engine = spawn_engine(&engine_bin, engine_port);
    let mut relay = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = collect_lines(&mut relay);
    wait_line(&lines, "ready: listening", Duration::from_secs(20));
    std::fs::write(&token, "new-token\n").unwrap();
    wait_line(
        &lines,
        "token changed on disk: reloading",
        Duration::from_secs(5),
    );
    wait_line(
        &lines,
        "admin: bearer token replaced",
        Duration::from_secs(5),
    );
    let answers = (
        metrics_with(addr, "new-token"),
        metrics_with(addr, "old-token"),
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(relay.id() as i32, libc::SIGTERM) };
    let _ = relay.wait();
    let _ = engine.kill();
    let _ = engine.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        answers,
        (
            "HTTP/1.1 200 OK".to_string(),
            "HTTP/1.1 401 Unauthorized".to_string()
        )
    );
}

/// One bundle through bench-load to `target` (`seed` makes it a bundle of its own); whether
/// it was answered with its id.
fn send_one(load_bin: &std::path::Path, target: SocketAddr, seed: u64) -> bool {
    let out = Command::new(load_bin)
        .args(["--target", &target.to_string(), "--rate", "1"])
        .args(["--requests", "1", "--connections", "1", "--quiet"])
        .args(["--seed", &seed.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("1 matching")
        || String::from_utf8_lossy(&out.stderr).contains("1 matching")
}

/// An operator's `run --takeover PID` (no `--ledger-fd`: that only SIGUSR2's successor is
/// handed) books in the old process's pacing ledger too, found through /proc: a pair the old
/// one sent on is not used again within its interval, so the engine sees no early send.
#[test]
fn a_takeover_started_by_hand_honours_the_old_processs_last_send_on_each_pair() {
    hand_takeover("hand-takeover", "127.0.0.43", "127.1.101.1", None);
}

/// As above, the old process run by a unit (its ledger a file in the runtime folder), the new
/// one from an operator's shell (no `RUNTIME_DIRECTORY`): the file it holds is found too.
#[test]
fn a_takeover_started_by_hand_finds_the_ledger_file_a_unit_gave_the_old_process() {
    let runtime = format!("/dev/shm/br-hand-runtime-{}", std::process::id());
    let _ = std::fs::remove_dir_all(&runtime);
    std::fs::create_dir_all(&runtime).unwrap();
    hand_takeover(
        "hand-takeover-file",
        "127.0.0.46",
        "127.1.104.1",
        Some(&runtime),
    );
    let _ = std::fs::remove_dir_all(&runtime);
}

fn hand_takeover(name: &str, ip: &str, egress: &str, old_runtime: Option<&str>) {
    let load_bin = tool("bench-load");
    // One pair, paced at 4 s. A pair's first send waits an interval from its process's start,
    // so the old one sends the first bundle 4 s in (its drain is long enough to), while the
    // new one, started about a second in, may first send 4 s after its own start: early,
    // unless it honours the old one's send in the ledger and waits until 8 s in.
    let bench = Bench::start(
        name,
        ip,
        egress,
        4_000,
        Shape {
            threads: 1,
            top: "arena_slots = 64\nbundle_max_age_ms = 20000\n",
            connections: 16,
        },
    );
    let (mut old, old_lines) = bench.relay_in(&["--drain-ms", "15000"], false, old_runtime);
    wait_line(&old_lines, "ready: listening", Duration::from_secs(20));
    let first = send_one(&load_bin, bench.intake, 1);
    let old_pid = old.id().to_string();
    let (mut new, new_lines) = bench.relay(&["--takeover", &old_pid], true);
    wait_line(&new_lines, "taking over from pid", Duration::from_secs(20));
    let old_status = old.wait().unwrap().code();
    // The old process has gone: only the new one can send this, on the pair the old one used.
    let second = send_one(&load_bin, bench.intake, 2);
    // It goes once the old one's interval has passed: wait for it before the stop.
    bench.wait_sent(2, Duration::from_secs(15));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(new.id() as i32, libc::SIGTERM) };
    let new_status = new.wait().unwrap().code();
    let mut new_err = String::new();
    let _ = std::io::Read::read_to_string(&mut new.stderr.take().unwrap(), &mut new_err);
    let body = bench.engine_stats();
    bench.end();
    assert!(first && second, "both answered with their ids");
    assert_eq!((old_status, new_status), (Some(0), Some(0)), "{new_err}");
    assert_eq!(json_u64(&body, "accepted"), 2, "{body}");
    assert_eq!(
        json_u64(&body, "early_sends"),
        0,
        "the new process sent within the old one's interval: {body}\n{new_err}"
    );
    assert!(!new_err.contains("warning"), "{new_err}");
}

/// Two relays of one host that both send on a pair (slices that overlap, a relay restarted
/// while the old one still drains, a takeover of the wrong relay) share the pacing ledger
/// file (`egress.ledger`, or under a unit `pacing.ledger` in its `RuntimeDirectory=`): the
/// second waits out the first's send on the pair, and the engine sees no early send.
#[test]
fn relays_sharing_a_ledger_file_never_send_early_on_a_pair_both_use() {
    let load_bin = tool("bench-load");
    let bench = Bench::start(
        "shared-ledger",
        "127.0.0.44",
        "127.1.102.1",
        2_000,
        Shape {
            threads: 1,
            top: "arena_slots = 64\nbundle_max_age_ms = 10000\n",
            connections: 16,
        },
    );
    let runtime = format!("/dev/shm/br-runtime-{}", std::process::id());
    let _ = std::fs::remove_dir_all(&runtime);
    std::fs::create_dir_all(&runtime).unwrap();
    let plain = std::fs::read_to_string(&bench.config).unwrap();
    let text = plain.replace(
        "[egress]\n",
        &format!("[egress]\nledger = \"{runtime}/pacing.ledger\"\n"),
    );
    std::fs::write(&bench.config, &text).unwrap();
    // The second relay: the same pool and region, an intake of its own, and the ledger of
    // the unit's runtime folder.
    let other_intake: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let other_config = bench.dir.join("other.toml");
    std::fs::write(
        &other_config,
        plain.replace(&bench.intake.to_string(), &other_intake.to_string()),
    )
    .unwrap();
    let (mut one, one_lines) = bench.relay(&[], false);
    let mut two = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--config"])
        .arg(&other_config)
        .env("RUNTIME_DIRECTORY", &runtime)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let two_lines = collect_lines(&mut two);
    wait_line(&one_lines, "ready: listening", Duration::from_secs(20));
    wait_line(&two_lines, "ready: listening", Duration::from_secs(20));
    let first = send_one(&load_bin, bench.intake, 1);
    let second = send_one(&load_bin, other_intake, 2);
    bench.wait_sent(2, Duration::from_secs(12));
    for c in [&one, &two] {
        // SAFETY: signalling our own children.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    }
    let statuses = (one.wait().unwrap().code(), two.wait().unwrap().code());
    let body = bench.engine_stats();
    let _ = std::fs::remove_dir_all(&runtime);
    bench.end();
    assert!(first && second, "both answered with their ids");
    assert_eq!(statuses, (Some(0), Some(0)));
    assert_eq!(json_u64(&body, "accepted"), 2, "{body}");
    assert_eq!(
        json_u64(&body, "early_sends"),
        0,
        "one relay sent on the pair within the other's interval: {body}"
    );
}

/// `run --takeover PID` names the relay that serves this config: one that listens on none of
/// its intake ports runs another config (another slice's relay of the host), and taking it
/// over would leave its ports and its part of the pool unserved, so it is refused. A port of
/// the config that the old relay does not listen on is held to a plain start's rule: another
/// process listening there refuses it.
#[test]
fn a_takeover_of_a_relay_serving_other_ports_or_onto_another_processs_port_is_refused() {
    let bench = Bench::start(
        "takeover-other",
        "127.0.0.45",
        "127.1.103.1",
        1_000,
        Shape {
            threads: 1,
            top: "arena_slots = 64\n",
            connections: 16,
        },
    );
    let (mut running, lines) = bench.relay(&[], false);
    wait_line(&lines, "ready: listening", Duration::from_secs(20));
    let other_port = free_port();
    let other = bench.dir.join("other.toml");
    std::fs::write(
        &other,
        std::fs::read_to_string(&bench.config).unwrap().replace(
            &bench.intake.to_string(),
            &format!("127.0.0.1:{other_port}"),
        ),
    )
    .unwrap();
    let pid = running.id().to_string();
    let check = |config: &std::path::Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
            .args(["run", "--check", "--takeover", &pid, "--config"])
            .arg(config)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Its own port and one another process listens on (another relay's, by a mistake in the
    // edited config): the takeover would join that process's port and split its connections.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap().port();
    let joins = bench.dir.join("joins.toml");
    std::fs::write(
        &joins,
        std::fs::read_to_string(&bench.config).unwrap().replace(
            "[egress]",
            &format!("pinned = \"127.0.0.1:{taken}\"\n[egress]"),
        ),
    )
    .unwrap();
    // The old relay's port on another address, where another process listens.
    let squatter_beside = std::net::TcpListener::bind(("127.0.0.2", bench.intake.port())).unwrap();
    let beside = bench.dir.join("beside.toml");
    std::fs::write(
        &beside,
        std::fs::read_to_string(&bench.config).unwrap().replace(
            "[egress]",
            &format!("pinned = \"127.0.0.2:{}\"\n[egress]", bench.intake.port()),
        ),
    )
    .unwrap();
    let refused = check(&other);
    let joined = check(&joins);
    let joined_beside = check(&beside);
    drop(squatter_beside);
    let own = check(&bench.config);
    drop(squatter);
    let port = bench.intake.port();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(running.id() as i32, libc::SIGTERM) };
    let _ = running.wait();
    bench.end();
    assert_eq!(refused.0, Some(2), "{}", refused.1);
    assert!(
        refused.1.contains(&format!(
            "that relay listens on port {port}, this config on {other_port}"
        )),
        "{}",
        refused.1
    );
    assert_eq!(joined.0, Some(2), "{}", joined.1);
    assert!(
        joined.1.contains(&format!("127.0.0.1:{taken}")) && joined.1.contains("already in use"),
        "{}",
        joined.1
    );
    assert_eq!(joined_beside.0, Some(2), "{}", joined_beside.1);
    assert!(
        joined_beside.1.contains(&format!("127.0.0.2:{port}"))
            && joined_beside.1.contains("already in use"),
        "{}",
        joined_beside.1
    );
    assert_eq!(own.0, Some(0), "its own config passes: {}", own.1);
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits up to `limit` for process `pid` to end.
fn ends_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ended(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    ended(pid)
}

/// A process taking over whose old process is gone before it is ready (killed, or stopped by
/// its operator) does not go on to serve in its place later: it says so and exits at once,
/// not after its 60 s wait with "pid N keeps serving" of a process that is no more.
#[test]
fn a_takeover_whose_old_process_is_gone_before_it_is_ready_exits_instead_of_serving() {
    let (dir, config, _token, _engine_port, _admin) =
        token_setup("restart-orphan", "127.1.98.0/30");
    // No engine: neither process's pool comes up, so the new one waits.
    let mut old = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let old_lines = collect_lines(&mut old);
    wait_line(&old_lines, "intake (rotating)", Duration::from_secs(10));
    let mut new = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--takeover"])
        .arg(old.id().to_string())
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let new_lines = collect_lines(&mut new);
    wait_line(&new_lines, "intake (rotating)", Duration::from_secs(10));
    let _ = old.kill();
    let _ = old.wait();
    let exited = ends_within(new.id() as i32, Duration::from_secs(5));
    if !exited {
        let _ = new.kill();
    }
    let status = new.wait().unwrap().code();
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut new.stderr.take().unwrap(), &mut err);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        exited,
        "still waiting to take over from a process that is gone:\n{err}"
    );
    assert_eq!(status, Some(70), "{err}");
    assert!(
        err.contains(&format!(
            "pid {} ended before this process was ready",
            old.id()
        )),
        "{err}"
    );
    assert!(!err.contains("keeps serving"), "{err}");
}

/// SIGTERM to a relay whose successor (SIGUSR2) has not taken over yet stops the upgrade too:
/// the operator stopped the relay, and the successor must not take over and serve later.
#[test]
fn stopping_a_relay_during_its_upgrade_stops_the_successor_too() {
    let engine_bin = tool("bench-engine");
    let (dir, config, _token, engine_port, _admin) =
        token_setup("restart-stop-upgrade", "127.1.99.0/30");
    let mut engine = spawn_engine(&engine_bin, engine_port);
    let mut old = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args([
            "run",
            "--ready-pairs-percent",
            "100",
            "--unready-ms",
            "4000",
        ])
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = collect_lines(&mut old);
    wait_line(&lines, "ready: listening", Duration::from_secs(20));
    // The engine goes: the successor's pool cannot come up, so it waits.
    let _ = engine.kill();
    let _ = engine.wait();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(old.id() as i32, libc::SIGUSR2) };
    let started = wait_line(&lines, "upgrade: started", Duration::from_secs(5));
    let successor: i32 = started
        .split("as pid ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(old.id() as i32, libc::SIGTERM) };
    // The old one serves on for its 4 s of --unready-ms: the successor must be stopped by it
    // at once (well within those 4 s), not only notice later that it ended.
    let gone = ends_within(successor, Duration::from_millis(3_500));
    let old_alive_then = old.try_wait().unwrap().is_none();
    if !gone {
        // SAFETY: the successor our child started.
        unsafe { libc::kill(successor, libc::SIGKILL) };
    }
    let old_status = old.wait().unwrap().code();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(old_status, Some(0));
    assert!(gone, "the successor runs on after its relay was stopped");
    assert!(old_alive_then, "the old process had ended first");
    assert!(
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(&format!("upgrade: stopping pid {successor}"))),
        "says it stops the successor"
    );
}

/// One region's bench-engine and a relay config pointed at it, in a scratch folder.
struct Bench {
    dir: PathBuf,
    config: PathBuf,
    intake: SocketAddr,
    engine: std::process::Child,
    stats: SocketAddr,
}

/// A [`Bench`] relay's shape: its threads, more top-level keys, intake connections a thread.
struct Shape {
    threads: usize,
    top: &'static str,
    connections: usize,
}

type Lines = Arc<Mutex<Vec<String>>>;

impl Bench {
    /// bench-engine's region `amsterdam` on `ip` (a port and a stats port of its own) pacing
    /// at `interval_ms`, and a config of `shape` sending to it from `egress` at that pace.
    fn start(name: &str, ip: &str, egress: &str, interval_ms: u64, shape: Shape) -> Bench {
        let dir = std::env::temp_dir().join(format!("br-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (intake, engine_port, stats) = (free_port(), free_port(), free_port());
        let config = dir.join("relay.toml");
        let Shape {
            threads,
            top,
            connections,
        } = shape;
        std::fs::write(
            &config,
            format!(
                "threads = {threads}\npin_threads = false\n{top}\
                 [intake]\nrotating = \"127.0.0.1:{intake}\"\nconnections_max = {connections}\n\
                 [[region]]\nname = \"amsterdam\"\nhost = \"{ip}\"\nport = {engine_port}\n\
                 tls = false\ninterval_ms = {interval_ms}\n\
                 [egress]\naddresses = [\"{egress}\"]\n[admin]\nlisten = \"off\"\n"
            ),
        )
        .unwrap();
        let engine = Command::new(tool("bench-engine"))
            .args(["--regions", "amsterdam", "--base-ip", ip])
            .args(["--interval-ms", &interval_ms.to_string()])
            .args(["--port", &engine_port.to_string()])
            .args(["--stats-addr", &format!("127.0.0.1:{stats}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Bench {
            dir,
            config,
            intake: format!("127.0.0.1:{intake}").parse().unwrap(),
            engine,
            stats: format!("127.0.0.1:{stats}").parse().unwrap(),
        }
    }

    /// `bundle-relay run ARGS --config` this config, its stdout's lines collected (standard
    /// error passed through, or piped when `piped_err`).
    fn relay(&self, args: &[&str], piped_err: bool) -> (std::process::Child, Lines) {
        self.relay_in(args, piped_err, None)
    }

    /// [`Bench::relay`] as a unit with `RuntimeDirectory=` runs it, when `runtime` is given.
    fn relay_in(
        &self,
        args: &[&str],
        piped_err: bool,
        runtime: Option<&str>,
    ) -> (std::process::Child, Lines) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bundle-relay"));
        if let Some(dir) = runtime {
            command.env("RUNTIME_DIRECTORY", dir);
        }
        let mut child = command
            .arg("run")
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .stdout(Stdio::piped())
            .stderr(if piped_err {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .unwrap();
        let lines = collect_lines(&mut child);
        (child, lines)
    }

    /// The engine's `/stats` JSON (empty while it does not answer).
    fn engine_stats(&self) -> String {
        let s = http_get(self.stats, "/stats").unwrap_or_default();
        s.find('{').map(|i| s[i..].to_string()).unwrap_or_default()
    }

    /// Waits up to `limit` for the engine to have taken `calls` SendBundle calls.
    fn wait_sent(&self, calls: u64, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let s = self.engine_stats();
            if !s.is_empty() && json_u64(&s, "send_bundle_calls") >= calls {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the engine and removes the folder (as dropping it does).
    fn end(self) {}
}

impl Drop for Bench {
    /// Also when a test's assertion fails before its end: no engine is left running.
    fn drop(&mut self) {
        let _ = self.engine.kill();
        let _ = self.engine.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A drain keeps delivering what waits when the engine closes the connections under it: the
/// engine sends GOAWAY (a deploy of its own, a connection's age) while SIGTERM's drain still
/// paces the bundles a bot was already answered for, and the relay connects again and
/// delivers every one, rather than fail them at the drain's deadline (while its loop, finding
/// connects due it would not start, spun a core).
#[test]
fn a_drain_connects_again_for_the_bundles_still_waiting_when_the_engine_closes() {
    const BUNDLES: usize = 16;
    let dir = std::env::temp_dir().join(format!("br-drain-goaway-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (intake, engine_port) = (free_port(), free_port());
    let config = dir.join("relay.toml");
    std::fs::write(
        &config,
        format!(
            "threads = 1\npin_threads = false\narena_slots = 64\nbundle_max_age_ms = 20000\n\
             [intake]\nrotating = \"127.0.0.1:{intake}\"\nconnections_max = 16\n\
             [[region]]\nname = \"amsterdam\"\nhost = \"127.0.0.48\"\nport = {engine_port}\n\
             tls = false\ninterval_ms = 400\n\
             [egress]\naddresses = [\"127.1.110.1\"]\n[admin]\nlisten = \"off\"\n"
        ),
    )
    .unwrap();
    // At 5 s every connection the engine has gets a graceful GOAWAY; new ones are served.
    let engine_started = Instant::now();
    let _engine = process_support::Reaped(
        Command::new(tool("bench-engine"))
            .args(["--regions", "amsterdam", "--base-ip", "127.0.0.48"])
            .args(["--port", &engine_port.to_string(), "--interval-ms", "400"])
            .args(["--stats-addr", "127.0.0.1:0", "--fault", "goaway@5s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut relay = process_support::RelayProc::start(
        &config,
        &["--drain-ms", "15000", "--unready-ms", "0"],
        "ready: listening, 1 of 1 pairs up",
    );
    let target: SocketAddr = format!("127.0.0.1:{intake}").parse().unwrap();
    let out = Command::new(tool("bench-load"))
        .args(["--target", &target.to_string(), "--rate", "200"])
        .args(["--requests", &BUNDLES.to_string(), "--connections", "1"])
        .args(["--quiet"])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("{BUNDLES} matching")), "{said}");
    // One pair at 400 ms: the last of them waits about 6 s, past the GOAWAY.
    relay.signal(libc::SIGTERM);
    assert!(
        engine_started.elapsed() < Duration::from_millis(4_500),
        "the drain began {:?} after the engine: too late for its GOAWAY at 5 s to find bundles waiting",
        engine_started.elapsed()
    );
    assert_eq!(relay.wait_exit(Duration::from_secs(25)), Some(0));
    let stopped = relay.wait_line("stopped: admitted", Duration::from_secs(1));
    assert!(
        stopped.contains(&format!(
            "admitted {BUNDLES} = delivered {BUNDLES} + rejected 0 + expired 0 + failed 0"
        )),
        "{stopped}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
