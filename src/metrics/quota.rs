//! The lease thread's counts: what it asked of the quota store, what the store granted or
//! refused, the store's failures and outages, and how many tenants run on their last lease.
//! One writer (the lease thread), read by scrapes; per tenant, what is held on lease lives in
//! [`super::tenants::TenantStats`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// See the module docs.
#[derive(Debug, Default)]
pub struct QuotaStats {
    asked: AtomicU64,
    granted: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
    granted_requests: AtomicU64,
    store_errors: AtomicU64,
    outages: AtomicU64,
    on_last_lease: AtomicU64,
    /// 1 while the store answers (or no store is configured), 0 in an outage.
    store_up: AtomicU64,
}

/// The counts, read once each for a scrape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuotaCounts {
    /// Leases asked of the store.
    pub asked: u64,
    /// Leases the store granted in part or whole.
    pub granted: u64,
    /// Leases the store granted nothing of (the global rate used up for that second).
    pub refused: u64,
    /// Leases that got no grant or refusal: the store answered them with an error, or their
    /// round trip failed. `asked = granted + refused + failed` once no round trip is out.
    pub failed: u64,
    /// Requests the store granted, all told.
    pub granted_requests: u64,
    /// Round trips that failed (refused connection, timeout, error reply).
    pub store_errors: u64,
    /// Times the store stopped answering.
    pub outages: u64,
    /// Tenants running on their last lease now.
    pub on_last_lease: u64,
    pub store_up: bool,
}

impl QuotaStats {
    pub fn new() -> QuotaStats {
        let s = QuotaStats::default();
        s.store_up.store(1, Relaxed);
        s
    }

    /// The store answered a lease with `granted`.
    pub fn lease(&self, granted: u32) {
        self.asked.fetch_add(1, Relaxed);
        if granted == 0 {
            self.refused.fetch_add(1, Relaxed);
        } else {
            self.granted.fetch_add(1, Relaxed);
            self.granted_requests.fetch_add(u64::from(granted), Relaxed);
        }
    }

    /// `leases` leases asked in a round trip whose failure was counted already (it outlasted
    /// its timeout).
    pub fn asked_in_vain(&self, leases: usize) {
        self.asked.fetch_add(leases as u64, Relaxed);
        self.failed.fetch_add(leases as u64, Relaxed);
    }

    /// A round trip asking `leases` leases failed, or the store answered that many of its
    /// leases with an error.
    pub fn store_error(&self, leases: usize) {
        self.asked.fetch_add(leases as u64, Relaxed);
        self.failed.fetch_add(leases as u64, Relaxed);
        self.store_errors.fetch_add(1, Relaxed);
    }

    /// The store stopped answering (`false`) or answers again (`true`).
    pub fn set_store_up(&self, up: bool) {
        let was = self.store_up.swap(u64::from(up), Relaxed);
        if was == 1 && !up {
            self.outages.fetch_add(1, Relaxed);
        }
    }

    pub fn set_on_last_lease(&self, tenants: u64) {
        self.on_last_lease.store(tenants, Relaxed);
    }

    pub fn counts(&self) -> QuotaCounts {
        QuotaCounts {
            asked: self.asked.load(Relaxed),
            granted: self.granted.load(Relaxed),
            refused: self.refused.load(Relaxed),
            failed: self.failed.load(Relaxed),
            granted_requests: self.granted_requests.load(Relaxed),
            store_errors: self.store_errors.load(Relaxed),
            outages: self.outages.load(Relaxed),
            on_last_lease: self.on_last_lease.load(Relaxed),
            store_up: self.store_up.load(Relaxed) != 0,
        }
    }
}
