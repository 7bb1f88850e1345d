//! One reactor thread's upstream connections, one per (source, region) pair: connecting
//! (bound to the pair's source, or through its SOCKS5 proxy), the tunnel and TLS, HTTP/2's
//! start, joining and leaving the limiter's rotation, back-off and reconnects, and moving each
//! pair's bytes. Sans-IO and clock-free.
//!
//! It is NOT the calls on those connections (`upstream`: what to send, and what an answer
//! means) and NOT the bundles (`dispatch`). A pair joins rotation only after the tunnel, the
//! TLS handshake, the engine's SETTINGS and its answer to a PING: an engine that accepts
//! connections and then drops them, or neither reads nor answers, never gets a bundle to
//! lose. Every link change goes through [`Links::set_link`], which derives the pairs-up gauge
//! and the limiter's view from it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::clock::{Instant, TickRate, Ticks};
use crate::config::Source;
use crate::egress::socks5::Socks5;
use crate::egress::transport::{Received, TransportError};
use crate::h2::Reason;
use crate::limiter::ledger::{Ledger, pair_key};
use crate::limiter::timers::PairTimers;
use crate::limiter::{Acquire, LaneId, Limiter, LimiterConfig, PairId, RegionId, RegionRate};
use crate::log::LogQueue;
use crate::metrics::ThreadMetrics;
use crate::metrics::accounting::Stats;

use super::ThreadSpec;
use super::pairs::{Link, Pair, Pairs};
use super::region::{ErrorKind, Region};
use super::tuning::Tuning;

/// Bots' status queries leave a lane this share of its pairs in rotation, ready, for the
/// bundles to come (`pairs / 16`, at least one of two or more: one of 8, 16 of 256).
pub const QUERY_RESERVE_DIV: u32 = 16;

/// Bots' status queries take at most this share of a region's pace (its pairs in rotation
/// per interval / 8): the other seven eighths, and what queries leave, are the bundles'.
pub const QUERY_SHARE_DIV: u64 = 8;

/// A connection this long up without trouble resets its reconnect back-off.
const BACKOFF_RESET_MS: u64 = 10_000;

/// A source the engine refused (PERMISSION_DENIED, UNAUTHENTICATED) tries again within this
/// much (jittered over the upper half, so a pool refused at once does not come back at once):
/// a refusal that was a blip costs seconds.
pub const DENIED_FIRST_RETRY_MS: u64 = 10_000;
/// ... doubling while the engine keeps refusing it, up to this: an operator fixes a key or an
/// allow-list in minutes, and meanwhile the pair costs one call per attempt, not one bundle
/// per interval. A bundle taken from the pair starts over.
pub const DENIED_RETRY_MS: u64 = 300_000;

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

/// Which of an engine's JSON-RPC paths a forwarded call goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnginePath {
    /// `sendTransaction` (`[[region]] transactions_path`).
    Transactions,
    /// The bundle-status calls (`[[region]] bundles_path`).
    Bundles,
}

/// A thread's pairs in the shared pacing ledger.
struct LedgerLink {
    ledger: Arc<Ledger>,
    /// Each pair's entry (`u32::MAX`: none).
    slots: Box<[u32]>,
    /// What this process last booked in each pair's entry (0: nothing): the claim for its
    /// call in flight, else what that call's end booked. A reload reprices it.
    booked: Box<[u64]>,
    /// Whether `booked` counts another process's sends (its claim saw them in the entry, and
    /// the call's settle kept them): never this process's to lower.
    foreign: Box<[bool]>,
}

/// See the module docs.
pub struct Links {
    rate: TickRate,
    limiter: Limiter,
    regions: Box<[Region]>,
    pairs: Pairs,
    /// Each pair's earliest deadline (filed by `Upstream`, which knows what they all are).
    timers: PairTimers,
    sources: Box<[Source]>,
    /// Each source's place among the pool's sources of its kind
    /// ([`super::ThreadSpec::places`]): where its pairs start among a region name's addresses.
    places: Box<[u32]>,
    /// Egress group names, "shared" first (the limiter has a lane per region and group).
    group_names: Box<[String]>,
    /// Per source: the config no longer lists it (a reload); its pairs are drained.
    source_retired: Box<[bool]>,
    /// Per egress group, its sources not retired, kept with `source_retired` (the dispatch
    /// loop asks every pass).
    group_listed: Box<[u32]>,
    /// Every pair's pacing as another relay process sees it (one taking over from this one,
    /// or the one this one takes over from), each pair's entry there (`u32::MAX`: none), and
    /// what this process last booked there (0: nothing).
    ledger: Option<LedgerLink>,
    /// How long a call may run (the longest `upstream_timeout_ms` this process has run): a
    /// claim in the ledger holds the pair that long past its interval, until the call's end
    /// books what it really needs.
    call_hold: Ticks,
    /// Setup (connect + tunnel + TLS + SETTINGS + PING) deadline.
    setup_timeout: Ticks,
    setup_timeout_ms: u64,
    reconnect_min_ms: u64,
    reconnect_max_ms: u64,
    h2: crate::h2::conn::Config,
    /// Every PING must be acknowledged within this.
    ping_timeout_ms: u64,
    /// The configured idle time before a PING (a region may have doubled its own since).
    ping_idle_ms: u64,
    rng: u64,
    /// This thread's log lines (new per-region connection errors, a region's first TLS
    /// session, silences), written by the logging thread.
    log: Arc<LogQueue>,
    stats: Arc<Stats>,
    metrics: Arc<ThreadMetrics>,
}

impl Links {
    pub(super) fn new(
        spec: &ThreadSpec,
        rate: TickRate,
        now: Instant,
        stats: Arc<Stats>,
        metrics: Arc<ThreadMetrics>,
    ) -> Links {
        let limiter = Limiter::new(
            &LimiterConfig {
                addresses: spec.sources.len() as u32,
                regions: spec
                    .regions
                    .iter()
                    .map(|r| RegionRate::from_ms(rate, r.interval_ms, r.burst.max(1)))
                    .collect(),
                groups: spec.groups.clone(),
                slot_us_max: crate::limiter::SLOT_US_MAX_DEFAULT,
                tick_rate: rate,
            },
            now,
        );
        let pair_count = limiter.pair_count();
        let ledger = spec.ledger.clone().map(|l| {
            let slots = (0..pair_count as u32)
                .map(|p| {
                    let a = limiter.address_of(PairId(p)) as usize;
                    let r = limiter.region_of(PairId(p)).0 as usize;
                    // A source's text names its identity ([`crate::config::SourceId`]), never
                    // a password: a proxy's entry outlives a new password, and no two sources
                    // of one config share an entry (one listed twice is refused at load).
                    let key = pair_key(&spec.sources[a].to_string(), &spec.regions[r].name);
                    l.slot(key).unwrap_or(u32::MAX)
                })
                .collect();
            LedgerLink {
                ledger: l,
                slots,
                booked: vec![0; pair_count].into_boxed_slice(),
                foreign: vec![false; pair_count].into_boxed_slice(),
            }
        });
        let links = Links {
            rate,
            limiter,
            regions: spec
                .regions
                .iter()
                .map(|r| {
                    Region::new(
                        r,
                        spec.connect_eagerly,
                        spec.ping_idle_ms,
                        spec.auth.as_ref(),
                        now,
                    )
                })
                .collect(),
            pairs: Pairs::new(pair_count, spec.handshakes_max, spec.connect_eagerly, now),
            timers: PairTimers::new(pair_count, rate, now),
            sources: spec.sources.clone().into_boxed_slice(),
            places: spec.places.clone().into_boxed_slice(),
            group_names: spec.group_names.clone().into_boxed_slice(),
            source_retired: vec![false; spec.sources.len()].into_boxed_slice(),
            group_listed: if spec.groups.is_empty() {
                vec![spec.sources.len() as u32].into_boxed_slice()
            } else {
                spec.groups.clone().into_boxed_slice()
            },
            ledger,
            call_hold: rate.from_ms(spec.upstream_timeout_ms),
            setup_timeout: rate.from_ms(spec.connect_timeout_ms),
            setup_timeout_ms: spec.connect_timeout_ms,
            reconnect_min_ms: spec.reconnect_min_ms.max(1),
            reconnect_max_ms: spec.reconnect_max_ms.max(spec.reconnect_min_ms.max(1)),
            h2: crate::h2::conn::Config {
                keepalive_timeout_ms: spec.ping_timeout_ms,
                ..spec.h2.clone()
            },
            ping_timeout_ms: spec.ping_timeout_ms,
            ping_idle_ms: spec.ping_idle_ms,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (spec.thread as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93),
            log: LogQueue::new(&format!("relay-{}", spec.thread)),
            stats,
            metrics,
        };
        if let Some(l) = &links.ledger {
            let alone = l.slots.iter().filter(|&&s| s == u32::MAX).count();
            if alone > 0 {
                links.log.line(format_args!(
                    "warning: the pacing ledger has no entry left for {alone} of this thread's \
                     {} pairs: they pace alone, and one another relay of the host also uses \
                     may send early (the ledger is built anew at its size by the first relay to \
                     start while no other runs)",
                    l.slots.len()
                ));
            }
        }
        links
    }

    pub(super) fn rate(&self) -> TickRate {
        self.rate
    }

    pub(super) fn limiter_mut(&mut self) -> &mut Limiter {
        &mut self.limiter
    }

    pub(super) fn region(&self, r: usize) -> &Region {
        &self.regions[r]
    }

    pub(super) fn region_mut(&mut self, r: usize) -> &mut Region {
        &mut self.regions[r]
    }

    pub(super) fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// The source `pair` leaves from.
    pub(super) fn source_of(&self, pair: PairId) -> &Source {
        &self.sources[self.limiter.address_of(pair) as usize]
    }

    pub(super) fn sources(&self) -> usize {
        self.sources.len()
    }

    pub(super) fn pair(&self, pair: PairId) -> &Pair {
        self.pairs.get(pair)
    }

    pub(super) fn pair_mut(&mut self, pair: PairId) -> &mut Pair {
        self.pairs.get_mut(pair)
    }

    /// The pairs' timers, to file a pair or fire those due.
    pub(super) fn timers_mut(&mut self) -> &mut PairTimers {
        &mut self.timers
    }

    /// A pair whose deadlines may have moved since it was last filed in the timers.
    pub(super) fn poll_retime(&mut self) -> Option<PairId> {
        self.pairs.poll_retime()
    }

    /// The pair's deadlines may have moved: it is filed again.
    pub(super) fn retime(&mut self, pair: PairId) {
        self.pairs.retime(pair.0);
    }

    /// Every pair's deadlines may have moved (a reload changed a timeout).
    pub(super) fn retime_all(&mut self) {
        for p in 0..self.pairs.count() as u32 {
            self.pairs.retime(p);
        }
    }

    /// The setup deadline of the pair's connection, while it is being set up.
    pub(super) fn setup_deadline(&self, pair: PairId) -> Option<Instant> {
        let st = self.pairs.get(pair);
        matches!(st.link(), Link::Handshaking | Link::Opened)
            .then(|| st.setup_started.after(Ticks(self.setup_timeout.0 + 1)))
    }

    pub(super) fn mark_dirty(&mut self, pair: PairId) {
        self.pairs.mark_dirty(pair.0);
    }

    /// When the next queued connect is due.
    pub(super) fn next_connect_at(&self) -> Option<Instant> {
        self.pairs.next_connect_at()
    }

    /// Bytes arrived on `pair`: through the tunnel and TLS when it has them, into HTTP/2; the
    /// connection opens HTTP/2 once its layers are done. False when the connection failed (it
    /// is being closed) or has no HTTP/2 yet. An engine's TLS close_notify closes the
    /// connection, out of rotation at once, while what came before it is still read.
    pub(super) fn receive(&mut self, pair: PairId, bytes: &[u8], now: Instant) -> bool {
        let now_ns = self.now_ns(now);
        let received = self
            .pairs
            .get_mut(pair)
            .stack
            .receive(bytes, &self.h2, now_ns);
        match received {
            Ok(Received::Open) => {}
            // The engine hung up, as an EOF says on a plaintext connection: the socket closes
            // and its release ends the calls on it as an EOF's would (a request that never
            // left whole goes again), then the pair backs off and reconnects. Sending into
            // the closed session instead would lose every bundle given to the pair meanwhile.
            Ok(Received::PeerClosed) => self.request_close(pair, now),
            Err(e) => {
                self.fail(pair, e, now);
                return false;
            }
        }
        if self.pairs.get(pair).stack.layers_pending() {
            self.pairs.mark_dirty(pair.0);
        }
        let st = self.pairs.get_mut(pair);
        if st.stack.transport().is_some() && st.stack.is_open() && st.link() == Link::Handshaking {
            self.open(pair, now);
        }
        let Some(conn) = self.pairs.get_mut(pair).stack.conn_mut() else {
            return false;
        };
        if !conn.poll_transmit().is_empty() {
            self.pairs.mark_dirty(pair.0);
        }
        true
    }

    /// The engine's SETTINGS came and it answered our PING (`ready`: HTTP/2 is ready and not
    /// closed): an opened pair joins rotation.
    pub(super) fn join_rotation_if_answered(&mut self, pair: PairId, ready: bool, now: Instant) {
        let st = self.pairs.get(pair);
        if ready && st.answered_ping && st.link() == Link::Opened {
            if st.retired {
                // Retired by a reload while its connect was in flight: it takes no calls.
                self.request_close(pair, now);
            } else {
                self.set_link(pair, Link::InRotation, now);
            }
        }
    }

    /// A connection whose setup (tunnel, TLS, HTTP/2 until the engine's answers) outlasted the
    /// connect timeout fails; true when it did.
    pub(super) fn setup_overdue(&mut self, pair: PairId, now: Instant) -> bool {
        let st = self.pairs.get(pair);
        if !(matches!(st.link(), Link::Handshaking | Link::Opened)
            && now.since(st.setup_started).0 > self.setup_timeout.0)
        {
            return false;
        }
        let error = TransportError::HandshakeTimeout {
            after_ms: self.setup_timeout_ms,
            stage: st.stack.stage(),
            proxy: self.proxy_of(pair),
        };
        self.fail(pair, error, now);
        true
    }

    /// The socket of a pair past its TCP connect ended; HTTP/2 has been told (its calls end as
    /// the loss decides) and the call in flight settled. The pair backs off and reconnects; a
    /// connection that never joined rotation is a failed setup with its reason on the pair.
    /// `we_closed`: the close was ours (its reason was recorded then). `errno`: the kernel's
    /// error that ended it (0: none).
    pub(super) fn connection_ended(
        &mut self,
        pair: PairId,
        we_closed: bool,
        errno: i32,
        now: Instant,
    ) {
        if !self.pairs.get(pair).rotated {
            let proxy = self.proxy_of(pair);
            let st = self.pairs.get_mut(pair);
            let closed = st.stack.setup_closed();
            // When we closed it, the reason was recorded then, and the tunnel or TLS seeing
            // its socket go mid-handshake is our doing: keep the reason we gave. A kernel's
            // error (a reset, an ICMP error) says more than the tunnel or TLS seeing the
            // socket go: it points at the path, not the engine.
            if !(we_closed && st.error_this_try) {
                let stage = st.stack.stage();
                let error = match errno {
                    0 => closed.unwrap_or(TransportError::ClosedDuringSetup { stage }),
                    errno => TransportError::Broken {
                        errno,
                        stage,
                        proxy,
                    },
                };
                self.note_error(pair, error, now);
            }
            self.stats.connect_failures.inc();
        } else {
            self.stats.disconnects.inc();
            let reset = self.rate.from_ms(BACKOFF_RESET_MS);
            let st = self.pairs.get_mut(pair);
            if !st.timed_out && now.since(st.up_since).0 >= reset.0 {
                st.backoff_ms = 0;
            }
        }
        self.pairs.get_mut(pair).stack.retire();
        self.pairs.clear_dirty(pair);
        self.schedule_reconnect(pair, now);
    }

    /// GOAWAY from the engine: no new calls here (the one in flight, if below its last id, may
    /// still end); ENHANCE_YOUR_CALM also slows the region's PINGs.
    pub(super) fn goaway(&mut self, pair: PairId, reason: Reason, in_flight: bool, now: Instant) {
        if reason == Reason::ENHANCE_YOUR_CALM {
            self.calm_down(pair);
        }
        self.stop_calls(pair, in_flight, now);
    }

    /// Starts a gRPC call of `method` on held `pair`'s connection, its request body written by
    /// `body`; `None` when the connection cannot take a call.
    pub(super) fn start_call(
        &mut self,
        pair: PairId,
        method: crate::grpc::Method,
        timeout_ms: u64,
        now: Instant,
        body: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Option<crate::h2::conn::StreamId> {
        let r = self.region_of(pair);
        let now_ns = self.now_ns(now);
        let call = &self.regions[r].call;
        let conn = self.pairs.get_mut(pair).stack.conn_mut()?;
        crate::grpc::start_call(conn, call, now_ns, method, Some(timeout_ms), body).ok()
    }

    /// The request of `stream` on `pair` must have gone whole by `by` (a bundle's max age):
    /// what flow control still holds of it then is given up unsent, never sent late.
    pub(super) fn send_by(&mut self, pair: PairId, stream: crate::h2::conn::StreamId, by: Instant) {
        let rate = self.rate;
        if let Some(conn) = self.pairs.get_mut(pair).stack.conn_mut()
            && conn.is_unsent(stream)
        {
            conn.send_by(stream, rate.to_ns(Ticks(by.0)));
        }
    }

    /// Starts a forwarded `sendTransaction` (JSON `body`) on held `pair`.
    pub(super) fn start_forward(
        &mut self,
        pair: PairId,
        timeout_ms: u64,
        now: Instant,
        body: &[u8],
        to: EnginePath,
    ) -> Option<crate::h2::conn::StreamId> {
        let r = self.region_of(pair);
        let now_ns = self.now_ns(now);
        let region = &self.regions[r];
        let conn = self.pairs.get_mut(pair).stack.conn_mut()?;
        let path = match to {
            EnginePath::Transactions => &region.transactions_path,
            EnginePath::Bundles => &region.bundles_path,
        };
        super::forward::start(conn, &region.call, path, now_ns, timeout_ms, body).ok()
    }

    /// Starts GetNextScheduledLeader on held `pair`, asking about every region the relay runs.
    pub(super) fn start_leader_call(
        &mut self,
        pair: PairId,
        timeout_ms: u64,
        now: Instant,
    ) -> Option<crate::h2::conn::StreamId> {
        let r = self.region_of(pair);
        let now_ns = self.now_ns(now);
        let regions = &self.regions;
        let conn = self.pairs.get_mut(pair).stack.conn_mut()?;
        crate::grpc::start_call(
            conn,
            &regions[r].call,
            now_ns,
            crate::grpc::Method::GetNextScheduledLeader,
            Some(timeout_ms),
            |buf| super::leader::encode_request(regions.iter().map(|g| g.name.as_str()), buf),
        )
        .ok()
    }

    /// PINGs every connection of region `r`: a dead one closes when its PING goes unanswered.
    pub(super) fn ping_region(&mut self, r: usize, ping_timeout_ms: u64, now: Instant) {
        let now_ns = self.now_ns(now);
        for a in 0..self.sources.len() as u32 {
            let q = self.limiter.pair(a, RegionId(r as u8));
            if let Some(c) = self.pairs.get_mut(q).stack.conn_mut() {
                c.ping(now_ns, ping_timeout_ms);
                if !c.poll_transmit().is_empty() {
                    self.pairs.mark_dirty(q.0);
                }
            }
        }
    }

    /// One line per region (pairs by limiter state, `waiting[lane]` bundles, when the region
    /// can send next, and per egress group) and its failing pairs, for `/debug/pairs`.
    pub(super) fn render_pairs(&mut self, waiting: &[usize], now: Instant, out: &mut String) {
        // Pairs whose booking has passed are ready: say so rather than "booked, due now".
        self.limiter.advance(now);
        super::observe::render_pairs(
            &mut self.limiter,
            &self.regions,
            &self.group_names,
            waiting,
            &self.pairs,
            &self.sources,
            self.rate,
            now,
            out,
        );
    }

    /// A draining connection whose last call ended closes.
    pub(super) fn close_if_drained(&mut self, pair: PairId, now: Instant) {
        let st = self.pairs.get(pair);
        if st.link() == Link::Draining && st.in_flight.is_none() {
            self.request_close(pair, now);
        }
    }

    pub(super) fn pair_count(&self) -> usize {
        self.pairs.count()
    }

    pub(super) fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    pub(super) fn link(&self, pair: PairId) -> Link {
        self.pairs.get(pair).link()
    }

    /// This thread's log queue (the reactor writes its own lines there too).
    pub(super) fn log(&self) -> &Arc<LogQueue> {
        &self.log
    }

    /// Why the pair's last connection failed, until one succeeds.
    pub(super) fn last_error(&self, pair: PairId) -> Option<&TransportError> {
        self.pairs.get(pair).last_error.as_ref()
    }

    /// Handshake slots in use: pairs connecting or handshaking.
    pub(super) fn handshakes_in_progress(&self) -> u32 {
        self.pairs.handshakes_in_progress()
    }

    pub(super) fn now_ns(&self, now: Instant) -> u64 {
        self.rate.to_ns(Ticks(now.0))
    }

    pub(super) fn region_of(&self, pair: PairId) -> usize {
        self.limiter.region_of(pair).0 as usize
    }

    /// Lazy connecting: a region's first bundle queues all its pairs to connect.
    pub(super) fn connect_region(&mut self, r: usize, now: Instant) {
        self.regions[r].connect_requested = true;
        for a in 0..self.sources.len() as u32 {
            let pair = self.limiter.pair(a, RegionId(r as u8));
            let st = self.pairs.get(pair);
            if st.link() == Link::Down && !st.retired {
                self.pairs.queue_connect(pair, now.0);
            }
        }
    }

    /// A pair whose (re)connect is due, if the handshake budget allows one more.
    pub(super) fn poll_connect(&mut self, now: Instant) -> Option<ConnectOrder> {
        let pair = self.pairs.pop_due_connect(now)?;
        let r = self.region_of(pair);
        let source = &self.sources[self.limiter.address_of(pair) as usize];
        // A local source reaches only engine addresses of its own family (a proxy reaches any).
        let family = match source {
            Source::Local(ip) => Some(ip.is_ipv4()),
            Source::Socks5 { .. } => None,
        };
        let failed = self.pairs.get(pair).failed_at_engine;
        let place = self.places[self.limiter.address_of(pair) as usize];
        let Some(target) = self.regions[r].addrs.pick(place, failed, family) else {
            // The region's name now resolves to no address of this family (checked at start,
            // so only after a later lookup): try again later, with the reason on the pair.
            self.note_error(
                pair,
                TransportError::Connect {
                    errno: libc::EAFNOSUPPORT,
                    // Nothing was dialled: the proxy is not at fault.
                    proxy: None,
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
        let st = self.pairs.get_mut(pair);
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

    /// Moves a pair to `new` and derives what depends on its link: the pairs-up gauge and the
    /// limiter's rotation (the pair table keeps the handshake slots).
    pub(super) fn set_link(&mut self, pair: PairId, new: Link, now: Instant) {
        let Some(old) = self.pairs.set_link(pair, new) else {
            return;
        };
        match (old.in_rotation(), new.in_rotation()) {
            (true, false) => self.stats.pairs_up.set(self.stats.pairs_up.get() - 1),
            (false, true) => self.stats.pairs_up.set(self.stats.pairs_up.get() + 1),
            _ => {}
        }
        if old.conn_state() != new.conn_state() {
            self.limiter.set_connection(pair, new.conn_state(), now);
        }
    }

    /// The socket connected. Without a tunnel or TLS the HTTP/2 connection starts now
    /// (preface and SETTINGS queued); otherwise the SOCKS5 greeting or the TLS ClientHello goes
    /// first and HTTP/2 starts once they are done. Either way the pair joins rotation only when
    /// the engine's SETTINGS and PING answer arrive ([`Upstream::received`]).
    pub(super) fn connected(&mut self, pair: PairId, now: Instant) {
        debug_assert_eq!(self.pairs.get(pair).link(), Link::Connecting);
        let r = self.region_of(pair);
        let target = self.pairs.get(pair).target;
        let socks = match &self.sources[self.limiter.address_of(pair) as usize] {
            Source::Local(_) => None,
            Source::Socks5 { proxy, auth } => {
                let auth = auth.as_ref().map(|(u, pw)| (u.as_str(), pw.as_str()));
                match Socks5::new(target, auth) {
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
        let tls = self.regions[r].tls.as_ref();
        match self.pairs.get_mut(pair).stack.connected(socks, tls) {
            Ok(false) => self.open(pair, now),
            Ok(true) => {
                self.set_link(pair, Link::Handshaking, now);
                self.pairs.mark_dirty(pair.0);
            }
            Err(e) => {
                self.set_link(pair, Link::Handshaking, now);
                self.fail(pair, e, now);
            }
        }
    }

    /// Tunnel and TLS are done (or absent): HTTP/2 starts and the setup's handshake slot frees.
    pub(super) fn open(&mut self, pair: PairId, now: Instant) {
        self.set_link(pair, Link::Opened, now);
        let now_ns = self.now_ns(now);
        let r = self.region_of(pair);
        let keepalive = self.regions[r].keepalive_ms;
        let ping_timeout_ms = self.ping_timeout_ms;
        let st = self.pairs.get_mut(pair);
        let conn = st.stack.open_h2(&self.h2, now_ns);
        conn.set_keepalive(keepalive, ping_timeout_ms);
        // Rotation waits for this PING's answer too: an engine that sends SETTINGS and then
        // neither reads nor answers (restarting, overloaded, a proxy with nothing behind it)
        // never gets a bundle to lose.
        conn.ping(now_ns, ping_timeout_ms);
        st.up_since = now;
        st.last_error = None;
        self.stats.connects.inc();
        let target = st.target;
        if let Some(tls) = st.stack.tls() {
            self.stats.tls_handshakes.inc();
            if tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                self.stats.tls_resumed.inc();
            }
            if !self.regions[r].tls_logged {
                self.regions[r].tls_logged = true;
                self.log.line(format_args!(
                    "region {}: {} to {} ({}), ALPN h2",
                    self.regions[r].name,
                    Versioned(tls.protocol_version()),
                    tls.server_name(),
                    target
                ));
            }
        }
        self.pairs.mark_dirty(pair.0);
    }

    /// Records why a pair's connection failed and has it closed; the reactor's release then
    /// ends in [`Upstream::socket_released`], which backs off and reconnects.
    pub(super) fn fail(&mut self, pair: PairId, error: TransportError, now: Instant) {
        self.note_error(pair, error, now);
        self.request_close(pair, now);
    }

    /// Keeps a pair's error for /debug/pairs and queues a log line, once per region and kind
    /// of error (again after a while if it persists, with how often it came meanwhile).
    pub(super) fn note_error(&mut self, pair: PairId, error: TransportError, now: Instant) {
        let r = self.region_of(pair);
        let kind = ErrorKind::of_pair(
            &error,
            &self.sources[self.limiter.address_of(pair) as usize],
        );
        if let Some(unlogged) = self.regions[r].error_worth_logging(kind, now, self.rate) {
            let source = &self.sources[self.limiter.address_of(pair) as usize];
            self.log.line(format_args!(
                "region {}: {unlogged}pair {source} -> {}: {error}",
                self.regions[r].name,
                self.pairs.get(pair).target
            ));
        }
        let st = self.pairs.get_mut(pair);
        st.last_error = Some(error);
        st.error_this_try = true;
    }

    /// The TCP connect failed (refused, unreachable, timed out; `errno`): back off and try
    /// again.
    pub(super) fn connect_failed(&mut self, pair: PairId, now: Instant, errno: i32) {
        let proxy = self.proxy_of(pair);
        self.note_error(pair, TransportError::Connect { errno, proxy }, now);
        self.stats.connect_failures.inc();
        // A refusal from the engine's address may mean the engine moved: look its name up
        // again, and where the address itself failed dial the name's next one meanwhile. A
        // proxy's refusal says nothing of the engine's address.
        if proxy.is_none() {
            if the_address_failed(errno) {
                self.failed_at_engine(pair);
            } else {
                let r = self.region_of(pair);
                self.regions[r].addrs.mark_stale();
            }
        }
        self.schedule_reconnect(pair, now);
    }

    /// `pair`'s connection failed at its engine address, or what dialled it for us (a proxy's
    /// CONNECT): the engine may have moved, so its name is looked up again, and the pair's
    /// next connect goes to the next of its addresses.
    pub(super) fn failed_at_engine(&mut self, pair: PairId) {
        let r = self.region_of(pair);
        self.regions[r].addrs.mark_stale();
        let st = self.pairs.get_mut(pair);
        st.failed_at_engine = st.failed_at_engine.wrapping_add(1);
    }

    /// The SOCKS5 proxy a pair goes through, if any.
    fn proxy_of(&self, pair: PairId) -> Option<SocketAddr> {
        match self.source_of(pair) {
            Source::Local(_) => None,
            Source::Socks5 { proxy, .. } => Some(*proxy),
        }
    }

    pub(super) fn schedule_reconnect(&mut self, pair: PairId, now: Instant) {
        self.set_link(pair, Link::Down, now);
        if self.pairs.get(pair).retired {
            // Out of the config: down it stays until listed again.
            return;
        }
        self.metrics.reconnect(self.region_of(pair));
        let (min, max) = (self.reconnect_min_ms, self.reconnect_max_ms);
        let random = self.next_random();
        let denied_random = self.next_random();
        let st = self.pairs.get_mut(pair);
        st.backoff_ms = if st.backoff_ms == 0 {
            min
        } else {
            (st.backoff_ms * 2).min(max)
        };
        // Full jitter over the upper half: pairs that failed together do not retry together.
        let b = st.backoff_ms;
        let mut wait = b / 2 + random % (b / 2 + 1);
        if std::mem::take(&mut st.denied) {
            let d = st.denied_ms.max(1);
            wait = wait.max(d / 2 + denied_random % (d / 2 + 1));
        }
        self.pairs
            .queue_connect(pair, now.0 + self.rate.from_ms(wait).0);
    }

    pub(super) fn next_random(&mut self) -> u64 {
        // xorshift64*: reconnect jitter needs spread, not cryptographic quality.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The pair's connection should close (a protocol error, GOAWAY drained, a call that could
    /// not start or timed out, a failed handshake): out of rotation now, the reactor closes the
    /// socket.
    pub(super) fn request_close(&mut self, pair: PairId, now: Instant) {
        let link = self.pairs.get(pair).link();
        if matches!(link, Link::Down | Link::Connecting | Link::Closing) {
            // No socket yet, or already closing (a connect in flight ends on its own).
            return;
        }
        self.set_link(pair, Link::Closing, now);
        self.pairs.queue_close(pair.0);
    }

    /// A pair whose socket the reactor should shut down and close.
    pub(super) fn poll_close(&mut self) -> Option<PairId> {
        self.pairs.poll_close()
    }

    /// A pair with bytes to send; the reactor calls [`Upstream::transmit`] for it.
    pub(super) fn poll_dirty(&mut self) -> Option<PairId> {
        self.pairs.poll_dirty()
    }

    /// The bytes to send on `pair` now, pinned until [`Upstream::transmitted`] (HTTP/2's
    /// pending bytes are encrypted into TLS records first).
    pub(super) fn transmit(&mut self, pair: PairId, now: Instant) -> &[u8] {
        if let Err(e) = self.pairs.get_mut(pair).stack.encrypt_pending() {
            self.fail(pair, e, now);
        }
        self.pairs.get_mut(pair).stack.transmit()
    }

    /// Whether the pinned transmit is all `pair` has to send until something arrives.
    pub(super) fn transmit_is_whole(&self, pair: PairId) -> bool {
        self.pairs.get(pair).stack.transmit_is_whole()
    }

    /// `n` bytes of the pinned transmit went out.
    pub(super) fn transmitted(&mut self, pair: PairId, n: usize, now: Instant) {
        let st = self.pairs.get_mut(pair);
        let more = st.stack.transmitted(n);
        if let Some(f) = st.in_flight.as_mut()
            && !more
            && f.written.is_none()
        {
            f.written = Some(now);
        }
        if more {
            self.pairs.mark_dirty(pair.0);
        }
    }

    /// Whether `pair`'s connection is open and waiting for the answer to the PING that admits
    /// it to rotation (never in rotation, no PING answered, not closing).
    pub(super) fn admitting(&self, pair: PairId) -> bool {
        let st = self.pairs.get(pair);
        !st.rotated && !st.answered_ping && st.link() == Link::Opened
    }

    /// HTTP/2 closed `pair`'s connection (`error`): one not yet in rotation fails naming what
    /// HTTP/2 saw (a server that does not speak it, a GOAWAY, SETTINGS never acknowledged)
    /// rather than as a close by the engine; either way it closes.
    pub(super) fn h2_closed(&mut self, pair: PairId, error: crate::h2::ConnError, now: Instant) {
        use crate::h2::ConnError;
        let named = matches!(
            error,
            ConnError::PeerProtocol { .. } | ConnError::GoAway { .. } | ConnError::Timeout { .. }
        );
        let st = self.pairs.get(pair);
        if named && !st.rotated && !st.error_this_try {
            self.note_error(pair, TransportError::Http2(error), now);
        }
        self.request_close(pair, now);
    }

    /// A new connection's engine did not answer the PING that admits it to rotation within
    /// `after_ms` (the timeout it was sent with): closed, with that as its error (not a close
    /// of the engine's).
    pub(super) fn ping_unanswered(&mut self, pair: PairId, after_ms: u64, now: Instant) {
        let error = TransportError::PingUnanswered {
            after_ms,
            proxy: self.proxy_of(pair),
        };
        self.fail(pair, error, now);
    }

    /// No new calls on the pair's connection (a PING went unanswered past its admission):
    /// closed now when idle, drained when a call runs (closing now would lose that call for
    /// certain, and it has its own deadline).
    pub(super) fn stop_calls(&mut self, pair: PairId, in_flight: bool, now: Instant) {
        if !in_flight {
            self.request_close(pair, now);
        } else if self.pairs.get(pair).link() == Link::InRotation {
            self.set_link(pair, Link::Draining, now);
        }
    }

    /// The engine said ENHANCE_YOUR_CALM (gRPC servers do for PINGs they find too frequent):
    /// the region's keepalive doubles, up to gRPC's policy, for its new connections.
    pub(super) fn calm_down(&mut self, pair: PairId) {
        let r = self.region_of(pair);
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

    // ---- pacing across processes ----

    /// A pair of `lane` to send on now (see [`Limiter::acquire`]), that no other relay
    /// process sending from the same host sent on within its interval either (nor has a call
    /// in flight on): a pair the ledger says is not free yet cools until it is, or for an
    /// interval at most, and the next one is tried.
    pub(super) fn acquire(&mut self, lane: usize, now: Instant) -> Acquire {
        let lane = LaneId(lane as u8);
        loop {
            let got = self.limiter.acquire(lane, now);
            let (
                Acquire::Pair(pair),
                Some(LedgerLink {
                    ledger,
                    slots,
                    booked,
                    foreign,
                }),
            ) = (got, &mut self.ledger)
            else {
                return got;
            };
            let slot = slots[pair.0 as usize];
            if slot == u32::MAX {
                return got;
            }
            let p = pair.0 as usize;
            let (interval, tolerance) = self.limiter.pace(self.limiter.region_of(pair));
            let mut claimed = ledger.claim(slot, now, interval, tolerance, self.call_hold);
            if claimed.is_err() && booked[p] != 0 && ledger.next(slot).0 == booked[p] {
                // Refused by nothing but this process's own booking: a cooldown it published
                // (its end plus the burst's tolerance, so another process honours it), which
                // has ended, since the limiter hands the pair out. Counted as a burst spent it
                // would cut the burst; the limiter's own pace is what is left of it.
                // Only a booking of this process's own: one that counts another process's
                // sends (a call's settle keeps them) is not its to lower, or a burst the two
                // share would be spent twice.
                let v = self.limiter.view(pair);
                if !foreign[p] && v.cooldown_until.0 <= now.0 && v.tat.0 < booked[p] {
                    ledger.replace(slot, booked[p], v.tat.0);
                    booked[p] = v.tat.0;
                    claimed = ledger.claim(slot, now, interval, tolerance, self.call_hold);
                }
            }
            match claimed {
                Ok(claim) => {
                    // What the claim counted from the entry: past `now`, a booking of this
                    // process's own (its last, as it was) or another's.
                    let seen = claim.saturating_sub(interval.0 + self.call_hold.0);
                    if seen > now.0 {
                        foreign[p] = seen != booked[p] || foreign[p];
                    } else {
                        foreign[p] = false;
                    }
                    booked[p] = claim;
                    return got;
                }
                Err(until) => {
                    self.stats.ledger_waits.inc();
                    // A claim for the other process's call in flight books the call's longest
                    // life, which its end gives back: looked at again within an interval.
                    let again = now.after(interval);
                    self.limiter
                        .defer(pair, if until.0 < again.0 { until } else { again }, now);
                }
            }
        }
    }

    /// A pair of region `r` in any of its lanes (the shared addresses first), for calls that
    /// belong to no tenant (tip accounts, a silent engine's probe): the first lane with a
    /// pair ready, else when the soonest will be, else none up.
    pub(super) fn acquire_any(&mut self, r: usize, now: Instant) -> Acquire {
        let groups = self.limiter.group_count();
        let mut soonest = Acquire::NoPairUp;
        for g in 0..groups {
            match self.acquire(r * groups + g, now) {
                Acquire::Pair(p) => return Acquire::Pair(p),
                Acquire::WaitUntil(at) => {
                    if !matches!(soonest, Acquire::WaitUntil(s) if s.0 <= at.0) {
                        soonest = Acquire::WaitUntil(at);
                    }
                }
                Acquire::NoPairUp => {}
            }
        }
        soonest
    }

    /// A pair of region `r` for a bot's status query: as [`Links::acquire_any`], within the
    /// queries' share of the region's pace ([`QUERY_SHARE_DIV`]), from a lane with more ready
    /// pairs than it keeps for bundles ([`QUERY_RESERVE_DIV`]). A lane down to its reserve
    /// counts as none up: when it will have one to spare is not known, since bundles spend
    /// pairs as they come.
    pub(super) fn acquire_spare(&mut self, r: usize, now: Instant) -> Acquire {
        let next = self.regions[r].query_next;
        if now.0 < next.0 {
            return Acquire::WaitUntil(next);
        }
        // Bookings that have fallen due count as ready.
        self.limiter.advance(now);
        let groups = self.limiter.group_count();
        let mut soonest = Acquire::NoPairUp;
        for g in 0..groups {
            let lane = r * groups + g;
            let c = self.limiter.lane_counts(LaneId(lane as u8));
            let rotation = c.ready + c.booked + c.held;
            let reserve = (rotation / QUERY_RESERVE_DIV).max(u32::from(rotation > 1));
            if c.ready > 0 && c.ready <= reserve {
                continue;
            }
            match self.acquire(lane, now) {
                Acquire::Pair(p) => {
                    let c = self.limiter.counts(RegionId(r as u8));
                    let rotation = u64::from((c.ready + c.booked + c.held).max(1));
                    let (interval, _) = self.limiter.pace(RegionId(r as u8));
                    let step = interval.0.saturating_mul(QUERY_SHARE_DIV) / rotation;
                    self.regions[r].query_next = now.after(Ticks(step));
                    return Acquire::Pair(p);
                }
                Acquire::WaitUntil(at) => {
                    if !matches!(soonest, Acquire::WaitUntil(s) if s.0 <= at.0) {
                        soonest = Acquire::WaitUntil(at);
                    }
                }
                Acquire::NoPairUp => {}
            }
        }
        soonest
    }

    /// Egress groups: each region has one lane per group (`r × groups + g`).
    pub(super) fn groups(&self) -> usize {
        self.limiter.group_count()
    }

    /// The call on held `pair` ended at `now`: back to the limiter, and its next send (booking
    /// and cooldown) written to the ledger for another process to honour, in place of what
    /// the claim booked while the call ran.
    pub(super) fn finish(&mut self, pair: PairId, now: Instant) {
        self.limiter.finish(pair, now);
        let p = pair.0 as usize;
        if self.ledger.as_ref().is_some_and(|l| l.slots[p] != u32::MAX) {
            let tat = self.ledger_tat(pair);
            let Some(l) = self.ledger.as_mut() else {
                return;
            };
            let slot = l.slots[p];
            l.booked[p] = match l.booked[p] {
                0 => {
                    l.ledger.book(slot, tat);
                    l.foreign[p] = false;
                    tat.0
                }
                claim => {
                    // Its own pace at or past what the claim counted: nothing of another's.
                    l.foreign[p] &= claim.saturating_sub(self.call_hold.0) > tat.0;
                    l.ledger.settle(slot, claim, self.call_hold, tat)
                }
            };
        }
    }

    /// `pair`'s next send by this process's limiter as the ledger keeps it, the GCRA state:
    /// its arrival time, a cooldown as its end plus the burst tolerance (allowed = arrival
    /// time − tolerance). The arrival time itself, not `next_allowed + tolerance`: that is
    /// floored at the tolerance, which booked a pair still inside its burst an interval late.
    fn ledger_tat(&self, pair: PairId) -> Instant {
        let v = self.limiter.view(pair);
        let (_, tolerance) = self.limiter.pace(v.region);
        if v.cooldown_until.0 == 0 {
            return v.tat;
        }
        v.tat.max(v.cooldown_until.after(tolerance))
    }

    /// The call on held `pair` is given up at `now` unanswered (shutdown's deadline, a failed
    /// thread): back to the limiter, but its claim in the ledger stays whole, since the
    /// engine may still act on the request within the call's hold.
    pub(super) fn abandon(&mut self, pair: PairId, now: Instant) {
        self.limiter.finish(pair, now);
        if let Some(l) = &mut self.ledger {
            l.booked[pair.0 as usize] = 0;
        }
    }

    /// Region `region` is paced at `rate` from now on (a reload), in the limiter and in the
    /// ledger alike: each of its pairs' entries that still holds this process's own booking
    /// is booked again at the new rate, as the limiter reprices it ([`Limiter::set_rate`]).
    /// Else a shorter interval would hold each pair one old interval more (the ledger
    /// refusing it as if another process had sent), and a longer one would let a successor
    /// send on the old. A call in flight keeps its claim's hold, what the claim booked ahead
    /// of now scaled to the new interval (a spent burst's too), as the limiter's own. An entry whose booking counts another process's sends is lowered by
    /// nobody but that process's own next booking. O(pairs of the region); not the request
    /// path.
    fn set_pace(&mut self, region: RegionId, rate: RegionRate, now: Instant) {
        let was_paced = self.limiter.pace(region);
        if self.ledger.is_none() {
            self.limiter.set_rate(region, rate, now);
            return;
        }
        let pairs: Vec<PairId> = (0..self.sources.len() as u32)
            .map(|a| self.limiter.pair(a, region))
            .collect();
        let before: Vec<Instant> = pairs.iter().map(|&p| self.ledger_tat(p)).collect();
        self.limiter.set_rate(region, rate, now);
        let paced = self.limiter.pace(region);
        if paced == was_paced {
            return;
        }
        let (old, new) = (was_paced.0, paced.0);
        for (&pair, before) in pairs.iter().zip(before) {
            let p = pair.0 as usize;
            let in_flight = self.limiter.view(pair).in_flight == 1;
            let tat = self.ledger_tat(pair).0;
            let Some(l) = self.ledger.as_mut() else {
                return;
            };
            let (slot, was) = (l.slots[p], l.booked[p]);
            if slot == u32::MAX || was == 0 {
                continue;
            }
            let to = if in_flight {
                // As the limiter reprices a held pair: what the claim booked ahead of now (a
                // spent burst's intervals too) scaled to the new interval, its hold kept.
                let hold = self.call_hold.0;
                let base = was.saturating_sub(hold);
                let base = if base > now.0 {
                    let ahead =
                        u128::from(base - now.0) * u128::from(new.0) / u128::from(old.0.max(1));
                    now.0.saturating_add(ahead as u64)
                } else {
                    base
                };
                base.saturating_add(hold)
            } else {
                tat
            };
            if to > was {
                l.ledger.book(slot, Instant(to));
                l.booked[p] = to;
            } else if to < was && !l.foreign[p] && (in_flight || was == before.0) {
                // Lowered only where what it books is this process's alone: a claim (or the
                // settled booking of its call) that counted the other process's sends keeps
                // them, and the settled booking of an ended call is the limiter's own unless
                // it counted the other's.
                l.ledger.replace(slot, was, to);
                l.booked[p] = to;
            }
        }
    }

    // ---- reloads ----

    /// The hold a claim books for its call, raised to `hold` (never lowered: see
    /// [`Links::retune`]). Every claim of a call in flight is raised by as much in the ledger,
    /// so that its end, which gives back the hold in force then, gives back what the claim
    /// booked for the call and keeps the other process's sends the claim counted. O(pairs);
    /// not the request path.
    fn set_call_hold(&mut self, hold: Ticks) {
        let more = hold.0.saturating_sub(self.call_hold.0);
        if more == 0 {
            return;
        }
        self.call_hold = hold;
        let Some(l) = self.ledger.as_mut() else {
            return;
        };
        for p in 0..l.booked.len() {
            let (slot, was) = (l.slots[p], l.booked[p]);
            if slot == u32::MAX || was == 0 || self.limiter.view(PairId(p as u32)).in_flight != 1 {
                continue;
            }
            // Only where the entry still holds the claim: another process's later booking
            // stands, and the call's end (its CAS failing) keeps it.
            let to = was.saturating_add(more);
            l.ledger.replace(slot, was, to);
            l.booked[p] = to;
        }
    }

    /// A reload's settings for new connects and setups, PINGs (open connections' too: turned
    /// on, off or given a new timeout, an idle connection is watched as the config says, and
    /// never by neither PINGs nor the kernel's keepalive the reactor sets alongside), reconnect
    /// back-off and the handshake budget; each region's pace; the sources no longer listed
    /// drained and those listed again reconnecting; a proxy's new password, for its pairs'
    /// next connects.
    pub(super) fn retune(&mut self, t: &Tuning, now: Instant) {
        // A call keeps the deadline it was sent with: after a reload to a shorter timeout,
        // calls sent before may still run the longer one, so the ledger's hold never shrinks
        // (a claim's end then gives back at least what it booked).
        self.set_call_hold(self.rate.from_ms(t.upstream_timeout_ms));
        self.setup_timeout = self.rate.from_ms(t.connect_timeout_ms);
        self.setup_timeout_ms = t.connect_timeout_ms;
        self.retime_all();
        self.reconnect_min_ms = t.reconnect_min_ms.max(1);
        self.reconnect_max_ms = t.reconnect_max_ms.max(self.reconnect_min_ms);
        self.pairs.set_handshakes_max(t.handshakes_max);
        let ping_changed =
            (t.ping_idle_ms, t.ping_timeout_ms) != (self.ping_idle_ms, self.ping_timeout_ms);
        let ping_idle_changed = t.ping_idle_ms != self.ping_idle_ms;
        self.ping_timeout_ms = t.ping_timeout_ms;
        self.h2.keepalive_timeout_ms = t.ping_timeout_ms;
        self.ping_idle_ms = t.ping_idle_ms;
        for (r, pace) in t.regions.iter().enumerate() {
            if ping_idle_changed {
                self.regions[r].keepalive_ms = (t.ping_idle_ms > 0).then_some(t.ping_idle_ms);
            }
            if let Some(p) = pace {
                let rate = RegionRate::from_ms(self.rate, p.interval_ms, p.burst);
                self.set_pace(RegionId(r as u8), rate, now);
            }
        }
        if ping_changed {
            for p in 0..self.pairs.count() as u32 {
                let pair = PairId(p);
                let keepalive = self.regions[self.region_of(pair)].keepalive_ms;
                if let Some(conn) = self.pairs.get_mut(pair).stack.conn_mut() {
                    conn.set_keepalive(keepalive, t.ping_timeout_ms);
                }
            }
        }
        for a in 0..self.sources.len() {
            let now_listed = t.sources.get(&self.sources[a].id());
            if let Some(s) = now_listed
                && *s != self.sources[a]
            {
                // Its password changed: the same source, its pairs and their pacing stay. The
                // SOCKS5 handshake of each next connect presents the new one; the connections
                // open were let in with the old one and are not cut for it.
                self.sources[a] = s.clone();
            }
            let listed = now_listed.is_some();
            if self.source_retired[a] == listed {
                self.source_retired[a] = !listed;
                let g = usize::from(self.limiter.group_of(PairId(a as u32)));
                if listed {
                    self.group_listed[g] += 1;
                } else {
                    self.group_listed[g] -= 1;
                }
                for r in 0..self.regions.len() {
                    let pair = self.limiter.pair(a as u32, RegionId(r as u8));
                    if listed {
                        // Listed again, the source starts over: an engine's refusal of it
                        // before the config dropped it says nothing of the source the config
                        // takes back. (A region listed again does not clear it: the source is
                        // the one that engine refused.)
                        let st = self.pairs.get_mut(pair);
                        (st.denied, st.denied_ms) = (false, 0);
                    }
                    self.refresh_retired(pair, now);
                }
            }
        }
    }

    /// Region `r` takes no more calls (it left the config and has nothing waiting), or takes
    /// them again (listed again).
    pub(super) fn retire_region(&mut self, r: usize, retired: bool, now: Instant) {
        if self.regions[r].retired == retired {
            return;
        }
        self.regions[r].retired = retired;
        for a in 0..self.sources.len() as u32 {
            self.refresh_retired(self.limiter.pair(a, RegionId(r as u8)), now);
        }
    }

    /// Sources of this thread the config lists.
    pub(super) fn sources_listed(&self) -> usize {
        self.group_listed.iter().map(|&n| n as usize).sum()
    }

    /// Sources of egress group `g` on this thread the config lists.
    pub(super) fn group_listed(&self, g: usize) -> u32 {
        self.group_listed[g]
    }

    /// A pair is retired when its source or its region is: a connection being set up closes
    /// now, one in rotation drains (its call in flight ends first), a down one stays down. A
    /// pair no longer retired connects again (at once, when its region connects).
    fn refresh_retired(&mut self, pair: PairId, now: Instant) {
        let r = self.region_of(pair);
        let a = self.limiter.address_of(pair) as usize;
        let retired = self.source_retired[a] || self.regions[r].retired;
        let st = self.pairs.get_mut(pair);
        if st.retired == retired {
            return;
        }
        st.retired = retired;
        let link = st.link();
        let in_flight = st.in_flight.is_some();
        if retired {
            match link {
                Link::Connecting | Link::Handshaking | Link::Opened => {
                    self.request_close(pair, now)
                }
                Link::InRotation => self.stop_calls(pair, in_flight, now),
                Link::Down | Link::Draining | Link::Closing => {}
            }
        } else if link == Link::Down && self.regions[r].connect_requested {
            self.pairs.queue_connect(pair, now.0);
        }
    }

    /// Leaks every pair's connection buffers: the reactor could not confirm the kernel is done
    /// reading and writing them (see the reactor's teardown).
    pub(super) fn forget_connections(&mut self) {
        for p in self.pairs.iter_mut() {
            p.stack.forget();
        }
    }

    /// Every pair whose connection is up, for a graceful close at shutdown.
    pub(super) fn close_all(&mut self, now: Instant) {
        for p in 0..self.pairs.count() as u32 {
            let pair = PairId(p);
            if let Some(c) = self.pairs.get_mut(pair).stack.conn_mut() {
                c.close();
                self.pairs.mark_dirty(p);
            }
            self.request_close(pair, now);
        }
        self.pairs.clear_connects();
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

/// Whether a failed connect's `errno` is the engine address's (a refusal, no answer, no
/// route to it) rather than this host's (a source address not on it, descriptors or buffers
/// run out, a local firewall's EPERM): only the former moves the pair to the name's next
/// address, since on the latter every address fails alike.
fn the_address_failed(errno: i32) -> bool {
    matches!(
        errno,
        libc::ECONNREFUSED
            | libc::ETIMEDOUT
            | libc::EHOSTUNREACH
            | libc::ENETUNREACH
            | libc::EHOSTDOWN
            | libc::ECONNRESET
            | libc::ECONNABORTED
            // ICMP from the path: IPv6 administratively prohibited or rejected by policy
            // (a local firewall says EPERM), IPv4 host isolated, protocol unreachable.
            | libc::EACCES
            | libc::ENONET
            | libc::ENOPROTOOPT
    )
}
