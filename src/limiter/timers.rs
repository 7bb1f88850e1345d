//! Per-pair timers: a connection's deadlines (setup, HTTP/2's SETTINGS ack, call deadlines,
//! keepalive PINGs, a call's silence check), one per pair, in the same hierarchical timing wheel
//! the limiter files cooldowns in (`wheel.rs`), with a single lane.
//!
//! Why a wheel and not a scan: an idle relay of 16,384 pairs that looked at every pair's timers
//! on a fixed period paid for its pool size, not its load. Here a pair is filed once when its
//! earliest deadline changes (O(1), and nothing at all when the deadline did not move, the
//! common case of a call on a busy connection), and the loop reads one cached tick to learn
//! whether anything is due. A pair is never fired early, and late by under one unit (the
//! largest power of two of ticks not above [`UNIT_US_MAX`]): these deadlines are hundreds of
//! milliseconds to seconds long.
//!
//! It is NOT what a deadline means: the caller files each pair's earliest deadline and, when it
//! fires, looks at what fell due.

use super::wheel::{LISTS_PER_REGION, Link, List, WheelState, Wheels};
use crate::clock::{Instant, TickRate};

/// Widest unit of the pair timers' wheel: the most a connection timer fires late.
pub const UNIT_US_MAX: u64 = 1_000;

/// Pairs of a coarse wheel slot [`PairTimers::next_due`] reads for the exact earliest deadline;
/// a slot holding more is woken for at its start.
pub const SCAN_MAX: usize = 16;

/// Bytes per pair of the timers (for the budget): its wheel link and its room in the due list.
pub const TIMER_BYTES_PER_PAIR: usize = std::mem::size_of::<Link>() + std::mem::size_of::<u32>();
/// Bytes of the timers' list heads, whatever the pair count (for the budget).
pub const TIMER_LIST_BYTES: usize = LISTS_PER_REGION * std::mem::size_of::<List>();

/// See the module docs.
pub struct PairTimers {
    wheels: Wheels,
    wheel: WheelState,
    /// Pairs whose deadline came, in firing order, until [`PairTimers::pop_due`] takes them.
    due: Vec<u32>,
    /// How many of `due` were taken.
    taken: usize,
}

impl PairTimers {
    /// Timers for `pairs` pairs, none armed, the wheel standing at `now`. Everything is
    /// allocated here.
    pub fn new(pairs: usize, rate: TickRate, now: Instant) -> PairTimers {
        let unit_ticks = rate.from_us(UNIT_US_MAX).0.max(1);
        let shift = 63 - unit_ticks.leading_zeros();
        let wheels = Wheels::new(pairs, 1, shift);
        let elapsed = wheels.unit_of(now.0);
        PairTimers {
            wheels,
            wheel: WheelState::new(elapsed),
            due: Vec::with_capacity(pairs),
            taken: 0,
        }
    }

    /// Bytes allocated (the budget's terms: [`TIMER_BYTES_PER_PAIR`] per pair and
    /// [`TIMER_LIST_BYTES`]).
    pub fn allocated_bytes(&self) -> usize {
        self.wheels.allocated_bytes() + self.due.capacity() * std::mem::size_of::<u32>()
    }

    /// Files `pair` to fire at `at` (`None`: not at all), replacing what it had. A deadline
    /// already past fires at the next unit.
    pub fn arm(&mut self, pair: u32, at: Option<Instant>) {
        let linked = self.wheels.link(pair).list != super::pair::NIL;
        let Some(at) = at else {
            if linked {
                self.wheels.unlink(&mut self.wheel, 0, pair);
            }
            return;
        };
        let unit = self
            .wheels
            .unit_at_or_after(at.0)
            .max(self.wheel.elapsed_unit + 1);
        if linked {
            if self.wheels.link(pair).due_unit == unit {
                return;
            }
            self.wheels.unlink(&mut self.wheel, 0, pair);
        }
        self.wheels.insert(&mut self.wheel, 0, pair, unit);
    }

    /// When [`PairTimers::advance`] next has work, if any pair is armed: the earliest deadline's
    /// unit, or, when that deadline sits in a coarse slot of more than [`SCAN_MAX`] pairs, the
    /// slot's start (nothing in it is due before; advancing there cascades it to finer levels
    /// and may fire nothing). Never later than the earliest deadline.
    ///
    /// Why not always exact: on a busy relay the earliest deadline is usually the least
    /// recently used pair's keepalive, in a coarse slot with hundreds of others, and that pair
    /// is the next one the limiter hands out; re-arming it for its call made the next lookup
    /// walk the whole slot, once per bundle (a tenth of the relay's CPU at 2,000 bundles/s).
    /// The bound costs a wake-up per crowded coarse slot instead (one per 50-odd ms at most).
    pub fn next_due(&mut self) -> Option<Instant> {
        self.wheels
            .soonest_bound(&mut self.wheel, 0, SCAN_MAX)
            .map(|unit| Instant(self.wheels.tick_of(unit)))
    }

    /// Moves every pair due by `now` out of the wheel into the due list (each slot starting by
    /// `now`'s unit fires: its entries due at its start are due, the rest cascade to finer
    /// levels, each at most once per level), in the order they fall due.
    pub fn advance(&mut self, now: Instant) {
        let target = self.wheels.unit_of(now.0);
        while !self.wheel.is_known_empty() && target > self.wheel.elapsed_unit {
            let Some((level, slot, start)) = self.wheel.next_slot() else {
                break;
            };
            if start > target {
                break;
            }
            self.wheel.elapsed_unit = start;
            let list = Wheels::list_index(0, level, slot);
            loop {
                let i = self.wheels.list(list).head;
                if i == super::pair::NIL {
                    break;
                }
                let due_unit = self.wheels.link(i).due_unit;
                self.wheels.unlink(&mut self.wheel, 0, i);
                if due_unit <= start {
                    self.due.push(i);
                } else {
                    self.wheels.insert(&mut self.wheel, 0, i, due_unit);
                }
            }
        }
        self.wheel.elapsed_unit = self.wheel.elapsed_unit.max(target);
    }

    /// The next pair whose deadline came (it is no longer armed).
    pub fn pop_due(&mut self) -> Option<u32> {
        let p = self.due.get(self.taken).copied();
        match p {
            Some(_) => self.taken += 1,
            None => {
                self.due.clear();
                self.taken = 0;
            }
        }
        p
    }

    /// Whether `pair` is filed as [`PairTimers::arm`] with `at` would file it now (for
    /// checks of the callers' filing).
    pub fn is_filed_at(&self, pair: u32, at: Option<Instant>) -> bool {
        let l = self.wheels.link(pair);
        let linked = l.list != super::pair::NIL;
        match at {
            None => !linked,
            Some(at) => {
                let unit = self
                    .wheels
                    .unit_at_or_after(at.0)
                    .max(self.wheel.elapsed_unit + 1);
                linked && l.due_unit == unit
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: TickRate = TickRate::new(1_000_000_000);

    fn ms(v: u64) -> Instant {
        Instant(RATE.from_ms(v).0)
    }

    fn fired(t: &mut PairTimers, now: Instant) -> Vec<u32> {
        t.advance(now);
        std::iter::from_fn(|| t.pop_due()).collect()
    }

    #[test]
    fn a_pair_fires_once_at_its_deadline_never_before_and_under_a_unit_late() {
        let mut t = PairTimers::new(4, RATE, ms(0));
        t.arm(2, Some(ms(30_000)));
        assert!(fired(&mut t, ms(29_999)).is_empty());
        let at = t.next_due().unwrap();
        assert!(at.0 >= ms(30_000).0 && at.0 < ms(30_000).0 + RATE.from_us(UNIT_US_MAX).0);
        assert_eq!(fired(&mut t, at), vec![2]);
        assert!(t.next_due().is_none());
        assert!(fired(&mut t, ms(60_000)).is_empty());
    }

    #[test]
    fn sleeping_until_each_wake_fires_every_deadline_on_time_in_a_few_wakes_each() {
        // A crowded coarse slot (40 keepalives 30 s out), a lone far deadline, a near one.
        let deadlines: Vec<u64> = (0..40).map(|i| 30_000 + 7 * i).chain([3_700, 65]).collect();
        let mut t = PairTimers::new(deadlines.len(), RATE, ms(0));
        for (p, d) in deadlines.iter().enumerate() {
            t.arm(p as u32, Some(ms(*d)));
        }
        let unit = RATE.from_us(UNIT_US_MAX).0;
        let (mut wakes, mut fired_at) = (0, vec![None; deadlines.len()]);
        while let Some(at) = t.next_due() {
            let earliest_left = (0..deadlines.len())
                .filter(|&p| fired_at[p].is_none())
                .map(|p| ms(deadlines[p]).0)
                .min()
                .expect("a wake with every deadline fired");
            // Deadlines are filed at the unit that starts at or after them.
            assert!(at.0 < earliest_left + unit, "woken after a deadline's unit");
            wakes += 1;
            for p in fired(&mut t, at) {
                fired_at[p as usize] = Some(at.0);
            }
        }
        for (p, d) in deadlines.iter().enumerate() {
            let at = fired_at[p].expect("every deadline fires");
            assert!(
                at >= ms(*d).0 && at < ms(*d).0 + unit,
                "pair {p} fired at {at}"
            );
        }
        // One wake per deadline's unit, and one per crowded coarse slot the 40 cross.
        assert!(wakes <= deadlines.len() + 4, "{wakes} wakes");
    }

    #[test]
    fn a_coarse_slot_of_few_pairs_is_slept_through_to_its_earliest_deadline() {
        let mut t = PairTimers::new(4, RATE, ms(0));
        t.arm(0, Some(ms(30_000)));
        t.arm(1, Some(ms(31_000)));
        let unit = RATE.from_us(UNIT_US_MAX).0;
        let at = t.next_due().unwrap().0;
        assert!(
            at >= ms(30_000).0 && at < ms(30_000).0 + unit,
            "woken at {at}"
        );
    }

    #[test]
    fn a_crowded_coarse_slot_is_woken_for_at_its_start_and_fires_nothing_early() {
        let pairs = SCAN_MAX + 2;
        let mut t = PairTimers::new(pairs, RATE, ms(0));
        for p in 0..pairs {
            t.arm(p as u32, Some(ms(30_000 + p as u64)));
        }
        // Filed in deadline order, the earliest is known without a walk; once it moves, the
        // next is in a slot of more pairs than a lookup reads.
        assert!(t.next_due().unwrap().0 >= ms(30_000).0);
        t.arm(0, Some(ms(30_100)));
        let at = t.next_due().unwrap();
        assert!(at.0 < ms(30_000).0, "a crowded slot read through: {at:?}");
        assert!(fired(&mut t, at).is_empty());
        let next = t.next_due().unwrap();
        assert!(next.0 > at.0, "the cascade left the wake where it was");
    }

    #[test]
    fn re_arming_moves_the_deadline_and_disarming_removes_it() {
        let mut t = PairTimers::new(4, RATE, ms(0));
        t.arm(0, Some(ms(5_000)));
        t.arm(1, Some(ms(10)));
        t.arm(1, Some(ms(7_000)));
        t.arm(3, Some(ms(20)));
        t.arm(3, None);
        assert_eq!(fired(&mut t, ms(6_000)), vec![0]);
        assert_eq!(fired(&mut t, ms(8_000)), vec![1]);
        assert!(t.next_due().is_none());
    }

    #[test]
    fn pairs_fire_in_deadline_order_across_levels() {
        let mut t = PairTimers::new(8, RATE, ms(0));
        let deadlines = [900_000, 3, 65, 4_100, 4_099, 262_200, 70, 1];
        for (p, d) in deadlines.iter().enumerate() {
            t.arm(p as u32, Some(ms(*d)));
        }
        let got = fired(&mut t, ms(1_000_000));
        let mut want: Vec<u32> = (0..8).collect();
        want.sort_by_key(|&p| deadlines[p as usize]);
        assert_eq!(got, want);
    }

    #[test]
    fn a_deadline_already_past_fires_at_the_next_advance() {
        let mut t = PairTimers::new(2, RATE, ms(100));
        t.advance(ms(100));
        t.arm(1, Some(ms(50)));
        assert_eq!(fired(&mut t, ms(102)), vec![1]);
    }
}
