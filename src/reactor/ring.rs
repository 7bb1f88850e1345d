//! The thread's io_uring: submissions (with a backlog for entries the submission queue had no
//! room for), one `io_uring_enter` per loop iteration that submits and waits together, and the
//! completions of each iteration collected in one batch. The wait sleeps through the
//! completions of the quiet sends it submits (see [`super::op::Sock::send`]), which are posted
//! before it begins.
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
/// Bytes of kernel memory one reactor ring takes, each area rounded up to whole pages: the
/// completion entries with the rings' heads and the submission index array, and the
/// submission entries. What a kernel that charges ring memory to `RLIMIT_MEMLOCK` charges
/// (the heads are counted as a whole page, which they never fill).
pub fn ring_memory_bytes() -> u64 {
    let page = page_bytes();
    let pages = |bytes: u64| bytes.div_ceil(page) * page;
    let entries = u64::from(RING_ENTRIES);
    let cq = u64::from(CQ_ENTRIES);
    let cqe = std::mem::size_of::<io_uring::cqueue::Entry>() as u64;
    let sqe = std::mem::size_of::<io_uring::squeue::Entry>() as u64;
    pages(page + cq * cqe + entries * 4) + pages(entries * sqe)
}

/// The kernel's page size in bytes.
pub fn page_bytes() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as u64,
        _ => 4096,
    }
}

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
    /// Quiet sends queued since the last enter whose completion needs no work but their own
    /// bookkeeping: the next wait sleeps through that many completions.
    quiet: u32,
    /// Quiet sends may be queued (sleep mode, not stopping).
    quiet_ok: bool,
    /// When the last [`Ring::enter`] submitted: a quiet send completed then.
    entered_at: Instant,
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
            quiet: 0,
            quiet_ok: reactor.mode == ReactorMode::Sleep,
            entered_at: Instant(0),
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
            // The quiet sends queued so far went now and completed: this iteration may reap
            // them before it waits, so the wait must not count them.
            self.quiet = 0;
            // SAFETY: as above.
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return;
            }
        }
        self.backlog.push_back(e);
    }

    /// Queues `first` linked to `second`, side by side in this submission (a link must not be
    /// split across submissions), and says so; false, and nothing queued, when the submission
    /// queue has no room for both now.
    pub fn push_linked(&mut self, first: squeue::Entry, second: squeue::Entry) -> bool {
        let room = |ring: &mut IoUring| {
            let sq = ring.submission();
            sq.capacity() - sq.len() >= 2
        };
        if !self.backlog.is_empty() || !room(&mut self.ring) {
            // What is queued goes now, as `push` does when the queue is full, and the
            // backlog after it: then the pair goes in whole, behind everything queued before.
            let _ = self.ring.submit();
            self.quiet = 0;
            self.flush_backlog();
            if !self.backlog.is_empty() || !room(&mut self.ring) {
                return false;
            }
        }
        let mut sq = self.ring.submission();
        // SAFETY: as in `push`; room for both was checked just above.
        unsafe {
            let _ = sq.push(&first);
            let _ = sq.push(&second);
        }
        true
    }

    /// Whether a quiet send can be queued now: sleep mode, not stopping, and room in the
    /// submission queue for the send and its guard side by side (a link must not be split
    /// across submissions). Otherwise the send is a loud one.
    pub fn quiet_room(&mut self) -> bool {
        if !self.quiet_ok || !self.backlog.is_empty() {
            return false;
        }
        let sq = self.ring.submission();
        sq.capacity() - sq.len() >= 2
    }

    /// Queues a send built by [`super::op::Sock::send`]; a quiet one (which
    /// [`Ring::quiet_room`] allowed) with its guard, counted for the wait.
    pub fn push_send(&mut self, send: squeue::Entry, quiet: bool) {
        self.push(send);
        if quiet {
            debug_assert!(self.backlog.is_empty(), "quiet_room kept the link whole");
            self.push(super::op::send_guard());
            self.quiet += 1;
        }
    }

    /// A quiet send queued this iteration has work behind it (output queued after it, a
    /// close waiting for it, requests held back): the loop wakes for its completion after all.
    pub fn unquiet(&mut self) {
        self.quiet = self.quiet.saturating_sub(1);
    }

    /// The thread is stopping: every completion wakes the loop from now on (draining closes
    /// connections when their last send completes).
    pub fn end_quiet(&mut self) {
        self.quiet_ok = false;
        self.quiet = 0;
    }

    /// When the last [`Ring::enter`] submitted (the time a quiet send went out).
    pub fn entered_at(&self) -> Instant {
        self.entered_at
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
    /// `deadline`; `now` is read just before (the time the submitted sends went out). The
    /// wait counts the completions of this submission's quiet sends, which are posted before
    /// it begins, as not yet one to wake for (see [`super::op::Sock::send`]). Errors the
    /// kernel returns under memory pressure (EAGAIN, ENOMEM) are retried on the next iteration
    /// (counted, and said at most every [`ENTER_ERROR_LOG_MS`]); a full completion queue
    /// (EBUSY) just sends the next iteration to reap first; any other is the thread's end.
    pub fn enter(
        &mut self,
        now: Instant,
        deadline: Instant,
        may_sleep: bool,
        rate: TickRate,
        stats: &Stats,
        log: &LogQueue,
    ) -> Result<(), String> {
        self.entered_at = now;
        if !self.backlog.is_empty() {
            let _ = self.ring.submit();
            self.quiet = 0;
            self.flush_backlog();
        }
        let quiet = std::mem::take(&mut self.quiet) as usize;
        let mut want = 1;
        let wait_ns = match self.mode {
            // Completions waiting, or entries still backlogged: come straight back.
            ReactorMode::Sleep
                if may_sleep && self.ring.completion().is_empty() && self.backlog.is_empty() =>
            {
                want += quiet;
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
        let e = match self.ring.submitter().submit_with_args(want, &args) {
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

    /// Runs the work the kernel deferred to this thread (`DEFER_TASKRUN`) without waiting:
    /// an operation linked behind one that completed during a submission, such as a refused
    /// connection's close behind its answer, runs only when the thread next asks for
    /// completions, and at teardown nothing else would.
    pub fn run_deferred(&mut self) {
        let ts = types::Timespec::new();
        let args = types::SubmitArgs::new().timespec(&ts);
        let _ = self.ring.submitter().submit_with_args(1, &args);
    }

    pub fn wait_briefly(&mut self) {
        let _ = self.ring.submit();
        self.flush_backlog();
        let ts = types::Timespec::new().nsec(5_000_000);
        let args = types::SubmitArgs::new().timespec(&ts);
        let _ = self.ring.submitter().submit_with_args(1, &args);
    }
}

#[cfg(test)]
mod tests {
    //! Quiet sends against a real io_uring and real loopback sockets: which completions wake
    //! the loop. Each wait has a long deadline, so a wrong wake-up reads as seconds, not
    //! microseconds: the assertions have that much margin on a loaded machine.

    use super::*;
    use crate::reactor::op::{OP_SEND_GUARD, Sock, ud_parts};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant as WallInstant};

    const RATE: TickRate = TickRate::NANOS;
    const OP_TEST_SEND: u64 = 3;

    /// A connected pair; `small` gives the sender and the receiver tiny buffers, so a few
    /// kilobytes fill the path.
    fn pair(small: bool) -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        if small {
            a.set_send_buffer_size(4096).unwrap();
        }
        a.connect(&l.local_addr().unwrap().into()).unwrap();
        let (b, _) = l.accept().unwrap();
        if small {
            socket2::SockRef::from(&b)
                .set_recv_buffer_size(4096)
                .unwrap();
        }
        let a: TcpStream = a.into();
        a.set_nonblocking(true).unwrap();
        (a, b)
    }

    fn ring() -> Ring {
        Ring::new(64, Reactor::default()).unwrap()
    }

    /// Enters with a deadline `wait` away; how long it took and the completions it brought
    /// (kind, result).
    fn enter_for(ring: &mut Ring, wait: Duration) -> (Duration, Vec<(u64, i32)>) {
        let (stats, log) = (Stats::default(), LogQueue::new("test"));
        let now = Instant(1_000);
        let deadline = Instant(now.0 + RATE.from_duration(wait).0);
        let t = WallInstant::now();
        ring.enter(now, deadline, true, RATE, &stats, &log).unwrap();
        let took = t.elapsed();
        let got = ring.completions();
        let kinds = got.iter().map(|&(u, r, _)| (ud_parts(u).0, r)).collect();
        ring.completions_done(got);
        (took, kinds)
    }

    /// Arms a receive (kind 9) on `c`, has its peer `d` write 50 ms later, and enters with a
    /// 5 s deadline: what the wait took and what it brought.
    fn enter_until_a_late_event(
        ring: &mut Ring,
        c: &TcpStream,
        mut d: TcpStream,
    ) -> (Duration, Vec<(u64, i32)>) {
        let mut buf = [0u8; 64];
        ring.push(
            io_uring::opcode::Recv::new(types::Fd(c.as_raw_fd()), buf.as_mut_ptr(), 64)
                .build()
                .user_data(crate::reactor::op::ud(9, 0, 0)),
        );
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            d.write_all(b"ping").unwrap();
            d
        });
        let (took, got) = enter_for(ring, Duration::from_secs(5));
        writer.join().unwrap();
        assert!(
            took < Duration::from_secs(2),
            "slept {took:?} past the event"
        );
        (took, got)
    }

    fn quiet_send(ring: &mut Ring, s: &mut Sock, data: &[u8]) {
        assert!(ring.quiet_room());
        let e = s.send(OP_TEST_SEND, 0, data.as_ptr(), data.len() as u32, true);
        ring.push_send(e, true);
    }

    fn sock_of(a: &TcpStream) -> Sock {
        let mut s = Sock::new();
        s.open(a.as_raw_fd());
        s
    }

    /// Writes into `a` until the path to its unread peer is full.
    fn fill(a: &mut TcpStream) {
        let chunk = [0u8; 4096];
        loop {
            match a.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn the_loop_sleeps_through_a_quiet_send_that_took_every_byte() {
        let (a, mut b) = pair(false);
        let mut ring = ring();
        let mut s = sock_of(&a);
        let data = [7u8; 200];
        quiet_send(&mut ring, &mut s, &data);
        let (took, got) = enter_for(&mut ring, Duration::from_millis(300));
        assert!(
            took >= Duration::from_millis(250),
            "woke after {took:?}: the send's own completion woke the loop"
        );
        assert_eq!(got, vec![(OP_TEST_SEND, 200)], "no guard: every byte went");
        let mut back = [0u8; 200];
        b.read_exact(&mut back).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn an_event_after_a_quiet_send_wakes_the_loop() {
        let (a, _b) = pair(false);
        let (c, d) = pair(false);
        let mut ring = ring();
        let mut s = sock_of(&a);
        quiet_send(&mut ring, &mut s, &[1u8; 100]);
        let (_, got) = enter_until_a_late_event(&mut ring, &c, d);
        assert_eq!(got, vec![(OP_TEST_SEND, 100), (9, 4)]);
    }

    #[test]
    fn a_quiet_send_into_a_full_socket_wakes_the_loop_at_once_and_the_next_send_waits_for_room() {
        let (mut a, mut b) = pair(true);
        fill(&mut a);
        let mut ring = ring();
        let mut s = sock_of(&a);
        let data = [9u8; 300];
        quiet_send(&mut ring, &mut s, &data);
        let (took, got) = enter_for(&mut ring, Duration::from_secs(5));
        assert!(took < Duration::from_secs(2), "slept {took:?}");
        assert_eq!(
            got,
            vec![
                (OP_TEST_SEND, -libc::EAGAIN),
                (OP_SEND_GUARD, -libc::ECANCELED)
            ]
        );
        assert_eq!(
            s.sent(-libc::EAGAIN),
            (true, 0),
            "nothing sent, not an error"
        );
        assert!(s.congested);
        assert!(!s.sending && s.ops == 0);
        // The next send is loud: it waits in the kernel until the peer makes room.
        let e = s.send(OP_TEST_SEND, 0, data.as_ptr(), data.len() as u32, false);
        ring.push(e);
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            b.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut sink = vec![0u8; 1 << 16];
            while b.read(&mut sink).is_ok_and(|n| n > 0) {}
            b
        });
        let (took, got) = enter_for(&mut ring, Duration::from_secs(5));
        let _b = reader.join().unwrap();
        assert!(
            took >= Duration::from_millis(80),
            "completed before there was room"
        );
        assert!(
            took < Duration::from_secs(2),
            "slept {took:?} past the room"
        );
        assert_eq!(got, vec![(OP_TEST_SEND, 300)]);
        assert_eq!(s.sent(300), (false, 300));
        assert!(!s.congested, "the socket took a whole send again");
    }

    #[test]
    fn a_quiet_send_the_socket_takes_only_part_of_wakes_the_loop_at_once() {
        let (a, _b) = pair(true);
        let mut ring = ring();
        let mut s = sock_of(&a);
        let data = vec![3u8; 4 << 20];
        quiet_send(&mut ring, &mut s, &data);
        let (took, got) = enter_for(&mut ring, Duration::from_secs(5));
        assert!(took < Duration::from_secs(2), "slept {took:?}");
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, OP_TEST_SEND);
        assert!(got[0].1 > 0 && (got[0].1 as usize) < data.len(), "{got:?}");
        assert_eq!(got[1], (OP_SEND_GUARD, -libc::ECANCELED));
    }

    #[test]
    fn a_quiet_send_with_work_behind_it_wakes_the_loop_at_once() {
        let (a, _b) = pair(false);
        let mut ring = ring();
        let mut s = sock_of(&a);
        quiet_send(&mut ring, &mut s, &[5u8; 64]);
        ring.unquiet();
        let (took, got) = enter_for(&mut ring, Duration::from_secs(5));
        assert!(took < Duration::from_secs(2), "slept {took:?}");
        assert_eq!(got, vec![(OP_TEST_SEND, 64)]);
    }

    /// A burst that fills the submission queue hands it to the kernel early: the quiet sends
    /// in it complete then, and the iteration may reap them before it waits, so the wait no
    /// longer counts them.
    #[test]
    fn quiet_sends_handed_to_the_kernel_early_are_not_slept_through_twice() {
        let (a, _b) = pair(false);
        let (c, d) = pair(false);
        let mut ring = ring();
        let mut s = sock_of(&a);
        quiet_send(&mut ring, &mut s, &[1u8; 100]);
        // Fill the submission queue (no-ops that post nothing); the next entry makes it go to
        // the kernel at once.
        for _ in 0..RING_ENTRIES {
            ring.push(
                io_uring::opcode::Nop::new()
                    .build()
                    .flags(squeue::Flags::SKIP_SUCCESS)
                    .user_data(0),
            );
        }
        let got = ring.completions();
        let kinds: Vec<(u64, i32)> = got.iter().map(|&(u, r, _)| (ud_parts(u).0, r)).collect();
        ring.completions_done(got);
        assert_eq!(kinds, vec![(OP_TEST_SEND, 100)], "reaped before the wait");
        // Only the event can wake the loop now, and it must.
        let (_, got) = enter_until_a_late_event(&mut ring, &c, d);
        assert_eq!(got, vec![(9, 4)]);
    }

    #[test]
    fn a_stopping_or_polling_loop_sends_nothing_quietly() {
        let mut sleeping = ring();
        assert!(sleeping.quiet_room());
        sleeping.end_quiet();
        assert!(!sleeping.quiet_room(), "stopping: every completion wakes");
        let polling = Ring::new(
            64,
            Reactor {
                mode: ReactorMode::Poll,
                napi_busy_poll_us: 0,
            },
        );
        assert!(
            !polling.unwrap().quiet_room(),
            "a polling loop never sleeps"
        );
    }
}
