//! The landing model behind `getBundleStatuses` and `getInflightBundleStatuses`, sans-IO.
//!
//! Every accepted bundle is remembered with the engine-clock instant it was accepted and the
//! first signature of each of its transactions. It lands `land_ms` after acceptance iff
//! `id[0] < land_share × 256` (deterministic, so a test picks a landing bundle by its id); one
//! that does not land is `Pending` until that instant and `Failed` from then on. Memory is
//! bounded: once `capacity` bundles are held the oldest is forgotten, and an id not held reads
//! as Jito's `Invalid`.
//!
//! Slots are not this module's business beyond [`confirmation`]: the caller turns a landing
//! instant into a slot with the leader schedule's clock (`super::slot_at`).

use std::collections::{HashMap, VecDeque};

/// Slots after its landing slot at which a bundle's block counts as finalized (Solana's 32
/// confirmations).
pub const FINALIZED_AFTER_SLOTS: u64 = 32;

/// What `getInflightBundleStatuses` reports for one id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not accepted here, or forgotten.
    Invalid,
    /// Accepted; its landing instant has not come.
    Pending,
    /// Accepted and did not land.
    Failed,
    /// Landed at this engine-clock instant (ns since the engine started).
    Landed { at_ns: u64 },
}

impl State {
    /// Jito's word for it.
    pub fn name(self) -> &'static str {
        match self {
            State::Invalid => "Invalid",
            State::Pending => "Pending",
            State::Failed => "Failed",
            State::Landed { .. } => "Landed",
        }
    }
}

/// `confirmation_status` of a bundle that landed in `landed_slot`, seen at `current_slot`:
/// `processed` during that slot, `confirmed` for the next [`FINALIZED_AFTER_SLOTS`], then
/// `finalized`.
pub fn confirmation(landed_slot: u64, current_slot: u64) -> &'static str {
    match current_slot.saturating_sub(landed_slot) {
        0 => "processed",
        d if d <= FINALIZED_AFTER_SLOTS => "confirmed",
        _ => "finalized",
    }
}

struct Entry {
    accepted_ns: u64,
    /// The first signature of each transaction, raw: 64 B each instead of ≈110 B as base58
    /// strings, encoded again only when a status call asks.
    signatures: Box<[[u8; 64]]>,
}

/// Accepted bundles lately, in acceptance order.
pub struct Landing {
    capacity: usize,
    land_ns: u64,
    land_share: f64,
    by_id: HashMap<[u8; 32], Entry>,
    /// (accepted_ns, id), oldest first; `accepted_ns` never decreases along it.
    order: VecDeque<(u64, [u8; 32])>,
    /// Landing bundles accepted, less those forgotten before their landing instant.
    landers: u64,
}

impl Landing {
    /// `land_share` must lie in 0.0..=1.0 (the engine checks it at start).
    pub fn new(capacity: usize, land_ms: u64, land_share: f64) -> Landing {
        debug_assert!((0.0..=1.0).contains(&land_share), "land_share {land_share}");
        Landing {
            capacity,
            land_ns: land_ms.saturating_mul(1_000_000),
            land_share,
            by_id: HashMap::with_capacity(capacity.min(1 << 16)),
            order: VecDeque::with_capacity(capacity.min(1 << 16)),
            landers: 0,
        }
    }

    /// Whether a bundle with this id lands (when remembered long enough).
    pub fn lands(&self, id: &[u8; 32]) -> bool {
        (id[0] as f64) < self.land_share * 256.0
    }

    /// Remembers an accepted bundle. A bundle accepted again keeps its first acceptance. An
    /// instant earlier than the last one remembered (concurrent calls) is taken as that one, so
    /// landing instants stay in acceptance order, which [`Landing::landed`] relies on.
    pub fn accept(&mut self, id: [u8; 32], signatures: Box<[[u8; 64]]>, now_ns: u64) {
        if self.capacity == 0 || self.by_id.contains_key(&id) {
            return;
        }
        let now_ns = now_ns.max(self.order.back().map_or(0, |&(t, _)| t));
        if self.order.len() == self.capacity {
            let (t, old) = self.order.pop_front().expect("capacity is at least 1");
            self.by_id.remove(&old);
            if self.lands(&old) && t.saturating_add(self.land_ns) > now_ns {
                self.landers -= 1;
            }
        }
        if self.lands(&id) {
            self.landers += 1;
        }
        self.order.push_back((now_ns, id));
        self.by_id.insert(
            id,
            Entry {
                accepted_ns: now_ns,
                signatures,
            },
        );
    }

    /// The state of `id` at `now_ns`.
    pub fn state(&self, id: &[u8; 32], now_ns: u64) -> State {
        let Some(e) = self.by_id.get(id) else {
            return State::Invalid;
        };
        let at_ns = e.accepted_ns.saturating_add(self.land_ns);
        if now_ns < at_ns {
            State::Pending
        } else if self.lands(id) {
            State::Landed { at_ns }
        } else {
            State::Failed
        }
    }

    /// The first signatures of a remembered bundle, in transaction order.
    pub fn signatures(&self, id: &[u8; 32]) -> Option<&[[u8; 64]]> {
        self.by_id.get(id).map(|e| &*e.signatures)
    }

    /// Bundles that have landed by `now_ns`, forgotten ones included (but not those forgotten
    /// before they landed). Exact and cheap: landing instants follow acceptance order, so the
    /// ones still to come are the newest, walked from the back (about `land_ms` worth of
    /// bundles).
    pub fn landed(&self, now_ns: u64) -> u64 {
        let to_come = self
            .order
            .iter()
            .rev()
            .take_while(|&&(t, _)| t.saturating_add(self.land_ns) > now_ns)
            .filter(|(_, id)| self.lands(id))
            .count() as u64;
        self.landers - to_come
    }

    /// Bundles remembered now.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn id(first: u8, n: u8) -> [u8; 32] {
        let mut id = [n; 32];
        id[0] = first;
        id
    }

    fn sigs(n: u8) -> Box<[[u8; 64]]> {
        vec![[n; 64], [n.wrapping_add(1); 64]].into_boxed_slice()
    }

    #[test]
    fn a_landing_bundle_is_pending_until_land_ms_then_landed_at_that_instant() {
        let mut l = Landing::new(8, 800, 1.0);
        let a = id(0xff, 1);
        l.accept(a, sigs(1), 100 * MS);
        assert_eq!(l.state(&a, 100 * MS), State::Pending);
        assert_eq!(l.state(&a, 900 * MS - 1), State::Pending);
        assert_eq!(l.state(&a, 900 * MS), State::Landed { at_ns: 900 * MS });
        assert_eq!(l.state(&a, 10_000 * MS), State::Landed { at_ns: 900 * MS });
        assert_eq!(l.signatures(&a), Some(&[[1u8; 64], [2u8; 64]][..]));
    }

    #[test]
    fn land_share_picks_landers_by_the_first_id_byte() {
        let l = Landing::new(8, 800, 0.5);
        assert!(l.lands(&id(0, 0)) && l.lands(&id(127, 0)));
        assert!(!l.lands(&id(128, 0)) && !l.lands(&id(255, 0)));
        assert!(!Landing::new(8, 800, 0.0).lands(&id(0, 0)));
        assert!(Landing::new(8, 800, 1.0).lands(&id(255, 0)));
    }

    #[test]
    fn one_that_does_not_land_is_pending_then_failed() {
        let mut l = Landing::new(8, 150, 0.0);
        let a = id(0, 1);
        l.accept(a, sigs(1), 0);
        assert_eq!(l.state(&a, 149 * MS), State::Pending);
        assert_eq!(l.state(&a, 150 * MS), State::Failed);
        assert_eq!(l.landed(1_000 * MS), 0);
    }

    #[test]
    fn unknown_ids_are_invalid_and_the_oldest_is_forgotten_first() {
        let mut l = Landing::new(2, 0, 1.0);
        assert_eq!(l.state(&id(1, 9), 0), State::Invalid);
        for n in 1..=3 {
            l.accept(id(n, n), sigs(n), n as u64 * MS);
        }
        assert_eq!(l.len(), 2);
        assert_eq!(l.state(&id(1, 1), 5 * MS), State::Invalid);
        assert_eq!(l.signatures(&id(1, 1)), None);
        assert_eq!(l.state(&id(2, 2), 5 * MS), State::Landed { at_ns: 2 * MS });
        assert_eq!(l.state(&id(3, 3), 5 * MS), State::Landed { at_ns: 3 * MS });
    }

    #[test]
    fn a_bundle_accepted_again_keeps_its_first_acceptance() {
        let mut l = Landing::new(4, 100, 1.0);
        let a = id(7, 7);
        l.accept(a, sigs(7), 0);
        l.accept(a, sigs(8), 50 * MS);
        assert_eq!(l.len(), 1);
        assert_eq!(l.state(&a, 100 * MS), State::Landed { at_ns: 100 * MS });
        assert_eq!(l.signatures(&a).unwrap()[0], [7u8; 64]);
        assert_eq!(l.landed(100 * MS), 1);
    }

    #[test]
    fn landed_counts_passed_landers_forgotten_ones_included() {
        // Half land (first byte below 128), accepted 10 ms apart, landing 25 ms later.
        let mut l = Landing::new(3, 25, 0.5);
        let ids = [id(1, 1), id(200, 2), id(3, 3), id(4, 4), id(250, 5)];
        for (i, a) in ids.iter().enumerate() {
            l.accept(*a, sigs(i as u8), i as u64 * 10 * MS);
        }
        // Landers 1 (lands 25), 3 (45), 4 (55); 1 was forgotten after it landed.
        assert_eq!(l.landed(40 * MS), 1, "the forgotten one, at 25 ms");
        assert_eq!(l.landed(45 * MS), 2);
        assert_eq!(l.landed(55 * MS), 3);
        assert_eq!(l.landed(10_000 * MS), 3);
    }

    #[test]
    fn one_forgotten_before_it_lands_is_never_counted() {
        let mut l = Landing::new(1, 1_000, 1.0);
        l.accept(id(1, 1), sigs(1), 0);
        l.accept(id(2, 2), sigs(2), MS);
        assert_eq!(l.state(&id(1, 1), 2_000 * MS), State::Invalid);
        assert_eq!(l.landed(2_000 * MS), 1);
    }

    #[test]
    fn instants_out_of_order_are_taken_as_the_last_one() {
        let mut l = Landing::new(4, 10, 1.0);
        l.accept(id(1, 1), sigs(1), 50 * MS);
        l.accept(id(2, 2), sigs(2), 40 * MS);
        assert_eq!(l.state(&id(2, 2), 55 * MS), State::Pending);
        assert_eq!(
            l.state(&id(2, 2), 60 * MS),
            State::Landed { at_ns: 60 * MS }
        );
        assert_eq!(l.landed(59 * MS), 0);
        assert_eq!(l.landed(60 * MS), 2);
    }

    #[test]
    fn zero_capacity_remembers_nothing() {
        let mut l = Landing::new(0, 0, 1.0);
        l.accept(id(1, 1), sigs(1), 0);
        assert!(l.is_empty());
        assert_eq!(l.state(&id(1, 1), MS), State::Invalid);
        assert_eq!(l.landed(MS), 0);
    }

    #[test]
    fn confirmation_is_processed_then_confirmed_for_32_slots_then_finalized() {
        assert_eq!(confirmation(100, 100), "processed");
        assert_eq!(confirmation(100, 101), "confirmed");
        assert_eq!(confirmation(100, 132), "confirmed");
        assert_eq!(confirmation(100, 133), "finalized");
        assert_eq!(confirmation(100, 99), "processed");
    }
}
