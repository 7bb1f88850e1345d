//! The lease thread: keeps what each tenant with a `global_rate` holds on lease topped up
//! from the quota store, so the reactors' check is one compare-and-swap on a balance and never
//! waits on the network.
//!
//! Every tick it walks the current tenants: a second that begins caps each balance at one
//! chunk, a balance under its low-water mark asks for a chunk ([`crate::quota::Lease`] says
//! which), and every ask of the tick goes to the store in one round trip. When the store does
//! not answer (refused, or slower than `[quota] timeout_ms`) the tenants run on their last
//! lease, the relay granting each per second what the store last granted it; the outage is
//! said once and counted, the store is tried again every [`RETRY`], and leasing resumes when
//! it answers.
//!
//! A thread of its own, beside the reactors, as the tenants poller is: a round trip may take
//! its whole timeout. Its state is one [`Lease`] per tenant slot, allocated at start; each
//! round trip's request and answer are built as it goes (the client allocates them), which
//! touches no reactor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::quota_store::{Ask, Store};
use crate::config::{Shared, TenantWriter};
use crate::metrics::Metrics;
use crate::quota::{Lease, Step, Terms};

/// How often balances are looked at: a chunk is a twentieth of a second of the global rate by
/// default and the low-water mark half of one, so a few milliseconds keeps the lease ahead.
const TICK: Duration = Duration::from_millis(2);

/// How often a store that does not answer is tried again.
pub const RETRY: Duration = Duration::from_millis(250);

/// How often the thread looks whether it is to stop while the config has no `[quota]`.
const NAP: Duration = Duration::from_millis(50);

/// See the module docs.
pub struct Leaser {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Leaser {
    /// Leases for as long as the relay runs, while its config has `[quota]`.
    pub fn start(live: Arc<Shared>, metrics: Arc<Metrics>) -> std::io::Result<Leaser> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("quota-lease".into())
            .spawn(move || {
                let mut l = Loop::new(live, metrics);
                while !stopping.load(Relaxed) {
                    let nap = l.tick();
                    std::thread::sleep(nap);
                }
            })?;
        Ok(Leaser {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Leaser {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread's state between ticks.
struct Loop {
    live: Arc<Shared>,
    metrics: Arc<Metrics>,
    store: Option<Store>,
    /// Per tenant slot: its lease, and the tenant it is of (a slot may change hands).
    leases: Box<[(Lease, String)]>,
    /// The store answered the last round trip.
    answering: bool,
    /// When the store's outage began, and when to try it again.
    down_since: Option<Instant>,
    retry_at: Instant,
    asks: Vec<(u16, Terms)>,
}

impl Loop {
    fn new(live: Arc<Shared>, metrics: Arc<Metrics>) -> Loop {
        let slots = usize::from(live.tenant_stats().tenants_max()) + 1;
        Loop {
            live,
            metrics,
            store: None,
            leases: (0..slots)
                .map(|_| (Lease::default(), String::new()))
                .collect(),
            answering: true,
            down_since: None,
            retry_at: Instant::now(),
            asks: Vec::new(),
        }
    }

    /// One look at every tenant with a global rate; returns how long to sleep.
    fn tick(&mut self) -> Duration {
        // A writer of the table's slots for the pass, registered before the table is seen to
        // be still the current one: a reload that gives a removed tenant's slot to a new one
        // then waits for this pass (`config::TenantTable`'s docs).
        let (snap, _writing) = loop {
            let snap = self.live.load_full();
            let writing = TenantWriter::new(snap.tenants.clone());
            if self.live.load().generation == snap.generation {
                break (snap, writing);
            }
        };
        let Some(quota) = snap.config.quota.clone() else {
            if self.store.take().is_some() {
                // A reload took the store away: nothing runs on a last lease any more.
                self.answering = true;
                self.down_since = None;
                self.metrics.quota().set_store_up(true);
                self.metrics.quota().set_on_last_lease(0);
            }
            return NAP;
        };
        if !self.store.as_ref().is_some_and(|s| s.is(&quota)) {
            self.store = Some(Store::new(&quota));
        }
        let stats = self.live.tenant_stats().clone();
        let now = Instant::now();
        let now_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let try_store = self.answering || now >= self.retry_at;
        self.asks.clear();
        let mut limited = 0u64;
        for e in snap.tenants.all() {
            let Some(rate) = e.global_rate.filter(|_| e.enabled) else {
                continue;
            };
            limited += 1;
            let terms = Terms {
                rate,
                chunk: quota.chunk_for(rate),
            };
            let (lease, owner) = &mut self.leases[usize::from(e.slot)];
            if *owner != e.name {
                *lease = Lease::default();
                owner.clone_from(&e.name);
            }
            if let Some(cap) = lease.handle_second(terms, now_s) {
                stats.cap_leased(e.slot, cap);
            }
            if !self.answering {
                // A second in an outage is not the store's: the allowance stays as it was.
                lease.handle_failed();
            }
            stats.set_on_last_lease(e.slot, !self.answering);
            match lease.poll(terms, stats.leased(e.slot), try_store) {
                Step::Hold => {}
                Step::Ask { .. } => self.asks.push((e.slot, terms)),
                Step::Grant { amount } => {
                    lease.handle_self_granted(amount);
                    stats.add_leased(e.slot, u64::from(amount));
                }
            }
        }
        if !self.asks.is_empty() {
            self.ask(now_s, &stats, now);
        } else if try_store && !self.answering {
            // No tenant needs a lease now: a PING says whether the store is back, so leasing
            // resumes before the next one does.
            self.probe(now);
        }
        self.metrics
            .quota()
            .set_on_last_lease(if self.answering { 0 } else { limited });
        TICK
    }

    fn probe(&mut self, now: Instant) {
        let store = self.store.as_mut().expect("set with the quota");
        match store.ping() {
            Ok(_) => self.back(),
            Err(_) => {
                self.metrics.quota().store_error(0);
                self.retry_at = now + RETRY;
            }
        }
    }

    /// The store answers again after an outage.
    fn back(&mut self) {
        let ms = self.down_since.map_or(0, |d| d.elapsed().as_millis());
        println!(
            "quota store {} answers again after {ms} ms: leasing resumes",
            self.store.as_ref().map_or("", |s| s.addr())
        );
        self.answering = true;
        self.down_since = None;
        self.metrics.quota().set_store_up(true);
    }

    /// Sends this tick's asks in one round trip and applies the answer; on a failure the
    /// tenants that asked run on their last lease at once.
    fn ask(&mut self, now_s: u64, stats: &crate::metrics::tenants::TenantStats, now: Instant) {
        let store = self.store.as_mut().expect("set with the quota");
        let leases = &self.leases;
        let asks: Vec<Ask<'_>> = self
            .asks
            .iter()
            .map(|&(slot, t)| Ask {
                tenant: &leases[usize::from(slot)].1,
                window: now_s,
                amount: t.chunk,
                rate: t.rate,
            })
            .collect();
        let quota = self.metrics.quota();
        let answer = store.lease(&asks);
        let asked = asks.len();
        drop(asks);
        match answer {
            Ok(granted) => {
                for (&(slot, t), g) in self.asks.iter().zip(granted) {
                    self.leases[usize::from(slot)].0.handle_granted(t.chunk, g);
                    stats.add_leased(slot, u64::from(g));
                    stats.set_on_last_lease(slot, false);
                    quota.lease(g);
                }
                if !self.answering {
                    self.back();
                }
            }
            Err(why) => {
                quota.store_error(asked);
                self.retry_at = now + RETRY;
                if self.answering {
                    println!(
                        "quota store {} does not answer ({why}): tenants with a global_rate run \
                         on their last lease until it does",
                        store.addr()
                    );
                    self.answering = false;
                    self.down_since = Some(now);
                    quota.set_store_up(false);
                }
                for &(slot, t) in &self.asks {
                    let lease = &mut self.leases[usize::from(slot)].0;
                    lease.handle_failed();
                    stats.set_on_last_lease(slot, true);
                    if let Step::Grant { amount } = lease.poll(t, stats.leased(slot), false) {
                        lease.handle_self_granted(amount);
                        stats.add_leased(slot, u64::from(amount));
                    }
                }
            }
        }
    }
}
