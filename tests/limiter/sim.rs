//! Seeded simulation in simulated time: 4,096 addresses × 8 regions under saturating demand,
//! every send answered after a fixed round trip (`RTT`), with Retry-After storms that cool a
//! random half of the pairs for 30 s. A pair is held from its pick to its answer and its next
//! slot counts from the answer, so without storms each pair sends once per `INTERVAL + RTT`:
//! the pool's capacity is `pairs × RUN / (INTERVAL + RTT)` less what the cooldowns take.
//! Delivered sends must equal that capacity within 1 %: it is computed by an independent
//! per-pair model (each pair sends as soon as the interval after its last answer and its
//! cooldown allow), and no send may come before either.

use bundle_relay::clock::{Instant, TickRate, Ticks};
use bundle_relay::limiter::{Acquire, ConnState, LaneId, Limiter, LimiterConfig, PairId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ADDRESSES: u32 = 4_096;
const REGIONS: usize = 8;
const PAIRS: usize = ADDRESSES as usize * REGIONS;
const SECOND: u64 = 1_000_000_000;
const INTERVAL: u64 = SECOND;
const COOLDOWN: u64 = 30 * SECOND;
const RUN: u64 = 75 * SECOND;
const STORMS: usize = 3;
const T0: u64 = 1 << 40;
/// Simulated time from a send to its answer: a far region's round trip, long enough that the
/// capacity visibly depends on it (73 sends per calm pair in `RUN`, not 75).
const RTT: u64 = 40_000_000;

#[test]
fn delivered_throughput_equals_pool_capacity_through_retry_after_storms() {
    let mut rng = StdRng::seed_from_u64(0x5eed_0000);
    // Each storm: a time, and the half of the pairs it cools.
    let mut storms: Vec<(u64, Vec<u32>)> = (0..STORMS)
        .map(|_| {
            let at = T0 + rng.random_range(0..RUN - COOLDOWN);
            let pairs = (0..PAIRS as u32).filter(|_| rng.random_bool(0.5)).collect();
            (at, pairs)
        })
        .collect();
    storms.sort_by_key(|s| s.0);

    let mut limiter = Limiter::new(
        &LimiterConfig::uniform(TickRate::NANOS, ADDRESSES, REGIONS),
        Instant(T0),
    );
    for p in 0..PAIRS as u32 {
        limiter.set_connection(PairId(p), ConnState::Up, Instant(T0));
    }
    let slot = limiter.slot_ticks().0;

    let mut last_answer = vec![None::<u64>; PAIRS];
    // Sends in flight, answered in send order (one fixed round trip).
    let mut in_flight = std::collections::VecDeque::<(u64, PairId)>::new();
    let mut cooled_until = vec![0u64; PAIRS];
    let mut sends = vec![0u64; PAIRS];
    let mut delivered = 0u64;
    let mut late_max = 0u64;
    let mut now = T0;
    let mut next_storm = 0;
    while now < T0 + RUN {
        while next_storm < storms.len() && storms[next_storm].0 <= now {
            for &p in &storms[next_storm].1 {
                limiter.cooldown(PairId(p), Ticks(COOLDOWN), Instant(now));
                cooled_until[p as usize] = cooled_until[p as usize].max(now + COOLDOWN);
            }
            next_storm += 1;
        }
        while let Some(&(at, p)) = in_flight.front() {
            if at > now {
                break;
            }
            in_flight.pop_front();
            limiter.finish(p, Instant(at));
            last_answer[p.0 as usize] = Some(at);
        }
        limiter.advance(Instant(now));
        let mut wake = u64::MAX;
        for r in 0..REGIONS {
            loop {
                match limiter.acquire(LaneId(r as u8), Instant(now)) {
                    Acquire::Pair(p) => {
                        let i = p.0 as usize;
                        let allowed = last_answer[i]
                            .map_or(0, |t| t + INTERVAL)
                            .max(cooled_until[i]);
                        assert!(allowed <= now, "pair {i} sent {} ns early", allowed - now);
                        late_max = late_max.max(now - allowed.max(T0));
                        sends[i] += 1;
                        delivered += 1;
                        in_flight.push_back((now + RTT, p));
                    }
                    Acquire::WaitUntil(t) => {
                        assert!(t.0 > now, "a wait that does not move time forward");
                        wake = wake.min(t.0);
                        break;
                    }
                    // Every pair of the region is held: the next answer brings one back.
                    Acquire::NoPairUp => break,
                }
            }
        }
        let storm_at = storms.get(next_storm).map_or(u64::MAX, |s| s.0);
        let answer_at = in_flight.front().map_or(u64::MAX, |f| f.0);
        now = wake.min(storm_at).min(answer_at);
    }
    limiter.check_invariants();

    // The capacity: every pair sending as soon as the rules allow (one interval after its
    // last answer, and not inside a cooldown), with no slot rounding.
    let mut per_pair_storms = vec![Vec::new(); PAIRS];
    for (at, pairs) in &storms {
        for &p in pairs {
            per_pair_storms[p as usize].push(*at);
        }
    }
    let mut capacity = 0u64;
    for storms in &per_pair_storms {
        let (mut next, mut s) = (T0, 0);
        loop {
            while s < storms.len() && storms[s] <= next {
                next = next.max(storms[s] + COOLDOWN);
                s += 1;
            }
            if next >= T0 + RUN {
                break;
            }
            capacity += 1;
            next += RTT + INTERVAL;
        }
    }
    let shortfall = capacity as f64 - delivered as f64;
    println!(
        "delivered {delivered} of capacity {capacity} ({:.4} % short), latest send {late_max} ns after allowed (slot {slot} ns)",
        100.0 * shortfall / capacity as f64
    );
    assert!(delivered <= capacity, "more sends than the rules allow");
    assert!(
        shortfall <= capacity as f64 * 0.01,
        "throughput more than 1 % under capacity"
    );
    // The storms really bit: about half the pairs lost ~30 sends per storm that hit them.
    assert!(capacity < PAIRS as u64 * (RUN / SECOND) * 9 / 10);
    // Load spreads across the pool: pairs never cooled all sent the same number of times.
    let calm: Vec<u64> = (0..PAIRS)
        .filter(|&p| per_pair_storms[p].is_empty())
        .map(|p| sends[p])
        .collect();
    assert!(!calm.is_empty());
    let (lo, hi) = (calm.iter().min().unwrap(), calm.iter().max().unwrap());
    assert!(hi - lo <= 1, "uneven use of calm pairs: {lo}..={hi}");
    // A calm pair sends once per interval plus round trip, counted from its answers.
    assert_eq!(*hi, RUN.div_ceil(INTERVAL + RTT));
    assert!(*hi < RUN / INTERVAL);
}
