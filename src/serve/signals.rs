//! The signals a running relay answers, each turned into a flag the supervision loop reads.
//!
//! | signal | flag | the loop |
//! |---|---|---|
//! | SIGTERM, SIGINT | [`Signal::Stop`] | stops listening, drains, exits |
//! | SIGHUP | [`Signal::Reload`] | reloads the config file (a bad one is refused, the last good one kept) |
//! | SIGUSR1 | [`Signal::Dump`] | prints every histogram's percentile distribution |
//! | SIGUSR2 | [`Signal::Upgrade`] | starts this binary (as now on disk) to take over from this process |
//! | SIGQUIT | [`Signal::Quit`] | sent by the process that took over: stops listening, drains, exits 0 |
//!
//! What it is NOT: the reaction. A handler only stores to an atomic (async-signal-safe); what a
//! signal means is decided on the main thread, at the loop's next tick.

use std::sync::atomic::{AtomicBool, Ordering};

/// What a signal asks of the relay.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Signal {
    Stop,
    Reload,
    Dump,
    Upgrade,
    Quit,
}

static STOP: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);
static DUMP: AtomicBool = AtomicBool::new(false);
static UPGRADE: AtomicBool = AtomicBool::new(false);
static QUIT: AtomicBool = AtomicBool::new(false);

/// Every signal handled, with what it asks.
const HANDLED: [(libc::c_int, Signal); 6] = [
    (libc::SIGTERM, Signal::Stop),
    (libc::SIGINT, Signal::Stop),
    (libc::SIGUSR1, Signal::Dump),
    (libc::SIGHUP, Signal::Reload),
    (libc::SIGUSR2, Signal::Upgrade),
    (libc::SIGQUIT, Signal::Quit),
];

impl Signal {
    fn flag(self) -> &'static AtomicBool {
        match self {
            Signal::Stop => &STOP,
            Signal::Reload => &RELOAD,
            Signal::Dump => &DUMP,
            Signal::Upgrade => &UPGRADE,
            Signal::Quit => &QUIT,
        }
    }

    /// Whether this was asked for: stays set (a stop is not undone).
    pub fn asked(self) -> bool {
        self.flag().load(Ordering::Relaxed)
    }

    /// Whether this was asked for since the last take: clears it, so each ask is acted on once.
    pub fn take(self) -> bool {
        self.flag().swap(false, Ordering::Relaxed)
    }
}

extern "C" fn on_signal(signum: libc::c_int) {
    if let Some((_, s)) = HANDLED.iter().find(|(n, _)| *n == signum) {
        s.flag().store(true, Ordering::Relaxed);
    }
}

/// Installs the handlers of the signals that ask for something once serving (SIGHUP, SIGUSR1,
/// SIGUSR2), whose default would kill a relay still starting: a deployment tool's SIGHUP after
/// it saved the file is a reload once the relay serves. SIGTERM, SIGINT and SIGQUIT keep their
/// defaults until [`install`]: a start stopped is stopped at once, not after it finished.
pub fn install_early() {
    for (signum, s) in HANDLED {
        if matches!(s, Signal::Reload | Signal::Dump | Signal::Upgrade) {
            handle(signum);
        }
    }
}

/// Installs every handler: from here on these signals set flags instead of their defaults
/// (SIGQUIT no longer dumps core, SIGHUP and SIGUSR* no longer kill).
pub fn install() {
    for (signum, _) in HANDLED {
        handle(signum);
    }
}

fn handle(signum: libc::c_int) {
    // SAFETY: the handler only reads a constant table and stores to an atomic, which is
    // async-signal-safe.
    unsafe { libc::signal(signum, on_signal as *const () as libc::sighandler_t) };
}
