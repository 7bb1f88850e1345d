//! The reactor: one io_uring event loop per thread, the only place the relay does I/O.
//!
//! Each iteration reads the clock once, handles every completion, lets the dispatcher send
//! what it can, queues the resulting sends and connects, and enters the kernel once to submit
//! them and wait for the next completion or the dispatcher's next deadline, whichever comes
//! first. Nothing spins: with no work and no deadline the thread sleeps in `io_uring_enter`.
//!
//! The files, one job each: `ring` (submissions, the one enter per iteration, completions),
//! `op` (operation lifecycles: kind, socket index and generation in `user_data`), `bufring`
//! (the provided receive buffers), `intake` (listeners and bot connections), `upstream` (the
//! pairs' sockets), `socket` (socket setup), `clients` (connections per client address), `cx`
//! (what a completion handler works with). Receives are multishot from a provided-buffer ring;
//! one that ends (no `F_MORE`, or `ENOBUFS` when the ring ran dry) is re-armed. Each socket has
//! at most one send in flight; bytes produced meanwhile are appended behind it and sent when it
//! completes. Decisions are the sans-IO layers' (`http1::conn` for a bot connection, the
//! dispatcher for everything upstream); the reactor moves their bytes.

mod bufring;
mod clients;
mod cx;
mod intake;
mod op;
mod ring;
pub mod socket;
mod upstream;

use std::mem::ManuallyDrop;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use crate::clock::{Clock, Instant};
use crate::http1::conn::ConnConfig;
use crate::log::LogQueue;
use crate::mesh::Mesh;
use crate::metrics::ThreadMetrics;
use crate::metrics::accounting::Stats;
use crate::relay::Spec;
use crate::relay::dispatch::Dispatcher;
use crate::relay::intake::Port;
use crate::relay::tuning::Tuning;

use bufring::{BufRing, INTAKE_GROUP, RecvBuffers, UPSTREAM_GROUP};
pub use clients::Clients;
use cx::{Cx, SWEEP_MS};
use intake::Intake;
pub use intake::{INTAKE_OUT_BYTES, INTAKE_RECORD_BYTES};
use op::{
    OP_ACCEPT, OP_CANCEL, OP_CLOSE, OP_IN_RECV, OP_IN_SEND, OP_IN_SHUTDOWN, OP_REFUSAL,
    OP_SEND_GUARD, OP_UP_CONNECT, OP_UP_RECV, OP_UP_SEND, OP_UP_SHUTDOWN, OP_UP_SOCKOPT, OP_WAKE,
};
use ring::Ring;
pub use ring::{CQ_ENTRIES, Completion, page_bytes, ring_memory_bytes};
pub use upstream::PAIR_SOCKET_BYTES;
use upstream::UpSocks;

pub use bufring::{
    INTAKE_RECV_BUFFER_BYTES, INTAKE_RECV_BUFFERS, RECV_RING_ENTRY_BYTES,
    UPSTREAM_RECV_BUFFER_BYTES, UPSTREAM_RECV_BUFFERS,
};
/// While draining, a client connection with nothing in progress is closed after this long; one
/// that sends a request meanwhile gets its answer with `Connection: close`. Long enough that a
/// client under load sends its next request (and learns to reconnect) rather than race the
/// close; short enough that a stop is not held up by idle keep-alive clients.
pub const DRAIN_IDLE_GRACE_MS: u64 = 1_000;
/// Longest sleep with nothing timed, so a stop request is seen promptly.
const IDLE_WAKE_MS: u64 = 50;
/// How long teardown waits for the kernel to finish every operation before it leaves their
/// buffers allocated rather than free memory the kernel may still write.
const TEARDOWN_WAIT_MS: u64 = 1_000;

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
    /// The threads' mesh: where this thread hands bundles to others and gets theirs.
    pub mesh: Arc<Mesh>,
    /// Every thread's record of recent bundles (this thread writes its own).
    pub journals: Arc<crate::journal::Journals>,
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
        mesh,
        journals,
    } = args;
    if spec.pin_threads {
        pin_to_cpu(t);
    }
    let shared = Shared {
        stats,
        metrics,
        pairs_text,
        accepting,
        mesh,
        journals,
    };
    let mesh = shared.mesh.clone();
    let mut w = match Worker::new(&spec, t, listen_fds, shared) {
        Ok(w) => w,
        Err(e) => {
            // Lent nothing and never will: the others need not wait for it at shutdown.
            mesh.close(t);
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(w.d.log().clone()));
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.run(&stop, &drain_ms)));
    let (why, records_intact) = match outcome {
        Ok(Ok(())) => (None, true),
        Ok(Err(why)) => (Some(why), true),
        Err(panic) => (
            Some(format!(
                "panicked: {}",
                panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("(no message)")
            )),
            false,
        ),
    };
    if let Some(why) = why {
        // Said first: the relay stops on it, and only then do the other threads close.
        if let Ok(mut f) = failure.lock() {
            *f = Some(format!("reactor thread relay-{t} {why}"));
        }
        if records_intact {
            // The ring failed, not the thread's records: what it holds, and what others
            // handed it (their bots were answered), ends as failed and counted, as at a drain
            // deadline, until no thread can hand it more.
            w.d.end_after_failure(w.clock.now());
            w.leave_mesh();
        }
        // The kernel may still own buffers of a loop that did not end cleanly, and the other
        // threads may still write into slots this one lent them: its arena stays too. They
        // route around it and take none of its credits from now on (told through the mesh
        // itself: a panic may have left the dispatcher without its side of it).
        w.leak = true;
        mesh.close(t);
        w.d.forget_arena();
    }
    w.stats.stopped.set(1);
}

/// Pins the calling thread to [`pinned_cpu`]`(t)`.
fn pin_to_cpu(t: usize) {
    let Some(cpu) = pinned_cpu(t) else {
        return;
    };
    // SAFETY: a zeroed cpu_set_t with one bit set, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The CPU a pinned thread `t` runs on: the `t`-th the calling thread may run on (so a unit's
/// `CPUAffinity=2-15` puts thread 0 on CPU 2), wrapping around when there are more threads than
/// CPUs; `None` when the affinity cannot be read.
pub fn pinned_cpu(t: usize) -> Option<usize> {
    // SAFETY: a zeroed cpu_set_t filled by the kernel for the calling thread.
    let allowed = unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return None;
        }
        allowed
    };
    // SAFETY: reads bits of a set the kernel filled.
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &allowed) })
        .collect();
    (!cpus.is_empty()).then(|| cpus[t % cpus.len()])
}

/// What a worker shares with the relay and the other threads.
struct Shared {
    stats: Arc<Stats>,
    metrics: Arc<ThreadMetrics>,
    pairs_text: Arc<Mutex<String>>,
    accepting: Arc<AtomicBool>,
    mesh: Arc<Mesh>,
    journals: Arc<crate::journal::Journals>,
}

/// One reactor thread: its ring, receive buffers, dispatcher, intake and pair sockets.
struct Worker {
    ring: Ring,
    /// Dropped by hand: unregistered from the ring first, or leaked when the kernel may still
    /// write into it (see [`Worker::teardown`]).
    bufs: ManuallyDrop<RecvBuffers>,
    clock: Clock,
    d: Dispatcher,
    stats: Arc<Stats>,
    metrics: Arc<ThreadMetrics>,
    intake: Intake,
    ups: UpSocks,
    /// This thread's pair states as text for the admin's /debug/pairs, refreshed each second.
    pairs_text: Arc<Mutex<String>>,
    next_pairs_text: Instant,
    next_sweep: Instant,
    stopping: bool,
    /// Pairs up at the last progress line, until every pair was up once.
    progress: Option<(u64, Instant)>,
    started: Instant,
    live: Option<Arc<crate::config::Shared>>,
    config_generation: u64,
    /// The regions the relay runs (a reload's regions are matched to these by name).
    regions: Vec<crate::relay::RegionSpec>,
    /// Operations may still be in flight at teardown: their memory is never freed.
    leak: bool,
    /// The listeners are listening: accepts are armed only once this is set (a process taking
    /// over brings its pool up before it listens).
    accepting: Arc<AtomicBool>,
    mesh: Arc<Mesh>,
    /// This thread's index in the mesh.
    me: usize,
}

/// Borrows what a completion handler works with from the worker's fields, leaving `intake`
/// and `ups` free for the handler itself.
macro_rules! cx {
    ($w:ident) => {
        Cx {
            ring: &mut $w.ring,
            bufs: &mut $w.bufs,
            d: &mut $w.d,
            stats: &$w.stats,
            metrics: &$w.metrics,
            clock: &$w.clock,
            stopping: $w.stopping,
            accepting: $w.accepting.load(Ordering::Acquire),
        }
    };
}

impl Worker {
    fn new(
        spec: &Spec,
        t: usize,
        listen_fds: Vec<(RawFd, Port)>,
        shared: Shared,
    ) -> std::io::Result<Worker> {
        let Shared {
            stats,
            metrics,
            pairs_text,
            accepting,
            mesh,
            journals,
        } = shared;
        let clock = Clock::calibrate();
        let now = clock.now();
        let rate = clock.rate();
        let tspec = spec.thread(t);
        let mut d = Dispatcher::with_journal(
            &tspec,
            rate,
            now,
            stats.clone(),
            metrics.clone(),
            journals,
            t,
        );
        if spec.handoffs && mesh.threads() > 1 {
            d.join(mesh.clone(), t);
        }
        let backlog = sq_entries_max(
            spec.intake_conns_max as usize,
            d.pair_count(),
            listen_fds.len(),
        );
        // Every pair's HTTP/2 transmit and receive buffers in one zeroed slab, before any
        // connects: its pages are resident only once a connection writes them.
        crate::h2::storage::reserve(
            d.pair_count() * crate::h2::conn::Connection::slab_bytes_per_connection(&spec.h2),
        );
        // And the one list every connection of the thread decodes a gone stream's headers into.
        crate::h2::discard::reserve(&spec.h2);
        let ring = Ring::new(backlog, spec.reactor)?;
        let bufs = RecvBuffers {
            intake: BufRing::new(
                ring.io_uring(),
                INTAKE_GROUP,
                INTAKE_RECV_BUFFERS,
                INTAKE_RECV_BUFFER_BYTES,
            )?,
            upstream: BufRing::new(
                ring.io_uring(),
                UPSTREAM_GROUP,
                UPSTREAM_RECV_BUFFERS,
                UPSTREAM_RECV_BUFFER_BYTES,
            )?,
        };
        let intake = Intake::new(
            listen_fds,
            spec.intake_conns_max,
            spec.intake_per_source_max,
            intake_config(spec, rate),
        );
        let ups = UpSocks::new(
            d.pair_count(),
            rate.from_ms(spec.connect_timeout_ms).0,
            spec.tcp_user_timeout_ms,
            spec.ping_idle_ms == 0,
            now,
        );
        let mut w = Worker {
            ring,
            bufs: ManuallyDrop::new(bufs),
            clock,
            d,
            stats,
            metrics,
            intake,
            ups,
            pairs_text,
            next_pairs_text: now,
            next_sweep: now,
            stopping: false,
            progress: Some((0, now)),
            started: now,
            live: spec.live.clone(),
            // The spec was built from the snapshot current now: only later ones change it.
            config_generation: spec.live.as_ref().map_or(0, |l| l.load().generation),
            regions: spec.regions.clone(),
            leak: false,
            accepting,
            mesh,
            me: t,
        };
        w.stats.config_generation.set(w.config_generation);
        w.mesh.set_ring_fd(t, w.ring.as_raw_fd());
        w.intake.arm_accepts(&mut cx!(w));
        Ok(w)
    }

    /// A reload's settings, applied between iterations: the dispatcher's (ages, paces,
    /// regions and sources retired or back, call and connect settings), the intake's timeouts
    /// and upstream sockets' options (open ones too, through the ring).
    fn retune(&mut self, t: &Tuning, now: Instant) {
        self.d.retune(t, now);
        let rate = self.clock.rate();
        self.intake.set_timeouts(
            rate.from_ms(t.head_timeout_ms),
            rate.from_ms(t.idle_timeout_ms),
            rate.from_ms(t.send_timeout_ms),
        );
        self.ups.retune(
            &mut cx!(self),
            rate.from_ms(t.connect_timeout_ms).0,
            t.tcp_user_timeout_ms,
            t.ping_idle_ms == 0,
        );
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
                let snapshot = live.load();
                if snapshot.generation != self.config_generation {
                    self.config_generation = snapshot.generation;
                    let tuning = Tuning {
                        tenants: Some(snapshot.tenants.clone()),
                        ..Tuning::of(&snapshot.config, &self.regions)
                    };
                    drop(snapshot);
                    self.retune(&tuning, now);
                    self.stats.config_generation.set(self.config_generation);
                }
            }
            if stop.load(Ordering::Acquire) && !self.stopping {
                self.stopping = true;
                self.ring.end_quiet();
                let idle_until = now.after(self.clock.rate().from_ms(DRAIN_IDLE_GRACE_MS));
                self.intake.begin_stop(&mut cx!(self), now, idle_until);
                let ms = drain_ms.load(Ordering::Relaxed);
                let until = now.after(self.clock.rate().from_ms(ms));
                // What the drain still admits must go out before it ends.
                self.d.drain_until(until);
                drain_until = Some(until);
            }
            self.d.run_timers(now);
            self.d.dispatch(now);
            self.answer_queries(now);
            self.wake_peers();
            self.upstream_work(now);
            if now.0 >= self.next_sweep.0 {
                self.sweep(now);
            }
            if let Some(until) = drain_until {
                // Done when every admitted bundle ended, every client connection got its last
                // answer (or sat idle through the grace) and no other thread has a bundle on
                // its way here; torn down once every thread is (none can hand off any more).
                let done =
                    self.d.in_flight() == 0 && self.intake.is_empty() && !self.d.has_inbound();
                self.mesh.set_drained(self.me, done);
                if (done && self.mesh.all_drained_for(self.me)) || now.0 >= until.0 {
                    // No thread routes to this one from here on: what teardown still admits
                    // stays here or goes to a thread that is not stopping.
                    self.d.leave();
                    if !done {
                        self.d.abandon_all(now);
                    }
                    self.teardown();
                    self.leave_mesh();
                    return Ok(());
                }
            }
            self.d.file_timers();
            let deadline = self.deadline(now);
            let (rate, log) = (self.clock.rate(), self.d.log().clone());
            // Said before looking for handoffs, so a thread handing this one a bundle after the
            // look sees it and wakes it (the mesh's sequentially consistent pair).
            // A polling thread never sleeps, so it is never marked so (and never woken).
            let polls = self.ring.polls();
            if !polls {
                self.mesh.set_sleeping(self.me, true);
            }
            let may_sleep = !self.d.has_inbound();
            // Read again: the time this iteration's sends go out, and what is left until the
            // deadline.
            let now = self.clock.now();
            let entered = self
                .ring
                .enter(now, deadline, may_sleep, rate, &self.stats, &log);
            if !polls {
                self.mesh.set_sleeping(self.me, false);
            }
            entered?;
        }
    }

    /// Writes the answer of every status query an engine answered (or the relay stopped waiting
    /// for) to the bot that asked.
    fn answer_queries(&mut self, now: Instant) {
        while let Some((conn, q)) = self.d.poll_answered() {
            self.intake.answer_owed(&mut cx!(self), conn, q, now);
            self.d.free_query(q);
        }
    }

    /// Wakes each thread this one handed bundles to, when it sleeps in the kernel: an io_uring
    /// `MSG_RING` to its ring (no eventfd, no lock; none at all for a thread awake).
    fn wake_peers(&mut self) {
        while let Some(peer) = self.d.poll_wake() {
            if self.mesh.is_sleeping(peer) {
                let fd = self.mesh.ring_fd(peer);
                self.ring.push(op::wake(fd));
            }
        }
    }

    /// Connects due, closes asked for, bytes to send: the dispatcher's work for the sockets.
    fn upstream_work(&mut self, now: Instant) {
        let cx = &mut cx!(self);
        self.ups.expire_connects(cx, now);
        self.ups.start_connects(cx, now);
        self.ups.close_requested(cx, now);
        self.ups.flush(cx, now);
        // A transmit that failed (TLS) asked for its connection's close.
        self.ups.close_requested(cx, now);
    }

    /// The periodic pass: gauges, client connections' deadlines, the progress line and the
    /// /debug/pairs text. Pair timers and connect deadlines are not here: they are filed when
    /// they change and run when due, so an idle pool costs nothing per pair.
    fn sweep(&mut self, now: Instant) {
        self.d.sweep(now);
        {
            let cx = &mut cx!(self);
            self.intake.sweep(cx, now);
        }
        self.stats.log_lines_dropped.set(self.d.log().dropped());
        {
            let cx = &mut cx!(self);
            self.ups.flush(cx, now);
            self.ups.close_requested(cx, now);
        }
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

    /// When the loop must wake at the latest: the next sweep, the dispatcher's next deadline,
    /// or the idle wake-up that notices a stop request.
    fn deadline(&self, now: Instant) -> Instant {
        let mut deadline = self.next_sweep;
        for d in [self.d.next_deadline(), self.ups.next_connect_deadline()]
            .into_iter()
            .flatten()
        {
            if d.0 < deadline.0 {
                deadline = d;
            }
        }
        let idle = now.after(self.clock.rate().from_ms(IDLE_WAKE_MS));
        if idle.0 < deadline.0 {
            deadline = idle;
        }
        deadline
    }

    /// Handles every completion there is, batch by batch, returning receive buffers to the
    /// ring after each batch.
    fn reap(&mut self, now: Instant) {
        loop {
            let batch = self.ring.completions();
            if batch.is_empty() {
                self.ring.completions_done(batch);
                break;
            }
            for &(u, res, flags) in &batch {
                self.complete(u, res, flags, now);
            }
            self.ring.completions_done(batch);
            self.bufs.publish();
        }
    }

    fn complete(&mut self, u: u64, res: i32, flags: u32, now: Instant) {
        let (kind, index, generation) = op::ud_parts(u);
        let cx = &mut cx!(self);
        match kind {
            OP_ACCEPT => self.intake.on_accept(cx, index as usize, res, flags, now),
            OP_IN_RECV => self.intake.on_recv(cx, index, generation, res, flags, now),
            OP_IN_SEND => self.intake.on_send(cx, index, generation, res, now),
            OP_UP_CONNECT => self.ups.on_connect(cx, index, generation, res, now),
            OP_UP_RECV => self.ups.on_recv(cx, index, generation, res, flags, now),
            OP_UP_SEND => self.ups.on_send(cx, index, generation, res, now),
            OP_IN_SHUTDOWN => self.intake.on_shutdown(cx, index, generation),
            OP_UP_SHUTDOWN => self.ups.on_shutdown(cx, index, generation, now),
            OP_UP_SOCKOPT => self.ups.on_sockopt(cx, index, generation, res, now),
            // A wake-up from another thread: the handoffs it brings are read every iteration.
            // A close that failed: the fd is gone either way. A quiet send's guard: it woke
            // the loop; the send's own completion says what happened.
            OP_CANCEL | OP_WAKE | OP_CLOSE | OP_SEND_GUARD | OP_REFUSAL => {}
            _ => debug_assert!(false, "unknown completion kind {kind}"),
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

    /// Operations the kernel still has: receives, sends, connects and accepts in flight.
    fn ops_in_flight(&self) -> u64 {
        self.intake.ops_in_flight() + self.ups.ops_in_flight()
    }

    /// Shutdown's last step, after [`Worker::teardown`] (nothing is admitted any more): closes
    /// this thread in the mesh, and ends what other threads handed this one before they saw
    /// it leave, until every thread has closed. Threads reach their drain deadlines apart
    /// (each counts from when it saw the stop), and one still running may have handed this one
    /// a bundle it answered; after every thread has closed, none can, and none writes into a
    /// slot this one lent it, so its arena may go.
    fn leave_mesh(&mut self) {
        self.d.close();
        while !self.d.closed_all(self.clock.now()) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Closes everything and waits for the kernel to finish every operation, so no buffer
    /// it may write into is freed. Whatever is still in flight after [`TEARDOWN_WAIT_MS`] keeps
    /// its memory for the life of the process ([`Worker::leak`]).
    fn teardown(&mut self) {
        let now = self.clock.now();
        self.d.close_all(now);
        {
            let cx = &mut cx!(self);
            // The GOAWAY each connection just queued goes first: submitted ahead of the
            // sockets' shutdowns, a send the socket has room for leaves before them (best
            // effort, as a close is: a full socket buffer keeps it).
            self.ups.flush(cx, now);
            cx.ring.submit_all();
            self.ups.close_all(cx, now);
            self.intake.close_all(cx);
        }
        let until = now.after(self.clock.rate().from_ms(TEARDOWN_WAIT_MS));
        loop {
            let now = self.clock.now();
            self.reap(now);
            self.ups.close_requested(&mut cx!(self), now);
            if self.ops_in_flight() == 0 || now.0 >= until.0 {
                break;
            }
            self.ring.wait_briefly();
        }
        let left = self.ops_in_flight();
        if left > 0 {
            self.leak = true;
            self.d.log().line(format_args!(
                "{left} operations still in flight after {TEARDOWN_WAIT_MS} ms at shutdown: their buffers stay allocated"
            ));
        }
        self.intake.close_listeners();
        // The closes queued since the last submission (sockets released with nothing in
        // flight) reach the kernel now, and those linked behind a refusal's answer run.
        self.ring.submit_all();
        self.ring.run_deferred();
    }
}

impl Drop for Worker {
    /// The receive buffers are unregistered from the ring before their memory goes (the
    /// ring's own teardown in the kernel is asynchronous). When operations may still be in
    /// flight, every buffer the kernel could write into is leaked instead of freed.
    fn drop(&mut self) {
        if self.leak {
            self.intake.forget();
            self.ups.forget();
            self.d.forget_connections();
            return;
        }
        let submitter = self.ring.io_uring().submitter();
        let intake = submitter.unregister_buf_ring(INTAKE_GROUP).is_ok();
        let upstream = submitter.unregister_buf_ring(UPSTREAM_GROUP).is_ok();
        if intake && upstream {
            // SAFETY: dropped once, here; the kernel no longer refers to either ring.
            unsafe { ManuallyDrop::drop(&mut self.bufs) };
        }
    }
}

/// The intake connection limits of a relay spec, in this thread's clock ticks.
fn intake_config(spec: &Spec, rate: crate::clock::TickRate) -> ConnConfig {
    ConnConfig {
        limits: spec.http,
        response_bytes_max: intake::RESPONSE_BYTES_MAX,
        out_bytes: INTAKE_OUT_BYTES,
        head_timeout: rate.from_ms(spec.head_timeout_ms),
        idle_timeout: rate.from_ms(spec.idle_timeout_ms),
        send_timeout: rate.from_ms(spec.send_timeout_ms),
        linger: rate.from_ms(crate::http1::conn::LINGER_MS),
    }
}

/// The most entries a thread can have queued at once, which sizes its backlog: per intake
/// connection a receive and a send; per pair a connect (or its cancel), a receive and a send;
/// per listener an accept.
pub fn sq_entries_max(intake_conns: usize, pairs: usize, listeners: usize) -> usize {
    2 * intake_conns + 3 * pairs + listeners
}
