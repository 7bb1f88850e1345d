//! The thread's intake: its listeners (multishot accepts) and its table of bot connections,
//! each a socket and its sans-IO HTTP/1.1 state (`http1::conn`, which decides everything about
//! the connection: pipelining, `100 Continue`, output room, deadlines, when and why to close).
//! This file only moves bytes and keeps the sockets' lifecycles.
//!
//! A full table, or a client address at its share of it, is refused at once rather than
//! queued: answered 503 or 429 naming the setting (`http1::refusal`), then closed. An accept that fails (out of file descriptors or memory) is counted, logged at most
//! every [`ACCEPT_ERROR_LOG_MS`], and re-armed from the sweep, never at once (that spun a core).

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::RawFd;

use io_uring::{cqueue, opcode, types};

use crate::clock::{Instant, Ticks};
use crate::http1::conn::{Answer, Close, Conn, ConnConfig};
use crate::http1::refusal;
use crate::jsonrpc::Method;
use crate::metrics::ReqOutcome;
use crate::relay::intake::{self, Port, Verdict};
use crate::relay::queries::{Ask, ConnRef};
use crate::relay::tenancy::{Claim, Via};

use super::bufring::{INTAKE_GROUP, INTAKE_RECV_BUFFER_BYTES};
use super::clients::Clients;
use super::cx::{Cx, SWEEP_MS};
use super::op::{self, OP_ACCEPT, OP_IN_RECV, OP_IN_SEND, OP_IN_SHUTDOWN, Sock, ud};
use super::socket;

/// A listener whose accepts keep failing says so at most this often; the count in between
/// goes into the line.
pub const ACCEPT_ERROR_LOG_MS: u64 = 10_000;
/// Room kept free in an intake connection's output for one more response; below it, the
/// connection's pipelined requests wait until a send drains the buffer.
pub const RESPONSE_BYTES_MAX: usize = intake::BODY_BYTES_MAX + 512;
pub const INTAKE_OUT_BYTES: usize = 4 * RESPONSE_BYTES_MAX;
/// The reactor's record of one intake connection (the budget counts it).
pub const INTAKE_RECORD_BYTES: usize = std::mem::size_of::<IntakeConn>();

struct Listener {
    fd: RawFd,
    port: Port,
    armed: bool,
}

/// One bot connection: its socket and its HTTP/1.1 state (all decisions are the latter's).
struct IntakeConn {
    s: Sock,
    live: bool,
    /// The client shut its write side: the receive is not re-armed.
    eof: bool,
    /// The receive armed carries the kernel's limit (`Sock::recv_limited`).
    limited: bool,
    port: Port,
    /// The client's address (connections per address are capped).
    peer: IpAddr,
    http: Conn,
}

/// See the module docs.
pub struct Intake {
    listeners: Vec<Listener>,
    conns: Box<[IntakeConn]>,
    free_conns: Vec<u32>,
    http_cfg: ConnConfig,
    clients: Clients,
    per_source_max: u32,
    accept_error_logged: Option<Instant>,
    accept_errors_unlogged: u64,
    /// Set once stopping: how long a connection with nothing to do stays open.
    drain_grace: Option<Ticks>,
    /// The kernel takes a limit on a multishot receive (until it refuses one).
    recv_limit: bool,
}

impl Intake {
    /// `conns_max` connection slots, each with its HTTP/1.1 buffers, allocated now; one client
    /// address may hold `per_source_max` of them.
    pub fn new(
        listen_fds: Vec<(RawFd, Port)>,
        conns_max: u32,
        per_source_max: u32,
        http_cfg: ConnConfig,
    ) -> Intake {
        Intake {
            listeners: listen_fds
                .into_iter()
                .map(|(fd, port)| Listener {
                    fd,
                    port,
                    armed: false,
                })
                .collect(),
            conns: (0..conns_max)
                .map(|_| IntakeConn {
                    s: Sock::new(),
                    live: false,
                    eof: false,
                    limited: false,
                    port: Port::Rotating,
                    peer: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                    http: Conn::new(&http_cfg),
                })
                .collect(),
            free_conns: (0..conns_max).rev().collect(),
            http_cfg,
            clients: Clients::new(conns_max as usize),
            per_source_max: per_source_max.max(1),
            accept_error_logged: None,
            drain_grace: None,
            accept_errors_unlogged: 0,
            recv_limit: true,
        }
    }

    /// Listeners whose multishot accept is not armed get one (at start, and from the sweep
    /// after an accept error).
    /// A reload's head, idle and send timeouts (ticks), for every connection from its next
    /// check on.
    pub fn set_timeouts(&mut self, head: Ticks, idle: Ticks, send: Ticks) {
        self.http_cfg.head_timeout = head;
        self.http_cfg.idle_timeout = idle;
        self.http_cfg.send_timeout = send;
    }

    pub fn arm_accepts(&mut self, cx: &mut Cx) {
        for i in 0..self.listeners.len() {
            if !self.listeners[i].armed {
                self.arm_accept(cx, i);
            }
        }
    }

    /// Arms listener `i`'s multishot accept, unless stopping or not listening yet (then the
    /// sweep arms it once the relay listens).
    fn arm_accept(&mut self, cx: &mut Cx, i: usize) {
        if cx.stopping || !cx.accepting {
            return;
        }
        let l = &mut self.listeners[i];
        l.armed = true;
        // Close-on-exec, as every descriptor the relay opens: an upgrade's successor must not
        // inherit the bots' connections.
        let e = opcode::AcceptMulti::new(types::Fd(l.fd))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(ud(OP_ACCEPT, i as u32, 0));
        cx.ring.push(e);
    }

    pub fn on_accept(&mut self, cx: &mut Cx, i: usize, res: i32, flags: u32, now: Instant) {
        if !cqueue::more(flags) {
            self.listeners[i].armed = false;
            // After a connection the accept is re-armed at once; after an error (out of file
            // descriptors or memory) from the sweep, so a failing listener cannot spin here.
            if res >= 0 && !cx.stopping {
                self.arm_accept(cx, i);
            }
        }
        if res < 0 {
            if !cx.stopping {
                self.accept_failed(cx, -res, now);
            }
            return;
        }
        let fd = res as RawFd;
        // An accept that completes once stopping is still served (its answers say
        // `Connection: close`): the client is connected already, and closing it unread would
        // reset it.
        let Some(peer) = socket::peer_ip(fd) else {
            // Gone before we looked.
            cx.ring.push(op::close(fd));
            return;
        };
        // A full table or a client at its share is refused at once rather than queued. A
        // trusted proxy has no share: its connections are many clients'.
        let refused = if self.free_conns.is_empty() {
            Some((&cx.stats.intake_refused, refusal::TABLE_FULL))
        } else if self.clients.count(peer) >= self.per_source_max && !cx.d.tenancy().trusts(peer) {
            Some((&cx.stats.intake_refused_per_source, refusal::SHARE_TAKEN))
        } else {
            None
        };
        if let Some((counter, answer)) = refused {
            counter.inc();
            // Told why, then closed, in this iteration's submission; with no room for both
            // side by side, just closed.
            if !cx.ring.push_linked(op::refusal(fd, answer), op::close(fd)) {
                cx.ring.push(op::close(fd));
            }
            return;
        }
        let c = self.free_conns.pop().expect("checked above");
        self.clients.add(peer);
        let port = self.listeners[i].port;
        let conn = &mut self.conns[c as usize];
        conn.s.open(fd);
        conn.live = true;
        conn.eof = false;
        conn.limited = false;
        conn.port = port;
        conn.peer = peer;
        conn.http.reset(now);
        if let Some(grace) = self.drain_grace {
            // Its own grace from now: the client has not had the time to send yet.
            conn.http.begin_drain(now.after(grace));
        }
        cx.stats.intake_conns.set(cx.stats.intake_conns.get() + 1);
        self.arm_recv(cx, c);
    }

    /// An accept failed: counted, logged at most every [`ACCEPT_ERROR_LOG_MS`], and the
    /// listener re-armed from the sweep.
    fn accept_failed(&mut self, cx: &mut Cx, errno: i32, now: Instant) {
        cx.stats.accept_errors.inc();
        self.accept_errors_unlogged += 1;
        let quiet = self
            .accept_error_logged
            .is_some_and(|at| now.since(at).0 < cx.clock.rate().from_ms(ACCEPT_ERROR_LOG_MS).0);
        if !quiet {
            cx.d.log().line(format_args!(
                "accept failed: {} ({} times since the last line); the listener is re-armed every {} ms until it succeeds",
                std::io::Error::from_raw_os_error(errno),
                self.accept_errors_unlogged,
                SWEEP_MS
            ));
            self.accept_errors_unlogged = 0;
            self.accept_error_logged = Some(now);
        }
    }

    /// Arms the connection's receive for no more than its input has room for, so a client
    /// that sends faster than its answers are read is held back by TCP, never refused 413 for
    /// it. With more room than a buffer: a multishot receive that ends once it has brought the
    /// room less a buffer (one receive may pass the kernel's limit by that much), or, where the
    /// kernel has no such limit, one receive of a buffer at most. With less: one receive of
    /// the room if a request is still arriving, none if requests wait for their answers (it is
    /// armed again once they are served, [`Intake::pace_input`]).
    fn arm_recv(&mut self, cx: &mut Cx, c: u32) {
        let conn = &mut self.conns[c as usize];
        if conn.s.closing || conn.s.recv_armed || conn.eof {
            return;
        }
        let room = conn.http.input_room();
        let buffer = INTAKE_RECV_BUFFER_BYTES;
        if room == 0 || (room <= buffer && conn.http.is_held(&self.http_cfg)) {
            return;
        }
        conn.limited = self.recv_limit && room > buffer;
        let e = if conn.limited {
            conn.s
                .recv_limited(OP_IN_RECV, c, INTAKE_GROUP, (room - buffer) as u32)
        } else {
            conn.s
                .recv_once(OP_IN_RECV, c, INTAKE_GROUP, room.min(buffer) as u32)
        };
        cx.ring.push(e);
    }

    pub fn on_recv(
        &mut self,
        cx: &mut Cx,
        c: u32,
        generation: u32,
        res: i32,
        flags: u32,
        now: Instant,
    ) {
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
                cx.bufs.intake.push(b);
            }
            self.maybe_release(cx, c);
            return;
        }
        if res > 0 {
            let b = bid.expect("a multishot recv with data names its buffer");
            let conn = &mut self.conns[c as usize];
            conn.http
                .handle_bytes(cx.bufs.intake.data(b, res as usize), now);
            cx.bufs.intake.push(b);
            self.serve(cx, c, now);
        } else if res == 0 {
            // The client shut its write side. It may still read: what it sent whole is
            // answered, then the connection closes (curl and HTTP/1.0-style clients do this).
            let conn = &mut self.conns[c as usize];
            conn.eof = true;
            conn.http.handle_eof(now);
            self.serve(cx, c, now);
        } else if res == -libc::EINVAL && self.conns[c as usize].limited {
            // A kernel without the receive limit refuses the entry before reading anything:
            // this thread's receives go one at a time from now on (re-armed below). Every
            // limited entry already queued meets the same refusal, and the same answer.
            self.recv_limit = false;
        } else if res != -libc::ENOBUFS {
            // A reset or another error: nothing more can be read or sent.
            self.close(cx, c);
        }
        // ENOBUFS: the ring ran dry; its buffers come back this iteration, re-armed below.
        let conn = &self.conns[c as usize];
        if !conn.s.recv_armed && !conn.s.closing && conn.live {
            self.arm_recv(cx, c);
        }
        self.maybe_release(cx, c);
    }

    /// Answers every complete request the connection holds (while its output has room), then
    /// sends what was written.
    fn serve(&mut self, cx: &mut Cx, c: u32, now: Instant) {
        let conn = &mut self.conns[c as usize];
        let (port, peer) = (conn.port, conn.peer);
        let me = ConnRef {
            index: c,
            generation: conn.s.generation,
        };
        let (d, stats, metrics, clock) = (&mut *cx.d, cx.stats, cx.metrics, cx.clock);
        let served = conn.http.serve_deferring(&self.http_cfg, now, |req, out| {
            let via = if d.tenancy().trusts(peer) {
                Via::Proxy {
                    forwarded_for: req.last_header("x-forwarded-for"),
                }
            } else {
                Via::Direct
            };
            let claim = Claim {
                key: req.header("x-jito-auth"),
                peer,
                via,
                arrived_on: None,
            };
            let (n, verdict, method) = intake::handle(
                d,
                port,
                me,
                claim,
                req.method,
                req.path,
                req.query,
                req.body,
                req.keep_alive,
                now,
                out,
            );
            stats.requests.inc();
            if verdict == Verdict::Deferred {
                // Counted by its answer when an engine's comes (`answer_owed`). Waiting on an
                // engine is not the relay's overhead: not recorded.
                return Answer::Later;
            }
            count_refusal(stats, verdict);
            metrics.request(method, outcome(verdict));
            // Request read (this iteration's clock) to answer written: a clock read for the
            // metric only, so none with metrics off.
            if metrics.enabled() {
                let done = clock.now();
                metrics.record_overhead_ns(clock.rate().to_ns(done.since(now)));
            }
            Answer::Now(n)
        });
        if served.error.is_some() {
            // Answered (400, 413, ...) before any JSON-RPC method could be read.
            cx.stats.requests.inc();
            cx.stats.bad_requests.inc();
            cx.metrics.request(None, ReqOutcome::Invalid);
        }
        self.flush(cx, c, now);
        self.pace_input(cx, c);
    }

    /// Reads on from a client whose requests were served: a receive that ended at the input's
    /// room is armed again now that there is room ([`Intake::arm_recv`]).
    fn pace_input(&mut self, cx: &mut Cx, c: u32) {
        let conn = &self.conns[c as usize];
        if conn.live && !conn.s.closing && !conn.s.recv_armed {
            self.arm_recv(cx, c);
        }
    }

    /// Writes the answer status query `q` owes connection `conn` (nothing when the bot is
    /// gone: its slot closed or serves another client now), then serves the requests that
    /// waited behind it.
    pub fn answer_owed(&mut self, cx: &mut Cx, conn: ConnRef, q: u16, now: Instant) {
        let c = conn.index;
        let Some(ic) = self.conns.get_mut(c as usize) else {
            return;
        };
        if !ic.live || ic.s.closing || ic.s.generation != conn.generation {
            return;
        }
        let d = &*cx.d;
        let mut written = None;
        let more = ic.http.answer_owed(now, |out, keep_alive| {
            let (n, verdict) = intake::write_answer(d, q, keep_alive, now, out);
            written = Some(verdict);
            n
        });
        // Counted as answered, like every request; one whose bot left first was not.
        if let Some(verdict) = written {
            count_refusal(cx.stats, verdict);
            let method = match d.query(q).ask {
                Ask::Statuses => Method::GetBundleStatuses,
                Ask::Inflight => Method::GetInflightBundleStatuses,
            };
            cx.metrics.request(Some(method), outcome(verdict));
        }
        if more {
            self.serve(cx, c, now);
        }
    }

    /// Sends the connection's pending output (one send in flight at a time), or, when it is
    /// closing and owes nothing more, closes it or lets it linger ([`Intake::linger`]).
    fn flush(&mut self, cx: &mut Cx, c: u32, now: Instant) {
        let conn = &mut self.conns[c as usize];
        if !conn.live || conn.s.closing {
            return;
        }
        if conn.s.sending {
            // Whatever brought the connection here waits for the send in flight.
            if std::mem::take(&mut conn.s.quiet) {
                cx.ring.unquiet();
            }
            return;
        }
        // Quiet unless the send's completion has more to do than count its bytes: requests
        // waiting behind a full output, a close once the output is out.
        let quiet = !conn.s.congested
            && conn.http.input_len() == 0
            && conn.http.closing().is_none()
            && cx.ring.quiet_room();
        let data = conn.http.poll_transmit();
        if !data.is_empty() {
            let (ptr, len) = (data.as_ptr(), data.len() as u32);
            let e = conn.s.send(OP_IN_SEND, c, ptr, len, quiet);
            cx.ring.push_send(e, quiet);
            return;
        }
        if conn.http.poll_close().is_some() {
            if !conn.eof && conn.http.begin_linger(&self.http_cfg, now) {
                self.linger(cx, c);
            } else {
                self.close(cx, c);
            }
        }
    }

    /// The connection ends while its client may still be sending (`http1::conn`, lingering):
    /// its write side is shut, so the client reads the answer and then end-of-stream, and its
    /// receive stays armed to drop what still arrives, so the close that follows (on the
    /// client's end-of-stream, or the sweep at the deadline) finds nothing unread to reset.
    fn linger(&mut self, cx: &mut Cx, c: u32) {
        let conn = &mut self.conns[c as usize];
        let e = conn.s.shutdown_write(OP_IN_SHUTDOWN, c);
        cx.ring.push(e);
        self.arm_recv(cx, c);
    }

    pub fn on_send(&mut self, cx: &mut Cx, c: u32, generation: u32, res: i32, now: Instant) {
        let conn = &mut self.conns[c as usize];
        if conn.s.generation != generation {
            return;
        }
        let (_, res) = conn.s.sent(res);
        if !conn.live || conn.s.closing {
            self.maybe_release(cx, c);
            return;
        }
        if res < 0 || (res == 0 && !conn.s.congested) {
            self.close(cx, c);
            self.maybe_release(cx, c);
            return;
        }
        conn.http.handle_sent(res as usize, now);
        // Requests held back by a full output go now; then the rest is sent.
        self.serve(cx, c, now);
    }

    /// Stops a connection now: shutdown wakes its operations; the fd is closed and the slot
    /// freed when the last one completes.
    fn close(&mut self, cx: &mut Cx, c: u32) {
        let conn = &mut self.conns[c as usize];
        if conn.s.closing || !conn.live {
            return;
        }
        conn.s.closing = true;
        // The shutdown ends what the connection has in flight; with nothing, it just closes.
        if conn.s.ops > 0 {
            let e = conn.s.shutdown(OP_IN_SHUTDOWN, c);
            cx.ring.push(e);
        }
        self.maybe_release(cx, c);
    }

    /// The connection's shutdown completed: its slot is freed once nothing else is in flight.
    pub fn on_shutdown(&mut self, cx: &mut Cx, c: u32, generation: u32) {
        let conn = &mut self.conns[c as usize];
        if conn.s.generation != generation {
            return;
        }
        conn.s.ops -= 1;
        self.maybe_release(cx, c);
    }

    fn maybe_release(&mut self, cx: &mut Cx, c: u32) {
        let conn = &mut self.conns[c as usize];
        if !conn.live || !conn.s.closing || conn.s.ops > 0 {
            return;
        }
        // No operation refers to the fd any more.
        cx.ring.push(op::close(conn.s.fd));
        conn.s.closed();
        conn.live = false;
        let peer = conn.peer;
        self.clients.remove(peer);
        self.free_conns.push(c);
        cx.stats
            .intake_conns
            .set(cx.stats.intake_conns.get().saturating_sub(1));
    }

    /// Each connection's deadlines: a late head is answered 408 and closed, an idle one and
    /// one whose client stopped reading are closed now; listeners whose accept ended on an
    /// error are re-armed.
    pub fn sweep(&mut self, cx: &mut Cx, now: Instant) {
        for c in 0..self.conns.len() as u32 {
            let conn = &mut self.conns[c as usize];
            if !conn.live || conn.s.closing {
                continue;
            }
            if conn.http.linger_over(now) {
                self.close(cx, c);
                continue;
            }
            let Some(reason) = conn.http.handle_timeout(&self.http_cfg, now) else {
                continue;
            };
            match reason {
                Close::HeadTimeout => cx.stats.intake_head_timeouts.inc(),
                Close::SendTimeout => cx.stats.intake_send_timeouts.inc(),
                Close::Idle => cx.stats.intake_idle_closes.inc(),
                _ => {}
            }
            if reason.drains_output() {
                self.flush(cx, c, now);
            } else {
                self.close(cx, c);
            }
        }
        self.arm_accepts(cx);
    }

    /// Stops accepting (a listener closed with its queue still holding connections hands them
    /// to another listener of its SO_REUSEPORT group when `net.ipv4.tcp_migrate_req` is 1) and
    /// starts draining every client connection ([`Conn::begin_drain`]): idle ones close at
    /// `idle_until`.
    pub fn begin_stop(&mut self, cx: &mut Cx, now: Instant, idle_until: Instant) {
        self.drain_grace = Some(idle_until.since(now));
        for l in &self.listeners {
            // SAFETY: our listening fd: shutdown ends its multishot accept.
            unsafe { libc::shutdown(l.fd, libc::SHUT_RDWR) };
        }
        for c in 0..self.conns.len() as u32 {
            if self.conns[c as usize].live {
                self.conns[c as usize].http.begin_drain(idle_until);
                self.flush(cx, c, now);
            }
        }
    }

    /// No client connection is open.
    pub fn is_empty(&self) -> bool {
        self.conns.iter().all(|c| !c.live)
    }

    /// Closes every connection now (teardown).
    pub fn close_all(&mut self, cx: &mut Cx) {
        for c in 0..self.conns.len() as u32 {
            self.close(cx, c);
        }
    }

    /// Operations the kernel still has on intake sockets and listeners.
    pub fn ops_in_flight(&self) -> u64 {
        self.conns.iter().map(|c| u64::from(c.s.ops)).sum::<u64>()
            + self.listeners.iter().filter(|l| l.armed).count() as u64
    }

    /// Closes the listening sockets (teardown, after their accepts ended).
    pub fn close_listeners(&mut self) {
        for l in &self.listeners {
            // SAFETY: our listening fd, no longer used.
            unsafe { libc::close(l.fd) };
        }
    }

    /// Leaks the connections' buffers: the kernel may still write into them.
    pub fn forget(&mut self) {
        std::mem::forget(std::mem::take(&mut self.conns));
    }
}

/// A refusal's count among the totals, which hold whether metrics are on or off: an answer
/// written at once and one an engine's answer was awaited for alike. A backlog refusal is
/// counted by region, where the dispatcher judged it.
fn count_refusal(stats: &crate::metrics::accounting::Stats, verdict: Verdict) {
    match verdict {
        Verdict::RefusedCap => stats.refused_cap.inc(),
        Verdict::Invalid => stats.bad_requests.inc(),
        _ => {}
    }
}

/// How a request's answer is counted in `requests_total`.
fn outcome(verdict: Verdict) -> ReqOutcome {
    match verdict {
        Verdict::RefusedCap => ReqOutcome::RefusedCap,
        Verdict::Invalid => ReqOutcome::Invalid,
        Verdict::RefusedTenant => ReqOutcome::RefusedTenant,
        Verdict::RefusedBacklog => ReqOutcome::RefusedBacklog,
        Verdict::Unavailable => ReqOutcome::Error,
        Verdict::Admitted | Verdict::Answered | Verdict::Deferred => ReqOutcome::Ok,
    }
}
