//! The seed limiter as a decision table and as a seeded property test on a simulated clock.

use bundle_relay_bench::baseline::limiter::{IndexedHeap, RegionLimiter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MS: u64 = 1_000_000;

#[test]
fn all_pairs_ready_at_start_are_handed_out_once_each_then_the_wait_is_one_interval() {
    let l = RegionLimiter::new(3, 10 * MS);
    let mut got: Vec<usize> = (0..3).map(|_| l.acquire(0).unwrap()).collect();
    got.sort();
    assert_eq!(got, [0, 1, 2]);
    assert_eq!(l.acquire(0), Err(10 * MS));
    assert_eq!(l.acquire(4 * MS), Err(6 * MS));
}

#[test]
fn acquire_books_the_next_slot_at_now_plus_interval() {
    let l = RegionLimiter::new(1, 10 * MS);
    assert_eq!(l.acquire(25 * MS), Ok(0));
    assert_eq!(l.pair_next_ns(0), 35 * MS);
    assert_eq!(l.acquire(34 * MS), Err(MS));
    assert_eq!(l.acquire(35 * MS), Ok(0));
}

#[test]
fn a_pair_idle_for_long_is_booked_from_now_not_from_its_old_time() {
    let l = RegionLimiter::new(1, 10 * MS);
    assert_eq!(l.acquire(0), Ok(0));
    assert_eq!(l.acquire(1000 * MS), Ok(0));
    assert_eq!(l.acquire(1005 * MS), Err(5 * MS));
}

#[test]
fn cooldown_longer_than_the_booking_pushes_the_pair_to_now_plus_retry_after() {
    let l = RegionLimiter::new(1, 10 * MS);
    assert_eq!(l.acquire(0), Ok(0));
    l.cooldown(0, 1606 * MS, 2 * MS);
    assert_eq!(l.pair_next_ns(0), 1608 * MS);
    assert_eq!(l.acquire(1607 * MS), Err(MS));
    assert_eq!(l.acquire(1608 * MS), Ok(0));
}

#[test]
fn cooldown_shorter_than_the_booking_keeps_the_booking() {
    let l = RegionLimiter::new(1, 100 * MS);
    assert_eq!(l.acquire(0), Ok(0));
    l.cooldown(0, 5 * MS, MS);
    assert_eq!(l.pair_next_ns(0), 100 * MS);
}

#[test]
fn cooldown_of_the_head_hands_out_the_next_pair_instead() {
    let l = RegionLimiter::new(2, 10 * MS);
    let a = l.acquire(0).unwrap();
    let b = l.acquire(0).unwrap();
    l.cooldown(a, 50 * MS, 0);
    assert_eq!(l.acquire(10 * MS), Ok(b));
    assert_eq!(l.acquire(10 * MS), Err(10 * MS));
    assert_eq!(l.acquire(20 * MS), Ok(b));
    assert_eq!(l.acquire(30 * MS), Ok(b));
    assert_eq!(l.acquire(40 * MS), Ok(b));
    // At 50 ms both are due: each is handed out once, then nothing until 60 ms.
    let mut due = [l.acquire(50 * MS).unwrap(), l.acquire(50 * MS).unwrap()];
    due.sort();
    assert_eq!(due, [0, 1]);
    assert_eq!(l.acquire(50 * MS), Err(10 * MS));
}

#[test]
fn head_hint_follows_the_earliest_pair() {
    let l = RegionLimiter::new(2, 10 * MS);
    assert_eq!(l.head_next_ns(), 0);
    l.acquire(0).unwrap();
    assert_eq!(l.head_next_ns(), 0);
    l.acquire(3 * MS).unwrap();
    assert_eq!(l.head_next_ns(), 10 * MS);
}

#[test]
fn indexed_heap_pops_in_key_order_after_arbitrary_changes() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut heap = IndexedHeap::new(64);
    let mut keys = vec![0u64; 64];
    for _ in 0..5000 {
        let pair = rng.random_range(0..64);
        let key = rng.random_range(0..1_000_000);
        heap.set(pair, key);
        keys[pair] = key;
        let (head, head_key) = heap.peek();
        assert_eq!(head_key, *keys.iter().min().unwrap());
        assert_eq!(keys[head], head_key);
    }
}

/// Random acquires and cooldowns on a simulated clock against a model of next-allowed times:
/// a pair is never handed out before its next-allowed time, the one handed out is an earliest,
/// the wait reported is exact, and a cooldown is honoured exactly without shortening a later
/// booking.
#[test]
fn seeded_simulation_never_hands_out_early_and_honours_cooldowns_exactly() {
    for seed in 0..20u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let pairs = rng.random_range(1..40);
        let interval_ns = rng.random_range(1..50) * MS;
        let l = RegionLimiter::new(pairs, interval_ns);
        let mut model = vec![0u64; pairs];
        let mut last_handout: Vec<Option<u64>> = vec![None; pairs];
        let mut cooled_until = vec![0u64; pairs];
        let mut now = 0u64;
        for step in 0..4000 {
            now += rng.random_range(0..3 * MS);
            if rng.random_bool(0.2) {
                let pair = rng.random_range(0..pairs);
                let retry_ns = rng.random_range(0..200) * MS;
                l.cooldown(pair, retry_ns, now);
                model[pair] = model[pair].max(now + retry_ns);
                cooled_until[pair] = cooled_until[pair].max(now + retry_ns);
                assert_eq!(
                    l.pair_next_ns(pair),
                    model[pair],
                    "seed {seed} step {step}: cooldown"
                );
                continue;
            }
            let earliest = *model.iter().min().unwrap();
            match l.acquire(now) {
                Ok(pair) => {
                    assert!(
                        model[pair] <= now,
                        "seed {seed} step {step}: pair {pair} handed out early"
                    );
                    assert_eq!(
                        model[pair], earliest,
                        "seed {seed} step {step}: not the earliest pair"
                    );
                    assert!(
                        now >= cooled_until[pair],
                        "seed {seed} step {step}: inside a cooldown"
                    );
                    if let Some(prev) = last_handout[pair] {
                        assert!(
                            now >= prev + interval_ns,
                            "seed {seed} step {step}: inside an interval"
                        );
                    }
                    last_handout[pair] = Some(now);
                    model[pair] = now + interval_ns;
                }
                Err(wait) => {
                    assert!(
                        earliest > now,
                        "seed {seed} step {step}: a ready pair was refused"
                    );
                    assert_eq!(
                        wait,
                        earliest - now,
                        "seed {seed} step {step}: wait is not exact"
                    );
                }
            }
        }
    }
}

#[test]
fn a_held_pair_is_not_handed_out_again_until_its_send_is_answered() {
    let l = RegionLimiter::new(1, 10 * MS).holding_in_flight(2_000 * MS);
    assert_eq!(l.acquire(0), Ok(0));
    // Unanswered after more than one interval: still held.
    assert_eq!(l.acquire(50 * MS), Err(1_950 * MS));
}

#[test]
fn settle_counts_the_interval_from_the_answer() {
    let l = RegionLimiter::new(1, 10 * MS).holding_in_flight(2_000 * MS);
    assert_eq!(l.acquire(0), Ok(0));
    l.settle(0, 0, 7 * MS);
    assert_eq!(l.pair_next_ns(0), 17 * MS);
    assert_eq!(l.acquire(16 * MS), Err(MS));
    assert_eq!(l.acquire(17 * MS), Ok(0));
}

#[test]
fn settle_with_a_retry_after_longer_than_the_interval_waits_that_long() {
    let l = RegionLimiter::new(1, 10 * MS).holding_in_flight(2_000 * MS);
    assert_eq!(l.acquire(0), Ok(0));
    l.settle(0, 30_000 * MS, 5 * MS);
    assert_eq!(l.pair_next_ns(0), 30_005 * MS);
}
