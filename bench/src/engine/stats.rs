//! What the engine saw, as JSON for people and for compare scripts.
//!
//! Counters are relaxed atomics; the delivery-latency histogram and the duplicate set sit behind
//! uncontended mutexes (the binary runs the engine on one thread), ≈20 ns each per bundle.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::validate::Reject;
use crate::report::Percentiles;

/// Highest delivery latency the histogram tracks: a minute covers any stall the faults make.
const LATENCY_NS_MAX: u64 = 60_000_000_000;
/// Three significant digits: 0.1% resolution, ≈200 KiB of buckets.
const LATENCY_SIGFIGS: u8 = 3;

/// Engine-wide counters.
#[derive(Debug, Default)]
pub struct Counters {
    pub send_bundle_calls: AtomicU64,
    pub accepted: AtomicU64,
    pub early_sends: AtomicU64,
    pub throttled: AtomicU64,
    pub storm_told: AtomicU64,
    pub rejected: [AtomicU64; Reject::ALL.len()],
    pub decode_failures: AtomicU64,
    pub duplicates: AtomicU64,
    pub other_calls: AtomicU64,
    pub at_leader: AtomicU64,
    pub send_transaction_calls: AtomicU64,
    pub transactions_accepted: AtomicU64,
    pub transactions_rejected: AtomicU64,
    pub status_calls: AtomicU64,
    pub inflight_status_calls: AtomicU64,
    pub unknown_method: AtomicU64,
    pub body_too_large: AtomicU64,
    pub connections_accepted: AtomicU64,
    pub connections_open: AtomicU64,
    pub accept_errors: AtomicU64,
    pub accept_emfile: AtomicU64,
    pub tls_handshake_failures: AtomicU64,
    pub latency_untagged: AtomicU64,
    pub latency_unsent: AtomicU64,
    pub latency_other_run: AtomicU64,
    pub auth_challenges: AtomicU64,
    pub auth_tokens_issued: AtomicU64,
    pub auth_refreshes: AtomicU64,
    pub auth_refused: AtomicU64,
    pub unauthenticated_calls: AtomicU64,
    pub expired_token_calls: AtomicU64,
}

pub fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

pub fn inc(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

/// Delivery latency (send time from the shared sent log to arrival here).
pub struct Latency {
    pub hist: Histogram<u64>,
}

impl Latency {
    pub fn new() -> Latency {
        Latency {
            hist: Histogram::new_with_bounds(1, LATENCY_NS_MAX, LATENCY_SIGFIGS)
                .expect("static histogram bounds"),
        }
    }

    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
    }
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

/// Bundle ids seen lately, to count duplicates in bounded memory: the oldest id is forgotten
/// once `capacity` are held.
pub struct DupSet {
    capacity: usize,
    set: HashSet<[u8; 32]>,
    order: VecDeque<[u8; 32]>,
}

impl DupSet {
    pub fn new(capacity: usize) -> DupSet {
        DupSet {
            capacity,
            set: HashSet::with_capacity(capacity.min(1 << 16)),
            order: VecDeque::with_capacity(capacity.min(1 << 16)),
        }
    }

    /// True if `id` was seen before (within the window).
    pub fn seen(&mut self, id: [u8; 32]) -> bool {
        if self.capacity == 0 {
            return false;
        }
        if !self.set.insert(id) {
            return true;
        }
        self.order.push_back(id);
        if self.order.len() > self.capacity {
            let old = self.order.pop_front().expect("non-empty");
            self.set.remove(&old);
        }
        false
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencyStats {
    /// From each accepted bundle's send time in the sent log to its arrival.
    #[serde(flatten)]
    pub percentiles: Percentiles,
    /// Accepted bundles without a bench tag.
    pub untagged: u64,
    /// Tagged bundles whose send time was not in the sent log.
    pub unsent: u64,
    /// Tagged bundles from another run id.
    pub other_run: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RegionStats {
    pub name: String,
    pub addr: String,
    pub accepted: u64,
    pub early_sends: u64,
    pub connections_open: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FaultRuleStats {
    pub rule: String,
    pub injected: u64,
}

/// A snapshot of everything the engine counts. `Serialize + Deserialize` so other tools can read
/// the JSON back.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EngineStats {
    pub uptime_ms: u64,
    pub interval_ms: u64,
    pub send_bundle_calls: u64,
    /// Answered OK with the bundle id (duplicates included).
    pub accepted: u64,
    pub early_sends: u64,
    /// Early sends by source address (only sources with at least one).
    pub early_sends_by_source: BTreeMap<String, u64>,
    /// Refusals by reason, early sends and fault answers included (`early_send`, `throttled`,
    /// `storm`, and the bundle check reasons).
    pub rejected: BTreeMap<String, u64>,
    /// Packets that did not decode or sanitize.
    pub decode_failures: u64,
    pub duplicates: u64,
    pub distinct_sources: u64,
    pub regions: Vec<RegionStats>,
    /// Injected faults by kind (every kind listed, zero included).
    pub faults: BTreeMap<String, u64>,
    pub fault_rules: Vec<FaultRuleStats>,
    pub latency: LatencyStats,
    pub other_calls: u64,
    /// The leader schedule's slot (a leader holds 4), also the bundle statuses' clock.
    #[serde(default)]
    pub slot_ms: u64,
    /// The landing model: an accepted bundle lands `land_ms` after acceptance iff its id's
    /// first byte is below `land_share × 256`.
    #[serde(default)]
    pub land_ms: u64,
    #[serde(default)]
    pub land_share: f64,
    /// Accepted bundles that arrived at the region holding the next leader (what
    /// GetNextScheduledLeader answered at that instant, asked about every region).
    #[serde(default)]
    pub at_leader: u64,
    /// JSON-RPC `sendTransaction` calls, and those accepted (answered with the signature) and
    /// refused as invalid; rate-limit refusals count with SendBundle's (`early_sends`, …).
    #[serde(default)]
    pub send_transaction_calls: u64,
    #[serde(default)]
    pub transactions_accepted: u64,
    #[serde(default)]
    pub transactions_rejected: u64,
    /// JSON-RPC `getBundleStatuses` and `getInflightBundleStatuses` calls that passed the
    /// per-source rule and the faults (refusals count with SendBundle's).
    #[serde(default)]
    pub status_calls: u64,
    #[serde(default)]
    pub inflight_status_calls: u64,
    /// Accepted bundles that have landed by the snapshot (their landing instant passed and they
    /// land), counted exactly at snapshot time; one forgotten after it landed still counts, one
    /// forgotten before does not.
    #[serde(default)]
    pub bundles_landed: u64,
    pub unknown_method: u64,
    pub connections_accepted: u64,
    pub connections_open: u64,
    pub accept_errors: u64,
    pub accept_emfile: u64,
    pub tls_handshake_failures: u64,
    /// Whether engine calls needed an access token (`--auth`).
    #[serde(default)]
    pub auth: bool,
    /// Lifetime of the access tokens the auth service issues (Jito's 30 minutes unless `auth`
    /// set another).
    #[serde(default)]
    pub auth_access_ttl_ms: u64,
    /// Auth service: challenges issued, GenerateAuthTokens and RefreshAccessToken answered with
    /// tokens, and calls of the three refused (bad role, shape, challenge, signature or refresh
    /// token).
    #[serde(default)]
    pub auth_challenges: u64,
    #[serde(default)]
    pub auth_tokens_issued: u64,
    #[serde(default)]
    pub auth_refreshes: u64,
    #[serde(default)]
    pub auth_refused: u64,
    /// Engine calls (gRPC and JSON-RPC) refused, with `auth`, for a missing or unknown access
    /// token, and for an expired one. They count nowhere else.
    #[serde(default)]
    pub unauthenticated_calls: u64,
    #[serde(default)]
    pub expired_token_calls: u64,
}
