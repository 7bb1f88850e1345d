//! One load thread: an epoll loop over its share of the connections and of the schedule.
//!
//! Worker `k` of `T` sends requests `k, k+T, k+2T, ...`; request `i` is due at
//! `t0 + i / rate`. Its latency runs from that scheduled instant to the end of its answer, so a
//! stall delays, and is charged to, every request scheduled during it (coordinated omission
//! corrected, as wrk2 does). A request due while every connection is full waits in the backlog,
//! its clock running.
//!
//! The hot path does not allocate: requests are pre-rendered bytes copied into a per-connection
//! output buffer sized for the pipeline depth; all requests due in one loop iteration go out in
//! one `write` per connection. Connecting is blocking (loopback only: it answers at once).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::epoll::{self, Epoll};
use super::response::{self, Answer};
use super::{Counts, Outcome, RequestOutcome, new_histogram};
use crate::sentlog::{SentLog, monotonic_ns};
use crate::txgen::GeneratedBundle;

/// Answers are read into this much space per connection; one answer must fit.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// How often in-flight requests are checked against the timeout and dead connections retried.
const MAINTENANCE_NS: u64 = 10_000_000;
/// Wait before reconnecting after a failed connect.
const RECONNECT_BACKOFF_NS: u64 = 100_000_000;
/// Deadlines closer than this are spun for instead of slept for: a sleep costs more.
const SPIN_NS: u64 = 2_000;
/// Most events handled per wait.
const EVENTS_MAX: usize = 1024;

pub(super) struct Interval {
    pub worker: usize,
    pub index: u64,
    pub hist: Histogram<u64>,
    pub counts: Counts,
}

pub(super) struct Spec<'a> {
    pub worker: usize,
    pub workers: usize,
    pub conns: Vec<SocketAddr>,
    pub bundles: &'a [GeneratedBundle],
    pub total: u64,
    pub t0_ns: u64,
    pub period_ns: f64,
    pub send_end_ns: u64,
    pub timeout_ns: u64,
    pub depth: usize,
    pub sent_log: Option<&'a SentLog>,
    pub intervals: mpsc::Sender<Interval>,
}

pub(super) struct WorkerResult {
    /// Outcome of requests `worker, worker + workers, ...` in that order.
    pub outcomes: Vec<RequestOutcome>,
    pub hist: Histogram<u64>,
    pub counts: Counts,
    /// When this worker wrote its last request (0: never).
    pub last_send_ns: u64,
}

struct InFlight {
    index: u64,
    sched_ns: u64,
    sent_ns: u64,
}

struct Conn {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Box<[u8]>,
    in_len: usize,
    inflight: VecDeque<InFlight>,
    queued: bool,
    dirty: bool,
    reconnect_at_ns: u64,
}

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Connects every connection before the clock starts; the first failure aborts the run.
pub(super) fn connect_all(addrs: &[SocketAddr]) -> io::Result<Vec<TcpStream>> {
    addrs.iter().map(|&a| connect(a)).collect()
}

struct Worker<'a> {
    spec: Spec<'a>,
    ep: Epoll,
    conns: Vec<Conn>,
    ready: VecDeque<usize>,
    dirty: Vec<usize>,
    inflight_total: usize,
    outcomes: Vec<RequestOutcome>,
    hist: Histogram<u64>,
    interval_hist: Histogram<u64>,
    counts: Counts,
    interval_counts: Counts,
    last_send_ns: u64,
}

pub(super) fn run(spec: Spec<'_>, streams: Vec<TcpStream>) -> io::Result<WorkerResult> {
    epoll::tighten_timer_slack();
    let ep = Epoll::new(EVENTS_MAX)?;
    let depth = spec.depth;
    let max_request = spec
        .bundles
        .iter()
        .map(|b| b.request.len())
        .max()
        .unwrap_or(0);
    let mut conns = Vec::with_capacity(streams.len());
    for (i, (stream, &addr)) in streams.into_iter().zip(&spec.conns).enumerate() {
        ep.add(stream.as_raw_fd(), i as u64, EVENT_FLAGS)?;
        conns.push(Conn {
            addr,
            stream: Some(stream),
            out: Vec::with_capacity(max_request * depth),
            out_pos: 0,
            inbuf: vec![0u8; READ_BUFFER_BYTES].into_boxed_slice(),
            in_len: 0,
            inflight: VecDeque::with_capacity(depth),
            queued: true,
            dirty: false,
            reconnect_at_ns: 0,
        });
    }
    let mine = (spec.total.saturating_sub(spec.worker as u64)).div_ceil(spec.workers as u64);
    let outcomes = (0..mine)
        .map(|j| RequestOutcome {
            seq: spec.bundles[(spec.worker as u64 + j * spec.workers as u64) as usize].seq,
            outcome: Outcome::Unsent,
            latency_ns: 0,
        })
        .collect();
    let n = conns.len();
    let mut w = Worker {
        ep,
        ready: (0..n).collect(),
        dirty: Vec::with_capacity(n),
        conns,
        inflight_total: 0,
        outcomes,
        hist: new_histogram(),
        interval_hist: new_histogram(),
        counts: Counts::default(),
        interval_counts: Counts::default(),
        last_send_ns: 0,
        spec,
    };
    w.run()?;
    Ok(WorkerResult {
        outcomes: w.outcomes,
        hist: w.hist,
        counts: w.counts,
        last_send_ns: w.last_send_ns,
    })
}

const EVENT_FLAGS: u32 = epoll::IN | epoll::OUT | epoll::ET | epoll::RDHUP;

impl Worker<'_> {
    fn sched_ns(&self, index: u64) -> u64 {
        self.spec.t0_ns + (index as f64 * self.spec.period_ns) as u64
    }

    fn run(&mut self) -> io::Result<()> {
        let mut next = self.spec.worker as u64;
        let mut tick = 0u64;
        let mut maintenance_ns = self.spec.t0_ns + MAINTENANCE_NS;
        let mut events: Vec<(u64, u32)> = Vec::with_capacity(EVENTS_MAX);
        loop {
            let mut now = monotonic_ns();
            let sending = next < self.spec.total && now < self.spec.send_end_ns;
            if sending {
                while next < self.spec.total {
                    let sched = self.sched_ns(next);
                    if sched > now {
                        break;
                    }
                    let Some(ci) = self.pop_ready() else { break };
                    self.send(ci, next, sched, now);
                    next += self.spec.workers as u64;
                }
                self.flush_dirty(now);
            }
            if !(next < self.spec.total && now < self.spec.send_end_ns) && self.inflight_total == 0
            {
                break;
            }

            let tick_end = self.spec.t0_ns + (tick + 1) * 1_000_000_000;
            let mut deadline = tick_end.min(maintenance_ns);
            if next < self.spec.total && !self.ready.is_empty() {
                deadline = deadline.min(self.sched_ns(next));
            }
            now = monotonic_ns();
            let timeout = Duration::from_nanos(if deadline > now + SPIN_NS {
                deadline - now
            } else {
                0
            });
            events.clear();
            events.extend(self.ep.wait(Some(timeout))?);
            now = monotonic_ns();
            for &(token, flags) in &events {
                self.service(token as usize, flags, now);
            }
            if now >= maintenance_ns {
                self.maintain(now);
                maintenance_ns = now + MAINTENANCE_NS;
            }
            if now >= tick_end {
                self.emit_interval(tick);
                tick += 1;
            }
        }
        self.emit_interval(tick);
        Ok(())
    }

    fn pop_ready(&mut self) -> Option<usize> {
        while let Some(ci) = self.ready.pop_front() {
            if self.conns[ci].stream.is_some() {
                return Some(ci);
            }
            self.conns[ci].queued = false;
        }
        None
    }

    fn send(&mut self, ci: usize, index: u64, sched_ns: u64, now: u64) {
        let b = &self.spec.bundles[index as usize];
        if let Some(log) = self.spec.sent_log {
            log.record(b.seq, sched_ns);
        }
        let c = &mut self.conns[ci];
        c.out.extend_from_slice(&b.request);
        c.inflight.push_back(InFlight {
            index,
            sched_ns,
            sent_ns: now,
        });
        self.inflight_total += 1;
        self.last_send_ns = now;
        self.counts.sent += 1;
        self.interval_counts.sent += 1;
        if c.inflight.len() < self.spec.depth {
            self.ready.push_back(ci);
        } else {
            c.queued = false;
        }
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(ci);
        }
    }

    fn flush_dirty(&mut self, now: u64) {
        while let Some(ci) = self.dirty.pop() {
            self.conns[ci].dirty = false;
            if !self.flush(ci) {
                self.fail(ci, Outcome::Error, now);
            }
        }
    }

    /// Writes what the socket takes; false on a broken connection.
    fn flush(&mut self, ci: usize) -> bool {
        let c = &mut self.conns[ci];
        let Some(stream) = c.stream.as_mut() else {
            return true;
        };
        while c.out_pos < c.out.len() {
            match stream.write(&c.out[c.out_pos..]) {
                Ok(n) => c.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        c.out.clear();
        c.out_pos = 0;
        true
    }

    fn service(&mut self, ci: usize, flags: u32, now: u64) {
        if self.conns[ci].stream.is_none() {
            return;
        }
        if flags & epoll::OUT != 0 && !self.flush(ci) {
            self.fail(ci, Outcome::Error, now);
            return;
        }
        if flags & (epoll::IN | epoll::RDHUP | epoll::HUP | epoll::ERR) == 0 {
            return;
        }
        loop {
            let c = &mut self.conns[ci];
            let Some(stream) = c.stream.as_mut() else {
                return;
            };
            if c.in_len == c.inbuf.len() {
                // An answer larger than the buffer.
                self.fail(ci, Outcome::Error, now);
                return;
            }
            match stream.read(&mut c.inbuf[c.in_len..]) {
                Ok(0) => {
                    self.fail(ci, Outcome::Error, now);
                    return;
                }
                Ok(n) => {
                    c.in_len += n;
                    if !self.parse_answers(ci, now) {
                        self.fail(ci, Outcome::Error, now);
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.fail(ci, Outcome::Error, now);
                    return;
                }
            }
        }
    }

    /// Completes every whole answer in the connection's buffer; false on a protocol error or
    /// an answer nobody asked for.
    fn parse_answers(&mut self, ci: usize, now: u64) -> bool {
        let mut used = 0;
        loop {
            let c = &mut self.conns[ci];
            let Some(front) = c.inflight.front() else {
                if used < c.in_len {
                    return false; // an answer nobody asked for
                }
                break;
            };
            let expected = &self.spec.bundles[front.index as usize].bundle_id;
            match response::parse(&c.inbuf[used..c.in_len], expected) {
                Ok(Some((n, answer))) => {
                    used += n;
                    let f = c.inflight.pop_front().expect("front exists");
                    let close = answer.close;
                    self.complete(ci, f, answer, now);
                    if close {
                        // The server reads nothing more here (RFC 9112 9.6): open a new
                        // connection now; requests pipelined behind this answer are lost.
                        self.fail(ci, Outcome::Error, now);
                        return true;
                    }
                }
                Ok(None) => break,
                Err(_) => return false,
            }
        }
        let c = &mut self.conns[ci];
        c.inbuf.copy_within(used..c.in_len, 0);
        c.in_len -= used;
        true
    }

    fn complete(&mut self, ci: usize, f: InFlight, answer: Answer, now: u64) {
        let latency = now.saturating_sub(f.sched_ns);
        self.hist.saturating_record(latency);
        self.interval_hist.saturating_record(latency);
        let slot = self.local(f.index);
        self.outcomes[slot].outcome = Outcome::Answered(answer);
        self.outcomes[slot].latency_ns = latency;
        self.counts.answered += 1;
        self.interval_counts.answered += 1;
        self.inflight_total -= 1;
        let c = &mut self.conns[ci];
        if !c.queued && c.stream.is_some() {
            c.queued = true;
            self.ready.push_back(ci);
        }
    }

    fn local(&self, index: u64) -> usize {
        ((index - self.spec.worker as u64) / self.spec.workers as u64) as usize
    }

    /// Closes the connection; its in-flight requests end as `outcome`.
    fn fail(&mut self, ci: usize, outcome: Outcome, now: u64) {
        let c = &mut self.conns[ci];
        if let Some(s) = c.stream.take() {
            let _ = self.ep.delete(s.as_raw_fd());
        }
        c.out.clear();
        c.out_pos = 0;
        c.in_len = 0;
        c.reconnect_at_ns = now;
        while let Some(f) = self.conns[ci].inflight.pop_front() {
            let slot = self.local(f.index);
            self.outcomes[slot].outcome = outcome;
            self.outcomes[slot].latency_ns = now.saturating_sub(f.sched_ns);
            self.inflight_total -= 1;
            match outcome {
                Outcome::Timeout => {
                    // In the latency at the time it ended (a lower bound): left out, a stall
                    // just past the timeout would read better in the tail than one under it.
                    let latency = now.saturating_sub(f.sched_ns);
                    self.hist.saturating_record(latency);
                    self.interval_hist.saturating_record(latency);
                    self.counts.timeouts += 1;
                    self.interval_counts.timeouts += 1;
                }
                _ => {
                    self.counts.errors += 1;
                    self.interval_counts.errors += 1;
                }
            }
        }
    }

    fn maintain(&mut self, now: u64) {
        for ci in 0..self.conns.len() {
            let c = &mut self.conns[ci];
            if c.stream.is_some() {
                if c.inflight
                    .front()
                    .is_some_and(|f| now.saturating_sub(f.sent_ns) > self.spec.timeout_ns)
                {
                    self.fail(ci, Outcome::Timeout, now);
                }
                continue;
            }
            if now < c.reconnect_at_ns {
                continue;
            }
            match connect(c.addr) {
                Ok(s) if self.ep.add(s.as_raw_fd(), ci as u64, EVENT_FLAGS).is_ok() => {
                    c.stream = Some(s);
                    if !c.queued {
                        c.queued = true;
                        self.ready.push_back(ci);
                    }
                }
                _ => c.reconnect_at_ns = now + RECONNECT_BACKOFF_NS,
            }
        }
    }

    fn emit_interval(&mut self, index: u64) {
        let hist = self.interval_hist.clone();
        self.interval_hist.reset();
        let counts = std::mem::take(&mut self.interval_counts);
        // The collector may have stopped listening after an error; nothing to do then.
        let _ = self.spec.intervals.send(Interval {
            worker: self.spec.worker,
            index,
            hist,
            counts,
        });
    }
}
