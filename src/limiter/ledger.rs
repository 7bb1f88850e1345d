//! The pacing ledger: each pair's earliest next send, in memory that two relay processes share
//! while one takes over from the other, so the engine's one-request-per-interval rule holds
//! across a restart as it does within one process. Each process keeps pacing its own pairs in
//! its [`super::Limiter`]; the ledger only answers "did the other process send on this
//! (source, region) pair too recently?".
//!
//! Layout: a header entry (magic, capacity) and then an open-addressed table of entries, each
//! a pair's key (a hash of its source and region names; 0 is empty) and its theoretical
//! arrival time, the GCRA state the limiter keeps (so a region's burst holds across both). Keys, not pair numbers, because the process taking over may run another
//! config (more sources, regions in another order). Ticks are the raw TSC both processes read
//! (or the monotonic clock both fall back to), so no conversion is needed between them.
//!
//! Cost: one compare-and-swap when a pair is handed out ([`Ledger::claim`]) and one when its
//! call ends ([`Ledger::settle`]); the line is another process's only during a takeover.
//!
//! What it is NOT: where the memory comes from (the process layer maps it, or a test gives
//! heap memory), nor a limiter: a refused claim is turned into a cooldown by the caller.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::{Instant, Ticks};

/// "pacing 1" in ASCII: a ledger written by this layout (its first 8 bytes, in the byte order
/// the entries are stored in).
pub const MAGIC: u64 = u64::from_be_bytes(*b"pacing\0\x01");

/// One entry: a pair's key (0: empty) and its theoretical arrival time (GCRA, as the limiter
/// keeps it: at a burst of one, its earliest next send).
#[repr(C, align(16))]
#[derive(Default)]
pub struct Entry {
    key: AtomicU64,
    next: AtomicU64,
}

/// Bytes of one entry (for the budget and for sizing the shared memory).
pub const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

/// Entries for `pairs` pairs: room for a successor with twice as many, and the table at most
/// a quarter full, so a probe sequence stays short. Plus the header.
pub const fn entries_for(pairs: usize) -> usize {
    (pairs * 8).next_power_of_two() + 1
}

/// See the module docs.
pub struct Ledger {
    entries: *const Entry,
    /// Table entries (a power of two), header excluded.
    capacity: usize,
    /// Keeps the memory alive (a mapping, or heap entries for a process that shares nothing).
    _memory: Box<dyn Send + Sync>,
}

// SAFETY: every access to the entries is atomic; the pointer stays valid while `_memory` lives.
unsafe impl Send for Ledger {}
unsafe impl Sync for Ledger {}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ledger({} entries)", self.capacity)
    }
}

impl Ledger {
    /// A ledger no other process sees (tests; a relay with nothing to hand over).
    pub fn private(pairs: usize) -> Ledger {
        let entries: Box<[Entry]> = (0..entries_for(pairs)).map(|_| Entry::default()).collect();
        let ptr = entries.as_ptr();
        let len = entries.len();
        // SAFETY: `entries` is kept alive by the ledger itself.
        unsafe { Ledger::over(ptr, len, Box::new(entries)) }.expect("fresh memory")
    }

    /// A ledger over `len` entries at `entries`, kept alive by `memory`: fresh (all zero)
    /// memory gets a header; memory with a header is taken as it is. `None` when the memory
    /// holds something else, or too few entries.
    ///
    /// # Safety
    /// `entries` must point to `len` entries that stay valid and writable while `memory` lives,
    /// accessed by others only through this type.
    pub unsafe fn over(
        entries: *const Entry,
        len: usize,
        memory: Box<dyn Send + Sync>,
    ) -> Option<Ledger> {
        let capacity = len.checked_sub(1)?;
        if !capacity.is_power_of_two() {
            return None;
        }
        // SAFETY: `len >= 2` and the caller vouches for the memory.
        let header = unsafe { &*entries };
        match header
            .key
            .compare_exchange(0, MAGIC, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => header.next.store(capacity as u64, Ordering::Release),
            Err(MAGIC) if header.next.load(Ordering::Acquire) == capacity as u64 => {}
            Err(_) => return None,
        }
        Some(Ledger {
            entries,
            capacity,
            _memory: memory,
        })
    }

    fn entry(&self, i: usize) -> &Entry {
        debug_assert!(i < self.capacity);
        // SAFETY: `i + 1 <= capacity < len`, and the memory is kept alive by `_memory`.
        unsafe { &*self.entries.add(i + 1) }
    }

    /// The entry of the pair with `key` (see [`pair_key`]), taken now if the pair has none yet;
    /// `None` when the table is full. Startup work, not the request path.
    pub fn slot(&self, key: u64) -> Option<u32> {
        let key = key.max(1);
        let mask = self.capacity - 1;
        let mut i = key as usize & mask;
        for _ in 0..self.capacity {
            let e = self.entry(i);
            match e
                .key
                .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(i as u32),
                Err(k) if k == key => return Some(i as u32),
                Err(_) => i = (i + 1) & mask,
            }
        }
        None
    }

    /// The pair at `slot`, paced one send per `interval` with `tolerance` of burst
    /// (`(burst − 1) × interval`), is about to send at `now` a call that may run for `hold`:
    /// allowed when no process's bookings forbid it (GCRA on the entry's theoretical arrival
    /// time), and then booked an interval past the call's longest life, since the next send
    /// counts from the answer (the other process cannot send on it before this call's own
    /// booking, [`Ledger::settle`], lands). Returns what it booked; else the instant it may
    /// send.
    #[inline]
    pub fn claim(
        &self,
        slot: u32,
        now: Instant,
        interval: Ticks,
        tolerance: Ticks,
        hold: Ticks,
    ) -> Result<u64, Instant> {
        let tat = &self.entry(slot as usize).next;
        let mut seen = tat.load(Ordering::Acquire);
        loop {
            let allowed = seen.saturating_sub(tolerance.0);
            if allowed > now.0 {
                return Err(Instant(allowed));
            }
            let next = seen
                .max(now.0)
                .saturating_add(interval.0)
                .saturating_add(hold.0);
            match tat.compare_exchange_weak(seen, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(next),
                Err(s) => seen = s,
            }
        }
    }

    /// The call a [`Ledger::claim`] that booked `claimed` with `hold` was for has ended: its
    /// pair's theoretical arrival time is `tat`. While the entry still holds the claim, the
    /// claim's hold is given back: the entry becomes `tat`, or what the claim booked without
    /// the hold if later (that counts the other process's sends before it, which this
    /// process's `tat` knows nothing of). A booking another process made since stands if
    /// later. Returns what this process booked.
    #[inline]
    pub fn settle(&self, slot: u32, claimed: u64, hold: Ticks, tat: Instant) -> u64 {
        let e = &self.entry(slot as usize).next;
        let settled = tat.0.max(claimed.saturating_sub(hold.0));
        if e.compare_exchange(claimed, settled, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            e.fetch_max(settled, Ordering::AcqRel);
        }
        settled
    }

    /// The pair at `slot` is booked at `to` in place of `from`, if the entry still holds
    /// `from` (this process's own booking, repriced by a reload). A booking another process
    /// made since stands.
    pub fn replace(&self, slot: u32, from: u64, to: u64) {
        let _ = self.entry(slot as usize).next.compare_exchange(
            from,
            to,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// The pair at `slot` has its theoretical arrival time at `tat` (its call ended; its
    /// booking, and any cooldown as `cooldown end + tolerance`, say so). A later one already
    /// there stands.
    #[inline]
    pub fn book(&self, slot: u32, tat: Instant) {
        self.entry(slot as usize)
            .next
            .fetch_max(tat.0, Ordering::AcqRel);
    }

    /// Table entries (header excluded).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Entries no pair has taken yet. Startup work: it reads every entry.
    pub fn free_entries(&self) -> usize {
        (0..self.capacity)
            .filter(|&i| self.entry(i).key.load(Ordering::Acquire) == 0)
            .count()
    }

    /// Every pair's key and theoretical arrival time (to carry them into a ledger of another
    /// size).
    pub fn bookings(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.capacity).filter_map(|i| {
            let e = self.entry(i);
            let key = e.key.load(Ordering::Acquire);
            (key != 0).then(|| (key, e.next.load(Ordering::Acquire)))
        })
    }

    /// The pair's theoretical arrival time by the ledger (its next send, at a burst of one).
    pub fn next(&self, slot: u32) -> Instant {
        Instant(self.entry(slot as usize).next.load(Ordering::Acquire))
    }
}

/// The ledger key of the pair of `source` (as its config names it) and `region`: FNV-1a over
/// both, never 0.
pub fn pair_key(source: &str, region: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in source.bytes().chain([0]).chain(region.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}
