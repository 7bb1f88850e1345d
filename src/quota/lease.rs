//! One tenant's lease on one relay, as a decision table (the tests name its rows):
//!
//! | the relay holds | the store | this second | step |
//! |---|---|---|---|
//! | at least the low-water mark | any | any | hold |
//! | less | answers | it granted less than asked (the global rate is used up) | hold |
//! | less | answers | otherwise | ask for a chunk |
//! | less | does not answer | less than its allowance granted | grant itself a chunk (at most up to the allowance) |
//! | less | does not answer | its allowance granted | hold |
//! | less | answers again | the relay granted itself some (the store never counted it) | as if it did not answer |
//!
//! A second that begins caps what the relay carries into it at one chunk. The allowance, for
//! a second the store does not answer in, is what the store granted this relay in its last
//! second without a failure, and at least one chunk.
//!
//! The bound. The store grants at most the global rate R per second over every relay together
//! (one atomic script per lease), and a relay carries at most one chunk C into a second, so
//! over any k whole seconds the N relays admit at most k×R + N×C. Without the store each relay
//! admits per second at most its allowance plus the chunk it carried: the sum of what they
//! were granted in their last second (R at most when that second is the same for all) plus
//! 2×N×C.

/// The store counts each tenant's leases per second of the wall clock: relays agree on a
/// second as far as their clocks agree (NTP keeps them within milliseconds).
pub const WINDOW_MS: u64 = 1_000;

/// Bytes of one tenant's lease state (the budget counts one per tenant slot).
pub const LEASE_BYTES: usize = size_of::<Lease>();

/// What a tenant leases by: its global rate and the chunk asked per lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Terms {
    /// Requests per second across relays.
    pub rate: u32,
    /// Requests asked per lease (1 to `rate`).
    pub chunk: u32,
}

impl Terms {
    /// Below this the relay asks for more, so the reactors are not left with nothing while a
    /// lease is in flight: half a chunk.
    pub fn low_water(&self) -> u64 {
        u64::from(self.chunk.div_ceil(2))
    }
}

/// What the lease thread does for a tenant now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Hold,
    /// Ask the store for `amount` of second `window`'s rate.
    Ask {
        window: u64,
        amount: u32,
    },
    /// Add `amount` to the balance without the store (it does not answer).
    Grant {
        amount: u32,
    },
}

/// See the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lease {
    /// The second (unix) the counts below are of; 0 before the first poll.
    window: u64,
    /// Granted this second, by the store or by the relay itself.
    granted: u64,
    /// The store failed an ask this second.
    failed: bool,
    /// The store granted less than asked this second: the global rate is used up.
    used_up: bool,
    /// The relay granted itself some of this second: the rest of it runs on the allowance,
    /// as the store, answering again, would grant the global rate anew.
    self_granted: bool,
    /// Granted by the store in the last second without a failure.
    last_granted: u64,
}

impl Lease {
    /// A new second: what the balance is to be capped at before the next [`Lease::poll`]
    /// (`None`: still the same second).
    pub fn handle_second(&mut self, terms: Terms, now_s: u64) -> Option<u64> {
        if now_s == self.window {
            return None;
        }
        if self.window != 0 && !self.failed {
            self.last_granted = self.granted;
        }
        *self = Lease {
            window: now_s,
            last_granted: self.last_granted,
            ..Lease::default()
        };
        Some(u64::from(terms.chunk))
    }

    /// The step for a relay holding `balance` when the store `answers` (or not).
    pub fn poll(&self, terms: Terms, balance: u64, answers: bool) -> Step {
        if balance >= terms.low_water() {
            return Step::Hold;
        }
        if !answers || self.self_granted {
            let left = self.allowance(terms).saturating_sub(self.granted);
            return match left.min(u64::from(terms.chunk)) {
                0 => Step::Hold,
                n => Step::Grant { amount: n as u32 },
            };
        }
        if self.used_up {
            return Step::Hold;
        }
        Step::Ask {
            window: self.window,
            amount: terms.chunk,
        }
    }

    /// Whether this second brings nothing more: the store granted less than asked (its rate
    /// is used up), or, without the store (`answers` false), the allowance is given.
    pub fn spent(&self, terms: Terms, answers: bool) -> bool {
        if answers && !self.self_granted {
            self.used_up
        } else {
            self.granted >= self.allowance(terms)
        }
    }

    /// The second (unix) the lease counts.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The store answered an ask of `asked` with `granted`; what of it the relay admits. In a
    /// second the relay granted itself in (the answer came late), only what its allowance
    /// has left: the rest of the second runs on the allowance, the store's late grant counted
    /// in it.
    pub fn handle_granted(&mut self, terms: Terms, asked: u32, granted: u32) -> u32 {
        let granted = if self.self_granted {
            let left = self.allowance(terms).saturating_sub(self.granted);
            granted.min(u32::try_from(left).unwrap_or(u32::MAX))
        } else {
            granted
        };
        self.granted += u64::from(granted);
        if granted < asked {
            self.used_up = true;
        }
        granted
    }

    /// The relay granted itself `amount` (the store did not answer).
    pub fn handle_self_granted(&mut self, amount: u32) {
        self.granted += u64::from(amount);
        self.self_granted = true;
    }

    /// The store did not answer an ask.
    pub fn handle_failed(&mut self) {
        self.failed = true;
    }

    /// Per second without the store: its last grant, at least a chunk.
    pub fn allowance(&self, terms: Terms) -> u64 {
        self.last_granted.max(u64::from(terms.chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Terms = Terms {
        rate: 100,
        chunk: 10,
    };

    fn at(now_s: u64) -> Lease {
        let mut l = Lease::default();
        l.handle_second(T, now_s);
        l
    }

    #[test]
    fn holding_at_least_the_low_water_mark_holds_whatever_the_store_does() {
        let l = at(7);
        assert_eq!(l.poll(T, 5, true), Step::Hold);
        assert_eq!(l.poll(T, 5, false), Step::Hold);
    }

    #[test]
    fn holding_less_with_the_store_answering_asks_a_chunk_of_this_second() {
        let l = at(7);
        assert_eq!(
            l.poll(T, 4, true),
            Step::Ask {
                window: 7,
                amount: 10
            }
        );
    }

    #[test]
    fn holding_less_after_the_store_granted_less_than_asked_holds_until_the_next_second() {
        let mut l = at(7);
        l.handle_granted(T, 10, 3);
        assert_eq!(l.poll(T, 0, true), Step::Hold);
        assert_eq!(l.handle_second(T, 8), Some(10));
        assert!(matches!(l.poll(T, 0, true), Step::Ask { window: 8, .. }));
    }

    #[test]
    fn holding_less_without_the_store_grants_itself_up_to_its_last_seconds_grant() {
        let mut l = at(7);
        for _ in 0..4 {
            l.handle_granted(T, 10, 10);
        }
        l.handle_second(T, 8);
        l.handle_failed();
        assert_eq!(l.allowance(T), 40);
        let mut total = 0;
        while let Step::Grant { amount } = l.poll(T, 0, false) {
            l.handle_self_granted(amount);
            total += amount;
        }
        assert_eq!(total, 40);
        assert_eq!(l.poll(T, 0, false), Step::Hold);
    }

    #[test]
    fn holding_less_without_the_store_counts_what_the_store_granted_this_second() {
        let mut l = at(7);
        for _ in 0..4 {
            l.handle_granted(T, 10, 10);
        }
        l.handle_second(T, 8);
        l.handle_granted(T, 10, 10);
        l.handle_failed();
        assert_eq!(l.poll(T, 0, false), Step::Grant { amount: 10 });
        l.handle_self_granted(10);
        l.handle_self_granted(10);
        // 10 from the store and 25 of its own: 5 left of the 40.
        l.handle_self_granted(5);
        assert_eq!(l.poll(T, 0, false), Step::Grant { amount: 5 });
    }

    /// A store that answers late: each ask times out (the relay grants itself), then its
    /// answer comes. The store never counted the relay's own grants, so asking it again in
    /// that second would let the relay admit its allowance and the global rate besides.
    #[test]
    fn holding_less_when_the_store_answers_again_in_a_second_the_relay_granted_itself_in_stays_within_its_allowance()
     {
        let mut l = at(7);
        for _ in 0..10 {
            l.handle_granted(T, 10, 10);
        }
        l.handle_second(T, 8);
        l.handle_failed();
        while let Step::Grant { amount } = l.poll(T, 0, false) {
            l.handle_self_granted(amount);
        }
        // The late answer to the ask that timed out: nothing of it past the allowance.
        assert_eq!(l.handle_granted(T, 10, 10), 0);
        assert_eq!(l.poll(T, 0, true), Step::Hold);
        assert!(l.spent(T, true));
        // The next second is the store's again.
        l.handle_second(T, 9);
        assert!(matches!(l.poll(T, 0, true), Step::Ask { window: 9, .. }));
    }

    #[test]
    fn a_second_with_a_failure_leaves_the_allowance_as_the_last_good_second_made_it() {
        let mut l = at(7);
        l.handle_granted(T, 10, 10);
        l.handle_granted(T, 10, 10);
        l.handle_second(T, 8);
        l.handle_failed();
        l.handle_self_granted(20);
        l.handle_second(T, 9);
        assert_eq!(l.allowance(T), 20);
        // Still down: the second is not the store's either.
        l.handle_failed();
        l.handle_second(T, 10);
        assert_eq!(l.allowance(T), 20);
        // A second the store answered, granting nothing: the floor of one chunk.
        l.handle_second(T, 11);
        assert_eq!(l.allowance(T), 10);
    }

    #[test]
    fn a_relay_the_store_never_answered_allows_itself_one_chunk_a_second() {
        let mut l = at(7);
        l.handle_failed();
        assert_eq!(l.poll(T, 0, false), Step::Grant { amount: 10 });
        l.handle_self_granted(10);
        assert_eq!(l.poll(T, 0, false), Step::Hold);
    }

    #[test]
    fn a_new_second_caps_the_carried_balance_at_one_chunk_and_the_same_second_does_not() {
        let mut l = at(7);
        assert_eq!(l.handle_second(T, 7), None);
        assert_eq!(l.handle_second(T, 8), Some(10));
    }

    /// One relay's ask of a store that grants what fits under the rate.
    fn lease_from(store: &mut std::collections::HashMap<u64, u64>, relay: &mut (Lease, u64)) {
        if let Step::Ask { window, amount } = relay.0.poll(T, relay.1, true) {
            let used = store.entry(window).or_default();
            let g = u64::from(amount).min(u64::from(T.rate) - *used);
            *used += g;
            relay.1 += g;
            relay.0.handle_granted(T, amount, g as u32);
        }
    }

    /// The bound in the module docs, played against its worst case: in the first second each
    /// relay ends holding the most it can (a chunk leased just under the low-water mark), then
    /// every relay spends as fast as it may; over the k seconds after, N relays sharing a
    /// store admit at most k×R + N×C.
    #[test]
    fn relays_sharing_a_store_admit_at_most_k_seconds_of_the_rate_plus_a_chunk_each() {
        let (n, k) = (4u64, 4u64);
        let mut store = std::collections::HashMap::new();
        let mut relays = vec![(Lease::default(), 0u64); n as usize];
        for r in relays.iter_mut() {
            r.0.handle_second(T, 1);
            lease_from(&mut store, r);
            r.1 = T.low_water() - 1;
            lease_from(&mut store, r);
        }
        let held: u64 = relays.iter().map(|r| r.1).sum();
        assert!(
            held > n * u64::from(T.chunk),
            "{held}: the case the cap is for"
        );
        let mut admitted = 0u64;
        for second in 2..=1 + k {
            for r in relays.iter_mut() {
                if let Some(cap) = r.0.handle_second(T, second) {
                    r.1 = r.1.min(cap);
                }
            }
            for _ in 0..1_000 {
                for r in relays.iter_mut() {
                    if r.1 > 0 {
                        r.1 -= 1;
                        admitted += 1;
                    }
                    lease_from(&mut store, r);
                }
            }
        }
        let bound = k * u64::from(T.rate) + n * u64::from(T.chunk);
        assert!(admitted <= bound, "{admitted} > {bound}");
        assert!(admitted >= k * u64::from(T.rate), "{admitted}");
    }
}
