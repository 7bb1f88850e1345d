//! A step's relay behind one interface, wherever it runs: on threads of this process
//! (`host.rs`) or as a process of its own (`child.rs`), as [`super::DemoConfig::relay_exe`]
//! says. [`RelayProbe`] reads its counters from any thread while the step runs.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::DemoConfig;
use super::child::{ChildIo, RelayChild};
use super::host::{RelayThread, start_relay};
use super::relay::{RelaySetup, RelayStats, RunningRelay};

/// How long a relay may take to bring every (egress, region) pair up before the load starts:
/// 2,048 loopback connections take well under a second; this leaves room for a loaded machine.
pub const PAIRS_UP_WAIT_MAX: Duration = Duration::from_secs(30);
/// How often the wait for pairs reads the relay's counters.
const PAIRS_UP_POLL: Duration = Duration::from_millis(20);

/// A relay started for one step: on threads of this process or as a process of its own.
pub(crate) enum RelayRun {
    Thread(RelayThread),
    Child(RelayChild),
}

/// Reads a running relay's counters from any thread.
#[derive(Clone)]
pub(crate) enum RelayProbe {
    Thread(Arc<RunningRelay>),
    Child(Arc<Mutex<ChildIo>>),
}

impl RelayProbe {
    pub(crate) fn stats(&self) -> Result<RelayStats, String> {
        match self {
            RelayProbe::Thread(h) => Ok(h.stats()),
            RelayProbe::Child(io) => io.lock().expect("relay io").stats(),
        }
    }
}

impl RelayRun {
    pub(crate) fn start(cfg: &DemoConfig, setup: RelaySetup) -> Result<RelayRun, String> {
        match &cfg.relay_exe {
            Some(exe) => RelayChild::spawn(exe, cfg.relay, &setup).map(RelayRun::Child),
            None => start_relay(cfg.relay, setup).map(RelayRun::Thread),
        }
    }

    pub(crate) fn probe(&self) -> RelayProbe {
        match self {
            RelayRun::Thread(t) => RelayProbe::Thread(t.handle.clone()),
            RelayRun::Child(c) => RelayProbe::Child(c.io.clone()),
        }
    }

    pub(crate) fn rotating_addr(&self) -> SocketAddr {
        match self {
            RelayRun::Thread(t) => t.handle.rotating_addr(),
            RelayRun::Child(c) => c.rotating,
        }
    }

    pub(crate) fn pinned_addrs(&self) -> Vec<SocketAddr> {
        match self {
            RelayRun::Thread(t) => t.handle.pinned_addrs(),
            RelayRun::Child(c) => c.pinned.clone(),
        }
    }

    /// The relay process's admin listener, when its setup asked for one.
    pub(crate) fn admin_addr(&self) -> Option<SocketAddr> {
        match self {
            RelayRun::Thread(_) => None,
            RelayRun::Child(c) => c.admin,
        }
    }

    /// The relay process's id; `None` on threads of this process.
    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            RelayRun::Thread(_) => None,
            RelayRun::Child(c) => Some(c.pid()),
        }
    }

    pub(crate) fn stop(self) -> Result<RelayStats, String> {
        match self {
            RelayRun::Thread(t) => t.stop(),
            RelayRun::Child(c) => c.stop(),
        }
    }
}

/// Waits until every (egress, region) pair of a bundle-relay is connected.
pub(crate) fn wait_pairs_up(probe: &RelayProbe, want: u64) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let s = probe.stats()?;
        if s.pairs_up >= want {
            return Ok(());
        }
        if start.elapsed() >= PAIRS_UP_WAIT_MAX {
            return Err(format!(
                "bundle-relay: only {} of {want} (egress, region) pairs connected after {} s; \
                 is every egress address routable on loopback and the engine listening?",
                s.pairs_up,
                PAIRS_UP_WAIT_MAX.as_secs()
            ));
        }
        std::thread::sleep(PAIRS_UP_POLL);
    }
}
