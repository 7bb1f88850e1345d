//! The thread's io_uring: submissions (with a backlog for entries the submission queue had no
//! room for), one `io_uring_enter` per loop iteration that submits and waits together, and the
//! completions of each iteration collected in one batch.
//!
//! In poll mode (`[reactor] mode = "poll"`) the thread never sleeps: the ring is also set up
//! with `IORING_SETUP_TASKRUN_FLAG`, so the kernel raises `IORING_SQ_TASKRUN` in the shared
//! ring when completions wait to be posted (with DEFER_TASKRUN they are posted only inside
//! `io_uring_enter`), and an iteration enters the kernel only when it has entries to submit or
//! that flag is up. An idle poll-mode thread makes no system call at all; a busy one makes one
//! per iteration, as in sleep mode, but never waits for a wake-up.

use std::collections::VecDeque;

use io_uring::{IoUring, squeue, types};

use crate::clock::{Instant, TickRate};
use crate::config::{Reactor, ReactorMode};
use crate::log::LogQueue;
use crate::metrics::accounting::Stats;

/// Submission queue entries: enough for a burst of sends and re-arms per iteration; more are
/// flushed early when the queue fills.
pub const RING_ENTRIES: u32 = 4096;
/// Completion queue entries: room for the completions of every entry in flight.
pub const CQ_ENTRIES: u32 = RING_ENTRIES * 4;
/// A failing `io_uring_enter` says so at most this often; the count in between goes into the
/// line.
const ENTER_ERROR_LOG_MS: u64 = 10_000;
/// `io_uring_enter` failing for lack of memory is retried after this pause.
const ENTER_RETRY_PAUSE_MS: u64 = 1;

/// One completion: `user_data`, result, flags.
pub type Completion = (u64, i32, u32);

/// See the module docs.
pub struct Ring {
    ring: IoUring,
    /// Entries the submission queue had no room for; submitted before the next wait.
    backlog: VecDeque<squeue::Entry>,
    /// This iteration's completions (allocated at its bound, the completion queue's size).
    cqes: Vec<Completion>,
    enter_error_logged: Option<Instant>,
    mode: ReactorMode,
    /// Poll mode with NAPI: an idle iteration waits in the kernel this long, busy polling.
    napi_wait_ns: u64,
}

impl Ring {
    /// A ring with SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them (completions are
    /// processed only when this thread enters the kernel: no interrupts mid-iteration), a
    /// plain ring where it does not; `backlog_max` entries of room for what the submission
    /// queue cannot take at once.
    ///
    /// Poll mode needs the kernel's flag for waiting completions (Linux 5.19 with DEFER_TASKRUN,
    /// 6.1): a kernel without it is refused with the reason, not run as a spinning loop that
    /// could miss completions. NAPI busy polling that the kernel refuses (before 6.9) is said and
    /// left off.
    pub fn new(backlog_max: usize, reactor: Reactor) -> std::io::Result<Ring> {
        let ring = match reactor.mode {
            ReactorMode::Sleep => IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .setup_cqsize(CQ_ENTRIES)
                .build(RING_ENTRIES)
                .or_else(|_| {
                    IoUring::builder()
                        .setup_cqsize(CQ_ENTRIES)
                        .build(RING_ENTRIES)
                })?,
            ReactorMode::Poll => IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .setup_taskrun_flag()
                .setup_cqsize(CQ_ENTRIES)
                .build(RING_ENTRIES)
                .map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!(
                            "[reactor] mode = \"poll\" needs io_uring with DEFER_TASKRUN and \
                             TASKRUN_FLAG (Linux 6.1 or later): {e}"
                        ),
                    )
                })?,
        };
        let mut napi_wait_ns = 0;
        if reactor.mode == ReactorMode::Poll && reactor.napi_busy_poll_us > 0 {
            let mut napi = types::Napi::new()
                .set_busy_poll_timeout(reactor.napi_busy_poll_us)
                .set_prefer_busy_poll(true);
            match ring.submitter().register_napi(&mut napi) {
                Ok(()) => napi_wait_ns = u64::from(reactor.napi_busy_poll_us) * 1_000,
                Err(e) => eprintln!(
                    "reactor: NAPI busy polling refused by the kernel ({e}; Linux 6.9 or later \
                     has it): polling in user space"
                ),
            }
        }
        Ok(Ring {
            ring,
            backlog: VecDeque::with_capacity(backlog_max),
            cqes: Vec::with_capacity(CQ_ENTRIES as usize),
            enter_error_logged: None,
            mode: reactor.mode,
            napi_wait_ns,
        })
    }

    /// Whether the thread never sleeps in the kernel (poll mode).
    pub fn polls(&self) -> bool {
        self.mode == ReactorMode::Poll
    }

    /// The kernel ring (to register buffer rings with).
    pub fn io_uring(&self) -> &IoUring {
        &self.ring
    }

    /// Queues an entry. When the submission queue is full its entries are handed to the
    /// kernel at once (no wait); if it is still full (the kernel is short of memory, or the
    /// completion queue is overflowing) the entry waits in the backlog for the next
    /// [`Ring::enter`], which reaps first. Nothing here loops on the kernel.
    pub fn push(&mut self, e: squeue::Entry) {
        if self.backlog.is_empty() {
            // SAFETY: every buffer and address an entry points to lives in the reactor's
            // records (boxed, never moved or freed while the operation is in flight).
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return;
            }
            let _ = self.ring.submit();
            // SAFETY: as above.
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return;
            }
        }
        self.backlog.push_back(e);
    }

    /// Moves backlogged entries into the submission queue while it has room.
    fn flush_backlog(&mut self) {
        while let Some(e) = self.backlog.front() {
            // SAFETY: as in `push`.
            if unsafe { self.ring.submission().push(e) }.is_err() {
                return;
            }
            self.backlog.pop_front();
        }
    }

    /// This iteration's completions, in arrival order; hand the batch back with
    /// [`Ring::completions_done`] (it keeps its storage).
    pub fn completions(&mut self) -> Vec<Completion> {
        let mut batch = std::mem::take(&mut self.cqes);
        batch.clear();
        for c in self.ring.completion() {
            batch.push((c.user_data(), c.result(), c.flags()));
        }
        batch
    }

    pub fn completions_done(&mut self, mut batch: Vec<Completion>) {
        batch.clear();
        self.cqes = batch;
    }

    /// The ring's file descriptor (another thread's `MSG_RING` target).
    pub fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.ring.as_raw_fd()
    }

    /// Submits everything queued and, when `may_sleep`, waits for a completion or until
    /// `deadline`. Errors the
    /// kernel returns under memory pressure (EAGAIN, ENOMEM) or with a full completion queue
    /// (EBUSY) are retried on the next iteration (counted, and said at most every
    /// [`ENTER_ERROR_LOG_MS`]); any other is the thread's end.
    pub fn enter(
        &mut self,
        now: Instant,
        deadline: Instant,
        may_sleep: bool,
        rate: TickRate,
        stats: &Stats,
        log: &LogQueue,
    ) -> Result<(), String> {
        if !self.backlog.is_empty() {
            let _ = self.ring.submit();
            self.flush_backlog();
        }
        let wait_ns = match self.mode {
            // Completions waiting, or entries still backlogged: come straight back.
            ReactorMode::Sleep
                if may_sleep && self.ring.completion().is_empty() && self.backlog.is_empty() =>
            {
                rate.to_ns(deadline.since(now))
            }
            ReactorMode::Sleep => 0,
            ReactorMode::Poll => {
                let sq = self.ring.submission();
                let work = !sq.is_empty() || sq.taskrun() || sq.cq_overflow();
                drop(sq);
                if !work && self.backlog.is_empty() {
                    if self.napi_wait_ns == 0 || !may_sleep {
                        // Nothing for the kernel to do: no system call this iteration.
                        std::hint::spin_loop();
                        return Ok(());
                    }
                    // The kernel busy polls the NIC for at most this long (never past the
                    // thread's next deadline).
                    self.napi_wait_ns.min(rate.to_ns(deadline.since(now)))
                } else {
                    0
                }
            }
        };
        let ts = types::Timespec::new()
            .sec(wait_ns / 1_000_000_000)
            .nsec((wait_ns % 1_000_000_000) as u32);
        let args = types::SubmitArgs::new().timespec(&ts);
        let e = match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        match e.raw_os_error() {
            Some(libc::ETIME) | Some(libc::EINTR) => Ok(()),
            // The completion queue is full: the next iteration reaps before submitting more.
            Some(libc::EBUSY) => Ok(()),
            Some(libc::EAGAIN) | Some(libc::ENOMEM) => {
                stats.ring_retries.inc();
                let quiet = self
                    .enter_error_logged
                    .is_some_and(|at| now.since(at).0 < rate.from_ms(ENTER_ERROR_LOG_MS).0);
                if !quiet {
                    log.line(format_args!(
                        "io_uring_enter: {e}; retrying ({} times so far)",
                        stats.ring_retries.get()
                    ));
                    self.enter_error_logged = Some(now);
                }
                std::thread::sleep(std::time::Duration::from_millis(ENTER_RETRY_PAUSE_MS));
                Ok(())
            }
            _ => Err(format!("stopped: io_uring_enter failed: {e}")),
        }
    }

    /// Submits what is queued and waits up to 5 ms for a completion (teardown's loop).
    /// Submits everything queued, backlog included, without waiting (teardown: the last
    /// closes go to the kernel before the ring does).
    pub fn submit_all(&mut self) {
        loop {
            let _ = self.ring.submit();
            if self.backlog.is_empty() {
                return;
            }
            let before = self.backlog.len();
            self.flush_backlog();
            if self.backlog.len() == before {
                // The kernel takes no more entries now; what is left stays queued.
                let _ = self.ring.submit();
                return;
            }
        }
    }

    pub fn wait_briefly(&mut self) {
        let _ = self.ring.submit();
        self.flush_backlog();
        let ts = types::Timespec::new().nsec(5_000_000);
        let args = types::SubmitArgs::new().timespec(&ts);
        let _ = self.ring.submitter().submit_with_args(1, &args);
    }
}
