//! The dispatcher: one reactor thread's bundles, pairs and upstream connections, sans-IO.
//!
//! It owns the thread's arena slice (the in-flight cap), its limiter (one record per
//! (egress, region) pair), a FIFO of waiting bundles per region, and one HTTP/2 connection per
//! pair. The reactor feeds it completions (bytes received, bytes sent, connects, closes) and
//! `now`; it answers with work for the reactor (pairs to connect, pairs to close, pairs with
//! bytes to send) and the instant it next needs to run. It never does I/O and never reads a
//! clock, so every decision below is testable with a simulated clock.
//!
//! Every admitted bundle ends exactly once, and is counted where it ends: delivered (the
//! engine said OK), rejected (the engine refused it for good), expired (older than the max age
//! before an engine took it) or failed (lost after being fully sent, or still held at
//! shutdown). `admitted = delivered + rejected + expired + failed + in flight` holds at every
//! step ([`Dispatcher::check_accounting`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::config::Source;
use crate::egress::resolve::HostAddrs;
use crate::egress::socks5::Socks5;
use crate::egress::transport::{Stage, TlsTarget, Transport, TransportError};

use crate::arena::{Arena, SlotHandle};
use crate::clock::{Instant, TickRate, Ticks};
use crate::grpc::{self, CallConfig, Outcome};
use crate::h2::conn::{Connection, Event, StreamEnd, StreamId};
use crate::limiter::{Acquire, ConnState, Limiter, LimiterConfig, PairId, RegionId, RegionRate};
use crate::log::LogQueue;

use super::ThreadSpec;
use super::tips::{TIP_REFRESH_MS, TIP_RETRY_MS, TipCache};
use crate::grpc::Code;
use crate::metrics::ThreadMetrics;
use crate::metrics::accounting::Stats;

/// Sends of one bundle that engines refused unprocessed (REFUSED_STREAM, UNAVAILABLE, lost
/// unsent) before it ends rejected: it bounds a bundle that every pair keeps refusing. A pair's
/// own refusal (rate limited, source denied) is no attempt against the bundle: that one goes to
/// another pair, bounded only by its age.
pub const ATTEMPTS_MAX: u16 = 8;

/// The dispatcher's record of one pair (the budget counts it).
pub const PAIR_STATE_BYTES: usize = std::mem::size_of::<Pair>();

/// A connection this long up without trouble resets its reconnect back-off.
const BACKOFF_RESET_MS: u64 = 10_000;

/// A source the engine refused (PERMISSION_DENIED, UNAUTHENTICATED) tries again this much
/// later: an operator fixes a key or an allow-list in minutes, and meanwhile the pair costs
/// one call per attempt, not one bundle per interval.
pub const DENIED_RETRY_MS: u64 = 300_000;

/// A region goes silent when a call has waited this share of the call deadline with nothing
/// at all received from the region meanwhile: well past any engine's normal answer, and early
/// enough that few bundles follow it into the silence. Pausing a region loses no bundle (they
/// wait, or expire counted), so an early verdict costs latency only.
const SILENCE_SHARE_OF_TIMEOUT: u64 = 4;
/// Probes of a silent region: the first soon, then doubling while unanswered.
const PROBE_BACKOFF_MS_MIN: u64 = 100;
const PROBE_BACKOFF_MS_MAX: u64 = 5_000;

/// The same connection error of one region is logged again at most this often.
const ERROR_RELOG_MS: u64 = 10_000;

/// Where a pair's connection is. Every change goes through [`Dispatcher::set_link`], which
/// derives from it everything that depends on it: the handshake slots in use, the pairs-up
/// gauge and the limiter's view of the pair. So "opened", "up" and "in rotation" cannot drift
/// apart, whichever way a connection ends.
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
    /// No socket; a connect is queued in `reconnects`.
    Down,
    /// The reactor is connecting the socket (holds a handshake slot).
    Connecting,
    /// Connected; the SOCKS5 tunnel and/or TLS handshake run (holds a handshake slot).
    Handshaking,
    /// HTTP/2 started; waiting for the engine's SETTINGS.
    Opened,
    /// The engine's SETTINGS arrived: the pair takes calls (in the limiter's rotation).
    InRotation,
    /// No new calls (GOAWAY); closed once the call in flight ends.
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
enum Call {
    Bundle(SlotHandle),
    /// GetTipAccounts, refreshing the cache.
    Tips,
    /// GetTipAccounts to a region gone silent: an answer (of any status) says its engine
    /// processes calls again.
    Probe,
}

/// A send in flight on a pair: the pair is held by the limiter until it ends.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    call: Call,
    stream: StreamId,
    started: Instant,
    /// When the request's last byte went to the kernel: the bundle's delivery time if the
    /// engine then accepts it.
    written: Option<Instant>,
    /// Through TLS: the ciphertext offset just past the record that carries the request's
    /// last byte, once it was encrypted ([`Dispatcher::encrypt_pending`]).
    wire_end: Option<u64>,
}

impl InFlight {
    fn slot(&self) -> Option<SlotHandle> {
        match self.call {
            Call::Bundle(s) => Some(s),
            Call::Tips | Call::Probe => None,
        }
    }
}

struct Pair {
    /// Changed only by [`Dispatcher::set_link`].
    link: Link,
    conn: Option<Box<Connection>>,
    /// The previous connection's HTTP/2 and TLS storage, reused by the next one: reconnects
    /// allocate nothing of their own.
    spare_conn: Option<Box<Connection>>,
    spare_tls: Option<Box<crate::tls::TlsSession>>,
    /// The SOCKS5 and TLS layers, for pairs that have them (`None`: plaintext straight to
    /// the socket).
    transport: Option<Box<Transport>>,
    /// When the current connect started: handshakes must finish within the connect timeout.
    setup_started: Instant,
    /// The engine address of the current connection (the proxy's CONNECT target).
    target: SocketAddr,
    /// Why the last connection attempt or connection failed, until one succeeds.
    last_error: Option<TransportError>,
    /// `last_error` was recorded during the current attempt (not carried over from an
    /// earlier one).
    error_this_try: bool,
    in_flight: Option<InFlight>,
    /// Current reconnect back-off, ms (0: connect at once).
    backoff_ms: u64,
    up_since: Instant,
    /// The current connection joined rotation (its loss is a disconnect, not a failed setup).
    rotated: bool,
    /// The engine answered a PING on the current connection: it reads and answers here.
    answered_ping: bool,
    /// A call on the current connection went unanswered past its deadline: the connection is
    /// closed, and the back-off keeps growing until a call is answered again.
    timed_out: bool,
    /// The engine refused this source (PERMISSION_DENIED, UNAUTHENTICATED): it reconnects
    /// only after [`DENIED_RETRY_MS`].
    denied: bool,
    /// Queued in `dirty` (has bytes to send).
    dirty: bool,
    /// Queued in `closing`.
    close_queued: bool,
}

/// What became of a bundle whose call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Delivered,
    Cooldown(u64),
    Retry,
    Rejected,
    Failed,
    /// The engine refused the source, not the bundle: the bundle goes to another pair.
    Denied,
}

/// A region whose engine stopped answering: calls went unanswered for
/// [`Dispatcher::silence_after`] with nothing at all received from it meanwhile.
#[derive(Clone, Copy, Debug)]
struct Silence {
    since: Instant,
    /// When the next probe call may go.
    probe_at: Instant,
    /// Back-off between probes, doubling while they go unanswered.
    probe_backoff_ms: u64,
    probe_in_flight: bool,
}

/// One region as the dispatcher sees it.
struct Region {
    name: String,
    call: CallConfig,
    addrs: Arc<HostAddrs>,
    tls: Option<TlsTarget>,
    /// The last error logged for this region and when, so a thousand pairs failing alike log
    /// one line (again after [`ERROR_RELOG_MS`] if it persists).
    logged_error: Option<(String, Instant)>,
    /// A line about this region's first TLS session was logged.
    tls_logged: bool,
    fifo: VecDeque<SlotHandle>,
    /// Its pairs were queued to connect (at start when eager, on its first bundle when lazy).
    connect_requested: bool,
    /// When anything last arrived from any of its connections.
    last_rx: Instant,
    /// Set while its engine is silent: no bundle is sent until a probe is answered.
    silence: Option<Silence>,
    /// HTTP/2 PING after this long without a frame (`None`: off); doubled, up to the gRPC
    /// policy, when the engine says ENHANCE_YOUR_CALM.
    keepalive_ms: Option<u64>,
}

/// A pair the reactor should connect now.
#[derive(Clone, Copy, Debug)]
pub struct ConnectOrder {
    pub pair: PairId,
    /// The source address to bind, or `None` to leave from the host's default address (to a
    /// SOCKS5 proxy).
    pub local: Option<IpAddr>,
    /// The engine, or the proxy that tunnels to it.
    pub remote: SocketAddr,
}

/// See the module docs.
pub struct Dispatcher {
    rate: TickRate,
    arena: Arena,
    limiter: Limiter,
    regions: Box<[Region]>,
    pairs: Box<[Pair]>,
    sources: Box<[Source]>,
    /// Setup (connect + tunnel + TLS) deadline.
    setup_timeout: Ticks,
    setup_timeout_ms: u64,
    /// This thread's log lines (new per-region connection errors, a region's first TLS
    /// session), written by the logging thread.
    log: Arc<LogQueue>,

    /// (due tick, pair): pairs waiting to (re)connect.
    reconnects: BinaryHeap<Reverse<(u64, u32)>>,
    connecting: u32,
    handshakes_max: u32,
    dirty: VecDeque<u32>,
    closing: VecDeque<u32>,
    /// Earliest instant a region with waiting bundles needs the dispatcher again.
    wake: Option<Instant>,
    max_age: Ticks,
    upstream_timeout_ms: u64,
    reconnect_min_ms: u64,
    reconnect_max_ms: u64,
    h2: crate::h2::conn::Config,
    rotate: usize,
    rng: u64,
    stats: Arc<Stats>,
    metrics: Arc<ThreadMetrics>,
    /// A call outstanding this long with nothing received from its region meanwhile makes
    /// the region silent (see [`Silence`]).
    silence_after: Ticks,
    /// Every PING must be acknowledged within this.
    ping_timeout_ms: u64,
    tips: TipCache,
    tip_refresh: Ticks,
    tip_retry: Ticks,
    tip_region: usize,
}

impl Dispatcher {
    /// Everything a thread's share of the relay needs, allocated now.
    pub fn new(
        spec: &ThreadSpec,
        rate: TickRate,
        now: Instant,
        stats: Arc<Stats>,
        metrics: Arc<ThreadMetrics>,
    ) -> Dispatcher {
        let limiter = Limiter::new(
            &LimiterConfig {
                addresses: spec.sources.len() as u32,
                regions: spec
                    .regions
                    .iter()
                    .map(|r| RegionRate::from_ms(rate, r.interval_ms, r.burst.max(1)))
                    .collect(),
                slot_us_max: crate::limiter::DEFAULT_SLOT_US_MAX,
                tick_rate: rate,
            },
            now,
        );
        let pair_count = limiter.pair_count();
        let slots = spec.arena_slots as usize;
        let regions = spec
            .regions
            .iter()
            .map(|r| Region {
                name: r.name.clone(),
                call: CallConfig {
                    scheme: if r.tls.is_some() { "https" } else { "http" },
                    authority: r.authority.clone(),
                    authorization: None,
                    retry_after_ms_default: grpc::RETRY_AFTER_MS_DEFAULT,
                },
                addrs: r.addrs.clone(),
                tls: r.tls.clone(),
                logged_error: None,
                tls_logged: false,
                fifo: VecDeque::with_capacity(slots),
                connect_requested: spec.connect_eagerly,
                last_rx: now,
                silence: None,
                keepalive_ms: (spec.ping_idle_ms > 0).then_some(spec.ping_idle_ms),
            })
            .collect();
        let pairs = (0..pair_count)
            .map(|_| Pair {
                link: Link::Down,
                conn: None,
                spare_conn: None,
                spare_tls: None,
                transport: None,
                setup_started: now,
                target: SocketAddr::from(([0, 0, 0, 0], 0)),
                last_error: None,
                error_this_try: false,
                in_flight: None,
                backoff_ms: 0,
                up_since: now,
                rotated: false,
                answered_ping: false,
                timed_out: false,
                denied: false,
                dirty: false,
                close_queued: false,
            })
            .collect();
        let mut reconnects = BinaryHeap::with_capacity(pair_count);
        if spec.connect_eagerly {
            for p in 0..pair_count as u32 {
                reconnects.push(Reverse((now.0, p)));
            }
        }
        stats.arena_capacity.set(slots as u64);
        Dispatcher {
            rate,
            arena: Arena::new(spec.arena_slots),
            limiter,
            regions,
            pairs,
            sources: spec.sources.clone().into_boxed_slice(),
            setup_timeout: rate.from_ms(spec.connect_timeout_ms),
            setup_timeout_ms: spec.connect_timeout_ms,
            log: LogQueue::new(&format!("relay-{}", spec.thread)),
            reconnects,
            connecting: 0,
            handshakes_max: spec.handshakes_max.max(1),
            dirty: VecDeque::with_capacity(pair_count),
            closing: VecDeque::with_capacity(pair_count),
            wake: None,
            max_age: rate.from_ms(spec.bundle_max_age_ms),
            upstream_timeout_ms: spec.upstream_timeout_ms,
            reconnect_min_ms: spec.reconnect_min_ms.max(1),
            reconnect_max_ms: spec.reconnect_max_ms.max(spec.reconnect_min_ms.max(1)),
            h2: crate::h2::conn::Config {
                keepalive_timeout_ms: spec.ping_timeout_ms,
                ..spec.h2.clone()
            },
            rotate: 0,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (spec.thread as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93),
            stats,
            metrics,
            silence_after: rate
                .from_ms((spec.upstream_timeout_ms / SILENCE_SHARE_OF_TIMEOUT).max(1)),
            ping_timeout_ms: spec.ping_timeout_ms,
            tips: TipCache::new(now),
            tip_refresh: rate.from_ms(TIP_REFRESH_MS),
            tip_retry: rate.from_ms(TIP_RETRY_MS),
            tip_region: spec.thread,
        }
    }

    pub fn region_count(&self) -> usize {
        self.regions.len()
    }

    pub fn pair_count(&self) -> usize {
        self.pairs.len()
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    pub fn link(&self, pair: PairId) -> Link {
        self.pairs[pair.0 as usize].link
    }

    fn now_ns(&self, now: Instant) -> u64 {
        self.rate.to_ns(Ticks(now.0))
    }

    // ---- intake side ----

    /// The region a rotating-port bundle goes to: the one whose pool can send soonest (a
    /// region with a pair ready now beats one that must wait); ties go round-robin.
    pub fn pick_region(&mut self) -> u8 {
        let n = self.regions.len();
        let mut best: Option<(u64, usize)> = None;
        for k in 0..n {
            let r = (self.rotate + k) % n;
            // A silent region takes nothing new until its engine answers again.
            if self.regions[r].silence.is_some() {
                continue;
            }
            // A region already holding a queue sends those first: count its backlog as time.
            let Some(at) = self.limiter.next_ready_at(RegionId(r as u8)) else {
                continue;
            };
            let backlog = self.regions[r].fifo.len() as u64;
            let key =
                at.0.saturating_add(backlog.saturating_mul(self.rate.from_us(1).0));
            if best.is_none_or(|(b, _)| key < b) {
                best = Some((key, r));
            }
        }
        let r = best.map_or(self.rotate % n, |(_, r)| r);
        self.rotate = (r + 1) % n;
        r as u8
    }

    /// Takes an arena slot for a new bundle; `None` is the in-flight cap.
    pub fn admit_slot(&mut self, now: Instant) -> Option<SlotHandle> {
        self.arena.acquire(now).ok()
    }

    pub fn arena_mut(&mut self) -> &mut Arena {
        &mut self.arena
    }

    /// Gives back a slot that never became a bundle (decoding failed).
    pub fn abandon_slot(&mut self, slot: SlotHandle) {
        self.arena.release(slot).expect("slot held by the intake");
    }

    /// The slot holds a decoded, encoded bundle for `region`: it is admitted and queued.
    pub fn enqueue(&mut self, slot: SlotHandle, region: u8) {
        self.arena.get_mut(slot).expect("held").meta.region = region;
        self.regions[region as usize].fifo.push_back(slot);
        let counts = self.stats.region(region as usize);
        counts.admitted.inc();
        counts.in_flight.inc();
    }

    // ---- dispatching ----

    /// Sends every waiting bundle that has a ready pair; expires the ones too old.
    pub fn dispatch(&mut self, now: Instant) {
        self.wake = None;
        for r in 0..self.regions.len() {
            self.dispatch_region(r, now);
        }
        if now.0 >= self.tips.due.0 && !self.tips.in_flight {
            self.refresh_tips(now);
        }
    }

    /// Asks one engine for the tip accounts, on a pair the limiter hands out like any other
    /// (a GetTipAccounts call counts against the pair's rate too). Regions take turns.
    fn refresh_tips(&mut self, now: Instant) {
        let n = self.regions.len();
        for k in 0..n {
            let r = (self.tip_region + k) % n;
            if !self.regions[r].fifo.is_empty() || self.regions[r].silence.is_some() {
                continue; // bundles first; a silent region gets probes instead
            }
            let Acquire::Pair(pair) = self.limiter.acquire(RegionId(r as u8), now) else {
                continue;
            };
            self.tip_region = r + 1;
            if self.start_tip_call(pair, r, Call::Tips, now) {
                self.tips.in_flight = true;
                self.tips.due = now.after(self.tip_refresh);
            } else {
                self.limiter_done(pair, now);
                self.tips.due = now.after(self.tip_retry);
            }
            return;
        }
        self.tips.due = now.after(self.tip_retry);
    }

    /// The tip accounts as a JSON array: the engines' latest answer, Jito's published list
    /// until one arrives.
    pub fn tip_accounts_json(&self) -> &[u8] {
        self.tips.json()
    }

    fn dispatch_region(&mut self, r: usize, now: Instant) {
        if self.regions[r].silence.is_some() {
            self.probe_silent(r, now);
            self.expire_waiting(r, now);
            return;
        }
        while let Some(&slot) = self.regions[r].fifo.front() {
            let admitted_at = self.arena.get(slot).expect("queued slot").meta.admitted_at;
            if now.since(admitted_at).0 > self.max_age.0 {
                self.regions[r].fifo.pop_front();
                self.end(slot, EndKind::Expired);
                continue;
            }
            match self.limiter.acquire(RegionId(r as u8), now) {
                Acquire::Pair(pair) => {
                    self.regions[r].fifo.pop_front();
                    if !self.start_send(pair, slot, now) {
                        // The connection cannot take a call (closing, or out of stream ids):
                        // the bundle goes back to the head, the pair leaves rotation.
                        self.regions[r].fifo.push_front(slot);
                        self.limiter_done(pair, now);
                        self.request_close(pair.0, now);
                    }
                }
                Acquire::WaitUntil(at) => {
                    self.wake_at(at);
                    break;
                }
                Acquire::NoPairUp => {
                    if !self.regions[r].connect_requested {
                        self.connect_region(r, now);
                    }
                    break;
                }
            }
        }
        if let Some(&slot) = self.regions[r].fifo.front() {
            let admitted_at = self.arena.get(slot).expect("queued slot").meta.admitted_at;
            self.wake_at(admitted_at.after(Ticks(self.max_age.0 + 1)));
        }
    }

    /// A silent region's waiting bundles only expire (at the max age, counted): none is sent
    /// until its engine answers again.
    fn expire_waiting(&mut self, r: usize, now: Instant) {
        while let Some(&slot) = self.regions[r].fifo.front() {
            let admitted_at = self.arena.get(slot).expect("queued slot").meta.admitted_at;
            if now.since(admitted_at).0 <= self.max_age.0 {
                self.wake_at(admitted_at.after(Ticks(self.max_age.0 + 1)));
                break;
            }
            self.regions[r].fifo.pop_front();
            self.end(slot, EndKind::Expired);
        }
    }

    /// A silent region gets one probe call at a time (GetTipAccounts, through the limiter like
    /// any call), backing off while they go unanswered; any answer ends the silence.
    fn probe_silent(&mut self, r: usize, now: Instant) {
        let Some(sil) = self.regions[r].silence else {
            return;
        };
        if sil.probe_in_flight {
            return;
        }
        if now.0 < sil.probe_at.0 {
            self.wake_at(sil.probe_at);
            return;
        }
        let pair = match self.limiter.acquire(RegionId(r as u8), now) {
            Acquire::Pair(pair) => pair,
            Acquire::WaitUntil(at) => {
                self.wake_at(at);
                return;
            }
            Acquire::NoPairUp => return,
        };
        if self.start_tip_call(pair, r, Call::Probe, now) {
            if let Some(sil) = self.regions[r].silence.as_mut() {
                sil.probe_in_flight = true;
            }
        } else {
            self.limiter_done(pair, now);
            self.request_close(pair.0, now);
        }
    }

    /// Starts a GetTipAccounts call (a cache refresh or a silent region's probe) on held
    /// `pair` of region `r`; false when its connection cannot take a call.
    fn start_tip_call(&mut self, pair: PairId, r: usize, call: Call, now: Instant) -> bool {
        let now_ns = self.now_ns(now);
        let timeout_ms = self.upstream_timeout_ms;
        let started = self.pairs[pair.0 as usize].conn.as_deref_mut().map(|conn| {
            grpc::start_call(
                conn,
                &self.regions[r].call,
                now_ns,
                grpc::Method::GetTipAccounts,
                Some(timeout_ms),
                |_| Some(0),
            )
        });
        let Some(Ok(stream)) = started else {
            return false;
        };
        self.pairs[pair.0 as usize].in_flight = Some(InFlight {
            call,
            stream,
            started: now,
            written: None,
            wire_end: None,
        });
        self.mark_dirty(pair.0);
        true
    }

    /// Calls outstanding past [`Dispatcher::silence_after`] with nothing received from their
    /// region meanwhile: the region goes silent (one log line), its connections are PINGed
    /// (a dead one closes when its PING goes unanswered), and no bundle is sent to it until
    /// a probe call is answered.
    fn detect_silence(&mut self, now: Instant) {
        for p in 0..self.pairs.len() {
            let Some(f) = self.pairs[p].in_flight else {
                continue;
            };
            // Bytes stuck unsent that long are as telling as an answer that does not come.
            let written = f.written.unwrap_or(f.started);
            if now.since(written).0 <= self.silence_after.0 {
                continue;
            }
            let r = self.limiter.region_of(PairId(p as u32)).0 as usize;
            if self.regions[r].silence.is_some() || self.regions[r].last_rx.0 >= written.0 {
                continue;
            }
            self.regions[r].silence = Some(Silence {
                since: written,
                probe_at: now,
                probe_backoff_ms: PROBE_BACKOFF_MS_MIN,
                probe_in_flight: false,
            });
            self.stats.silences.inc();
            let outstanding = (0..self.sources.len() as u32)
                .filter(|&a| {
                    let q = self.limiter.pair(a, RegionId(r as u8));
                    self.pairs[q.0 as usize].in_flight.is_some()
                })
                .count();
            self.log.line(format_args!(
                "region {}: no answer and nothing else from its engine for {} ms with {outstanding} calls outstanding: no new bundles for it until it answers a probe",
                self.regions[r].name,
                self.rate.to_us(now.since(written)) / 1_000
            ));
            let now_ns = self.now_ns(now);
            let ping_timeout_ms = self.ping_timeout_ms;
            for a in 0..self.sources.len() as u32 {
                let q = self.limiter.pair(a, RegionId(r as u8)).0;
                if let Some(c) = self.pairs[q as usize].conn.as_deref_mut() {
                    c.ping(now_ns, ping_timeout_ms);
                    if !c.poll_transmit().is_empty() {
                        self.mark_dirty(q);
                    }
                }
            }
        }
    }

    /// Something arrived from region `r`: a silent region answers again.
    fn heard_from(&mut self, r: usize, now: Instant, answered: bool) {
        self.regions[r].last_rx = now;
        if !answered {
            return;
        }
        if let Some(sil) = self.regions[r].silence.take() {
            self.log.line(format_args!(
                "region {}: its engine answers again after {} ms of silence",
                self.regions[r].name,
                self.rate.to_us(now.since(sil.since)) / 1_000
            ));
        }
    }

    /// Lazy connecting: a region's first bundle queues all its pairs to connect.
    fn connect_region(&mut self, r: usize, now: Instant) {
        self.regions[r].connect_requested = true;
        for a in 0..self.sources.len() as u32 {
            let pair = self.limiter.pair(a, RegionId(r as u8));
            if self.pairs[pair.0 as usize].link == Link::Down {
                self.reconnects.push(Reverse((now.0, pair.0)));
            }
        }
    }

    fn wake_at(&mut self, at: Instant) {
        self.wake = Some(self.wake.map_or(at, |w| if at.0 < w.0 { at } else { w }));
    }

    /// The limiter's side of a send's end: the pair's next slot counts from `now`, the
    /// answer, so jitter between our send and the engine's stamp can never make it early.
    fn limiter_done(&mut self, pair: PairId, now: Instant) {
        self.limiter.finish(pair, now);
    }

    fn start_send(&mut self, pair: PairId, slot: SlotHandle, now: Instant) -> bool {
        let p = pair.0 as usize;
        let r = self.limiter.region_of(pair).0 as usize;
        let now_ns = self.now_ns(now);
        let Some(conn) = self.pairs[p].conn.as_deref_mut() else {
            return false;
        };
        let s = self.arena.get(slot).expect("queued slot");
        let frame = s.encoded_frame();
        let started = grpc::start_call(
            conn,
            &self.regions[r].call,
            now_ns,
            grpc::Method::SendBundle,
            Some(self.upstream_timeout_ms),
            |buf| {
                let out = buf.get_mut(..frame.len())?;
                out.copy_from_slice(frame);
                Some(frame.len())
            },
        );
        match started {
            Ok(stream) => {
                self.pairs[p].in_flight = Some(InFlight {
                    call: Call::Bundle(slot),
                    stream,
                    started: now,
                    written: None,
                    wire_end: None,
                });
                if self.metrics.enabled() {
                    let admitted_at = self.arena.get(slot).expect("held").meta.admitted_at;
                    self.metrics
                        .record_limiter_wait_ns(self.rate.to_ns(now.since(admitted_at)));
                }
                self.arena.get_mut(slot).expect("held").meta.attempts += 1;
                self.mark_dirty(pair.0);
                true
            }
            Err(_) => false,
        }
    }

    fn mark_dirty(&mut self, p: u32) {
        let pair = &mut self.pairs[p as usize];
        if !pair.dirty {
            pair.dirty = true;
            self.dirty.push_back(p);
        }
    }

    /// Ends a bundle: counts it and frees its slot.
    fn end(&mut self, slot: SlotHandle, kind: EndKind) {
        let r = self.arena.get(slot).expect("held").meta.region as usize;
        let counts = self.stats.region(r);
        match kind {
            EndKind::Delivered => counts.delivered.inc(),
            EndKind::Rejected => counts.rejected.inc(),
            EndKind::Expired => counts.expired.inc(),
            EndKind::Failed => counts.failed.inc(),
        }
        counts.in_flight.set(counts.in_flight.get() - 1);
        self.arena.release(slot).expect("a bundle ends once");
    }

    /// Puts a bundle back at the head of its region's FIFO (it is the oldest there).
    fn requeue(&mut self, slot: SlotHandle, now: Instant) {
        let meta = *self.arena.get(slot).expect("held").meta;
        if now.since(meta.admitted_at).0 > self.max_age.0 {
            self.end(slot, EndKind::Expired);
        } else if meta.attempts >= ATTEMPTS_MAX {
            // Never processed, by the engines' own word, however often it was tried.
            self.end(slot, EndKind::Rejected);
        } else {
            self.stats.retries.inc();
            self.regions[meta.region as usize].fifo.push_front(slot);
        }
    }

    /// When the reactor must run the dispatcher again at the latest (bundles waiting for a
    /// pair or about to expire, reconnects due, HTTP/2 timers), `None` if nothing is timed.
    pub fn next_deadline(&self) -> Option<Instant> {
        let reconnect = self.reconnects.peek().map(|Reverse((t, _))| Instant(*t));
        match (self.wake, reconnect) {
            (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    // ---- connections ----

    /// A pair whose (re)connect is due, if the handshake budget allows one more.
    pub fn poll_connect(&mut self, now: Instant) -> Option<ConnectOrder> {
        if self.connecting >= self.handshakes_max {
            return None;
        }
        let p = loop {
            let &Reverse((due, p)) = self.reconnects.peek()?;
            if due > now.0 {
                return None;
            }
            self.reconnects.pop();
            // An entry for a pair no longer down is stale (it was queued twice).
            if self.pairs[p as usize].link == Link::Down {
                break p;
            }
        };
        let pair = PairId(p);
        let r = self.limiter.region_of(pair).0 as usize;
        let source = &self.sources[self.limiter.address_of(pair) as usize];
        // A local source reaches only engine addresses of its own family (a proxy reaches any).
        let family = match source {
            Source::Local(ip) => Some(ip.is_ipv4()),
            Source::Socks5 { .. } => None,
        };
        let Some(target) = self.regions[r].addrs.pick(p, family) else {
            // The region's name now resolves to no address of this family (checked at start,
            // so only after a later lookup): try again later, with the reason on the pair.
            self.note_error(
                pair,
                TransportError::Connect {
                    errno: libc::EAFNOSUPPORT,
                },
                now,
            );
            self.stats.connect_failures.inc();
            self.schedule_reconnect(pair, now);
            return None;
        };
        let (local, remote) = match source {
            Source::Local(ip) => (Some(*ip), target),
            Source::Socks5 { proxy, .. } => (None, *proxy),
        };
        self.set_link(pair, Link::Connecting, now);
        let st = &mut self.pairs[p as usize];
        st.setup_started = now;
        st.target = target;
        st.rotated = false;
        st.answered_ping = false;
        st.timed_out = false;
        st.error_this_try = false;
        Some(ConnectOrder {
            pair,
            local,
            remote,
        })
    }

    /// Moves a pair to `new` and keeps what depends on its link right: handshake slots in use,
    /// the pairs-up gauge and the limiter's rotation.
    fn set_link(&mut self, pair: PairId, new: Link, now: Instant) {
        let st = &mut self.pairs[pair.0 as usize];
        let old = st.link;
        if old == new {
            return;
        }
        st.link = new;
        if new.in_rotation() {
            st.rotated = true;
        }
        match (old.holds_handshake_slot(), new.holds_handshake_slot()) {
            (true, false) => self.connecting -= 1,
            (false, true) => self.connecting += 1,
            _ => {}
        }
        match (old.in_rotation(), new.in_rotation()) {
            (true, false) => self.stats.pairs_up.set(self.stats.pairs_up.get() - 1),
            (false, true) => self.stats.pairs_up.set(self.stats.pairs_up.get() + 1),
            _ => {}
        }
        if old.conn_state() != new.conn_state() {
            self.limiter.set_connection(pair, new.conn_state(), now);
        }
    }

    /// Handshake slots in use: pairs connecting or handshaking (for tests of the state
    /// bookkeeping).
    pub fn handshakes_in_progress(&self) -> u32 {
        self.connecting
    }

    /// The socket connected. Without a tunnel or TLS the HTTP/2 connection starts now
    /// (preface and SETTINGS queued); otherwise the SOCKS5 greeting or the TLS ClientHello goes
    /// first and HTTP/2 starts once they are done. Either way the pair joins rotation only when
    /// the engine's SETTINGS arrive ([`Dispatcher::received`]): an engine that accepts TCP and
    /// then drops it never gets a bundle to lose.
    pub fn connected(&mut self, pair: PairId, now: Instant) {
        let p = pair.0 as usize;
        debug_assert_eq!(self.pairs[p].link, Link::Connecting);
        let r = self.limiter.region_of(pair).0 as usize;
        let socks = match &self.sources[self.limiter.address_of(pair) as usize] {
            Source::Local(_) => None,
            Source::Socks5 { proxy, auth } => {
                let auth = auth.as_ref().map(|(u, pw)| (u.as_str(), pw.as_str()));
                match Socks5::new(self.pairs[p].target, auth) {
                    Ok(s) => Some((*proxy, s)),
                    Err(error) => {
                        let proxy = *proxy;
                        self.set_link(pair, Link::Handshaking, now);
                        self.fail(pair, TransportError::Socks5 { proxy, error }, now);
                        return;
                    }
                }
            }
        };
        if socks.is_none() && self.regions[r].tls.is_none() {
            self.open(pair, now);
            return;
        }
        self.set_link(pair, Link::Handshaking, now);
        let spare = self.pairs[p].spare_tls.take();
        match Transport::reusing(socks, self.regions[r].tls.as_ref(), spare) {
            Ok(t) => {
                self.pairs[p].transport = Some(Box::new(t));
                self.mark_dirty(pair.0);
            }
            Err(e) => self.fail(pair, e, now),
        }
    }

    /// Tunnel and TLS are done (or absent): HTTP/2 starts and the setup's handshake slot frees.
    fn open(&mut self, pair: PairId, now: Instant) {
        let p = pair.0 as usize;
        self.set_link(pair, Link::Opened, now);
        let now_ns = self.now_ns(now);
        let r = self.limiter.region_of(pair).0 as usize;
        let keepalive = self.regions[r].keepalive_ms;
        let h2 = &self.h2;
        let st = &mut self.pairs[p];
        let spare = &mut st.spare_conn;
        let conn = st
            .conn
            .get_or_insert_with(|| fresh_connection(spare, h2, now_ns));
        conn.set_keepalive(keepalive);
        // Rotation waits for this PING's answer too: an engine that sends SETTINGS and then
        // neither reads nor answers (restarting, overloaded, a proxy with nothing behind it)
        // never gets a bundle to lose.
        conn.ping(now_ns, self.ping_timeout_ms);
        st.up_since = now;
        st.last_error = None;
        self.stats.connects.inc();
        let target = st.target;
        if let Some(tls) = st.transport.as_deref().and_then(Transport::tls) {
            self.stats.tls_handshakes.inc();
            if tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                self.stats.tls_resumed.inc();
            }
            let r = self.limiter.region_of(pair).0 as usize;
            if !self.regions[r].tls_logged {
                self.regions[r].tls_logged = true;
                let version = tls.protocol_version();
                self.log.line(format_args!(
                    "region {}: {} to {} ({}), ALPN h2",
                    self.regions[r].name,
                    Versioned(version),
                    tls.server_name(),
                    target
                ));
            }
        }
        self.mark_dirty(pair.0);
    }

    /// Records why a pair's connection failed and has it closed; the reactor's release then
    /// ends in [`Dispatcher::socket_released`], which backs off and reconnects.
    fn fail(&mut self, pair: PairId, error: TransportError, now: Instant) {
        self.note_error(pair, error, now);
        self.request_close(pair.0, now);
    }

    /// Keeps a pair's error for /debug/pairs and queues a log line, once per region and error
    /// text (again after [`ERROR_RELOG_MS`]).
    fn note_error(&mut self, pair: PairId, error: TransportError, now: Instant) {
        let r = self.limiter.region_of(pair).0 as usize;
        let text = error.to_string();
        let relog = self.rate.from_ms(ERROR_RELOG_MS);
        let fresh = match &self.regions[r].logged_error {
            Some((t, at)) => *t != text || now.since(*at).0 >= relog.0,
            None => true,
        };
        if fresh {
            let source = &self.sources[self.limiter.address_of(pair) as usize];
            self.log.line(format_args!(
                "region {}: pair {source} -> {}: {text}",
                self.regions[r].name, self.pairs[pair.0 as usize].target
            ));
            self.regions[r].logged_error = Some((text, now));
        }
        let st = &mut self.pairs[pair.0 as usize];
        st.last_error = Some(error);
        st.error_this_try = true;
    }

    /// This thread's log queue (the reactor writes its own lines there too).
    pub fn log(&self) -> &Arc<LogQueue> {
        &self.log
    }

    /// Why the pair's last connection failed, until one succeeds.
    pub fn last_error(&self, pair: PairId) -> Option<&TransportError> {
        self.pairs[pair.0 as usize].last_error.as_ref()
    }

    /// The TCP connect failed (refused, unreachable, timed out; `errno`): back off and try
    /// again.
    pub fn connect_failed(&mut self, pair: PairId, now: Instant, errno: i32) {
        let p = pair.0 as usize;
        debug_assert!(matches!(
            self.pairs[p].link,
            Link::Connecting | Link::Closing
        ));
        self.note_error(pair, TransportError::Connect { errno }, now);
        self.stats.connect_failures.inc();
        let r = self.limiter.region_of(pair).0 as usize;
        self.regions[r].addrs.mark_stale();
        self.schedule_reconnect(pair, now);
    }

    fn schedule_reconnect(&mut self, pair: PairId, now: Instant) {
        let p = pair.0 as usize;
        self.metrics
            .reconnect(self.limiter.region_of(pair).0 as usize);
        self.set_link(pair, Link::Down, now);
        let st = &mut self.pairs[p];
        st.backoff_ms = if st.backoff_ms == 0 {
            self.reconnect_min_ms
        } else {
            (st.backoff_ms * 2).min(self.reconnect_max_ms)
        };
        // Full jitter over the upper half: pairs that failed together do not retry together.
        let b = st.backoff_ms;
        let jitter = self.next_random() % (b / 2 + 1);
        let mut wait = b / 2 + jitter;
        if std::mem::take(&mut self.pairs[p].denied) {
            wait = wait.max(DENIED_RETRY_MS);
        }
        self.reconnects
            .push(Reverse((now.0 + self.rate.from_ms(wait).0, pair.0)));
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: reconnect jitter needs spread, not cryptographic quality.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The dispatcher wants this pair's connection closed (a protocol error, GOAWAY drained,
    /// a call that could not start or timed out, a failed handshake): out of rotation now, the
    /// reactor closes the socket.
    fn request_close(&mut self, p: u32, now: Instant) {
        let link = self.pairs[p as usize].link;
        if matches!(link, Link::Down | Link::Connecting | Link::Closing) {
            // No socket yet, or already closing (a connect in flight ends on its own).
            return;
        }
        self.set_link(PairId(p), Link::Closing, now);
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

    /// The reactor released the pair's socket (its connect failed, the peer closed it, an
    /// error, or our close). `errno` says why a connect failed. A connect that never completed
    /// is a failed connect; anything later ends the connection: calls still running end as its
    /// loss decides, and the pair backs off and reconnects.
    pub fn socket_released(&mut self, pair: PairId, now: Instant, errno: i32) {
        if self.pairs[pair.0 as usize].link == Link::Connecting {
            self.connect_failed(pair, now, errno);
        } else {
            self.transport_closed(pair, now);
        }
    }

    /// The pair's connection ended after its TCP connect (see [`Dispatcher::socket_released`]).
    pub fn transport_closed(&mut self, pair: PairId, now: Instant) {
        let p = pair.0 as usize;
        // We asked for this close (a deadline, a protocol error) rather than the engine.
        let we_closed = self.pairs[p].link == Link::Closing;
        let r = self.limiter.region_of(pair).0 as usize;
        // Engines behind load balancers move: look the name up again before reconnecting.
        self.regions[r].addrs.mark_stale();
        if let Some(conn) = self.pairs[p].conn.as_deref_mut() {
            conn.handle_transport_closed();
        }
        self.drain_events(pair, now);
        if let Some(f) = self.pairs[p].in_flight.take() {
            // The connection ended the stream without an event we could map: not sent for sure.
            self.limiter_done(pair, now);
            self.call_aborted(f.call, r, now);
        }
        if !self.pairs[p].rotated {
            // It never joined rotation: a failed setup (tunnel, TLS, or HTTP/2 before the
            // engine's SETTINGS), not a lost connection.
            let closed = self.pairs[p]
                .transport
                .as_deref_mut()
                .and_then(Transport::handle_transport_closed);
            // When we closed it, the reason was recorded then, and the tunnel or TLS seeing
            // its socket go mid-handshake is our doing: keep the reason we gave.
            if !(we_closed && self.pairs[p].error_this_try) {
                let stage = self.pairs[p]
                    .transport
                    .as_deref()
                    .map_or(Stage::Open, Transport::stage);
                let error = closed.unwrap_or(TransportError::ClosedDuringSetup { stage });
                self.note_error(pair, error, now);
            }
            self.stats.connect_failures.inc();
        } else {
            self.stats.disconnects.inc();
            let st = &mut self.pairs[p];
            if !st.timed_out && now.since(st.up_since).0 >= self.rate.from_ms(BACKOFF_RESET_MS).0 {
                st.backoff_ms = 0;
            }
        }
        let st = &mut self.pairs[p];
        if let Some(c) = st.conn.take() {
            st.spare_conn = Some(c);
        }
        if let Some(t) = st.transport.take()
            && let Some(tls) = t.into_tls()
        {
            st.spare_tls = Some(tls);
        }
        st.dirty = false;
        self.schedule_reconnect(pair, now);
    }

    /// A call that will get no answer and whose request never left: a bundle goes back to its
    /// FIFO, a tips refresh or a probe is tried again later.
    fn call_aborted(&mut self, call: Call, r: usize, now: Instant) {
        match call {
            Call::Bundle(slot) => self.requeue(slot, now),
            Call::Tips => self.tips.call_ended(now, self.tip_retry),
            Call::Probe => self.probe_unanswered(r, now),
        }
    }

    /// A probe of silent region `r` got no answer: the next waits twice as long.
    fn probe_unanswered(&mut self, r: usize, now: Instant) {
        if let Some(sil) = self.regions[r].silence.as_mut() {
            sil.probe_in_flight = false;
            sil.probe_at = now.after(self.rate.from_ms(sil.probe_backoff_ms));
            sil.probe_backoff_ms = (sil.probe_backoff_ms * 2).min(PROBE_BACKOFF_MS_MAX);
        }
    }

    // ---- bytes ----

    /// A pair with bytes to send; the reactor calls [`Dispatcher::transmit`] for it.
    pub fn poll_dirty(&mut self) -> Option<PairId> {
        let p = self.dirty.pop_front()?;
        self.pairs[p as usize].dirty = false;
        Some(PairId(p))
    }

    /// The bytes to send on `pair` now, pinned until [`Dispatcher::transmitted`]: HTTP/2's own
    /// buffer for a plaintext connection (no copy), else the tunnel's request or TLS records
    /// (HTTP/2's pending bytes are encrypted into them first).
    pub fn transmit(&mut self, pair: PairId, now: Instant) -> &[u8] {
        let p = pair.0 as usize;
        if self.pairs[p].transport.is_some() {
            self.encrypt_pending(pair, now);
        }
        let st = &mut self.pairs[p];
        match st.transport.as_deref() {
            Some(t) if !t.poll_transmit().is_empty() || t.encrypts() || !t.is_open() => {
                t.poll_transmit()
            }
            _ => match st.conn.as_deref_mut() {
                Some(c) => c.pin_transmit(),
                None => &[],
            },
        }
    }

    /// Moves HTTP/2's pending bytes into TLS records, as many as the TLS buffer takes.
    fn encrypt_pending(&mut self, pair: PairId, now: Instant) {
        let st = &mut self.pairs[pair.0 as usize];
        let (Some(t), Some(c)) = (st.transport.as_deref_mut(), st.conn.as_deref_mut()) else {
            return;
        };
        if !t.encrypts() || !t.is_open() {
            return;
        }
        loop {
            let data = c.poll_transmit();
            if data.is_empty() {
                return;
            }
            let before = c.transmitted_total();
            match t.write_app(data) {
                Ok(0) => return,
                Ok(n) => {
                    c.advance_transmit(n);
                    // Where the in-flight request's last byte lands in the ciphertext.
                    if let Some(f) = st.in_flight.as_mut()
                        && f.wire_end.is_none()
                        && c.request_end(f.stream)
                            .is_some_and(|end| end > before && end <= before + n as u64)
                    {
                        f.wire_end = Some(t.wire_produced());
                    }
                }
                Err(e) => {
                    self.fail(pair, e, now);
                    return;
                }
            }
        }
    }

    /// `n` bytes of the pinned transmit went out.
    pub fn transmitted(&mut self, pair: PairId, n: usize, now: Instant) {
        let p = pair.0 as usize;
        let st = &mut self.pairs[p];
        let more = match (st.transport.as_deref_mut(), st.conn.as_deref_mut()) {
            (Some(t), conn) if !t.poll_transmit().is_empty() => {
                t.advance_transmit(n);
                !t.poll_transmit().is_empty() || conn.is_some_and(|c| !c.poll_transmit().is_empty())
            }
            (_, Some(c)) => {
                c.advance_transmit(n);
                !c.poll_transmit().is_empty()
            }
            (_, None) => false,
        };
        if let Some(f) = self.pairs[p].in_flight.as_mut()
            && !more
            && f.written.is_none()
        {
            f.written = Some(now);
        }
        if more {
            self.mark_dirty(pair.0);
        }
    }

    /// Bytes arrived on `pair`: through the tunnel and TLS when it has them, into HTTP/2.
    pub fn received(&mut self, pair: PairId, bytes: &[u8], now: Instant) {
        let p = pair.0 as usize;
        let now_ns = self.now_ns(now);
        let r = self.limiter.region_of(pair).0 as usize;
        self.heard_from(r, now, false);
        if self.pairs[p].transport.is_some() {
            let h2 = &self.h2;
            let st = &mut self.pairs[p];
            let t = st.transport.as_deref_mut().expect("checked");
            let (conn, spare) = (&mut st.conn, &mut st.spare_conn);
            let result = t.receive(bytes, &mut |plain| {
                conn.get_or_insert_with(|| fresh_connection(spare, h2, now_ns))
                    .handle_bytes(now_ns, plain);
            });
            let (open, pending) = (t.is_open(), !t.poll_transmit().is_empty());
            if let Err(e) = result {
                self.fail(pair, e, now);
                return;
            }
            if pending {
                self.mark_dirty(pair.0);
            }
            if open && self.pairs[p].link == Link::Handshaking {
                self.open(pair, now);
            }
        } else if let Some(conn) = self.pairs[p].conn.as_deref_mut() {
            conn.handle_bytes(now_ns, bytes);
        }
        let Some(conn) = self.pairs[p].conn.as_deref_mut() else {
            return;
        };
        let ready = conn.is_ready() && !conn.is_closed();
        if !conn.poll_transmit().is_empty() {
            self.mark_dirty(pair.0);
        }
        self.drain_events(pair, now);
        if ready && self.pairs[p].answered_ping && self.pairs[p].link == Link::Opened {
            self.set_link(pair, Link::InRotation, now);
        }
    }

    /// Runs every connection's timers (SETTINGS ack, call deadlines, keepalive). Called by the
    /// reactor on a coarse period: these timers are seconds long.
    pub fn sweep(&mut self, now: Instant) {
        self.publish_gauges();
        let now_ns = self.now_ns(now);
        for p in 0..self.pairs.len() {
            let st = &self.pairs[p];
            // Setup runs until the engine's SETTINGS: an engine that accepts and says nothing
            // never joins rotation, and its pair tries again.
            if matches!(st.link, Link::Handshaking | Link::Opened)
                && now.since(st.setup_started).0 > self.setup_timeout.0
            {
                let stage = st
                    .transport
                    .as_deref()
                    .map_or(Stage::Open, Transport::stage);
                let error = TransportError::HandshakeTimeout {
                    after_ms: self.setup_timeout_ms,
                    stage,
                };
                self.fail(PairId(p as u32), error, now);
                continue;
            }
            let Some(conn) = self.pairs[p].conn.as_deref_mut() else {
                continue;
            };
            if conn.poll_timeout().is_some_and(|t| t <= now_ns) {
                conn.handle_timeout(now_ns);
                if !conn.poll_transmit().is_empty() {
                    self.mark_dirty(p as u32);
                }
                self.drain_events(PairId(p as u32), now);
            }
        }
        self.detect_silence(now);
    }

    /// Pair states, cooldowns and the arena, for the metrics gauges (they change slowly; the
    /// reactor publishes them on its sweep period).
    fn publish_gauges(&self) {
        if !self.metrics.enabled() {
            return;
        }
        for r in 0..self.regions.len() {
            let c = self.limiter.counts(RegionId(r as u8));
            let up = c.ready + c.booked + c.cooling + c.held;
            self.metrics.set_conn_states(
                r,
                [
                    c.down as u64,
                    c.connecting as u64,
                    up as u64,
                    c.draining as u64,
                ],
            );
            self.metrics.set_cooldowns_active(r, c.cooling as u64);
        }
    }

    /// One line per region: pairs by limiter state and when the region can send next.
    pub fn render_pairs(&mut self, now: Instant, out: &mut String) {
        use std::fmt::Write as _;
        // Pairs whose booking has passed are ready: say so rather than "booked, due now".
        self.limiter.advance(now);
        for r in 0..self.regions.len() {
            let c = self.limiter.counts(RegionId(r as u8));
            let next = match self.limiter.next_ready_at(RegionId(r as u8)) {
                Some(t) if t.0 <= now.0 => "now".to_string(),
                Some(t) => format!("in {} us", self.rate.to_us(t.since(now))),
                None => "never (no pair up)".to_string(),
            };
            let _ = writeln!(
                out,
                "region {r}: ready {} booked {} cooling {} held {} down {} connecting {} draining {}; waiting bundles {}; next send {next}",
                c.ready,
                c.booked,
                c.cooling,
                c.held,
                c.down,
                c.connecting,
                c.draining,
                self.regions[r].fifo.len()
            );
            // Pairs whose last connection failed, grouped by what went wrong.
            let mut errors: Vec<(String, u32)> = Vec::new();
            for a in 0..self.sources.len() as u32 {
                let pair = self.limiter.pair(a, RegionId(r as u8));
                if let Some(e) = &self.pairs[pair.0 as usize].last_error {
                    let text = e.to_string();
                    match errors.iter_mut().find(|(t, _)| *t == text) {
                        Some((_, n)) => *n += 1,
                        None => errors.push((text, 1)),
                    }
                }
            }
            for (text, n) in errors {
                let _ = writeln!(
                    out,
                    "  region {r} ({}): {n} pairs failing: {text}",
                    self.regions[r].name
                );
            }
        }
    }

    fn drain_events(&mut self, pair: PairId, now: Instant) {
        let p = pair.0 as usize;
        loop {
            let Some(conn) = self.pairs[p].conn.as_deref_mut() else {
                return;
            };
            let Some(ev) = conn.poll_event() else { break };
            match ev {
                Event::StreamEnded(id) => self.stream_ended(pair, id, now),
                Event::GoAway { reason, .. } => {
                    if reason == crate::h2::Reason::ENHANCE_YOUR_CALM {
                        self.calm_down(pair);
                    }
                    // No new calls here; the one in flight (if below last id) may still end.
                    if self.pairs[p].in_flight.is_none() {
                        self.request_close(pair.0, now);
                    } else if self.pairs[p].link == Link::InRotation {
                        self.set_link(pair, Link::Draining, now);
                    }
                }
                Event::Closed(_) => self.request_close(pair.0, now),
                Event::PingAcked => self.pairs[p].answered_ping = true,
                Event::PingTimedOut => {
                    // Closing now would lose a call still running for certain; it has its own
                    // deadline. Without one, the connection is closed and reconnects.
                    if self.pairs[p].in_flight.is_none() {
                        self.request_close(pair.0, now);
                    } else if self.pairs[p].link == Link::InRotation {
                        self.set_link(pair, Link::Draining, now);
                    }
                }
            }
        }
        if self.pairs[p].link == Link::Draining && self.pairs[p].in_flight.is_none() {
            // A draining connection whose last call ended.
            self.request_close(pair.0, now);
        }
    }

    /// The engine said ENHANCE_YOUR_CALM (gRPC servers do for PINGs they find too frequent):
    /// the region's keepalive doubles, up to gRPC's policy, for its new connections.
    fn calm_down(&mut self, pair: PairId) {
        let r = self.limiter.region_of(pair).0 as usize;
        let Some(ms) = self.regions[r].keepalive_ms else {
            return;
        };
        let doubled = (ms * 2).min(crate::h2::conn::KEEPALIVE_INTERVAL_MS_POLICY);
        if doubled != ms {
            self.regions[r].keepalive_ms = Some(doubled);
            self.log.line(format_args!(
                "region {}: the engine asked for calm (GOAWAY ENHANCE_YOUR_CALM): idle PINGs now every {} ms",
                self.regions[r].name, doubled
            ));
        }
    }

    /// Whether the request of call `f` (stream end offset `request_end`) can have reached the
    /// engine whole: a gRPC unary call cannot be processed before its last byte arrived, so one
    /// whose last byte (or, through TLS, the record carrying it) never reached the socket is
    /// safe to send again.
    fn request_left_whole(&self, p: usize, f: &InFlight, request_end: Option<u64>) -> bool {
        let Some(end) = request_end else {
            return false;
        };
        let st = &self.pairs[p];
        match st.transport.as_deref() {
            Some(t) if t.encrypts() => f.wire_end.is_some_and(|w| t.wire_sent() >= w),
            _ => st
                .conn
                .as_deref()
                .is_some_and(|c| c.transmitted_total() >= end),
        }
    }

    fn stream_ended(&mut self, pair: PairId, id: StreamId, now: Instant) {
        let p = pair.0 as usize;
        let region = self.limiter.region_of(pair).0 as usize;
        let f = self.pairs[p].in_flight.filter(|f| f.stream == id);
        let conn = self.pairs[p]
            .conn
            .as_deref()
            .expect("events come from a connection");
        let mut answered = false;
        let mut timed_out = false;
        let (fate, code) = match conn.response(id) {
            Some(resp) => {
                answered = resp.end == StreamEnd::Complete;
                timed_out = matches!(resp.end, StreamEnd::TimedOut { .. });
                let request_end = resp.request_end;
                match grpc::outcome(&resp, grpc::RETRY_AFTER_MS_DEFAULT) {
                    Outcome::Ok(msg) => {
                        if f.is_some_and(|f| f.call == Call::Tips) {
                            self.tips.refresh(msg);
                        }
                        (Fate::Delivered, Some(Code::OK))
                    }
                    Outcome::RateLimited { retry_after_ms } => (
                        Fate::Cooldown(retry_after_ms),
                        Some(Code::RESOURCE_EXHAUSTED),
                    ),
                    Outcome::Retryable { .. } => (Fate::Retry, None),
                    Outcome::Rejected { code, message } => {
                        if code == Code::PERMISSION_DENIED || code == Code::UNAUTHENTICATED {
                            let mut buf = [0u8; 128];
                            let why = message.decode_into(&mut buf);
                            self.source_denied(pair, code, why, now);
                            (Fate::Denied, Some(code))
                        } else {
                            (Fate::Rejected, Some(code))
                        }
                    }
                    Outcome::Unknown { .. } => match f {
                        Some(f) if !self.request_left_whole(p, &f, request_end) => {
                            (Fate::Retry, None)
                        }
                        _ => (Fate::Failed, None),
                    },
                }
            }
            None => (Fate::Retry, None),
        };
        match code {
            Some(c) => self.metrics.upstream_status(region, c),
            None => self.metrics.upstream_transport_error(region),
        }
        let conn = self.pairs[p]
            .conn
            .as_deref_mut()
            .expect("events come from a connection");
        conn.release(id);
        if !conn.poll_transmit().is_empty() {
            self.mark_dirty(pair.0);
        }
        if answered {
            // The engine processes calls: a silent region is back, the back-off starts over.
            self.heard_from(region, now, true);
            self.pairs[p].backoff_ms = 0;
            self.pairs[p].timed_out = false;
        }
        let Some(f) = f else {
            return;
        };
        self.pairs[p].in_flight = None;
        self.metrics
            .record_upstream_rtt_ns(region, self.rate.to_ns(now.since(f.started)));
        if let Fate::Cooldown(ms) = fate {
            self.limiter.cooldown(pair, self.rate.from_ms(ms), now);
            self.stats.region(region).cooldowns.inc();
        }
        self.limiter_done(pair, now);
        if timed_out {
            // No answer in time: the pair leaves rotation and reconnects, backing off further
            // until a call is answered again, instead of losing a bundle per interval.
            self.pairs[p].timed_out = true;
            self.request_close(pair.0, now);
        }
        let slot = match f.call {
            Call::Bundle(slot) => slot,
            Call::Tips => {
                // Its answer refreshed the cache; failures retry later.
                self.tips.call_ended(now, self.tip_retry);
                return;
            }
            Call::Probe => {
                if !answered {
                    self.probe_unanswered(region, now);
                }
                return;
            }
        };
        match fate {
            Fate::Delivered => {
                if self.metrics.enabled() {
                    let admitted_at = self.arena.get(slot).expect("held").meta.admitted_at;
                    let written = f.written.unwrap_or(now);
                    self.metrics
                        .record_delivery_ns(self.rate.to_ns(written.since(admitted_at)));
                }
                self.end(slot, EndKind::Delivered)
            }
            Fate::Rejected => self.end(slot, EndKind::Rejected),
            Fate::Failed => self.end(slot, EndKind::Failed),
            Fate::Cooldown(_) | Fate::Denied => {
                // The pair was refused, not the bundle.
                let meta = self.arena.get_mut(slot).expect("held").meta;
                meta.attempts = meta.attempts.saturating_sub(1);
                self.requeue(slot, now)
            }
            Fate::Retry => self.requeue(slot, now),
        }
    }

    /// The engine refused this source itself (PERMISSION_DENIED, UNAUTHENTICATED): the pair
    /// leaves rotation and comes back only after [`DENIED_RETRY_MS`], with one log line per
    /// region and code; the bundle goes to another pair.
    fn source_denied(&mut self, pair: PairId, code: Code, why: &[u8], now: Instant) {
        let p = pair.0 as usize;
        self.pairs[p].denied = true;
        let error = TransportError::Refused {
            code: code.0,
            message: String::from_utf8_lossy(&why[..why.len().min(96)]).into_owned(),
            retry_ms: DENIED_RETRY_MS,
        };
        self.note_error(pair, error, now);
        self.request_close(pair.0, now);
    }

    // ---- shutdown and checks ----

    /// Bundles still waiting or in flight (the arena's slots in use).
    pub fn in_flight(&self) -> u32 {
        self.arena.in_use()
    }

    /// Shutdown deadline passed: every bundle still held is counted failed and freed.
    pub fn abandon_all(&mut self, now: Instant) {
        for r in 0..self.regions.len() {
            while let Some(slot) = self.regions[r].fifo.pop_front() {
                self.end(slot, EndKind::Failed);
            }
        }
        for p in 0..self.pairs.len() {
            if let Some(f) = self.pairs[p].in_flight.take() {
                if let Some(c) = self.pairs[p].conn.as_deref_mut() {
                    c.release(f.stream);
                }
                self.limiter_done(PairId(p as u32), now);
                if let Some(slot) = f.slot() {
                    self.end(slot, EndKind::Failed);
                }
            }
        }
    }

    /// Leaks every pair's connection buffers: the reactor could not confirm the kernel is done
    /// reading and writing them (see the reactor's teardown).
    pub fn forget_connections(&mut self) {
        for p in self.pairs.iter_mut() {
            if let Some(c) = p.conn.take() {
                std::mem::forget(c);
            }
            if let Some(t) = p.transport.take() {
                std::mem::forget(t);
            }
            std::mem::forget(p.spare_conn.take());
            std::mem::forget(p.spare_tls.take());
        }
    }

    /// Every pair whose connection is up, for a graceful close at shutdown.
    pub fn close_all(&mut self, now: Instant) {
        for p in 0..self.pairs.len() as u32 {
            if let Some(c) = self.pairs[p as usize].conn.as_deref_mut() {
                c.close();
                self.mark_dirty(p);
            }
            self.request_close(p, now);
        }
        self.reconnects.clear();
    }

    /// admitted = delivered + rejected + expired + failed + in flight, with in flight the
    /// arena's own count of slots held, and each region's in-flight gauge adding up to it.
    pub fn check_accounting(&self) -> bool {
        let t = self.stats.totals();
        t.identity_holds() && t.in_flight == u64::from(self.arena.in_use())
    }
}

/// The HTTP/2 connection for a pair's new connection: in the storage of its previous one when
/// there is one.
fn fresh_connection(
    spare: &mut Option<Box<Connection>>,
    cfg: &crate::h2::conn::Config,
    now_ns: u64,
) -> Box<Connection> {
    match spare.take() {
        Some(mut c) => {
            c.reset(now_ns);
            c
        }
        None => Box::new(Connection::new(cfg.clone(), now_ns)),
    }
}

/// A TLS protocol version for a log line, without allocating.
struct Versioned(Option<rustls::ProtocolVersion>);

impl std::fmt::Display for Versioned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v:?}"),
            None => f.write_str("TLS"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EndKind {
    Delivered,
    Rejected,
    Expired,
    Failed,
}
