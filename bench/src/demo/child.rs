//! The relay as a process of its own, both sides of its protocol. `bench-demo --serve-relay KIND
//! --spec JSON` ([`serve_relay`]) starts the relay and writes one JSON [`RelayLine`] per line on
//! stdout: `ready` with its addresses once it listens, `stats` for each `stats` line read on
//! stdin, and `final` with its counters after shutdown, which follows stdin's end or
//! SIGTERM/SIGINT. [`RelayChild`] is the demo's side: it spawns the process, reads and writes
//! those lines, and never leaves the process behind.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bundle_relay::admin::{Admin, AdminHandle};
use serde::{Deserialize, Serialize};

use super::RelayKind;
use super::host::{RelayThread, start_relay};
use super::relay::{RelaySetup, RelayStats, RunningRelay};

/// The hidden first argument that makes bench-demo serve one relay as a child process.
pub const SERVE_RELAY_ARG: &str = "--serve-relay";
/// How long a relay process may take to exit after its stdin closes before it is killed: its
/// drain plus closing thousands of connections.
const RELAY_EXIT_MAX: Duration = Duration::from_secs(15);
/// How often the serving loop checks for a stop signal between stdin lines.
const SIGNAL_POLL: Duration = Duration::from_millis(50);
/// How often the demo checks whether a stopping relay process has exited.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// One line a relay process writes on its stdout.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelayLine {
    /// Started: where it listens.
    Ready {
        rotating: SocketAddr,
        pinned: Vec<SocketAddr>,
        /// The admin listener, when the setup asked for one.
        #[serde(default)]
        admin: Option<SocketAddr>,
    },
    /// The answer to a `stats` line on stdin.
    Stats(RelayStats),
    /// After stdin closed or SIGTERM/SIGINT: the counters after shutdown; the process then exits 0.
    Final(RelayStats),
    /// It could not start.
    Error(String),
}

static SERVE_STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn serve_stop_on_signal(_: libc::c_int) {
    SERVE_STOP.store(true, Ordering::Relaxed);
}

/// SIGTERM and SIGINT end the serving loop like the end of stdin.
fn stop_on_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let handler = serve_stop_on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
}

/// The relay-process side (`bench-demo --serve-relay KIND --spec JSON`): starts the relay,
/// writes [`RelayLine::Ready`], answers each `stats` line on `input` with [`RelayLine::Stats`],
/// and on end of input or SIGTERM/SIGINT shuts down and writes [`RelayLine::Final`].
pub fn serve_relay(
    kind: RelayKind,
    setup_json: &str,
    input: impl BufRead + Send + 'static,
    out: &mut impl Write,
) -> Result<(), String> {
    let mut emit = |line: &RelayLine| -> Result<(), String> {
        let text = serde_json::to_string(line).map_err(|e| e.to_string())?;
        writeln!(out, "{text}")
            .and_then(|_| out.flush())
            .map_err(|e| format!("writing to the demo: {e}"))
    };
    let started = serde_json::from_str::<RelaySetup>(setup_json)
        .map_err(|e| format!("--spec: {e}"))
        .and_then(|setup| {
            crate::fds::raise_nofile();
            stop_on_signals();
            if !setup.cpus.is_empty() {
                // Before the relay's threads start: they inherit the set and pin within it.
                crate::affinity::confine(&setup.cpus)
                    .map_err(|e| format!("running on cores {:?}: {e}", setup.cpus))?;
            }
            let want_admin = setup.admin;
            start_relay(kind, setup).map(|relay| (relay, want_admin))
        });
    let (relay, want_admin) = match started {
        Ok(r) => r,
        Err(e) => {
            emit(&RelayLine::Error(e.clone()))?;
            return Err(e);
        }
    };
    let admin = match want_admin {
        true => start_admin(&relay)?,
        false => None,
    };
    emit(&RelayLine::Ready {
        rotating: relay.handle.rotating_addr(),
        pinned: relay.handle.pinned_addrs(),
        admin: admin.as_ref().map(|a| a.local_addr()),
    })?;
    let stats_asked = read_stats_requests(input)?;
    loop {
        match stats_asked.recv_timeout(SIGNAL_POLL) {
            Ok(true) => emit(&RelayLine::Stats(relay.handle.stats()))?,
            Ok(false) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) if SERVE_STOP.load(Ordering::Relaxed) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    if let Some(a) = admin {
        a.shutdown();
    }
    let last = relay.stop()?;
    emit(&RelayLine::Final(last))
}

/// bundle-relay's admin endpoints on an ephemeral loopback port (the baseline has none here).
fn start_admin(relay: &RelayThread) -> Result<Option<AdminHandle>, String> {
    match &*relay.handle {
        RunningRelay::BundleRelay(r, _) => Admin::start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            r.metrics(),
            r.pairs_fn(),
        )
        .map(Some)
        .map_err(|e| format!("admin listener: {e}")),
        RunningRelay::Baseline(_) => Ok(None),
    }
}

/// A thread reading `input`: `true` for each `stats` line, then `false` at its end.
fn read_stats_requests(
    input: impl BufRead + Send + 'static,
) -> Result<std::sync::mpsc::Receiver<bool>, String> {
    let (tx, rx) = std::sync::mpsc::channel::<bool>();
    std::thread::Builder::new()
        .name("relay-stdin".into())
        .spawn(move || {
            for line in input.lines() {
                match line {
                    Ok(l) if l.trim() == "stats" => {
                        if tx.send(true).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(false);
        })
        .map_err(|e| format!("spawning the stdin reader: {e}"))?;
    Ok(rx)
}

/// The demo's side of a relay process.
pub(crate) struct RelayChild {
    child: std::process::Child,
    pub(super) io: Arc<Mutex<ChildIo>>,
    pub(super) rotating: SocketAddr,
    pub(super) pinned: Vec<SocketAddr>,
    pub(super) admin: Option<SocketAddr>,
}

/// The relay process's stdin and stdout.
pub(crate) struct ChildIo {
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl ChildIo {
    fn read_line(&mut self) -> Result<RelayLine, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("the relay process closed its output".into()),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| format!("the relay process wrote `{}`: {e}", line.trim())),
            Err(e) => Err(format!("reading from the relay process: {e}")),
        }
    }

    pub(super) fn stats(&mut self) -> Result<RelayStats, String> {
        let stdin = self.stdin.as_mut().ok_or("the relay process is stopping")?;
        writeln!(stdin, "stats")
            .and_then(|_| stdin.flush())
            .map_err(|e| format!("writing to the relay process: {e}"))?;
        match self.read_line()? {
            RelayLine::Stats(s) => Ok(s),
            other => Err(format!("the relay process answered {other:?} to `stats`")),
        }
    }
}

impl RelayChild {
    /// Starts `exe --serve-relay KIND --spec JSON` and reads its ready line.
    pub(super) fn spawn(
        exe: &std::path::Path,
        kind: RelayKind,
        setup: &RelaySetup,
    ) -> Result<RelayChild, String> {
        use std::process::{Command, Stdio};
        let spec = serde_json::to_string(setup).map_err(|e| e.to_string())?;
        let mut child = Command::new(exe)
            .arg(SERVE_RELAY_ARG)
            .arg(kind.name())
            .arg("--spec")
            .arg(spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the relay process {}: {e}", exe.display()))?;
        let mut io = ChildIo {
            stdin: child.stdin.take(),
            stdout: std::io::BufReader::new(child.stdout.take().expect("piped")),
        };
        let (rotating, pinned, admin) = match io.read_line() {
            Ok(RelayLine::Ready {
                rotating,
                pinned,
                admin,
            }) => (rotating, pinned, admin),
            other => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(match other {
                    Ok(RelayLine::Error(e)) => e,
                    Ok(line) => format!("the relay process began with {line:?}"),
                    Err(e) => e,
                });
            }
        };
        Ok(RelayChild {
            child,
            io: Arc::new(Mutex::new(io)),
            rotating,
            pinned,
            admin,
        })
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes its stdin, reads its final counters, waits for it to exit (killing it after
    /// [`RELAY_EXIT_MAX`]).
    pub(super) fn stop(mut self) -> Result<RelayStats, String> {
        let last = self.read_final();
        self.wait_exit()?;
        last
    }

    fn read_final(&mut self) -> Result<RelayStats, String> {
        let mut io = self.io.lock().expect("relay io");
        io.stdin = None;
        loop {
            match io.read_line()? {
                RelayLine::Final(s) => return Ok(s),
                _ => continue,
            }
        }
    }

    fn wait_exit(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + RELAY_EXIT_MAX;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(format!("the relay process exited with {status}")),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(EXIT_POLL),
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(format!(
                        "the relay process did not exit within {} s of its stdin closing",
                        RELAY_EXIT_MAX.as_secs()
                    ));
                }
                Err(e) => return Err(format!("waiting for the relay process: {e}")),
            }
        }
    }
}

impl Drop for RelayChild {
    fn drop(&mut self) {
        // Never leave a relay process behind when a step fails part-way.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
