//! Work the relay does beside its reactors (building and checking a reloaded config) runs
//! at the scheduler's idle priority for as long as it takes: on a host where the reactors
//! share cores with it, a reactor woken by a request then always takes the core at once
//! instead of waiting out the builder's time slice (a 10,000-tenant reload is tens of ms of
//! CPU). On a host whose reactors have cores of their own it changes nothing.
//!
//! The work runs on a thread of its own that ends with it, and the caller goes on meanwhile:
//! starved of CPU on a saturated host, a reload may take seconds, through which the
//! supervising thread keeps pinging the watchdog and answering signals. A thread lowered to
//! `SCHED_IDLE` cannot come back without CAP_SYS_NICE (or an RLIMIT_NICE of 20), which the
//! units do not give: lowering the caller and raising it again afterwards would leave the
//! thread that supervises the relay (signals, readiness, watchdog pings) idle-class for good
//! after the first reload.
//!
//! What it is NOT: a priority for the reactors (they stay as started) or for the process.

/// Work started at `SCHED_IDLE` on a thread of its own, or already done.
pub struct Idle<T> {
    state: State<T>,
}

enum State<T> {
    Running(std::thread::JoinHandle<T>),
    Done(T),
}

/// Starts `work` on a thread of its own at `SCHED_IDLE` and returns at once; the caller
/// looks at [`Idle::is_finished`] and takes the result with [`Idle::join`]. Where no thread
/// can be started the work runs here, now, at the caller's priority; where the kernel refuses
/// the policy (only an odd seccomp filter would: lowering one's own priority needs no
/// privilege), at the priority it would have had.
pub fn start<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Idle<T> {
    // The closure goes back if the thread cannot be started: held here, taken by one side.
    let work = std::sync::Arc::new(std::sync::Mutex::new(Some(work)));
    let theirs = work.clone();
    let spawned = std::thread::Builder::new()
        .name("idle-work".into())
        .spawn(move || {
            lower();
            let work = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
            (work.expect("taken once"))()
        });
    let state = match spawned {
        Ok(h) => State::Running(h),
        Err(_) => {
            let work = work.lock().unwrap_or_else(|e| e.into_inner()).take();
            State::Done((work.expect("no thread took it"))())
        }
    };
    Idle { state }
}

impl<T> Idle<T> {
    /// Whether [`Idle::join`] returns without waiting.
    pub fn is_finished(&self) -> bool {
        match &self.state {
            State::Running(h) => h.is_finished(),
            State::Done(_) => true,
        }
    }

    /// What the work returned, once it has (a panic in it goes on here).
    pub fn join(self) -> T {
        match self.state {
            State::Running(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            State::Done(out) => out,
        }
    }
}

/// Runs `work` as [`start`] does and waits for what it returns.
pub fn idle<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    start(work).join()
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
    fn what_the_work_returns_comes_back() {
        let text = String::from("generation 2");
        assert_eq!(idle(move || text.len()), 12);
    }

    #[test]
    fn the_caller_goes_on_while_the_work_runs() {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let work = start(move || wait.recv().map(|()| 7));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!work.is_finished(), "still waiting for the caller");
        go.send(()).unwrap();
        assert_eq!(work.join(), Ok(7));
    }
}
