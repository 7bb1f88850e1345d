//! What a reactor thread asks of the kernel while it serves clients: nothing but
//! `io_uring_enter`, except what io_uring cannot carry for an accepted connection (its peer's
//! address; `TCP_NODELAY` it inherits from the listener). Clients connect, send one request and close, or ask the
//! relay to close; the relay's shutdowns and closes go to the kernel through the ring with the
//! iteration's other submissions, and the descriptors come back for the next connections.
//!
//! Watched with `strace -f` on the real `bundle-relay run` (Debian's strace; `.ci/run`
//! installs it).

mod process_support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use process_support::{Reaped, free_port, installed};

const CONNECTIONS: usize = 20;

/// One request on a connection of its own; `close`: the request asks the relay to close.
fn one_request(addr: SocketAddr, close: bool) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"sendBundle","params":[["x"]]}"#;
    let connection = if close { "Connection: close\r\n" } else { "" };
    write!(
        c,
        "POST /api/v1/bundles HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n\
         {connection}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = vec![0u8; 4096];
    let n = c.read(&mut answer).unwrap();
    if close {
        // The relay closes after its answer: the client reads to the end.
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
    }
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

/// The system call a strace line (`TID<comm> name(...` or `TID<comm> <... name resumed>`)
/// records, and the thread's name.
fn call_of(line: &str) -> Option<(&str, &str)> {
    let (head, rest) = line.split_once("> ")?;
    let comm = head.split_once('<')?.1;
    let rest = rest.strip_prefix("<... ").unwrap_or(rest);
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    Some((comm, &rest[..end]))
}

#[test]
fn a_reactor_serving_connections_that_come_and_go_calls_only_io_uring_enter() {
    if !installed("strace", "-V", "strace") {
        return;
    }
    let port = free_port();
    let dir = std::env::temp_dir();
    let config = dir.join(format!("bundle-relay-syscalls-{}.toml", std::process::id()));
    let trace = dir.join(format!(
        "bundle-relay-syscalls-{}.strace",
        std::process::id()
    ));
    // One thread, and pairs that connect only for a bundle (none comes: every request here is
    // answered by the intake), so the reactor's only work is the clients'.
    std::fs::write(
        &config,
        format!(
            "threads = 1\narena_slots = 64\n[intake]\nrotating = \"127.0.0.1:{port}\"\n\
             connections_max = 16\n[[region]]\nname = \"nowhere\"\nhost = \"127.0.0.1\"\nport = 9\n\
             [egress]\naddresses = [\"127.0.0.1\"]\nconnect = \"lazy\"\n[admin]\nlisten = \"off\"\n"
        ),
    )
    .unwrap();
    let strace = Command::new("strace")
        .args(["-f", "-Y", "-qq", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut strace = Reaped(strace);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "the relay never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in 0..CONNECTIONS {
        let answer = one_request(addr, i % 2 == 0);
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        assert!(
            answer.contains("\"error\""),
            "a bundle that does not decode: {answer}"
        );
    }
    // The probe connection above and the requests', as strace saw them (it may write a little
    // behind), then a moment for the last close to reach the kernel.
    let lookups = |t: &str| {
        t.lines()
            .filter(|l| call_of(l) == Some(("relay-0", "getpeername")))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while lookups(&std::fs::read_to_string(&trace).unwrap()) < CONNECTIONS + 1 {
        assert!(
            Instant::now() < deadline,
            "strace never saw every connection"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let text = std::fs::read_to_string(&trace).unwrap();
    // From the first accepted connection on: the thread's start-up is not what is judged.
    let window: Vec<&str> = text
        .lines()
        .skip_while(|l| call_of(l) != Some(("relay-0", "getpeername")))
        .collect();
    let relay_pid = {
        let children = std::fs::read_to_string(format!(
            "/proc/{}/task/{}/children",
            strace.0.id(),
            strace.0.id()
        ))
        .unwrap();
        children
            .split_whitespace()
            .next()
            .unwrap()
            .parse::<i32>()
            .unwrap()
    };
    // SAFETY: signalling the relay the strace above started.
    unsafe { libc::kill(relay_pid, libc::SIGINT) };
    let _ = strace.0.wait();
    let _ = std::fs::remove_file(&config);
    let _ = std::fs::remove_file(&trace);

    let mut calls: BTreeMap<&str, usize> = BTreeMap::new();
    let mut peer_fds = Vec::new();
    for line in &window {
        let Some((comm, call)) = call_of(line) else {
            continue;
        };
        if comm != "relay-0" {
            continue;
        }
        *calls.entry(call).or_default() += 1;
        if call == "getpeername"
            && let Some(fd) = line
                .split_once("getpeername(")
                .and_then(|(_, r)| r.split(',').next())
        {
            peer_fds.push(fd.parse::<u32>().unwrap());
        }
    }
    // Our connections, the readiness probe and any the relay's start made to itself.
    let accepted = calls.get("getpeername").copied().unwrap_or(0);
    assert!(
        accepted > CONNECTIONS,
        "one peer lookup per accepted connection: {calls:?}"
    );
    let others: Vec<_> = calls
        .iter()
        .filter(|(c, _)| !matches!(**c, "io_uring_enter" | "getpeername"))
        .collect();
    assert!(
        others.is_empty(),
        "the reactor made system calls io_uring could have carried: {others:?} (all: {calls:?})"
    );
    // Closed through the ring for real: the next connection gets a descriptor freed before it.
    let highest = peer_fds.iter().max().copied().unwrap_or(0);
    assert!(
        highest < 16,
        "descriptors of {CONNECTIONS} connections one after another: {peer_fds:?}"
    );
}
