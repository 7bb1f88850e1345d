//! systemd's watchdog (`WatchdogSec=`): pinged at half the period, and only when every reactor
//! loop moved since the last ping. A thread stuck in a syscall or a loop stops the pings, and
//! systemd restarts the relay once the period passes; a ping from the healthy main thread alone
//! would hide it.
//!
//! What it is NOT: the health check. A reactor thread that ended is `Relay::health`'s to find
//! (the relay stops itself); this is for one that is alive and not moving.

use std::time::{Duration, Instant};

use super::systemd::Manager;
use crate::notify::{self, Progress};
use crate::runtime::Relay;

/// The shortest watchdog period the pings can mean anything at: the supervision loop runs every
/// 100 ms and an idle reactor loop every 50 ms, so half a period must cover several of both.
pub const WATCHDOG_PERIOD_MIN: Duration = Duration::from_millis(1_000);

/// The watchdog period this process must ping at, if the manager set one. `takeover` is the
/// process being taken over: the manager set `WATCHDOG_PID` to it, yet the period is this
/// process's once it becomes the main one. Call while the process is single-threaded.
pub fn period_from_env(takeover: Option<i32>) -> Result<Option<Duration>, String> {
    if let Some(old) = takeover
        && std::env::var(notify::WATCHDOG_PID_ENV).ok() == Some(old.to_string())
    {
        // SAFETY: single-threaded here (the caller's promise): no thread reads the
        // environment concurrently.
        unsafe { std::env::set_var(notify::WATCHDOG_PID_ENV, std::process::id().to_string()) };
    }
    let period = notify::watchdog_period()?;
    if let Some(p) = period
        && p < WATCHDOG_PERIOD_MIN
    {
        return Err(format!(
            "the watchdog period ({} ms) is below {} ms: a reactor loop wakes only every 50 ms \
             when idle, so progress cannot be told from a stall; set WatchdogSec= to 1s or more",
            p.as_millis(),
            WATCHDOG_PERIOD_MIN.as_millis()
        ));
    }
    Ok(period)
}

/// The pings of one period.
pub struct Watchdog {
    period: Duration,
    next_ping: Instant,
    progress: Progress,
    /// A stall was reported and no ping sent since: say once when it ends, not every tick.
    stuck_reported: bool,
}

impl Watchdog {
    pub fn new(period: Duration) -> Watchdog {
        Watchdog {
            period,
            next_ping: Instant::now(),
            progress: Progress::default(),
            stuck_reported: false,
        }
    }

    /// Pings when a ping is due and deserved.
    pub fn tick(&mut self, relay: &Relay, manager: &mut Manager) {
        if Instant::now() < self.next_ping {
            return;
        }
        self.next_ping = Instant::now() + self.period / 2;
        match self.progress.check(&relay.thread_iterations()) {
            Ok(()) => {
                manager.watchdog();
                if std::mem::replace(&mut self.stuck_reported, false) {
                    println!("watchdog: every reactor thread is making progress again");
                }
            }
            Err(stuck) if !self.stuck_reported => {
                self.stuck_reported = true;
                let names: Vec<String> = stuck.iter().map(|t| format!("relay-{t}")).collect();
                eprintln!(
                    "bundle-relay: watchdog: reactor thread {} made no progress in {} ms; \
                     withholding the ping (systemd restarts the relay after {} ms)",
                    names.join(", "),
                    (self.period / 2).as_millis(),
                    self.period.as_millis()
                );
                manager.status(&format!("stalled: reactor thread {}", names.join(", ")));
            }
            Err(_) => {}
        }
    }
}
