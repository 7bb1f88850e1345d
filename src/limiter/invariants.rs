//! The limiter's invariants, checked by walking everything: [`super::Limiter::check_invariants`]
//! calls [`check`] with its parts. O(pairs + lists + ring entries); for tests and debugging,
//! never on the request path.
//!
//! This file is NOT a second model of the limiter: it reads the structures as they are and
//! asserts what must hold between them.

use super::pair::{
    ConnState, FILED, FILED_BOOKED, FILED_COOLING, FILED_DEFERRED, HELD, NIL, PARKED, Pace, State,
    WHEEL,
};
use super::region::{Region, RegionCounts};
use super::ring::{BOOKED_RING, READY_RING, Rings, live};
use super::wheel::{LEVEL_BITS, LISTS_PER_REGION, SLOTS_PER_LEVEL, Wheels, slot_for};

/// Panics on any inconsistency: a pair in two places or in none, a pair in rotation whose
/// connection is not up, a held pair in a queue, a broken link, an occupancy bit without
/// entries (or entries without the bit), a ready pair not yet allowed to send, a queue out of
/// order, a wheel entry filed before its time or in a slot the wheel cannot reach, a count, the
/// cached soonest or the cached wake wrong.
pub(super) fn check(
    state: &[State],
    pace: &[Pace],
    rings: &Rings,
    wheels: &Wheels,
    regions: &[Region],
) {
    let mut seen = vec![0u8; state.len()];
    let shift = wheels.shift();
    for (r, reg) in regions.iter().enumerate() {
        let mut counts = RegionCounts::default();
        let mut min_due = u64::MAX;
        let eligible_of = |i: usize| pace[i].eligible_tick(reg.tolerance_ticks);
        // The newest ready entry and the oldest booking: the FIFO's head is the
        // longest-ready pair only while every booking falls due after all of the FIFO.
        let mut ready_due_max = None::<u64>;
        let mut booked_due_min = None::<u64>;
        for ring in [READY_RING, BOOKED_RING] {
            let q = &reg.rings[ring];
            assert!(q.len <= reg.cap, "ring {ring} of lane {r} overfull");
            let base = Rings::base(reg.base, reg.cap, ring);
            let mut last_due = 0u64;
            for k in 0..q.len {
                let e = rings.at(base, reg.cap, q, k);
                if !live(state, e, ring) {
                    continue;
                }
                let i = e.pair as usize;
                let p = &state[i];
                assert_eq!(p.lane as usize, r, "pair {i} is in another lane's ring");
                assert_eq!(p.conn, ConnState::Up, "pair {i} is in rotation but not up");
                seen[i] += 1;
                assert!(
                    last_due <= e.due_tick,
                    "ring {ring} of lane {r} out of order at {i}"
                );
                last_due = e.due_tick;
                if ring == READY_RING {
                    assert!(
                        eligible_of(i) <= e.due_tick,
                        "pair {i} is ready before it is allowed"
                    );
                    ready_due_max = Some(e.due_tick);
                    counts.ready += 1;
                } else {
                    assert_eq!(
                        e.due_tick,
                        eligible_of(i),
                        "pair {i} booked at the wrong tick"
                    );
                    booked_due_min = booked_due_min.or(Some(e.due_tick));
                    assert_eq!(
                        p.wait & FILED,
                        FILED_BOOKED,
                        "cooling pair {i} in the booking queue"
                    );
                    assert!(
                        e.due_tick >= reg.wake_tick,
                        "booking of pair {i} due before the wake"
                    );
                    counts.booked += 1;
                }
            }
        }
        if let (Some(ready), Some(booked)) = (ready_due_max, booked_due_min) {
            assert!(
                ready < booked,
                "lane {r} has a booking due at {booked}, not after its ready FIFO ({ready})"
            );
        }
        let wheel = &reg.wheel;
        for within in 0..LISTS_PER_REGION {
            let list = r * LISTS_PER_REGION + within;
            let mut prev = NIL;
            let mut i = wheels.list(list).head;
            let mut len = 0u32;
            let (level, slot) = (within / SLOTS_PER_LEVEL, within % SLOTS_PER_LEVEL);
            while i != NIL {
                let p = &state[i as usize];
                let l = wheels.link(i);
                assert_eq!(
                    l.list as usize, list,
                    "pair {i} linked into a list it does not record"
                );
                assert_eq!(l.prev, prev, "pair {i} has a broken back link");
                assert_eq!(
                    p.place, WHEEL,
                    "pair {i} in the wheel records another place"
                );
                assert_eq!(p.lane as usize, r, "pair {i} is in another lane's list");
                assert_eq!(p.conn, ConnState::Up, "pair {i} is in rotation but not up");
                seen[i as usize] += 1;
                assert!(
                    l.due_unit << shift >= eligible_of(i as usize),
                    "pair {i} filed early"
                );
                assert!(
                    l.due_unit > wheel.elapsed_unit,
                    "pair {i} is overdue in the wheel"
                );
                assert_eq!(
                    slot_for(level, l.due_unit),
                    slot,
                    "pair {i} in the wrong slot"
                );
                let above = LEVEL_BITS * (level as u32 + 1);
                if above < 64 {
                    assert_eq!(
                        l.due_unit >> above,
                        wheel.elapsed_unit >> above,
                        "pair {i} filed beyond its level's reach"
                    );
                }
                assert!(
                    slot_for(level, l.due_unit) > slot_for(level, wheel.elapsed_unit),
                    "pair {i} in a slot the wheel has passed"
                );
                assert!(
                    wheels.tick_of(l.due_unit) >= reg.wake_tick,
                    "wheel entry of pair {i} due before the wake"
                );
                assert!(
                    wheels.tick_of(l.due_unit) >= reg.wheel_wake_tick,
                    "wheel entry of pair {i} due before the wheel's wake"
                );
                min_due = min_due.min(l.due_unit);
                match p.wait & FILED {
                    FILED_COOLING => counts.cooling += 1,
                    FILED_DEFERRED => counts.deferred += 1,
                    _ => counts.booked += 1,
                }
                prev = i;
                i = l.next;
                len += 1;
            }
            assert_eq!(wheels.list(list).tail, prev, "list {list} has a wrong tail");
            let bit = wheel.occupied[level] >> slot & 1;
            assert_eq!(bit == 1, len > 0, "occupancy bit of list {list} is wrong");
        }
        if wheel.soonest_valid {
            assert_eq!(
                wheel.soonest_unit, min_due,
                "cached soonest of lane {r} is stale"
            );
        }
        for (i, p) in state.iter().enumerate() {
            if p.lane as usize != r {
                continue;
            }
            match p.conn {
                ConnState::Down => counts.down += 1,
                ConnState::Connecting => counts.connecting += 1,
                ConnState::Draining => counts.draining += 1,
                ConnState::Up => {}
            }
            if p.place == HELD {
                counts.held += 1;
                counts.in_flight += 1;
                seen[i] += 1;
                assert_eq!(
                    wheels.link(i as u32).list,
                    NIL,
                    "held pair {i} is in the wheel"
                );
            } else if p.conn != ConnState::Up {
                assert_eq!(p.place, PARKED, "pair {i} is not up but not parked");
            }
            let expected = (p.conn == ConnState::Up || p.place == HELD) as u8;
            assert_eq!(seen[i], expected, "pair {i} is in {} places", seen[i]);
        }
        assert_eq!(counts, reg.counts(), "counts of lane {r} drifted");
    }
}
