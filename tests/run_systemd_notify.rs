//! `bundle-relay run` under a service manager, for real: the test plays systemd's side of the
//! notify protocol (a datagram socket named in `NOTIFY_SOCKET`, a period in `WATCHDOG_USEC`),
//! and an engine that accepts the relay's connections and answers their HTTP/2 start, so the
//! pool comes up. It checks what a unit with `Type=notify` and `WatchdogSec=` relies on:
//! STATUS while the pool comes up, READY once it is, RELOADING … READY around a reload with the
//! outcome, WATCHDOG pings, STOPPING with the drain; and that a wedged reactor thread stops the
//! pings (strace delays one `io_uring_enter` of the running binary by seconds).
//!
//! The wedge test needs `strace` (Debian's package; `.ci/run` installs it).

mod h2_support;
mod process_support;

use std::io::Read;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Run {
    dir: PathBuf,
    sock: UnixDatagram,
    config: PathBuf,
}

impl Run {
    /// A scratch folder with the notify socket and a config: one thread, four sources, one
    /// region at `engine`.
    fn new(name: &str, engine: std::net::SocketAddr, sources: &str) -> Run {
        let dir = std::env::temp_dir().join(format!("br-notify-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = UnixDatagram::bind(dir.join("notify")).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let config = dir.join("relay.toml");
        std::fs::write(&config, config_text(engine, sources)).unwrap();
        Run { dir, sock, config }
    }

    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env("NOTIFY_SOCKET", self.dir.join("notify"))
            .env("WATCHDOG_USEC", "1000000")
            .env_remove("WATCHDOG_PID")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// `bundle-relay run` this config.
    fn relay(&self) -> Child {
        self.command(Path::new(env!("CARGO_BIN_EXE_bundle-relay")))
            .args(["run", "--config"])
            .arg(&self.config)
            .spawn()
            .unwrap()
    }

    /// `bundle-relay run` this config under `wrapper` (strace, setpriv) given `args`.
    fn under(&self, wrapper: &str, args: &[&str]) -> Child {
        self.command(Path::new(wrapper))
            .args(args)
            .arg(env!("CARGO_BIN_EXE_bundle-relay"))
            .args(["run", "--config"])
            .arg(&self.config)
            .spawn()
            .unwrap()
    }

    /// `bundle-relay run` this config under strace, every `call` of any of its threads
    /// tampered with as `inject` says (strace's `-e inject=CALL:...`).
    fn strace(&self, call: &str, inject: &str) -> Child {
        let trace = format!("trace={call}");
        let inject = format!("inject={call}:{inject}");
        self.under(
            "strace",
            &["-f", "-qq", "-o", "/dev/null", "-e", &trace, "-e", &inject],
        )
    }

    /// Every message until `until` says it is done, or `limit` passes.
    fn read_until(
        &self,
        log: &mut Vec<(Instant, String)>,
        limit: Duration,
        until: impl Fn(&str) -> bool,
    ) -> bool {
        let deadline = Instant::now() + limit;
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.sock.recv(&mut buf) {
                let m = String::from_utf8_lossy(&buf[..n]).into_owned();
                let done = until(&m);
                log.push((Instant::now(), m));
                if done {
                    return true;
                }
            }
        }
        false
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn config_text(engine: std::net::SocketAddr, sources: &str) -> String {
    format!(
        "threads = 1\npin_threads = false\narena_slots = 64\n\
         [intake]\nrotating = \"127.0.0.1:0\"\nconnections_max = 16\n\
         [[region]]\nname = \"local\"\nhost = \"{}\"\nport = {}\ntls = false\n\
         [egress]\naddresses = [\"{sources}\"]\n[admin]\nlisten = \"off\"\n",
        engine.ip(),
        engine.port()
    )
}

/// The relay strace (`child`) runs: its child (strace passes no signals on, so tests signal
/// the relay itself).
fn traced_relay(child: &Child) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<i32>().ok())
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

fn stderr_of(child: &mut Child) -> String {
    read_all(child.stderr.take())
}

/// Everything left in a child's pipe (empty when it was taken already).
fn read_all(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    if let Some(mut p) = pipe {
        let _ = p.read_to_string(&mut text);
    }
    text
}

fn messages(log: &[(Instant, String)]) -> String {
    log.iter()
        .map(|(_, m)| m.replace('\n', " | "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads `run`'s messages into `log` until READY=1 (20 s at most, or the test fails with what
/// came and the relay's stderr).
fn until_ready(run: &Run, child: &mut Child, log: &mut Vec<(Instant, String)>) {
    let ready = run.read_until(log, Duration::from_secs(20), |m| m.starts_with("READY=1"));
    assert!(ready, "no READY=1:\n{}\n{}", messages(log), {
        let _ = child.kill();
        stderr_of(child)
    });
}

#[test]
fn status_ready_reloading_watchdog_and_stopping_reach_the_manager_in_order() {
    let run = Run::new("order", h2_support::hello_engine(), "127.1.80.0/30");
    let mut child = run.relay();
    let mut log = Vec::new();
    until_ready(&run, &mut child, &mut log);
    let ready_msg = &log.last().unwrap().1;
    assert!(
        ready_msg.contains("STATUS=ready: listening, 4 of 4 pairs up"),
        "{ready_msg}"
    );
    let before: Vec<&String> = log[..log.len() - 1].iter().map(|(_, m)| m).collect();
    assert!(
        before
            .iter()
            .all(|m| m.starts_with("STATUS=") || m == &"WATCHDOG=1"),
        "only STATUS and pings before READY:\n{}",
        messages(&log)
    );
    let statuses: Vec<&&String> = before.iter().filter(|m| m.starts_with("STATUS=")).collect();
    assert!(
        !statuses.is_empty(),
        "no STATUS while the pool came up:\n{}",
        messages(&log)
    );
    assert!(
        statuses
            .iter()
            .all(|m| m.contains(" of 4 pairs up (ready at 4, 85%)")),
        "{}",
        messages(&log)
    );

    // Pings at half the period while every thread moves.
    let mark = log.len();
    run.read_until(&mut log, Duration::from_millis(1_600), |_| false);
    let pings = log[mark..]
        .iter()
        .filter(|(_, m)| m == "WATCHDOG=1")
        .count();
    assert!(pings >= 2, "pings in 1.6 s: {pings}\n{}", messages(&log));

    // A good reload, then a refused one: RELOADING=1, then READY=1 with the outcome.
    signal(&child, libc::SIGHUP);
    let mark = log.len();
    assert!(run.read_until(&mut log, Duration::from_secs(5), |m| {
        m.starts_with("READY=1")
    }));
    let reload: Vec<&str> = log[mark..]
        .iter()
        .map(|(_, m)| m.as_str())
        .filter(|m| *m != "WATCHDOG=1")
        .collect();
    assert!(
        reload[0].starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reload:?}"
    );
    assert_eq!(
        reload[1], "READY=1\nSTATUS=config reloaded: generation 2",
        "{reload:?}"
    );
    let good = std::fs::read_to_string(&run.config).unwrap();
    std::fs::write(&run.config, "threads = \"many\"\n").unwrap();
    signal(&child, libc::SIGHUP);
    let mark = log.len();
    assert!(run.read_until(&mut log, Duration::from_secs(5), |m| {
        m.starts_with("READY=1")
    }));
    let refused = &log.last().unwrap().1;
    assert!(
        log[mark..]
            .iter()
            .any(|(_, m)| m.starts_with("RELOADING=1")),
        "{}",
        messages(&log)
    );
    assert!(
        refused.starts_with("READY=1\nSTATUS=config reload refused, generation 2 kept: ")
            && refused.contains("threads"),
        "{refused}"
    );
    // A reload is held to the host as a start is: an egress address that is not this host's
    // would fail the next start (and its pairs every connect), so it is refused now.
    std::fs::write(
        &run.config,
        good.replace("\"127.1.80.0/30\"", "\"127.1.80.0/30\", \"192.0.2.9\""),
    )
    .unwrap();
    signal(&child, libc::SIGHUP);
    assert!(run.read_until(&mut log, Duration::from_secs(5), |m| {
        m.starts_with("READY=1") && m.contains("192.0.2.9")
    }));
    let refused = &log.last().unwrap().1;
    assert!(
        refused.starts_with("READY=1\nSTATUS=config reload refused, generation 2 kept: ")
            && refused.contains("1 of 1 new egress addresses are not local: 192.0.2.9"),
        "{refused}"
    );
    // The totals said every 10 s keep the refusal in front: `systemctl status` still shows
    // that the running config is not the file's.
    assert!(
        run.read_until(&mut log, Duration::from_secs(25), |m| {
            m.starts_with("STATUS=") && m.contains("admitted")
        }),
        "{}",
        messages(&log)
    );
    let totals = &log.last().unwrap().1;
    assert!(
        totals.starts_with("STATUS=config reload refused, generation 2 kept: ")
            && totals.contains("192.0.2.9")
            && totals.contains("(as root); admitted "),
        "{totals}"
    );

    signal(&child, libc::SIGTERM);
    let mark = log.len();
    assert!(run.read_until(&mut log, Duration::from_secs(5), |m| {
        m.starts_with("STOPPING=1")
    }));
    let stopping = &log.last().unwrap().1;
    assert!(
        stopping.starts_with(&format!(
            "STOPPING=1\nEXTEND_TIMEOUT_USEC={}\nSTATUS=stopping: no new connections; draining 0 bundles",
            (5_000 + bundle_relay::notify::STOP_EXIT_MARGIN_MS) * 1_000
        )),
        "{stopping}"
    );
    assert!(
        log[mark..log.len() - 1]
            .iter()
            .all(|(_, m)| m == "WATCHDOG=1"),
        "{}",
        messages(&log)
    );
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)), Some(0));
    // The first reload found the file as it runs, and said so.
    let out = read_all(child.stdout.take());
    assert!(
        out.contains(
            "config reloaded: generation 2\n  no changes: what was read is what already runs\n"
        ),
        "{out}"
    );
}

/// A stop asks the manager for the time it takes, past the unit's `TimeoutStopSec=15`:
/// each STOPPING=1 carries EXTEND_TIMEOUT_USEC for what is left of the unready spell and the
/// drain, plus the exit's margin, so a `--drain-ms` longer than the unit's stop is not
/// SIGKILLed with bundles it answered still in flight.
#[test]
fn a_stop_asks_the_manager_for_its_unready_spell_and_drain_past_the_units_stop_timeout() {
    let run = Run::new("extend", h2_support::hello_engine(), "127.1.80.8/30");
    let mut child = run
        .command(Path::new(env!("CARGO_BIN_EXE_bundle-relay")))
        .args([
            "run",
            "--unready-ms",
            "300",
            "--drain-ms",
            "20000",
            "--config",
        ])
        .arg(&run.config)
        .spawn()
        .unwrap();
    let mut log = Vec::new();
    until_ready(&run, &mut child, &mut log);
    signal(&child, libc::SIGTERM);
    let mut stops = Vec::new();
    while stops.len() < 2
        && run.read_until(&mut log, Duration::from_secs(5), |m| {
            m.starts_with("STOPPING=1")
        })
    {
        stops.push(log.last().unwrap().1.clone());
    }
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert_eq!(status, Some(0), "{}", stderr_of(&mut child));
    let margin_ms = bundle_relay::notify::STOP_EXIT_MARGIN_MS;
    assert_eq!(stops.len(), 2, "{}", messages(&log));
    assert!(
        stops[0].starts_with(&format!(
            "STOPPING=1\nEXTEND_TIMEOUT_USEC={}\nSTATUS=stopping: /ping answers 503",
            (300 + 20_000 + margin_ms) * 1_000
        )),
        "{}",
        stops[0]
    );
    assert!(
        stops[1].starts_with(&format!(
            "STOPPING=1\nEXTEND_TIMEOUT_USEC={}\nSTATUS=stopping: no new connections",
            (20_000 + margin_ms) * 1_000
        )),
        "{}",
        stops[1]
    );
}

#[test]
fn a_wedged_reactor_thread_stops_the_watchdog_pings_until_it_moves_again() {
    if !process_support::installed("strace", "-V", "strace") {
        return;
    }
    let run = Run::new("wedge", h2_support::hello_engine(), "127.1.81.0/30");
    // The reactor's 120th io_uring_enter (a few seconds in: an idle loop enters every 50 ms)
    // sleeps 3 s before entering the kernel: its thread makes no progress meanwhile.
    let mut child = run.strace("io_uring_enter", "delay_enter=3000000:when=120");
    let mut log = Vec::new();
    run.read_until(&mut log, Duration::from_secs(14), |_| false);
    let relay_pid = traced_relay(&child);
    if let Some(pid) = relay_pid {
        // SAFETY: signalling our own grandchild (strace does not pass signals on).
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let status = wait_exit(&mut child, Duration::from_secs(10));
    let err = stderr_of(&mut child);
    let pings: Vec<Instant> = log
        .iter()
        .filter(|(_, m)| m == "WATCHDOG=1")
        .map(|(t, _)| *t)
        .collect();
    let gaps: Vec<u128> = pings
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_millis())
        .collect();
    let longest = gaps.iter().copied().max().unwrap_or(0);
    assert!(
        longest >= 2_000,
        "pings kept coming while the thread was wedged: gaps {gaps:?} ms\n{err}"
    );
    let after = gaps.iter().rposition(|&g| g == longest).unwrap();
    assert!(
        gaps[after + 1..].len() >= 2,
        "pings resumed once the thread moved: gaps {gaps:?} ms\n{err}"
    );
    assert!(
        err.contains(
            "watchdog: reactor thread relay-0 made no progress in 500 ms; withholding the ping"
        ),
        "{err}"
    );
    assert!(
        log.iter()
            .any(|(_, m)| m == "STATUS=stalled: reactor thread relay-0"),
        "{}",
        messages(&log)
    );
    assert_eq!(status, Some(0), "{err}");
}

/// The scheduling policy of thread `tid` (field 41 of its `stat`).
fn policy_of(tid: u32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    // Fields from 3 (state) on; the policy is field 41.
    after_comm.split(' ').nth(41 - 3).unwrap().parse().unwrap()
}

/// As the units run it, with no capabilities: a reload leaves the thread that supervises the
/// relay (signals, readiness, the watchdog pings) at its own scheduling policy. Building the
/// reloaded config at idle priority must not cost that thread its way back, which without
/// CAP_SYS_NICE the kernel refuses.
#[test]
fn a_reload_without_privileges_leaves_the_supervising_thread_at_its_own_priority() {
    let run = Run::new("idle", h2_support::hello_engine(), "127.1.82.0/30");
    let mut child = run.under("setpriv", &["--inh-caps=-all", "--bounding-set=-all", "--"]);
    let mut log = Vec::new();
    let ready = run.read_until(&mut log, Duration::from_secs(20), |m| {
        m.starts_with("READY=1")
    });
    let before = policy_of(child.id());
    signal(&child, libc::SIGHUP);
    let reloaded = run.read_until(&mut log, Duration::from_secs(10), |m| {
        m.starts_with("READY=1")
    });
    let after = policy_of(child.id());
    signal(&child, libc::SIGTERM);
    let status = wait_exit(&mut child, Duration::from_secs(10));
    let err = stderr_of(&mut child);
    let _ = std::fs::remove_dir_all(&run.dir);
    assert!(ready && reloaded, "{}\n{err}", messages(&log));
    assert_eq!(before, libc::SCHED_OTHER, "{err}");
    assert_eq!(after, libc::SCHED_OTHER, "SCHED_IDLE is 5\n{err}");
    assert_eq!(status, Some(0), "{err}");
}

/// A reload is built beside the supervision loop, not in it: one that takes seconds (its
/// thread held 3 s by strace, as a reload starved of CPU on a saturated host is) leaves the
/// watchdog pinged, so systemd does not kill a healthy relay; a SIGHUP meanwhile is read once
/// it is reported; and a stop asked meanwhile stops the relay at once instead of after the
/// reload.
#[test]
fn a_slow_reload_keeps_the_watchdog_pinged_and_does_not_hold_up_a_stop() {
    if !process_support::installed("strace", "-V", "strace") {
        eprintln!("skipped: strace is not installed");
        return;
    }
    let run = Run::new("slow-reload", h2_support::hello_engine(), "127.1.83.0/30");
    // Only a reload's own thread lowers its scheduling policy: that call returns 3 s late.
    let mut child = run.strace("sched_setscheduler", "delay_exit=3000000");
    let mut log = Vec::new();
    let ready = run.read_until(&mut log, Duration::from_secs(20), |m| {
        m.starts_with("READY=1")
    });
    let relay_pid = traced_relay(&child);
    let (Some(pid), true) = (relay_pid, ready) else {
        let _ = child.kill();
        panic!("not ready:\n{}\n{}", messages(&log), stderr_of(&mut child));
    };
    // SAFETY: signalling our own grandchild (strace does not pass signals on).
    let send = |sig| unsafe { libc::kill(pid, sig) };
    send(libc::SIGHUP);
    let mark = log.len();
    run.read_until(&mut log, Duration::from_millis(1_000), |_| false);
    // A second SIGHUP while the first is built: read once the first is reported.
    send(libc::SIGHUP);
    run.read_until(&mut log, Duration::from_millis(1_000), |_| false);
    let during: Vec<String> = log[mark..].iter().map(|(_, m)| m.clone()).collect();
    let mark = log.len();
    let first = run.read_until(&mut log, Duration::from_secs(3), |m| {
        m.starts_with("READY=1")
    });
    let second = run.read_until(&mut log, Duration::from_secs(1), |m| {
        m.starts_with("RELOADING=1")
    });
    let after: Vec<String> = log[mark..].iter().map(|(_, m)| m.clone()).collect();
    send(libc::SIGTERM);
    let asked = Instant::now();
    let stopping = run.read_until(&mut log, Duration::from_secs(5), |m| {
        m.starts_with("STOPPING=1")
    });
    let took = asked.elapsed();
    let status = wait_exit(&mut child, Duration::from_secs(10));
    let err = stderr_of(&mut child);
    assert!(
        during.first().is_some_and(|m| m.starts_with("RELOADING=1")),
        "{during:?}\n{err}"
    );
    assert!(
        !during.iter().any(|m| m.starts_with("READY=1")),
        "the reload was held: {during:?}"
    );
    let pings = during.iter().filter(|m| *m == "WATCHDOG=1").count();
    assert!(
        pings >= 3,
        "pings at half the 1 s period while the reload was built: {during:?}\n{err}"
    );
    assert!(
        first && second,
        "the first reload reported, then the second SIGHUP's begun: {after:?}\n{err}"
    );
    assert!(stopping, "{}\n{err}", messages(&log));
    assert!(
        took < Duration::from_millis(1_000),
        "the stop waited {took:?} for the reload\n{err}"
    );
    assert_eq!(status, Some(0), "{err}");
}

/// A relay its unit runs, taken over from an operator's shell (`run --takeover PID` with no
/// `NOTIFY_SOCKET`): the new process would serve outside the unit (no watchdog, no restart,
/// not stopped by `systemctl stop`) while the unit, its main process gone, ends. It is refused
/// before anything starts, naming the way that keeps the unit: SIGUSR2 through systemctl. The
/// relay taken over serves on.
#[test]
fn a_takeover_by_hand_of_a_relay_its_unit_runs_is_refused_naming_the_units_way() {
    let run = Run::new("hand-of-unit", h2_support::hello_engine(), "127.1.80.12/30");
    let mut old = run.relay();
    let mut log = Vec::new();
    until_ready(&run, &mut old, &mut log);
    let mut new = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--takeover", &old.id().to_string(), "--config"])
        .arg(&run.config)
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut new, Duration::from_secs(10));
    let err = stderr_of(&mut new);
    assert_eq!(status, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--takeover {}: that relay runs under a service manager (NOTIFY_SOCKET) and this \
             process does not",
            old.id()
        )) && err.contains("systemctl kill --signal=SIGUSR2 --kill-whom=main"),
        "{err}"
    );
    assert_eq!(old.try_wait().unwrap(), None, "the old relay serves on");
    signal(&old, libc::SIGTERM);
    assert_eq!(wait_exit(&mut old, Duration::from_secs(10)), Some(0));
}

/// An engine on an ephemeral loopback port whose connections get their HTTP/2 start only once
/// `gate` opens: until then the relay's pairs do not come up.
fn gated_engine(gate: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::net::SocketAddr {
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let gate = gate.clone();
            std::thread::spawn(move || {
                while !gate.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = c.write_all(&h2_support::engine_hello());
                let mut buf = [0u8; 4096];
                while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// Lines so far holding `pat`, waited for until there are `n` (20 s at most).
fn wait_lines(lines: &std::sync::Mutex<Vec<String>>, pat: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found: Vec<String> = lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(pat))
            .cloned()
            .collect();
        if found.len() >= n {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} lines with {pat:?}:\n{}",
            found.len(),
            lines.lock().unwrap().join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pid an "upgrade: started … as pid N; …" line names.
fn started_pid(line: &str) -> i32 {
    line.split("as pid ")
        .nth(1)
        .and_then(|r| r.split(';').next()?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"))
}

/// A second package upgrade while the first one's successor is still taking over: its SIGUSR2
/// reaches the old relay, which no longer serves for long. It is passed on to the successor
/// once that one has taken over, and the successor starts the binary on disk then; dropped,
/// the unit would run the first upgrade's binary until the next upgrade.
#[test]
fn an_upgrade_asked_again_while_the_successor_takes_over_is_carried_out_by_the_successor() {
    use process_support::{collect_lines, wait_line};
    let gate = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let run = Run::new(
        "upgrade-again",
        gated_engine(gate.clone()),
        "127.1.80.20/30",
    );
    let mut old = run.relay();
    let lines = collect_lines(&mut old);
    let mut log = Vec::new();
    until_ready(&run, &mut old, &mut log);
    // New connections to the engine stall from here: the successor cannot come up yet.
    gate.store(false, std::sync::atomic::Ordering::Relaxed);
    signal(&old, libc::SIGUSR2);
    let first = started_pid(&wait_line(
        &lines,
        "upgrade: started",
        Duration::from_secs(5),
    ));
    signal(&old, libc::SIGUSR2);
    wait_line(
        &lines,
        &format!("upgrade: pid {first} is already taking over; it is asked to upgrade in turn"),
        Duration::from_secs(5),
    );
    gate.store(true, std::sync::atomic::Ordering::Relaxed);
    wait_line(
        &lines,
        &format!("passing SIGUSR2 on to pid {first}"),
        Duration::from_secs(20),
    );
    let old_status = wait_exit(&mut old, Duration::from_secs(15));
    let started = wait_lines(&lines, "upgrade: started", 2);
    let second = started_pid(&started[1]);
    assert_ne!(second, first);
    // The first successor is taken over by the second in turn, and drains.
    let taken = wait_lines(&lines, "taken over: closing the listeners", 2);
    assert_eq!(taken.len(), 2, "{taken:?}");
    wait_lines(&lines, "stopped: admitted", 2);
    // SAFETY: a signal to the relay serving now: it has said no "stopped" line, so the pid
    // is still its own.
    unsafe { libc::kill(second, libc::SIGTERM) };
    wait_lines(&lines, "stopped: admitted", 3);
    assert_eq!(old_status, Some(0));
}

/// SIGUSR2 (a package upgrade's postinst) reaching a relay still starting (its unit
/// `activating`) is kept until the relay is ready, then acted on: dropped, the relay would
/// run the old binary on until the next upgrade.
#[test]
fn an_upgrade_asked_while_the_relay_starts_is_carried_out_once_it_is_ready() {
    use process_support::{collect_lines, wait_line};
    let gate = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let run = Run::new(
        "upgrade-starting",
        gated_engine(gate.clone()),
        "127.1.80.16/30",
    );
    let mut old = run.relay();
    let lines = collect_lines(&mut old);
    let mut log = Vec::new();
    let starting = run.read_until(&mut log, Duration::from_secs(20), |m| {
        m.contains("of 4 pairs up")
    });
    assert!(starting, "{}", messages(&log));
    signal(&old, libc::SIGUSR2);
    wait_line(
        &lines,
        "upgrade: deferred until this relay is ready",
        Duration::from_secs(5),
    );
    gate.store(true, std::sync::atomic::Ordering::Relaxed);
    until_ready(&run, &mut old, &mut log);
    let started = wait_line(&lines, "upgrade: started", Duration::from_secs(5));
    let successor: Option<i32> = started
        .split("as pid ")
        .nth(1)
        .and_then(|r| r.split(';').next()?.trim().parse().ok());
    // Held by a pidfd at once: the number may name another process once it is reaped.
    // SAFETY: pidfd_open takes a pid and flags and returns a descriptor this test owns.
    let pidfd = successor.map(|pid| unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) });
    // The old one stopped first: the successor stops too rather than serve in its place.
    signal(&old, libc::SIGTERM);
    let status = wait_exit(&mut old, Duration::from_secs(15));
    if let Some(fd) = pidfd.filter(|&fd| fd >= 0) {
        // SAFETY: a signal through the pidfd opened above (a no-op for a process that
        // ended), then its close.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
            libc::close(fd as i32);
        }
    }
    assert!(successor.is_some(), "{started}");
    assert_eq!(status, Some(0));
}
