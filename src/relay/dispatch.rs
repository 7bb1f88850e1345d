//! The dispatcher: one reactor thread's bundles, sans-IO. It owns the thread's arena slice (the
//! in-flight cap) and a FIFO of waiting bundles per lane (a region's pairs of one egress group:
//! a tenant with addresses of its own leaves only through them, everyone else only through the
//! shared ones), and sends each bundle through the
//! thread's [`Upstream`] (pairs, connections, pacing). The reactor feeds it completions (bytes
//! received, bytes sent, connects, closes) and `now`; it answers with work for the reactor
//! (pairs to connect, pairs to close, pairs with bytes to send) and the instant it next needs
//! to run. It never does I/O and never reads a clock, so every decision below is testable with
//! a simulated clock.
//!
//! Every admitted bundle ends exactly once, and is counted where it ends: delivered (the
//! engine said OK), rejected (the engine refused it for good), expired (older than the max age
//! before an engine took it) or failed (lost after being fully sent, or still held at
//! shutdown). `admitted = delivered + rejected + expired + failed + in flight` holds at every
//! step ([`Dispatcher::check_accounting`]).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::arena::{Arena, BundleMeta, FAN_EXTRA_MAX, LentSlot, SlotHandle, SlotMut};
use crate::clock::{Instant, TickRate, Ticks};
use crate::egress::transport::TransportError;
use crate::journal::{Attempt, End as RecordEnd, Found, Journals, Record};
use crate::limiter::{Acquire, LaneId, Limiter, PairId, REGIONS_MAX};
use crate::log::LogQueue;
use crate::mesh::{Estimate, Mesh, NEVER};
use crate::metrics::ThreadMetrics;
use crate::metrics::accounting::Stats;

use super::Port;
use super::ThreadSpec;
use super::handoff::Peers;
use super::queries::{Asked, ConnRef, Full, Query};
use super::tenancy::{Claim, Denied, Pass, Tenancy};
use super::upstream::{Ended, Fate, Upstream};
use crate::config::Strategy;
use crate::metrics::tenants::{Ended as TenantEnded, Refused, TenantStats};

pub use super::links::{ConnectOrder, DENIED_RETRY_MS};
pub use super::pairs::{Link, PAIR_STATE_BYTES};
pub use super::region::ERROR_LOG_BYTES;

/// The heap bytes one thread's side of the mesh holds with `lanes` lanes (the budget counts
/// it).
pub const fn handoff_allocation_bytes(threads: usize, lanes: usize) -> usize {
    Peers::allocation_bytes(threads, lanes)
}

/// Room each pair has in the upstream's queues (to connect, to send, to close, ended calls).
pub const PAIR_QUEUE_BYTES: usize =
    super::pairs::QUEUE_BYTES_PER_PAIR + super::upstream::ENDED_BYTES_PER_PAIR;

/// Sends of one copy of a bundle that engines refused unprocessed (REFUSED_STREAM,
/// UNAVAILABLE, lost unsent) before it ends rejected: it bounds a bundle that every pair keeps
/// refusing. A fanned-out bundle's copies each have these tries, so one region that keeps
/// refusing ends only its own copy. A pair's own refusal (rate limited, source denied) is no
/// attempt against the bundle: that one goes to another pair, bounded only by its age.
pub const ATTEMPTS_MAX: u8 = 8;

/// The back-off after a copy's second unprocessed refusal; it doubles with each one after
/// (10, 20, 40, 80, 160, 320 ms: the eighth try goes 631 ms after the first at the soonest).
/// The first is sent again at once, on another pair: one connection's refusal (a GOAWAY, a
/// stream limit) says nothing of the engine. Refused twice in a row, the engine is likely
/// away (a front end restarting answers UNAVAILABLE for every call), and tries sent at once
/// would all be spent within milliseconds on an outage of a few hundred.
pub const RETRY_BACKOFF_MS: u64 = 10;

/// A bundle that would leave within the last 1/64 of its max age is refused as late (31 ms of
/// the default 2 s): the dispatcher's wake-up a little after the pair is ready would find it
/// expired.
const LATE_SLACK_DIV: u64 = 64;

/// How soon a thread tries again to move a waiting bundle whose best other thread had no slot
/// to lend it ([`Dispatcher::move_waiting`], [`Dispatcher::move_late`]); and how often, at
/// most, it looks past a late bundle that cannot move at the ones ahead of it that can.
const MOVE_RETRY_MS: u64 = 5;

/// A slot taken for one request's bundle: in this thread's arena, or lent by the thread that
/// will send it. [`Dispatcher::slot_mut`] is where the bundle is decoded;
/// [`Dispatcher::commit`] admits it (queued here, or handed to its thread) and
/// [`Dispatcher::abandon`] gives the slot up when the request was bad.
#[derive(Debug)]
pub struct Admission {
    region: u8,
    lane: u8,
    slot: Taken,
    pass: Pass,
    /// Further lanes a fanned-out bundle goes to (`fan.0[..fan.1]`).
    fan: ([u8; FAN_EXTRA_MAX], u8),
    /// How the leader strategy routed it, counted once it is admitted.
    leader: LeaderPick,
    /// It came in on the rotating port ([`crate::arena::BundleMeta::rotating`]).
    rotating: bool,
    /// Another thread would have sent it sooner but had no slot lent to this one.
    without_credit: bool,
}

/// The leader strategy's choice for a bundle from the rotating port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeaderPick {
    /// Not routed by leader.
    None,
    /// To the next leader's region.
    Leader,
    /// To the soonest region instead.
    Fallback,
}

#[derive(Debug)]
enum Taken {
    Local(SlotHandle),
    Lent { peer: usize, slot: LentSlot },
}

impl Admission {
    /// The region the bundle goes to.
    pub fn region(&self) -> u8 {
        self.region
    }

    /// The thread that will send it, when it is not this one.
    pub fn peer(&self) -> Option<usize> {
        match self.slot {
            Taken::Local(_) => None,
            Taken::Lent { peer, .. } => Some(peer),
        }
    }
}

/// Why [`Dispatcher::admit`] took no slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The in-flight cap: every arena the bundle could go to is full.
    Full,
    /// The pinned port's region left the config (a reload): its name is
    /// [`Dispatcher::region_name`] of this.
    RegionRemoved(u8),
    /// The relay is stopping and no pool can send the bundle before its drain ends.
    Stopping,
    /// The pairs it may leave through (region `region`'s, the soonest of its regions) would
    /// send it `next_ms` from now, behind the bundles waiting already: past its max age
    /// (`max_age_ms`), or in its last 1/64. Sent again `retry_ms` from now (at least 1), it
    /// would leave in time, if nothing more joined the queue meanwhile.
    Backlog {
        region: u8,
        next_ms: u64,
        max_age_ms: u64,
        retry_ms: u64,
    },
    /// The tenant checks said no ([`super::tenancy`]).
    Tenant(Denied),
}

/// What [`Dispatcher::waiting`] found of a queued copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiting {
    /// Older than its max age: it ends expired.
    TooOld,
    /// Held after unprocessed refusals until then; the bundles behind it go meanwhile.
    HeldUntil(Instant),
    /// It goes when a pair is ready.
    Due,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EndKind {
    Delivered,
    Rejected,
    Expired,
    Failed,
}

/// What [`Dispatcher::ask_engine`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asking {
    /// An engine is asked: the answer comes from [`Dispatcher::poll_answered`].
    Asked,
    /// The thread's query table is full: answer now without the engine.
    Full,
}

/// See the module docs.
pub struct Dispatcher {
    rate: TickRate,
    arena: Arena,
    up: Upstream,
    /// Per lane (`region × groups + group`): bundles waiting for a pair, oldest first (each
    /// allocated at its bound, the thread's slots).
    fifos: Box<[VecDeque<SlotHandle>]>,
    /// Per region: the latest time another thread heard its engine again that this thread
    /// has looked at (ticks; [`Dispatcher::hear_from_peers`]).
    heard_seen: [u64; crate::limiter::REGIONS_MAX],
    /// Egress groups: each region has a lane per group.
    groups: usize,
    regions: usize,
    /// Earliest instant a waiting bundle needs the dispatcher again (its expiry).
    wake: Option<Instant>,
    max_age: Ticks,
    rotate: usize,
    /// The leader strategy's wait: the leader's region takes a bundle it can send this soon.
    leader_wait: Ticks,
    /// Each region's pacing interval: with its pairs up, how far apart its sends can be.
    intervals: Box<[Ticks]>,
    /// Each region's burst: sends a pair may make back to back before its interval paces it.
    bursts: Box<[u32]>,
    /// The other threads, once this one joins the mesh.
    peers: Option<Peers>,
    /// Per region: the config no longer lists it (a reload); no new bundle goes there.
    retired: Box<[bool]>,
    /// Shutdown's drain ends here: a bundle is admitted only if it can be sent before then.
    drain_until: Option<Instant>,
    /// Per region: retired with nothing waiting, so its pairs were drained.
    drained: Box<[bool]>,
    /// Some region is retired (the dispatch loop looks for ones to drain only then).
    any_retired: bool,
    /// Ticks before which [`Dispatcher::move_late`] stops at the first late bundle that
    /// cannot move, as it found some the last time it looked at every late one; and whether a
    /// rotating-port bundle was among those (the loop then wakes for the next look).
    look_past_at: u64,
    rotating_left: bool,
    /// Regions (bits) whose lanes [`Dispatcher::move_lane`] filled in this dispatch pass after
    /// the pass had been by them.
    moved_into: u32,
    stats: Arc<Stats>,
    metrics: Arc<ThreadMetrics>,
    tenancy: Tenancy,
    /// Bundles this thread admitted and moved to another (it had no source left), and ones
    /// other threads moved here: counted admitted where they were first, so this thread's
    /// own accounting balances only with these ([`Dispatcher::check_accounting`]).
    moved_out: u64,
    moved_in: u64,
    /// Bundles other threads handed here since this thread last published: they count in
    /// the handing thread's view of this pool until a publish says they are taken, whether
    /// or not this pool's estimate moved (one sent at once on a pair ready like the rest
    /// leaves it as it was).
    took_handoffs: bool,
    /// Every thread's record of recent bundles; this thread writes ring `me`.
    journals: Arc<Journals>,
    me: usize,
    /// Requests a trusted proxy sent without naming their client: when the last line said so,
    /// and how many were not logged since.
    unforwarded: Option<super::region::Logged>,
}

impl Dispatcher {
    /// Everything a thread's share of the relay needs, allocated now, with a record of recent
    /// bundles of its own (one thread alone: see [`Dispatcher::with_journal`]).
    pub fn new(
        spec: &ThreadSpec,
        rate: TickRate,
        now: Instant,
        stats: Arc<Stats>,
        metrics: Arc<ThreadMetrics>,
    ) -> Dispatcher {
        let journals = Arc::new(Journals::new(&[spec.records]));
        Dispatcher::with_journal(spec, rate, now, stats, metrics, journals, 0)
    }

    /// As [`Dispatcher::new`], writing its bundles' records into ring `me` of `journals`
    /// (every thread's, so a status query on any thread finds any bundle).
    pub fn with_journal(
        spec: &ThreadSpec,
        rate: TickRate,
        now: Instant,
        stats: Arc<Stats>,
        metrics: Arc<ThreadMetrics>,
        journals: Arc<Journals>,
        me: usize,
    ) -> Dispatcher {
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        journals.ring(me).set_clock(now, unix_ns, rate);
        let slots = spec.arena_slots as usize;
        let groups = spec.groups.len().max(1);
        stats.arena_capacity.set(slots as u64);
        Dispatcher {
            rate,
            arena: Arena::new(spec.arena_slots),
            up: Upstream::new(spec, rate, now, stats.clone(), metrics.clone()),
            heard_seen: [0; crate::limiter::REGIONS_MAX],
            fifos: (0..spec.regions.len() * groups)
                .map(|_| VecDeque::with_capacity(slots))
                .collect(),
            groups,
            regions: spec.regions.len(),
            wake: None,
            max_age: rate.from_ms(spec.bundle_max_age_ms),
            rotate: 0,
            leader_wait: rate.from_ms(spec.leader.wait_ms),
            intervals: spec
                .regions
                .iter()
                .map(|r| rate.from_ms(r.interval_ms))
                .collect(),
            bursts: spec.regions.iter().map(|r| r.burst).collect(),
            peers: None,
            retired: vec![false; spec.regions.len()].into_boxed_slice(),
            drain_until: None,
            drained: vec![false; spec.regions.len()].into_boxed_slice(),
            any_retired: false,
            look_past_at: 0,
            rotating_left: false,
            moved_into: 0,
            stats,
            metrics,
            tenancy: Tenancy::new(spec.tenants.clone(), spec.tenant_stats.clone(), rate),
            moved_out: 0,
            moved_in: 0,
            took_handoffs: false,
            journals,
            me,
            unforwarded: None,
        }
    }

    /// A request from trusted proxy `proxy` named no client (`forwarded_for`: its
    /// `X-Forwarded-For`, if any) and was answered 400. The bot reads why; the operator, who
    /// can mend it, reads it here: one line per [`super::region::ERROR_RELOG_MS`] and thread,
    /// with how many went unsaid between.
    pub fn refused_unforwarded(
        &mut self,
        proxy: std::net::IpAddr,
        forwarded_for: Option<&[u8]>,
        now: Instant,
    ) {
        let Some(unsaid) = super::region::Logged::note(&mut self.unforwarded, now, self.rate)
        else {
            return;
        };
        let unsaid = unsaid.count;
        let why = match forwarded_for {
            None => "no X-Forwarded-For",
            Some(_) => "an X-Forwarded-For not ending in an address",
        };
        let fix = "answered 400; make the proxy append X-Forwarded-For (HAProxy: option \
                   forwardfor) or drop it from intake.trusted_proxies";
        if unsaid == 0 {
            self.up.log().line(format_args!(
                "intake: a request through trusted proxy {proxy} named no client ({why}): {fix}"
            ));
        } else {
            self.up.log().line(format_args!(
                "intake: a request through trusted proxy {proxy} named no client ({why}), and \
                 {unsaid} more since the last line: {fix}"
            ));
        }
    }

    /// The bundle `id` that tenant slot `tenant` sent, in any thread's record.
    pub fn find_bundle(&self, id: &[u8; 32], tenant: u16) -> Option<Found> {
        self.journals
            .find(id, tenant, self.tenancy.stats().epoch(tenant))
    }

    /// [`Dispatcher::find_bundle`] as `getInflightBundleStatuses` sees it at `now`: a bundle
    /// last admitted longer ago than Jito's look-back is none (Jito says `Invalid` of it),
    /// however long the record keeps it for `getBundleDelivery`.
    pub fn find_inflight(&self, id: &[u8; 32], tenant: u16, now: Instant) -> Option<Found> {
        let lookback = self.rate.from_ms(crate::jito::INFLIGHT_LOOKBACK_MS);
        self.find_bundle(id, tenant)
            .filter(|f| now.since(f.latest.admitted).0 <= lookback.0)
    }

    /// Every thread's record of recent bundles.
    pub fn journals(&self) -> &Arc<Journals> {
        &self.journals
    }

    /// Applies a reload: the max age (for bundles waiting too: they are judged by the new
    /// one), each region's pace, regions the config no longer lists retired (their waiting
    /// bundles still go; their pairs drain once none waits) or listed again, and the
    /// upstream's settings ([`Upstream::retune`]). Between loop iterations, never mid-request.
    pub fn retune(&mut self, t: &super::tuning::Tuning, now: Instant) {
        self.max_age = self.rate.from_ms(t.bundle_max_age_ms);
        self.leader_wait = self.rate.from_ms(t.leader.wait_ms);
        for (r, pace) in t.regions.iter().enumerate() {
            if let Some(p) = pace {
                self.intervals[r] = self.rate.from_ms(p.interval_ms);
                self.bursts[r] = p.burst;
            }
            self.retired[r] = pace.is_none();
            if pace.is_some() && std::mem::take(&mut self.drained[r]) {
                self.up.retire_region(r, false, now);
            }
        }
        self.any_retired = self.retired.iter().any(|r| *r);
        if let Some(table) = &t.tenants {
            self.tenancy.retune(table.clone());
        }
        self.up.retune(t, now);
    }

    /// Region `r` left the config (a reload) and takes no new bundle.
    pub fn is_retired(&self, r: usize) -> bool {
        self.retired[r]
    }

    /// How long a bot should wait to ask again when no pair carried its status query in
    /// time: the pace of the region it asked (the quickest region's when any would do).
    pub fn query_retry_ms(&self, region: Option<u8>) -> u64 {
        let ticks = match region {
            Some(r) => self.intervals[usize::from(r)],
            None => self.intervals.iter().copied().min().unwrap_or_default(),
        };
        self.rate.to_ns(ticks).div_ceil(1_000_000)
    }

    /// Region `r`'s name as the config gives it.
    pub fn region_name(&self, r: usize) -> &str {
        self.up.region_name(r)
    }

    /// Sources of this thread the config lists (all of them until a reload drops some).
    pub fn sources_listed(&self) -> usize {
        self.up.sources_listed()
    }

    /// Nothing waits for region `r`, in any of its lanes.
    fn region_idle(&self, r: usize) -> bool {
        self.fifos[self.lanes_of(r)].iter().all(VecDeque::is_empty)
    }

    /// Region `r`'s lanes.
    fn lanes_of(&self, r: usize) -> std::ops::Range<usize> {
        r * self.groups..(r + 1) * self.groups
    }

    /// Drains the pairs of retired regions that have nothing waiting any more.
    fn drain_retired(&mut self, now: Instant) {
        for r in 0..self.regions {
            if self.retired[r] && !self.drained[r] && self.region_idle(r) {
                self.drained[r] = true;
                self.up.retire_region(r, true, now);
            }
        }
    }

    pub fn region_count(&self) -> usize {
        self.regions
    }

    pub fn pair_count(&self) -> usize {
        self.up.pair_count()
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// The tenants as this thread applies them.
    pub fn tenancy(&self) -> &Tenancy {
        &self.tenancy
    }

    pub fn limiter(&self) -> &Limiter {
        self.up.limiter()
    }

    pub fn link(&self, pair: PairId) -> Link {
        self.up.link(pair)
    }

    // ---- intake side ----

    /// Joins the threads' mesh as thread `me`: bundles it accepts may leave through other
    /// threads' pairs, and theirs through its own. Allocates its side now.
    pub fn join(&mut self, mesh: Arc<Mesh>, me: usize) {
        self.peers = Some(Peers::new(mesh, me, self.fifos.len()));
    }

    /// Whether this thread's pool sends one more bundle for lane `lane`, and has it answered,
    /// before `until`: sent by a quarter of the call deadline before it (the silence
    /// threshold, well past an engine's normal answer), at most its ready pairs (at least the
    /// one next ready) from its next send on and each pair not held by a call once per whole
    /// interval after, behind
    /// the bundles already waiting there. A lower bound (a booked pair that falls due in the
    /// part interval left is not counted); a region silent or on trial after a silence sends
    /// nothing here.
    fn sends_before(&mut self, lane: usize, now: Instant, until: Instant) -> bool {
        let r = lane / self.groups;
        let by = Instant(until.0.saturating_sub(self.up.silence_after().0));
        let Some(start) = self.up.next_ready_at(lane) else {
            return false;
        };
        if !self.up.may_call(r) || self.up.has_silence(r) || start.0.max(now.0) >= by.0 {
            return false;
        }
        let c = self.up.lane_counts_at(lane, now);
        let rounds = by.since(start.max(now)).0 / self.intervals[r].0.max(1);
        let sends = u64::from(c.ready.max(1)) + u64::from(c.ready + c.booked) * rounds;
        (self.fifos[lane].len() as u64) < sends
    }

    /// When this thread's pool could send one more bundle for lane `lane`: its next ready
    /// pair, plus a step per bundle already waiting there (the interval over its pairs in
    /// rotation). [`Estimate::NONE`] for a silent region or a lane with no pair up.
    fn own_estimate(&mut self, lane: usize) -> Estimate {
        let r = lane / self.groups;
        if !self.up.may_call(r) {
            return Estimate::NONE;
        }
        let Some(at) = self.up.next_ready_at(lane) else {
            return Estimate::NONE;
        };
        let c = self.up.limiter().lane_counts(LaneId(lane as u8));
        let rotation = u64::from((c.ready + c.booked + c.held).max(1));
        let step = self.intervals[r].0 / rotation;
        Estimate {
            due: at
                .0
                .saturating_add(step.saturating_mul(self.fifos[lane].len() as u64)),
            step,
        }
    }

    /// When a bundle queued in lane `lane` now would leave this thread's pool, held against
    /// its max age at admission: the lane's next ready pair (from now: a cooldown or a
    /// region's back-off the engine asked for counts), then a step per bundle waiting there of
    /// the interval over every pair the lane lists, the first `(burst − 1)` a pair free. Over
    /// the whole pool, not the pairs in rotation this instant: pairs reconnecting after an
    /// engine's GOAWAY are back within moments, and counting without them refused bundles the
    /// pool then sent in time. So it says whether more waits than the whole pool sends within
    /// the max age. [`NEVER`] where [`Dispatcher::own_estimate`] has none (no pair up, every
    /// pair in a call, a silent region).
    fn own_leaves(&mut self, lane: usize, now: Instant) -> u64 {
        let r = lane / self.groups;
        if !self.up.may_call(r) {
            return NEVER;
        }
        let Some(at) = self.up.next_ready_at(lane) else {
            return NEVER;
        };
        self.paced_from(lane, at.0.max(now.0), self.fifos[lane].len())
    }

    /// When a bundle with `ahead` others before it in lane `lane` leaves a pool whose next pair
    /// is ready at `at`: a step per bundle ahead of the interval over every pair the lane lists,
    /// the first `(burst − 1)` a pair free.
    fn paced_from(&self, lane: usize, at: u64, ahead: usize) -> u64 {
        let r = lane / self.groups;
        let interval = self.intervals[r].0;
        let listed = u64::from(self.up.group_listed(lane % self.groups).max(1));
        let free = listed.saturating_mul(u64::from(self.bursts[r].max(1)) - 1);
        let paced = (ahead as u64).saturating_sub(free);
        at.saturating_add((interval / listed).saturating_mul(paced))
    }

    /// The instant after which a bundle of tenant slot `tenant` admitted at `now` would leave
    /// too late: within the last 1/64 of its max age, where a wake-up a little after the pair
    /// is ready would find it expired.
    fn late_after(&self, tenant: u16, now: Instant) -> u64 {
        let age = self.max_age_of(tenant).0;
        now.0.saturating_add(age - age / LATE_SLACK_DIV)
    }

    /// [`Dispatcher::own_leaves`], without the estimate where nothing waits in the lane and
    /// its interval is within the max age (the usual case, and the request path's): its next
    /// pair is an interval away at most, unless every pair cools or the region backs off for
    /// longer, and then the next bundle is judged.
    fn own_leaves_fast(&mut self, lane: usize, region: u8, max_age: Ticks, now: Instant) -> u64 {
        if self.fifos[lane].is_empty() && self.intervals[usize::from(region)].0 <= max_age.0 {
            return now.0;
        }
        self.own_leaves(lane, now)
    }

    /// For a rotating-port bundle late in `late`: the tenant's region (other than `late`)
    /// whose lane here sends it soonest, if by `by`; its region, lane and estimate.
    fn in_time_elsewhere(
        &mut self,
        pass: &Pass,
        late: u8,
        by: u64,
        now: Instant,
    ) -> Option<(u8, u8, u64)> {
        let group = usize::from(pass.group).min(self.groups - 1);
        let mut best: Option<(u8, u8, u64)> = None;
        for r in 0..self.regions {
            if r == usize::from(late) || self.retired[r] || pass.mask & (1 << r) == 0 {
                continue;
            }
            let l = r * self.groups + group;
            let at = self.own_leaves(l, now);
            if at <= by && best.is_none_or(|(_, _, b)| at < b) {
                best = Some((r as u8, l as u8, at));
            }
        }
        best
    }

    /// Where a bundle from `port` goes: the region (the pinned one, or for the rotating port
    /// the one that can send soonest) and the thread (another when its pool sends sooner than
    /// this thread's; this one on a tie), judged on the lanes of the tenant's egress group
    /// only: its bundle never leaves through another group's addresses. Regions tie
    /// round-robin. Returns the region, its lane, the thread, the leader strategy's pick and
    /// when the bundle would leave (ticks; [`NEVER`] when no pool of it has a pair up).
    fn route(
        &mut self,
        port: Port,
        pass: &Pass,
        now: Instant,
    ) -> (u8, u8, Option<usize>, LeaderPick, u64) {
        let n = self.regions;
        let groups = self.groups;
        let group = usize::from(pass.group).min(groups - 1);
        let lane = move |r: usize| r * groups + group;
        let (first, count) = match port {
            Port::Pinned(r) => (r as usize, 1),
            Port::Rotating => (self.rotate, n),
        };
        let allowed = |r: usize, retired: &[bool]| {
            port != Port::Rotating || (!retired[r] && pass.mask & (1 << r) != 0)
        };
        if port == Port::Rotating && pass.strategy == Strategy::Leader {
            // The next leader's region, if it is the tenant's and it (or another thread's pool
            // for it) can send within the wait; else the soonest region, as below.
            if let Some(r) = self.up.leader_region(now).map(usize::from)
                && r < n
                && allowed(r, &self.retired)
            {
                let l = lane(r);
                let own = self.own_estimate(l).at(now, 0);
                let peer = self.peers.as_mut().and_then(|p| p.best(l, now));
                let (at, peer) = match peer {
                    Some((t, at)) if at < own => (at, Some(t)),
                    _ => (own, None),
                };
                // Within the leader wait, and the tenant's own max age if that is shorter.
                let wait = self.leader_wait.0.min(self.max_age_of(pass.slot).0);
                if at != NEVER && at <= now.0.saturating_add(wait) {
                    return (r as u8, l as u8, peer, LeaderPick::Leader, at);
                }
            }
        }
        let pick = if port == Port::Rotating && pass.strategy == Strategy::Leader {
            LeaderPick::Fallback
        } else {
            LeaderPick::None
        };
        if port == Port::Rotating && pass.strategy == Strategy::Ordered {
            // The first of the tenant's regions, in its order, that can send it within its
            // max age; else the soonest, as below.
            let by = self.late_after(pass.slot, now);
            for k in 0..self.tenancy.order(pass.slot).len() {
                let r = self.tenancy.order(pass.slot)[k] as usize;
                if !allowed(r, &self.retired) {
                    continue;
                }
                let l = lane(r);
                let own = self.own_estimate(l).at(now, 0);
                let peer = self.peers.as_mut().and_then(|p| p.best(l, now));
                match peer {
                    Some((t, at)) if at < own && at <= by => {
                        return (r as u8, l as u8, Some(t), pick, at);
                    }
                    _ if own != NEVER && self.own_leaves(l, now) <= by => {
                        return (r as u8, l as u8, None, pick, own);
                    }
                    _ => {}
                }
            }
        }
        // (when, region, peer): this thread's own estimates win ties.
        let mut best: Option<(u64, usize, Option<usize>)> = None;
        for k in 0..count {
            let r = (first + k) % n;
            if !allowed(r, &self.retired) {
                continue;
            }
            let l = lane(r);
            let own = self.own_estimate(l).at(now, 0);
            if own != NEVER && best.is_none_or(|(b, _, _)| own < b) {
                best = Some((own, r, None));
            }
            if let Some(peers) = self.peers.as_mut()
                && let Some((t, at)) = peers.best(l, now)
                && best.is_none_or(|(b, _, _)| at < b)
            {
                best = Some((at, r, Some(t)));
            }
        }
        let fallback = match port {
            // No region can send soon: the next listed one takes the bundle.
            Port::Rotating => (0..n)
                .map(|k| (first + k) % n)
                .find(|&r| allowed(r, &self.retired)),
            Port::Pinned(_) => None,
        };
        let (at, r, peer) = best.unwrap_or((NEVER, fallback.unwrap_or(first % n), None));
        if port == Port::Rotating {
            self.rotate = (r + 1) % n;
        }
        (r as u8, lane(r) as u8, peer, pick, at)
    }

    /// A slot for a bundle from `port`, admitted at `now`: lent by the thread whose pool will
    /// send it soonest, or this thread's own (also when that thread has no slot to lend); else
    /// any thread's that has one. `None` is the in-flight cap: every arena the bundle could
    /// go to is full.
    pub fn admit(
        &mut self,
        port: Port,
        claim: Claim<'_>,
        now: Instant,
    ) -> Result<Admission, Refusal> {
        let pass = match self.tenancy.check(claim, port, now) {
            Ok(pass) => pass,
            Err(Denied::Cap { .. }) => return Err(Refusal::Full),
            Err(denied) => return Err(Refusal::Tenant(denied)),
        };
        let (mut region, mut lane, mut peer, mut leader, leaves) = self.route(port, &pass, now);
        let max_age = self.max_age_of(pass.slot);
        let by = self.late_after(pass.slot, now);
        let mut own = self.own_leaves_fast(usize::from(lane), region, max_age, now);
        // Late only if this thread's pool is behind and the peer chosen (its published
        // estimate) is too.
        let mut late = own != NEVER && own > by && (peer.is_none() || leaves > by);
        if late && port == Port::Rotating {
            // Route ranks pools by their pairs in rotation this instant; the deadline counts
            // each whole pool. Another of the tenant's regions may send it in time.
            if let Some((r, l, at)) = self.in_time_elsewhere(&pass, region, by, now) {
                (region, lane, peer, own, late) = (r, l, None, at, false);
                if leader == LeaderPick::Leader {
                    leader = LeaderPick::Fallback;
                }
            }
        }
        // The queue ahead does not move with the bot's retry: sent again once the late line
        // has moved past where the bundle would leave, it is in time.
        let backlog = |d: &Self, leaves: u64| Refusal::Backlog {
            region,
            next_ms: d.rate.to_ns(Ticks(leaves - now.0)).div_ceil(1_000_000),
            max_age_ms: d.rate.to_ns(max_age).div_ceil(1_000_000),
            retry_ms: d
                .rate
                .to_ns(Ticks(leaves.saturating_sub(by)))
                .div_ceil(1_000_000)
                .max(1),
        };
        let slot = if self.retired[region as usize] {
            Err(Refusal::RegionRemoved(region))
        } else if let Some(until) = self.drain_until {
            // Every thread drains: a peer's published estimate does not count what others
            // hand it in the same moment, so the bundle stays here, and only if this pool
            // sends it in time. Answered and then failed at the drain's end unsent, it would
            // be one the bot believes sent: refused, the bot sends it elsewhere.
            if self.sends_before(usize::from(lane), now, until) {
                // This thread's own slot: another's arena would send from a pool not judged.
                let own = self
                    .arena
                    .acquire(now)
                    .ok()
                    .map(|s| (Taken::Local(s), false));
                own.ok_or(Refusal::Full)
            } else {
                Err(Refusal::Stopping)
            }
        } else if late {
            // Answered, it would expire unsent: refused, the bot sends it elsewhere or later.
            // A pool with no estimate (no pair up yet, every pair in a call, a silent
            // region) admits: its bundles wait for a pair, as they always have.
            Err(backlog(
                self,
                if peer.is_some() { own.min(leaves) } else { own },
            ))
        } else {
            match self.take_slot(peer, now) {
                // The peer that would send it in time had no slot to lend, and this pool
                // would not.
                Some((Taken::Local(slot), true)) if own != NEVER && own > by => {
                    self.arena.release(slot).expect("just taken");
                    Err(backlog(self, own))
                }
                taken => taken.ok_or(Refusal::Full),
            }
        };
        let fan = match (port, &slot) {
            (Port::Rotating, Ok((taken, _))) if pass.fan_out > 1 => {
                // The copies wait where the bundle does: judged by that thread's pool.
                let holder = match *taken {
                    Taken::Lent { peer, .. } => Some(peer),
                    Taken::Local(_) => None,
                };
                self.fan_lanes(region, &pass, holder, now)
            }
            _ => ([0; FAN_EXTRA_MAX], 0),
        };
        match slot {
            Ok((slot, without_credit)) => Ok(Admission {
                region,
                lane,
                slot,
                pass,
                fan,
                leader,
                rotating: port == Port::Rotating,
                without_credit,
            }),
            Err(refusal) => {
                self.tenancy.refuse(&pass);
                match refusal {
                    Refusal::Full => self.tenancy.stats().refused(pass.slot, Refused::Cap),
                    Refusal::Backlog { region, .. } => {
                        self.stats.region(usize::from(region)).refused_backlog.inc();
                        self.tenancy.stats().refused(pass.slot, Refused::Backlog)
                    }
                    _ => {}
                }
                Err(refusal)
            }
        }
    }

    /// The further lanes a bundle for `primary` fans out to: the tenant's other regions that
    /// can send soonest, up to `fan_out - 1` of them, none with no pair up and none that would
    /// send it past its max age (a copy there would only hold its slot until it expired, and
    /// push back what waits behind it). Judged by the pool the copies wait for: this thread's,
    /// or for a bundle handed to thread `holder`, that thread's as it published it.
    fn fan_lanes(
        &mut self,
        primary: u8,
        pass: &Pass,
        holder: Option<usize>,
        now: Instant,
    ) -> ([u8; FAN_EXTRA_MAX], u8) {
        let group = usize::from(pass.group).min(self.groups - 1);
        let want = usize::from(pass.fan_out - 1).min(FAN_EXTRA_MAX);
        let by = self.late_after(pass.slot, now);
        // (when, region), soonest first; ties keep region order after the primary.
        let mut best = [(NEVER, 0u8); FAN_EXTRA_MAX];
        let mut found = 0;
        for k in 1..self.regions {
            let r = (usize::from(primary) + k) % self.regions;
            if self.retired[r] || pass.mask & (1 << r) == 0 {
                continue;
            }
            let l = r * self.groups + group;
            let at = match (holder, self.peers.as_mut()) {
                (Some(t), Some(peers)) => {
                    let at = peers.leaves(t, l, now);
                    if at == NEVER || at > by {
                        continue;
                    }
                    at
                }
                _ => {
                    let at = self.own_estimate(l).at(now, 0);
                    if at == NEVER || self.own_leaves(l, now) > by {
                        continue;
                    }
                    at
                }
            };
            let mut i = found.min(want);
            while i > 0 && best[i - 1].0 > at {
                if i < want {
                    best[i] = best[i - 1];
                }
                i -= 1;
            }
            if i < want {
                best[i] = (at, r as u8);
                found = (found + 1).min(want);
            }
        }
        let mut lanes = [0u8; FAN_EXTRA_MAX];
        for (l, (_, r)) in lanes.iter_mut().zip(&best[..found]) {
            *l = (usize::from(*r) * self.groups + group) as u8;
        }
        (lanes, found as u8)
    }

    /// A slot lent by `peer` when it has one, else this thread's own, else any thread's; and
    /// whether it stayed here only for want of `peer`'s credit.
    fn take_slot(&mut self, peer: Option<usize>, now: Instant) -> Option<(Taken, bool)> {
        if let Some(peer) = peer
            && let Some(slot) = self.peers.as_mut().and_then(|p| p.take_credit(peer, now))
        {
            return Some((Taken::Lent { peer, slot }, false));
        }
        if let Ok(slot) = self.arena.acquire(now) {
            return Some((Taken::Local(slot), peer.is_some()));
        }
        // This arena is full: any thread with a slot to lend takes the bundle.
        let peers = self.peers.as_mut()?;
        for t in 0..peers.mesh().threads() {
            if t != peers.me()
                && let Some(slot) = peers.take_credit(t, now)
            {
                return Some((Taken::Lent { peer: t, slot }, false));
            }
        }
        None
    }

    /// Where the admission's bundle is decoded (and its upstream frame encoded).
    pub fn slot_mut<'a>(&'a mut self, a: &'a mut Admission) -> SlotMut<'a> {
        match &mut a.slot {
            Taken::Local(slot) => self.arena.get_mut(*slot).expect("held by the intake"),
            // SAFETY: a slot lent to this thread, not handed back yet (`commit` and `abandon`
            // consume the admission).
            Taken::Lent { slot, .. } => unsafe { slot.decode_into(self.arena.decode_room()) },
        }
    }

    /// The request was bad: the slot goes back (a lent one is kept for the next bundle).
    pub fn abandon(&mut self, a: Admission) {
        self.tenancy.release(&a.pass);
        match a.slot {
            Taken::Local(slot) => self.arena.release(slot).expect("slot held by the intake"),
            Taken::Lent { peer, slot } => {
                if let Some(p) = self.peers.as_mut() {
                    p.keep_credit(peer, slot);
                }
            }
        }
    }

    /// The slot holds a decoded, encoded bundle: admitted here and queued, or handed to the
    /// thread that lent the slot, which admits it.
    pub fn commit(&mut self, mut a: Admission) {
        let pass = a.pass;
        let (fan_lanes, fan_extra) = a.fan;
        let rotating = a.rotating;
        let meta = self.slot_mut(&mut a).meta;
        meta.tenant = pass.slot;
        meta.fan_lanes = fan_lanes;
        meta.fan_extra = fan_extra;
        meta.copies = 1 + fan_extra;
        meta.rotating = rotating;
        self.tenancy.stats().admitted(pass.slot);
        match a.leader {
            LeaderPick::Leader => self.stats.region(usize::from(a.region)).leader_routed.inc(),
            LeaderPick::Fallback => self.stats.leader_fallbacks.inc(),
            LeaderPick::None => {}
        }
        if a.without_credit {
            self.stats.handoffs_without_credit.inc();
        }
        match a.slot {
            Taken::Local(slot) => self.enqueue(slot, a.lane),
            Taken::Lent { peer, slot } => {
                self.stats.handoffs_out.inc();
                self.peers
                    .as_mut()
                    .expect("a lent slot comes from the mesh")
                    .hand_off(peer, slot, a.lane, false);
            }
        }
    }

    /// A thread this one handed bundles to since the last call, to wake when it sleeps.
    pub fn poll_wake(&mut self) -> Option<usize> {
        self.peers.as_mut()?.poll_wake()
    }

    /// A bundle another thread handed this one waits.
    pub fn has_inbound(&self) -> bool {
        self.peers.as_ref().is_some_and(Peers::has_inbound)
    }

    /// The slot holds a decoded, encoded bundle for `lane`: it is admitted and queued.
    fn enqueue(&mut self, slot: SlotHandle, lane: u8) {
        let region = usize::from(lane) / self.groups;
        self.stats.region(region).admitted.inc();
        self.queue(slot, lane, region as u8, true);
    }

    /// Queues a bundle for `lane` (and, newly admitted with `fan`, a copy in each of its fan-out
    /// lanes), in flight here from now on in `region`'s counts, and opens its record here.
    /// `region` is the one it was admitted for: a fanned-out bundle moved from another thread
    /// may leave through a fan-out lane, and its end must be counted where its admission was.
    fn queue(&mut self, slot: SlotHandle, lane: u8, region: u8, fan: bool) {
        let meta = self.arena.get_mut(slot).expect("held").meta;
        meta.region = region;
        meta.lane = lane;
        let mut r = Record {
            id: meta.bundle_id,
            admitted: meta.admitted_at,
            tenant: meta.tenant,
            tenant_epoch: self.tenancy.stats().epoch(meta.tenant),
            tx_count: meta.tx_count,
            ..Record::default()
        };
        meta.record = self.journals.ring(self.me).open(&mut r).unwrap_or(u64::MAX);
        let extra = if fan { meta.fan_extra } else { 0 };
        let fan_lanes = meta.fan_lanes;
        self.fifos[usize::from(lane)].push_back(slot);
        for &l in &fan_lanes[..usize::from(extra)] {
            self.fifos[usize::from(l)].push_back(slot);
        }
        self.stats.region(usize::from(region)).in_flight.inc();
    }

    /// This thread has no source of lane `r`'s egress group (a reload removed them, or the
    /// group is smaller than the thread count): the bundles waiting in lane `r` go, oldest
    /// first, to the thread that can send them soonest, copied into slots it lent (their
    /// admission time, tenant and attempts with them). One that finds no
    /// such thread with a slot to lend waits here and is tried again shortly; only its age
    /// can end it.
    fn move_waiting(&mut self, r: usize, now: Instant) {
        let Some(mut peers) = self.peers.take() else {
            return;
        };
        while let Some(&slot) = self.fifos[r].front() {
            let meta = self.arena.get_mut(slot).expect("queued slot").meta;
            if meta.copies > 1 {
                // A fanned-out bundle's copy: the others still go, so this one just ends.
                meta.copies -= 1;
                self.fifos[r].pop_front();
                continue;
            }
            let Some((peer, _)) = peers.best(r, now) else {
                break;
            };
            if !self.move_one(&mut peers, peer, (r, 0), r, now) {
                break;
            }
        }
        self.peers = Some(peers);
        if !self.fifos[r].is_empty() {
            self.wake_at(now.after(self.rate.from_ms(MOVE_RETRY_MS)));
        }
    }

    /// For lane `r`, which has sources here: the bundles waiting in it that this thread's pool
    /// would send past their max age (the region silent or without a token here, no pair up,
    /// or more queued ahead than its pairs send in time) go where they leave sooner and within
    /// it ([`Dispatcher::better_place`]): to the thread whose pool for the lane sends soonest,
    /// or, for a bundle from the rotating port, to another of its tenant's regions. What
    /// routing does for a new bundle, done for the ones that came before this pool fell
    /// behind. From the tail: the youngest are the late ones, and each moved brings the rest
    /// sooner, so the scan stops at the first that leaves in time here. Fanned-out copies stay
    /// (their other copies go anyway), and so do copies held after refusals (their hold, not a
    /// pair, says when they go).
    ///
    /// The scan stops too at the first late bundle with nowhere better to go (an older one
    /// alike has less time still), unless `look_past`: then it goes on, for the rotating
    /// bundles ahead of a pinned one. Returns whether some late bundle had nowhere better to
    /// go, and whether one of those came from the rotating port: after a look past that left
    /// some, the caller looks past again only [`MOVE_RETRY_MS`] on, so a lane of late pinned
    /// bundles is not read whole at every iteration. Where the best thread has no slot to
    /// lend, the lane is looked at again shortly; where no place would do better, at the next
    /// iteration (the loop wakes at least every sweep, and at a peer's news).
    // Out of line: it runs only for a lane still holding bundles after its dispatch; inlined,
    // it spread the dispatch loop's code over 28 more cache lines a bundle (request_path).
    #[inline(never)]
    fn move_late(&mut self, r: usize, look_past: bool, now: Instant) -> (bool, bool) {
        let Some(&tail) = self.fifos[r].back() else {
            return (false, false);
        };
        let start = self.lane_start(r, now);
        let leaves = |d: &Self, ahead: usize| start.map_or(NEVER, |at| d.paced_from(r, at, ahead));
        // The usual case, and the request path's: the last bundle leaves in time here.
        let meta = *self.arena.get(tail).expect("queued slot").meta;
        if leaves(self, self.fifos[r].len() - 1) <= self.late_after(meta.tenant, meta.admitted_at) {
            return (false, false);
        }
        let mut peers = self.peers.take();
        let (mut no_credit, mut stayed, mut rotating) = (false, false, false);
        // (tenant, rotating, late, here) of the last bundle found nowhere better to go: one
        // alike with less time and no later here has nowhere either (a move only makes the
        // places it goes to later).
        let mut nowhere: Option<(u16, bool, u64, u64)> = None;
        let mut j = self.fifos[r].len();
        while j > 0 {
            j -= 1;
            let slot = self.fifos[r][j];
            let meta = *self.arena.get(slot).expect("queued slot").meta;
            let late = self.late_after(meta.tenant, meta.admitted_at);
            let here = leaves(self, j);
            if here <= late {
                break;
            }
            if meta.copies > 1 || matches!(self.waiting(slot, r, now), Waiting::HeldUntil(_)) {
                continue;
            }
            // A fanned-out bundle's own exclusions (where its copies went, one delivered) say
            // nothing of another bundle: only a plain one's nowhere is kept for the rest.
            let plain = meta.fan_extra == 0 && !meta.fan_delivered;
            let known = nowhere.is_some_and(|(t, rotating, l, h)| {
                t == meta.tenant && rotating == meta.rotating && late <= l && here <= h
            });
            let place = if known {
                None
            } else {
                self.better_place(peers.as_mut(), r, &meta, late, here, now)
            };
            match place {
                Some((Some(peer), to)) => {
                    let p = peers
                        .as_mut()
                        .expect("another thread's place comes from the mesh");
                    if !self.move_one(p, peer, (r, j), to, now) {
                        no_credit = true;
                        break;
                    }
                }
                Some((None, to)) => self.move_lane(r, j, to, now),
                None => {
                    if plain {
                        nowhere = Some((meta.tenant, meta.rotating, late, here));
                    }
                    stayed = true;
                    // One already past where it could leave in time has no place to wait for.
                    rotating |= meta.rotating && late > now.0;
                    if !look_past {
                        break;
                    }
                }
            }
        }
        self.peers = peers;
        if no_credit {
            self.wake_at(now.after(self.rate.from_ms(MOVE_RETRY_MS)));
        }
        (stayed, rotating)
    }

    /// When lane `r`'s pool sends its next bundle, for [`Dispatcher::move_late`]: as
    /// [`Dispatcher::own_leaves`] starts, except that pairs in a call, and a region on trial
    /// with its one bundle out, count as about to be ready (an answer and an interval on), so
    /// a lane busy for a moment moves nothing; `None` when the region is silent or without a
    /// token here or no pair of the lane is up.
    fn lane_start(&mut self, r: usize, now: Instant) -> Option<u64> {
        let region = r / self.groups;
        if self.up.is_unauthenticated(region)
            || (self.up.is_silent(region) && !self.up.on_trial(region))
        {
            return None;
        }
        match self.up.next_ready_at(r) {
            Some(at) => Some(at.0.max(now.0)),
            None if self.up.limiter().lane_counts(LaneId(r as u8)).held > 0 => Some(now.0),
            None => None,
        }
    }

    /// Where the late bundle `meta`, waiting in lane `r`, would leave by `late` and sooner
    /// than `here`: the other thread whose pool for the lane sends soonest; else, for a bundle
    /// from the rotating port, another of its tenant's regions (as a reload left them), through
    /// this thread or another: the first in the tenant's order that is in time for the ordered
    /// strategy, the soonest for the others. Always the lane's egress group. The last copy of
    /// a fanned-out bundle moves only to a region none of its copies went to, and to no other
    /// region once another copy was delivered. `(None, lane)` is a lane of this thread's.
    fn better_place(
        &mut self,
        mut peers: Option<&mut Peers>,
        r: usize,
        meta: &BundleMeta,
        late: u64,
        here: u64,
        now: Instant,
    ) -> Option<(Option<usize>, usize)> {
        let in_time = |at: u64| at <= late && at < here;
        if let Some((peer, _)) = peers
            .as_mut()
            .and_then(|p| p.best(r, now))
            .filter(|&(_, at)| in_time(at))
        {
            return Some((Some(peer), r));
        }
        if !meta.rotating || meta.fan_delivered {
            // A copy left of a fanned-out bundle an engine took already stays in its region.
            return None;
        }
        // The regions a fanned-out bundle's copies went to: no second copy goes there.
        let mut went = 0u32;
        if meta.fan_extra > 0 {
            went = 1 << (usize::from(meta.lane) / self.groups);
            for &l in &meta.fan_lanes[..usize::from(meta.fan_extra)] {
                went |= 1 << (usize::from(l) / self.groups);
            }
        }
        let e = self.tenancy.entry(meta.tenant)?;
        let (mask, ordered) = (e.mask, e.strategy == Strategy::Ordered);
        let mut order = [0u8; REGIONS_MAX];
        let n = if ordered {
            let n = e.order.len().min(REGIONS_MAX);
            order[..n].copy_from_slice(&e.order[..n]);
            n
        } else {
            for (k, o) in order.iter_mut().enumerate().take(self.regions) {
                *o = k as u8;
            }
            self.regions
        };
        let (region, group) = (r / self.groups, r % self.groups);
        let mut best: Option<(u64, Option<usize>, usize)> = None;
        for &r2 in &order[..n] {
            let r2 = usize::from(r2);
            if r2 == region
                || r2 >= self.regions
                || self.retired[r2]
                || mask & (1 << r2) == 0
                || went & (1 << r2) != 0
            {
                continue;
            }
            let l2 = r2 * self.groups + group;
            let own = self.own_leaves(l2, now);
            if in_time(own) && best.is_none_or(|(b, ..)| own < b) {
                best = Some((own, None, l2));
            }
            if let Some((peer, at)) = peers.as_mut().and_then(|p| p.best(l2, now))
                && in_time(at)
                && best.is_none_or(|(b, ..)| at < b)
            {
                best = Some((at, Some(peer), l2));
            }
            if ordered && best.is_some() {
                break;
            }
        }
        best.map(|(_, peer, l)| (peer, l))
    }

    /// Moves the bundle waiting at `j` in lane `r` to the tail of this thread's lane `to`, of
    /// another region, as [`Dispatcher::move_one`] moves one to another thread: its slot, its
    /// hold and the tries of this copy go with it, as the bundle's one copy there (the last
    /// of a fanned-out bundle may wait in a fan-out lane); its counts stay with the region it
    /// was admitted for.
    fn move_lane(&mut self, r: usize, j: usize, to: usize, now: Instant) {
        let slot = self.fifos[r][j];
        self.take_queued(r, j);
        let meta = self.arena.get_mut(slot).expect("queued slot").meta;
        let tries = meta.attempts[meta.copy_in(r as u8)];
        // Where its copies went is forgotten now: it moves between regions no more.
        meta.rotating &= meta.fan_extra == 0;
        meta.fan_extra = 0;
        meta.attempts = [0; 1 + FAN_EXTRA_MAX];
        meta.attempts[0] = tries;
        meta.lane = to as u8;
        self.fifos[to].push_back(slot);
        self.stats.region(r / self.groups).rerouted.inc();
        if to < r {
            // The dispatch pass has been by that lane already: it runs again at once, and the
            // region counts as busy in this one.
            self.moved_into |= 1 << (to / self.groups);
            self.wake_at(now);
        }
    }

    /// Moves the bundle waiting at `j` in lane `r` to `peer`'s lane `to` (`r`, or a lane of
    /// another region for a bundle from the rotating port), copied into a slot it lent (its
    /// admission time, tenant and tries with it), and frees its slot here; false, and nothing
    /// moved, when `peer` has no slot to lend.
    fn move_one(
        &mut self,
        peers: &mut Peers,
        peer: usize,
        (r, j): (usize, usize),
        to: usize,
        now: Instant,
    ) -> bool {
        let Some(mut lent) = peers.take_credit(peer, now) else {
            return false;
        };
        let slot = self.fifos[r][j];
        let src = self.arena.get(slot).expect("queued slot");
        // The region its admission was counted in, not necessarily `r`'s: the copy left
        // may be in a fan-out lane.
        let region = usize::from(src.meta.region);
        // SAFETY: a slot lent to this thread and not handed back yet.
        let mut copy = unsafe { lent.slot_mut() };
        let tries = src.meta.attempts[src.meta.copy_in(r as u8)];
        copy.copy_from(&src);
        // The copy left is the bundle's one copy there, with the tries it had; one of a
        // fanned-out bundle (where its copies went is forgotten) stays in its region there.
        copy.meta.rotating &= copy.meta.fan_extra == 0;
        copy.meta.fan_extra = 0;
        copy.meta.attempts = [0; 1 + FAN_EXTRA_MAX];
        copy.meta.attempts[0] = tries;
        self.journals.ring(self.me).patch(src.meta.record, |rec| {
            rec.set_end(RecordEnd::Moved, now);
            rec.set_moved_to(peer as u8);
        });
        self.take_queued(r, j);
        peers.hand_off(peer, lent, to as u8, true);
        if to / self.groups != r / self.groups {
            self.stats.region(r / self.groups).rerouted.inc();
        }
        let counts = self.stats.region(region);
        counts.in_flight.set(counts.in_flight.get() - 1);
        self.stats.handoffs_out.inc();
        self.moved_out += 1;
        self.arena.release(slot).expect("a queued slot is held");
        true
    }

    /// Admits every bundle other threads handed this one, in this thread's own slots.
    fn receive_handoffs(&mut self, now: Instant) {
        let Some(mut peers) = self.peers.take() else {
            return;
        };
        peers.receive(|h| {
            self.stats.handoffs_in.inc();
            self.took_handoffs = true;
            let region = usize::from(h.lane) / self.groups;
            if std::mem::take(&mut self.drained[region]) {
                // Handed over by a thread that had not yet seen the reload that retired the
                // region: its pairs connect again for it (and drain again once it is sent).
                self.up.retire_region(region, false, now);
            }
            if h.moved {
                self.moved_in += 1;
                // Counted in the region it was admitted for, which its copied meta keeps.
                let admitted_for = self.arena.get(h.slot).expect("handed over").meta.region;
                self.queue(h.slot, h.lane, admitted_for, false);
            } else {
                self.enqueue(h.slot, h.lane);
            }
        });
        self.peers = Some(peers);
    }

    /// Ends this thread's silences that another thread heard end (a bundle answered there
    /// after they began), when it was told of any.
    fn hear_from_peers(&mut self, now: Instant) {
        let Some(peers) = self.peers.as_ref() else {
            return;
        };
        if !peers.mesh().take_news(peers.me()) {
            return;
        }
        // Only regions heard again since this thread last looked: an older time is news it
        // had (and a silence declared since is its own).
        for r in 0..self.regions {
            let heard = peers.mesh().heard_again_at(r);
            if heard.0 > self.heard_seen[r] {
                self.heard_seen[r] = heard.0;
                self.up.heard_elsewhere(r, heard, now);
            }
        }
    }

    /// Tells the other threads when this one could send for each lane, and of the regions
    /// heard again here after a silence; lends them slots up to their share.
    fn share(&mut self, now: Instant) {
        let Some(mut peers) = self.peers.take() else {
            return;
        };
        let (mut ended, at) = self.up.take_silences_ended();
        while ended != 0 {
            let r = ended.trailing_zeros() as usize;
            ended &= ended - 1;
            peers.heard_again(r, at[r]);
        }
        let mut changed = false;
        for r in 0..self.fifos.len() {
            let e = self.own_estimate(r);
            changed |= peers.publish(r, e);
        }
        if changed || std::mem::take(&mut self.took_handoffs) {
            peers.published();
        }
        peers.lend(&mut self.arena, now);
        self.peers = Some(peers);
    }

    // ---- bundle-status queries ----

    /// Opens a bot's status query for an engine (see [`super::statuses`]).
    pub fn ask_engine(&mut self, a: &Asked<'_>, now: Instant) -> Asking {
        match self.up.ask(a, now) {
            Ok(_) => Asking::Asked,
            Err(Full) => Asking::Full,
        }
    }

    /// A status query whose bot can be answered now: its connection, and the query
    /// ([`Dispatcher::query`]) to answer, then free ([`Dispatcher::free_query`]).
    pub fn poll_answered(&mut self) -> Option<(ConnRef, u16)> {
        let q = self.up.poll_query_done()?;
        Some((self.up.query(q).conn, q))
    }

    /// Status query `q`.
    pub fn query(&self, q: u16) -> &Query {
        self.up.query(q)
    }

    pub fn free_query(&mut self, q: u16) {
        self.up.free_query(q);
    }

    /// The tip accounts as a JSON array (see [`Upstream::tip_accounts_json`]).
    pub fn tip_accounts_json(&self) -> &[u8] {
        self.up.tip_accounts_json()
    }

    // ---- dispatching ----

    /// Sends every waiting bundle that has a ready pair; expires the ones too old.
    pub fn dispatch(&mut self, now: Instant) {
        self.wake = None;
        self.up.begin_dispatch();
        // Tokens first: a region that authenticates takes no call without one.
        self.up.run_auth(now);
        self.receive_handoffs(now);
        self.hear_from_peers(now);
        // Bundles have had every pair for a refresh period past the tips' due time.
        self.up.refresh_starved_tips(now);
        let mut busy = 0u32;
        let look_past = now.0 >= self.look_past_at;
        let (mut stayed, mut rotating) = (false, false);
        self.moved_into = 0;
        for lane in 0..self.fifos.len() {
            if !self.fifos[lane].is_empty() && self.up.group_listed(lane % self.groups) == 0 {
                // No source of the lane's group here (a reload removed them, or the group
                // has fewer sources than there are threads): another thread sends these.
                self.move_waiting(lane, now);
            }
            self.dispatch_lane(lane, now);
            if !self.fifos[lane].is_empty() && self.up.group_listed(lane % self.groups) != 0 {
                // What this pool could not send now, and would send too late.
                let (s, rot) = self.move_late(lane, look_past, now);
                (stayed, rotating) = (stayed | s, rotating | rot);
            }
            if !self.fifos[lane].is_empty() {
                busy |= 1 << (lane / self.groups);
            }
        }
        // A lane filled by a move after the pass went by it is busy all the same.
        busy |= self.moved_into;
        if look_past {
            self.rotating_left = rotating;
            if stayed {
                self.look_past_at = now.after(self.rate.from_ms(MOVE_RETRY_MS)).0;
            }
            if rotating {
                // A rotating-port bundle with nowhere to go yet: looked at again then.
                self.wake_at(Instant(self.look_past_at));
            }
        } else if stayed && (rotating || self.rotating_left) {
            // A rotating-port bundle may wait ahead of where a lane's scan stopped: the next
            // look past is due then, not at the next event.
            self.wake_at(Instant(self.look_past_at));
        }
        if self.any_retired {
            self.drain_retired(now);
        }
        // Bots' status queries take what pairs the bundles left.
        self.up.run_queries(now);
        self.up.refresh_tips(busy, now);
        if self.tenancy.table().routes_by_leader() {
            self.up.poll_leader(busy, now);
        }
        self.share(now);
    }

    fn dispatch_lane(&mut self, r: usize, now: Instant) {
        let region = r / self.groups;
        if self.up.is_silent(region) {
            // Nothing is sent to a silent region until its engine answers a probe; its waiting
            // bundles only expire (at the max age, counted).
            if r % self.groups == 0 {
                self.up.probe_silent(region, now);
            }
            self.expire_waiting(r, now);
            return;
        }
        if self.up.is_unauthenticated(region) {
            // Its bundles wait for a token (or expire at the max age, counted).
            self.expire_waiting(r, now);
            return;
        }
        // Copies held after refusals wait at the head (requeued there, the oldest) and are
        // passed over: the bundles behind them go meanwhile.
        let mut j = 0;
        while let Some(&slot) = self.fifos[r].get(j) {
            match self.waiting(slot, r, now) {
                Waiting::TooOld => {
                    self.take_queued(r, j);
                    self.end_copy(slot, EndKind::Expired, now);
                    continue;
                }
                Waiting::HeldUntil(due) => {
                    self.wake_at(due);
                    j += 1;
                    continue;
                }
                Waiting::Due => {}
            }
            let Acquire::Pair(pair) = self.up.acquire(r, now) else {
                break;
            };
            self.take_queued(r, j);
            let s = self.arena.get(slot).expect("queued slot");
            let send_by = s.meta.admitted_at.after(self.max_age_of(s.meta.tenant));
            if !self
                .up
                .start_bundle(pair, slot, s.encoded_frame(), s.meta.json, send_by, now)
            {
                // The connection could not take a call: back in its place, for another pair.
                self.fifos[r].insert(j, slot);
                continue;
            }
            let meta = self.arena.get_mut(slot).expect("held").meta;
            meta.attempts[meta.copy_in(r as u8)] += 1;
            let attempt = Attempt {
                region: region as u8,
                egress: self.up.egress_of(pair),
                sent: now,
                ..Attempt::default()
            };
            self.journals
                .ring(self.me)
                .patch(meta.record, |rec| rec.push_attempt(&attempt));
            if self.metrics.enabled() {
                let waited = now.since(meta.admitted_at);
                self.metrics.record_limiter_wait_ns(self.rate.to_ns(waited));
            }
            if self.up.is_silent(region) {
                // A region on trial after a silence: one bundle at a time.
                break;
            }
        }
        self.expire_waiting(r, now);
    }

    /// Whether the copy of `slot` waiting in `lane` may be sent at `now`: not past its max
    /// age, and not held after unprocessed refusals ([`RETRY_BACKOFF_MS`]).
    fn waiting(&self, slot: SlotHandle, lane: usize, now: Instant) -> Waiting {
        let meta = self.arena.get(slot).expect("queued slot").meta;
        if now.since(meta.admitted_at).0 > self.max_age_of(meta.tenant).0 {
            return Waiting::TooOld;
        }
        // A copy refused once goes again at once, whatever hold another copy set.
        if meta.held_ms != 0 && meta.attempts[meta.copy_in(lane as u8)] >= 2 {
            let due = meta
                .admitted_at
                .after(self.rate.from_ms(u64::from(meta.held_ms)));
            if due.0 > now.0 {
                return Waiting::HeldUntil(due);
            }
        }
        Waiting::Due
    }

    /// Takes the `j`th bundle waiting in lane `r` out of its FIFO (nearly always the head).
    fn take_queued(&mut self, r: usize, j: usize) {
        if j == 0 {
            self.fifos[r].pop_front();
        } else {
            self.fifos[r].remove(j);
        }
    }

    /// Holds the copy of `slot` in `lane`, just refused unprocessed, for its back-off: none
    /// after its first try, then [`RETRY_BACKOFF_MS`] doubling with each try.
    fn hold_after_refusal(&mut self, slot: SlotHandle, lane: usize, now: Instant) {
        let rate = self.rate;
        let meta = self.arena.get_mut(slot).expect("held").meta;
        let tries = meta.attempts[meta.copy_in(lane as u8)];
        if !(2..ATTEMPTS_MAX).contains(&tries) {
            return;
        }
        let back_off = RETRY_BACKOFF_MS << (tries - 2);
        let age_ms = rate.to_ns(now.since(meta.admitted_at)) / 1_000_000;
        let until = u16::try_from(age_ms + back_off).unwrap_or(u16::MAX);
        meta.held_ms = meta.held_ms.max(until);
    }

    fn too_old(&self, slot: SlotHandle, now: Instant) -> bool {
        let meta = self.arena.get(slot).expect("queued slot").meta;
        now.since(meta.admitted_at).0 > self.max_age_of(meta.tenant).0
    }

    /// How old a bundle of tenant slot `tenant` may get: its own limit, else the relay's.
    fn max_age_of(&self, tenant: u16) -> Ticks {
        self.tenancy.max_age(tenant).unwrap_or(self.max_age)
    }

    /// Ends the bundles at the head of lane `r`'s FIFO that are past the max age; the first
    /// one that is not sets when the dispatcher must look again.
    fn expire_waiting(&mut self, r: usize, now: Instant) {
        while let Some(&slot) = self.fifos[r].front() {
            if !self.too_old(slot, now) {
                let meta = self.arena.get(slot).expect("queued slot").meta;
                let age = self.max_age_of(meta.tenant);
                // A bundle behind this one with a shorter limit is judged when it reaches
                // the head, before any send: never sent stale, only held a little longer.
                self.wake_at(meta.admitted_at.after(Ticks(age.0 + 1)));
                break;
            }
            self.fifos[r].pop_front();
            self.end_copy(slot, EndKind::Expired, now);
        }
    }

    fn wake_at(&mut self, at: Instant) {
        self.wake = Some(self.wake.map_or(at, |w| if at.0 < w.0 { at } else { w }));
    }

    /// When the reactor must run the dispatcher again at the latest (bundles waiting for a
    /// pair or about to expire, connects due, probes), `None` if nothing is timed.
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.wake, self.up.next_deadline()) {
            (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    // ---- bundle ends ----

    /// Settles every bundle call the upstream reported ended since the last time.
    fn settle(&mut self, now: Instant) {
        while let Some(Ended {
            slot,
            fate,
            written,
            answer,
            region,
        }) = self.up.poll_ended()
        {
            let meta = *self.arena.get(slot).expect("held").meta;
            // The copy's own lane: a fanned-out bundle waits in one per region it goes to.
            let lane = usize::from(region) * self.groups + usize::from(meta.lane) % self.groups;
            self.journals.ring(self.me).patch(meta.record, |rec| {
                rec.running_in(region, |a| {
                    a.answered = Some(now);
                    a.verdict = answer.verdict;
                    a.grpc_code = answer.grpc_code;
                    a.retry_after_ms = answer.retry_after_ms;
                });
                rec.set_text(&answer.text);
            });
            match fate {
                Fate::Delivered => {
                    if self.metrics.enabled() && !meta.fan_delivered {
                        let written = written.unwrap_or(now);
                        let ns = self.rate.to_ns(written.since(meta.admitted_at));
                        self.metrics.record_delivery_ns(ns);
                        self.tenancy.stats().record_delivery_ns(meta.tenant, ns);
                    }
                    self.end_copy(slot, EndKind::Delivered, now)
                }
                Fate::Rejected => self.end_copy(slot, EndKind::Rejected, now),
                Fate::Failed => self.end_copy(slot, EndKind::Failed, now),
                Fate::Cooldown | Fate::Denied => {
                    // The pair was refused, not the bundle.
                    let meta = self.arena.get_mut(slot).expect("held").meta;
                    let copy = meta.copy_in(lane as u8);
                    meta.attempts[copy] = meta.attempts[copy].saturating_sub(1);
                    self.requeue(slot, lane, now)
                }
                Fate::Retry => {
                    self.hold_after_refusal(slot, lane, now);
                    self.requeue(slot, lane, now)
                }
            }
        }
    }

    /// One copy of a bundle ended as `kind`; the bundle ends with its last copy ([`last_copy`]).
    fn end_copy(&mut self, slot: SlotHandle, kind: EndKind, now: Instant) {
        if let Some(kind) = last_copy(&mut self.arena, slot, kind) {
            self.end(slot, kind, now);
        }
    }

    /// Ends a bundle: counts it in its region, closes its record and frees its slot.
    fn end(&mut self, slot: SlotHandle, kind: EndKind, now: Instant) {
        let ring = self.journals.ring(self.me);
        end_bundle(
            &mut self.arena,
            &self.stats,
            self.tenancy.stats(),
            slot,
            kind,
            |serial, end| ring.patch(serial, |rec| rec.set_end(end, now)),
        );
    }

    /// Puts a bundle's copy back at the head of its `lane`'s FIFO (it is the oldest there).
    fn requeue(&mut self, slot: SlotHandle, lane: usize, now: Instant) {
        let meta = *self.arena.get(slot).expect("held").meta;
        if now.since(meta.admitted_at).0 > self.max_age_of(meta.tenant).0 {
            self.end_copy(slot, EndKind::Expired, now);
        } else if meta.attempts[meta.copy_in(lane as u8)] >= ATTEMPTS_MAX {
            // Never processed, by the engines' own word, however often it was tried.
            self.end_copy(slot, EndKind::Rejected, now);
        } else {
            self.stats.retries.inc();
            self.fifos[lane].push_front(slot);
            let region = lane / self.groups;
            if std::mem::take(&mut self.drained[region]) {
                // A retired region's engine sent back a bundle it had in flight when the
                // region's pairs were drained: they connect again for it (and drain again once
                // it is sent), as for a handoff.
                self.up.retire_region(region, false, now);
            }
        }
    }

    // ---- the reactor's events, through the upstream ----

    /// A pair whose (re)connect is due, if the handshake budget allows one more.
    pub fn poll_connect(&mut self, now: Instant) -> Option<ConnectOrder> {
        self.up.poll_connect(now)
    }

    /// The pair's socket connected.
    pub fn connected(&mut self, pair: PairId, now: Instant) {
        self.up.connected(pair, now);
        self.settle(now);
    }

    /// The pair's socket could not even be set up to connect (`errno`): back off and retry.
    pub fn connect_failed(&mut self, pair: PairId, now: Instant, errno: i32) {
        self.up.connect_failed(pair, now, errno);
    }

    /// A pair whose socket the reactor should shut down and close.
    pub fn poll_close(&mut self) -> Option<PairId> {
        self.up.poll_close()
    }

    /// The reactor released the pair's socket; `errno` says why a connect failed.
    pub fn socket_released(&mut self, pair: PairId, now: Instant, errno: i32) {
        self.up.socket_released(pair, now, errno);
        self.settle(now);
    }

    /// A pair with bytes to send; the reactor calls [`Dispatcher::transmit`] for it.
    pub fn poll_dirty(&mut self) -> Option<PairId> {
        self.up.poll_dirty()
    }

    /// The bytes to send on `pair` now, pinned until [`Dispatcher::transmitted`].
    pub fn transmit(&mut self, pair: PairId, now: Instant) -> &[u8] {
        self.up.transmit(pair, now)
    }

    /// Whether the pinned transmit is all `pair` has to send until something arrives (not
    /// when TLS had no room for all of HTTP/2's bytes): when it is, the reactor need not wake
    /// for its send's completion.
    pub fn transmit_is_whole(&self, pair: PairId) -> bool {
        self.up.transmit_is_whole(pair)
    }

    /// `n` bytes of the pinned transmit went out.
    pub fn transmitted(&mut self, pair: PairId, n: usize, now: Instant) {
        self.up.transmitted(pair, n, now);
    }

    /// Bytes arrived on `pair`.
    pub fn received(&mut self, pair: PairId, bytes: &[u8], now: Instant) {
        self.up.received(pair, bytes, now);
        self.settle(now);
    }

    /// Files the timers of every pair whose deadlines may have moved this iteration (see
    /// [`Upstream::file_timers`]); before [`Dispatcher::next_deadline`] is read.
    pub fn file_timers(&mut self) {
        self.up.file_timers();
    }

    /// Runs the connection timers due by `now` (see [`Upstream::run_timers`]) and settles what
    /// they ended. One compare when nothing is due.
    pub fn run_timers(&mut self, now: Instant) {
        self.up.file_timers();
        self.up.run_timers(now);
        self.settle(now);
    }

    /// Every pair is filed in the timers at its earliest deadline (for tests; walks every
    /// pair).
    pub fn check_timers(&mut self) -> Result<(), String> {
        self.up.check_timers()
    }

    /// The coarse periodic pass: the pair-state gauges, and the timers due.
    pub fn sweep(&mut self, now: Instant) {
        self.up.publish_gauges();
        self.run_timers(now);
    }

    /// One line per region for `/debug/pairs`: pairs by state, waiting bundles, next send.
    pub fn render_pairs(&mut self, now: Instant, out: &mut String) {
        let waiting: Vec<usize> = self.fifos.iter().map(VecDeque::len).collect();
        self.up.render_pairs(&waiting, now, out);
    }

    /// This thread's log queue (the reactor writes its own lines there too).
    pub fn log(&self) -> &Arc<LogQueue> {
        self.up.log()
    }

    /// Why the pair's last connection failed, until one succeeds.
    pub fn last_error(&self, pair: PairId) -> Option<&TransportError> {
        self.up.last_error(pair)
    }

    /// Handshake slots in use: pairs connecting or handshaking (for tests of the state
    /// bookkeeping).
    pub fn handshakes_in_progress(&self) -> u32 {
        self.up.handshakes_in_progress()
    }

    // ---- shutdown and checks ----

    /// Bundles this thread holds, waiting or in flight (its arena's slots in use but those
    /// lent to other threads).
    pub fn in_flight(&self) -> u32 {
        self.arena.in_use() - self.peers.as_ref().map_or(0, Peers::lent_out)
    }

    /// Shutdown deadline passed: every bundle still held is counted failed and freed.
    pub fn abandon_all(&mut self, now: Instant) {
        self.receive_handoffs(now);
        for lane in 0..self.fifos.len() {
            while let Some(slot) = self.fifos[lane].pop_front() {
                self.end_copy(slot, EndKind::Failed, now);
            }
        }
        let (arena, stats, tenants) = (&mut self.arena, &self.stats, self.tenancy.stats());
        let ring = self.journals.ring(self.me);
        self.up.abandon_calls(now, |slot| {
            let Some(kind) = last_copy(arena, slot, EndKind::Failed) else {
                return;
            };
            end_bundle(arena, stats, tenants, slot, kind, |serial, end| {
                ring.patch(serial, |rec| rec.set_end(end, now))
            })
        });
    }

    /// Shutdown's drain ends at `until`: from now on a bundle is admitted only if a pool can
    /// send it before then (its region's soonest pair, behind the bundles already waiting).
    pub fn drain_until(&mut self, until: Instant) {
        self.drain_until = Some(until);
    }

    /// Shutdown has begun to end this thread: other threads stop routing bundles to it and
    /// taking its credits ([`Mesh::leave`](crate::mesh::Mesh::leave)).
    pub fn leave(&mut self) {
        if let Some(peers) = &self.peers {
            peers.leave();
        }
    }

    /// Shutdown, once this thread admits nothing more (its intake closed, everything it held
    /// ended): it has stopped for good. Until [`Dispatcher::closed_all`] says every thread
    /// has, it must still end what was handed to it before the others saw it leave, and its
    /// arena must stay (its lent slots may still be written).
    pub fn close(&mut self) {
        if let Some(peers) = &self.peers {
            peers.close();
        }
    }

    /// After [`Dispatcher::close`]: ends, as failed, every bundle other threads handed this one
    /// (counted admitted here first), and says whether every thread has closed, after which
    /// nothing more can come and no other thread writes into this one's arena.
    pub fn closed_all(&mut self, now: Instant) -> bool {
        // Read before the rings are emptied: a thread read as closed pushed its last before.
        let all = self.peers.as_ref().is_none_or(Peers::all_closed);
        self.abandon_all(now);
        all
    }

    /// This thread's loop failed (its ring, not its records): other threads stop routing to
    /// it, and everything it holds or was handed ends as failed and counted, as at a drain
    /// deadline, rather than wait forever; it has closed, and [`Dispatcher::closed_all`] ends
    /// what other threads handed it before they saw it leave.
    pub fn end_after_failure(&mut self, now: Instant) {
        self.leave();
        self.abandon_all(now);
        self.close();
    }

    /// A thread that failed leaves its arena allocated for the life of the process: other
    /// threads may still write into the slots it lent them.
    pub fn forget_arena(&mut self) {
        std::mem::forget(std::mem::replace(&mut self.arena, Arena::new(1)));
    }

    /// Leaks every pair's connection buffers: the reactor could not confirm the kernel is done
    /// reading and writing them (see the reactor's teardown).
    pub fn forget_connections(&mut self) {
        self.up.forget_connections();
    }

    /// Every pair whose connection is up, for a graceful close at shutdown.
    pub fn close_all(&mut self, now: Instant) {
        self.up.close_all(now);
    }

    /// admitted = delivered + rejected + expired + failed + in flight, with in flight the
    /// arena's own count of slots held, and each region's in-flight gauge adding up to it;
    /// bundles moved between threads ([`Dispatcher::move_waiting`], [`Dispatcher::move_late`])
    /// on the sides they left
    /// and joined (over all threads they cancel out).
    pub fn check_accounting(&self) -> bool {
        let t = self.stats.totals();
        t.admitted + self.moved_in
            == t.delivered + t.rejected + t.expired + t.failed + t.in_flight + self.moved_out
            && t.in_flight == u64::from(self.in_flight())
    }
}

/// One copy of the bundle in `slot` ended as `kind`: the bundle's own end when it was the last
/// (delivered if any copy was, else failed if any was lost after being sent, else `kind`),
/// `None` while other copies still wait or run.
fn last_copy(arena: &mut Arena, slot: SlotHandle, kind: EndKind) -> Option<EndKind> {
    let meta = arena.get_mut(slot).expect("held").meta;
    meta.fan_delivered |= kind == EndKind::Delivered;
    meta.fan_failed |= kind == EndKind::Failed;
    if meta.copies > 1 {
        meta.copies -= 1;
        return None;
    }
    Some(if meta.fan_delivered {
        EndKind::Delivered
    } else if meta.fan_failed {
        EndKind::Failed
    } else {
        kind
    })
}

/// Counts a bundle's end in its region, closes its record (`close(serial, end)`) and frees
/// its slot.
fn end_bundle(
    arena: &mut Arena,
    stats: &Stats,
    tenants: &TenantStats,
    slot: SlotHandle,
    kind: EndKind,
    close: impl FnOnce(u64, RecordEnd),
) {
    let meta = *arena.get(slot).expect("held").meta;
    let counts = stats.region(meta.region as usize);
    let (how, end) = match kind {
        EndKind::Delivered => {
            counts.delivered.inc();
            (TenantEnded::Delivered, RecordEnd::Delivered)
        }
        EndKind::Rejected => {
            counts.rejected.inc();
            (TenantEnded::Rejected, RecordEnd::Rejected)
        }
        EndKind::Expired => {
            counts.expired.inc();
            (TenantEnded::Expired, RecordEnd::Expired)
        }
        EndKind::Failed => {
            counts.failed.inc();
            (TenantEnded::Failed, RecordEnd::Failed)
        }
    };
    close(meta.record, end);
    tenants.ended(meta.tenant, how);
    tenants.release(meta.tenant);
    counts.in_flight.set(counts.in_flight.get() - 1);
    arena.release(slot).expect("a bundle ends once");
}
