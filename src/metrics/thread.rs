//! What one reactor thread records: request counts by method and outcome, upstream call
//! statuses, connection states, and the latency histograms. Written by its owner thread only;
//! any thread may read. The accounting (bundles admitted and how they ended) is not here: it
//! is `accounting`'s, and runs whether metrics are on or off.

use super::accounting::Counter;
use super::atomic_hist::AtomicHist;
use super::labels::{
    HistId, METHOD_SLOTS, ReqOutcome, STATUS_SLOT_TRANSPORT, STATUS_SLOTS, method_slot, status_slot,
};
use crate::grpc::Code;
use crate::jsonrpc;

/// A value that goes up and down, set by its owner thread only: the same single-writer cell.
pub type Gauge = Counter;

/// Histograms a thread keeps besides its per-region ones: overhead, delivery, limiter wait.
pub const HISTS_PER_THREAD: usize = 3;

/// One thread's metrics of one region.
#[repr(align(128))]
pub struct RegionMetrics {
    pub upstream: [Counter; STATUS_SLOTS],
    pub cooldowns_active: Gauge,
    pub conns: [Gauge; 4],
    pub reconnects: Counter,
    pub upstream_rtt: AtomicHist,
}

/// Everything one reactor thread records. Only its owner thread calls the recording methods;
/// any thread may read.
#[repr(align(128))]
pub struct ThreadMetrics {
    /// Whether anything is recorded: read on every call, never written after construction,
    /// and on the same lines as the counters the call would write.
    enabled: bool,
    pub(super) requests: [[Counter; ReqOutcome::ALL.len()]; METHOD_SLOTS],
    overhead: AtomicHist,
    delivery: AtomicHist,
    limiter_wait: AtomicHist,
    pub(super) regions: Box<[RegionMetrics]>,
}

impl ThreadMetrics {
    /// A thread's metrics for `regions` regions; with `enabled` false its histograms hold no
    /// buckets (nothing is recorded into them), so metrics off costs no memory either.
    pub(super) fn new(regions: usize, enabled: bool) -> ThreadMetrics {
        let hist = || {
            if enabled {
                AtomicHist::new()
            } else {
                AtomicHist::off()
            }
        };
        ThreadMetrics {
            enabled,
            requests: Default::default(),
            overhead: hist(),
            delivery: hist(),
            limiter_wait: hist(),
            regions: (0..regions)
                .map(|_| RegionMetrics {
                    upstream: Default::default(),
                    cooldowns_active: Gauge::default(),
                    conns: Default::default(),
                    reconnects: Counter::default(),
                    upstream_rtt: hist(),
                })
                .collect(),
        }
    }

    /// The heap bytes one thread's metrics hold beyond the record itself, for `regions`
    /// regions (the budget counts them): its region records and, recording, one histogram per
    /// measure.
    pub const fn allocation_bytes(regions: usize, enabled: bool) -> usize {
        let hists = if enabled {
            (HISTS_PER_THREAD + regions) * super::atomic_hist::ALLOCATION_BYTES
        } else {
            0
        };
        regions * std::mem::size_of::<RegionMetrics>() + hists
    }

    /// An intake request answered.
    #[inline]
    pub fn request(&self, method: Option<jsonrpc::Method>, outcome: ReqOutcome) {
        if !self.enabled {
            return;
        }
        self.requests[method_slot(method)][outcome as usize].inc();
    }
    /// An upstream call to `region` ended with gRPC status `code`.
    #[inline]
    pub fn upstream_status(&self, region: usize, code: Code) {
        if !self.enabled {
            return;
        }
        self.regions[region].upstream[status_slot(code)].inc();
    }
    /// An upstream call to `region` ended without a gRPC status.
    #[inline]
    pub fn upstream_transport_error(&self, region: usize) {
        if !self.enabled {
            return;
        }
        self.regions[region].upstream[STATUS_SLOT_TRANSPORT].inc();
    }
    /// Pairs of `region` cooling now.
    #[inline]
    pub fn set_cooldowns_active(&self, region: usize, n: u64) {
        if !self.enabled {
            return;
        }
        self.regions[region].cooldowns_active.set(n);
    }
    /// Upstream connections of `region` by state: `[down, connecting, up, draining]`.
    #[inline]
    pub fn set_conn_states(&self, region: usize, states: [u64; 4]) {
        if !self.enabled {
            return;
        }
        for (g, v) in self.regions[region].conns.iter().zip(states) {
            g.set(v);
        }
    }
    /// An upstream connection of `region` reconnected.
    #[inline]
    pub fn reconnect(&self, region: usize) {
        if !self.enabled {
            return;
        }
        self.regions[region].reconnects.inc();
    }
    /// Request read → answer written.
    #[inline]
    pub fn record_overhead_ns(&self, ns: u64) {
        if !self.enabled {
            return;
        }
        self.overhead.record(ns);
    }
    /// Request read → upstream request fully written.
    #[inline]
    pub fn record_delivery_ns(&self, ns: u64) {
        if !self.enabled {
            return;
        }
        self.delivery.record(ns);
    }
    /// Bundle queued → pair acquired.
    #[inline]
    pub fn record_limiter_wait_ns(&self, ns: u64) {
        if !self.enabled {
            return;
        }
        self.limiter_wait.record(ns);
    }
    /// Upstream request written → response complete, for `region`.
    #[inline]
    pub fn record_upstream_rtt_ns(&self, region: usize, ns: u64) {
        if !self.enabled {
            return;
        }
        self.regions[region].upstream_rtt.record(ns);
    }

    /// Whether this thread records anything. A caller that reads the clock or computes a
    /// value only to record it asks first, so with metrics off it does neither.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// This thread's metrics of `region`.
    pub fn region(&self, region: usize) -> &RegionMetrics {
        &self.regions[region]
    }

    pub(super) fn hist(&self, id: HistId) -> &AtomicHist {
        match id {
            HistId::Overhead => &self.overhead,
            HistId::Delivery => &self.delivery,
            HistId::LimiterWait => &self.limiter_wait,
            HistId::UpstreamRtt(r) => &self.regions[r].upstream_rtt,
        }
    }
}
