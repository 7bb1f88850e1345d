//! The limiter beside seed 000's design (one mutex + min-heap per region, a faithful port of its
//! Go sketch, with an indexed heap so `Fix` is O(log n)), at 4,096 addresses × 8 regions.
//!
//! Run: `cargo bench --bench limiter -- --warm-up-time 1 --measurement-time 3`; one group
//! alone with a filter (`'^acquire/'`, `'^acquire_finish/'`, `'^cooldown_30s/'`,
//! `'^acquire_nothing_ready/'`, `'^ledger/'`). A group's checks judge only what its benchmarks ran, so a
//! filter that leaves them out leaves nothing to judge.
//!
//! Both sides see the same simulated clock and the relay's pattern: a pair is picked and held
//! (`acquire`), and its next slot is booked when its answer comes (`finish`), with
//! `IN_FLIGHT` sends outstanding, at 99 % of the pool's capacity (one send per pair per
//! second), so a pair is almost always ready and every booking cycles through the booking
//! queue inside the measured calls. The seed's design gets the same hold semantics the
//! baseline relay gives it (bench/src/baseline/limiter.rs): `acquire` pushes the picked pair's
//! key to "never" and `finish` sets it to the answer plus the interval, each under the mutex
//! with a heap fix. `acquire` times the picks alone (the answers, and the caller's record of
//! its sends in flight, run untimed between batches of 64, timed with the TSC);
//! `acquire_finish` times both, one send's whole limiter cost.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;

use bundle_relay::clock::{Clock, Instant, TickRate, Ticks};
use bundle_relay::limiter::{Acquire, ConnState, LaneId, Limiter, LimiterConfig, PairId};
use criterion::{Criterion, criterion_group, criterion_main};

const ADDRESSES: u32 = 4_096;
const REGIONS: usize = 8;
const INTERVAL_NS: u64 = 1_000_000_000;
/// A call's longest life (`upstream_timeout_ms`), which a ledger claim holds the pair past its
/// interval until the call settles.
const HOLD_NS: u64 = 1_000_000_000;
const COOLDOWN_NS: u64 = 30_000_000_000;
const T0: u64 = 1_000_000_000_000;
/// Time between calls: every pair of the pool used once per interval, at 99 % of capacity.
const STEP_NS: u64 = INTERVAL_NS * 100 / 99 / (ADDRESSES as u64 * REGIONS as u64);
/// Sends outstanding at once: picks answered this many picks later, in pick order.
const IN_FLIGHT: usize = 64;

/// Seed 000's sketch, ported: `slot`, `readyQueue` (container/heap with index upkeep),
/// `regionLimiter` with its mutex, heap and `byEgress` map.
mod seed {
    use super::*;

    pub struct Slot {
        pub egress: String,
        pub next: u64,
        pub index: usize,
    }

    pub struct RegionLimiter {
        inner: Mutex<Inner>,
        interval: u64,
    }

    struct Inner {
        slots: Vec<Slot>,
        /// The heap: slot ids ordered by `next`; `slots[id].index` is the position here.
        q: Vec<usize>,
        by_egress: HashMap<String, usize>,
    }

    impl Inner {
        fn less(&self, i: usize, j: usize) -> bool {
            self.slots[self.q[i]].next < self.slots[self.q[j]].next
        }
        fn swap(&mut self, i: usize, j: usize) {
            self.q.swap(i, j);
            let (a, b) = (self.q[i], self.q[j]);
            self.slots[a].index = i;
            self.slots[b].index = j;
        }
        fn up(&mut self, mut j: usize) {
            while j > 0 {
                let i = (j - 1) / 2;
                if i == j || !self.less(j, i) {
                    break;
                }
                self.swap(i, j);
                j = i;
            }
        }
        fn down(&mut self, i0: usize, n: usize) -> bool {
            let mut i = i0;
            loop {
                let j1 = 2 * i + 1;
                if j1 >= n {
                    break;
                }
                let mut j = j1;
                let j2 = j1 + 1;
                if j2 < n && self.less(j2, j1) {
                    j = j2;
                }
                if !self.less(j, i) {
                    break;
                }
                self.swap(i, j);
                i = j;
            }
            i > i0
        }
        /// Go's `heap.Fix`.
        fn fix(&mut self, i: usize) {
            let n = self.q.len();
            if !self.down(i, n) {
                self.up(i);
            }
        }
    }

    impl RegionLimiter {
        pub fn new(egresses: &[String], interval: u64) -> RegionLimiter {
            let slots: Vec<Slot> = egresses
                .iter()
                .enumerate()
                .map(|(i, e)| Slot {
                    egress: e.clone(),
                    next: 0,
                    index: i,
                })
                .collect();
            let by_egress = egresses
                .iter()
                .enumerate()
                .map(|(i, e)| (e.clone(), i))
                .collect();
            RegionLimiter {
                inner: Mutex::new(Inner {
                    q: (0..slots.len()).collect(),
                    slots,
                    by_egress,
                }),
                interval,
            }
        }

        /// Picks and books in one step. Returns the slot id (Go returns the string header,
        /// a copy without allocation; an id is the same cost) or the wait.
        pub fn acquire(&self, now: u64) -> Result<usize, u64> {
            self.pick(now, now + self.interval)
        }

        /// Picks and holds: the pair's key goes to "never" until [`RegionLimiter::finish`].
        pub fn acquire_held(&self, now: u64) -> Result<usize, u64> {
            self.pick(now, u64::MAX)
        }

        fn pick(&self, now: u64, next: u64) -> Result<usize, u64> {
            let mut l = self.inner.lock().unwrap();
            let head = l.q[0];
            let due = l.slots[head].next;
            if due > now {
                return Err(due - now);
            }
            l.slots[head].next = next;
            l.fix(0);
            Ok(head)
        }

        /// The held slot's send was answered at `now`: its next slot is one interval later.
        pub fn finish(&self, id: usize, now: u64) {
            let mut l = self.inner.lock().unwrap();
            l.slots[id].next = now + self.interval;
            let index = l.slots[id].index;
            l.fix(index);
        }

        pub fn cooldown(&self, egress: &str, retry_after: u64, now: u64) {
            let mut l = self.inner.lock().unwrap();
            if let Some(&s) = l.by_egress.get(egress) {
                if now + retry_after > l.slots[s].next {
                    l.slots[s].next = now + retry_after;
                    let index = l.slots[s].index;
                    l.fix(index);
                }
            }
        }

        pub fn egress(&self, id: usize) -> String {
            self.inner.lock().unwrap().slots[id].egress.clone()
        }
    }
}

fn egresses() -> Vec<String> {
    (0..ADDRESSES)
        .map(|i| format!("10.{}.{}.{}:1080", i >> 16, (i >> 8) & 255, i & 255))
        .collect()
}

fn wheel() -> Limiter {
    let config = LimiterConfig::uniform(TickRate::NANOS, ADDRESSES, REGIONS);
    let mut limiter = Limiter::new(&config, Instant(T0));
    for p in 0..limiter.pair_count() as u32 {
        limiter.set_connection(PairId(p), ConnState::Up, Instant(T0));
    }
    limiter
}

fn seeds() -> Vec<seed::RegionLimiter> {
    let e = egresses();
    (0..REGIONS)
        .map(|_| seed::RegionLimiter::new(&e, INTERVAL_NS))
        .collect()
}

/// A fixed pseudo-random sequence of pair indexes (xorshift), so both sides cool the same pairs.
fn random_pairs(n: usize) -> Vec<u32> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (ADDRESSES as u64 * REGIONS as u64)) as u32
        })
        .collect()
}

/// The relay's pattern on one side: pick, and answer the pick `IN_FLIGHT` picks ago.
trait Side {
    /// Picks a pair of region `r` at `now` and holds it; `None` when nothing is ready.
    fn pick(&mut self, r: usize, now: u64) -> Option<(usize, u32)>;
    fn answer(&mut self, held: (usize, u32), now: u64);
}

impl Side for Limiter {
    #[inline]
    fn pick(&mut self, r: usize, now: u64) -> Option<(usize, u32)> {
        match self.acquire(LaneId(r as u8), Instant(now)) {
            Acquire::Pair(p) => Some((r, p.0)),
            _ => None,
        }
    }
    #[inline]
    fn answer(&mut self, held: (usize, u32), now: u64) {
        self.finish(PairId(held.1), Instant(now));
    }
}

impl Side for Vec<seed::RegionLimiter> {
    #[inline]
    fn pick(&mut self, r: usize, now: u64) -> Option<(usize, u32)> {
        self[r].acquire_held(now).ok().map(|id| (r, id as u32))
    }
    #[inline]
    fn answer(&mut self, held: (usize, u32), now: u64) {
        self[held.0].finish(held.1 as usize, now);
    }
}

/// A side with its clock, its rotation over regions and its sends in flight.
struct Run<S> {
    side: S,
    now: u64,
    r: usize,
    waits: u64,
    in_flight: [Option<(usize, u32)>; IN_FLIGHT],
    k: usize,
}

impl<S: Side> Run<S> {
    fn new(side: S) -> Run<S> {
        Run {
            side,
            now: T0,
            r: 0,
            waits: 0,
            in_flight: [None; IN_FLIGHT],
            k: 0,
        }
    }

    /// Picks made so far: each advances the clock one step.
    fn picks(&self) -> u64 {
        (self.now - T0) / STEP_NS
    }

    #[inline]
    fn pick(&mut self) {
        self.now += STEP_NS;
        self.r = (self.r + 1) % REGIONS;
        match self.side.pick(self.r, self.now) {
            Some(held) => {
                if let Some(old) = self.in_flight[self.k].replace(held) {
                    // The slot's previous send must have been answered first.
                    self.side.answer(old, self.now);
                }
            }
            None => self.waits += 1,
        }
        self.k = (self.k + 1) % IN_FLIGHT;
    }

    /// `IN_FLIGHT` picks timed together; the answers they displace, and the bookkeeping of
    /// the sends in flight, untimed. The same picks, answers and clock as [`Run::pick`]: only
    /// the caller's own work leaves the timed span, so it holds the `acquire` calls and little
    /// else. Timed with the TSC (`Clock`, one `rdtsc` a reading) rather than the OS clock,
    /// whose reading costs more than a pick and would blur the comparison.
    fn timed_picks(&mut self, iters: u64, clock: &Clock) -> Duration {
        let mut spent = Ticks(0);
        let mut done = 0;
        let mut picks = [None; IN_FLIGHT];
        while done < iters {
            let n = (iters - done).min(IN_FLIGHT as u64) as usize;
            // Answer what the coming picks will displace, outside the timed span.
            for j in 0..n {
                let k = (self.k + j) % IN_FLIGHT;
                if let Some(old) = self.in_flight[k].take() {
                    self.side.answer(old, self.now);
                }
            }
            let (mut now, mut r) = (self.now, self.r);
            let start = clock.now();
            for pick in &mut picks[..n] {
                now += STEP_NS;
                r = (r + 1) % REGIONS;
                *pick = self.side.pick(r, now);
            }
            spent.0 += clock.now().since(start).0;
            (self.now, self.r) = (now, r);
            for pick in &mut picks[..n] {
                match pick.take() {
                    Some(held) => self.in_flight[self.k] = Some(held),
                    None => self.waits += 1,
                }
                self.k = (self.k + 1) % IN_FLIGHT;
            }
            done += n as u64;
        }
        clock.rate().to_duration(spent)
    }
}

fn bench_acquire(c: &mut Criterion) {
    let clock = Clock::calibrate();
    let mut g = c.benchmark_group("acquire");
    {
        let mut run = Run::new(wheel());
        g.bench_function("wheel", |b| {
            b.iter_custom(|iters| run.timed_picks(iters, &clock))
        });
        run.side.check_invariants();
        black_box(run.waits);
    }
    {
        let mut run = Run::new(seeds());
        g.bench_function("seed_mutex_heap", |b| {
            b.iter_custom(|iters| run.timed_picks(iters, &clock))
        });
        black_box(run.waits);
        black_box(run.side[0].egress(0));
    }
    g.finish();
}

fn bench_acquire_finish(c: &mut Criterion) {
    let mut g = c.benchmark_group("acquire_finish");
    {
        let mut run = Run::new(wheel());
        g.bench_function("wheel", |b| b.iter(|| run.pick()));
        run.side.check_invariants();
        let picks = run.picks();
        assert!(
            picks == 0 || run.waits * 100 < picks,
            "at 99 % of capacity nearly every pick must find a pair ({} waits in {picks})",
            run.waits
        );
    }
    {
        let mut run = Run::new(seeds());
        g.bench_function("seed_mutex_heap", |b| b.iter(|| run.pick()));
        black_box(run.waits);
    }
    g.finish();
}

fn bench_cooldown(c: &mut Criterion) {
    let order = random_pairs(1 << 16);
    let names = egresses();
    let mut g = c.benchmark_group("cooldown_30s");
    {
        let mut limiter = wheel();
        let (mut now, mut k) = (T0, 0usize);
        g.bench_function("wheel", |b| {
            b.iter(|| {
                now += STEP_NS;
                k = (k + 1) & (order.len() - 1);
                limiter.cooldown(
                    PairId(order[k]),
                    TickRate::NANOS.from_ns(COOLDOWN_NS),
                    Instant(now),
                );
            })
        });
        limiter.check_invariants();
    }
    {
        let seeds = seeds();
        let (mut now, mut k) = (T0, 0usize);
        g.bench_function("seed_mutex_heap", |b| {
            b.iter(|| {
                now += STEP_NS;
                k = (k + 1) & (order.len() - 1);
                let p = order[k] as usize;
                seeds[p / ADDRESSES as usize].cooldown(
                    &names[p % ADDRESSES as usize],
                    COOLDOWN_NS,
                    now,
                );
            })
        });
    }
    g.finish();
}

fn bench_nothing_ready(c: &mut Criterion) {
    let mut g = c.benchmark_group("acquire_nothing_ready");
    {
        let mut limiter = wheel();
        for p in 0..limiter.pair_count() as u32 {
            limiter.cooldown(PairId(p), TickRate::NANOS.from_ns(COOLDOWN_NS), Instant(T0));
        }
        let (mut now, mut r) = (T0, 0usize);
        g.bench_function("wheel", |b| {
            b.iter(|| {
                now += 1;
                r = (r + 1) % REGIONS;
                black_box(limiter.acquire(LaneId(r as u8), Instant(now)))
            })
        });
    }
    {
        let seeds = seeds();
        let names = egresses();
        for s in &seeds {
            for n in &names {
                s.cooldown(n, COOLDOWN_NS, T0);
            }
        }
        let (mut now, mut r) = (T0, 0usize);
        g.bench_function("seed_mutex_heap", |b| {
            b.iter(|| {
                now += 1;
                r = (r + 1) % REGIONS;
                black_box(seeds[r].acquire(now))
            })
        });
    }
    g.finish();
}

/// The pacing ledger's share of one send when no other process books in it (every send pays
/// it): the claim when the pair is handed out and the booking when its call ends, the pool
/// cycled at the same 99 % of capacity, so every claim finds its pair free. Beside it, the
/// limiter's own acquire + finish from `acquire_finish/wheel`.
fn bench_ledger(c: &mut Criterion) {
    use bundle_relay::limiter::ledger::{Ledger, pair_key};
    let pairs = ADDRESSES as usize * REGIONS;
    let ledger = Ledger::private(pairs);
    let slots: Vec<u32> = (0..pairs)
        .map(|p| {
            let source = format!("10.{}.{}.{}", p / 65_536, (p / 256) % 256, p % 256);
            ledger.slot(pair_key(&source, "r")).unwrap()
        })
        .collect();
    let mut g = c.benchmark_group("ledger");
    let (mut now, mut i, mut refused) = (T0, 0usize, 0u64);
    g.bench_function("claim_settle", |b| {
        b.iter(|| {
            now += STEP_NS;
            i = (i + 1) % pairs;
            let slot = slots[i];
            match ledger.claim(
                slot,
                Instant(now),
                Ticks(INTERVAL_NS),
                Ticks(0),
                Ticks(HOLD_NS),
            ) {
                Ok(booked) => {
                    ledger.settle(slot, booked, Ticks(HOLD_NS), Instant(now + INTERVAL_NS));
                }
                Err(_) => refused += 1,
            }
        })
    });
    g.finish();
    black_box(refused);
}

criterion_group!(
    benches,
    bench_acquire,
    bench_acquire_finish,
    bench_cooldown,
    bench_nothing_ready,
    bench_ledger
);
criterion_main!(benches);
