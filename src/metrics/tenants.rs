//! Per-tenant state every reactor thread shares: each tenant's bundles in flight (its share of
//! the arena), its request-rate state (GCRA's theoretical arrival time), the requests of its
//! global rate this relay holds on lease (the lease thread adds, the reactors take one each),
//! and its counts.
//!
//! Unlike [`super::ThreadMetrics`], these cells have many writers (a tenant's bots reach every
//! thread), so they are real atomic read-modify-writes: one `fetch_add` or one compare-and-swap
//! per decision, never a lock. Each tenant's cell is 128-byte aligned, so two tenants never
//! share a line; one tenant's cell is shared by the threads serving it, which is the price of
//! a share and a rate that hold across threads.
//!
//! Cells are indexed by slot: slot [`DEFAULT_SLOT`] is the default tenant, 1 to `tenants_max`
//! the listed ones. A tenant keeps its slot across reloads (the table matches them by name),
//! so its counters are continuous; a removed tenant's slot is given to a new one only once it
//! holds no bundle (see `config::TenantTable`). Allocated once, at startup, sized by
//! `tenants_max` (restart-only): [`TenantStats::allocation_bytes`].

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// The default tenant's slot.
pub const DEFAULT_SLOT: u16 = 0;

/// Upper bounds (µs) of each tenant's delivery-latency buckets, admitted to written to the
/// engine, the last one +Inf: coarse, because a tenant's histogram is ~70 bytes against the
/// 216 KiB of a thread's HdrHistogram, and 10,000 tenants must fit.
pub const LATENCY_BOUNDS_US: [u64; 7] = [250, 1_000, 5_000, 25_000, 100_000, 500_000, 2_000_000];

/// Bytes of one tenant's cell (two cache lines' alignment).
pub const CELL_BYTES: usize = size_of::<Cell>();

/// Why a tenant's request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The tenant's request rate (429).
    Rate,
    /// The tenant's global rate, across relays: nothing left on lease (429).
    Global,
    /// The tenant's in-flight ceiling, or its share of the arena beyond its floor (429).
    Share,
    /// The whole relay's in-flight cap (429).
    Cap,
    /// Its pool could not send it within its max age, behind the bundles waiting (429).
    Backlog,
    /// A pinned port whose region the tenant may not use (403).
    Region,
    /// The tenant is disabled (403).
    Disabled,
}

impl Refused {
    pub const ALL: [Refused; 7] = [
        Refused::Rate,
        Refused::Global,
        Refused::Share,
        Refused::Cap,
        Refused::Backlog,
        Refused::Region,
        Refused::Disabled,
    ];

    /// The `reason` label in /metrics.
    pub const fn label(self) -> &'static str {
        match self {
            Refused::Rate => "rate",
            Refused::Global => "global",
            Refused::Share => "share",
            Refused::Cap => "cap",
            Refused::Backlog => "backlog",
            Refused::Region => "region",
            Refused::Disabled => "disabled",
        }
    }
}

/// How an admitted bundle of a tenant ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Delivered,
    Rejected,
    Expired,
    Failed,
}

#[repr(align(128))]
#[derive(Default)]
struct Cell {
    in_flight: AtomicU32,
    /// Of `in_flight`, how many the arena's unreserved part holds: those past the tenant's
    /// floor. Counted, not marked on bundles, since which of its bundles ends first does not
    /// matter, only how many it holds.
    beyond: AtomicU32,
    /// +1 each time the slot goes to a tenant: its bundles' records carry it, so a tenant
    /// given a removed tenant's slot never reads that one's records.
    epoch: AtomicU32,
    /// GCRA's theoretical arrival time, in clock ticks.
    tat: AtomicU64,
    /// Requests of the global rate this relay holds on lease and has not used.
    leased: AtomicU64,
    /// Requests of the global rate leased, all told (from the store or on the last lease).
    leased_total: AtomicU64,
    /// 1 while the store does not answer and the tenant runs on its last lease.
    on_last_lease: AtomicU64,
    /// The unix second whose share of the global rate this relay has had in full (the store
    /// granted less than asked, or the last lease's allowance is given): a refusal then waits
    /// for the next second; in any other second more is on its way.
    lease_spent: AtomicU64,
    admitted: AtomicU64,
    delivered: AtomicU64,
    rejected: AtomicU64,
    expired: AtomicU64,
    failed: AtomicU64,
    refused: [AtomicU64; Refused::ALL.len()],
    latency: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
    latency_sum_us: AtomicU64,
}

/// One tenant's counts, read for a scrape (each atomic once: consistent per series).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantCounts {
    pub in_flight: u32,
    /// Requests of the global rate held on lease now.
    pub leased: u64,
    pub leased_total: u64,
    pub on_last_lease: bool,
    pub admitted: u64,
    pub delivered: u64,
    pub rejected: u64,
    pub expired: u64,
    pub failed: u64,
    /// In [`Refused::ALL`]'s order.
    pub refused: [u64; Refused::ALL.len()],
    /// Non-cumulative, in [`LATENCY_BOUNDS_US`]'s order, then +Inf.
    pub latency: [u64; LATENCY_BOUNDS_US.len() + 1],
    pub latency_sum_us: u64,
}

/// GCRA parameters of one tenant's rate, in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcra {
    /// Ticks between requests at the rate.
    pub interval: u64,
    /// How far ahead of now the arrival time may run: (burst − 1) intervals.
    pub tolerance: u64,
}

/// Why a tenant may hold no more bundles now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareFull {
    /// It holds its own ceiling (`in_flight_max`).
    Ceiling,
    /// It holds its floor, and the arena's unreserved part (what every tenant past its floor
    /// shares) is taken.
    Pool,
}

/// See the module docs.
pub struct TenantStats {
    cells: Box<[Cell]>,
    /// Bundles held beyond their tenant's floor, all tenants together: at most the arena less
    /// every floor, so a floor is always there for its tenant.
    beyond_floor: AtomicU32,
    /// Requests no tenant matched, refused (401).
    unknown: AtomicU64,
}

impl TenantStats {
    /// Cells for the default tenant and `tenants_max` listed ones.
    pub fn new(tenants_max: u16) -> TenantStats {
        TenantStats {
            cells: (0..=tenants_max as usize)
                .map(|_| Cell::default())
                .collect(),
            beyond_floor: AtomicU32::new(0),
            unknown: AtomicU64::new(0),
        }
    }

    /// Heap bytes [`TenantStats::new`] allocates (the budget counts them).
    pub const fn allocation_bytes(tenants_max: u16) -> usize {
        (tenants_max as usize + 1) * CELL_BYTES
    }

    /// Listed tenants it has cells for.
    pub fn tenants_max(&self) -> u16 {
        (self.cells.len() - 1) as u16
    }

    /// GCRA at `now`: `Ok` takes one request of the rate, `Err` is the ticks until one would
    /// be allowed. One compare-and-swap (retried only when another thread took one meanwhile).
    pub fn take_rate(&self, slot: u16, g: Gcra, now: u64) -> Result<(), u64> {
        let tat = &self.cells[slot as usize].tat;
        let mut seen = tat.load(Relaxed);
        loop {
            let next = seen.max(now).saturating_add(g.interval);
            let ahead = next - now;
            if ahead > g.tolerance + g.interval {
                return Err(ahead - g.tolerance - g.interval);
            }
            match tat.compare_exchange_weak(seen, next, Relaxed, Relaxed) {
                Ok(_) => return Ok(()),
                Err(v) => seen = v,
            }
        }
    }

    /// Gives back one request of the rate [`TenantStats::take_rate`] took (the request was
    /// refused for want of room, not for its rate).
    pub fn refund_rate(&self, slot: u16, g: Gcra) {
        let tat = &self.cells[slot as usize].tat;
        let _ = tat.fetch_update(Relaxed, Relaxed, |t| Some(t.saturating_sub(g.interval)));
    }

    /// Gives back one request of the global rate [`TenantStats::take_leased`] took: it stays
    /// on this relay's lease for the next request.
    pub fn refund_leased(&self, slot: u16) {
        self.cells[slot as usize].leased.fetch_add(1, Relaxed);
    }

    /// One request of the tenant's global rate, from what this relay holds on lease: `false`
    /// when nothing is left. One compare-and-swap (retried only when another thread took one
    /// meanwhile); never below zero, so a lease added later is whole.
    pub fn take_leased(&self, slot: u16) -> bool {
        let leased = &self.cells[slot as usize].leased;
        let mut seen = leased.load(Relaxed);
        loop {
            if seen == 0 {
                return false;
            }
            match leased.compare_exchange_weak(seen, seen - 1, Relaxed, Relaxed) {
                Ok(_) => return true,
                Err(v) => seen = v,
            }
        }
    }

    /// `n` more requests of the tenant's global rate on lease (the lease thread's).
    pub fn add_leased(&self, slot: u16, n: u64) {
        let c = &self.cells[slot as usize];
        c.leased.fetch_add(n, Relaxed);
        c.leased_total.fetch_add(n, Relaxed);
    }

    /// Lowers what the tenant holds on lease to at most `most` (a new second begins: what a
    /// relay carries over is bounded). Returns what it holds now.
    pub fn cap_leased(&self, slot: u16, most: u64) -> u64 {
        let leased = &self.cells[slot as usize].leased;
        let was = leased
            .fetch_update(Relaxed, Relaxed, |v| Some(v.min(most)))
            .unwrap_or_else(|v| v);
        was.min(most)
    }

    /// The unix second whose share of the global rate is spent (0: none; the lease thread's).
    pub fn set_lease_spent(&self, slot: u16, second: u64) {
        self.cells[slot as usize].lease_spent.store(second, Relaxed);
    }

    /// See [`TenantStats::set_lease_spent`].
    pub fn lease_spent(&self, slot: u16) -> u64 {
        self.cells[slot as usize].lease_spent.load(Relaxed)
    }

    /// What the tenant holds on lease now.
    pub fn leased(&self, slot: u16) -> u64 {
        self.cells[slot as usize].leased.load(Relaxed)
    }

    /// Whether the tenant runs on its last lease (the store does not answer).
    pub fn set_on_last_lease(&self, slot: u16, on: bool) {
        self.cells[slot as usize]
            .on_last_lease
            .store(u64::from(on), Relaxed);
    }

    /// One more bundle in flight for the tenant, within its `ceiling`, and beyond its `floor`
    /// only while the arena's unreserved part (`pool`) has room ([`TenantStats::release`]
    /// gives it back).
    pub fn take_share(
        &self,
        slot: u16,
        floor: u32,
        ceiling: u32,
        pool: u32,
    ) -> Result<(), ShareFull> {
        let cell = &self.cells[slot as usize];
        let held = cell.in_flight.fetch_add(1, Relaxed) + 1;
        if held > ceiling {
            cell.in_flight.fetch_sub(1, Relaxed);
            return Err(ShareFull::Ceiling);
        }
        if held <= floor {
            return Ok(());
        }
        if self.beyond_floor.fetch_add(1, Relaxed) + 1 > pool {
            self.beyond_floor.fetch_sub(1, Relaxed);
            cell.in_flight.fetch_sub(1, Relaxed);
            return Err(ShareFull::Pool);
        }
        cell.beyond.fetch_add(1, Relaxed);
        Ok(())
    }

    /// A bundle of the tenant left the arena (ended, or its request was bad). While the tenant
    /// holds places of the pool, the first goes back: held − floor is what it needs of it,
    /// whichever bundle ended. (A release on another thread between a take's two counts can
    /// leave one place counted a moment too long; the tenant's next release gives it back.)
    pub fn release(&self, slot: u16) {
        let cell = &self.cells[slot as usize];
        cell.in_flight.fetch_sub(1, Relaxed);
        if cell
            .beyond
            .fetch_update(Relaxed, Relaxed, |b| b.checked_sub(1))
            .is_ok()
        {
            self.beyond_floor.fetch_sub(1, Relaxed);
        }
    }

    pub fn admitted(&self, slot: u16) {
        self.cells[slot as usize].admitted.fetch_add(1, Relaxed);
    }

    pub fn ended(&self, slot: u16, how: Ended) {
        let c = &self.cells[slot as usize];
        match how {
            Ended::Delivered => &c.delivered,
            Ended::Rejected => &c.rejected,
            Ended::Expired => &c.expired,
            Ended::Failed => &c.failed,
        }
        .fetch_add(1, Relaxed);
    }

    /// A delivered bundle's latency, admitted to written.
    pub fn record_delivery_ns(&self, slot: u16, ns: u64) {
        let c = &self.cells[slot as usize];
        let us = ns / 1_000;
        let b = LATENCY_BOUNDS_US
            .iter()
            .position(|&le| us <= le)
            .unwrap_or(LATENCY_BOUNDS_US.len());
        c.latency[b].fetch_add(1, Relaxed);
        c.latency_sum_us.fetch_add(us, Relaxed);
    }

    pub fn refused(&self, slot: u16, why: Refused) {
        self.cells[slot as usize].refused[why as usize].fetch_add(1, Relaxed);
    }

    pub fn unknown(&self) {
        self.unknown.fetch_add(1, Relaxed);
    }

    pub fn unknown_count(&self) -> u64 {
        self.unknown.load(Relaxed)
    }

    /// Bundles held beyond their tenants' floors.
    pub fn beyond_floor(&self) -> u32 {
        self.beyond_floor.load(Relaxed)
    }

    pub fn in_flight(&self, slot: u16) -> u32 {
        self.cells[slot as usize].in_flight.load(Relaxed)
    }

    /// Which of the slot's tenants holds it (see `Cell::epoch`).
    pub fn epoch(&self, slot: u16) -> u32 {
        self.cells[slot as usize].epoch.load(Relaxed)
    }

    /// Zeroes a slot's counts and rate state for a new tenant (it holds no bundle), whose
    /// epoch begins.
    pub fn reset(&self, slot: u16) {
        let c = &self.cells[slot as usize];
        c.epoch.fetch_add(1, Relaxed);
        for a in [
            &c.tat,
            &c.leased,
            &c.leased_total,
            &c.on_last_lease,
            &c.lease_spent,
            &c.admitted,
            &c.delivered,
            &c.rejected,
            &c.expired,
            &c.failed,
            &c.latency_sum_us,
        ]
        .into_iter()
        .chain(c.refused.iter())
        .chain(c.latency.iter())
        {
            a.store(0, Relaxed);
        }
    }

    pub fn counts(&self, slot: u16) -> TenantCounts {
        let c = &self.cells[slot as usize];
        TenantCounts {
            in_flight: c.in_flight.load(Relaxed),
            leased: c.leased.load(Relaxed),
            leased_total: c.leased_total.load(Relaxed),
            on_last_lease: c.on_last_lease.load(Relaxed) != 0,
            admitted: c.admitted.load(Relaxed),
            delivered: c.delivered.load(Relaxed),
            rejected: c.rejected.load(Relaxed),
            expired: c.expired.load(Relaxed),
            failed: c.failed.load(Relaxed),
            refused: core::array::from_fn(|i| c.refused[i].load(Relaxed)),
            latency: core::array::from_fn(|i| c.latency[i].load(Relaxed)),
            latency_sum_us: c.latency_sum_us.load(Relaxed),
        }
    }
}

impl std::fmt::Debug for TenantStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantStats")
            .field("tenants_max", &self.tenants_max())
            .field("beyond_floor", &self.beyond_floor())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_of_ten_with_a_burst_of_two_takes_two_then_waits_the_rest_of_an_interval() {
        let s = TenantStats::new(1);
        let g = Gcra {
            interval: 100,
            tolerance: 100,
        };
        assert_eq!(s.take_rate(1, g, 1_000), Ok(()));
        assert_eq!(s.take_rate(1, g, 1_000), Ok(()));
        assert_eq!(s.take_rate(1, g, 1_010), Err(90));
        assert_eq!(s.take_rate(1, g, 1_100), Ok(()));
    }

    #[test]
    fn a_share_past_its_floor_takes_from_the_pool_and_gives_back_the_same_way() {
        let s = TenantStats::new(2);
        assert_eq!(s.take_share(1, 1, 3, 1), Ok(()));
        assert_eq!(s.beyond_floor(), 0, "within the floor");
        assert_eq!(s.take_share(1, 1, 3, 1), Ok(()));
        assert_eq!(s.beyond_floor(), 1);
        // The pool (1) is used up: beyond the floor nothing more, for either tenant.
        assert_eq!(s.take_share(1, 1, 3, 1), Err(ShareFull::Pool));
        assert_eq!(s.take_share(2, 0, 3, 1), Err(ShareFull::Pool));
        s.release(1);
        assert_eq!(s.take_share(2, 0, 3, 1), Ok(()));
        assert_eq!(
            (s.in_flight(1), s.in_flight(2), s.beyond_floor()),
            (1, 1, 1)
        );
    }

    #[test]
    fn a_lease_is_taken_one_request_at_a_time_and_never_below_zero() {
        let s = TenantStats::new(1);
        assert!(!s.take_leased(1));
        s.add_leased(1, 2);
        assert!(s.take_leased(1));
        assert!(s.take_leased(1));
        assert!(!s.take_leased(1));
        s.add_leased(1, 10);
        assert_eq!(s.cap_leased(1, 4), 4);
        assert_eq!((s.leased(1), s.counts(1).leased_total), (4, 12));
    }

    #[test]
    fn a_ceiling_refuses_even_when_the_pool_has_room() {
        let s = TenantStats::new(1);
        assert_eq!(s.take_share(1, 0, 1, 100), Ok(()));
        assert_eq!(s.take_share(1, 0, 1, 100), Err(ShareFull::Ceiling));
        assert_eq!(s.in_flight(1), 1);
    }
}
