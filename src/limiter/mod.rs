//! The egress limiter: when may each (egress address, region) pair send next, and which one
//! goes now. Sans-IO: every call takes `now`; the limiter never reads a clock.
//!
//! It is NOT the dispatcher: which bundle goes, retries and connections are `relay`'s; the
//! limiter only paces pairs and hands them out. Read it in this order: this file (the API, and
//! how a pair moves between places), `pair.rs` (the record), `region.rs` (a region's state),
//! `ring.rs` (the ready FIFO and the booking queue), `wheel.rs` (the timing wheel),
//! `invariants.rs` (what must always hold).
//!
//! # One record per pair, one place per pair
//!
//! Each pair has exactly one record, in two halves by who reads them: `State` (8 bytes: place,
//! ring sequence number, connection state, region), the only part `acquire` touches, and
//! `Pace` (16 bytes: the GCRA arrival time, next-allowed = arrival − burst tolerance, and the
//! cooldown deadline from the block engine's Retry-After), read when a slot is booked. A pair
//! is in exactly one place ([`Place`]): held (its send is in flight), its region's ready FIFO,
//! its region's booking queue, one slot of its region's timing wheel, or parked (connection
//! not up, nothing in flight). The place is a field of the record and every queue entry is
//! checked against it, so there is no second structure to disagree with;
//! [`Limiter::check_invariants`] walks everything and proves it.
//!
//! # Lanes
//!
//! Everything below that is "per region" is kept per lane: one region's pairs of one egress
//! group ([`LimiterConfig::groups`]: the shared addresses, or a group that tenants have to
//! themselves). With one group a lane is a region. A group's addresses are contiguous, so a
//! lane's pair records are too and the pair index stays `region × addresses + address`;
//! [`Limiter::acquire`] takes a lane and never hands out another group's pair, and a lane with
//! nothing ready says so on its own, whatever the region's other lanes hold. Rates are set per
//! region ([`Limiter::set_rate`] sets each of its lanes); [`Limiter::counts`] adds a region's
//! lanes up, [`Limiter::lane_counts`] reads one.
//!
//! # Hold while in flight, book from the answer
//!
//! Pacing is judged at the block engine, which stamps a request somewhere between our send and
//! its answer. [`Limiter::acquire`] pops the region's longest-ready pair and holds it in the
//! same step (nothing is checked and then taken later, seed 000's check-then-act failure);
//! [`Limiter::finish`] — the answer arrived, or the send failed — books the pair's next slot
//! from that instant and puts it back into rotation. Two sends of one pair are therefore at
//! least one interval apart at the engine whatever the scheduling jitter on either side. A
//! cooldown or a connection change on a held pair is recorded and applied at `finish`.
//!
//! # The queues
//!
//! Time is raw clock ticks (TSC). Per region:
//!
//! - The ready FIFO and the booking queue are rings of `(due, pair, seq)` entries, contiguous
//!   in memory, removed from lazily (`ring.rs`).
//! - Rate bookings go to the booking queue: a region has one interval and `now` only moves
//!   forward, so a booking made later is due later, and bookings queue in due order in O(1)
//!   with their exact tick.
//! - Cooldowns, and bookings that would break the queue's order (burst), go to a hierarchical
//!   timing wheel (`wheel.rs`): [`LEVELS`] levels of [`SLOTS_PER_LEVEL`] slots, a unit the
//!   largest power of two of ticks not above the configured slot width (default
//!   [`SLOT_US_MAX_DEFAULT`] µs); a pair is never handed out early, and late by under one unit.
//! - The region caches the earliest tick anything of its booking queue or wheel falls due
//!   (`wake_tick`), so advancing a region with nothing due is one compare, and the earliest
//!   tick anything of its wheel does (`wheel_wake_tick`).
//!
//! Fairness: pairs enter the ready FIFO in the order they became ready (booking ticks and wheel
//! slots merged in time order) and leave it from the head, so load rotates over the whole pool.
//! Everything in the ready FIFO became ready before any booking falls due (an entry joins the
//! FIFO only once every booking due by its tick has), so when the FIFO is empty the booking
//! queue's head is the longest-ready pair: `acquire` takes a due booking straight from the
//! queue without moving it through the FIFO, and only does wheel work once `now` reaches
//! `wheel_wake_tick`. Its common case is one region line, one ring entry and one 8-byte
//! `State`, inlined; everything else (a stale head, nothing due, the wheel) is out of line. A
//! booking that fell due but was not taken yet counts as booked until the next
//! [`Limiter::advance`], which the reactor runs once per loop iteration.
//!
//! # Memory
//!
//! Everything is allocated in [`Limiter::new`] from the pair count: per pair its record (both
//! halves), its wheel link and four ring entries (two rings per region, each twice the
//! region's pairs: [`PAIR_RECORD_BYTES`] in all), per region its wheel's list heads and its
//! `Region` state. `acquire`, `finish`, `cooldown`, `advance` and `set_connection` never
//! allocate (tests/alloc/limiter.rs counts).
//!
//! # Measured cost
//!
//! Median time per call (criterion, 95 % interval of the median in brackets), 4,096
//! addresses × 8 regions, beside seed 000's design (one mutex + indexed min-heap per region,
//! given the same hold-until-answered semantics the baseline relay gives it) in the same run,
//! single-threaded. The relay's pattern: 64 sends in flight, each pair picked by `acquire` and
//! answered (`finish`) 64 picks later, at 99 % of the pool's capacity. `acquire` times batches
//! of 64 picks with the TSC (the answers, and the caller's record of its sends in flight, run
//! untimed between batches); `acquire + finish` times every call, one send's whole limiter
//! cost. Measured on the shared 2-core development VM (AMD EPYC, 2.45 GHz) at a load average
//! of 5 to 5.5 (other engineers' builds running), so absolute figures are inflated and noisy,
//! the seed's most (its heap walk misses the caches the other builds share); the ratios within
//! a row are the comparison.
//!
//! | operation | this limiter | seed mutex + heap | ratio |
//! |---|---|---|---|
//! | `acquire` at 99 % of capacity | 8.9 ns [8.1, 9.7] | 174.6 ns [151.1, 214.8] | 19.7× faster |
//! | `acquire` + `finish` (one send) | 36.2 ns [34.1, 38.4] | 71.8 ns [69.7, 74.3] | 2.0× faster |
//! | `cooldown` 30 s, random pair | 40.5 ns [39.2, 41.8] | 286.9 ns [190.6, 444.7] | 7.1× faster |
//! | `acquire` with nothing ready | 10.4 ns [10.1, 10.6] | 16.2 ns [12.6, 20.9] | 1.56× faster |
//!
//! `acquire`'s common case reads the region's first cache line (`wheel_wake_tick`, ring
//! heads, counts), the booking queue's head entry (sequential) and the picked pair's 8-byte
//! `State`, and writes the place, the ring head and two counts; three bounds checks remain.
//! The whole send (`acquire + finish`) costs more: `finish` books from the answer (reads both
//! halves of the record, appends to the booking queue), about what the seed's heap fix costs
//! when the new key is the largest. `acquire` with nothing ready is level with the seed within
//! this machine's noise: one out-of-line call, two ring lengths and the wheel's cached soonest
//! against an uncontended lock and a heap head.
//!
//! Command: `cargo bench --bench limiter -- --warm-up-time 1 --measurement-time 3`; one group
//! alone with a filter, e.g. `'^acquire/'`.

mod invariants;
pub mod ledger;
mod pair;
mod region;
mod ring;
pub mod timers;
mod wheel;

pub use pair::{ConnState, PairId, Place};
pub use region::{LaneId, RegionCounts, RegionId, RegionRate};
pub use wheel::{LEVELS, LISTS_PER_REGION, SLOTS_PER_LEVEL};

use crate::clock::{Instant, TickRate, Ticks};
use pair::{
    FILED, FILED_BOOKED, FILED_COOLING, FILED_DEFERRED, HELD, NIL, PARKED, Pace, QUEUED, READY,
    State, UNTIL_DEFERRED, WHEEL,
};
use region::Region;
use ring::{BOOKED_RING, Entry, READY_RING, RING_ENTRIES_PER_PAIR, Ring, Rings, live};
use wheel::{Link, List, Wheels};

/// Widest wheel slot by default: the most a pair may be handed out late, against a 1 s interval
/// (0.005 %) and a loop iteration of a few microseconds.
pub const SLOT_US_MAX_DEFAULT: u64 = 50;
/// Regions one limiter serves: Jito's 8 mainnet regions, 3 testnet ones and the geo-routed
/// host fit with room to spare; the region id is a `u8`.
pub const REGIONS_MAX: usize = 16;
/// Lanes one limiter serves: a lane is a region's pairs of one egress group (the shared
/// addresses, or one group's), paced and handed out on their own; a pair's lane is a `u8`.
pub const LANES_MAX: usize = 256;
/// Largest pair count: pair indexes are `u32`, `u32::MAX` marks "no pair", and a ring of twice
/// a region's pairs must index in `u32`.
pub const PAIRS_MAX: usize = (u32::MAX / 2 - 1) as usize;

/// How many bookings ahead of the queue's head a pair record is prefetched: at one booking
/// falling due per `acquire`, several calls' worth of lead time to hide a cache miss.
const PREFETCH_AHEAD: u32 = 8;

/// Bytes per pair across every per-pair array (for the budget): its pacing record, its wheel
/// link and its share of the two rings of its region.
pub const PAIR_RECORD_BYTES: usize = std::mem::size_of::<State>()
    + std::mem::size_of::<Pace>()
    + std::mem::size_of::<Link>()
    + RING_ENTRIES_PER_PAIR * std::mem::size_of::<Entry>();
/// Bytes of one wheel-slot list head (for the budget).
pub const LIST_HEAD_BYTES: usize = std::mem::size_of::<List>();
/// Bytes of one region's state (for the budget).
pub const REGION_BYTES: usize = std::mem::size_of::<Region>();

/// Everything the limiter is sized from.
#[derive(Clone, Debug)]
pub struct LimiterConfig {
    /// Egress addresses this limiter owns; each has one pair per region.
    pub addresses: u32,
    /// One entry per region, indexed by [`RegionId`].
    pub regions: Vec<RegionRate>,
    /// How many addresses each egress group has, in address order (group 0 the first ones):
    /// each region's pairs of one group are a lane of their own. Empty: one group of all.
    pub groups: Vec<u32>,
    /// The slot width is the largest power of two of ticks not above this.
    pub slot_us_max: u64,
    /// The clock's rate, to turn `slot_us_max` into ticks.
    pub tick_rate: TickRate,
}

impl LimiterConfig {
    /// `addresses × region_count` pairs, every region at Jito's default rate, default slot width.
    pub fn uniform(tick_rate: TickRate, addresses: u32, region_count: usize) -> LimiterConfig {
        LimiterConfig {
            addresses,
            regions: vec![
                RegionRate::from_ms(tick_rate, crate::jito::INTERVAL_MS_DEFAULT, 1);
                region_count
            ],
            groups: Vec::new(),
            slot_us_max: SLOT_US_MAX_DEFAULT,
            tick_rate,
        }
    }

    pub fn pair_count(&self) -> usize {
        self.addresses as usize * self.regions.len()
    }
}

/// What [`Limiter::acquire`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// This pair may send now; it is held until [`Limiter::finish`].
    Pair(PairId),
    /// No pair is ready; the first one will be at this instant (the exact tick at which the
    /// wheel hands it out).
    WaitUntil(Instant),
    /// No pair of the region is in rotation: none has its connection up, or every one that has
    /// is held. Only a [`Limiter::finish`] or a [`Limiter::set_connection`] changes that.
    NoPairUp,
}

/// A pair's record, read-only, for tests and the admin view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairView {
    pub region: RegionId,
    pub address: u32,
    pub conn: ConnState,
    pub place: Place,
    /// 1 while held, else 0.
    pub in_flight: u32,
    /// Earliest send the rate allows (burst included).
    pub next_allowed: Instant,
    /// Its theoretical arrival time (GCRA): `next_allowed` plus the burst's tolerance, but
    /// not floored at it (0: rested). What another process must count of its sends.
    pub tat: Instant,
    /// End of the latest cooldown asked for (zero if none yet).
    pub cooldown_until: Instant,
}

/// The limiter for the pairs one reactor thread owns. See the module docs.
pub struct Limiter {
    state: Box<[State]>,
    pace: Box<[Pace]>,
    /// Two rings per lane (ready, booking).
    rings: Rings,
    /// Every lane's wheel lists and every pair's wheel link.
    wheels: Wheels,
    /// Per lane (`region × groups + group`), its state.
    lanes: Box<[Region]>,
    region_count: u32,
    addresses: u32,
    /// Egress groups; each region has one lane per group.
    groups: u32,
    /// Group `g`'s addresses are `group_start[g]..group_start[g + 1]`.
    group_start: Box<[u32]>,
}

/// Hints the CPU to fetch `p`'s cache line; a pure hint that never faults.
#[inline(always)]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints the cache; it reads nothing and cannot fault, and the
    // pointer comes from a live reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            p as *const T as *const i8,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl Limiter {
    /// Allocates every record, ring and list for `config.pair_count()` pairs. All pairs start
    /// `Down` with a full burst available; bring them up with [`Limiter::set_connection`].
    pub fn new(config: &LimiterConfig, now: Instant) -> Limiter {
        let region_count = config.regions.len();
        assert!(
            (1..=REGIONS_MAX).contains(&region_count),
            "limiter needs 1 to {REGIONS_MAX} regions, got {region_count}"
        );
        let pair_count = config.pair_count();
        assert!(pair_count <= PAIRS_MAX, "too many pairs: {pair_count}");
        let sizes = if config.groups.is_empty() {
            vec![config.addresses]
        } else {
            config.groups.clone()
        };
        assert_eq!(
            sizes.iter().map(|&n| u64::from(n)).sum::<u64>(),
            u64::from(config.addresses),
            "egress groups must add up to the addresses"
        );
        let groups = sizes.len();
        let lane_count = region_count * groups;
        assert!(
            lane_count <= LANES_MAX,
            "{region_count} regions × {groups} egress groups exceed {LANES_MAX} lanes"
        );
        let mut group_start = Vec::with_capacity(groups + 1);
        group_start.push(0u32);
        for &n in &sizes {
            group_start.push(group_start.last().copied().unwrap_or(0) + n);
        }
        let lane_pairs: Vec<u32> = (0..lane_count).map(|l| sizes[l % groups]).collect();
        let slot_ticks_max = config.tick_rate.from_us(config.slot_us_max).0.max(1);
        let shift = 63 - slot_ticks_max.leading_zeros();
        let wheels = Wheels::new(pair_count, lane_count, shift);
        let rings = Rings::new(&lane_pairs);
        let elapsed_unit = wheels.unit_of(now.0);
        let lanes: Box<[Region]> = Rings::layout(&lane_pairs)
            .enumerate()
            .map(|(l, at)| {
                let rate = &config.regions[l / groups];
                Region::new(rate, lane_pairs[l], at, elapsed_unit)
            })
            .collect();
        let addresses = config.addresses.max(1) as usize;
        let state: Box<[State]> = (0..pair_count)
            .map(|i| {
                let (r, a) = (i / addresses, (i % addresses) as u32);
                let g = group_start[1..]
                    .iter()
                    .position(|&end| a < end)
                    .unwrap_or(0);
                State::new((r * groups + g) as u8)
            })
            .collect();
        Limiter {
            state,
            pace: vec![Pace::RESTED; pair_count].into_boxed_slice(),
            rings,
            wheels,
            lanes,
            region_count: region_count as u32,
            addresses: config.addresses,
            groups: groups as u32,
            group_start: group_start.into_boxed_slice(),
        }
    }

    /// Bytes this limiter holds (the budget's limiter terms must add up to this).
    pub fn allocated_bytes(&self) -> usize {
        self.state.len() * std::mem::size_of::<State>()
            + self.pace.len() * std::mem::size_of::<Pace>()
            + self.rings.allocated_bytes()
            + self.wheels.allocated_bytes()
            + self.lanes.len() * REGION_BYTES
    }

    pub fn pair_count(&self) -> usize {
        self.pace.len()
    }

    pub fn region_count(&self) -> usize {
        self.region_count as usize
    }

    /// Egress groups: each region has a lane per group.
    pub fn group_count(&self) -> usize {
        self.groups as usize
    }

    /// Lanes: regions × groups.
    pub fn lane_count(&self) -> usize {
        self.lanes.len()
    }

    /// The lane of `region`'s pairs in egress group `group`.
    #[inline]
    pub fn lane(&self, region: RegionId, group: u8) -> LaneId {
        debug_assert!((region.0 as u32) < self.region_count);
        debug_assert!(u32::from(group) < self.groups);
        LaneId((u32::from(region.0) * self.groups + u32::from(group)) as u8)
    }

    #[inline]
    pub fn lane_of(&self, pair: PairId) -> LaneId {
        LaneId(self.state[pair.0 as usize].lane)
    }

    /// The egress group of `pair`'s address.
    #[inline]
    pub fn group_of(&self, pair: PairId) -> u8 {
        (u32::from(self.state[pair.0 as usize].lane) % self.groups) as u8
    }

    /// Group `group`'s addresses.
    pub fn group_addresses(&self, group: u8) -> std::ops::Range<u32> {
        let g = group as usize;
        self.group_start[g]..self.group_start[g + 1]
    }

    /// The pair of `address` and `region`.
    #[inline]
    pub fn pair(&self, address: u32, region: RegionId) -> PairId {
        debug_assert!((region.0 as u32) < self.region_count);
        debug_assert!(address < self.addresses);
        PairId(region.0 as u32 * self.addresses + address)
    }

    #[inline]
    pub fn address_of(&self, pair: PairId) -> u32 {
        pair.0 % self.addresses
    }

    #[inline]
    pub fn region_of(&self, pair: PairId) -> RegionId {
        RegionId((u32::from(self.state[pair.0 as usize].lane) / self.groups) as u8)
    }

    /// Region `region`'s pacing interval and burst tolerance (`(burst − 1) × interval`).
    pub fn pace(&self, region: RegionId) -> (Ticks, Ticks) {
        let r = &self.lanes[self.lane(region, 0).0 as usize];
        (Ticks(r.interval_ticks), Ticks(r.tolerance_ticks))
    }

    /// Width of a wheel slot in ticks: the most a pair is ever handed out late.
    pub fn slot_ticks(&self) -> Ticks {
        Ticks(1 << self.wheels.shift())
    }

    // ---- picking ----

    /// Takes the lane's longest-ready pair and holds it until [`Limiter::finish`], or says
    /// exactly when the first pair will be ready. A caller that skipped [`Limiter::advance`]
    /// still never waits on a pair that is due: the wheel is advanced once `now` reaches its
    /// first occupied slot, and a booking that has fallen due is taken straight from the
    /// booking queue when the ready FIFO is empty (everything in the FIFO became ready before
    /// any booking falls due, so the FIFO's head is always the longest-ready pair). Due
    /// bookings not yet taken count as booked until the next [`Limiter::advance`].
    #[inline]
    pub fn acquire(&mut self, lane: LaneId, now: Instant) -> Acquire {
        let r = lane.0 as usize;
        if now.0 < self.lanes[r].wheel_wake_tick
            && let Some(i) = self.pop_head(r, now.0)
        {
            return Acquire::Pair(PairId(i));
        }
        self.acquire_slow(r, now.0)
    }

    /// The common pick, kept small enough to inline without spilling: the head of the ready
    /// FIFO, else the head of the booking queue if it is due, when that head is live. Anything
    /// else (a stale head, nothing due, wheel work) is `acquire_slow`'s.
    #[inline(always)]
    fn pop_head(&mut self, r: usize, now: u64) -> Option<u32> {
        if self.lanes[r].rings[READY_RING].len != 0 {
            // Everything in the ready FIFO may go.
            self.pop_from::<READY_RING>(r, u64::MAX)
        } else {
            self.pop_from::<BOOKED_RING>(r, now)
        }
    }

    /// Pops and holds the head of ring `RING` of lane `r` if it is live and due by `due_by`.
    #[inline(always)]
    fn pop_from<const RING: usize>(&mut self, r: usize, due_by: u64) -> Option<u32> {
        let reg = &self.lanes[r];
        let cap = reg.cap;
        let Ring { head, len } = reg.rings[RING];
        if len == 0 {
            return None;
        }
        let e = *self
            .rings
            .get(reg.base + RING * cap as usize + head as usize)?;
        if e.due_tick > due_by {
            return None;
        }
        let s = self.state.get_mut(e.pair as usize)?;
        let place = if RING == READY_RING { READY } else { QUEUED };
        if s.seq != e.seq || s.place != place {
            return None;
        }
        s.place = HELD;
        let reg = &mut self.lanes[r];
        reg.rings[RING] = Ring {
            head: if head + 1 == cap { 0 } else { head + 1 },
            len: len - 1,
        };
        if RING == READY_RING {
            reg.counts.ready -= 1;
        } else {
            reg.counts.booked -= 1;
        }
        reg.counts.held += 1;
        Some(e.pair)
    }

    /// `acquire` past its common case: advances the region if the wheel has something due,
    /// drops stale entries, and says when the first pair will be ready if none is.
    #[inline(never)]
    fn acquire_slow(&mut self, r: usize, now: u64) -> Acquire {
        if now >= self.lanes[r].wheel_wake_tick {
            self.advance_slow(r, now);
        }
        match self.pop_due(r, now) {
            Some(i) => Acquire::Pair(PairId(i)),
            None => match self.first_due(r) {
                Some(t) => Acquire::WaitUntil(Instant(t)),
                None => Acquire::NoPairUp,
            },
        }
    }

    /// Pops and holds the longest-ready pair of region `r`: the ready FIFO's first live entry,
    /// else the booking queue's if it is due by `now`. Stale entries met on the way are dropped.
    fn pop_due(&mut self, r: usize, now: u64) -> Option<u32> {
        if self.front(r, READY_RING).is_none() {
            self.front(r, BOOKED_RING)?;
        }
        self.pop_head(r, now)
    }

    // ---- answers, cooldowns, connections ----

    /// The send on held `pair` has ended (answered or failed) at `now`: its next slot is booked
    /// from `now` (one interval, burst allowing, and not before its cooldown) and it rejoins
    /// rotation if its connection is up, else it is parked.
    #[inline]
    pub fn finish(&mut self, pair: PairId, now: Instant) {
        let i = pair.0 as usize;
        let s = &mut self.state[i];
        assert!(
            s.place == HELD,
            "finish without a send in flight on {pair:?}"
        );
        s.place = PARKED;
        let r = s.lane as usize;
        let up = s.conn == ConnState::Up;
        let reg = &mut self.lanes[r];
        reg.counts.held -= 1;
        let p = &mut self.pace[i];
        p.book(now.0, reg.interval_ticks);
        if !up {
            return;
        }
        let eligible = p.eligible_tick(reg.tolerance_ticks);
        self.schedule(i as u32, eligible, now.0);
    }

    /// Held `pair` did not send after all and may not before `until` (another process sent on
    /// it): it is filed again for then, its own booking untouched, as if the engine had asked
    /// for a cooldown until `until`.
    pub fn defer(&mut self, pair: PairId, until: Instant, now: Instant) {
        let i = pair.0 as usize;
        assert!(
            self.state[i].place == HELD,
            "defer without the pair held: {pair:?}"
        );
        let p = &mut self.pace[i];
        let s = &mut self.state[i];
        if until.0 > p.cooldown_until_tick {
            p.cooldown_until_tick = until.0;
            s.wait |= UNTIL_DEFERRED;
        }
        s.place = PARKED;
        let r = s.lane as usize;
        let up = s.conn == ConnState::Up;
        self.lanes[r].counts.held -= 1;
        if !up {
            return;
        }
        let eligible = self.pace[i].eligible_tick(self.lanes[r].tolerance_ticks);
        self.schedule(i as u32, eligible, now.0);
    }

    /// The block engine asked `pair` to wait `retry_after` from `now`. The pair sends no earlier
    /// than `now + retry_after`; a later booking or cooldown already in place is kept. On a held
    /// pair it is recorded and applied at [`Limiter::finish`].
    pub fn cooldown(&mut self, pair: PairId, retry_after: Ticks, now: Instant) {
        let i = pair.0 as usize;
        let until = now.0.saturating_add(retry_after.0);
        let p = &mut self.pace[i];
        // A zero Retry-After asks for nothing: the pair may send now, as its booking says.
        if retry_after.0 == 0 || until <= p.cooldown_until_tick {
            return;
        }
        let r = self.state[i].lane as usize;
        let before = p.eligible_tick(self.lanes[r].tolerance_ticks);
        p.cooldown_until_tick = until;
        // The engine's own now: what holds the pair is no longer another process's send.
        self.state[i].wait &= !UNTIL_DEFERRED;
        let s = self.state[i];
        if s.conn != ConnState::Up || s.place == HELD {
            return;
        }
        let place = s.place;
        let eligible = before.max(until);
        // Nothing moves when the pair stays where it is: still ready, or still due as filed.
        if (place == READY && eligible <= now.0) || (place != READY && eligible == before) {
            return;
        }
        self.remove(i as u32);
        self.schedule(i as u32, eligible, now.0);
    }

    /// The region's pairs are paced at `rate` from now on (a reload). Each pair's sends keep
    /// counting, at the new interval: the intervals still booked ahead of now (a spent burst
    /// books several) count as as many new ones from now, or the last send's interval is the
    /// new one: the later reading for a longer interval, the sooner for a shorter
    /// ([`Pace::reprice`]). So a longer interval holds a
    /// pair that booked under the shorter one, a spent burst included (never sooner than the
    /// old rule allowed; what is still booked counts at the new length, what has passed at the
    /// old), and a shorter one frees it sooner. A pair with nothing booked ahead waits the new
    /// interval from its last send, and one whose call is in flight books the new interval
    /// from that call's answer. Cooldowns stand as asked. Every
    /// pair in rotation is filed again, so one ready under the old rate but not the new one
    /// waits. O(pairs of the region); not for the request path.
    pub fn set_rate(&mut self, region: RegionId, rate: RegionRate, now: Instant) {
        assert!(rate.burst >= 1, "burst must be at least 1");
        assert!(rate.interval.0 > 0, "interval must be positive");
        let lanes =
            self.lane(region, 0).0 as usize..self.lane(region, 0).0 as usize + self.groups as usize;
        let old = self.lanes[lanes.start].interval_ticks;
        let new = rate.interval.0;
        let tolerance = new.saturating_mul(rate.burst as u64 - 1);
        if old == new && self.lanes[lanes.start].tolerance_ticks == tolerance {
            return;
        }
        for lane in &mut self.lanes[lanes] {
            lane.interval_ticks = new;
            lane.tolerance_ticks = tolerance;
        }
        let first = u32::from(region.0) * self.addresses;
        for i in first..first + self.addresses {
            let held = self.state[i as usize].place == HELD;
            self.pace[i as usize].reprice(old, new, now.0, held);
            let s = self.state[i as usize];
            if s.conn != ConnState::Up || s.place == HELD {
                continue;
            }
            self.remove(i);
            let eligible = self.pace[i as usize].eligible_tick(tolerance);
            self.schedule(i, eligible, now.0);
        }
    }

    /// Moves `pair` into rotation (`Up`) or out of it (any other state). Its pacing record is
    /// kept: a pair that comes back up still honours its booking and cooldown. A held pair only
    /// records the state; [`Limiter::finish`] parks it if it is not up by then.
    pub fn set_connection(&mut self, pair: PairId, state: ConnState, now: Instant) {
        let i = pair.0 as usize;
        let old = self.state[i].conn;
        if old == state {
            return;
        }
        let r = self.state[i].lane as usize;
        let counts = &mut self.lanes[r].counts;
        match old {
            ConnState::Down => counts.down -= 1,
            ConnState::Connecting => counts.connecting -= 1,
            ConnState::Draining => counts.draining -= 1,
            ConnState::Up => {}
        }
        match state {
            ConnState::Down => counts.down += 1,
            ConnState::Connecting => counts.connecting += 1,
            ConnState::Draining => counts.draining += 1,
            ConnState::Up => {}
        }
        self.state[i].conn = state;
        if self.state[i].place == HELD {
            return;
        }
        if old == ConnState::Up {
            self.remove(i as u32);
        }
        if state == ConnState::Up {
            let eligible = self.pace[i].eligible_tick(self.lanes[r].tolerance_ticks);
            self.schedule(i as u32, eligible, now.0);
        }
    }

    // ---- time and views ----

    /// Moves every pair that is due at `now` into its lane's ready FIFO. The reactor calls it
    /// once per loop iteration. Returns how many pairs became ready.
    pub fn advance(&mut self, now: Instant) -> u32 {
        let mut moved = 0;
        for r in 0..self.lanes.len() {
            if now.0 >= self.lanes[r].wake_tick {
                moved += self.advance_slow(r, now.0);
            }
        }
        moved
    }

    /// When `lane` can send next: the tick its longest-ready pair became ready (in the past),
    /// or when the first pair not yet ready will be. `None` if no pair of it is in rotation.
    pub fn next_ready_at(&mut self, lane: LaneId) -> Option<Instant> {
        let r = lane.0 as usize;
        if let Some(e) = self.front(r, READY_RING) {
            return Some(Instant(e.due_tick));
        }
        self.first_due(r).map(Instant)
    }

    /// The earliest instant a pair not yet ready becomes ready, in any lane: the reactor's
    /// sleep timeout. Call it after [`Limiter::advance`]; pairs already ready are the
    /// dispatcher's business, not a timer's.
    pub fn next_wakeup(&mut self) -> Option<Instant> {
        let mut soonest = None::<u64>;
        for r in 0..self.lanes.len() {
            if let Some(t) = self.first_due(r) {
                soonest = Some(soonest.map_or(t, |s| s.min(t)));
            }
        }
        soonest.map(Instant)
    }

    /// The region's pairs by place and connection state. A booking that has fallen due counts
    /// as booked until the next [`Limiter::advance`] (or until `acquire` takes it).
    pub fn counts(&self, region: RegionId) -> RegionCounts {
        let first = self.lane(region, 0).0 as usize;
        let mut c = RegionCounts::default();
        for lane in &self.lanes[first..first + self.groups as usize] {
            c += lane.counts();
        }
        c
    }

    /// [`Limiter::counts`] of one lane.
    #[inline]
    pub fn lane_counts(&self, lane: LaneId) -> RegionCounts {
        self.lanes[lane.0 as usize].counts()
    }

    /// One pair's record. Like [`Limiter::counts`], a booking that has fallen due reads
    /// `Booked` until the next [`Limiter::advance`].
    pub fn view(&self, pair: PairId) -> PairView {
        let s = &self.state[pair.0 as usize];
        let p = &self.pace[pair.0 as usize];
        let tolerance = self.lanes[s.lane as usize].tolerance_ticks;
        PairView {
            region: self.region_of(pair),
            address: self.address_of(pair),
            conn: s.conn,
            place: s.place(),
            in_flight: (s.place == HELD) as u32,
            next_allowed: Instant(p.next_allowed_tick(tolerance)),
            tat: Instant(p.tat_tick),
            cooldown_until: Instant(p.cooldown_until_tick),
        }
    }

    /// Walks every ring, list and record and panics on any inconsistency (the list is in
    /// `invariants.rs`). O(pairs + lists + ring entries); for tests and debugging.
    pub fn check_invariants(&self) {
        invariants::check(
            &self.state,
            &self.pace,
            &self.rings,
            &self.wheels,
            &self.lanes,
        );
    }

    // ---- moving pairs between places ----

    /// The first live entry of ring `ring` of lane `r` (dropping stale ones ahead of it).
    #[inline]
    fn front(&mut self, r: usize, ring: usize) -> Option<Entry> {
        let reg = &mut self.lanes[r];
        let base = Rings::base(reg.base, reg.cap, ring);
        self.rings
            .front(base, reg.cap, &mut reg.rings[ring], &self.state, ring)
    }

    #[inline]
    fn push(&mut self, r: usize, ring: usize, e: Entry) {
        let reg = &mut self.lanes[r];
        let base = Rings::base(reg.base, reg.cap, ring);
        self.rings
            .push(base, reg.cap, &mut reg.rings[ring], e, &self.state, ring);
    }

    /// Puts pair `i` (in no queue, connection up) into the ready FIFO, ready since `due`.
    #[inline]
    fn push_ready(&mut self, r: usize, i: u32, due: u64) {
        let p = &mut self.state[i as usize];
        p.seq = p.seq.wrapping_add(1);
        p.place = READY;
        let e = Entry {
            due_tick: due,
            pair: i,
            seq: p.seq,
        };
        self.push(r, READY_RING, e);
        self.lanes[r].counts.ready += 1;
    }

    /// Files pair `i` (in no queue, connection up) to become ready at tick `eligible`: straight
    /// into the ready FIFO if that is not after `now`, else the booking queue if it keeps its
    /// order, else the wheel.
    #[inline]
    fn schedule(&mut self, i: u32, eligible: u64, now: u64) {
        let r = self.state[i as usize].lane as usize;
        if eligible <= now {
            // Pairs that became ready before `now` but are not yet in the FIFO go first.
            if now >= self.lanes[r].wake_tick {
                self.advance_slow(r, now);
            }
            self.push_ready(r, i, now);
            return;
        }
        let cooling = self.pace[i as usize].cooldown_until_tick == eligible;
        let s = &mut self.state[i as usize];
        let filed = match (cooling, s.wait & UNTIL_DEFERRED != 0) {
            (false, _) => FILED_BOOKED,
            (true, false) => FILED_COOLING,
            (true, true) => FILED_DEFERRED,
        };
        s.wait = (s.wait & !FILED) | filed;
        if !cooling {
            let reg = &self.lanes[r];
            let in_order = self
                .rings
                .last(
                    Rings::base(reg.base, reg.cap, BOOKED_RING),
                    reg.cap,
                    &reg.rings[BOOKED_RING],
                )
                .is_none_or(|e| e.due_tick <= eligible);
            if in_order {
                let p = &mut self.state[i as usize];
                p.seq = p.seq.wrapping_add(1);
                p.place = QUEUED;
                let e = Entry {
                    due_tick: eligible,
                    pair: i,
                    seq: p.seq,
                };
                self.push(r, BOOKED_RING, e);
                let reg = &mut self.lanes[r];
                reg.counts.booked += 1;
                reg.wake_tick = reg.wake_tick.min(eligible);
                return;
            }
        }
        // Round up: the wheel never hands a pair out before `eligible`. A `now` behind the
        // wheel (non-monotonic caller) files one unit ahead rather than into the past.
        let due_unit = self
            .wheels
            .unit_at_or_after(eligible)
            .max(self.lanes[r].wheel.elapsed_unit + 1);
        self.wheel_insert(r, i, due_unit);
    }

    /// Takes pair `i` out of rotation: out of the wheel at once, out of a ring lazily (its
    /// entry stops matching the record). The pair is parked until scheduled again.
    fn remove(&mut self, i: u32) {
        let p = &mut self.state[i as usize];
        let r = p.lane as usize;
        match p.place {
            READY => self.lanes[r].counts.ready -= 1,
            QUEUED => self.lanes[r].counts.booked -= 1,
            WHEEL => self.wheel_unlink(i),
            _ => {}
        }
        self.state[i as usize].place = PARKED;
    }

    /// Files pair `i` into region `r`'s wheel at `due_unit`, with its place, count and the
    /// region's wake-up ticks.
    fn wheel_insert(&mut self, r: usize, i: u32, due_unit: u64) {
        let reg = &mut self.lanes[r];
        let tick = self.wheels.insert(&mut reg.wheel, r, i, due_unit);
        reg.wake_tick = reg.wake_tick.min(tick);
        reg.wheel_wake_tick = reg.wheel_wake_tick.min(tick);
        let p = &mut self.state[i as usize];
        p.place = WHEEL;
        match p.wait & FILED {
            FILED_COOLING => reg.counts.cooling += 1,
            FILED_DEFERRED => reg.counts.deferred += 1,
            _ => reg.counts.booked += 1,
        }
    }

    /// Takes pair `i` out of the wheel, parking it and fixing its region's count.
    fn wheel_unlink(&mut self, i: u32) {
        let p = &mut self.state[i as usize];
        p.place = PARKED;
        let r = p.lane as usize;
        let reg = &mut self.lanes[r];
        self.wheels.unlink(&mut reg.wheel, r, i);
        match p.wait & FILED {
            FILED_COOLING => reg.counts.cooling -= 1,
            FILED_DEFERRED => reg.counts.deferred -= 1,
            _ => reg.counts.booked -= 1,
        }
    }

    /// The tick the first not-yet-ready pair of region `r` becomes ready: the booking queue's
    /// head (exact) or the wheel's first entry (rounded up to its slot), whichever is first.
    #[inline]
    fn first_due(&mut self, r: usize) -> Option<u64> {
        let booked = self.front(r, BOOKED_RING).map(|e| e.due_tick);
        let wheel = self
            .wheels
            .soonest_due(&mut self.lanes[r].wheel, r)
            .map(|unit| self.wheels.tick_of(unit));
        match (booked, wheel) {
            (Some(b), Some(w)) => Some(b.min(w)),
            (b, w) => b.or(w),
        }
    }

    /// Moves booking-queue pairs due by tick `until` to the ready FIFO, in due order. Only
    /// entries that are due are checked against their records: the first one not yet due
    /// ends the walk without touching its record.
    #[inline]
    fn ready_booked(&mut self, r: usize, until: u64) -> u32 {
        let cap = self.lanes[r].cap;
        let base = Rings::base(self.lanes[r].base, cap, BOOKED_RING);
        let mut moved = 0;
        loop {
            let queue = self.lanes[r].rings[BOOKED_RING];
            if queue.len == 0 {
                break;
            }
            let e = *self.rings.head(base, &queue);
            if e.due_tick > until {
                break;
            }
            self.lanes[r].rings[BOOKED_RING].pop_front(cap);
            // The record of the booking this many places behind, fetched before it falls due.
            if queue.len > PREFETCH_AHEAD {
                let ahead = self.rings.at(base, cap, &queue, PREFETCH_AHEAD);
                prefetch(&self.state[ahead.pair as usize]);
            }
            if !live(&self.state, &e, BOOKED_RING) {
                continue;
            }
            // `due_tick` stays: it is the tick the pair became ready. The ring entry's `seq`
            // is reused, so the record is written once.
            self.state[e.pair as usize].place = READY;
            self.push(r, READY_RING, e);
            let counts = &mut self.lanes[r].counts;
            counts.booked -= 1;
            counts.ready += 1;
            moved += 1;
        }
        moved
    }

    /// A tick no later than anything of region `r`'s booking queue or wheel falls due, and one
    /// no later than anything of its wheel does, from the queue's head entry as it stands (a
    /// stale head only wakes the region early) and the wheel's cached soonest: no pair record
    /// is read.
    #[inline]
    fn wake_of(&mut self, r: usize) -> (u64, u64) {
        let reg = &mut self.lanes[r];
        let queue = &reg.rings[BOOKED_RING];
        let booked = if queue.len == 0 {
            u64::MAX
        } else {
            self.rings
                .head(Rings::base(reg.base, reg.cap, BOOKED_RING), queue)
                .due_tick
        };
        let wheel = self
            .wheels
            .soonest_due(&mut reg.wheel, r)
            .map_or(u64::MAX, |unit| self.wheels.tick_of(unit));
        (booked.min(wheel), wheel)
    }

    /// Brings region `r` up to `now`: fires every wheel slot that starts by `now`'s unit
    /// (level-0 entries, and coarser entries due exactly at the slot start, join the ready FIFO
    /// in slot order; the rest cascade to finer levels, each pair at most once per level),
    /// moves due bookings to the ready FIFO, and caches the next tick anything falls due.
    fn advance_slow(&mut self, r: usize, now: u64) -> u32 {
        let target = self.wheels.unit_of(now);
        let shift = self.wheels.shift();
        let mut moved = 0;
        // Jumping `elapsed_unit` past a coarse slot's start without cascading it would let
        // finer entries filed later overtake it, so every slot starting by `target` is
        // processed. An empty wheel (the common case: only cooldowns and bursts use it) has
        // none.
        let wheel_empty = self.lanes[r].wheel.is_known_empty();
        while !wheel_empty && target > self.lanes[r].wheel.elapsed_unit {
            let Some((level, slot, start)) = self.lanes[r].wheel.next_slot() else {
                break;
            };
            if start > target {
                break;
            }
            // Bookings due before this slot fires became ready first: the FIFO stays in
            // ready-time order.
            moved += self.ready_booked(r, start << shift);
            self.lanes[r].wheel.elapsed_unit = start;
            let list = Wheels::list_index(r, level, slot);
            loop {
                let i = self.wheels.list(list).head;
                if i == NIL {
                    break;
                }
                let due_unit = self.wheels.link(i).due_unit;
                self.wheel_unlink(i);
                if due_unit <= start {
                    self.push_ready(r, i, start << shift);
                    moved += 1;
                } else {
                    self.wheel_insert(r, i, due_unit);
                }
            }
        }
        let wheel = &mut self.lanes[r].wheel;
        wheel.elapsed_unit = wheel.elapsed_unit.max(target);
        moved += self.ready_booked(r, now);
        let (wake, wheel_wake) = self.wake_of(r);
        let reg = &mut self.lanes[r];
        reg.wake_tick = wake;
        reg.wheel_wake_tick = wheel_wake;
        moved
    }
}
