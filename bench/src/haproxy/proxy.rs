//! HAProxy as a process of its own (`haproxy -db -f FILE`, Debian's package), configured from
//! the shipped `deploy/haproxy/haproxy.cfg` on this step's ports (`template.rs`); ready once
//! its front answers `GET /ping` with 200 (a relay's /ping, through it); its stats socket read
//! as `show stat` for each relay's request count. Dropping it kills the process.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::template::haproxy_config;

/// The shipped config, built into bench-demo so a run needs no checkout beside it.
const SHIPPED: &str = include_str!("../../../deploy/haproxy/haproxy.cfg");
/// How long HAProxy may take to start and see a relay up: its checks run every 500 ms and
/// need two in a row (`rise 2`).
const READY_MAX: Duration = Duration::from_secs(10);
const READY_POLL: Duration = Duration::from_millis(50);
/// The backend bots without a key or uuid land in (the load sends neither).
pub(crate) const BACKEND: &str = "relays";

/// One relay as HAProxy's stats saw it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerStat {
    pub name: String,
    /// HTTP requests HAProxy sent it (`req_tot`, else `stot`).
    pub requests: u64,
    pub status: String,
}

/// A running HAProxy.
pub(crate) struct Proxy {
    child: Child,
    socket: PathBuf,
    pub(crate) front: SocketAddr,
}

impl Proxy {
    /// Writes the config into `dir` and starts `binary` on it; returns once it serves.
    pub(crate) fn start(
        binary: &Path,
        dir: &Path,
        front: SocketAddr,
        relays: &[SocketAddr],
    ) -> Result<Proxy, String> {
        let socket = dir.join("haproxy.sock");
        let text = haproxy_config(SHIPPED, front, &socket.to_string_lossy(), relays)?;
        let cfg = dir.join("haproxy.cfg");
        std::fs::write(&cfg, text).map_err(|e| format!("{}: {e}", cfg.display()))?;
        let child = Command::new(binary)
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                format!(
                    "starting {}: {e} (Debian: apt-get install haproxy)",
                    binary.display()
                )
            })?;
        let mut proxy = Proxy {
            child,
            socket,
            front,
        };
        proxy.wait_serving()?;
        Ok(proxy)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_serving(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_MAX;
        loop {
            if ping(self.front).is_ok_and(|r| r.starts_with("HTTP/1.1 200")) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("haproxy exited with {status} at start"));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "haproxy did not answer /ping with 200 on {} within {} s",
                    self.front,
                    READY_MAX.as_secs()
                ));
            }
            std::thread::sleep(READY_POLL);
        }
    }

    /// Each relay of [`BACKEND`], in config order, from `show stat`.
    pub(crate) fn servers(&self) -> Result<Vec<ServerStat>, String> {
        let mut s = std::os::unix::net::UnixStream::connect(&self.socket)
            .map_err(|e| format!("{}: {e}", self.socket.display()))?;
        s.write_all(b"show stat\n")
            .map_err(|e| format!("haproxy stats socket: {e}"))?;
        let mut csv = String::new();
        s.read_to_string(&mut csv)
            .map_err(|e| format!("haproxy stats socket: {e}"))?;
        parse_servers(&csv, BACKEND)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /ping` on a connection of its own, the whole answer.
fn ping(addr: SocketAddr) -> std::io::Result<String> {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut out = String::new();
    c.read_to_string(&mut out)?;
    Ok(out)
}

/// The server rows of `backend` in `show stat` CSV (header `# pxname,svname,…`).
fn parse_servers(csv: &str, backend: &str) -> Result<Vec<ServerStat>, String> {
    let header: Vec<&str> = csv
        .lines()
        .next()
        .ok_or("haproxy's show stat was empty")?
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let status = col("status").ok_or("show stat without a status column")?;
    let counts = [col("req_tot"), col("stot")];
    let rows = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>());
    Ok(rows
        .filter(|f| f.len() > status && f[0] == backend && f[1] != "BACKEND" && f[1] != "FRONTEND")
        .map(|f| ServerStat {
            name: f[1].to_string(),
            // req_tot is empty where a version does not count requests per server.
            requests: counts
                .iter()
                .flatten()
                .find_map(|&c| f.get(c).and_then(|v| v.parse().ok()))
                .unwrap_or(0),
            status: f[status].to_string(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_stat_yields_each_relay_with_its_requests_and_status() {
        let csv = "# pxname,svname,qcur,stot,status,req_tot\n\
                   jito,FRONTEND,0,9,OPEN,20\n\
                   relays,relay1,0,2,UP,11\n\
                   relays,relay2,0,3,UP,9\n\
                   relays,BACKEND,0,5,UP,20\n\
                   by_key,relay1,0,0,UP,\n";
        let s = parse_servers(csv, "relays").unwrap();
        let got: Vec<(&str, u64, &str)> = s
            .iter()
            .map(|s| (s.name.as_str(), s.requests, s.status.as_str()))
            .collect();
        assert_eq!(got, [("relay1", 11, "UP"), ("relay2", 9, "UP")]);
        let by_key = parse_servers(csv, "by_key").unwrap();
        assert_eq!(by_key[0].requests, 0, "an empty req_tot falls back to stot");
    }
}
