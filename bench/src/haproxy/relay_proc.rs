//! One bundle-relay as operators run it: the `bundle-relay` binary, `run --config FILE`
//! (every region at the step's engine, the whole egress list, admin off) and, behind HAProxy,
//! `--egress-slice K/N`. Started, it is ready once it says all its pairs are up; stopped
//! (SIGTERM) it drains, exits, and its last line is its accounting, read back as [`Totals`].
//! Never left behind: dropping it kills the process.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use bundle_relay::metrics::accounting::Totals;

/// How long a relay may take from its start to every pair up: its pool is a few thousand
/// loopback connections at most (well under a second); this leaves room for a busy machine.
const READY_MAX: Duration = Duration::from_secs(30);
/// How long a stopped relay may take to drain and exit: its drain below plus closing its pool.
const EXIT_MAX: Duration = Duration::from_secs(15);
/// What a stopping relay gives its bundles in flight; the load has ended, so a few ms' worth.
const DRAIN_MS: u64 = 2_000;

/// What one relay process runs with.
pub(crate) struct RelayPlan<'a> {
    pub(crate) binary: &'a Path,
    pub(crate) dir: &'a Path,
    /// 1-based, names its config file and its slice.
    pub(crate) index: usize,
    /// `Some(n)`: `--egress-slice index/n`, behind HAProxy (trusted as a proxy).
    pub(crate) slice_of: Option<usize>,
    pub(crate) intake: SocketAddr,
    pub(crate) regions: &'a [(String, SocketAddr)],
    pub(crate) egress: &'a [IpAddr],
    pub(crate) interval_ms: u64,
    pub(crate) threads: usize,
    pub(crate) in_flight_max: u32,
}

/// A running relay process and the lines it prints.
pub(crate) struct RelayProc {
    child: Child,
    lines: Receiver<String>,
    pub(crate) intake: SocketAddr,
}

impl RelayPlan<'_> {
    /// The TOML `run` reads: the same for every relay of a step but its intake port.
    fn config_text(&self) -> String {
        use std::fmt::Write as _;
        let mut t = format!(
            "threads = {}\npin_threads = false\narena_slots = {}\n[intake]\nrotating = \"{}\"\n",
            self.threads.max(1),
            self.in_flight_max,
            self.intake
        );
        if self.slice_of.is_some() {
            // Behind HAProxy, as deployed: the client is the one it forwards for.
            t.push_str("trusted_proxies = [\"127.0.0.1\"]\n");
        }
        for (name, addr) in self.regions {
            let _ = write!(
                t,
                "[[region]]\nname = \"{name}\"\nhost = \"{}\"\nport = {}\ntls = false\n\
                 interval_ms = {}\n",
                addr.ip(),
                addr.port(),
                self.interval_ms
            );
        }
        let addrs: Vec<String> = self.egress.iter().map(|a| format!("\"{a}\"")).collect();
        let _ = write!(
            t,
            "[egress]\naddresses = [{}]\n[admin]\nlisten = \"off\"\n",
            addrs.join(", ")
        );
        t
    }

    /// Writes its config, starts it, and returns once all of its pairs are up.
    pub(crate) fn start(&self) -> Result<RelayProc, String> {
        let path: PathBuf = self.dir.join(format!("relay{}.toml", self.index));
        std::fs::write(&path, self.config_text())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut cmd = Command::new(self.binary);
        cmd.args(["run", "--config"])
            .arg(&path)
            .args(["--ready-pairs-percent", "100"])
            .args(["--drain-ms", &DRAIN_MS.to_string()]);
        if let Some(n) = self.slice_of {
            cmd.args(["--egress-slice", &format!("{}/{n}", self.index)]);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                format!(
                    "starting {}: {e} (build it: cargo build --release --bin bundle-relay)",
                    self.binary.display()
                )
            })?;
        let out = child.stdout.take().expect("piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("haproxy-relay-out".into())
            .spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| format!("spawning a relay output reader: {e}"))?;
        let mut relay = RelayProc {
            child,
            lines,
            intake: self.intake,
        };
        relay.wait_line("ready: listening", READY_MAX)?;
        Ok(relay)
    }
}

impl RelayProc {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The first line from now on that holds `pat`.
    fn wait_line(&mut self, pat: &str, limit: Duration) -> Result<String, String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(pat) => return Ok(l),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "relay process {} printed no `{pat}` within {} s",
                        self.pid(),
                        limit.as_secs()
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!(
                        "relay process {} ended before printing `{pat}`",
                        self.pid()
                    ));
                }
            }
        }
    }

    /// SIGTERM; waits for it to drain and exit; its accounting from its `stopped:` line.
    pub(crate) fn stop(mut self) -> Result<Totals, String> {
        // SAFETY: signalling our own child, which has not been waited for.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let line = self.wait_line("stopped: admitted ", EXIT_MAX)?;
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for relay process {}: {e}", self.pid()))?;
        let totals = parse_stopped(&line)
            .ok_or_else(|| format!("relay process {} ended with `{line}`", self.pid()))?;
        if !status.success() {
            return Err(format!(
                "relay process {} exited with {status}: {line}",
                self.pid()
            ));
        }
        Ok(totals)
    }
}

impl Drop for RelayProc {
    fn drop(&mut self) {
        // A step that failed part-way leaves no relay running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `stopped: admitted A = delivered D + rejected R + expired E + failed F + in flight I`.
fn parse_stopped(line: &str) -> Option<Totals> {
    let figure = |name: &str| -> Option<u64> {
        let at = line.find(&format!("{name} "))? + name.len() + 1;
        line[at..].split_whitespace().next()?.parse().ok()
    };
    Some(Totals {
        admitted: figure("admitted")?,
        delivered: figure("delivered")?,
        rejected: figure("rejected")?,
        expired: figure("expired")?,
        failed: figure("failed")?,
        in_flight: figure("in flight")?,
        ..Totals::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_line_reads_back_as_the_relay_accounting() {
        let t = parse_stopped(
            "stopped: admitted 10 = delivered 6 + rejected 1 + expired 1 + failed 1 + in flight 1",
        )
        .unwrap();
        assert_eq!(
            (
                t.admitted,
                t.delivered,
                t.rejected,
                t.expired,
                t.failed,
                t.in_flight
            ),
            (10, 6, 1, 1, 1, 1)
        );
        assert!(t.identity_holds());
        assert_eq!(parse_stopped("stopped: admitted 10"), None);
    }
}
