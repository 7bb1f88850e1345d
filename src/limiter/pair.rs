//! A pair's record: its connection state, its place, and its pacing (GCRA arrival time and
//! cooldown), in two halves by who reads them.
//!
//! This file holds the record and its arithmetic; it is NOT where a pair moves between
//! places (that is [`super::Limiter`], through the rings and the wheel).

/// "No pair": the end of a wheel list, an empty ring entry.
pub(super) const NIL: u32 = u32::MAX;

/// One (egress address, region) pair. Index layout: `region × addresses + address`, so a
/// region's records are contiguous, and a lane's too (a group's addresses are contiguous).
/// Use [`super::Limiter::pair`], [`super::Limiter::address_of`], [`super::Limiter::region_of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PairId(pub u32);

/// The state of a pair's upstream connection. Only `Up` pairs are in rotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ConnState {
    Down = 0,
    Connecting = 1,
    Up = 2,
    Draining = 3,
}

/// Where a pair is, as seen from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// In its region's ready FIFO: may send now.
    Ready,
    /// Waiting for its rate-limit slot (booking queue or wheel).
    Booked,
    /// In the wheel, waiting out a cooldown the engine asked for that ends after its
    /// rate-limit slot.
    Cooling,
    /// In the wheel, waiting until another process's send on it is an interval old (the
    /// shared ledger, [`super::Limiter::defer`]), after its own rate-limit slot.
    Deferred,
    /// Handed out by [`super::Limiter::acquire`]; its send is in flight until
    /// [`super::Limiter::finish`].
    Held,
    /// Not in rotation: its connection is not up (and nothing is in flight).
    Parked,
}

/// `State::place` values: a byte, so the record stays 8 bytes.
pub(super) const PARKED: u8 = 0;
pub(super) const READY: u8 = 1;
pub(super) const QUEUED: u8 = 2;
pub(super) const WHEEL: u8 = 3;
pub(super) const HELD: u8 = 4;

/// `State::wait` bits. The low two say why a pair in the wheel is there, as its lane counted
/// it when it was filed: its rate ([`FILED_BOOKED`]), the engine's cooldown
/// ([`FILED_COOLING`]), or another process's send on it ([`FILED_DEFERRED`]).
pub(super) const FILED: u8 = 0b011;
pub(super) const FILED_BOOKED: u8 = 0;
pub(super) const FILED_COOLING: u8 = 1;
pub(super) const FILED_DEFERRED: u8 = 2;
/// The pair's `cooldown_until_tick` was last raised by [`super::Limiter::defer`] (another
/// process booked the pair in the shared ledger), not by the engine: what holds it is another
/// relay's send, which an operator must not read as the engine backing off.
pub(super) const UNTIL_DEFERRED: u8 = 0b100;

/// The part of a pair's record `acquire` reads and writes, 8 bytes, eight pairs to a cache
/// line: a pick touches nothing else of the pair.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(8))]
pub(super) struct State {
    /// Bumped on every push into a ring: only the entry carrying the current value is live.
    /// A stale entry leaves its ring within one pass over it (twice the lane's pairs), long
    /// before the `u32` could wrap back to its value.
    pub(super) seq: u32,
    pub(super) place: u8,
    pub(super) conn: ConnState,
    /// Why it is filed in the wheel, and what its cooldown is ([`FILED`], [`UNTIL_DEFERRED`]).
    pub(super) wait: u8,
    /// Its lane ([`super::LaneId`]).
    pub(super) lane: u8,
}

impl State {
    /// A `Down`, parked pair of `lane`.
    pub(super) fn new(lane: u8) -> State {
        State {
            seq: 0,
            place: PARKED,
            conn: ConnState::Down,
            wait: FILED_BOOKED,
            lane,
        }
    }

    /// The place as seen from outside.
    pub(super) fn place(&self) -> Place {
        match self.place {
            PARKED => Place::Parked,
            READY => Place::Ready,
            HELD => Place::Held,
            WHEEL => match self.wait & FILED {
                FILED_COOLING => Place::Cooling,
                FILED_DEFERRED => Place::Deferred,
                _ => Place::Booked,
            },
            _ => Place::Booked,
        }
    }
}

/// The pacing half of a pair's record, read when its next slot is booked (`finish`,
/// `cooldown`, `set_connection`), never by `acquire`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pace {
    /// GCRA theoretical arrival time: `next_allowed = tat − (burst − 1) × interval`.
    pub(super) tat_tick: u64,
    /// The pair sends no earlier than this.
    pub(super) cooldown_until_tick: u64,
}

impl Pace {
    /// A rested pair: a full burst available, no cooldown.
    pub(super) const RESTED: Pace = Pace {
        tat_tick: 0,
        cooldown_until_tick: 0,
    };

    /// The earliest send the rate allows, burst included (`tolerance_ticks` is
    /// `(burst − 1) × interval`).
    pub(super) fn next_allowed_tick(&self, tolerance_ticks: u64) -> u64 {
        self.tat_tick.saturating_sub(tolerance_ticks)
    }

    /// The earliest send both the rate and the cooldown allow.
    pub(super) fn eligible_tick(&self, tolerance_ticks: u64) -> u64 {
        self.next_allowed_tick(tolerance_ticks)
            .max(self.cooldown_until_tick)
    }

    /// The interval changed from `old` to `new` ticks at `now_tick`. Two readings of the
    /// booking at the new length: the last send's interval (`tat − old + new`), and the time
    /// booked ahead of now scaled (`now + (tat − now) × new / old`: a burst spent under the old
    /// interval refills at the new one). A longer interval keeps the later, so neither reading
    /// sends early; a shorter one the sooner. A rested pair stays rested.
    ///
    /// A pair with nothing booked ahead of now (`tat ≤ now`) takes the first reading alone:
    /// the second would be `now` itself, as if it had just sent, and each later reload would
    /// push an idle pair further out. A pair `held` by a call in flight takes the second alone:
    /// that call is its last send and books when it ends, at the new interval.
    pub(super) fn reprice(&mut self, old: u64, new: u64, now_tick: u64, held: bool) {
        if self.tat_tick == 0 || old == new {
            return;
        }
        let last = self.tat_tick.saturating_sub(old).saturating_add(new);
        if self.tat_tick <= now_tick {
            if !held {
                self.tat_tick = last.max(1);
            }
            return;
        }
        let ahead = self.tat_tick - now_tick;
        let scaled = (u128::from(ahead) * u128::from(new) / u128::from(old.max(1))) as u64;
        let scaled = now_tick.saturating_add(scaled);
        self.tat_tick = if held {
            scaled
        } else if new > old {
            last.max(scaled)
        } else {
            last.min(scaled)
        };
    }

    /// A send ended at `now_tick`: the next one is an interval after it, or after the arrival
    /// time already booked if that is later.
    pub(super) fn book(&mut self, now_tick: u64, interval_ticks: u64) {
        self.tat_tick = self.tat_tick.max(now_tick).saturating_add(interval_ticks);
    }
}
