//! A reactor thread whose ring fails. `strace`'s fault injection makes the kernel's
//! `io_uring_enter` fail for the real `bundle-relay run`: an error the kernel returns under
//! memory pressure (EAGAIN) is retried and the relay serves on; any other ends the whole
//! process with status 70 and the reason, so its supervisor restarts it (a relay with a dead
//! thread keeps getting a share of new connections that nobody accepts). In-process, the
//! relay's health check names a thread whose ring was taken away.
//!
//! The injected ones need `strace` (Debian's package; `.ci/run` installs it); without it they
//! say so and pass, except under CI.

mod intake_support;
mod process_support;
mod wire_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bundle_relay::runtime::Relay;

/// A config for one thread, one unreachable region and no admin listener, on free ports.
fn config(name: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("bundle-relay-{name}-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        "threads = 1\narena_slots = 64\n[intake]\nrotating = \"127.0.0.1:0\"\nconnections_max = 16\n\
         [[region]]\nname = \"nowhere\"\nhost = \"127.0.0.1\"\nport = 9\n\
         [egress]\naddresses = [\"127.0.0.1\"]\n[admin]\nlisten = \"off\"\n",
    )
    .unwrap();
    path
}

/// `bundle-relay run` under strace, failing `io_uring_enter` calls `when` with `errno`.
fn run_injected(config: &std::path::Path, errno: &str, when: &str) -> Child {
    Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "trace=io_uring_enter",
            "-e",
        ])
        .arg(format!("inject=io_uring_enter:error={errno}:when={when}"))
        .arg(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--config"])
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn output(child: &mut Child) -> (String, String) {
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (out, err)
}

#[test]
fn a_ring_error_no_retry_mends_stops_the_relay_with_status_70_and_the_reason() {
    if !process_support::installed("strace", "-V", "strace") {
        return;
    }
    let cfg = config("ring-fatal");
    let mut child = run_injected(&cfg, "EINVAL", "60");
    let status = wait_exit(&mut child, Duration::from_secs(20));
    if status.is_none() {
        let _ = child.kill();
    }
    let (out, err) = output(&mut child);
    let _ = std::fs::remove_file(&cfg);
    assert_eq!(status.and_then(|s| s.code()), Some(70), "{out}\n{err}");
    assert!(
        err.contains("reactor thread relay-0 stopped: io_uring_enter failed: Invalid argument")
            && err.contains("stopping so the supervisor restarts the relay"),
        "{err}"
    );
}

#[test]
fn ring_errors_of_memory_pressure_are_retried_and_the_relay_serves_on() {
    if !process_support::installed("strace", "-V", "strace") {
        return;
    }
    let cfg = config("ring-retry");
    let mut child = run_injected(&cfg, "EAGAIN", "30..40");
    // The relay says where it listens; it must still answer after the failures.
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr = loop {
        assert!(Instant::now() < deadline, "no intake line: {seen}");
        let mut buf = [0u8; 1024];
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "the relay ended: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        if let Some(line) = seen
            .lines()
            .find(|l| l.starts_with("intake (rotating): http://"))
        {
            let rest = &line["intake (rotating): http://".len()..];
            break rest.split('/').next().unwrap().to_string();
        }
    };
    // Well past the failing calls (about 20 loop iterations a second when idle).
    std::thread::sleep(Duration::from_secs(3));
    let mut c = TcpStream::connect(addr.as_str()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, _, body) = intake_support::read_response(&mut c);
    assert_eq!((status, body.as_str()), (200, "ok"));
    // The relay is strace's child: strace itself does not pass signals on.
    let relay = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
        .unwrap()
        .split_whitespace()
        .next()
        .expect("strace runs the relay")
        .parse::<i32>()
        .unwrap();
    // SAFETY: signalling our own grandchild.
    unsafe { libc::kill(relay, libc::SIGTERM) };
    let status = wait_exit(&mut child, Duration::from_secs(20));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = std::fs::remove_file(&cfg);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{err}");
    assert!(
        err.contains("io_uring_enter: Resource temporarily unavailable (os error 11); retrying"),
        "{err}"
    );
}

/// In-process: a ring taken away from one reactor thread (its fd now names /dev/null) ends
/// that thread, and the relay's health check says which thread and why.
#[test]
fn the_health_check_names_a_thread_whose_ring_failed() {
    let relay = Relay::start({
        let mut s = intake_support::nowhere(&["127.0.0.1", "127.0.0.2"], false);
        s.threads = 2;
        s
    })
    .unwrap();
    assert_eq!(relay.health(), Ok(()));
    // This test binary holds no other ring: the relay's two threads own the only ones.
    let rings: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            (target.to_str()? == "anon_inode:[io_uring]")
                .then(|| e.file_name().to_str()?.parse().ok())?
        })
        .collect();
    assert_eq!(rings.len(), 2, "{rings:?}");
    let null = std::fs::File::open("/dev/null").unwrap();
    // SAFETY: replaces one ring fd with /dev/null; the ring's memory stays mapped.
    assert!(unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), rings[1]) } >= 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    let why = loop {
        if let Err(why) = relay.health() {
            break why;
        }
        assert!(Instant::now() < deadline, "the dead thread went unnoticed");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        why.starts_with("reactor thread relay-") && why.contains("stopped: io_uring_enter failed"),
        "{why}"
    );
    relay.shutdown(Duration::from_millis(100));
}
