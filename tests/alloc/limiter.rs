//! Counting allocator: after construction, the limiter's and the arena's hot operations
//! (acquire, finish, cooldown, advance, connection changes, with sends held in flight and
//! stale ring entries squeezed out; arena acquire, write, release)
//! allocate nothing. Counted per thread, so the test harness's own threads do not interfere.

use crate::counting_alloc;
use counting_alloc::allocations;

use bundle_relay::arena::Arena;
use bundle_relay::clock::{Instant, TickRate, Ticks};
use bundle_relay::limiter::{Acquire, ConnState, LaneId, Limiter, LimiterConfig, PairId, RegionId};

#[test]
fn the_limiter_hot_path_allocates_nothing_after_construction() {
    let rate = TickRate::NANOS;
    let t0 = 1u64 << 40;
    let mut limiter = Limiter::new(&LimiterConfig::uniform(rate, 256, 8), Instant(t0));
    let before = allocations();
    for p in 0..limiter.pair_count() as u32 {
        limiter.set_connection(PairId(p), ConnState::Up, Instant(t0));
    }
    let mut now = t0;
    let mut sent = 0u64;
    let mut in_flight = [None::<PairId>; 64];
    let mut k = 0;
    for step in 0..20_000u64 {
        now += 997_000;
        limiter.advance(Instant(now));
        let region = RegionId((step % 8) as u8);
        for _ in 0..4 {
            if let Acquire::Pair(p) = limiter.acquire(LaneId(region.0), Instant(now)) {
                sent += 1;
                // Answers come in while other pairs are held: a ring of sends in flight.
                if let Some(answered) = in_flight[k].replace(p) {
                    if step % 7 == 0 {
                        limiter.cooldown(answered, Ticks(30_000_000_000), Instant(now));
                    }
                    limiter.finish(answered, Instant(now));
                }
                k = (k + 1) % in_flight.len();
            }
        }
        if step % 1_000 == 0 {
            // Every ready pair of the region leaves its FIFO for a moment: stale entries pile up.
            for a in 0..256 {
                let p = limiter.pair(a, region);
                limiter.cooldown(p, Ticks(1), Instant(now));
            }
        }
        if step % 101 == 0 {
            let p = PairId((step % 2048) as u32);
            limiter.set_connection(p, ConnState::Down, Instant(now));
            limiter.set_connection(p, ConnState::Up, Instant(now));
        }
        limiter.next_ready_at(LaneId(region.0));
        limiter.next_wakeup();
        limiter.counts(region);
    }
    let after = allocations();
    assert!(
        sent > 10_000,
        "the loop must exercise the hot path ({sent} sends)"
    );
    assert_eq!(
        after - before,
        0,
        "limiter allocated {} times",
        after - before
    );
}

#[test]
fn the_arena_allocates_nothing_after_construction() {
    let mut arena = Arena::new(64);
    let before = allocations();
    let mut held = [None; 64];
    for step in 0..10_000u32 {
        let k = (step.wrapping_mul(2_654_435_761) % 64) as usize;
        match held[k].take() {
            Some(h) => arena.release(h).unwrap(),
            None => {
                let h = arena.acquire(Instant(step as u64)).unwrap();
                let mut slot = arena.get_mut(h).unwrap();
                slot.tx_region(0)[..4].copy_from_slice(&step.to_le_bytes());
                slot.meta.tx_count = 1;
                slot.meta.tx_len[0] = 4;
                held[k] = Some(h);
            }
        }
    }
    while arena.acquire(Instant(0)).is_ok() {}
    assert!(arena.acquire(Instant(0)).is_err());
    let after = allocations();
    assert_eq!(
        after - before,
        0,
        "arena allocated {} times",
        after - before
    );
}
