//! The relay's accounting: how many bundles each region admitted and how each ended, and what
//! the intake and the upstream connections did, per reactor thread. It runs whether metrics
//! are on or off: it is what the relay promises (`admitted = delivered + rejected + expired +
//! failed + in flight`), and every bundle end is counted here once, nowhere else.
//!
//! Each counter has one writer (its reactor thread) and any number of readers. [`Totals`] adds
//! the threads up. The field lists below are written once: the per-thread counters, the
//! serializable sums and the adding-up all come from them.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::limiter::REGIONS_MAX;

/// A count or a gauge written by one thread only: a plain load and store, no read-modify-write,
/// so the owner never waits on a contended cache line (on x86, a `mov` pair); readers see a
/// recent value.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Writes the counter types from one list of fields: what a thread counts per region, what it
/// counts for itself, and their serializable sums.
macro_rules! accounting {
    (
        region { $($(#[$rm:meta])* $r:ident,)* }
        thread { $($(#[$tm:meta])* $t:ident,)* }
    ) => {
        /// One thread's counts for one region.
        #[derive(Debug, Default)]
        pub struct RegionCounts {
            $($(#[$rm])* pub $r: Counter,)*
        }

        /// One region's counts, added up over threads.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(default)]
        pub struct RegionTotals {
            $($(#[$rm])* pub $r: u64,)*
        }

        impl RegionTotals {
            /// Adds one thread's counts of this region.
            pub fn add(&mut self, c: &RegionCounts) {
                $(self.$r += c.$r.get();)*
            }
        }

        /// One thread's counters, on cache lines of their own.
        #[derive(Debug, Default)]
        #[repr(align(128))]
        pub struct Stats {
            regions: [RegionCounts; REGIONS_MAX],
            $($(#[$tm])* pub $t: Counter,)*
            /// Set when the thread has exited its loop.
            pub stopped: Counter,
            /// The config generation this thread last loaded (0: no live config).
            pub config_generation: Counter,
            /// Loop iterations the thread has run: a thread whose count stops moving is wedged
            /// (the loop wakes at least every sweep period, idle or not).
            pub iterations: Counter,
            /// Non-zero once the relay is stopping: `GET /ping` answers 503 so a load balancer
            /// takes the relay out of rotation while it still serves.
            pub draining: Counter,
        }

        /// Every thread's counters added up, every region's too (serializable, so a relay in
        /// another process can report them).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(default)]
        pub struct Totals {
            $($(#[$rm])* pub $r: u64,)*
            $($(#[$tm])* pub $t: u64,)*
        }

        impl Totals {
            /// Adds another total's counters.
            pub fn merge(&mut self, o: &Totals) {
                $(self.$r += o.$r;)*
                $(self.$t += o.$t;)*
            }

            /// Adds one thread's counters, all its regions together.
            pub fn add(&mut self, s: &Stats) {
                for c in &s.regions {
                    $(self.$r += c.$r.get();)*
                }
                $(self.$t += s.$t.get();)*
            }
        }
    };
}

accounting! {
    region {
        /// Bundles that took an arena slot, bound for this region.
        admitted,
        /// Bundles the engine accepted.
        delivered,
        /// Bundles the engine refused for good (or refused unprocessed too often).
        rejected,
        /// Bundles older than the max age before an engine took them.
        expired,
        /// Bundles lost after being fully sent, or still held when shutdown's drain ended.
        failed,
        /// Gauge: bundles admitted and not yet ended.
        in_flight,
        /// Pair cooldowns started (the engine's Retry-After).
        cooldowns,
        /// Region-wide back-offs started: the engine said it throttles everyone ("Network
        /// congested. Endpoint is globally rate limited."), so no address would help.
        throttles,
        /// Bundles from the rotating port sent here by the leader strategy: its engine holds
        /// the next Jito leader.
        leader_routed,
        /// Moves of bundles from the rotating port out of this region's queue to another of
        /// their tenant's regions: this one could no longer send them within their max age
        /// (its addresses cooling, the region backing off or silent), that one could.
        rerouted,
        /// Bundles refused because this region's pairs (the soonest of a rotating bundle's
        /// regions) could not send them within their max age, behind the bundles waiting
        /// already (429).
        refused_backlog,
    }
    thread {
        /// Intake requests read (a status query that asks an engine, before its answer).
        requests,
        /// Bundles sent again after an attempt the engine did not process.
        retries,
        /// Requests refused at the in-flight cap (429).
        refused_cap,
        /// Requests answered with an error about the request itself.
        bad_requests,
        connects,
        connect_failures,
        disconnects,
        /// Gauge: pairs whose connection is in rotation.
        pairs_up,
        /// Gauge: intake connections open.
        intake_conns,
        /// Intake connections refused because the thread's table was full.
        intake_refused,
        /// Intake connections refused because their client address held its share already.
        intake_refused_per_source,
        /// Accepts that failed (out of file descriptors or memory, mostly).
        accept_errors,
        /// Intake connections closed because a request head missed its deadline (after a 408).
        intake_head_timeouts,
        /// Intake connections closed because their client stopped reading answers.
        intake_send_timeouts,
        /// Intake connections closed after the idle deadline.
        intake_idle_closes,
        /// `io_uring_enter` calls retried after EAGAIN or ENOMEM.
        ring_retries,
        /// Times a region went silent (calls unanswered, nothing received) and was paused.
        silences,
        /// Log lines dropped because the thread's log queue was full.
        log_lines_dropped,
        /// Gauge: arena slots the thread owns.
        arena_capacity,
        /// TLS sessions established, and how many of them resumed an earlier session.
        tls_handshakes,
        tls_resumed,
        /// Bundles this thread's intake handed to another thread to send, and bundles other
        /// threads handed it.
        handoffs_out,
        handoffs_in,
        /// Bundles another thread could have sent sooner that stayed here: it had no slot lent
        /// to this thread at the moment.
        handoffs_without_credit,
        /// Pairs handed out by the limiter that another relay process on the host had sent on
        /// within their interval (a takeover): each cooled until the shared ledger allowed it.
        ledger_waits,
        /// GetNextScheduledLeader calls made, and answers kept (the leader strategy).
        leader_polls,
        leader_answers,
        /// Bundles of the leader strategy that went to the soonest region instead: the
        /// leader's region had no pair ready within `leader.wait_ms`, or no answer was fresh.
        leader_fallbacks,
        /// GetTipAccounts calls made, answers kept (bots are answered that list since), and
        /// answers refused (not a list of 1 to 16 public keys: bots keep the list they had).
        tip_calls,
        tip_answers,
        tip_answers_refused,
        /// Bots' bundle-status queries forwarded to an engine (getBundleStatuses, and
        /// getInflightBundleStatuses for bundles an engine took or the tenant has no record
        /// of), those the engine answered,
        /// and those answered without it (no pair in time, an error, the relay stopping).
        status_queries,
        status_queries_answered,
        status_queries_unanswered,
        /// Searcher-authentication calls made (challenges, token requests, refreshes), those
        /// that gave a new access token, and those that failed.
        auth_calls,
        auth_tokens,
        auth_failures,
    }
}

impl Stats {
    /// This thread's counts for region `r`.
    #[inline]
    pub fn region(&self, r: usize) -> &RegionCounts {
        &self.regions[r]
    }

    /// This thread's counters, its regions added up.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        t.add(self);
        t
    }
}

impl Totals {
    /// The sums over every thread's counters.
    pub fn of<'a>(threads: impl IntoIterator<Item = &'a Stats>) -> Totals {
        let mut t = Totals::default();
        for s in threads {
            t.add(s);
        }
        t
    }

    /// The sums of several totals (one per thread, say).
    pub fn of_all(parts: &[Totals]) -> Totals {
        let mut t = Totals::default();
        for p in parts {
            t.merge(p);
        }
        t
    }

    /// admitted = delivered + rejected + expired + failed + in flight.
    pub fn identity_holds(&self) -> bool {
        self.admitted
            == self.delivered + self.rejected + self.expired + self.failed + self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_every_region_and_every_thread() {
        let (a, b) = (Stats::default(), Stats::default());
        a.region(0).admitted.add(3);
        a.region(0).delivered.add(2);
        a.region(0).in_flight.set(1);
        b.region(5).admitted.inc();
        b.region(5).expired.inc();
        b.requests.add(7);
        let t = Totals::of([&a, &b]);
        assert_eq!(
            (t.admitted, t.delivered, t.expired, t.in_flight),
            (4, 2, 1, 1)
        );
        assert_eq!(t.requests, 7);
        assert!(t.identity_holds());
        let mut r = RegionTotals::default();
        r.add(b.region(5));
        assert_eq!((r.admitted, r.expired), (1, 1));
    }
}
