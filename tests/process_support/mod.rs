//! What the tests that run the relay as a process share: the bench tools built beside it, a
//! real server or tool from Debian's packages, a free port, a one-shot HTTP GET and a number
//! out of a JSON text.

#![allow(dead_code)]

mod installed;
mod relay_proc;

#[allow(unused_imports)] // each test binary uses its own part
pub use installed::installed;
#[allow(unused_imports)] // each test binary uses its own part
pub use relay_proc::{Reaped, RelayProc, collect_lines, wait_line};

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A bench tool (`bench-engine`, `bench-load`) built beside the relay's binary.
pub fn tool(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .parent()
        .unwrap()
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: cargo build -p bundle-relay-bench --bin bench-engine --bin bench-load",
        p.display()
    );
    p
}

/// A loopback port nothing listens on now, below the kernel's ephemeral range, so that no
/// connection another test (or a relay, a load tool) opens meanwhile can take it before the
/// process it is meant for binds it; and a different one at each call within a test binary,
/// whose tests run at once. (A port the kernel picks, from that range, was once a load
/// connection's own before a relay could listen on it.)
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = u32::from(ephemeral_ports_start());
    // Ports from 10,000 up to the range's start; from the process id on, so the binaries
    // that ran before this one did not just use them.
    let span = low.saturating_sub(10_000);
    if span < 1_000 {
        return TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
    }
    let start = std::process::id().wrapping_mul(7_919);
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 10_000 + start.wrapping_add(n) % span;
        if TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
    panic!("no free loopback port from 10000 to {low}");
}

/// The first port of the kernel's ephemeral range (`ip_local_port_range`), from which it
/// picks the local ports of outgoing connections.
pub fn ephemeral_ports_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// `GET path` on a connection of its own, the whole answer.
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    c.read_to_string(&mut out)?;
    Ok(out)
}

/// The number after `"key":` in `text`.
pub fn json_u64(text: &str, key: &str) -> u64 {
    let at = text
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} in {text}"));
    text[at + key.len() + 3..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}
