//! Work the relay does beside its reactors (building and checking a reloaded config) runs
//! at the scheduler's idle priority for as long as it takes: on a host where the reactors
//! share cores with it, a reactor woken by a request then always takes the core at once
//! instead of waiting out the builder's time slice (a 10,000-tenant reload is tens of ms of
//! CPU). On a host whose reactors have cores of their own it changes nothing.
//!
//! The work runs on a thread of its own that ends with it. A thread lowered to `SCHED_IDLE`
//! cannot come back without CAP_SYS_NICE (or an RLIMIT_NICE of 20), which the units do not
//! give: lowering the caller and raising it again afterwards would leave the thread that
//! supervises the relay (signals, readiness, watchdog pings) idle-class for good after the
//! first reload.
//!
//! What it is NOT: a priority for the reactors (they stay as started) or for the process.

/// Runs `work` on a thread of its own at `SCHED_IDLE`, waits for it and returns what it
/// returns. Where no thread can be started, or the kernel refuses the policy (only an odd
/// seccomp filter would: lowering one's own priority needs no privilege), the work runs at
/// the priority it would have had.
pub fn idle<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    let mut work = Some(work);
    let ran = std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("idle-work".into())
            .spawn_scoped(s, || {
                lower();
                (work.take().expect("taken once"))()
            });
        match spawned {
            Ok(h) => Some(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))),
            Err(_) => None,
        }
    });
    match ran {
        Some(out) => out,
        None => (work.take().expect("not taken: no thread ran it"))(),
    }
}

/// The calling thread to `SCHED_IDLE`; a refusal leaves it as it was.
fn lower() {
    let idle = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; the param is a plain struct we own.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &idle) };
}

#[cfg(test)]
mod tests {
    use super::*;

    // SAFETY: querying the calling thread.
    fn policy() -> i32 {
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn the_work_runs_idle_and_the_caller_keeps_its_policy() {
        let before = policy();
        assert_eq!(idle(policy), libc::SCHED_IDLE);
        assert_eq!(policy(), before);
    }

    #[test]
    fn what_the_work_returns_or_borrows_comes_back() {
        let text = String::from("generation 2");
        assert_eq!(idle(|| text.len()), 12);
    }
}
