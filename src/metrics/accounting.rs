//! The relay's accounting: how many bundles were admitted and how each ended, and what the
//! intake and the upstream connections did, per thread. Each counter has one writer (its
//! reactor thread) and any number of readers; [`Totals`] adds the threads up.

use std::sync::atomic::{AtomicU64, Ordering};

/// A counter written by one thread only: a plain load and store, no read-modify-write, so the
/// owner never waits on a contended cache line; readers see a recent value.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn bump(&self) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    #[inline]
    pub fn store(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One thread's counters, on cache lines of their own.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Stats {
    pub requests: Counter,
    pub admitted: Counter,
    pub delivered: Counter,
    pub rejected: Counter,
    pub expired: Counter,
    pub failed: Counter,
    /// Gauge: arena slots held.
    pub in_flight: Counter,
    pub retries: Counter,
    pub cooldowns: Counter,
    pub refused_cap: Counter,
    pub bad_requests: Counter,
    pub connects: Counter,
    pub connect_failures: Counter,
    pub disconnects: Counter,
    /// Gauge: pairs whose connection is up.
    pub pairs_up: Counter,
    /// Gauge.
    pub intake_conns: Counter,
    /// Intake connections refused because the thread's table was full.
    pub intake_refused: Counter,
    /// Intake connections refused because their client address held its share already.
    pub intake_refused_per_source: Counter,
    /// Accepts that failed (out of file descriptors or memory, mostly).
    pub accept_errors: Counter,
    /// Intake connections closed because a request head missed its deadline (after a 408).
    pub intake_head_timeouts: Counter,
    /// Intake connections closed because their client stopped reading answers.
    pub intake_send_timeouts: Counter,
    /// Intake connections closed after the idle deadline.
    pub intake_idle_closes: Counter,
    /// `io_uring_enter` calls retried after EAGAIN or ENOMEM.
    pub ring_retries: Counter,
    /// Times a region went silent (calls unanswered, nothing received) and was paused.
    pub silences: Counter,
    /// Log lines dropped because the thread's log queue was full.
    pub log_lines_dropped: Counter,
    /// Gauge.
    pub arena_capacity: Counter,
    /// TLS sessions established, and how many of them resumed an earlier session.
    pub tls_handshakes: Counter,
    pub tls_resumed: Counter,
    /// Set when the thread has exited its loop.
    pub stopped: Counter,
    /// The config generation this thread last loaded (0: no live config).
    pub config_generation: Counter,
    /// Loop iterations the thread has run: a thread whose count stops moving is wedged
    /// (the loop wakes at least every sweep period, idle or not).
    pub iterations: Counter,
}

/// All threads' counters added up (serializable, so a relay in another process can report
/// them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Totals {
    pub requests: u64,
    pub admitted: u64,
    pub delivered: u64,
    pub rejected: u64,
    pub expired: u64,
    pub failed: u64,
    pub in_flight: u64,
    pub retries: u64,
    pub cooldowns: u64,
    pub refused_cap: u64,
    pub bad_requests: u64,
    pub connects: u64,
    pub connect_failures: u64,
    pub disconnects: u64,
    pub pairs_up: u64,
    pub intake_conns: u64,
    pub intake_refused: u64,
    pub intake_refused_per_source: u64,
    pub accept_errors: u64,
    pub intake_head_timeouts: u64,
    pub intake_send_timeouts: u64,
    pub intake_idle_closes: u64,
    pub ring_retries: u64,
    pub silences: u64,
    pub log_lines_dropped: u64,
    pub arena_capacity: u64,
    pub tls_handshakes: u64,
    pub tls_resumed: u64,
}

impl Totals {
    /// admitted = delivered + rejected + expired + failed + in flight.
    pub fn identity_holds(&self) -> bool {
        self.admitted
            == self.delivered + self.rejected + self.expired + self.failed + self.in_flight
    }

    /// Adds one thread's counters.
    pub fn add(&mut self, s: &Stats) {
        self.requests += s.requests.get();
        self.admitted += s.admitted.get();
        self.delivered += s.delivered.get();
        self.rejected += s.rejected.get();
        self.expired += s.expired.get();
        self.failed += s.failed.get();
        self.in_flight += s.in_flight.get();
        self.retries += s.retries.get();
        self.cooldowns += s.cooldowns.get();
        self.refused_cap += s.refused_cap.get();
        self.bad_requests += s.bad_requests.get();
        self.connects += s.connects.get();
        self.connect_failures += s.connect_failures.get();
        self.disconnects += s.disconnects.get();
        self.pairs_up += s.pairs_up.get();
        self.intake_conns += s.intake_conns.get();
        self.intake_refused += s.intake_refused.get();
        self.intake_refused_per_source += s.intake_refused_per_source.get();
        self.accept_errors += s.accept_errors.get();
        self.intake_head_timeouts += s.intake_head_timeouts.get();
        self.intake_send_timeouts += s.intake_send_timeouts.get();
        self.intake_idle_closes += s.intake_idle_closes.get();
        self.ring_retries += s.ring_retries.get();
        self.silences += s.silences.get();
        self.log_lines_dropped += s.log_lines_dropped.get();
        self.arena_capacity += s.arena_capacity.get();
        self.tls_handshakes += s.tls_handshakes.get();
        self.tls_resumed += s.tls_resumed.get();
    }
}
