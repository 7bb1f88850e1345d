//! The systemd notify protocol (`sd_notify(3)`), spoken by hand: one datagram per message to the
//! `AF_UNIX` socket named by `$NOTIFY_SOCKET` (a path, or an abstract name written `@name`), and
//! the watchdog's period read from `$WATCHDOG_USEC` / `$WATCHDOG_PID`.
//!
//! What it is: [`Notifier`] sends `READY=1`, `RELOADING=1`, `STOPPING=1` (with
//! `EXTEND_TIMEOUT_USEC=`, the time the stop needs), `STATUS=…`,
//! `WATCHDOG=1` and `MAINPID=…`; [`Progress`] decides whether a watchdog ping is deserved (every
//! reactor thread's loop count moved since the last one). What it is NOT: a supervisor; it never
//! reads from the socket, and without `$NOTIFY_SOCKET` (not under systemd) every send is a no-op.
//!
//! Not libsystemd: the protocol is a datagram of `KEY=VALUE` lines, and linking libsystemd
//! would make the build need a system library. Cost: one `sendto` per message, from the main
//! thread's 100 ms supervision loop, never from a reactor thread.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The environment variable systemd names its notification socket in.
pub const NOTIFY_SOCKET_ENV: &str = "NOTIFY_SOCKET";
/// The watchdog period in microseconds (set with `WatchdogSec=`).
pub const WATCHDOG_USEC_ENV: &str = "WATCHDOG_USEC";
/// The process the watchdog period is meant for; absent means "whoever reads it".
pub const WATCHDOG_PID_ENV: &str = "WATCHDOG_PID";

/// What a stop asks for past its unready spell and drain (`EXTEND_TIMEOUT_USEC=` with each
/// `STOPPING=1`): the .hlog writer's last interval, the admin listener and the threads' ends.
/// Measured well under a second; the rest is room for a loaded host.
pub const STOP_EXIT_MARGIN_MS: u64 = 5_000;

/// A connection to the service manager's notification socket, or nothing (not under systemd).
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    /// Sends nothing while set: a process is not (or no longer) the unit's main process.
    muted: std::cell::Cell<bool>,
}

impl Notifier {
    /// The socket `$NOTIFY_SOCKET` names; a notifier that sends nothing when it is unset. A set
    /// but unusable value is an error naming it, so a broken unit is not mistaken for no unit.
    pub fn from_env() -> io::Result<Notifier> {
        match std::env::var_os(NOTIFY_SOCKET_ENV) {
            None => Ok(Notifier::none()),
            Some(name) => {
                let name = name.to_string_lossy().into_owned();
                Notifier::to(&name).map_err(|e| {
                    io::Error::new(e.kind(), format!("{NOTIFY_SOCKET_ENV}={name:?}: {e}"))
                })
            }
        }
    }

    /// A notifier that sends nothing (no service manager).
    pub fn none() -> Notifier {
        Notifier {
            target: None,
            muted: Default::default(),
        }
    }

    /// A notifier sending to `name`: a filesystem path, or `@name` for an abstract socket.
    pub fn to(name: &str) -> io::Result<Notifier> {
        let addr = if let Some(abstract_name) = name.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(abstract_name.as_bytes())?
        } else if name.starts_with('/') {
            SocketAddr::from_pathname(name)?
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an absolute path or an @abstract name (vsock addresses are not supported)",
            ));
        };
        let sock = UnixDatagram::unbound()?;
        Ok(Notifier {
            target: Some((sock, addr)),
            muted: Default::default(),
        })
    }

    /// While muted every send is a no-op: a process taking over is not the main process until
    /// it says MAINPID=, and one taken over no longer is.
    pub fn set_muted(&self, muted: bool) {
        self.muted.set(muted);
    }

    /// True under a service manager that listens.
    pub fn active(&self) -> bool {
        self.target.is_some()
    }

    /// Sends one message (`KEY=VALUE` lines). A send that fails is returned: the caller says so
    /// once, since a manager that stopped listening is not a reason to stop serving.
    pub fn send(&self, message: &str) -> io::Result<()> {
        if self.muted.get() {
            return Ok(());
        }
        match &self.target {
            None => Ok(()),
            Some((sock, addr)) => sock.send_to_addr(message.as_bytes(), addr).map(|_| ()),
        }
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)))
    }

    /// `STATUS=` alone.
    pub fn status(&self, status: &str) -> io::Result<()> {
        self.send(&format!("STATUS={}", one_line(status)))
    }

    /// `RELOADING=1`, stamped with `CLOCK_MONOTONIC` as `Type=notify-reload` managers require
    /// (others ignore the stamp).
    pub fn reloading(&self) -> io::Result<()> {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the config",
            monotonic_usec()
        ))
    }

    /// `STOPPING=1` with what the drain does, asking for `need` more (plus
    /// [`STOP_EXIT_MARGIN_MS`]) before the manager may kill the process: `EXTEND_TIMEOUT_USEC=`
    /// extends the unit's `TimeoutStopSec=` when the stop runs longer than it, and never
    /// shortens it.
    pub fn stopping(&self, status: &str, need: Duration) -> io::Result<()> {
        // Saturating: systemd reads a value this large as no limit.
        let ms = u64::try_from(need.as_millis()).unwrap_or(u64::MAX);
        let usec = ms.saturating_add(STOP_EXIT_MARGIN_MS).saturating_mul(1_000);
        self.send(&format!(
            "STOPPING=1\nEXTEND_TIMEOUT_USEC={usec}\nSTATUS={}",
            one_line(status)
        ))
    }

    /// `WATCHDOG=1`: every reactor thread is making progress.
    pub fn watchdog(&self) -> io::Result<()> {
        self.send("WATCHDOG=1")
    }

    /// `MAINPID=` this process, then `READY=1`: a process that took over from the unit's main
    /// process becomes the one the manager watches.
    pub fn main_pid_ready(&self, status: &str) -> io::Result<()> {
        self.send(&format!(
            "MAINPID={}\nREADY=1\nSTATUS={}",
            std::process::id(),
            one_line(status)
        ))
    }
}

/// The watchdog period this process must ping within, from `$WATCHDOG_USEC` (and
/// `$WATCHDOG_PID`, when set, naming this process). `Err` for a value that is not a number of
/// microseconds, so a typo in the unit is reported rather than silently unwatched.
pub fn watchdog_period() -> Result<Option<Duration>, String> {
    watchdog_period_from(
        std::env::var(WATCHDOG_USEC_ENV).ok().as_deref(),
        std::env::var(WATCHDOG_PID_ENV).ok().as_deref(),
        std::process::id(),
    )
}

/// [`watchdog_period`] on given values: `usec` from `WATCHDOG_USEC`, `pid` from `WATCHDOG_PID`.
pub fn watchdog_period_from(
    usec: Option<&str>,
    pid: Option<&str>,
    own_pid: u32,
) -> Result<Option<Duration>, String> {
    let Some(usec) = usec else { return Ok(None) };
    if let Some(pid) = pid {
        match pid.trim().parse::<u32>() {
            Ok(p) if p == own_pid => {}
            Ok(_) => return Ok(None),
            Err(_) => return Err(format!("{WATCHDOG_PID_ENV}={pid:?} is not a process id")),
        }
    }
    match usec.trim().parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(us) => Ok(Some(Duration::from_micros(us))),
        Err(_) => Err(format!(
            "{WATCHDOG_USEC_ENV}={usec:?} is not a number of microseconds"
        )),
    }
}

/// Whether every reactor thread moved since the last ping. A reactor's loop wakes at least every
/// 50 ms even when idle, so a count that has not moved across a watchdog half-period (hundreds of
/// milliseconds or more) is a thread stuck in a syscall or a loop.
#[derive(Debug, Default)]
pub struct Progress {
    last: Vec<u64>,
}

impl Progress {
    /// Compares `iterations` (each thread's loop count now) with the previous call's and keeps
    /// them. `Ok` when every thread moved; `Err` with the threads that did not. The first call
    /// has nothing to compare with and counts as progress.
    pub fn check(&mut self, iterations: &[u64]) -> Result<(), Vec<usize>> {
        let stuck: Vec<usize> = if self.last.len() == iterations.len() {
            (0..iterations.len())
                .filter(|&t| iterations[t] <= self.last[t])
                .collect()
        } else {
            Vec::new()
        };
        self.last.clear();
        self.last.extend_from_slice(iterations);
        if stuck.is_empty() { Ok(()) } else { Err(stuck) }
    }
}

/// A status must stay one line: the protocol separates assignments by newlines.
fn one_line(s: &str) -> String {
    s.replace('\n', "; ")
}

fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}
