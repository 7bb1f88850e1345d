//! Work the relay does beside its reactors (building and checking a reloaded config) runs
//! at the scheduler's idle priority for as long as it takes: on a host where the reactors
//! share cores with it, a reactor woken by a request then always takes the core at once
//! instead of waiting out the builder's time slice (a 10,000-tenant reload is tens of ms of
//! CPU). On a host whose reactors have cores of their own it changes nothing.
//!
//! What it is NOT: a priority for the reactors (they stay as started) or for the process
//! (only the calling thread changes, and goes back when the guard drops).

/// The calling thread at `SCHED_IDLE` until dropped, then back to the policy it had.
pub struct Yielding {
    before: Option<(libc::c_int, libc::sched_param)>,
}

impl Yielding {
    /// Lowers the calling thread; a kernel that refuses (no permission is needed to lower
    /// one's own priority, so only an odd seccomp filter would) leaves it as it was.
    pub fn now() -> Yielding {
        // SAFETY: pid 0 is the calling thread; the param is a plain struct we own.
        unsafe {
            let policy = libc::sched_getscheduler(0);
            let mut param: libc::sched_param = std::mem::zeroed();
            if policy < 0 || libc::sched_getparam(0, &mut param) != 0 {
                return Yielding { before: None };
            }
            let idle = libc::sched_param { sched_priority: 0 };
            if libc::sched_setscheduler(0, libc::SCHED_IDLE, &idle) != 0 {
                return Yielding { before: None };
            }
            Yielding {
                before: Some((policy, param)),
            }
        }
    }

    /// Whether the thread was lowered.
    pub fn lowered(&self) -> bool {
        self.before.is_some()
    }
}

impl Drop for Yielding {
    fn drop(&mut self) {
        if let Some((policy, param)) = self.before {
            // SAFETY: as in `now`; going back from SCHED_IDLE to the thread's own earlier
            // policy needs no privilege beyond what set it.
            unsafe {
                libc::sched_setscheduler(0, policy, &param);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_runs_idle_inside_and_as_before_after() {
        std::thread::spawn(|| {
            // SAFETY: querying the calling thread.
            let policy = || unsafe { libc::sched_getscheduler(0) };
            let before = policy();
            {
                let y = Yielding::now();
                assert!(y.lowered());
                assert_eq!(policy(), libc::SCHED_IDLE);
            }
            assert_eq!(policy(), before);
        })
        .join()
        .unwrap();
    }
}
