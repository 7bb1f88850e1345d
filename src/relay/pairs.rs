//! The dispatcher's pair table: for each (source, region) pair, where its connection is
//! ([`Link`]), its byte stack, the call it carries, and the queues that order connection work
//! (pairs due to connect, pairs to close, pairs with bytes to send). Sans-IO and clock-free:
//! times come in as ticks.
//!
//! It is NOT the pacing (the limiter's) and NOT what a link change means for bundles and
//! gauges: [`Pairs::set_link`] reports each change and the dispatcher derives the rest from it,
//! in one place.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;

use crate::arena::SlotHandle;
use crate::clock::Instant;
use crate::egress::stack::PairStack;
use crate::egress::transport::TransportError;
use crate::h2::conn::StreamId;
use crate::limiter::{ConnState, PairId};

/// Where a pair's connection is. Every change goes through [`Pairs::set_link`], which keeps the
/// handshake slots in use with it; the dispatcher derives the pairs-up gauge and the limiter's
/// view from the same change. So "opened", "up" and "in rotation" cannot drift apart, whichever
/// way a connection ends.
///
/// ```text
///   Down --poll_connect--> Connecting --connected--> Handshaking --tunnel/TLS done--+
///    ^                         |        (plaintext) ------------------------------+ |
///    |                         |                                                  v v
///    |<--connect failed--------+        Closing <--fail/close-- Opened --SETTINGS--> InRotation
///    |                                    |  ^                                      |  |
///    +<--------socket released------------+  +------call ended-- Draining <--GOAWAY-+  |
///                                            +------------------close requested--------+
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// No socket; a connect is queued.
    Down,
    /// The reactor is connecting the socket (holds a handshake slot).
    Connecting,
    /// Connected; the SOCKS5 tunnel and/or TLS handshake run (holds a handshake slot).
    Handshaking,
    /// HTTP/2 started; waiting for the engine's SETTINGS and its answer to a PING.
    Opened,
    /// The engine answered: the pair takes calls (in the limiter's rotation).
    InRotation,
    /// No new calls (GOAWAY, an unanswered PING); closed once the call in flight ends.
    Draining,
    /// The reactor was asked to close the socket; waiting for it to be released.
    Closing,
}

impl Link {
    /// A connect or handshake is in progress: it takes one of `handshakes_max` slots.
    pub fn holds_handshake_slot(self) -> bool {
        matches!(self, Link::Connecting | Link::Handshaking)
    }

    /// Counted in the pairs-up gauge and handed out by the limiter.
    pub fn in_rotation(self) -> bool {
        self == Link::InRotation
    }

    /// The limiter's view of the pair.
    pub fn conn_state(self) -> ConnState {
        match self {
            Link::Down => ConnState::Down,
            Link::Connecting | Link::Handshaking | Link::Opened => ConnState::Connecting,
            Link::InRotation => ConnState::Up,
            Link::Draining | Link::Closing => ConnState::Draining,
        }
    }
}

/// What a call in flight carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Bundle(SlotHandle),
    /// GetTipAccounts, refreshing the cache.
    Tips,
    /// GetTipAccounts to a region gone silent: an answer (of any status) says its engine
    /// processes calls again.
    Probe,
    /// GetNextScheduledLeader, for the leader strategy.
    Leader,
    /// A bot's bundle-status query forwarded to the engine's JSON-RPC (its entry in
    /// [`super::queries::Queries`]).
    Query(u16),
    /// A step of searcher authentication to the region (its [`super::auth::RegionAuth`]).
    Auth,
}

/// A call in flight on a pair: the pair is held by the limiter until it ends.
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    pub call: Call,
    /// A forwarded JSON-RPC call (`sendTransaction`), not gRPC.
    pub json: bool,
    pub stream: StreamId,
    pub started: Instant,
    /// When the request's last byte went to the kernel: the bundle's delivery time if the
    /// engine then accepts it.
    pub written: Option<Instant>,
    /// Whether the call was looked at for its region's silence (once, when it had been
    /// outstanding the silence threshold).
    pub silence_checked: bool,
    /// The region's access token it carried, where the region authenticates
    /// (`RegionAuth::generation`).
    pub token: u32,
}

impl InFlight {
    pub fn slot(&self) -> Option<SlotHandle> {
        match self.call {
            Call::Bundle(s) => Some(s),
            Call::Tips | Call::Probe | Call::Leader | Call::Query(_) | Call::Auth => None,
        }
    }
}

/// One pair's record (the budget counts it: [`PAIR_STATE_BYTES`]).
pub struct Pair {
    /// Changed only by [`Pairs::set_link`].
    link: Link,
    /// Its tunnel, TLS and HTTP/2, their storage kept across connections.
    pub stack: PairStack,
    /// When the current connect started: handshakes must finish within the connect timeout.
    pub setup_started: Instant,
    /// The engine address of the current connection (the proxy's CONNECT target).
    pub target: SocketAddr,
    /// How many of its connections failed at the engine address they went to: where it is in
    /// its walk over the region's addresses ([`crate::egress::resolve::HostAddrs::pick`]). A
    /// pair moves off an address that fails, and stays on one that works.
    pub failed_at_engine: u32,
    /// Why the last connection attempt or connection failed, until one succeeds.
    pub last_error: Option<TransportError>,
    /// `last_error` was recorded during the current attempt (not carried over from an
    /// earlier one).
    pub error_this_try: bool,
    pub in_flight: Option<InFlight>,
    /// Current reconnect back-off, ms (0: connect at once).
    pub backoff_ms: u64,
    pub up_since: Instant,
    /// The current connection joined rotation (its loss is a disconnect, not a failed setup).
    pub rotated: bool,
    /// The engine answered a PING on the current connection: it reads and answers here.
    pub answered_ping: bool,
    /// A call on the current connection went unanswered past its deadline: the connection is
    /// closed, and the back-off keeps growing until a call is answered again.
    pub timed_out: bool,
    /// The engine refused this source (PERMISSION_DENIED, UNAUTHENTICATED): it reconnects
    /// only after `denied_ms` (jittered).
    pub denied: bool,
    /// The wait after this source's last refusal, ms: `links::DENIED_FIRST_RETRY_MS`, doubling
    /// up to `links::DENIED_RETRY_MS` while refusals go on; 0 once a bundle is taken.
    pub denied_ms: u64,
    /// Queued in the dirty queue (has bytes to send).
    dirty: bool,
    /// Queued in the closing queue.
    close_queued: bool,
    /// Queued in the retime queue (its deadlines may have moved).
    retime_queued: bool,
    /// Its source or its region left the config (a reload): it takes no new call and does
    /// not reconnect until they are listed again.
    pub retired: bool,
}

impl Pair {
    pub fn link(&self) -> Link {
        self.link
    }
}

/// The dispatcher's record of one pair, in bytes (the budget counts it).
pub const PAIR_STATE_BYTES: usize = std::mem::size_of::<Pair>();

/// Room each pair has in the table's queues: to connect, with bytes to send, to close, to be
/// filed again in the timers.
pub const QUEUE_BYTES_PER_PAIR: usize =
    std::mem::size_of::<Reverse<(u64, u32)>>() + 3 * std::mem::size_of::<u32>();

/// See the module docs.
pub struct Pairs {
    pairs: Box<[Pair]>,
    /// (due tick, pair): pairs waiting to (re)connect.
    reconnects: BinaryHeap<Reverse<(u64, u32)>>,
    /// Pairs holding a handshake slot.
    connecting: u32,
    handshakes_max: u32,
    dirty: VecDeque<u32>,
    closing: VecDeque<u32>,
    /// Pairs handed out for change since the timers last filed them: whatever changed a
    /// pair's connection or call went through [`Pairs::get_mut`] or [`Pairs::set_link`], so
    /// every deadline that moved is found here, and no pass over the whole table is needed.
    retime: VecDeque<u32>,
}

impl Pairs {
    /// `count` pairs, all down; with `connect_now`, every one due to connect at `now`. Every
    /// queue is allocated here at its bound (one entry per pair).
    pub fn new(count: usize, handshakes_max: u32, connect_now: bool, now: Instant) -> Pairs {
        let pairs = (0..count)
            .map(|_| Pair {
                link: Link::Down,
                stack: PairStack::new(),
                setup_started: now,
                target: SocketAddr::from(([0, 0, 0, 0], 0)),
                failed_at_engine: 0,
                last_error: None,
                error_this_try: false,
                in_flight: None,
                backoff_ms: 0,
                up_since: now,
                rotated: false,
                answered_ping: false,
                timed_out: false,
                denied: false,
                denied_ms: 0,
                dirty: false,
                close_queued: false,
                retime_queued: false,
                retired: false,
            })
            .collect();
        let mut reconnects = BinaryHeap::with_capacity(count);
        if connect_now {
            for p in 0..count as u32 {
                reconnects.push(Reverse((now.0, p)));
            }
        }
        Pairs {
            pairs,
            reconnects,
            connecting: 0,
            handshakes_max: handshakes_max.max(1),
            dirty: VecDeque::with_capacity(count),
            closing: VecDeque::with_capacity(count),
            retime: VecDeque::with_capacity(count),
        }
    }

    /// Pairs in the table.
    pub fn count(&self) -> usize {
        self.pairs.len()
    }

    pub fn get(&self, pair: PairId) -> &Pair {
        &self.pairs[pair.0 as usize]
    }

    /// The pair, to change: it is queued to have its timers filed again.
    pub fn get_mut(&mut self, pair: PairId) -> &mut Pair {
        self.retime(pair.0);
        &mut self.pairs[pair.0 as usize]
    }

    /// Every pair, to change: all are queued to have their timers filed again.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Pair> {
        for p in 0..self.pairs.len() as u32 {
            self.retime(p);
        }
        self.pairs.iter_mut()
    }

    /// Queues `p` once until [`Pairs::poll_retime`] takes it.
    #[inline]
    pub fn retime(&mut self, p: u32) {
        let st = &mut self.pairs[p as usize];
        if !st.retime_queued {
            st.retime_queued = true;
            self.retime.push_back(p);
        }
    }

    /// A pair whose deadlines may have moved since its timers were last filed.
    pub fn poll_retime(&mut self) -> Option<PairId> {
        let p = self.retime.pop_front()?;
        self.pairs[p as usize].retime_queued = false;
        Some(PairId(p))
    }

    /// Moves `pair` to `new`, keeping the handshake slots in use right; returns the link it
    /// left, so the caller can derive the rest (`None`: it was there already).
    pub fn set_link(&mut self, pair: PairId, new: Link) -> Option<Link> {
        let st = &mut self.pairs[pair.0 as usize];
        let old = st.link;
        if old == new {
            return None;
        }
        st.link = new;
        self.retime(pair.0);
        let st = &mut self.pairs[pair.0 as usize];
        if new.in_rotation() {
            st.rotated = true;
        }
        match (old.holds_handshake_slot(), new.holds_handshake_slot()) {
            (true, false) => self.connecting -= 1,
            (false, true) => self.connecting += 1,
            _ => {}
        }
        Some(old)
    }

    /// At most `n` connects and handshakes at once from now on (a reload).
    pub fn set_handshakes_max(&mut self, n: u32) {
        self.handshakes_max = n.max(1);
    }

    /// Handshake slots in use: pairs connecting or handshaking.
    pub fn handshakes_in_progress(&self) -> u32 {
        self.connecting
    }

    /// `pair` should connect at tick `at`.
    pub fn queue_connect(&mut self, pair: PairId, at: u64) {
        self.reconnects.push(Reverse((at, pair.0)));
    }

    /// The next pair whose connect is due at `now`, if the handshake budget allows one more.
    /// Entries for pairs no longer down are stale (queued twice) and dropped.
    pub fn pop_due_connect(&mut self, now: Instant) -> Option<PairId> {
        if self.connecting >= self.handshakes_max {
            return None;
        }
        loop {
            let &Reverse((due, p)) = self.reconnects.peek()?;
            if due > now.0 {
                return None;
            }
            self.reconnects.pop();
            let st = &self.pairs[p as usize];
            if st.link == Link::Down && !st.retired {
                return Some(PairId(p));
            }
        }
    }

    /// When the next queued connect is due; `None` while every handshake slot is taken: a
    /// handshake's end (a completion) wakes the loop, which takes the connect then, so a due
    /// connect with no slot must not keep waking it (it would spin until one ends).
    pub fn next_connect_at(&self) -> Option<Instant> {
        if self.connecting >= self.handshakes_max {
            return None;
        }
        self.reconnects.peek().map(|Reverse((t, _))| Instant(*t))
    }

    /// No more connects (shutdown).
    pub fn clear_connects(&mut self) {
        self.reconnects.clear();
    }

    /// The pair has bytes to send: queued once until [`Pairs::poll_dirty`] takes it.
    pub fn mark_dirty(&mut self, p: u32) {
        let pair = &mut self.pairs[p as usize];
        if !pair.dirty {
            pair.dirty = true;
            self.dirty.push_back(p);
        }
    }

    /// A pair with bytes to send.
    pub fn poll_dirty(&mut self) -> Option<PairId> {
        let p = self.dirty.pop_front()?;
        self.pairs[p as usize].dirty = false;
        Some(PairId(p))
    }

    /// Forgets that the pair has bytes to send (its connection is gone).
    pub fn clear_dirty(&mut self, pair: PairId) {
        self.pairs[pair.0 as usize].dirty = false;
    }

    /// The pair's socket should be closed: queued once until [`Pairs::poll_close`] takes it.
    pub fn queue_close(&mut self, p: u32) {
        let st = &mut self.pairs[p as usize];
        if !st.close_queued {
            st.close_queued = true;
            self.closing.push_back(p);
        }
    }

    /// A pair whose socket the reactor should shut down and close.
    pub fn poll_close(&mut self) -> Option<PairId> {
        let p = self.closing.pop_front()?;
        self.pairs[p as usize].close_queued = false;
        Some(PairId(p))
    }
}
