//! The limiter's rules, one test per row: readiness, holding a pair while its send is in
//! flight and booking from the answer, exact waits, cooldowns, connection state, burst,
//! per-region rates, fairness and the observability counts.

use bundle_relay::clock::{Clock, Instant, TickRate, Ticks};
use bundle_relay::limiter::{
    Acquire, ConnState, LaneId, Limiter, LimiterConfig, PairId, Place, RegionCounts, RegionId,
    RegionRate,
};

const RATE: TickRate = TickRate::NANOS;
const T0: Instant = Instant(5_000_000_000);
const SECOND: Ticks = Ticks(1_000_000_000);
const R0: RegionId = RegionId(0);

fn up_limiter(addresses: u32, regions: usize) -> Limiter {
    let mut limiter = Limiter::new(&LimiterConfig::uniform(RATE, addresses, regions), T0);
    for p in 0..limiter.pair_count() as u32 {
        limiter.set_connection(PairId(p), ConnState::Up, T0);
    }
    limiter.check_invariants();
    limiter
}

fn ms(n: u64) -> Ticks {
    RATE.from_ms(n)
}

fn wait_until(a: Acquire) -> Instant {
    match a {
        Acquire::WaitUntil(t) => t,
        other => panic!("expected a wait, got {other:?}"),
    }
}

fn pair(a: Acquire) -> PairId {
    match a {
        Acquire::Pair(p) => p,
        other => panic!("expected a pair, got {other:?}"),
    }
}

/// The tick at which the wheel hands out something allowed at `t`: `t` rounded up to a slot.
fn slot_ceil(limiter: &Limiter, t: Instant) -> Instant {
    let w = limiter.slot_ticks().0;
    Instant(t.0.div_ceil(w) * w)
}

/// Acquires a pair and answers its send at once, as a relay with a zero round trip would.
fn send(limiter: &mut Limiter, region: RegionId, now: Instant) -> PairId {
    let p = pair(limiter.acquire(LaneId(region.0), now));
    limiter.finish(p, now);
    p
}

#[test]
fn the_default_slot_is_a_power_of_two_of_ticks_no_wider_than_50_us() {
    let limiter = up_limiter(1, 1);
    let w = limiter.slot_ticks().0;
    assert!(w.is_power_of_two());
    assert!(w <= 50_000 && w * 2 > 50_000, "slot {w} ticks");
}

#[test]
fn a_fresh_pair_is_ready_at_once_then_waits_one_interval() {
    let mut limiter = up_limiter(1, 1);
    assert_eq!(limiter.acquire(LaneId(R0.0), T0), Acquire::Pair(PairId(0)));
    limiter.finish(PairId(0), T0);
    let t = wait_until(limiter.acquire(LaneId(R0.0), T0));
    assert_eq!(t, T0.after(SECOND));
    limiter.check_invariants();
}

#[test]
fn wait_until_is_the_exact_tick_the_pair_is_handed_out() {
    let mut limiter = up_limiter(1, 1);
    let start = Instant(T0.0 + 12_345); // not on a slot boundary
    send(&mut limiter, R0, start);
    let t = wait_until(limiter.acquire(LaneId(R0.0), start));
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), Instant(t.0 - 1))),
        t
    );
    assert_eq!(limiter.acquire(LaneId(R0.0), t), Acquire::Pair(PairId(0)));
    limiter.check_invariants();
}

#[test]
fn a_pair_is_never_early_and_at_most_one_slot_late() {
    let mut limiter = up_limiter(1, 1);
    let w = limiter.slot_ticks().0;
    let mut now = Instant(T0.0 + 7);
    let mut last = None::<Instant>;
    for _ in 0..50 {
        match limiter.acquire(LaneId(R0.0), now) {
            Acquire::Pair(p) => {
                limiter.finish(p, now);
                if let Some(last) = last {
                    let gap = now.since(last).0;
                    assert!(gap >= SECOND.0, "early by {} ticks", SECOND.0 - gap);
                    assert!(gap < SECOND.0 + w, "late by {} ticks", gap - SECOND.0);
                }
                last = Some(now);
            }
            Acquire::WaitUntil(t) => now = t,
            Acquire::NoPairUp => unreachable!(),
        }
    }
}

#[test]
fn cooldown_holds_a_pair_exactly_as_long_as_asked() {
    let mut limiter = up_limiter(1, 1);
    send(&mut limiter, R0, T0);
    let asked_at = T0.after(ms(300));
    limiter.cooldown(PairId(0), ms(30_000), asked_at);
    let expected = slot_ceil(&limiter, asked_at.after(ms(30_000)));
    assert_eq!(limiter.view(PairId(0)).place, Place::Cooling);
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0.after(ms(1_000)))),
        expected
    );
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), Instant(expected.0 - 1))),
        expected
    );
    assert_eq!(
        limiter.acquire(LaneId(R0.0), expected),
        Acquire::Pair(PairId(0))
    );
    limiter.check_invariants();
}

#[test]
fn a_shorter_cooldown_never_shortens_a_longer_one() {
    let mut limiter = up_limiter(1, 1);
    limiter.cooldown(PairId(0), ms(30_000), T0);
    limiter.cooldown(PairId(0), ms(5_000), T0.after(ms(1)));
    assert_eq!(limiter.view(PairId(0)).cooldown_until, T0.after(ms(30_000)));
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0.after(ms(10_000)))),
        slot_ceil(&limiter, T0.after(ms(30_000)))
    );
}

#[test]
fn a_cooldown_shorter_than_the_booking_keeps_the_booking() {
    let mut limiter = up_limiter(1, 1);
    send(&mut limiter, R0, T0);
    limiter.cooldown(PairId(0), ms(200), T0);
    assert_eq!(limiter.view(PairId(0)).place, Place::Booked);
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0)),
        T0.after(SECOND)
    );
}

#[test]
fn a_cooldown_takes_a_ready_pair_out_of_the_fifo() {
    let mut limiter = up_limiter(2, 1);
    limiter.cooldown(PairId(0), ms(1_500), T0);
    assert_eq!(limiter.acquire(LaneId(R0.0), T0), Acquire::Pair(PairId(1)));
    limiter.finish(PairId(1), T0);
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0)),
        T0.after(SECOND)
    );
    limiter.check_invariants();
}

#[test]
fn a_pair_whose_connection_is_not_up_is_never_handed_out() {
    for state in [ConnState::Down, ConnState::Connecting, ConnState::Draining] {
        let mut limiter = up_limiter(2, 1);
        limiter.set_connection(PairId(0), state, T0);
        assert_eq!(limiter.view(PairId(0)).place, Place::Parked);
        assert_eq!(limiter.acquire(LaneId(R0.0), T0), Acquire::Pair(PairId(1)));
        limiter.finish(PairId(1), T0);
        assert!(matches!(
            limiter.acquire(LaneId(R0.0), T0),
            Acquire::WaitUntil(_)
        ));
        limiter.set_connection(PairId(1), state, T0);
        assert_eq!(limiter.acquire(LaneId(R0.0), T0), Acquire::NoPairUp);
        assert_eq!(limiter.next_ready_at(LaneId(R0.0)), None);
        limiter.check_invariants();
    }
}

#[test]
fn coming_back_up_keeps_the_booking_and_the_cooldown() {
    let mut limiter = up_limiter(1, 1);
    send(&mut limiter, R0, T0);
    limiter.set_connection(PairId(0), ConnState::Down, T0);
    limiter.set_connection(PairId(0), ConnState::Up, T0.after(ms(10)));
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0.after(ms(10)))),
        T0.after(SECOND)
    );
    limiter.set_connection(PairId(0), ConnState::Down, T0.after(ms(20)));
    limiter.cooldown(PairId(0), ms(5_000), T0.after(ms(20)));
    limiter.set_connection(PairId(0), ConnState::Up, T0.after(ms(30)));
    assert_eq!(limiter.view(PairId(0)).place, Place::Cooling);
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0.after(ms(30)))),
        slot_ceil(&limiter, T0.after(ms(5_020)))
    );
    limiter.check_invariants();
}

#[test]
fn ready_pairs_leave_in_the_order_they_became_ready() {
    let mut limiter = up_limiter(5, 1);
    // Bring them up in a scrambled order: that is the order they became ready.
    for p in 0..5 {
        limiter.set_connection(PairId(p), ConnState::Down, T0);
    }
    let order = [3, 0, 4, 1, 2];
    for (k, &p) in order.iter().enumerate() {
        limiter.set_connection(PairId(p), ConnState::Up, T0.after(Ticks(k as u64)));
    }
    let now = T0.after(Ticks(10));
    let got: Vec<u32> = (0..5).map(|_| send(&mut limiter, R0, now).0).collect();
    assert_eq!(got, order);
    // A second round, one interval later, keeps the rotation: the whole pool is used.
    let later = T0.after(ms(1_001));
    let got: Vec<u32> = (0..5).map(|_| send(&mut limiter, R0, later).0).collect();
    assert_eq!(got, order);
}

#[test]
fn ready_pairs_from_bookings_and_cooldowns_leave_in_ready_time_order() {
    let mut limiter = up_limiter(3, 1);
    let w = limiter.slot_ticks();
    let early = send(&mut limiter, R0, T0);
    let late = send(&mut limiter, R0, T0.after(Ticks(w.0 * 10)));
    // The third pair, never used, cools onto the wheel, due between the two bookings.
    let cooled = PairId(2);
    limiter.cooldown(cooled, Ticks(SECOND.0 - w.0 * 5), T0.after(Ticks(w.0 * 10)));
    assert_eq!(limiter.view(cooled).place, Place::Cooling);
    let t = T0.after(ms(1_100));
    assert_eq!(limiter.advance(t), 3);
    let got: Vec<PairId> = (0..3)
        .map(|_| pair(limiter.acquire(LaneId(R0.0), t)))
        .collect();
    assert_eq!(got, vec![early, cooled, late]);
}

#[test]
fn burst_allows_that_many_back_to_back_then_one_per_interval() {
    // Three handed out back to back at T0 (`send` panics on anything but a pair).
    let mut limiter = burst_of_three_spent();
    let t = wait_until(limiter.acquire(LaneId(R0.0), T0));
    assert_eq!(t, T0.after(SECOND));
    assert_eq!(limiter.acquire(LaneId(R0.0), t), Acquire::Pair(PairId(0)));
    limiter.finish(PairId(0), t);
    assert!(matches!(
        limiter.acquire(LaneId(R0.0), t),
        Acquire::WaitUntil(_)
    ));
    limiter.check_invariants();
}

#[test]
fn each_region_is_paced_at_its_own_rate() {
    let config = LimiterConfig {
        regions: vec![
            RegionRate::from_ms(RATE, 1_000, 1),
            RegionRate::from_ms(RATE, 250, 1),
        ],
        ..LimiterConfig::uniform(RATE, 1, 2)
    };
    let mut limiter = Limiter::new(&config, T0);
    for p in 0..2 {
        limiter.set_connection(PairId(p), ConnState::Up, T0);
    }
    let r1 = RegionId(1);
    let p1 = send(&mut limiter, r1, T0);
    assert_eq!(limiter.region_of(p1), r1);
    send(&mut limiter, R0, T0);
    assert_eq!(
        wait_until(limiter.acquire(LaneId(r1.0), T0)),
        T0.after(ms(250))
    );
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0)),
        T0.after(ms(1_000))
    );
}

#[test]
fn pair_ids_lay_out_each_region_contiguously() {
    let limiter = up_limiter(3, 8);
    let p = limiter.pair(2, RegionId(5));
    assert_eq!(p, PairId(5 * 3 + 2));
    assert_eq!(limiter.address_of(p), 2);
    assert_eq!(limiter.region_of(p), RegionId(5));
}

#[test]
fn next_ready_at_names_when_the_region_can_send() {
    let mut limiter = up_limiter(2, 2);
    assert_eq!(limiter.next_ready_at(LaneId(R0.0)), Some(T0));
    let a = send(&mut limiter, R0, T0);
    send(&mut limiter, R0, T0.after(ms(100)));
    assert_eq!(limiter.next_ready_at(LaneId(R0.0)), Some(T0.after(SECOND)));
    limiter.cooldown(a, ms(3_000), T0.after(ms(200)));
    assert_eq!(
        limiter.next_ready_at(LaneId(R0.0)),
        Some(T0.after(ms(1_100)))
    );
    assert_eq!(limiter.next_ready_at(LaneId(1)), Some(T0));
    assert_eq!(limiter.next_wakeup(), Some(T0.after(ms(1_100))));
}

#[test]
fn counts_by_state_follow_each_pair() {
    let mut limiter = up_limiter(7, 1);
    let booked = send(&mut limiter, R0, T0);
    let cooled = send(&mut limiter, R0, T0);
    limiter.cooldown(cooled, ms(30_000), T0);
    let held = pair(limiter.acquire(LaneId(R0.0), T0));
    let held_down = pair(limiter.acquire(LaneId(R0.0), T0));
    limiter.set_connection(held_down, ConnState::Down, T0);
    limiter.set_connection(PairId(6), ConnState::Down, T0);
    limiter.set_connection(PairId(5), ConnState::Connecting, T0);
    assert_eq!(
        limiter.counts(R0),
        RegionCounts {
            ready: 1,
            booked: 1,
            cooling: 1,
            deferred: 0,
            held: 2,
            down: 2,
            connecting: 1,
            draining: 0,
            in_flight: 2,
        }
    );
    assert_eq!(limiter.view(booked).place, Place::Booked);
    assert_eq!(limiter.view(cooled).place, Place::Cooling);
    assert_eq!(limiter.view(held).in_flight, 1);
    assert_eq!(limiter.view(held_down).place, Place::Held);
    assert_eq!(limiter.view(booked).in_flight, 0);
    limiter.check_invariants();
}

#[test]
#[should_panic(expected = "finish without a send in flight")]
fn finishing_a_send_that_was_never_made_is_a_programming_error() {
    let mut limiter = up_limiter(1, 1);
    limiter.finish(PairId(0), T0);
}

#[test]
#[should_panic(expected = "finish without a send in flight")]
fn finishing_one_send_twice_is_a_programming_error() {
    let mut limiter = up_limiter(1, 1);
    send(&mut limiter, R0, T0);
    limiter.finish(PairId(0), T0);
}

#[test]
fn a_cooldown_of_thirty_days_fires_on_time() {
    let mut limiter = up_limiter(1, 1);
    let month = ms(30 * 24 * 3_600 * 1_000);
    limiter.cooldown(PairId(0), month, T0);
    let expected = slot_ceil(&limiter, T0.after(month));
    assert_eq!(wait_until(limiter.acquire(LaneId(R0.0), T0)), expected);
    // Step through in coarse strides, as a sleeping reactor would.
    let mut now = T0;
    while now < expected {
        now = now
            .after(ms(7 * 3_600 * 1_000))
            .min(Instant(expected.0 - 1));
        assert_eq!(wait_until(limiter.acquire(LaneId(R0.0), now)), expected);
        limiter.check_invariants();
        if now.0 == expected.0 - 1 {
            break;
        }
    }
    assert_eq!(
        limiter.acquire(LaneId(R0.0), expected),
        Acquire::Pair(PairId(0))
    );
}

#[test]
fn a_due_booking_leaves_after_the_ready_fifo_and_counts_as_booked_until_advance() {
    let mut limiter = up_limiter(4, 1);
    let a = send(&mut limiter, R0, T0);
    let b = send(&mut limiter, R0, T0.after(ms(1)));
    let due = T0.after(SECOND).after(ms(1));
    // Both bookings have fallen due; the two pairs ready since T0 still go first.
    assert_eq!(limiter.acquire(LaneId(R0.0), due), Acquire::Pair(PairId(2)));
    assert_eq!(limiter.counts(R0).ready, 1);
    assert_eq!(limiter.counts(R0).booked, 2);
    assert_eq!(limiter.acquire(LaneId(R0.0), due), Acquire::Pair(PairId(3)));
    // The FIFO is empty: bookings are taken straight from the queue, in due order, with no
    // advance between.
    assert_eq!(limiter.acquire(LaneId(R0.0), due), Acquire::Pair(a));
    assert_eq!(limiter.counts(R0).booked, 1);
    assert_eq!(limiter.view(b).place, Place::Booked);
    limiter.check_invariants();
    assert_eq!(limiter.advance(due), 1);
    assert_eq!(limiter.view(b).place, Place::Ready);
    assert_eq!(limiter.acquire(LaneId(R0.0), due), Acquire::Pair(b));
    limiter.check_invariants();
}

#[test]
fn advance_moves_due_pairs_into_the_ready_fifo() {
    let mut limiter = up_limiter(4, 2);
    for _ in 0..4 {
        send(&mut limiter, R0, T0);
    }
    assert_eq!(limiter.counts(R0).booked, 4);
    assert_eq!(limiter.advance(T0.after(ms(999))), 0);
    assert_eq!(limiter.advance(T0.after(ms(1_001))), 4);
    assert_eq!(limiter.counts(R0).ready, 4);
    limiter.check_invariants();
}

#[test]
fn the_calibrated_clock_reads_a_plausible_rate_and_moves_forward() {
    let clock = Clock::calibrate();
    let rate = clock.rate();
    assert!(rate.ticks_per_us() >= 1, "{clock}");
    let a = clock.now();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let elapsed_us = rate.to_us(clock.now().since(a));
    assert!(
        (4_000..1_000_000).contains(&elapsed_us),
        "5 ms read as {elapsed_us} µs"
    );
    assert!(
        clock
            .to_string()
            .contains(if clock.is_tsc() { "TSC" } else { "monotonic" })
    );
}

#[test]
fn tick_conversions_round_trip() {
    let rate = TickRate::new(2_900_000_000);
    assert_eq!(rate.ticks_per_us(), 2_900);
    assert_eq!(rate.from_ms(1_000), Ticks(2_900_000_000));
    assert_eq!(rate.to_us(rate.from_us(1_234_567)), 1_234_567);
    assert_eq!(rate.to_ns(rate.from_ns(1_000)), 1_000);
    assert_eq!(
        rate.from_duration(std::time::Duration::from_millis(3)),
        rate.from_ms(3)
    );
}

// Holding a pair while its send is in flight, booking from the answer.

#[test]
fn held_pair_is_not_acquired_again() {
    let mut limiter = up_limiter(2, 1);
    let a = pair(limiter.acquire(LaneId(R0.0), T0));
    assert_eq!(limiter.view(a).place, Place::Held);
    let b = pair(limiter.acquire(LaneId(R0.0), T0));
    assert_ne!(a, b);
    // Every up pair is held: nothing is in rotation until an answer comes, however long.
    assert_eq!(
        limiter.acquire(LaneId(R0.0), T0.after(ms(60_000))),
        Acquire::NoPairUp
    );
    assert_eq!(limiter.next_ready_at(LaneId(R0.0)), None);
    limiter.check_invariants();
}

#[test]
fn finish_books_next_slot_from_the_answer_not_the_pick() {
    let mut limiter = up_limiter(1, 1);
    let p = pair(limiter.acquire(LaneId(R0.0), T0));
    let answered = T0.after(ms(37));
    limiter.finish(p, answered);
    assert_eq!(limiter.view(p).next_allowed, answered.after(SECOND));
    // At one interval after the pick the pair still waits: the engine saw the send later.
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0.after(SECOND))),
        answered.after(SECOND)
    );
    assert_eq!(
        limiter.acquire(LaneId(R0.0), answered.after(SECOND)),
        Acquire::Pair(p)
    );
    limiter.check_invariants();
}

#[test]
fn finish_after_a_long_round_trip_makes_the_pair_wait_a_full_interval_from_the_answer() {
    let mut limiter = up_limiter(1, 1);
    let p = pair(limiter.acquire(LaneId(R0.0), T0));
    let answered = T0.after(ms(2_500));
    limiter.finish(p, answered);
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), answered)),
        answered.after(SECOND)
    );
}

#[test]
fn cooldown_while_held_applies_at_finish() {
    let mut limiter = up_limiter(1, 1);
    let p = pair(limiter.acquire(LaneId(R0.0), T0));
    let asked = T0.after(ms(5));
    limiter.cooldown(p, ms(30_000), asked);
    assert_eq!(limiter.view(p).place, Place::Held);
    assert_eq!(limiter.view(p).cooldown_until, asked.after(ms(30_000)));
    limiter.check_invariants();
    limiter.finish(p, T0.after(ms(6)));
    assert_eq!(limiter.view(p).place, Place::Cooling);
    let expected = slot_ceil(&limiter, asked.after(ms(30_000)));
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0.after(ms(6)))),
        expected
    );
    assert_eq!(limiter.acquire(LaneId(R0.0), expected), Acquire::Pair(p));
    limiter.check_invariants();
}

#[test]
fn cooldown_while_held_shorter_than_the_interval_keeps_the_interval_from_the_answer() {
    let mut limiter = up_limiter(1, 1);
    let p = pair(limiter.acquire(LaneId(R0.0), T0));
    limiter.cooldown(p, ms(200), T0);
    let answered = T0.after(ms(10));
    limiter.finish(p, answered);
    assert_eq!(limiter.view(p).place, Place::Booked);
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), answered)),
        answered.after(SECOND)
    );
}

#[test]
fn connection_down_while_held_parks_at_finish() {
    let mut limiter = up_limiter(2, 1);
    let p = pair(limiter.acquire(LaneId(R0.0), T0));
    limiter.set_connection(p, ConnState::Down, T0.after(ms(1)));
    assert_eq!(limiter.view(p).place, Place::Held);
    assert_eq!(limiter.view(p).conn, ConnState::Down);
    limiter.check_invariants();
    limiter.finish(p, T0.after(ms(2)));
    assert_eq!(limiter.view(p).place, Place::Parked);
    assert_eq!(limiter.counts(R0).held, 0);
    // The other pair is the only one in rotation; the parked one never comes back by itself.
    let q = send(&mut limiter, R0, T0.after(ms(3)));
    assert_ne!(p, q);
    let later = T0.after(ms(60_000));
    assert_eq!(send(&mut limiter, R0, later), q);
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), later)),
        later.after(SECOND)
    );
    limiter.check_invariants();
}

#[test]
fn connection_down_and_up_again_while_held_rejoins_at_finish() {
    let mut limiter = up_limiter(1, 1);
    let p = pair(limiter.acquire(LaneId(R0.0), T0));
    limiter.set_connection(p, ConnState::Down, T0);
    limiter.set_connection(p, ConnState::Up, T0.after(ms(1)));
    assert_eq!(limiter.view(p).place, Place::Held);
    assert_eq!(
        limiter.acquire(LaneId(R0.0), T0.after(ms(1))),
        Acquire::NoPairUp
    );
    let answered = T0.after(ms(4));
    limiter.finish(p, answered);
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), answered)),
        answered.after(SECOND)
    );
    limiter.check_invariants();
}

#[test]
fn a_parked_pair_that_was_held_comes_back_up_with_the_booking_from_its_answer() {
    let mut limiter = up_limiter(1, 1);
    let p = pair(limiter.acquire(LaneId(R0.0), T0));
    limiter.set_connection(p, ConnState::Draining, T0);
    let answered = T0.after(ms(8));
    limiter.finish(p, answered);
    limiter.set_connection(p, ConnState::Up, T0.after(ms(20)));
    assert_eq!(
        wait_until(limiter.acquire(LaneId(R0.0), T0.after(ms(20)))),
        answered.after(SECOND)
    );
}

#[test]
fn a_pair_cooled_and_recovered_while_queued_is_handed_out_once() {
    let mut limiter = up_limiter(2, 1);
    // Pair 0 leaves the ready FIFO for a short cooldown and returns behind pair 1; its old
    // place in the FIFO must not hand it out a second time.
    limiter.cooldown(PairId(0), ms(1), T0);
    let t = T0.after(ms(2));
    assert_eq!(limiter.advance(t), 1);
    assert_eq!(send(&mut limiter, R0, t), PairId(1));
    assert_eq!(send(&mut limiter, R0, t), PairId(0));
    assert!(matches!(
        limiter.acquire(LaneId(R0.0), t),
        Acquire::WaitUntil(_)
    ));
    limiter.check_invariants();
}

#[test]
fn stale_queue_entries_are_squeezed_out_when_a_ring_fills() {
    let addresses = 4;
    let mut limiter = up_limiter(addresses, 1);
    let w = limiter.slot_ticks();
    // Cool and recover every pair many times without taking any: each round leaves a stale
    // entry per pair in the ready FIFO, far more than the ring holds.
    let mut now = T0;
    for _ in 0..50 {
        for p in 0..addresses {
            limiter.cooldown(PairId(p), w, now);
        }
        now = now.after(Ticks(w.0 * 3));
        assert_eq!(limiter.advance(now), addresses);
        limiter.check_invariants();
    }
    let got: Vec<u32> = (0..addresses)
        .map(|_| send(&mut limiter, R0, now).0)
        .collect();
    assert_eq!(got, vec![0, 1, 2, 3]);
    assert!(matches!(
        limiter.acquire(LaneId(R0.0), now),
        Acquire::WaitUntil(_)
    ));
    limiter.check_invariants();
}

#[test]
fn a_zero_retry_after_leaves_a_ready_pair_ready_and_the_structure_whole() {
    let mut limiter = up_limiter(2, 1);
    // Both pairs became ready at T0; a second later one is told "retry after 0".
    let later = T0.after(SECOND);
    limiter.advance(later);
    limiter.cooldown(PairId(0), Ticks(0), later);
    limiter.check_invariants();
    assert_eq!(
        pair(limiter.acquire(LaneId(R0.0), later)),
        PairId(0),
        "still first in line"
    );
    assert_eq!(pair(limiter.acquire(LaneId(R0.0), later)), PairId(1));
    limiter.check_invariants();
}

/// A pair handed out at `t` for a send the rate allows at `allowed`: never before, at most one
/// wheel slot after.
fn due_at(limiter: &Limiter, t: Instant, allowed: Instant) {
    assert!(t >= allowed, "early: {t:?} before {allowed:?}");
    assert!(
        t <= slot_ceil(limiter, allowed),
        "late: {t:?} after {allowed:?}"
    );
}

#[test]
fn a_longer_interval_from_a_reload_holds_a_pair_that_booked_under_the_shorter_one() {
    let mut limiter = up_limiter(1, 1);
    send(&mut limiter, R0, T0);
    limiter.set_rate(R0, RegionRate::from_ms(RATE, 3_000, 1), T0.after(ms(10)));
    limiter.check_invariants();
    // Booked for T0 + 1 s under the old rate; the new one counts its send at T0.
    let t = wait_until(limiter.acquire(LaneId(R0.0), T0.after(SECOND)));
    due_at(&limiter, t, T0.after(ms(3_000)));
    let at = T0.after(ms(3_000));
    let p = pair(limiter.acquire(LaneId(R0.0), slot_ceil(&limiter, at)));
    limiter.finish(p, at);
    let t = wait_until(limiter.acquire(LaneId(R0.0), at));
    due_at(&limiter, t, at.after(ms(3_000)));
    limiter.check_invariants();
}

/// One pair at 1 s with a burst of three, all three sent at T0.
fn burst_of_three_spent() -> Limiter {
    let config = LimiterConfig {
        regions: vec![RegionRate::from_ms(RATE, 1_000, 3)],
        ..LimiterConfig::uniform(RATE, 1, 1)
    };
    let mut limiter = Limiter::new(&config, T0);
    limiter.set_connection(PairId(0), ConnState::Up, T0);
    for _ in 0..3 {
        send(&mut limiter, R0, T0);
    }
    limiter
}

/// A burst of three at T0 under 1 s, then a reload to 2 s at once: by the new rule those three
/// sends allow the next at T0 + 2 s (the burst refills one send per 2 s), and by the old rule
/// not before T0 + 1 s. A reload that moved the booking by one interval only would hand the
/// pair out at once, a fourth send within the second.
#[test]
fn a_longer_interval_from_a_reload_holds_a_pair_that_spent_its_burst() {
    let mut limiter = burst_of_three_spent();
    limiter.set_rate(R0, RegionRate::from_ms(RATE, 2_000, 3), T0);
    limiter.check_invariants();
    let t = wait_until(limiter.acquire(LaneId(R0.0), T0));
    due_at(&limiter, t, T0.after(ms(2_000)));
    // Half a second on, two and a half of the old intervals are still booked: they count as
    // two and a half of the new ones from the reload, so the next send waits a second more.
    let mut limiter = burst_of_three_spent();
    let mid = T0.after(ms(500));
    limiter.set_rate(R0, RegionRate::from_ms(RATE, 2_000, 3), mid);
    limiter.check_invariants();
    let t = wait_until(limiter.acquire(LaneId(R0.0), mid));
    due_at(&limiter, t, mid.after(ms(1_000)));
}

#[test]
fn a_ready_pair_that_the_new_interval_makes_early_leaves_the_fifo() {
    let mut limiter = up_limiter(1, 1);
    send(&mut limiter, R0, T0);
    let later = T0.after(ms(1_500));
    limiter.advance(later);
    assert_eq!(limiter.view(PairId(0)).place, Place::Ready);
    limiter.set_rate(R0, RegionRate::from_ms(RATE, 2_000, 1), later);
    limiter.check_invariants();
    let t = wait_until(limiter.acquire(LaneId(R0.0), later));
    due_at(&limiter, t, T0.after(ms(2_000)));
}

#[test]
fn a_shorter_interval_from_a_reload_frees_a_pair_sooner() {
    let mut limiter = up_limiter(1, 1);
    send(&mut limiter, R0, T0);
    limiter.set_rate(R0, RegionRate::from_ms(RATE, 200, 1), T0.after(ms(10)));
    limiter.check_invariants();
    let t = wait_until(limiter.acquire(LaneId(R0.0), T0.after(ms(10))));
    due_at(&limiter, t, T0.after(ms(200)));
}

#[test]
fn a_rate_change_keeps_a_cooldown_and_a_held_pair_books_at_the_new_interval() {
    let mut limiter = up_limiter(2, 1);
    send(&mut limiter, R0, T0);
    limiter.cooldown(PairId(0), ms(5_000), T0);
    let held = pair(limiter.acquire(LaneId(R0.0), T0));
    assert_eq!(held, PairId(1));
    limiter.set_rate(R0, RegionRate::from_ms(RATE, 2_000, 1), T0);
    limiter.check_invariants();
    assert_eq!(limiter.view(PairId(0)).cooldown_until, T0.after(ms(5_000)));
    limiter.finish(held, T0);
    assert_eq!(limiter.view(held).next_allowed, T0.after(ms(2_000)));
    let t = wait_until(limiter.acquire(LaneId(R0.0), T0));
    due_at(&limiter, t, T0.after(ms(2_000)));
    limiter.check_invariants();
}

#[test]
fn a_deferred_pair_waits_until_asked_and_keeps_its_own_booking() {
    let mut limiter = up_limiter(2, 1);
    send(&mut limiter, R0, T0);
    let held = pair(limiter.acquire(LaneId(R0.0), T0));
    assert_eq!(held, PairId(1));
    limiter.defer(held, T0.after(ms(300)), T0);
    limiter.check_invariants();
    assert_eq!(limiter.view(held).place, Place::Deferred);
    let c = limiter.counts(R0);
    assert_eq!(
        (c.cooling, c.deferred),
        (0, 1),
        "another's send, not a cooldown"
    );
    let t = wait_until(limiter.acquire(LaneId(R0.0), T0));
    due_at(&limiter, t, T0.after(ms(300)));
    let p = pair(limiter.acquire(LaneId(R0.0), slot_ceil(&limiter, T0.after(ms(300)))));
    assert_eq!(p, held, "deferred, not booked a whole interval");
    limiter.check_invariants();
}

/// 4 addresses × 1 region, the first 3 one egress group and the last another, all up.
fn grouped_limiter() -> Limiter {
    let config = LimiterConfig {
        groups: vec![3, 1],
        ..LimiterConfig::uniform(RATE, 4, 1)
    };
    let mut limiter = Limiter::new(&config, T0);
    for p in 0..4 {
        limiter.set_connection(PairId(p), ConnState::Up, T0);
    }
    limiter.check_invariants();
    limiter
}

#[test]
fn a_lane_hands_out_only_its_own_egress_groups_pairs() {
    let mut limiter = grouped_limiter();
    let (shared, own) = (limiter.lane(R0, 0), limiter.lane(R0, 1));
    let mut got: Vec<u32> = (0..3)
        .map(|_| pair(limiter.acquire(shared, T0)).0)
        .collect();
    got.sort();
    assert_eq!(got, vec![0, 1, 2]);
    assert_eq!(limiter.acquire(shared, T0), Acquire::NoPairUp);
    assert_eq!(limiter.acquire(own, T0), Acquire::Pair(PairId(3)));
    assert_eq!(limiter.acquire(own, T0), Acquire::NoPairUp);
    limiter.check_invariants();
}

#[test]
fn a_lane_whose_pairs_are_booked_waits_while_another_lane_of_the_region_sends() {
    let mut limiter = grouped_limiter();
    let own = limiter.lane(R0, 1);
    let p = pair(limiter.acquire(own, T0));
    limiter.finish(p, T0);
    assert_eq!(wait_until(limiter.acquire(own, T0)), T0.after(SECOND));
    let shared = limiter.lane(R0, 0);
    assert!(matches!(limiter.acquire(shared, T0), Acquire::Pair(_)));
    assert_eq!(limiter.next_ready_at(own), Some(T0.after(SECOND)));
    assert_eq!(limiter.next_ready_at(shared), Some(T0));
    limiter.check_invariants();
}

#[test]
fn a_regions_counts_add_up_over_its_lanes() {
    let mut limiter = grouped_limiter();
    let own = limiter.lane(R0, 1);
    pair(limiter.acquire(own, T0));
    let shared = limiter.lane_counts(limiter.lane(R0, 0));
    assert_eq!((shared.ready, shared.held), (3, 0));
    let own = limiter.lane_counts(own);
    assert_eq!((own.ready, own.held), (0, 1));
    let region = limiter.counts(R0);
    assert_eq!((region.ready, region.held, region.in_flight), (3, 1, 1));
    assert_eq!(limiter.group_of(PairId(3)), 1);
    assert_eq!(limiter.group_of(PairId(2)), 0);
    assert_eq!(limiter.group_addresses(1), 3..4);
}

#[test]
fn a_new_rate_paces_every_lane_of_its_region() {
    let mut limiter = grouped_limiter();
    let own = limiter.lane(R0, 1);
    let p = pair(limiter.acquire(own, T0));
    limiter.finish(p, T0);
    limiter.set_rate(R0, RegionRate::from_ms(RATE, 2_000, 1), T0);
    assert_eq!(wait_until(limiter.acquire(own, T0)), T0.after(ms(2_000)));
    assert_eq!(limiter.pace(R0).0, ms(2_000));
    limiter.check_invariants();
}

/// A reload to a longer interval while a pair's call is in flight: the call is the pair's last
/// send, so its answer books the new interval from then, once (not the new interval from the
/// send before it, and then another).
#[test]
fn a_reload_while_a_call_is_in_flight_books_the_new_interval_from_its_answer() {
    let mut limiter = up_limiter(1, 1);
    send(&mut limiter, R0, T0);
    let sent = T0.after(ms(1_500));
    let p = pair(limiter.acquire(LaneId(0), sent));
    limiter.set_rate(R0, RegionRate::from_ms(RATE, 3_000, 1), sent.after(ms(100)));
    let answered = sent.after(ms(200));
    limiter.finish(p, answered);
    assert_eq!(
        limiter.view(p).next_allowed,
        answered.after(ms(3_000)),
        "three seconds from the answer"
    );
    limiter.check_invariants();
}

/// A pair that has waited out its interval is ready, and reloads (to a longer interval that its
/// last send has also waited out) leave it ready: each must not count as a send of its own.
#[test]
fn reloads_do_not_push_out_a_pair_that_has_waited_out_the_new_interval() {
    let mut limiter = up_limiter(1, 1);
    let p = send(&mut limiter, R0, T0);
    let now = T0.after(ms(2_500));
    for interval_ms in [1_100, 1_200, 1_300] {
        limiter.set_rate(R0, RegionRate::from_ms(RATE, interval_ms, 1), now);
        assert_eq!(
            limiter.view(p).next_allowed,
            T0.after(ms(interval_ms)),
            "the last send plus the new interval"
        );
    }
    assert_eq!(pair(limiter.acquire(LaneId(0), now)), p, "ready now");
    limiter.check_invariants();
}
