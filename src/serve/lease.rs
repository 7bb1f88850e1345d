//! The lease thread: keeps what each tenant with a `global_rate` holds on lease topped up
//! from the quota store, so the reactors' check is one compare-and-swap on a balance and never
//! waits on the network.
//!
//! Every tick it walks the current tenants: a second that begins caps each balance at one
//! chunk, a balance under its low-water mark asks for a chunk ([`crate::quota::Lease`] says
//! which), and every ask of the tick goes to the store in one round trip. The round trip is
//! the store thread's ([`Worker`]): this loop never waits on it, so while the store is slow or
//! silent it goes on granting. A round trip not answered within `[quota] timeout_ms`, or
//! failed, is an outage: the tenants run on their last lease, the relay granting each per
//! second what the store last granted it; the store is tried again (a PING) every [`RETRY`]
//! once its thread is free, and leasing resumes when it answers. An idle relay (no tenant
//! asking) PINGs once every [`IDLE_PING`], so an outage shows before the next ask needs the
//! store. Outages are said once, and at most once every [`SAY_EVERY`] with how many came
//! between, so a flapping store does not flood the log.
//!
//! A thread of its own, beside the reactors, as the tenants poller is. Its state is one
//! [`Lease`] per tenant slot, allocated at start; each round trip's request and answer are
//! built as it goes (the client allocates them), which touches no reactor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::quota_store::{Ask, Store};
use crate::config::{Quota, Shared, TenantWriter};
use crate::metrics::Metrics;
use crate::metrics::tenants::TenantStats;
use crate::quota::{Lease, Step, Terms};

/// How often balances are looked at: a chunk is a twentieth of a second of the global rate by
/// default and the low-water mark half of one, so a few milliseconds keeps the lease ahead.
const TICK: Duration = Duration::from_millis(2);

/// How often a store that does not answer is tried again.
pub const RETRY: Duration = Duration::from_millis(250);

/// A relay whose tenants ask nothing PINGs the store this often, so an outage is known (and
/// shown) before a tenant needs the store.
pub const IDLE_PING: Duration = Duration::from_secs(1);

/// An outage is said at once, and then at most this often (with the count between).
pub const SAY_EVERY: Duration = Duration::from_secs(10);

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
    /// Stops the loop, which never waits on the store; a store thread in the middle of a round
    /// trip is not waited for (it ends with the process, or when its call returns).
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One lease asked: the tenant (its slot, the slot's epoch then, its name), the second, how
/// much, and its global rate.
struct Asked {
    slot: u16,
    epoch: u32,
    tenant: String,
    terms: Terms,
    window: u64,
}

enum Request {
    Lease(Vec<Asked>),
    Ping,
}

enum Answer {
    Lease(Vec<Asked>, Result<Vec<Result<u32, String>>, String>),
    Ping(Result<(), String>),
}

/// The store's own thread: one round trip at a time, asked and answered through channels.
/// Dropping it closes the channel; the thread ends once its round trip does.
struct Worker {
    quota: Quota,
    requests: Sender<Request>,
    answers: Receiver<Answer>,
}

impl Worker {
    fn start(quota: &Quota) -> std::io::Result<Worker> {
        let (requests, asked) = mpsc::channel::<Request>();
        let (answered, answers) = mpsc::channel::<Answer>();
        let mut store = Store::new(quota);
        std::thread::Builder::new()
            .name("quota-store".into())
            .spawn(move || {
                while let Ok(request) = asked.recv() {
                    let answer = match request {
                        Request::Lease(asked) => {
                            let asks: Vec<Ask<'_>> = asked
                                .iter()
                                .map(|a| Ask {
                                    tenant: &a.tenant,
                                    window: a.window,
                                    amount: a.terms.chunk,
                                    rate: a.terms.rate,
                                })
                                .collect();
                            let result = store.lease(&asks);
                            drop(asks);
                            Answer::Lease(asked, result)
                        }
                        Request::Ping => Answer::Ping(store.ping().map(|_| ())),
                    };
                    if answered.send(answer).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Worker {
            quota: quota.clone(),
            requests,
            answers,
        })
    }

    /// Whether it talks to the store `q` names as `q` says (a reload of the chunk alone keeps
    /// it, and the round trip it is on).
    fn serves(&self, q: &Quota) -> bool {
        self.quota.redis == q.redis
            && self.quota.key_prefix == q.key_prefix
            && self.quota.timeout_ms == q.timeout_ms
    }
}

/// The round trip the store thread is on.
struct InFlight {
    sent: Instant,
    /// Its answer is overdue: the outage it meant was declared.
    overdue: bool,
}

/// The thread's state between ticks.
struct Loop {
    live: Arc<Shared>,
    metrics: Arc<Metrics>,
    worker: Option<Worker>,
    in_flight: Option<InFlight>,
    /// Per tenant slot: its lease, and the tenant it is of (a slot may change hands).
    leases: Box<[(Lease, String)]>,
    /// Per tenant slot: until when its leases run on its last one, the store having answered
    /// its lease with an error (a key of another type) while answering the others'.
    refused_until: Box<[Option<Instant>]>,
    /// When a tenant's refused lease was last said.
    refusal_said_at: Option<Instant>,
    /// The store answered the last round trip.
    answering: bool,
    /// When the store's outage began, and when to try it again.
    down_since: Option<Instant>,
    retry_at: Instant,
    /// When the store last answered (or was last asked, for the idle PING).
    last_round_trip: Instant,
    /// When an outage was last said, whether this one was, and how many went unsaid since.
    said_at: Option<Instant>,
    outage_said: bool,
    unsaid: u32,
}

impl Loop {
    fn new(live: Arc<Shared>, metrics: Arc<Metrics>) -> Loop {
        let slots = usize::from(live.tenant_stats().tenants_max()) + 1;
        Loop {
            live,
            metrics,
            worker: None,
            in_flight: None,
            leases: (0..slots)
                .map(|_| (Lease::default(), String::new()))
                .collect(),
            refused_until: vec![None; slots].into_boxed_slice(),
            refusal_said_at: None,
            answering: true,
            down_since: None,
            retry_at: Instant::now(),
            last_round_trip: Instant::now(),
            said_at: None,
            outage_said: false,
            unsaid: 0,
        }
    }

    /// One look at every tenant with a global rate; returns how long to sleep.
    fn tick(&mut self) -> Duration {
        // A writer of the table's slots for the pass, registered before the table is seen to
        // be still the current one: a reload that gives a removed tenant's slot to a new one
        // then waits for this pass (`config::TenantTable`'s docs). The pass never waits on the
        // store, so neither does such a reload.
        let (snap, _writing) = loop {
            let snap = self.live.load_full();
            let writing = TenantWriter::new(snap.tenants.clone());
            if self.live.load().generation == snap.generation {
                break (snap, writing);
            }
        };
        let Some(quota) = snap.config.quota.clone() else {
            if self.worker.take().is_some() {
                // A reload took the store away: nothing runs on a last lease any more.
                self.in_flight = None;
                self.answering = true;
                self.down_since = None;
                self.metrics.quota().set_store_up(true);
                self.metrics.quota().set_on_last_lease(0);
            }
            return NAP;
        };
        if !self.worker.as_ref().is_some_and(|w| w.serves(&quota)) {
            // A new store (or the first): its own thread; the old one's answer is not waited for.
            self.in_flight = None;
            self.worker = None;
            if Instant::now() >= self.retry_at {
                match Worker::start(&quota) {
                    Ok(w) => self.worker = Some(w),
                    Err(e) => {
                        // Tried again after a while; meanwhile the tenants run on their last
                        // lease.
                        let now = Instant::now();
                        self.retry_at = now + RETRY;
                        self.down(
                            &format!("the thread that asks {} cannot start: {e}", quota.redis),
                            now,
                        );
                    }
                }
            }
        }
        let stats = self.live.tenant_stats().clone();
        let now = Instant::now();
        self.take_answer(&stats);
        self.check_overdue(&quota, now);
        self.say_unsaid(now);
        let now_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let free = self.worker.is_some() && self.in_flight.is_none();
        let mut asks: Vec<Asked> = Vec::new();
        let mut on_last = 0u64;
        for e in snap.tenants.all() {
            let Some(rate) = e.global_rate.filter(|_| e.enabled) else {
                continue;
            };
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
            let until = &mut self.refused_until[usize::from(e.slot)];
            if until.is_some_and(|t| now >= t) {
                *until = None;
            }
            let answers = self.answering && until.is_none();
            on_last += u64::from(!answers);
            if !answers {
                // A second in an outage is not the store's: the allowance stays as it was.
                lease.handle_failed();
            }
            stats.set_on_last_lease(e.slot, !answers);
            let spent = lease.spent(terms, answers);
            stats.set_lease_spent(e.slot, if spent { now_s } else { 0 });
            match lease.poll(terms, stats.leased(e.slot), answers) {
                Step::Hold => {}
                // Asked once the store's thread is free (within a round trip: well under
                // the low-water mark's half chunk at any rate the store keeps up with).
                Step::Ask { window, .. } if free => asks.push(Asked {
                    slot: e.slot,
                    epoch: stats.epoch(e.slot),
                    tenant: e.name.clone(),
                    terms,
                    window,
                }),
                Step::Ask { .. } => {}
                Step::Grant { amount } => {
                    lease.handle_self_granted(amount);
                    stats.add_leased(e.slot, u64::from(amount));
                }
            }
        }
        if !asks.is_empty() {
            self.send(Request::Lease(asks), now);
        } else if free
            && ((!self.answering && now >= self.retry_at)
                || (self.answering && now.duration_since(self.last_round_trip) >= IDLE_PING))
        {
            // No tenant needs a lease now: a PING says whether the store is back (so leasing
            // resumes before a tenant asks), or still there (so an outage shows while idle).
            self.send(Request::Ping, now);
        }
        self.metrics.quota().set_on_last_lease(on_last);
        TICK
    }

    fn send(&mut self, request: Request, now: Instant) {
        let Some(w) = &self.worker else {
            return;
        };
        if w.requests.send(request).is_ok() {
            self.in_flight = Some(InFlight {
                sent: now,
                overdue: false,
            });
            self.last_round_trip = now;
        }
    }

    /// The store's answer to the round trip in flight, if it came: its grants counted (also
    /// when it came after its timeout: the store counted them), or its failure.
    fn take_answer(&mut self, stats: &TenantStats) {
        let Some(w) = &self.worker else {
            return;
        };
        let answer = match w.answers.try_recv() {
            Ok(a) => a,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => {
                // The store's thread ended (it panicked): a new one next tick.
                self.worker = None;
                self.in_flight = None;
                return;
            }
        };
        // An answer past its timeout was counted as the store's error then.
        let overdue = self.in_flight.take().is_some_and(|f| f.overdue);
        let now = Instant::now();
        self.last_round_trip = now;
        let quota = self.metrics.quota();
        match answer {
            Answer::Lease(asked, Ok(answers)) => {
                let mut refused: Option<(String, String)> = None;
                let mut failed = 0;
                for (a, answer) in asked.iter().zip(answers) {
                    let g = match answer {
                        Ok(g) => g,
                        Err(why) => {
                            // That tenant's lease failed in the store: as an outage for it
                            // alone, tried again after a while.
                            if stats.epoch(a.slot) == a.epoch {
                                self.leases[usize::from(a.slot)].0.handle_failed();
                                self.refused_until[usize::from(a.slot)] = Some(now + RETRY);
                            }
                            refused.get_or_insert((a.tenant.clone(), why));
                            failed += 1;
                            continue;
                        }
                    };
                    quota.lease(g);
                    // A slot given to another tenant meanwhile: the grant was its old one's.
                    if stats.epoch(a.slot) != a.epoch {
                        continue;
                    }
                    let lease = &mut self.leases[usize::from(a.slot)].0;
                    stats.set_on_last_lease(a.slot, false);
                    if lease.window() != a.window {
                        // Granted for a second that has ended (the answer crossed into the
                        // next): held within the one chunk a relay carries into a second, and
                        // none of the new second's counts.
                        stats.add_leased(a.slot, u64::from(g));
                        stats.cap_leased(a.slot, u64::from(a.terms.chunk));
                        continue;
                    }
                    let admitted = lease.handle_granted(a.terms, a.terms.chunk, g);
                    stats.add_leased(a.slot, u64::from(admitted));
                }
                // The store answers: an error it gave a lease (a key of another type, or out of
                // memory, a read-only replica, for every lease) keeps that tenant on its last
                // lease and is asked again later, not an outage of the store.
                match refused {
                    Some((tenant, why)) => {
                        quota.store_error(failed);
                        self.back();
                        if self
                            .refusal_said_at
                            .is_none_or(|t| now.duration_since(t) >= SAY_EVERY)
                        {
                            println!(
                                "quota store {} answered tenant {tenant}'s lease with an error \
                                 ({why}): it runs on its last lease, asked again every {} ms \
                                 (said at most every {} s)",
                                self.worker.as_ref().map_or("", |w| w.quota.redis.as_str()),
                                RETRY.as_millis(),
                                SAY_EVERY.as_secs()
                            );
                            self.refusal_said_at = Some(now);
                        }
                    }
                    None => self.back(),
                }
            }
            Answer::Ping(Ok(())) => self.back(),
            Answer::Lease(asked, Err(why)) => {
                if overdue {
                    quota.asked_in_vain(asked.len());
                } else {
                    quota.store_error(asked.len());
                }
                self.retry_at = now + RETRY;
                self.down(&why, now);
                for a in &asked {
                    if stats.epoch(a.slot) == a.epoch {
                        self.leases[usize::from(a.slot)].0.handle_failed();
                    }
                }
            }
            Answer::Ping(Err(why)) => {
                if !overdue {
                    quota.store_error(0);
                }
                self.retry_at = now + RETRY;
                self.down(&why, now);
            }
        }
    }

    /// A round trip past its timeout is an outage now, whenever its answer comes.
    fn check_overdue(&mut self, quota: &Quota, now: Instant) {
        let Some(f) = &mut self.in_flight else {
            return;
        };
        if f.overdue || now.duration_since(f.sent) < Duration::from_millis(quota.timeout_ms) {
            return;
        }
        f.overdue = true;
        self.metrics.quota().store_error(0);
        self.retry_at = now + RETRY;
        self.down(&format!("no answer within {} ms", quota.timeout_ms), now);
    }

    /// The store does not answer (`why`): the tenants run on their last lease from the next
    /// tick. Said at once, then at most once every [`SAY_EVERY`].
    fn down(&mut self, why: &str, now: Instant) {
        if !self.answering {
            return;
        }
        self.answering = false;
        self.down_since = Some(now);
        self.metrics.quota().set_store_up(false);
        let addr = self.worker.as_ref().map_or("", |w| w.quota.redis.as_str());
        if self
            .said_at
            .is_none_or(|t| now.duration_since(t) >= SAY_EVERY)
        {
            let between = match std::mem::take(&mut self.unsaid) {
                0 => String::new(),
                n => format!(" ({n} more outages since the last line)"),
            };
            println!(
                "quota store {addr} does not answer ({why}): tenants with a global_rate run on \
                 their last lease until it does{between}"
            );
            self.said_at = Some(now);
            self.outage_said = true;
        } else {
            self.unsaid += 1;
            self.outage_said = false;
        }
    }

    /// An outage that began too soon after the last line to be said, still going once a line
    /// may be said again: said now.
    fn say_unsaid(&mut self, now: Instant) {
        if self.answering
            || self.outage_said
            || self
                .said_at
                .is_some_and(|t| now.duration_since(t) < SAY_EVERY)
        {
            return;
        }
        let since = self
            .down_since
            .map_or(0, |d| now.duration_since(d).as_millis());
        let more = std::mem::take(&mut self.unsaid);
        println!(
            "quota store {} does not answer, for {since} ms now ({more} outages since the last \
             line): tenants with a global_rate run on their last lease until it does",
            self.worker.as_ref().map_or("", |w| w.quota.redis.as_str())
        );
        self.said_at = Some(now);
        self.outage_said = true;
    }

    /// The store answered: after an outage, leasing resumes (said if the outage was).
    fn back(&mut self) {
        if self.answering {
            return;
        }
        if self.outage_said {
            let ms = self.down_since.map_or(0, |d| d.elapsed().as_millis());
            println!(
                "quota store {} answers again after {ms} ms: leasing resumes",
                self.worker.as_ref().map_or("", |w| w.quota.redis.as_str())
            );
        }
        self.answering = true;
        self.down_since = None;
        self.metrics.quota().set_store_up(true);
    }
}
