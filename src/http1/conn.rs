//! One intake connection as a sans-IO state machine: bytes in, answers out, timers, and when
//! to close. The reactor moves the bytes and keeps the clock; everything a connection decides
//! (pipelining, `100 Continue`, output room, the head, idle and send deadlines, what a
//! half-closed client is still owed) is decided here, so it is tested without sockets. It is
//! NOT the framing of one request ([`super::request`]) and does no I/O of its own.
//!
//! A connection owns two fixed buffers: its input (one whole request at most, so a request
//! split across receives needs no special case) and its output (several answers). A request
//! is handled only when the output has room for the largest answer; otherwise it waits in the
//! input until a send drains the output (back-pressure on a client that pipelines without
//! reading).
//!
//! A request may be answered later ([`Answer::Later`]: a status query waiting on an engine).
//! The room for its answer stays free, the requests pipelined behind it wait in the input (an
//! HTTP/1.1 client matches answers to requests by order alone), and the connection is neither
//! idle nor closed by a drain until the answer is written ([`Conn::answer_owed`]).
//!
//! The head is parsed once, not once per receive: while it is incomplete, each receive only
//! scans its own new bytes for the blank line that ends the head, and httparse runs when that
//! line arrives (or when the partial head has grown by half since it last ran, so a malformed
//! head is still refused early). A client trickling one byte per receive therefore costs time
//! linear in its request's length (`cargo bench --bench http1 -- trickle`).
//!
//! Closing, by reason ([`Close`]): a client that asked (`Connection: close`, HTTP/1.0, or a
//! half-close after its last request) and a request that cannot be framed are answered first,
//! then closed; a head that misses its deadline gets `408` first; an idle connection is closed
//! quietly; a connection whose answers make no progress into the socket for the send deadline
//! (a client that never reads) is closed at once, since nothing more can be sent to it.
//!
//! Lingering ([`Conn::begin_linger`]): a connection that ends while its client may still be
//! sending (an error answered before the body arrived, a late body's `408`, a
//! `Connection: close` with more pipelined behind it) is not closed with those bytes unread:
//! Linux answers a close with unread data by resetting the connection, and a client still
//! writing its request then meets the reset (`EPIPE`, "connection reset") instead of reading
//! the answer that says what was wrong. Its write side is shut instead (the client reads the
//! answer, then end-of-stream) and what still arrives is read and dropped until the client
//! closes its side or [`LINGER_MS`] pass (the head deadline if shorter), as RFC 9112 §9.6
//! advises.

use crate::clock::{Instant, Ticks};

use super::error::HttpError;
use super::limits::Limits;
use super::request::{Framed, Request, frame};
use super::write::{
    CONTINUE, ERROR_RESPONSE_LEN_MAX, write_error, write_error_came, write_error_limit,
};

/// A connection's limits, shared by every connection of a reactor thread.
#[derive(Clone, Copy, Debug)]
pub struct ConnConfig {
    pub limits: Limits,
    /// The largest answer the request handler writes: a request is handled only when the
    /// output has this much room.
    pub response_bytes_max: usize,
    /// Output buffer bytes (at least `response_bytes_max`).
    pub out_bytes: usize,
    /// From a request's first byte to the whole request (its head, then its body).
    pub head_timeout: Ticks,
    /// With nothing in progress and nothing to send.
    pub idle_timeout: Ticks,
    /// Output pending without any of it reaching the socket.
    pub send_timeout: Ticks,
    /// The longest a connection lingers (see the module docs), the head deadline if shorter:
    /// time for a client to finish writing what it sends before it reads ([`LINGER_MS`]).
    pub linger: Ticks,
}

/// How long a refused client still sending is given to finish before the close: a 1 MiB
/// body at 8 Mbit/s; a connection lingering holds its table slot (and its address's share).
pub const LINGER_MS: u64 = 2_000;

/// Why a connection closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    /// The client asked for it (`Connection: close`, HTTP/1.0) or half-closed its side;
    /// every complete request it sent is answered first.
    Client,
    /// A request could not be framed; its error is answered first.
    BadRequest,
    /// The head missed its deadline; `408` is answered first.
    HeadTimeout,
    /// Nothing happened for the idle deadline.
    Idle,
    /// Answers made no progress into the socket for the send deadline; closed at once.
    SendTimeout,
    /// The relay is stopping; answers already written are sent first.
    Shutdown,
}

impl Close {
    /// Whether what is already in the output is still sent before the close.
    pub fn drains_output(self) -> bool {
        !matches!(self, Close::Idle | Close::SendTimeout)
    }

    /// Whether the client may still be sending when the connection ends for this reason, so
    /// it lingers ([`Conn::begin_linger`]) rather than closing with bytes unread (for
    /// [`Close::Client`], only when it pipelined more behind the request that closes). An idle
    /// connection has nothing in progress, one past its send deadline gets nothing more, and
    /// a stopping relay closes only connections with nothing in progress.
    pub fn lingers(self) -> bool {
        matches!(self, Close::Client | Close::BadRequest | Close::HeadTimeout)
    }

    /// Every reason, for counters and tests.
    pub const ALL: [Close; 6] = [
        Close::Client,
        Close::BadRequest,
        Close::HeadTimeout,
        Close::Idle,
        Close::SendTimeout,
        Close::Shutdown,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Close::Client => "client",
            Close::BadRequest => "bad_request",
            Close::HeadTimeout => "head_timeout",
            Close::Idle => "idle",
            Close::SendTimeout => "send_timeout",
            Close::Shutdown => "shutdown",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    /// The client shut its write side: complete requests are still answered.
    ReadClosed,
    Closing(Close),
}

/// Where a closing connection stands with lingering (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Linger {
    /// Not lingered yet.
    No,
    /// Reading and dropping until the client's end-of-stream or this instant.
    Until(Instant),
    /// Over: the connection closes now, whatever still arrives.
    Over,
}

/// How far the request at the front of the input has been looked at.
#[derive(Clone, Copy, Debug, Default)]
struct Scan {
    /// Bytes of the request already searched for the head's end (the search resumes here).
    searched: usize,
    /// The request's bytes when httparse last ran on an incomplete head (0: never).
    parsed_at: usize,
    /// The whole request's length, once its head was parsed.
    len: Option<usize>,
}

/// What the request handler did with one request (see [`Conn::serve_deferring`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The whole answer is written: this many bytes of the output.
    Now(usize),
    /// The answer comes later ([`Conn::answer_owed`]); requests after it wait until then, so
    /// answers keep the order their requests came in (HTTP/1.1 has no other way to match them).
    Later,
}

/// What one [`Conn::serve`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Requests handed to the handler and answered.
    pub requests: u32,
    /// A request that could not be framed (answered with this error; the connection closes).
    pub error: Option<HttpError>,
}

/// See the module docs.
pub struct Conn {
    input: Box<[u8]>,
    /// The unconsumed input is `input[in_start..in_len]`; the front request starts at
    /// `in_start`.
    in_start: usize,
    in_len: usize,
    scan: Scan,
    out: Box<[u8]>,
    out_head: usize,
    out_tail: usize,
    /// `out[out_head..out_tail]` is being read by a send in flight: do not move it.
    pinned: bool,
    state: State,
    /// When the first byte of the incomplete request at the front arrived.
    partial_since: Option<Instant>,
    /// `100 Continue` was written for the request now arriving.
    continue_sent: bool,
    /// The last byte in or out.
    last_active: Instant,
    /// Since when the output has waited without any of it reaching the socket.
    stalled_since: Option<Instant>,
    /// Times httparse ran on this connection's requests (see [`Conn::head_parses`]).
    parses: u32,
    /// The relay is draining: each answer says `Connection: close` and ends the connection,
    /// and one with nothing in progress at this instant is closed.
    drain_until: Option<Instant>,
    /// An answer is owed for a request already consumed (its keep-alive): nothing else is
    /// handled until it is written, and the connection is not idle meanwhile.
    owed: Option<bool>,
    /// The client shut its write side (end-of-stream read): nothing unread can follow.
    read_ended: bool,
    /// The client asked to close with bytes pipelined behind that request, which were
    /// dropped: the close lingers so they do not reset it.
    unread: bool,
    linger: Linger,
}

impl Conn {
    /// A connection with its buffers allocated (at startup: the reactor keeps a table of them).
    pub fn new(cfg: &ConnConfig) -> Conn {
        assert!(cfg.out_bytes >= cfg.response_bytes_max);
        Conn {
            input: vec![0u8; cfg.limits.request_bytes_max()].into_boxed_slice(),
            in_start: 0,
            in_len: 0,
            scan: Scan::default(),
            out: vec![0u8; cfg.out_bytes].into_boxed_slice(),
            out_head: 0,
            out_tail: 0,
            pinned: false,
            state: State::Open,
            partial_since: None,
            continue_sent: false,
            last_active: Instant(0),
            stalled_since: None,
            parses: 0,
            drain_until: None,
            owed: None,
            read_ended: false,
            unread: false,
            linger: Linger::No,
        }
    }

    /// Bytes one connection holds (the budget counts a table of them).
    pub fn allocation_bytes(cfg: &ConnConfig) -> usize {
        std::mem::size_of::<Conn>() + cfg.limits.request_bytes_max() + cfg.out_bytes
    }

    /// Makes the record a fresh connection accepted at `now`.
    pub fn reset(&mut self, now: Instant) {
        self.in_start = 0;
        self.in_len = 0;
        self.scan = Scan::default();
        self.out_head = 0;
        self.out_tail = 0;
        self.pinned = false;
        self.state = State::Open;
        self.partial_since = None;
        self.continue_sent = false;
        self.last_active = now;
        self.stalled_since = None;
        self.parses = 0;
        self.drain_until = None;
        self.owed = None;
        self.read_ended = false;
        self.unread = false;
        self.linger = Linger::No;
    }

    // ---- inputs ----

    /// Bytes received. More than the input can hold (the front request is larger than the
    /// limits allow, or the client pipelined that far ahead without reading) is answered with
    /// 413 and closes the connection.
    pub fn handle_bytes(&mut self, data: &[u8], now: Instant) {
        self.last_active = now;
        if self.state != State::Open {
            // Nothing after a half-close; a closing connection drops what still arrives (a
            // lingering one reads it for that alone).
            return;
        }
        if self.in_len + data.len() > self.input.len() {
            self.compact_input();
        }
        if self.in_len + data.len() > self.input.len() {
            let total = self.input.len();
            self.refuse(
                &HttpError {
                    status: 413,
                    what: "request larger than the head and body limits together",
                },
                Some(("intake.head_bytes_max + intake.body_bytes_max", total)),
                now,
            );
            return;
        }
        self.input[self.in_len..self.in_len + data.len()].copy_from_slice(data);
        self.in_len += data.len();
    }

    /// The client shut its write side (EOF): what it sent whole is still answered, then the
    /// connection closes (see [`Conn::serve`]).
    pub fn handle_eof(&mut self, now: Instant) {
        self.last_active = now;
        self.read_ended = true;
        if self.state == State::Open {
            self.state = State::ReadClosed;
        }
    }

    /// `n` bytes of [`Conn::poll_transmit`] reached the socket.
    pub fn handle_sent(&mut self, n: usize, now: Instant) {
        self.pinned = false;
        self.out_head += n;
        debug_assert!(self.out_head <= self.out_tail);
        if self.out_head == self.out_tail {
            self.out_head = 0;
            self.out_tail = 0;
            self.stalled_since = None;
        } else if n > 0 {
            self.stalled_since = Some(now);
        }
        if n > 0 {
            self.last_active = now;
        }
    }

    /// The relay is stopping: answers already written are sent, nothing more is read.
    pub fn begin_shutdown(&mut self) {
        if !matches!(self.state, State::Closing(_)) {
            self.state = State::Closing(Close::Shutdown);
        }
    }

    /// The relay is draining (stopping, or handing its listeners to a new process): every
    /// request already sent or still to come is answered, the next answer with
    /// `Connection: close` so the client opens its next connection elsewhere, and then the
    /// connection closes. One with nothing in progress is closed at `idle_until`: closing it at
    /// once would race a request the client may be sending right now.
    pub fn begin_drain(&mut self, idle_until: Instant) {
        // Kept for a closing connection too: a linger that begins later ends by then.
        self.drain_until = Some(match self.drain_until {
            Some(d) if d.0 < idle_until.0 => d,
            _ => idle_until,
        });
        // A stop waits for no lingering longer than for an idle connection.
        if let Linger::Until(until) = self.linger
            && idle_until.0 < until.0
        {
            self.linger = Linger::Until(idle_until);
        }
    }

    /// Handles every complete request at the front of the input while the output has room
    /// for another answer: `answer` gets the request and the output's free space and returns
    /// the bytes it wrote there. Also writes `100 Continue` when a client waits for it, and
    /// decides the close of a half-closed connection once nothing whole is left to answer.
    pub fn serve<F>(&mut self, cfg: &ConnConfig, now: Instant, mut answer: F) -> Served
    where
        F: FnMut(&Request<'_>, &mut [u8]) -> usize,
    {
        self.serve_deferring(cfg, now, |req, out| Answer::Now(answer(req, out)))
    }

    /// [`Conn::serve`] for a handler that may answer a request later ([`Answer::Later`]): the
    /// room for its answer stays free, and the requests after it wait in the input.
    pub fn serve_deferring<F>(&mut self, cfg: &ConnConfig, now: Instant, mut answer: F) -> Served
    where
        F: FnMut(&Request<'_>, &mut [u8]) -> Answer,
    {
        let mut served = Served::default();
        loop {
            if matches!(self.state, State::Closing(_)) || self.owed.is_some() {
                break;
            }
            if self.out.len() - self.out_tail < cfg.response_bytes_max {
                if self.pinned || self.out_head == 0 {
                    // Held back until a send frees room.
                    self.stall_check_start(now);
                    return served;
                }
                self.compact_output();
                continue;
            }
            if self.in_start == self.in_len {
                break;
            }
            let buf = &self.input[self.in_start..self.in_len];
            match frame_front(&mut self.scan, &mut self.parses, buf, &cfg.limits) {
                Ok(Front::Partial { expect_continue }) => {
                    if buf.iter().all(|&b| b == b'\r' || b == b'\n') {
                        // Empty lines before a request line (a stray CRLF after the last
                        // request, RFC 9112 §2.2): ignored, and no head has begun.
                        self.in_start = self.in_len;
                        self.scan = Scan::default();
                        break;
                    }
                    self.partial_since.get_or_insert(now);
                    // A client that sent `Expect: 100-continue` waits for this before its
                    // body; once per request. The output has room: checked above.
                    if expect_continue && !self.continue_sent {
                        self.push_output(CONTINUE, now);
                        self.continue_sent = true;
                    }
                    break;
                }
                Ok(Front::Whole(mut request)) => {
                    if self.drain_until.is_some() {
                        request.keep_alive = false;
                    }
                    let (len, keep_alive) = (request.len, request.keep_alive);
                    let answered = answer(&request, &mut self.out[self.out_tail..]);
                    self.in_start += len;
                    self.scan = Scan::default();
                    self.partial_since = None;
                    self.continue_sent = false;
                    served.requests += 1;
                    match answered {
                        Answer::Now(n) => {
                            self.note_output(n, now);
                            if !keep_alive {
                                self.state = State::Closing(Close::Client);
                                self.unread = self.in_start < self.in_len;
                            }
                        }
                        Answer::Later => {
                            self.owed = Some(keep_alive);
                            self.last_active = now;
                            break;
                        }
                    }
                }
                Err(e) => {
                    let limit = if e == HttpError::BODY_TOO_LARGE {
                        Some(("intake.body_bytes_max", cfg.limits.body_bytes_max))
                    } else if e == HttpError::HEAD_TOO_LARGE {
                        Some(("intake.head_bytes_max", cfg.limits.head_bytes_max))
                    } else {
                        None
                    };
                    self.refuse(&e, limit, now);
                    served.error = Some(e);
                }
            }
        }
        if self.owed.is_some() {
            // The rest waits for the owed answer, half-closed or not.
        } else if self.state == State::ReadClosed {
            if self.in_start < self.in_len {
                // A partial request can never complete now, and its client waits for an
                // answer: it is told why.
                served.error = Some(self.refuse_cut_short(now));
            } else {
                self.state = State::Closing(Close::Client);
            }
            self.drop_input();
        }
        if matches!(self.state, State::Closing(_)) {
            self.drop_input();
        } else if self.in_start > 0 && self.in_start == self.in_len {
            self.in_start = 0;
            self.in_len = 0;
        }
        served
    }

    /// Whether an answer is owed (a request was answered [`Answer::Later`]).
    pub fn is_owed(&self) -> bool {
        self.owed.is_some()
    }

    /// Writes the owed answer: `write` gets the output's free room (at least the largest
    /// answer's, kept free since the request) and whether the connection stays open (false
    /// when the client asked to close or the relay is draining), and returns the bytes it
    /// wrote. Then [`Conn::serve`] again handles the requests that waited. False, and nothing
    /// written, when no answer is owed or the connection is closing.
    pub fn answer_owed(
        &mut self,
        now: Instant,
        write: impl FnOnce(&mut [u8], bool) -> usize,
    ) -> bool {
        let Some(keep_alive) = self.owed else {
            return false;
        };
        if matches!(self.state, State::Closing(_)) {
            return false;
        }
        self.owed = None;
        let keep_alive = keep_alive && self.drain_until.is_none();
        if !self.pinned {
            self.compact_output();
        }
        let n = write(&mut self.out[self.out_tail..], keep_alive);
        self.note_output(n, now);
        self.last_active = now;
        if !keep_alive {
            self.state = State::Closing(Close::Client);
            self.unread = self.in_start < self.in_len;
        }
        true
    }

    /// Deadlines at `now`: a late head (answered 408, then closed), an idle connection, or
    /// output stalled past the send deadline. Returns the reason when the connection starts
    /// closing now.
    pub fn handle_timeout(&mut self, cfg: &ConnConfig, now: Instant) -> Option<Close> {
        if self.state == State::Closing(Close::SendTimeout)
            || self.state == State::Closing(Close::Idle)
        {
            return None;
        }
        if let Some(since) = self.stalled_since
            && self.out_head != self.out_tail
            && now.since(since).0 > cfg.send_timeout.0
        {
            self.state = State::Closing(Close::SendTimeout);
            self.drop_input();
            return Some(Close::SendTimeout);
        }
        if matches!(self.state, State::Closing(_)) {
            return None;
        }
        if let Some(since) = self.partial_since
            && now.since(since).0 > cfg.head_timeout.0
        {
            // A head parsed whole: it was the body that was late.
            let late = if self.scan.len.is_some() {
                &HttpError::BODY_TIMEOUT
            } else {
                &HttpError::HEAD_TIMEOUT
            };
            let head = self.front_is_head();
            self.drop_input();
            if self.room_for(ERROR_RESPONSE_LEN_MAX)
                && let Some(n) = write_error(&mut self.out[self.out_tail..], late)
            {
                let n = if head { self.head_only(n) } else { n };
                self.note_output(n, now);
            }
            self.state = State::Closing(Close::HeadTimeout);
            return Some(Close::HeadTimeout);
        }
        if self.owed.is_some() {
            // The relay's own deadline ends what it owes; the connection waits for it.
            return None;
        }
        if let Some(until) = self.drain_until
            && self.in_start == self.in_len
            && self.out_head == self.out_tail
            && now.0 >= until.0
        {
            self.state = State::Closing(Close::Shutdown);
            return Some(Close::Shutdown);
        }
        if self.in_start == self.in_len
            && self.out_head == self.out_tail
            && now.since(self.last_active).0 > cfg.idle_timeout.0
        {
            self.state = State::Closing(Close::Idle);
            return Some(Close::Idle);
        }
        None
    }

    // ---- outputs ----

    /// The bytes to send now, which stay where they are until [`Conn::handle_sent`] (the
    /// kernel reads them in place). Empty when there is nothing to send.
    pub fn poll_transmit(&mut self) -> &[u8] {
        if self.out_head == self.out_tail {
            return &[];
        }
        self.pinned = true;
        &self.out[self.out_head..self.out_tail]
    }

    /// Why the connection is closing, once it should be closed now: its owed output is sent
    /// (or is not owed) and it is not lingering.
    pub fn poll_close(&self) -> Option<Close> {
        if matches!(self.linger, Linger::Until(_)) && !self.read_ended {
            return None;
        }
        match self.state {
            State::Closing(c) if !c.drains_output() || self.out_head == self.out_tail => Some(c),
            _ => None,
        }
    }

    /// Called when [`Conn::poll_close`] says the connection ends: true when it lingers
    /// instead (see the module docs), reading and dropping until the client's end-of-stream
    /// ([`Conn::handle_eof`], then `poll_close` says close) or [`ConnConfig::linger`] from
    /// `now` ([`Conn::linger_over`]), or the drain's idle deadline if that is sooner; the
    /// caller shuts the socket's write side so the client sees its answer end. False when it
    /// closes now: the reason leaves nothing unread (a client that asked to close with
    /// nothing pipelined behind), the client already ended its side, or it has lingered once.
    pub fn begin_linger(&mut self, cfg: &ConnConfig, now: Instant) -> bool {
        let State::Closing(reason) = self.state else {
            return false;
        };
        if !reason.lingers()
            || (reason == Close::Client && !self.unread)
            || self.read_ended
            || self.linger != Linger::No
            || self.out_head != self.out_tail
        {
            return false;
        }
        let until = now.after(if cfg.linger.0 < cfg.head_timeout.0 {
            cfg.linger
        } else {
            cfg.head_timeout
        });
        self.linger = Linger::Until(match self.drain_until {
            // Draining: no longer than an idle connection is kept.
            Some(idle_until) if idle_until.0 < until.0 => idle_until,
            _ => until,
        });
        true
    }

    /// Whether the connection is lingering ([`Conn::begin_linger`]).
    pub fn is_lingering(&self) -> bool {
        matches!(self.linger, Linger::Until(_)) && !self.read_ended
    }

    /// True once, when a lingering connection's deadline has passed at `now`: it closes now.
    pub fn linger_over(&mut self, now: Instant) -> bool {
        match self.linger {
            Linger::Until(until) if !self.read_ended && now.0 >= until.0 => {
                self.linger = Linger::Over;
                true
            }
            _ => false,
        }
    }

    /// Why the connection is closing (whether or not its output is still being sent).
    pub fn closing(&self) -> Option<Close> {
        match self.state {
            State::Closing(c) => Some(c),
            _ => None,
        }
    }

    /// The earliest instant [`Conn::handle_timeout`] can act.
    pub fn poll_timeout(&self, cfg: &ConnConfig) -> Option<Instant> {
        match self.state {
            State::Closing(Close::SendTimeout) | State::Closing(Close::Idle) => return None,
            _ => {}
        }
        let mut t: Option<Instant> = None;
        let mut min = |at: Instant| t = Some(t.map_or(at, |t| if at.0 < t.0 { at } else { t }));
        if let Some(s) = self.stalled_since {
            min(s.after(Ticks(cfg.send_timeout.0 + 1)));
        }
        if let Linger::Until(until) = self.linger
            && !self.read_ended
        {
            min(until);
        }
        if !matches!(self.state, State::Closing(_)) {
            if let Some(s) = self.partial_since {
                min(s.after(Ticks(cfg.head_timeout.0 + 1)));
            }
            min(self.last_active.after(Ticks(cfg.idle_timeout.0 + 1)));
            if let Some(until) = self.drain_until {
                min(until);
            }
        }
        t
    }

    /// Bytes waiting in the output.
    pub fn output_len(&self) -> usize {
        self.out_tail - self.out_head
    }

    /// Times the head parser ran since the connection was accepted: the cost a client's
    /// receive pattern imposes, for tests and the trickle benchmark.
    pub fn head_parses(&self) -> u32 {
        self.parses
    }

    /// Unanswered bytes in the input.
    pub fn input_len(&self) -> usize {
        self.in_len - self.in_start
    }

    /// Bytes [`Conn::handle_bytes`] takes now without refusing (the input's free room, once
    /// what was consumed is moved out of the way).
    pub fn input_room(&self) -> usize {
        self.input.len() - self.input_len()
    }

    /// Requests wait in the input for the output (full, or an owed answer ahead): the relay,
    /// not the client, holds them up. A read now may wait until they are served.
    pub fn is_held(&self, cfg: &ConnConfig) -> bool {
        self.in_start < self.in_len
            && !matches!(self.state, State::Closing(_))
            && (self.owed.is_some() || self.out.len() - self.out_tail < cfg.response_bytes_max)
    }

    // ---- inside ----

    /// Answers `e` (naming `limit`, the setting it broke and its bytes) and closes.
    fn refuse(&mut self, e: &HttpError, limit: Option<(&str, usize)>, now: Instant) {
        let head = self.front_is_head();
        self.drop_input();
        if self.room_for(ERROR_RESPONSE_LEN_MAX)
            && let Some(n) = write_error_limit(&mut self.out[self.out_tail..], e, limit)
        {
            let n = if head { self.head_only(n) } else { n };
            self.note_output(n, now);
        }
        self.state = State::Closing(Close::BadRequest);
    }

    /// The front request was cut short by the client's end-of-stream: answered 400, saying
    /// how much of its body came when its head was whole, then closed.
    fn refuse_cut_short(&mut self, now: Instant) -> HttpError {
        let head = self.front_is_head();
        let front = &self.input[self.in_start..self.in_len];
        // From the request line on: empty lines before it are no part of the request.
        let start = front
            .iter()
            .position(|&b| b != b'\r' && b != b'\n')
            .unwrap_or(front.len());
        let front = &front[start..];
        // The head's length, once it was parsed whole: what came after it is body. The
        // request's whole length counts the empty lines before it (the parser skips them).
        let (e, came, of) = match (self.scan.len, head_end(front, 0)) {
            (Some(len), Some(head_len)) => (
                HttpError::BODY_CUT_SHORT,
                front.len() - head_len,
                Some(len.saturating_sub(start + head_len)),
            ),
            _ => (HttpError::HEAD_CUT_SHORT, front.len(), None),
        };
        self.drop_input();
        if self.room_for(ERROR_RESPONSE_LEN_MAX)
            && let Some(n) = write_error_came(&mut self.out[self.out_tail..], &e, came, of)
        {
            let n = if head { self.head_only(n) } else { n };
            self.note_output(n, now);
        }
        self.state = State::Closing(Close::BadRequest);
        e
    }

    /// Whether the front request, refused before it could be parsed whole, is a HEAD: its
    /// answer is then the head alone (RFC 9110 §9.3.2), or the client would read the body as
    /// the start of a next answer.
    fn front_is_head(&self) -> bool {
        // Past the empty lines a client may send between requests (RFC 9112 §2.2).
        let front = &self.input[self.in_start..self.in_len];
        let start = front.iter().position(|&b| b != b'\r' && b != b'\n');
        start.is_some_and(|i| front[i..].starts_with(b"HEAD "))
    }

    /// Of the `n` bytes of an answer just written at the output's tail, how many its head is.
    fn head_only(&self, n: usize) -> usize {
        self.out[self.out_tail..self.out_tail + n]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(n, |i| i + 4)
    }

    /// Whether the output has `n` free bytes, compacting it if that makes them.
    fn room_for(&mut self, n: usize) -> bool {
        self.out.len() - self.out_tail >= n
            || (self.compact_output() && self.out.len() - self.out_tail >= n)
    }

    fn push_output(&mut self, bytes: &[u8], now: Instant) {
        let n = bytes.len();
        self.out[self.out_tail..self.out_tail + n].copy_from_slice(bytes);
        self.note_output(n, now);
    }

    fn note_output(&mut self, n: usize, now: Instant) {
        if n > 0 && self.out_head == self.out_tail {
            self.stalled_since = Some(now);
        }
        self.out_tail += n;
    }

    /// Held-back requests wait on a send: the send deadline covers them (it runs from when
    /// the output last made progress, already set while output is pending).
    fn stall_check_start(&mut self, now: Instant) {
        if self.out_head != self.out_tail && self.stalled_since.is_none() {
            self.stalled_since = Some(now);
        }
    }

    /// Moves unsent output to the front when no send is reading it; true if room was made.
    fn compact_output(&mut self) -> bool {
        if self.pinned || self.out_head == 0 {
            return false;
        }
        self.out.copy_within(self.out_head..self.out_tail, 0);
        self.out_tail -= self.out_head;
        self.out_head = 0;
        true
    }

    fn compact_input(&mut self) {
        if self.in_start > 0 {
            self.input.copy_within(self.in_start..self.in_len, 0);
            self.in_len -= self.in_start;
            self.in_start = 0;
        }
    }

    fn drop_input(&mut self) {
        self.in_start = 0;
        self.in_len = 0;
        self.scan = Scan::default();
        self.partial_since = None;
    }
}

/// The front request, as far as framing goes.
enum Front<'a> {
    Partial { expect_continue: bool },
    Whole(Request<'a>),
}

/// Frames the front request `buf`, running httparse only when its head can have ended (or
/// has grown by half since it last ran, or reached the head limit): see the module docs.
fn frame_front<'a>(
    scan: &mut Scan,
    parses: &mut u32,
    buf: &'a [u8],
    limits: &Limits,
) -> Result<Front<'a>, HttpError> {
    const WAIT: Front<'static> = Front::Partial {
        expect_continue: false,
    };
    if let Some(len) = scan.len {
        if buf.len() < len {
            return Ok(WAIT);
        }
    } else {
        let from = scan.searched;
        let ended = head_end(buf, from).is_some();
        // Resume the search a little before the end: the blank line may straddle receives.
        scan.searched = buf.len().saturating_sub(3).max(from);
        let grown = buf.len() > scan.parsed_at + scan.parsed_at / 2;
        let full = buf.len() >= limits.head_bytes_max;
        if !ended && !grown && !full {
            return Ok(WAIT);
        }
    }
    *parses += 1;
    match frame(buf, limits)? {
        Framed::Request(r) => Ok(Front::Whole(r)),
        Framed::NeedHead { .. } => {
            scan.parsed_at = buf.len();
            Ok(WAIT)
        }
        Framed::NeedBody {
            len,
            expect_continue,
        } => {
            scan.len = Some(len);
            Ok(Front::Partial { expect_continue })
        }
    }
}

/// Where the head in `buf` ends (just past its blank line), searching from `from`: a line
/// feed followed by another, or by CR LF. Empty lines before the request line (which RFC 9112
/// lets a server skip) are not an end.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let first = buf.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let start = from.max(first);
    // memchr looks at 16 or 32 bytes a step: a head is a few hundred bytes and a handful of
    // line feeds, each of which is then looked at alone.
    for i in memchr::memchr_iter(b'\n', &buf[start..]).map(|i| start + i) {
        match buf.get(i + 1) {
            Some(b'\n') => return Some(i + 2),
            Some(b'\r') if buf.get(i + 2) == Some(&b'\n') => return Some(i + 3),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_end_is_a_blank_line_after_the_request_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\n", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0), None);
        assert_eq!(head_end(b"\r\n\r\n\r\nGET", 0), None, "leading empty lines");
        // Resumed three bytes before where the last search ended (16 bytes then).
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\n", 13), Some(18));
    }
}
