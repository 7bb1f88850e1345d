//! The baseline's state and each admitted bundle's life: the regions with their limiters and
//! per-pair tonic clients, the counts (bundle-relay's `Totals`, one mutex) and rejection
//! reasons, the in-flight guard that ends every admitted bundle exactly once, and the retry
//! loop that acquires a pair, sends, and tries another pair until the bundle is delivered,
//! rejected or too old.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bundle_relay::jito::RETRY_AFTER_PREFIX;
use bundle_relay::metrics::accounting::Totals;
use bundle_relay::proto::searcher::SendBundleRequest;
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Code;
use tonic::transport::Channel;

use super::limiter::RegionLimiter;
use crate::searcher_grpc::searcher_service_client::SearcherServiceClient;

/// Distinct rejection reasons kept in the stats; more are folded into one "other" entry so a
/// misbehaving engine cannot grow the map without bound.
const REJECTION_REASONS_MAX: usize = 64;
/// The counters and the rejection reasons, as served on `GET /stats` and printed at exit.
///
/// The counters are bundle-relay's [`Totals`], of which the baseline keeps admitted,
/// delivered, rejected, expired, failed and in flight (so `admitted = delivered + rejected +
/// expired + failed + in_flight` at every quiescent point), retries (RESOURCE_EXHAUSTED,
/// UNAVAILABLE, transport), cooldowns (the engine's Retry-After), refused_cap (answered 429 at
/// the in-flight cap) and bad_requests (answered with a JSON-RPC error); the others stay 0.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    #[serde(flatten)]
    pub totals: Totals,
    pub rejection_reasons: BTreeMap<String, u64>,
}

pub(super) struct Region {
    pub(super) name: String,
    pub(super) limiter: RegionLimiter,
    /// One client per egress address, indexed like `Shared::egress`.
    pub(super) clients: Vec<SearcherServiceClient<Channel>>,
}

pub(super) struct Shared {
    pub(super) regions: Vec<Region>,
    pub(super) permits: Arc<Semaphore>,
    pub(super) max_in_flight: usize,
    /// One lock for every count, so a snapshot is consistent.
    pub(super) totals: Mutex<Totals>,
    pub(super) reasons: Mutex<HashMap<String, u64>>,
    pub(super) epoch: Instant,
    pub(super) max_age_ns: u64,
    pub(super) default_retry_after_ns: u64,
    pub(super) rotation: AtomicUsize,
    /// Set after the drain deadline: bundles still looping end as failed.
    pub(super) stopping: AtomicBool,
}

impl Shared {
    pub(super) fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Counts with the totals held.
    pub(super) fn count(&self, f: impl FnOnce(&mut Totals)) {
        f(&mut self.totals.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub(super) fn totals(&self) -> Totals {
        *self.totals.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn stats(&self) -> Stats {
        Stats {
            totals: self.totals(),
            rejection_reasons: self
                .reasons
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        }
    }

    fn record_reason(&self, reason: String) {
        let mut reasons = self.reasons.lock().unwrap_or_else(|e| e.into_inner());
        if reasons.len() >= REJECTION_REASONS_MAX && !reasons.contains_key(&reason) {
            *reasons.entry("other".to_owned()).or_default() += 1;
        } else {
            *reasons.entry(reason).or_default() += 1;
        }
    }

    /// Rotating port: the region whose limiter can send soonest; regions that can all send now
    /// (or at the same time) take turns.
    pub(super) fn pick_region(&self, now_ns: u64) -> usize {
        let n = self.regions.len();
        let start = self.rotation.fetch_add(1, Ordering::Relaxed) % n;
        let mut best = start;
        let mut best_ns = self.regions[start].limiter.head_next_ns().max(now_ns);
        for k in 1..n {
            let r = (start + k) % n;
            let t = self.regions[r].limiter.head_next_ns().max(now_ns);
            if t < best_ns {
                best = r;
                best_ns = t;
            }
        }
        best
    }
}

enum Outcome {
    Delivered,
    Rejected(String),
    Expired,
    Failed,
}

/// Ends one admitted bundle exactly once, even when its task is dropped at runtime shutdown.
pub(super) struct InFlight {
    shared: Arc<Shared>,
    done: bool,
    _permit: OwnedSemaphorePermit,
}

impl InFlight {
    /// Admits one bundle under `permit`: counted admitted and in flight until it ends.
    pub(super) fn admit(shared: &Arc<Shared>, permit: OwnedSemaphorePermit) -> InFlight {
        shared.count(|t| {
            t.admitted += 1;
            t.in_flight += 1;
        });
        InFlight {
            shared: shared.clone(),
            done: false,
            _permit: permit,
        }
    }

    fn finish(mut self, outcome: Outcome) {
        match outcome {
            Outcome::Delivered => self.shared.count(|t| t.delivered += 1),
            Outcome::Rejected(reason) => {
                self.shared.record_reason(reason);
                self.shared.count(|t| t.rejected += 1);
            }
            Outcome::Expired => self.shared.count(|t| t.expired += 1),
            Outcome::Failed => self.shared.count(|t| t.failed += 1),
        }
        self.done = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let done = self.done;
        self.shared.count(|t| {
            if !done {
                t.failed += 1;
            }
            t.in_flight -= 1;
        });
    }
}

/// Parses Jito's `... Retry after 1606ms` hint from a gRPC status message.
pub fn parse_retry_after_ms(message: &str) -> Option<u64> {
    let rest = &message[message.find(RETRY_AFTER_PREFIX)? + RETRY_AFTER_PREFIX.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].starts_with("ms") {
        return None;
    }
    rest[..digits].parse().ok()
}

/// One admitted bundle's life: acquire a pair, send, and retry on another pair until it is
/// delivered, rejected or too old.
pub(super) async fn deliver(
    shared: Arc<Shared>,
    pinned: Option<usize>,
    request: SendBundleRequest,
    admitted_ns: u64,
    guard: InFlight,
) {
    let deadline_ns = admitted_ns + shared.max_age_ns;
    let outcome = loop {
        let now_ns = shared.now_ns();
        if shared.stopping.load(Ordering::Relaxed) {
            break Outcome::Failed;
        }
        if now_ns >= deadline_ns {
            break Outcome::Expired;
        }
        let region = pinned.unwrap_or_else(|| shared.pick_region(now_ns));
        let r = &shared.regions[region];
        let pair = match r.limiter.acquire(now_ns) {
            Ok(pair) => pair,
            Err(wait_ns) => {
                // Sleep the exact wait (tokio rounds up to its millisecond tick, never early),
                // but no longer than the bundle may live, nor than one interval: a pair held by
                // an unanswered send is settled, and so freed sooner, when its answer comes.
                let wait_ns = wait_ns
                    .min(r.limiter.interval_ns())
                    .min(deadline_ns - now_ns);
                tokio::time::sleep(Duration::from_nanos(wait_ns)).await;
                continue;
            }
        };
        let mut client = r.clients[pair].clone();
        let call = client.send_bundle(request.clone());
        let result =
            match tokio::time::timeout(Duration::from_nanos(deadline_ns - now_ns), call).await {
                Ok(result) => result,
                Err(_) => break Outcome::Expired,
            };
        let status = match result {
            Ok(_) => {
                r.limiter.settle(pair, 0, shared.now_ns());
                break Outcome::Delivered;
            }
            Err(status) => status,
        };
        let retry_ns = match status.code() {
            Code::ResourceExhausted => parse_retry_after_ms(status.message())
                .map_or(shared.default_retry_after_ns, |ms| ms * 1_000_000),
            _ => 0,
        };
        let now_ns = shared.now_ns();
        r.limiter.settle(pair, retry_ns, now_ns);
        match status.code() {
            Code::ResourceExhausted => {
                r.limiter.cooldown(pair, retry_ns, now_ns);
                shared.count(|t| {
                    t.cooldowns += 1;
                    t.retries += 1;
                });
            }
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
                shared.count(|t| t.retries += 1);
            }
            code => break Outcome::Rejected(format!("{}: {code:?}: {}", r.name, status.message())),
        }
    };
    guard.finish(outcome);
}
