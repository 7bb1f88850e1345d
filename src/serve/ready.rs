//! When the relay is ready: its listeners are open and `--ready-pairs-percent` of its (source,
//! region) pairs are up. Until then STATUS= says how many are.
//!
//! What it is NOT: what readiness sets off (READY=1, or listening and MAINPID= when taking
//! over); the supervision loop does that with the line this returns.

use super::systemd::Manager;

/// The default share of pairs that must be up before READY=1: most of the pool, so a restart
/// under load does not serve from a pool still connecting, yet not all of it, so one region
/// that is down (one of eight is 12.5%) does not hold a start back until systemd gives up.
pub const READY_PAIRS_PERCENT_DEFAULT: u8 = 85;

/// The pool's way to ready.
pub struct Readiness {
    pub pairs_total: u64,
    /// Pairs up at which the relay is ready.
    pub ready_at: u64,
    percent: u8,
    /// Pairs connect on first use (`connect = "lazy"`): only the listeners count.
    lazy: bool,
    ready: bool,
    /// The count last said in STATUS=, so it is said again only when it changes.
    status_up: u64,
}

impl Readiness {
    pub fn new(pairs_total: u64, percent: u8, lazy: bool) -> Readiness {
        let ready_at = if lazy {
            0
        } else {
            (pairs_total * u64::from(percent)).div_ceil(100)
        };
        Readiness {
            pairs_total,
            ready_at,
            percent,
            lazy,
            ready: false,
            status_up: u64::MAX,
        }
    }

    pub fn ready(&self) -> bool {
        self.ready
    }

    /// With `up` pairs up: the line that says so the first time the relay is ready, `None`
    /// before (and after: readiness is reached once).
    pub fn reached(&mut self, up: u64) -> Option<String> {
        if self.ready || up < self.ready_at {
            return None;
        }
        self.ready = true;
        let total = self.pairs_total;
        Some(if self.lazy {
            format!("ready: listening; pairs connect on first use ({total} pairs)")
        } else {
            format!("ready: listening, {up} of {total} pairs up")
        })
    }

    /// Tells the manager how many pairs are up, when that changed.
    pub fn report(&mut self, up: u64, manager: &mut Manager) {
        if up == self.status_up {
            return;
        }
        self.status_up = up;
        manager.status(&format!(
            "{up} of {} pairs up (ready at {}, {}%)",
            self.pairs_total, self.ready_at, self.percent
        ));
    }
}
