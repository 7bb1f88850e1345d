//! Property tests with a simulated clock, against an independent model of the rules: a held
//! pair (send in flight) is never handed out again; no pair is handed out before one interval
//! after its last answer or inside a cooldown; every wait names exactly the tick the first pair
//! is handed out; "no pair up" only when every pair of the lane is down or held; a lane hands
//! out only its own egress group's pairs; after every operation each pair is in exactly one
//! place (`check_invariants`). A reload may change a region's interval at any moment, a pair's
//! call in flight included: from then on a pair waits the new interval after its last answer,
//! no less (the engine's rule now) and no more.

use bundle_relay::clock::{Instant, TickRate, Ticks};
use bundle_relay::limiter::{
    Acquire, ConnState, LaneId, Limiter, LimiterConfig, PairId, Place, RegionId, RegionRate,
};
use proptest::prelude::*;

const RATE: TickRate = TickRate::NANOS;
const ADDRESSES: u32 = 5;
const REGIONS: usize = 2;
const PAIRS: u32 = ADDRESSES * REGIONS as u32;
const INTERVAL: u64 = 1_000_000_000;
/// With egress groups: the first addresses are one group, the rest another.
const GROUPS: [u32; 2] = [2, 3];

/// Pair `i`'s lane, with `groups` groups (1: none).
fn lane_of(i: usize, groups: usize) -> usize {
    let (region, address) = (i / ADDRESSES as usize, i % ADDRESSES as usize);
    let group = usize::from(groups > 1 && address >= GROUPS[0] as usize);
    region * groups + group
}

#[derive(Clone, Debug)]
enum Op {
    /// Let time pass: a short hop (inside a slot) or a long one (across levels).
    Wait(u64),
    Acquire(u8),
    Advance,
    Cooldown(u32, u64),
    Connection(u32, ConnState),
    Finish(u32),
    /// A reload sets region `.0`'s interval to `.1` ticks.
    SetRate(u8, u64),
}

fn op() -> impl Strategy<Value = Op> {
    let state = prop_oneof![
        Just(ConnState::Down),
        Just(ConnState::Connecting),
        Just(ConnState::Up),
        Just(ConnState::Up),
        Just(ConnState::Draining),
    ];
    prop_oneof![
        3 => (0u64..100_000).prop_map(Op::Wait),
        2 => (0u64..3_000_000_000).prop_map(Op::Wait),
        1 => (0u64..40_000_000_000).prop_map(Op::Wait),
        6 => (0..2 * REGIONS as u8).prop_map(Op::Acquire),
        1 => Just(Op::Advance),
        2 => (0..PAIRS, 0u64..40_000_000_000).prop_map(|(p, t)| Op::Cooldown(p, t)),
        1 => (0..PAIRS, 0u64..2_000).prop_map(|(p, t)| Op::Cooldown(p, t)),
        1 => (0..PAIRS, state).prop_map(|(p, s)| Op::Connection(p, s)),
        4 => (0..PAIRS).prop_map(Op::Finish),
        1 => (0..REGIONS as u8, 1_000_000u64..3_000_000_000).prop_map(|(r, i)| Op::SetRate(r, i)),
    ]
}

/// The rules, kept apart from the limiter's own state.
struct Model {
    /// When the pair's last send was answered.
    last_answer: Vec<Option<u64>>,
    cooldown_until: Vec<u64>,
    conn: Vec<ConnState>,
    held: Vec<bool>,
    /// Each region's interval now.
    interval: Vec<u64>,
}

impl Model {
    fn eligible(&self, p: usize) -> u64 {
        let interval = self.interval[p / ADDRESSES as usize];
        let rate = self.last_answer[p].map_or(0, |t| t + interval);
        rate.max(self.cooldown_until[p])
    }

    fn in_rotation(&self, p: usize) -> bool {
        self.conn[p] == ConnState::Up && !self.held[p]
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_pair_is_early_every_wait_is_exact_and_each_pair_is_in_one_place(
        start in 0u64..1u64 << 50,
        grouped in any::<bool>(),
        ops in prop::collection::vec(op(), 1..300),
    ) {
        let config = LimiterConfig {
            groups: if grouped { GROUPS.to_vec() } else { Vec::new() },
            ..LimiterConfig::uniform(RATE, ADDRESSES, REGIONS)
        };
        let groups = if grouped { GROUPS.len() } else { 1 };
        let mut limiter = Limiter::new(&config, Instant(start));
        let w = limiter.slot_ticks().0;
        let mut model = Model {
            last_answer: vec![None; PAIRS as usize],
            cooldown_until: vec![0; PAIRS as usize],
            conn: vec![ConnState::Down; PAIRS as usize],
            held: vec![false; PAIRS as usize],
            interval: vec![INTERVAL; REGIONS],
        };
        let mut now = start;
        for op in ops {
            match op {
                Op::Wait(dt) => now += dt,
                Op::Advance => { limiter.advance(Instant(now)); }
                Op::Acquire(lane) => {
                    let r = lane as usize % (REGIONS * groups);
                    match limiter.acquire(LaneId(r as u8), Instant(now)) {
                    Acquire::Pair(p) => {
                        let i = p.0 as usize;
                        prop_assert_eq!(lane_of(i, groups), r, "pair {} handed out by another lane", i);
                        prop_assert_eq!(limiter.region_of(p), RegionId((r / groups) as u8));
                        prop_assert_eq!(model.conn[i], ConnState::Up, "pair {} handed out while not up", i);
                        prop_assert!(!model.held[i], "pair {} handed out while held", i);
                        prop_assert!(model.eligible(i) <= now,
                            "pair {} handed out {} ticks early", i, model.eligible(i) - now);
                        model.held[i] = true;
                    }
                    Acquire::WaitUntil(t) => {
                        let soonest = (0..PAIRS as usize)
                            .filter(|&i| lane_of(i, groups) == r && model.in_rotation(i))
                            .map(|i| model.eligible(i))
                            .min();
                        let soonest = soonest.expect("a wait although no pair is in rotation");
                        // A pair allowed inside the current slot waits for the slot's end:
                        // late by under one slot, never early.
                        prop_assert!(t.0 > now, "a wait that is already over");
                        // Rate bookings are handed out at their exact tick, wheel entries at
                        // the end of their slot.
                        prop_assert!(t >= Instant(soonest), "wait ends before any pair is allowed");
                        prop_assert!(t <= Instant(soonest.div_ceil(w) * w), "wait longer than one slot past the first allowed pair");
                    }
                    Acquire::NoPairUp => {
                        prop_assert!((0..PAIRS as usize)
                            .all(|i| lane_of(i, groups) != r || !model.in_rotation(i)));
                    }
                    }
                }
                Op::Cooldown(p, t) => {
                    limiter.cooldown(PairId(p), Ticks(t), Instant(now));
                    // A zero Retry-After asks for nothing (the pair may send now).
                    if t > 0 {
                        let c = &mut model.cooldown_until[p as usize];
                        *c = (*c).max(now + t);
                    }
                }
                Op::Connection(p, s) => {
                    limiter.set_connection(PairId(p), s, Instant(now));
                    model.conn[p as usize] = s;
                }
                Op::Finish(p) => {
                    if model.held[p as usize] {
                        limiter.finish(PairId(p), Instant(now));
                        model.held[p as usize] = false;
                        model.last_answer[p as usize] = Some(now);
                    }
                }
                Op::SetRate(r, interval) => {
                    let rate = RegionRate { interval: Ticks(interval), burst: 1 };
                    limiter.set_rate(RegionId(r), rate, Instant(now));
                    model.interval[r as usize] = interval;
                }
            }
            limiter.check_invariants();
            for i in 0..PAIRS as usize {
                let view = limiter.view(PairId(i as u32));
                prop_assert_eq!(view.cooldown_until, Instant(model.cooldown_until[i]));
                prop_assert_eq!(view.in_flight, model.held[i] as u32);
                prop_assert_eq!(view.place == Place::Held, model.held[i]);
                prop_assert_eq!(view.conn, model.conn[i]);
            }
        }
    }
}
