//! A region and its lanes: the ids, the rate, the counts, and the per-lane state every call
//! reads first.
//!
//! A lane is one region's pairs of one egress group (the shared addresses, or a group that
//! tenants have to themselves): its own ready FIFO, booking queue, wheel and counts, so a
//! bundle that may leave only through a group's addresses is never handed another's pair and
//! never waits behind one. With no groups a lane is a region.
//!
//! This file holds the lane's record; it is NOT where pairs move ([`super::Limiter`]).

use super::ring::Ring;
use super::wheel::WheelState;
use crate::clock::{TickRate, Ticks};

/// A block-engine region, numbered `0..regions` by the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RegionId(pub u8);

/// A lane: `region × groups + group`, numbered by [`super::Limiter::lane`]. With one group,
/// lane `r` is region `r`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LaneId(pub u8);

/// Pacing of one region's pairs: one send per `interval`, up to `burst` back to back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionRate {
    pub interval: Ticks,
    /// Sends a rested pair may make at once; 1 means strictly one per interval.
    pub burst: u32,
}

impl RegionRate {
    pub fn from_ms(rate: TickRate, interval_ms: u64, burst: u32) -> RegionRate {
        RegionRate {
            interval: rate.from_ms(interval_ms),
            burst,
        }
    }
}

/// Per-region (or per-lane) counts, for observability. `ready + booked + cooling + deferred`
/// are the pairs in rotation (up, not held); `held` pairs have a send in flight whatever their
/// connection state; `down + connecting + draining` count connection states (a held pair is
/// counted there too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionCounts {
    pub ready: u32,
    pub booked: u32,
    /// Waiting out a cooldown the engine asked for.
    pub cooling: u32,
    /// Waiting out another process's send on the pair (the shared pacing ledger).
    pub deferred: u32,
    pub held: u32,
    pub down: u32,
    pub connecting: u32,
    pub draining: u32,
    /// Sends in flight: a held pair has exactly one, so this equals `held`.
    pub in_flight: u32,
}

impl std::ops::AddAssign for RegionCounts {
    fn add_assign(&mut self, o: RegionCounts) {
        self.ready += o.ready;
        self.booked += o.booked;
        self.cooling += o.cooling;
        self.deferred += o.deferred;
        self.held += o.held;
        self.down += o.down;
        self.connecting += o.connecting;
        self.draining += o.draining;
        self.in_flight += o.in_flight;
    }
}

/// What a lane keeps of [`RegionCounts`] as its pairs move, 32 bytes in its first cache line:
/// `in_flight` is not kept, since it equals `held` ([`Region::counts`]).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Kept {
    pub(super) ready: u32,
    pub(super) booked: u32,
    pub(super) cooling: u32,
    pub(super) deferred: u32,
    pub(super) held: u32,
    pub(super) down: u32,
    pub(super) connecting: u32,
    pub(super) draining: u32,
}

/// One lane's state. The fields `acquire` touches come first, in one cache line (64 bytes:
/// 8 + 16 + 32 + 8), then its rings' capacity.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(super) struct Region {
    /// No wheel entry of this region falls due before this tick: until then `acquire` needs
    /// no wheel work at all.
    pub(super) wheel_wake_tick: u64,
    /// The ready FIFO and the booking queue ([`super::ring::READY_RING`],
    /// [`super::ring::BOOKED_RING`]).
    pub(super) rings: [Ring; 2],
    /// Kept as pairs move.
    pub(super) counts: Kept,
    /// Index of this lane's ready ring in the ring storage; its booking ring follows.
    pub(super) base: usize,
    /// Entries of each of its rings: twice its pairs.
    pub(super) cap: u32,
    /// No booking and no wheel entry of this region falls due before this tick.
    pub(super) wake_tick: u64,
    pub(super) interval_ticks: u64,
    /// `(burst − 1) × interval`: how far ahead of `now` the GCRA arrival time may run.
    pub(super) tolerance_ticks: u64,
    pub(super) wheel: WheelState,
}

impl Region {
    /// A lane of `addresses` pairs, all down, at `rate`, its wheel standing at `elapsed_unit`,
    /// its rings at `base` with `cap` entries each.
    pub(super) fn new(
        rate: &RegionRate,
        addresses: u32,
        (base, cap): (usize, u32),
        elapsed_unit: u64,
    ) -> Region {
        assert!(rate.burst >= 1, "burst must be at least 1");
        assert!(rate.interval.0 > 0, "interval must be positive");
        Region {
            wheel_wake_tick: u64::MAX,
            rings: [Ring::default(); 2],
            counts: Kept {
                down: addresses,
                ..Kept::default()
            },
            base,
            cap,
            wake_tick: u64::MAX,
            interval_ticks: rate.interval.0,
            tolerance_ticks: rate.interval.0.saturating_mul(rate.burst as u64 - 1),
            wheel: WheelState::new(elapsed_unit),
        }
    }

    /// The counts as published: a held pair has exactly one send in flight, so that count
    /// is not kept twice.
    pub(super) fn counts(&self) -> RegionCounts {
        let Kept {
            ready,
            booked,
            cooling,
            deferred,
            held,
            down,
            connecting,
            draining,
        } = self.counts;
        RegionCounts {
            ready,
            booked,
            cooling,
            deferred,
            held,
            down,
            connecting,
            draining,
            in_flight: held,
        }
    }
}
