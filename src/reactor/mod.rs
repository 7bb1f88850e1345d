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

use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;

use io_uring::{IoUring, cqueue, opcode, squeue, types};

use crate::clock::{Clock, Instant};
use crate::egress::socket;
use crate::http1;
use crate::limiter::PairId;
use crate::metrics::{ReqOutcome, ThreadMetrics};
use crate::relay::dispatch::Dispatcher;
use crate::relay::intake::{self, Port, Verdict};
use crate::relay::{Spec, StartError, Stats};

use bufring::BufRing;

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
/// Longest sleep with nothing timed, so a stop request is seen promptly.
const IDLE_WAKE_MS: u64 = 50;
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

/// One bot connection.
struct IntakeConn {
    s: Sock,
    live: bool,
    port: Port,
    input: Box<[u8]>,
    in_len: usize,
    out: Box<[u8]>,
    out_head: usize,
    out_tail: usize,
    /// Close once the output is sent (an error answered, `Connection: close`, shutdown).
    close_after_send: bool,
    /// When the first byte of a not yet complete request arrived.
    partial_since: Option<Instant>,
    /// `100 Continue` was written for the request now arriving.
    continue_sent: bool,
    last_active: Instant,
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
    thread: usize,
    ring: IoUring,
    bufs: BufRing,
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
    ups: Box<[UpSock]>,
    limits: http1::Limits,
    head_timeout: u64,
    idle_timeout: u64,
    connect_timeout: u64,
    next_sweep: Instant,
    stopping: bool,
    /// Pairs up at the last progress line, until every pair was up once.
    progress: Option<(u64, Instant)>,
    started: Instant,
    live: Option<Arc<crate::config::Shared>>,
    config_generation: u64,
    cqes: Vec<(u64, i32, u32)>,
}

/// A thread's whole life: set up, run until stopped and drained, tear down.
#[allow(clippy::too_many_arguments)]
pub fn run_thread(
    spec: &Spec,
    t: usize,
    listen_fds: Vec<(RawFd, Port)>,
    stats: Arc<Stats>,
    metrics: Arc<ThreadMetrics>,
    pairs_text: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    drain_ms: Arc<AtomicU64>,
    ready: Sender<Result<(), StartError>>,
) {
    if spec.pin_threads {
        pin_to_cpu(t);
    }
    let mut w = match Worker::new(spec, t, listen_fds, stats, metrics, pairs_text) {
        Ok(w) => w,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    w.run(&stop, &drain_ms);
    w.stats.stopped.store(1);
}

fn pin_to_cpu(t: usize) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: a zeroed cpu_set_t with one bit set, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(t % cpus, &mut set);
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
    ) -> Result<Worker, StartError> {
        let ring = build_ring().map_err(StartError::Ring)?;
        let bufs = BufRing::new(&ring, BUFFER_GROUP, RECV_BUFFERS, RECV_BUFFER_BYTES)
            .map_err(StartError::Ring)?;
        let clock = Clock::calibrate();
        let now = clock.now();
        let rate = clock.rate();
        let tspec = spec.thread(t);
        let d = Dispatcher::new(&tspec, rate, now, stats.clone(), metrics.clone());
        let in_bytes = spec.http.head_bytes_max + spec.http.body_bytes_max;
        let conns: Box<[IntakeConn]> = (0..spec.intake_conns_max)
            .map(|_| IntakeConn {
                s: Sock::new(),
                live: false,
                port: Port::Rotating,
                input: vec![0u8; in_bytes].into_boxed_slice(),
                in_len: 0,
                out: vec![0u8; INTAKE_OUT_BYTES].into_boxed_slice(),
                out_head: 0,
                out_tail: 0,
                close_after_send: false,
                partial_since: None,
                continue_sent: false,
                last_active: now,
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
        let mut w = Worker {
            thread: t,
            ring,
            bufs,
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
            ups,
            limits: spec.http,
            head_timeout: rate.from_ms(spec.head_timeout_ms).0,
            idle_timeout: rate.from_ms(spec.idle_timeout_ms).0,
            connect_timeout: rate.from_ms(spec.connect_timeout_ms).0,
            next_sweep: now,
            stopping: false,
            progress: Some((0, now)),
            started: now,
            live: spec.live.clone(),
            config_generation: 0,
            cqes: Vec::with_capacity(RING_ENTRIES as usize * 4),
        };
        for i in 0..w.listeners.len() {
            w.arm_accept(i);
        }
        Ok(w)
    }

    fn push(&mut self, e: squeue::Entry) {
        // SAFETY: every buffer and address an entry points to lives in `self` (boxed, never
        // moved or freed while the operation is in flight: see the module docs).
        while unsafe { self.ring.submission().push(&e) }.is_err() {
            let _ = self.ring.submit();
        }
    }

    fn run(&mut self, stop: &AtomicBool, drain_ms: &AtomicU64) {
        let mut drain_until: Option<Instant> = None;
        loop {
            let now = self.clock.now();
            self.reap(now);
            if let Some(live) = &self.live {
                // One atomic load an iteration; what a new generation changes is applied here,
                // between iterations, never in the middle of a request.
                let generation = live.load().generation;
                if generation != self.config_generation {
                    self.config_generation = generation;
                    self.stats.config_generation.store(generation);
                }
            }
            if stop.load(Ordering::Acquire) && !self.stopping {
                self.begin_stop();
                let ms = drain_ms.load(Ordering::Relaxed);
                drain_until = Some(now.after(self.clock.rate().from_ms(ms)));
            }
            self.d.dispatch(now);
            self.start_connects(now);
            self.close_requested(now);
            self.flush_upstream(now);
            while let Some(line) = self.d.poll_log() {
                eprintln!("relay-{}: {line}", self.thread);
            }
            if now.0 >= self.next_sweep.0 {
                self.d.sweep(now);
                self.sweep(now);
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
                let done = self.d.in_flight() == 0;
                if done || now.0 >= until.0 {
                    if !done {
                        self.d.abandon_all(now);
                    }
                    self.teardown();
                    return;
                }
            }
            self.enter(now);
        }
    }

    /// Submits everything queued and waits for a completion or the next deadline.
    fn enter(&mut self, now: Instant) {
        let rate = self.clock.rate();
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
        let wait_ns = if self.ring.completion().is_empty() {
            rate.to_ns(deadline.since(now))
        } else {
            0
        };
        let ts = types::Timespec::new()
            .sec(wait_ns / 1_000_000_000)
            .nsec((wait_ns % 1_000_000_000) as u32);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                // The completion queue is full: reap before submitting more.
            }
            Err(e) => panic!("io_uring_enter failed: {e}"),
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

    fn arm_accept(&mut self, i: usize) {
        if self.stopping {
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
            if !self.stopping {
                self.arm_accept(i);
            }
        }
        if res < 0 {
            return;
        }
        let fd = res as RawFd;
        if self.stopping {
            // SAFETY: a fresh fd we own.
            unsafe { libc::close(fd) };
            return;
        }
        let Some(c) = self.free_conns.pop() else {
            // Table full: refuse at once rather than queue a connection we cannot serve.
            self.stats.intake_refused.bump();
            self.metrics.intake_refused();
            // SAFETY: a fresh fd we own.
            unsafe { libc::close(fd) };
            return;
        };
        socket::set_nodelay(fd);
        let port = self.listeners[i].port;
        let conn = &mut self.conns[c as usize];
        conn.s.fd = fd;
        conn.live = true;
        conn.port = port;
        conn.in_len = 0;
        conn.out_head = 0;
        conn.out_tail = 0;
        conn.s.sending = false;
        conn.s.closing = false;
        conn.close_after_send = false;
        conn.partial_since = None;
        conn.continue_sent = false;
        conn.last_active = now;
        conn.s.ops = 0;
        self.stats
            .intake_conns
            .store(self.stats.intake_conns.get() + 1);
        self.metrics
            .set_intake_connections(self.stats.intake_conns.get());
        self.arm_in_recv(c);
    }

    fn arm_in_recv(&mut self, c: u32) {
        let conn = &mut self.conns[c as usize];
        if conn.s.closing || conn.s.recv_armed {
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
            self.intake_bytes(c, b, res as usize, now);
            self.bufs.push(b);
        } else if res == -libc::ENOBUFS {
            // The ring ran dry: buffers come back this iteration; re-arm below.
        } else {
            // EOF or error: nothing more from this client.
            self.close_conn(c);
        }
        if !self.conns[c as usize].s.recv_armed && !self.conns[c as usize].s.closing {
            self.arm_in_recv(c);
        }
        self.maybe_release_conn(c);
    }

    /// New bytes for a connection: requests are parsed straight from the ring buffer when
    /// nothing is pending, otherwise appended to the connection's input first.
    fn intake_bytes(&mut self, c: u32, bid: u16, len: usize, now: Instant) {
        let conn = &mut self.conns[c as usize];
        conn.last_active = now;
        let data_len = len;
        if conn.in_len + data_len > conn.input.len() {
            // More than the largest allowed request is pending: the limits reject it.
            let err = http1::HttpError {
                status: 413,
                what: "request larger than the head and body limits together",
            };
            self.answer_error(c, &err);
            return;
        }
        let start = conn.in_len;
        conn.input[start..start + data_len].copy_from_slice(self.bufs.data(bid, data_len));
        conn.in_len += data_len;
        self.process_input(c, now);
    }

    /// Parses and answers every complete request in the connection's input, while the output
    /// has room for another response.
    fn process_input(&mut self, c: u32, now: Instant) {
        let mut pos = 0;
        loop {
            let conn = &mut self.conns[c as usize];
            if conn.close_after_send || conn.s.closing {
                break;
            }
            if conn.out.len() - conn.out_tail < RESPONSE_BYTES_MAX {
                if conn.s.sending || conn.out_head == 0 {
                    break;
                }
                conn.out.copy_within(conn.out_head..conn.out_tail, 0);
                conn.out_tail -= conn.out_head;
                conn.out_head = 0;
                continue;
            }
            if pos == conn.in_len {
                break;
            }
            match http1::frame(&conn.input[pos..conn.in_len], &self.limits) {
                Ok(http1::Framed::NeedHead { .. }) => {
                    if conn.partial_since.is_none() {
                        conn.partial_since = Some(now);
                    }
                    break;
                }
                Ok(http1::Framed::NeedBody {
                    expect_continue, ..
                }) => {
                    if conn.partial_since.is_none() {
                        conn.partial_since = Some(now);
                    }
                    // A client that sent `Expect: 100-continue` waits for this before its
                    // body (curl does for large bodies); once per request. The output has
                    // room: a whole response's worth was checked above.
                    if expect_continue && !conn.continue_sent {
                        let n = http1::CONTINUE.len();
                        conn.out[conn.out_tail..conn.out_tail + n].copy_from_slice(http1::CONTINUE);
                        conn.out_tail += n;
                        conn.continue_sent = true;
                    }
                    break;
                }
                Ok(http1::Framed::Request(req)) => {
                    conn.partial_since = None;
                    conn.continue_sent = false;
                    let used = req.len;
                    let keep_alive = req.keep_alive;
                    let (path, query) = (req.path, req.query);
                    let out = &mut conn.out[conn.out_tail..];
                    let (n, verdict, method) = intake::handle(
                        &mut self.d,
                        conn.port,
                        req.method,
                        path,
                        query,
                        req.body,
                        keep_alive,
                        now,
                        out,
                    );
                    let conn = &mut self.conns[c as usize];
                    conn.out_tail += n;
                    pos += used;
                    self.stats.requests.bump();
                    let outcome = match verdict {
                        Verdict::RefusedCap => {
                            self.stats.refused_cap.bump();
                            ReqOutcome::RefusedCap
                        }
                        Verdict::Invalid => {
                            self.stats.bad_requests.bump();
                            ReqOutcome::Invalid
                        }
                        Verdict::Admitted | Verdict::Answered => ReqOutcome::Ok,
                    };
                    self.metrics.request(method, outcome);
                    // Request read (this iteration's clock) to answer written: a clock read
                    // for the metric only, so none with metrics off.
                    if self.metrics.enabled() {
                        let done = self.clock.now();
                        self.metrics
                            .record_overhead_ns(self.clock.rate().to_ns(done.since(now)));
                    }
                    if !keep_alive {
                        self.conns[c as usize].close_after_send = true;
                    }
                }
                Err(e) => {
                    self.stats.bad_requests.bump();
                    let conn = &mut self.conns[c as usize];
                    let out = &mut conn.out[conn.out_tail..];
                    if let Some(n) = http1::write_error(out, &e) {
                        conn.out_tail += n;
                    }
                    conn.close_after_send = true;
                    pos = conn.in_len;
                }
            }
        }
        let conn = &mut self.conns[c as usize];
        if pos > 0 {
            conn.input.copy_within(pos..conn.in_len, 0);
            conn.in_len -= pos;
        }
        self.flush_conn(c);
    }

    fn answer_error(&mut self, c: u32, err: &http1::HttpError) {
        self.stats.bad_requests.bump();
        let conn = &mut self.conns[c as usize];
        if let Some(n) = http1::write_error(&mut conn.out[conn.out_tail..], err) {
            conn.out_tail += n;
        }
        conn.in_len = 0;
        conn.close_after_send = true;
        self.flush_conn(c);
    }

    fn flush_conn(&mut self, c: u32) {
        let conn = &mut self.conns[c as usize];
        if conn.s.closing || conn.s.sending {
            return;
        }
        if conn.out_head == conn.out_tail {
            if conn.close_after_send {
                self.close_conn(c);
            }
            return;
        }
        let (ptr, len) = (
            conn.out[conn.out_head..].as_ptr(),
            (conn.out_tail - conn.out_head) as u32,
        );
        let e = conn.s.send(OP_IN_SEND, c, ptr, len);
        self.push(e);
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
        conn.out_head += res as usize;
        if conn.out_head == conn.out_tail {
            conn.out_head = 0;
            conn.out_tail = 0;
        }
        conn.last_active = now;
        if conn.in_len > 0 {
            // Requests held back by a full output buffer.
            self.process_input(c, now);
        } else {
            self.flush_conn(c);
        }
    }

    /// Stops a connection: shutdown wakes its operations; the fd is closed and the slot freed
    /// when the last one completes.
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
        self.free_conns.push(c);
        self.stats
            .intake_conns
            .store(self.stats.intake_conns.get().saturating_sub(1));
        self.metrics
            .set_intake_connections(self.stats.intake_conns.get());
    }

    // ---- upstream ----

    fn start_connects(&mut self, now: Instant) {
        if self.stopping {
            return;
        }
        while let Some(order) = self.d.poll_connect(now) {
            let p = order.pair.0;
            match socket::upstream(order.local, order.remote) {
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
            self.release_up(p, now, false);
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
                self.release_up(p, now, true);
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
        if u.s.closing {
            self.release_up(p, now, true);
            return;
        }
        if res < 0 {
            self.close_up(p, now);
            return;
        }
        self.d.transmitted(PairId(p), res as usize, now);
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
        self.release_up(p, now, true);
    }

    /// Closes the fd once no operation refers to it, and tells the dispatcher.
    fn release_up(&mut self, p: u32, now: Instant, was_connected: bool) {
        let u = &mut self.ups[p as usize];
        if u.s.ops > 0 || u.s.fd < 0 {
            return;
        }
        // SAFETY: no operation refers to the fd any more.
        unsafe { libc::close(u.s.fd) };
        u.s.fd = -1;
        u.s.closing = false;
        u.s.generation = u.s.generation.wrapping_add(1);
        let connected =
            was_connected && self.d.link(PairId(p)) != crate::relay::dispatch::Link::Connecting;
        if connected {
            self.d.transport_closed(PairId(p), now);
        } else {
            let errno = std::mem::replace(&mut self.ups[p as usize].errno, 0);
            self.d.connect_failed(PairId(p), now, errno);
        }
    }

    // ---- timers and shutdown ----

    fn sweep(&mut self, now: Instant) {
        for c in 0..self.conns.len() as u32 {
            let conn = &self.conns[c as usize];
            if !conn.live || conn.s.closing {
                continue;
            }
            let head_late = conn
                .partial_since
                .is_some_and(|t| now.since(t).0 > self.head_timeout);
            let idle = conn.in_len == 0
                && !conn.s.sending
                && now.since(conn.last_active).0 > self.idle_timeout;
            if head_late || idle {
                self.close_conn(c);
            }
        }
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
            eprintln!(
                "relay-{}: all {total} pairs up after {} ms",
                self.thread,
                rate.to_us(now.since(self.started)) / 1_000
            );
            self.progress = None;
        } else if up != last_up && now.since(last_at).0 >= rate.from_ms(1_000).0 {
            eprintln!(
                "relay-{}: {up} of {total} pairs up ({} connects, {} failures so far)",
                self.thread,
                self.stats.connects.get(),
                self.stats.connect_failures.get()
            );
            self.progress = Some((up, now));
        }
    }

    fn begin_stop(&mut self) {
        self.stopping = true;
        for l in &self.listeners {
            // SAFETY: our listening fd: shutdown ends its multishot accept.
            unsafe { libc::shutdown(l.fd, libc::SHUT_RDWR) };
        }
        for c in 0..self.conns.len() as u32 {
            if self.conns[c as usize].live {
                self.conns[c as usize].close_after_send = true;
                self.flush_conn(c);
            }
        }
    }

    fn teardown(&mut self) {
        let now = self.clock.now();
        self.d.close_all(now);
        for p in 0..self.ups.len() as u32 {
            self.close_up(p, now);
        }
        for c in 0..self.conns.len() as u32 {
            self.close_conn(c);
        }
        // Let every operation end before the fds and buffers go away.
        let until = now.after(self.clock.rate().from_ms(1_000));
        loop {
            let now = self.clock.now();
            self.reap(now);
            self.close_requested(now);
            let busy = self.ups.iter().any(|u| u.s.fd >= 0)
                || self.conns.iter().any(|c| c.live)
                || self.listeners.iter().any(|l| l.armed);
            if !busy || now.0 >= until.0 {
                break;
            }
            let ts = types::Timespec::new().nsec(5_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
        }
        for l in &self.listeners {
            // SAFETY: our listening fd, no longer used.
            unsafe { libc::close(l.fd) };
        }
    }
}
