//! The reactor: one io_uring event loop per thread, the only place the relay does I/O.
//!
//! Each iteration reads the clock once, handles every completion, lets the dispatcher send
//! what it can, queues the resulting sends and connects, and enters the kernel once to submit
//! them and wait for the next completion or the dispatcher's next deadline, whichever comes
//! first. Nothing spins: with no work and no deadline the thread sleeps in `io_uring_enter`.
//!
//! Operation lifecycles are explicit: every operation's `user_data` carries its kind, the
//! index of the socket it belongs to and that socket's generation. A socket's index is reused
//! only after its last operation completed (each socket counts its operations in flight), and
//! a completion whose generation is stale is recognised and dropped (its buffer still goes
//! back to the ring). Receives are multishot from a provided-buffer ring; one that ends (no
//! `F_MORE`, or `ENOBUFS` when the ring ran dry) is re-armed. Each socket has at most one send
//! in flight; bytes produced meanwhile are appended behind it and sent when it completes.

mod bufring;
mod clients;

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use io_uring::{IoUring, cqueue, opcode, squeue, types};

use crate::clock::{Clock, Instant};
use crate::egress::socket;
use crate::http1::conn::{Close, Conn, ConnConfig};
use crate::limiter::PairId;
use crate::log::LogQueue;
use crate::metrics::accounting::Stats;
use crate::metrics::{ReqOutcome, ThreadMetrics};
use crate::relay::Spec;
use crate::relay::dispatch::Dispatcher;
use crate::relay::intake::{self, Port, Verdict};

use bufring::BufRing;
pub use clients::Clients;

/// Submission queue entries: enough for a burst of sends and re-arms per iteration; more are
/// flushed early when the queue fills.
const RING_ENTRIES: u32 = 4096;
/// Receive buffers in the provided ring and their size: a request of up to five base58
/// transactions spans at most a few; idle sockets hold none.
pub const RECV_BUFFERS: u16 = 1024;
pub const RECV_BUFFER_BYTES: usize = 16 * 1024;
const BUFFER_GROUP: u16 = 0;
/// Connection timers (HTTP/2 SETTINGS, call deadlines, intake head and idle limits) are
/// seconds long; checking them this often is precise enough and costs one pass per period.
const SWEEP_MS: u64 = 50;
/// While draining, a client connection with nothing in progress is closed after this long; one
/// that sends a request meanwhile gets its answer with `Connection: close`. Long enough that a
/// client under load sends its next request (and learns to reconnect) rather than race the
/// close; short enough that a stop is not held up by idle keep-alive clients.
pub const DRAIN_IDLE_GRACE_MS: u64 = 1_000;

/// Longest sleep with nothing timed, so a stop request is seen promptly.
const IDLE_WAKE_MS: u64 = 50;
/// A listener whose accepts keep failing (out of file descriptors or memory) says so at most
/// this often; the count in between goes into the line.
const ACCEPT_ERROR_LOG_MS: u64 = 10_000;
/// `io_uring_enter` failing for lack of memory is retried after this pause (and said at most
/// every [`ACCEPT_ERROR_LOG_MS`]).
const ENTER_RETRY_PAUSE_MS: u64 = 1;
/// How long teardown waits for the kernel to finish every operation before it leaves their
/// buffers allocated rather than free memory the kernel may still write.
const TEARDOWN_WAIT_MS: u64 = 1_000;
/// Room kept free in an intake connection's output for one more response; below it, the
/// connection's pipelined requests wait until a send drains the buffer.
const RESPONSE_BYTES_MAX: usize = intake::BODY_BYTES_MAX + 512;
pub const INTAKE_OUT_BYTES: usize = 4 * RESPONSE_BYTES_MAX;
/// The reactor's record of one intake connection and of one pair's socket (the budget counts
/// them).
pub const INTAKE_RECORD_BYTES: usize = std::mem::size_of::<IntakeConn>();
pub const PAIR_SOCKET_BYTES: usize = std::mem::size_of::<UpSock>();

// user_data: kind in the top 8 bits, index in the next 24, generation in the low 32.
const OP_ACCEPT: u64 = 1;
const OP_IN_RECV: u64 = 2;
const OP_IN_SEND: u64 = 3;
const OP_UP_CONNECT: u64 = 4;
const OP_UP_RECV: u64 = 5;
const OP_UP_SEND: u64 = 6;
const OP_CANCEL: u64 = 7;

fn ud(kind: u64, index: u32, generation: u32) -> u64 {
    (kind << 56) | ((index as u64 & 0xFF_FFFF) << 32) | generation as u64
}

fn ud_parts(u: u64) -> (u64, u32, u32) {
    (u >> 56, ((u >> 32) & 0xFF_FFFF) as u32, u as u32)
}

struct Listener {
    fd: RawFd,
    port: Port,
    armed: bool,
}

/// What every socket the ring works on keeps: its fd, the generation stamped into each
/// operation's `user_data`, and which operations are in flight (the fd is closed only when
/// none is).
struct Sock {
    fd: RawFd,
    generation: u32,
    /// Operations in flight on `fd`.
    ops: u32,
    sending: bool,
    recv_armed: bool,
    closing: bool,
}

impl Sock {
    const fn new() -> Sock {
        Sock {
            fd: -1,
            generation: 0,
            ops: 0,
            sending: false,
            recv_armed: false,
            closing: false,
        }
    }

    /// A multishot receive from the buffer ring, counted in flight.
    fn recv(&mut self, kind: u64, index: u32) -> squeue::Entry {
        self.recv_armed = true;
        self.ops += 1;
        opcode::RecvMulti::new(types::Fd(self.fd), BUFFER_GROUP)
            .build()
            .user_data(ud(kind, index, self.generation))
    }

    /// A send of `len` bytes at `ptr`, which must stay put until it completes; counted in
    /// flight.
    fn send(&mut self, kind: u64, index: u32, ptr: *const u8, len: u32) -> squeue::Entry {
        self.sending = true;
        self.ops += 1;
        opcode::Send::new(types::Fd(self.fd), ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(ud(kind, index, self.generation))
    }
}

/// One bot connection: its socket and its HTTP/1.1 state (all decisions are the latter's).
struct IntakeConn {
    s: Sock,
    live: bool,
    /// The client shut its write side: the receive is not re-armed.
    eof: bool,
    port: Port,
    /// The client's address (connections per address are capped).
    peer: IpAddr,
    http: Conn,
}

/// One pair's socket.
struct UpSock {
    s: Sock,
    connecting: bool,
    connect_started: Instant,
    /// Why the connect failed, for the pair's error.
    errno: i32,
    addr: libc::sockaddr_storage,
    addr_len: libc::socklen_t,
}

struct Worker {
    ring: IoUring,
    /// Dropped by hand: unregistered from the ring first, or leaked when the kernel may still
    /// write into it (see [`Worker::teardown`]).
    bufs: ManuallyDrop<BufRing>,
    /// Entries the submission queue had no room for; submitted before the next wait.
    backlog: VecDeque<squeue::Entry>,
    clock: Clock,
    d: Dispatcher,
    stats: Arc<Stats>,
    metrics: Arc<ThreadMetrics>,
    /// This thread's pair states as text for the admin's /debug/pairs, refreshed each second.
    pairs_text: Arc<Mutex<String>>,
    next_pairs_text: Instant,
    listeners: Vec<Listener>,
    conns: Box<[IntakeConn]>,
    free_conns: Vec<u32>,
    http_cfg: ConnConfig,
    clients: Clients,
    per_source_max: u32,
    accept_error_logged: Option<Instant>,
    accept_errors_unlogged: u64,
    enter_error_logged: Option<Instant>,
    ups: Box<[UpSock]>,
    connect_timeout: u64,
    tcp_user_timeout_ms: u64,
    next_sweep: Instant,
    stopping: bool,
    /// Pairs up at the last progress line, until every pair was up once.
    progress: Option<(u64, Instant)>,
    started: Instant,
    live: Option<Arc<crate::config::Shared>>,
    config_generation: u64,
    cqes: Vec<(u64, i32, u32)>,
    /// Operations may still be in flight at teardown: their memory is never freed.
    leak: bool,
    /// The listeners are listening: accepts are armed only once this is set (a process taking
    /// over brings its pool up before it listens).
    accepting: Arc<AtomicBool>,
}

/// What a reactor thread needs from the relay that starts it.
pub struct ThreadArgs {
    pub spec: Arc<Spec>,
    pub thread: usize,
    pub listen_fds: Vec<(RawFd, Port)>,
    pub stats: Arc<Stats>,
    pub metrics: Arc<ThreadMetrics>,
    pub pairs_text: Arc<Mutex<String>>,
    pub stop: Arc<AtomicBool>,
    pub drain_ms: Arc<AtomicU64>,
    /// Answered once the thread runs (with its log queue, for the logging thread) or could
    /// not start.
    pub ready: Sender<std::io::Result<Arc<LogQueue>>>,
    /// Why the thread ended, when it ended on its own (an unrecoverable ring error, a panic).
    pub failure: Arc<Mutex<Option<String>>>,
    /// Set once the listening sockets listen (see [`Worker::arm_accept`]).
    pub accepting: Arc<AtomicBool>,
}

/// A thread's whole life: set up, run until stopped and drained, tear down. An error the
/// loop cannot recover from, or a panic, is recorded in `failure` for the relay's health check
/// (a half-alive relay is worse than a dead one: the supervisor should restart it).
pub fn run_thread(args: ThreadArgs) {
    let ThreadArgs {
        spec,
        thread: t,
        listen_fds,
        stats,
        metrics,
        pairs_text,
        stop,
        drain_ms,
        ready,
        failure,
        accepting,
    } = args;
    if spec.pin_threads {
        pin_to_cpu(t);
    }
    let mut w = match Worker::new(&spec, t, listen_fds, stats, metrics, pairs_text, accepting) {
        Ok(w) => w,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(w.d.log().clone()));
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.run(&stop, &drain_ms)));
    let why = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(why)) => Some(why),
        Err(panic) => Some(format!(
            "panicked: {}",
            panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)")
        )),
    };
    if let Some(why) = why {
        // The kernel may still own buffers of a loop that did not end cleanly.
        w.leak = true;
        if let Ok(mut f) = failure.lock() {
            *f = Some(format!("reactor thread relay-{t} {why}"));
        }
    }
    w.stats.stopped.set(1);
}

/// Pins the calling thread to the `t`-th CPU it may run on (so a unit's `CPUAffinity=2-15`
/// puts thread 0 on CPU 2), wrapping around when there are more threads than CPUs.
fn pin_to_cpu(t: usize) {
    // SAFETY: zeroed cpu_set_t values, filled by the kernel or with one bit set, for the
    // calling thread.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &allowed))
            .collect();
        if cpus.is_empty() {
            return;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[t % cpus.len()], &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A ring with SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them (completions are
/// processed only when this thread enters the kernel: no interrupts mid-iteration), a plain
/// ring where it does not.
fn build_ring() -> std::io::Result<IoUring> {
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(RING_ENTRIES * 4)
        .build(RING_ENTRIES)
        .or_else(|_| {
            IoUring::builder()
                .setup_cqsize(RING_ENTRIES * 4)
                .build(RING_ENTRIES)
        })
}

impl Worker {
    fn new(
        spec: &Spec,
        t: usize,
        listen_fds: Vec<(RawFd, Port)>,
        stats: Arc<Stats>,
        metrics: Arc<ThreadMetrics>,
        pairs_text: Arc<Mutex<String>>,
        accepting: Arc<AtomicBool>,
    ) -> std::io::Result<Worker> {
        let ring = build_ring()?;
        let bufs = BufRing::new(&ring, BUFFER_GROUP, RECV_BUFFERS, RECV_BUFFER_BYTES)?;
        let clock = Clock::calibrate();
        let now = clock.now();
        let rate = clock.rate();
        let tspec = spec.thread(t);
        let d = Dispatcher::new(&tspec, rate, now, stats.clone(), metrics.clone());
        let http_cfg = intake_config(spec, rate);
        let conns: Box<[IntakeConn]> = (0..spec.intake_conns_max)
            .map(|_| IntakeConn {
                s: Sock::new(),
                live: false,
                eof: false,
                port: Port::Rotating,
                peer: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                http: Conn::new(&http_cfg),
            })
            .collect();
        let free_conns = (0..spec.intake_conns_max).rev().collect();
        let ups = (0..d.pair_count())
            .map(|_| UpSock {
                s: Sock::new(),
                connecting: false,
                connect_started: now,
                errno: 0,
                // SAFETY: all-zero is a valid sockaddr_storage.
                addr: unsafe { std::mem::zeroed() },
                addr_len: 0,
            })
            .collect();
        let ops_max = sq_entries_max(
            spec.intake_conns_max as usize,
            d.pair_count(),
            listen_fds.len(),
        );
        let mut w = Worker {
            ring,
            bufs: ManuallyDrop::new(bufs),
            backlog: VecDeque::with_capacity(ops_max),
            clock,
            d,
            stats,
            metrics,
            pairs_text,
            next_pairs_text: now,
            listeners: listen_fds
                .into_iter()
                .map(|(fd, port)| Listener {
                    fd,
                    port,
                    armed: false,
                })
                .collect(),
            conns,
            free_conns,
            http_cfg,
            clients: Clients::new(spec.intake_conns_max as usize),
            per_source_max: spec.intake_per_source_max.max(1),
            accept_error_logged: None,
            accept_errors_unlogged: 0,
            enter_error_logged: None,
            ups,
            connect_timeout: rate.from_ms(spec.connect_timeout_ms).0,
            tcp_user_timeout_ms: spec.tcp_user_timeout_ms,
            next_sweep: now,
            stopping: false,
            progress: Some((0, now)),
            started: now,
            live: spec.live.clone(),
            config_generation: 0,
            cqes: Vec::with_capacity(RING_ENTRIES as usize * 4),
            leak: false,
            accepting,
        };
        for i in 0..w.listeners.len() {
            w.arm_accept(i);
        }
        Ok(w)
    }

    /// Queues an entry. When the submission queue is full its entries are handed to the
    /// kernel at once (no wait); if it is still full (the kernel is short of memory, or the
    /// completion queue is overflowing) the entry waits in the backlog for the next
    /// [`Worker::enter`], which reaps first. Nothing here loops on the kernel.
    fn push(&mut self, e: squeue::Entry) {
        if self.backlog.is_empty() {
            // SAFETY: every buffer and address an entry points to lives in `self` (boxed,
            // never moved or freed while the operation is in flight: see the module docs).
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

    /// Runs until stopped and drained (`Ok`), or until the ring fails in a way no retry
    /// mends (`Err` with the reason).
    fn run(&mut self, stop: &AtomicBool, drain_ms: &AtomicU64) -> Result<(), String> {
        let mut drain_until: Option<Instant> = None;
        loop {
            let now = self.clock.now();
            self.stats.iterations.inc();
            self.reap(now);
            if let Some(live) = &self.live {
                // One atomic load an iteration; what a new generation changes is applied here,
                // between iterations, never in the middle of a request.
                let generation = live.load().generation;
                if generation != self.config_generation {
                    self.config_generation = generation;
                    self.stats.config_generation.set(generation);
                }
            }
            if stop.load(Ordering::Acquire) && !self.stopping {
                self.begin_stop(now);
                let ms = drain_ms.load(Ordering::Relaxed);
                drain_until = Some(now.after(self.clock.rate().from_ms(ms)));
            }
            self.d.dispatch(now);
            self.start_connects(now);
            self.close_requested(now);
            self.flush_upstream(now);
            if now.0 >= self.next_sweep.0 {
                self.d.sweep(now);
                self.sweep(now);
                self.sweep_intake(now);
                self.stats.log_lines_dropped.set(self.d.log().dropped());
                self.flush_upstream(now);
                self.close_requested(now);
                self.next_sweep = now.after(self.clock.rate().from_ms(SWEEP_MS));
                self.log_progress(now);
                if now.0 >= self.next_pairs_text.0 {
                    // Never waits: if the admin thread is reading, this refresh is skipped.
                    if let Ok(mut text) = self.pairs_text.try_lock() {
                        text.clear();
                        self.d.render_pairs(now, &mut text);
                    }
                    self.next_pairs_text = now.after(self.clock.rate().from_ms(1_000));
                }
            }
            if let Some(until) = drain_until {
                // Done when every admitted bundle ended and every client connection got its
                // last answer (or sat idle through the grace).
                let done = self.d.in_flight() == 0 && self.conns.iter().all(|c| !c.live);
                if done || now.0 >= until.0 {
                    if !done {
                        self.d.abandon_all(now);
                    }
                    self.teardown();
                    return Ok(());
                }
            }
            self.enter(now)?;
        }
    }

    /// Submits everything queued and waits for a completion or the next deadline. Errors the
    /// kernel returns under memory pressure (EAGAIN, ENOMEM) or with a full completion queue
    /// (EBUSY) are retried on the next iteration; any other is the thread's end.
    fn enter(&mut self, now: Instant) -> Result<(), String> {
        let rate = self.clock.rate();
        if !self.backlog.is_empty() {
            let _ = self.ring.submit();
            self.flush_backlog();
        }
        let mut deadline = self.next_sweep;
        if let Some(d) = self.d.next_deadline() {
            if d.0 < deadline.0 {
                deadline = d;
            }
        }
        let idle = now.after(rate.from_ms(IDLE_WAKE_MS));
        if idle.0 < deadline.0 {
            deadline = idle;
        }
        // Completions waiting, or entries still backlogged: come straight back.
        let wait_ns = if self.ring.completion().is_empty() && self.backlog.is_empty() {
            rate.to_ns(deadline.since(now))
        } else {
            0
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
                self.stats.ring_retries.inc();
                let quiet = self
                    .enter_error_logged
                    .is_some_and(|at| now.since(at).0 < rate.from_ms(ACCEPT_ERROR_LOG_MS).0);
                if !quiet {
                    self.d.log().line(format_args!(
                        "io_uring_enter: {e}; retrying ({} times so far)",
                        self.stats.ring_retries.get()
                    ));
                    self.enter_error_logged = Some(now);
                }
                std::thread::sleep(std::time::Duration::from_millis(ENTER_RETRY_PAUSE_MS));
                Ok(())
            }
            _ => Err(format!("stopped: io_uring_enter failed: {e}")),
        }
    }

    fn reap(&mut self, now: Instant) {
        loop {
            self.cqes.clear();
            for c in self.ring.completion() {
                self.cqes.push((c.user_data(), c.result(), c.flags()));
            }
            if self.cqes.is_empty() {
                break;
            }
            let mut batch = std::mem::take(&mut self.cqes);
            for &(u, res, flags) in &batch {
                self.complete(u, res, flags, now);
            }
            batch.clear();
            self.cqes = batch;
            self.bufs.publish();
        }
    }

    fn complete(&mut self, u: u64, res: i32, flags: u32, now: Instant) {
        let (kind, index, generation) = ud_parts(u);
        match kind {
            OP_ACCEPT => self.on_accept(index as usize, res, flags, now),
            OP_IN_RECV => self.on_in_recv(index, generation, res, flags, now),
            OP_IN_SEND => self.on_in_send(index, generation, res, now),
            OP_UP_CONNECT => self.on_up_connect(index, generation, res, now),
            OP_UP_RECV => self.on_up_recv(index, generation, res, flags, now),
            OP_UP_SEND => self.on_up_send(index, generation, res, now),
            OP_CANCEL => {}
            _ => debug_assert!(false, "unknown completion kind {kind}"),
        }
    }

    // ---- intake ----

    /// Arms listener `i`'s multishot accept, unless stopping or not listening yet (then the
    /// sweep arms it once the relay listens).
    fn arm_accept(&mut self, i: usize) {
        if self.stopping || !self.accepting.load(Ordering::Acquire) {
            return;
        }
        let l = &mut self.listeners[i];
        l.armed = true;
        let e = opcode::AcceptMulti::new(types::Fd(l.fd))
            .build()
            .user_data(ud(OP_ACCEPT, i as u32, 0));
        self.push(e);
    }

    fn on_accept(&mut self, i: usize, res: i32, flags: u32, now: Instant) {
        if !cqueue::more(flags) {
            self.listeners[i].armed = false;
            // After a connection the accept is re-armed at once; after an error (out of file
            // descriptors or memory) from the sweep, so a failing listener cannot spin here.
            if res >= 0 && !self.stopping {
                self.arm_accept(i);
            }
        }
        if res < 0 {
            if !self.stopping {
                self.accept_failed(-res, now);
            }
            return;
        }
        let fd = res as RawFd;
        if self.stopping {
            // SAFETY: a fresh fd we own.
            unsafe { libc::close(fd) };
            return;
        }
        let Some(peer) = socket::peer_ip(fd) else {
            // Gone before we looked.
            // SAFETY: a fresh fd we own.
            unsafe { libc::close(fd) };
            return;
        };
        // A full table or a client at its share is refused at once rather than queued.
        let refused = if self.free_conns.is_empty() {
            Some(&self.stats.intake_refused)
        } else if self.clients.count(peer) >= self.per_source_max {
            Some(&self.stats.intake_refused_per_source)
        } else {
            None
        };
        if let Some(counter) = refused {
            counter.inc();
            // SAFETY: a fresh fd we own.
            unsafe { libc::close(fd) };
            return;
        }
        let c = self.free_conns.pop().expect("checked above");
        socket::set_nodelay(fd);
        self.clients.add(peer);
        let port = self.listeners[i].port;
        let conn = &mut self.conns[c as usize];
        conn.s.fd = fd;
        conn.s.ops = 0;
        conn.s.sending = false;
        conn.s.closing = false;
        conn.live = true;
        conn.eof = false;
        conn.port = port;
        conn.peer = peer;
        conn.http.reset(now);
        self.stats
            .intake_conns
            .set(self.stats.intake_conns.get() + 1);
        self.arm_in_recv(c);
    }

    /// An accept failed: counted, logged at most every [`ACCEPT_ERROR_LOG_MS`], and the
    /// listener re-armed from the sweep.
    fn accept_failed(&mut self, errno: i32, now: Instant) {
        self.stats.accept_errors.inc();
        self.accept_errors_unlogged += 1;
        let quiet = self
            .accept_error_logged
            .is_some_and(|at| now.since(at).0 < self.clock.rate().from_ms(ACCEPT_ERROR_LOG_MS).0);
        if !quiet {
            self.d.log().line(format_args!(
                "accept failed: {} ({} times since the last line); the listener is re-armed every {SWEEP_MS} ms until it succeeds",
                std::io::Error::from_raw_os_error(errno),
                self.accept_errors_unlogged
            ));
            self.accept_errors_unlogged = 0;
            self.accept_error_logged = Some(now);
        }
    }

    fn arm_in_recv(&mut self, c: u32) {
        let conn = &mut self.conns[c as usize];
        if conn.s.closing || conn.s.recv_armed || conn.eof {
            return;
        }
        let e = conn.s.recv(OP_IN_RECV, c);
        self.push(e);
    }

    fn on_in_recv(&mut self, c: u32, generation: u32, res: i32, flags: u32, now: Instant) {
        let bid = cqueue::buffer_select(flags);
        let more = cqueue::more(flags);
        let conn = &mut self.conns[c as usize];
        let current = conn.s.generation == generation && conn.live;
        if !more && conn.s.generation == generation {
            conn.s.recv_armed = false;
            conn.s.ops -= 1;
        }
        if !current {
            if let Some(b) = bid {
                self.bufs.push(b);
            }
            self.maybe_release_conn(c);
            return;
        }
        if res > 0 {
            let b = bid.expect("a multishot recv with data names its buffer");
            let conn = &mut self.conns[c as usize];
            conn.http.handle_bytes(self.bufs.data(b, res as usize), now);
            self.bufs.push(b);
            self.serve_conn(c, now);
        } else if res == 0 {
            // The client shut its write side. It may still read: what it sent whole is
            // answered, then the connection closes (curl and HTTP/1.0-style clients do this).
            let conn = &mut self.conns[c as usize];
            conn.eof = true;
            conn.http.handle_eof(now);
            self.serve_conn(c, now);
        } else if res != -libc::ENOBUFS {
            // A reset or another error: nothing more can be read or sent.
            self.close_conn(c);
        }
        // ENOBUFS: the ring ran dry; its buffers come back this iteration, re-armed below.
        let conn = &self.conns[c as usize];
        if !conn.s.recv_armed && !conn.s.closing && conn.live {
            self.arm_in_recv(c);
        }
        self.maybe_release_conn(c);
    }

    /// Answers every complete request the connection holds (while its output has room), then
    /// sends what was written.
    fn serve_conn(&mut self, c: u32, now: Instant) {
        let conn = &mut self.conns[c as usize];
        let port = conn.port;
        let (d, stats, metrics, clock) = (&mut self.d, &self.stats, &self.metrics, &self.clock);
        let served = conn.http.serve(&self.http_cfg, now, |req, out| {
            let (n, verdict, method) = intake::handle(
                d,
                port,
                req.method,
                req.path,
                req.query,
                req.body,
                req.keep_alive,
                now,
                out,
            );
            stats.requests.inc();
            let outcome = match verdict {
                Verdict::RefusedCap => {
                    stats.refused_cap.inc();
                    ReqOutcome::RefusedCap
                }
                Verdict::Invalid => {
                    stats.bad_requests.inc();
                    ReqOutcome::Invalid
                }
                Verdict::Admitted | Verdict::Answered => ReqOutcome::Ok,
            };
            metrics.request(method, outcome);
            // Request read (this iteration's clock) to answer written: a clock read for the
            // metric only, so none with metrics off.
            if metrics.enabled() {
                let done = clock.now();
                metrics.record_overhead_ns(clock.rate().to_ns(done.since(now)));
            }
            n
        });
        if served.error.is_some() {
            self.stats.bad_requests.inc();
        }
        self.flush_conn(c);
    }

    /// Sends the connection's pending output (one send in flight at a time), or closes it when
    /// it is closing and owes nothing more.
    fn flush_conn(&mut self, c: u32) {
        let conn = &mut self.conns[c as usize];
        if !conn.live || conn.s.closing || conn.s.sending {
            return;
        }
        let data = conn.http.poll_transmit();
        if !data.is_empty() {
            let (ptr, len) = (data.as_ptr(), data.len() as u32);
            let e = conn.s.send(OP_IN_SEND, c, ptr, len);
            self.push(e);
            return;
        }
        if conn.http.poll_close().is_some() {
            self.close_conn(c);
        }
    }

    fn on_in_send(&mut self, c: u32, generation: u32, res: i32, now: Instant) {
        let conn = &mut self.conns[c as usize];
        if conn.s.generation != generation {
            return;
        }
        conn.s.sending = false;
        conn.s.ops -= 1;
        if !conn.live || conn.s.closing {
            self.maybe_release_conn(c);
            return;
        }
        if res <= 0 {
            self.close_conn(c);
            self.maybe_release_conn(c);
            return;
        }
        conn.http.handle_sent(res as usize, now);
        // Requests held back by a full output go now; then the rest is sent.
        self.serve_conn(c, now);
    }

    /// Stops a connection now: shutdown wakes its operations; the fd is closed and the slot
    /// freed when the last one completes.
    fn close_conn(&mut self, c: u32) {
        let conn = &mut self.conns[c as usize];
        if conn.s.closing || !conn.live {
            return;
        }
        conn.s.closing = true;
        // SAFETY: our fd; shutdown only ends its I/O.
        unsafe { libc::shutdown(conn.s.fd, libc::SHUT_RDWR) };
        self.maybe_release_conn(c);
    }

    fn maybe_release_conn(&mut self, c: u32) {
        let conn = &mut self.conns[c as usize];
        if !conn.live || !conn.s.closing || conn.s.ops > 0 {
            return;
        }
        // SAFETY: no operation refers to the fd any more.
        unsafe { libc::close(conn.s.fd) };
        conn.s.fd = -1;
        conn.live = false;
        conn.s.generation = conn.s.generation.wrapping_add(1);
        let peer = conn.peer;
        self.clients.remove(peer);
        self.free_conns.push(c);
        self.stats
            .intake_conns
            .set(self.stats.intake_conns.get().saturating_sub(1));
    }

    /// Each connection's deadlines: a late head is answered 408 and closed, an idle one and
    /// one whose client stopped reading are closed now.
    fn sweep_intake(&mut self, now: Instant) {
        for c in 0..self.conns.len() as u32 {
            let conn = &mut self.conns[c as usize];
            if !conn.live || conn.s.closing {
                continue;
            }
            let Some(reason) = conn.http.handle_timeout(&self.http_cfg, now) else {
                continue;
            };
            match reason {
                Close::HeadTimeout => self.stats.intake_head_timeouts.inc(),
                Close::SendTimeout => self.stats.intake_send_timeouts.inc(),
                Close::Idle => self.stats.intake_idle_closes.inc(),
                _ => {}
            }
            if reason.drains_output() {
                self.flush_conn(c);
            } else {
                self.close_conn(c);
            }
        }
        for i in 0..self.listeners.len() {
            if !self.listeners[i].armed {
                self.arm_accept(i);
            }
        }
    }

    // ---- upstream ----

    fn start_connects(&mut self, now: Instant) {
        if self.stopping {
            return;
        }
        while let Some(order) = self.d.poll_connect(now) {
            let p = order.pair.0;
            match socket::upstream(order.local, order.remote, self.tcp_user_timeout_ms) {
                Ok(fd) => {
                    let (addr, len) = socket::sockaddr(order.remote);
                    let u = &mut self.ups[p as usize];
                    u.s.fd = fd;
                    u.addr = addr;
                    u.addr_len = len;
                    u.connecting = true;
                    u.s.closing = false;
                    u.s.sending = false;
                    u.s.recv_armed = false;
                    u.connect_started = now;
                    u.s.ops = 1;
                    let e = opcode::Connect::new(
                        types::Fd(fd),
                        (&u.addr as *const libc::sockaddr_storage).cast(),
                        len,
                    )
                    .build()
                    .user_data(ud(OP_UP_CONNECT, p, u.s.generation));
                    self.push(e);
                }
                Err(e) => {
                    self.d
                        .connect_failed(order.pair, now, e.raw_os_error().unwrap_or(libc::EINVAL))
                }
            }
        }
    }

    fn on_up_connect(&mut self, p: u32, generation: u32, res: i32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.generation != generation {
            return;
        }
        u.s.ops -= 1;
        u.connecting = false;
        if res < 0 || u.s.closing {
            u.s.closing = true;
            u.errno = if res < 0 { -res } else { libc::ETIMEDOUT };
            self.release_up(p, now);
            return;
        }
        self.d.connected(PairId(p), now);
        self.arm_up_recv(p);
        self.flush_upstream(now);
    }

    fn arm_up_recv(&mut self, p: u32) {
        let u = &mut self.ups[p as usize];
        if u.s.closing || u.s.recv_armed || u.s.fd < 0 {
            return;
        }
        let e = u.s.recv(OP_UP_RECV, p);
        self.push(e);
    }

    fn on_up_recv(&mut self, p: u32, generation: u32, res: i32, flags: u32, now: Instant) {
        let bid = cqueue::buffer_select(flags);
        let more = cqueue::more(flags);
        let u = &mut self.ups[p as usize];
        let current = u.s.generation == generation;
        if current && !more {
            u.s.recv_armed = false;
            u.s.ops -= 1;
        }
        if !current || u.s.closing {
            if let Some(b) = bid {
                self.bufs.push(b);
            }
            if current {
                self.release_up(p, now);
            }
            return;
        }
        if res > 0 {
            let b = bid.expect("a multishot recv with data names its buffer");
            self.d
                .received(PairId(p), self.bufs.data(b, res as usize), now);
            self.bufs.push(b);
        } else if res != -libc::ENOBUFS {
            self.close_up(p, now);
            return;
        }
        if !self.ups[p as usize].s.recv_armed {
            self.arm_up_recv(p);
        }
    }

    fn flush_upstream(&mut self, now: Instant) {
        while let Some(pair) = self.d.poll_dirty() {
            let p = pair.0 as usize;
            let u = &self.ups[p];
            if u.s.fd < 0 || u.s.sending || u.connecting || u.s.closing {
                continue;
            }
            let data = self.d.transmit(pair, now);
            if data.is_empty() {
                continue;
            }
            let (ptr, len) = (data.as_ptr(), data.len() as u32);
            let e = self.ups[p].s.send(OP_UP_SEND, pair.0, ptr, len);
            self.push(e);
        }
    }

    fn on_up_send(&mut self, p: u32, generation: u32, res: i32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.generation != generation {
            return;
        }
        u.s.sending = false;
        u.s.ops -= 1;
        // Bytes that reached the socket count even on a connection being closed: whether a
        // request may have reached the engine depends on them.
        if res > 0 {
            self.d.transmitted(PairId(p), res as usize, now);
        }
        let u = &self.ups[p as usize];
        if u.s.closing {
            self.release_up(p, now);
            return;
        }
        if res < 0 {
            self.close_up(p, now);
        }
    }

    fn close_requested(&mut self, now: Instant) {
        while let Some(pair) = self.d.poll_close() {
            self.close_up(pair.0, now);
        }
    }

    fn close_up(&mut self, p: u32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.closing || u.s.fd < 0 {
            return;
        }
        u.s.closing = true;
        if u.connecting {
            let e = opcode::AsyncCancel::new(ud(OP_UP_CONNECT, p, u.s.generation))
                .build()
                .user_data(ud(OP_CANCEL, p, 0));
            self.push(e);
        } else {
            // SAFETY: our fd; shutdown ends its pending operations.
            unsafe { libc::shutdown(u.s.fd, libc::SHUT_RDWR) };
        }
        self.release_up(p, now);
    }

    /// Closes the fd once no operation refers to it, and tells the dispatcher (which knows
    /// whether that ends a connect or a connection).
    fn release_up(&mut self, p: u32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.ops > 0 || u.s.fd < 0 {
            return;
        }
        // SAFETY: no operation refers to the fd any more.
        unsafe { libc::close(u.s.fd) };
        u.s.fd = -1;
        u.s.closing = false;
        u.s.generation = u.s.generation.wrapping_add(1);
        let errno = std::mem::replace(&mut u.errno, 0);
        self.d.socket_released(PairId(p), now, errno);
    }

    // ---- timers and shutdown ----

    /// Upstream connects past their deadline.
    fn sweep(&mut self, now: Instant) {
        for p in 0..self.ups.len() as u32 {
            let u = &self.ups[p as usize];
            if u.connecting && !u.s.closing && now.since(u.connect_started).0 > self.connect_timeout
            {
                self.ups[p as usize].errno = libc::ETIMEDOUT;
                self.close_up(p, now);
            }
        }
    }

    /// While the pool comes up (thousands of connects and handshakes, `handshakes_max` at a
    /// time), one line a second on how far it got; one more when every pair is up.
    fn log_progress(&mut self, now: Instant) {
        let Some((last_up, last_at)) = self.progress else {
            return;
        };
        let rate = self.clock.rate();
        let up = self.stats.pairs_up.get();
        let total = self.d.pair_count() as u64;
        if up == total {
            self.d.log().line(format_args!(
                "all {total} pairs up after {} ms",
                rate.to_us(now.since(self.started)) / 1_000
            ));
            self.progress = None;
        } else if up != last_up && now.since(last_at).0 >= rate.from_ms(1_000).0 {
            self.d.log().line(format_args!(
                "{up} of {total} pairs up ({} connects, {} failures so far)",
                self.stats.connects.get(),
                self.stats.connect_failures.get()
            ));
            self.progress = Some((up, now));
        }
    }

    /// Stops accepting (a listener closed with its queue still holding connections hands them
    /// to another listener of its SO_REUSEPORT group when `net.ipv4.tcp_migrate_req` is 1) and
    /// starts draining every client connection ([`Conn::begin_drain`]).
    fn begin_stop(&mut self, now: Instant) {
        self.stopping = true;
        let idle_until = now.after(self.clock.rate().from_ms(DRAIN_IDLE_GRACE_MS));
        for l in &self.listeners {
            // SAFETY: our listening fd: shutdown ends its multishot accept.
            unsafe { libc::shutdown(l.fd, libc::SHUT_RDWR) };
        }
        for c in 0..self.conns.len() as u32 {
            if self.conns[c as usize].live {
                self.conns[c as usize].http.begin_drain(idle_until);
                self.flush_conn(c);
            }
        }
    }

    /// Operations the kernel still has: receives, sends, connects and accepts in flight.
    fn ops_in_flight(&self) -> u64 {
        let socks = self
            .conns
            .iter()
            .map(|c| &c.s)
            .chain(self.ups.iter().map(|u| &u.s));
        socks.map(|s| u64::from(s.ops)).sum::<u64>()
            + self.listeners.iter().filter(|l| l.armed).count() as u64
    }

    /// Closes everything and waits for the kernel to finish every operation, so no buffer
    /// it may write into is freed. Whatever is still in flight after [`TEARDOWN_WAIT_MS`] keeps
    /// its memory for the life of the process ([`Worker::leak`]).
    fn teardown(&mut self) {
        let now = self.clock.now();
        self.d.close_all(now);
        for p in 0..self.ups.len() as u32 {
            self.close_up(p, now);
        }
        for c in 0..self.conns.len() as u32 {
            self.close_conn(c);
        }
        let until = now.after(self.clock.rate().from_ms(TEARDOWN_WAIT_MS));
        loop {
            let now = self.clock.now();
            self.reap(now);
            self.close_requested(now);
            if self.ops_in_flight() == 0 || now.0 >= until.0 {
                break;
            }
            let _ = self.ring.submit();
            self.flush_backlog();
            let ts = types::Timespec::new().nsec(5_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
        }
        let left = self.ops_in_flight();
        if left > 0 {
            self.leak = true;
            self.d.log().line(format_args!(
                "{left} operations still in flight after {TEARDOWN_WAIT_MS} ms at shutdown: their buffers stay allocated"
            ));
        }
        for l in &self.listeners {
            // SAFETY: our listening fd, no longer used.
            unsafe { libc::close(l.fd) };
        }
    }
}

impl Drop for Worker {
    /// The receive buffers are unregistered from the ring before their memory goes (the
    /// ring's own teardown in the kernel is asynchronous). When operations may still be in
    /// flight, every buffer the kernel could write into is leaked instead of freed.
    fn drop(&mut self) {
        if self.leak {
            std::mem::forget(std::mem::take(&mut self.conns));
            std::mem::forget(std::mem::take(&mut self.ups));
            self.d.forget_connections();
            return;
        }
        if self
            .ring
            .submitter()
            .unregister_buf_ring(BUFFER_GROUP)
            .is_ok()
        {
            // SAFETY: dropped once, here; the kernel no longer refers to it.
            unsafe { ManuallyDrop::drop(&mut self.bufs) };
        }
    }
}

/// The intake connection limits of a relay spec, in this thread's clock ticks.
fn intake_config(spec: &Spec, rate: crate::clock::TickRate) -> ConnConfig {
    ConnConfig {
        limits: spec.http,
        response_bytes_max: RESPONSE_BYTES_MAX,
        out_bytes: INTAKE_OUT_BYTES,
        head_timeout: rate.from_ms(spec.head_timeout_ms),
        idle_timeout: rate.from_ms(spec.idle_timeout_ms),
        send_timeout: rate.from_ms(spec.send_timeout_ms),
    }
}

/// The most entries a thread can have queued at once, which sizes its backlog: per intake
/// connection a receive and a send; per pair a connect (or its cancel), a receive and a send;
/// per listener an accept.
pub fn sq_entries_max(intake_conns: usize, pairs: usize, listeners: usize) -> usize {
    2 * intake_conns + 3 * pairs + listeners
}
