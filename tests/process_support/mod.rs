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

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
