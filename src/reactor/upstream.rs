//! The thread's upstream sockets, one per (source, region) pair: connecting each through the
//! ring (bound to its source address), receiving into the buffer ring, one send in flight per
//! socket, and closing. What the bytes mean, and when a pair connects or closes, is the
//! dispatcher's; it is told when a socket is released, never asked for its state.

use std::os::fd::RawFd;

use io_uring::{cqueue, opcode, types};

use crate::clock::Instant;
use crate::limiter::PairId;

use super::bufring::UPSTREAM_GROUP;
use super::cx::Cx;
use super::op::{
    self, OP_CANCEL, OP_UP_CONNECT, OP_UP_RECV, OP_UP_SEND, OP_UP_SHUTDOWN, OP_UP_SOCKOPT, Sock, ud,
};
use super::socket;

/// The reactor's record of one pair's socket (the budget counts it).
pub const PAIR_SOCKET_BYTES: usize = std::mem::size_of::<UpSock>();

/// One pair's socket.
struct UpSock {
    s: Sock,
    connecting: bool,
    connect_started: Instant,
    /// Why the connect failed, for the pair's error.
    errno: i32,
    /// The address the connect points at (the kernel reads it until the connect completes).
    addr: libc::sockaddr_storage,
    /// Its place in the list of connects pending, oldest first (`NIL` at an end).
    prev: u32,
    next: u32,
    listed: bool,
}

const NIL: u32 = u32::MAX;

/// The values the ring's socket commands read when a reload changes open sockets' options:
/// boxed, so they stay put until the kernel has read them.
struct OptValues {
    keepalive: libc::c_int,
    idle_s: libc::c_int,
    interval_s: libc::c_int,
    probes: libc::c_int,
    user_timeout_ms: libc::c_int,
}

/// See the module docs.
pub struct UpSocks {
    ups: Box<[UpSock]>,
    /// Connects still pending this long (ticks) are given up.
    connect_timeout: u64,
    tcp_user_timeout_ms: u64,
    /// Kernel keepalive on (HTTP/2 PINGs off).
    keepalive: bool,
    opts: Box<OptValues>,
    /// Connects pending, in the order they started: every one has the same timeout, so the
    /// oldest is the first due and a pool of idle sockets is never walked.
    pending_head: u32,
    pending_tail: u32,
}

impl UpSocks {
    pub fn new(
        pairs: usize,
        connect_timeout: u64,
        tcp_user_timeout_ms: u64,
        keepalive: bool,
        now: Instant,
    ) -> Self {
        UpSocks {
            ups: (0..pairs)
                .map(|_| UpSock {
                    s: Sock::new(),
                    connecting: false,
                    connect_started: now,
                    errno: 0,
                    // SAFETY: all-zero is a valid sockaddr_storage.
                    addr: unsafe { std::mem::zeroed() },
                    prev: NIL,
                    next: NIL,
                    listed: false,
                })
                .collect(),
            connect_timeout,
            tcp_user_timeout_ms,
            keepalive,
            opts: Box::new(OptValues {
                keepalive: 0,
                idle_s: crate::config::KEEPALIVE_IDLE_S as libc::c_int,
                interval_s: crate::config::KEEPALIVE_INTERVAL_S as libc::c_int,
                probes: crate::config::KEEPALIVE_PROBES as libc::c_int,
                user_timeout_ms: 0,
            }),
            pending_head: NIL,
            pending_tail: NIL,
        }
    }

    fn list_pending(&mut self, p: u32) {
        let tail = self.pending_tail;
        let u = &mut self.ups[p as usize];
        debug_assert!(!u.listed);
        u.listed = true;
        u.prev = tail;
        u.next = NIL;
        if tail == NIL {
            self.pending_head = p;
        } else {
            self.ups[tail as usize].next = p;
        }
        self.pending_tail = p;
    }

    fn unlist_pending(&mut self, p: u32) {
        let u = &mut self.ups[p as usize];
        if !u.listed {
            return;
        }
        u.listed = false;
        let (prev, next) = (u.prev, u.next);
        if prev == NIL {
            self.pending_head = next;
        } else {
            self.ups[prev as usize].next = next;
        }
        if next == NIL {
            self.pending_tail = prev;
        } else {
            self.ups[next as usize].prev = prev;
        }
    }

    /// When the oldest connect pending times out (one tick past its deadline), if any.
    pub fn next_connect_deadline(&self) -> Option<Instant> {
        (self.pending_head != NIL).then(|| {
            let started = self.ups[self.pending_head as usize].connect_started;
            started.after(crate::clock::Ticks(self.connect_timeout + 1))
        })
    }

    /// Connects past their deadline are given up (ETIMEDOUT): the oldest pending ones, so
    /// one compare when none is due.
    pub fn expire_connects(&mut self, cx: &mut Cx, now: Instant) {
        while self.pending_head != NIL {
            let p = self.pending_head;
            if now.since(self.ups[p as usize].connect_started).0 <= self.connect_timeout {
                break;
            }
            self.unlist_pending(p);
            if self.ups[p as usize].s.closing {
                continue;
            }
            self.ups[p as usize].errno = libc::ETIMEDOUT;
            self.close(cx, p, now);
        }
    }

    /// A reload's connect deadline (ticks), for connects from now on, and its socket options
    /// (TCP_USER_TIMEOUT, kernel keepalive when PINGs are off), for connects from now on and
    /// every socket open: an idle connection is watched by PINGs or by the kernel, never by
    /// neither.
    pub fn retune(
        &mut self,
        cx: &mut Cx,
        connect_timeout: u64,
        tcp_user_timeout_ms: u64,
        keepalive: bool,
    ) {
        self.connect_timeout = connect_timeout;
        if (tcp_user_timeout_ms, keepalive) == (self.tcp_user_timeout_ms, self.keepalive) {
            return;
        }
        self.tcp_user_timeout_ms = tcp_user_timeout_ms;
        self.keepalive = keepalive;
        let o = &mut *self.opts;
        o.keepalive = libc::c_int::from(keepalive);
        o.user_timeout_ms = libc::c_int::try_from(tcp_user_timeout_ms).unwrap_or(libc::c_int::MAX);
        for (p, u) in self.ups.iter().enumerate() {
            if u.s.fd < 0 || u.s.closing {
                continue;
            }
            let (fd, ud) = (u.s.fd, ud(OP_UP_SOCKOPT, p as u32, u.s.generation));
            let (sol, tcp) = (libc::SOL_SOCKET, libc::IPPROTO_TCP);
            if keepalive {
                // A socket opened with PINGs on has the kernel's default timing.
                cx.ring
                    .push(op::set_int(fd, tcp, libc::TCP_KEEPIDLE, &o.idle_s, ud));
                cx.ring
                    .push(op::set_int(fd, tcp, libc::TCP_KEEPINTVL, &o.interval_s, ud));
                cx.ring
                    .push(op::set_int(fd, tcp, libc::TCP_KEEPCNT, &o.probes, ud));
            }
            cx.ring
                .push(op::set_int(fd, sol, libc::SO_KEEPALIVE, &o.keepalive, ud));
            cx.ring.push(op::set_int(
                fd,
                tcp,
                libc::TCP_USER_TIMEOUT,
                &o.user_timeout_ms,
                ud,
            ));
        }
    }

    /// A socket option a reload set failed on this socket (a kernel without socket commands
    /// in io_uring, before 6.7): it closes, and reconnects with the options.
    pub fn on_sockopt(&mut self, cx: &mut Cx, p: u32, generation: u32, res: i32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.generation != generation || u.s.fd < 0 || u.s.closing {
            return;
        }
        u.errno = -res;
        self.close(cx, p, now);
    }

    /// Starts every connect the dispatcher has due, stopping or not: a drain still owes the
    /// bundles waiting for a region their delivery, and an engine may close the connections
    /// under it (a GOAWAY, a connection's age); teardown closes whatever is still connecting.
    pub fn start_connects(&mut self, cx: &mut Cx, now: Instant) {
        while let Some(order) = cx.d.poll_connect(now) {
            let p = order.pair.0;
            match socket::upstream(
                order.local,
                order.remote,
                self.tcp_user_timeout_ms,
                self.keepalive,
            ) {
                Ok(fd) => self.connect(cx, p, fd, order.remote, now),
                Err(e) => {
                    cx.d.connect_failed(order.pair, now, e.raw_os_error().unwrap_or(libc::EINVAL))
                }
            }
        }
    }

    fn connect(
        &mut self,
        cx: &mut Cx,
        p: u32,
        fd: RawFd,
        remote: std::net::SocketAddr,
        now: Instant,
    ) {
        let (addr, len) = socket::sockaddr(remote);
        let u = &mut self.ups[p as usize];
        u.s.open(fd);
        u.addr = addr;
        u.connecting = true;
        u.connect_started = now;
        u.s.ops = 1;
        self.list_pending(p);
        let u = &mut self.ups[p as usize];
        let e = opcode::Connect::new(
            types::Fd(fd),
            (&u.addr as *const libc::sockaddr_storage).cast(),
            len,
        )
        .build()
        .user_data(ud(OP_UP_CONNECT, p, u.s.generation));
        cx.ring.push(e);
    }

    pub fn on_connect(&mut self, cx: &mut Cx, p: u32, generation: u32, res: i32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.generation != generation {
            return;
        }
        u.s.ops -= 1;
        u.connecting = false;
        self.unlist_pending(p);
        let u = &mut self.ups[p as usize];
        if res < 0 || u.s.closing {
            // A connect the relay closed for a reason (its deadline, a socket option that
            // failed) ends canceled, or connected regardless: that reason stands. One closed
            // with none (the relay stopping) was canceled.
            let cancel = res == -libc::ECANCELED || res >= 0;
            u.errno = match (u.s.closing && cancel, u.errno) {
                (true, 0) => libc::ECANCELED,
                (true, why) => why,
                (false, _) => -res,
            };
            u.s.closing = true;
            self.release(cx, p, now);
            return;
        }
        cx.d.connected(PairId(p), now);
        self.arm_recv(cx, p);
        self.flush(cx, now);
    }

    fn arm_recv(&mut self, cx: &mut Cx, p: u32) {
        let u = &mut self.ups[p as usize];
        if u.s.closing || u.s.recv_armed || u.s.fd < 0 {
            return;
        }
        let e = u.s.recv(OP_UP_RECV, p, UPSTREAM_GROUP);
        cx.ring.push(e);
    }

    pub fn on_recv(
        &mut self,
        cx: &mut Cx,
        p: u32,
        generation: u32,
        res: i32,
        flags: u32,
        now: Instant,
    ) {
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
                cx.bufs.upstream.push(b);
            }
            if current {
                self.release(cx, p, now);
            }
            return;
        }
        if res > 0 {
            let b = bid.expect("a multishot recv with data names its buffer");
            cx.d.received(PairId(p), cx.bufs.upstream.data(b, res as usize), now);
            cx.bufs.upstream.push(b);
        } else if res != -libc::ENOBUFS {
            // The kernel's error, if any, says why (0: the peer closed it).
            let u = &mut self.ups[p as usize];
            if res < 0 && u.errno == 0 {
                u.errno = -res;
            }
            self.close(cx, p, now);
            return;
        }
        if !self.ups[p as usize].s.recv_armed {
            self.arm_recv(cx, p);
        }
    }

    /// Sends what every pair with bytes to send has (one send in flight per socket).
    pub fn flush(&mut self, cx: &mut Cx, now: Instant) {
        while let Some(pair) = cx.d.poll_dirty() {
            let p = pair.0 as usize;
            let u = &mut self.ups[p];
            if u.s.sending && std::mem::take(&mut u.s.quiet) {
                // More bytes wait for the send in flight: the loop wakes for its completion.
                cx.ring.unquiet();
            }
            if u.s.fd < 0 || u.s.sending || u.connecting || u.s.closing {
                continue;
            }
            let quiet = !u.s.congested && cx.ring.quiet_room();
            let data = cx.d.transmit(pair, now);
            if data.is_empty() {
                continue;
            }
            let (ptr, len) = (data.as_ptr(), data.len() as u32);
            // Bytes left behind this send go when it completes: a loud one then.
            let quiet = quiet && cx.d.transmit_is_whole(pair);
            let e = self.ups[p].s.send(OP_UP_SEND, pair.0, ptr, len, quiet);
            cx.ring.push_send(e, quiet);
        }
    }

    pub fn on_send(&mut self, cx: &mut Cx, p: u32, generation: u32, res: i32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.generation != generation {
            return;
        }
        let (quiet, res) = u.s.sent(res);
        // A quiet send went out when the ring last submitted; the loop may have slept since.
        let at = if quiet { cx.ring.entered_at() } else { now };
        // Bytes that reached the socket count even on a connection being closed: whether a
        // request may have reached the engine depends on them. None (the socket was full)
        // unpins the bytes for the next send.
        if res >= 0 {
            cx.d.transmitted(PairId(p), res as usize, at);
        }
        if self.ups[p as usize].s.closing {
            self.release(cx, p, now);
            return;
        }
        if res < 0 {
            let u = &mut self.ups[p as usize];
            if u.errno == 0 {
                u.errno = -res;
            }
            self.close(cx, p, now);
        }
    }

    /// Closes every socket the dispatcher asked to close.
    pub fn close_requested(&mut self, cx: &mut Cx, now: Instant) {
        while let Some(pair) = cx.d.poll_close() {
            self.close(cx, pair.0, now);
        }
    }

    fn close(&mut self, cx: &mut Cx, p: u32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.closing || u.s.fd < 0 {
            return;
        }
        u.s.closing = true;
        if u.connecting {
            let e = opcode::AsyncCancel::new(ud(OP_UP_CONNECT, p, u.s.generation))
                .build()
                .user_data(ud(OP_CANCEL, p, 0));
            cx.ring.push(e);
        } else if u.s.ops > 0 {
            // Ends the receive and send in flight; with nothing in flight it just closes.
            let e = u.s.shutdown(OP_UP_SHUTDOWN, p);
            cx.ring.push(e);
        }
        self.release(cx, p, now);
    }

    /// The socket's shutdown completed: released once nothing else is in flight.
    pub fn on_shutdown(&mut self, cx: &mut Cx, p: u32, generation: u32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.generation != generation {
            return;
        }
        u.s.ops -= 1;
        self.release(cx, p, now);
    }

    /// Closes the fd once no operation refers to it, and tells the dispatcher (which knows
    /// whether that ends a connect or a connection).
    fn release(&mut self, cx: &mut Cx, p: u32, now: Instant) {
        let u = &mut self.ups[p as usize];
        if u.s.ops > 0 || u.s.fd < 0 {
            return;
        }
        self.unlist_pending(p);
        let u = &mut self.ups[p as usize];
        // No operation refers to the fd any more.
        cx.ring.push(op::close(u.s.fd));
        u.s.closed();
        let errno = std::mem::replace(&mut u.errno, 0);
        cx.d.socket_released(PairId(p), now, errno);
    }

    /// Closes every socket now (teardown).
    pub fn close_all(&mut self, cx: &mut Cx, now: Instant) {
        for p in 0..self.ups.len() as u32 {
            self.close(cx, p, now);
        }
    }

    /// Operations the kernel still has on pair sockets.
    pub fn ops_in_flight(&self) -> u64 {
        self.ups.iter().map(|u| u64::from(u.s.ops)).sum()
    }

    /// Leaks the sockets' records: the kernel may still read a connect's address.
    pub fn forget(&mut self) {
        std::mem::forget(std::mem::take(&mut self.ups));
        // ...and a socket command may still read an option's value.
        std::mem::forget(std::mem::replace(
            &mut self.opts,
            Box::new(OptValues {
                keepalive: 0,
                idle_s: 0,
                interval_s: 0,
                probes: 0,
                user_timeout_ms: 0,
            }),
        ));
    }
}
