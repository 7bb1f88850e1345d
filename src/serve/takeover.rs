//! `run --takeover PID`: this process replaces the relay running as PID without a refused
//! connection. It binds the same listeners (SO_REUSEPORT) but listens only once its pool is up;
//! then it tells the service manager it is the main process (MAINPID=, READY=1), sends PID
//! SIGQUIT, on which that one closes its listeners and drains, and takes the admin port the
//! old one frees.
//!
//! What it is NOT: the old process's side (`upgrade` starts this one on SIGUSR2; SIGQUIT's
//! drain is the supervision loop's). Pacing is not handed over here either: both processes
//! book every send in one shared ledger from the start (`pacing`), so whichever sends next on
//! a pair honours the other's last send.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::admin::AdminHandle;
use crate::config::Token;
use crate::runtime::Relay;

use super::start;
use super::systemd::Manager;

/// How long a process taking over waits for its pool before giving up (the old one serves on).
const TAKEOVER_READY_WAIT: Duration = Duration::from_secs(60);

/// How long a process that took over retries the admin port the old one is freeing.
const ADMIN_TAKEOVER_WAIT: Duration = Duration::from_secs(5);

/// A takeover in progress from the relay running as `old`.
pub struct Takeover {
    pub old: i32,
    deadline: Instant,
}

impl Takeover {
    /// Starts the wait for the pool now.
    pub fn new(old: i32) -> Takeover {
        Takeover {
            old,
            deadline: Instant::now() + TAKEOVER_READY_WAIT,
        }
    }

    /// Why the takeover is given up, once the pool took too long: `up` of `pairs_total` pairs
    /// are up, `ready_at` wanted.
    pub fn timed_out(&self, up: u64, pairs_total: u64, ready_at: u64) -> Option<String> {
        (Instant::now() >= self.deadline).then(|| {
            format!(
                "takeover: {up} of {pairs_total} pairs up after {} s, {ready_at} wanted; \
                 pid {} keeps serving",
                TAKEOVER_READY_WAIT.as_secs(),
                self.old
            )
        })
    }

    /// The pool is up (`line` says how far): listen first, so someone always listens; then
    /// become the main process and let the old one close its listeners and drain. Returns the
    /// admin listener (`admin`: its address and the token in force), when the config has one
    /// and its port came free; an error when this process cannot listen, and the old one keeps
    /// serving.
    pub fn complete(
        &self,
        line: &str,
        relay: &Relay,
        admin: Option<(SocketAddr, Option<Token>)>,
        manager: &mut Manager,
    ) -> Result<Option<AdminHandle>, String> {
        let old = self.old;
        if let Err(e) = relay.listen() {
            eprintln!("bundle-relay: takeover: {e}; pid {old} keeps serving");
            return Err(e.to_string());
        }
        println!("{line}; taking over from pid {old}");
        manager.set_muted(false);
        manager.main_pid_ready(line);
        // SAFETY: a signal to the process we take over from.
        unsafe { libc::kill(old, libc::SIGQUIT) };
        let Some((addr, token)) = admin else {
            return Ok(None);
        };
        match start::admin(addr, token, relay, ADMIN_TAKEOVER_WAIT) {
            Ok(a) => Ok(Some(a)),
            Err(e) => {
                eprintln!("bundle-relay: {e}; serving without it");
                Ok(None)
            }
        }
    }
}
