//! The per-lane rings: each lane has a ready FIFO and a booking queue, both rings of
//! `(due tick, pair, seq)` entries in one array, so the pops and pushes of a rotation walk
//! memory in order and never touch a pair record to find a neighbour.
//!
//! Removal is lazy: a pair taken out of the middle changes its record's place, and every push
//! bumps the record's `seq`, so the old entry stops matching its record ([`live`]) and is
//! dropped when it reaches the head. A ring holds twice its lane's pairs; when one is full,
//! its stale entries are squeezed out in one pass, which frees at least half of it, so pushes
//! stay O(1) amortised.
//!
//! This file holds the rings' storage and mechanics; it is NOT where a pair's place or a
//! lane's counts change (that is [`super::Limiter`]).

use super::pair::{NIL, QUEUED, READY, State};

/// Index of a lane's ready FIFO in [`super::region::Region::rings`].
pub(super) const READY_RING: usize = 0;
/// Index of a lane's booking queue.
pub(super) const BOOKED_RING: usize = 1;
/// Ring entries per pair: a ready ring and a booking ring per lane, each twice the lane's
/// pairs, so squeezing out stale entries always frees at least half a ring.
pub(super) const RING_ENTRIES_PER_PAIR: usize = 4;

/// A ring entry: `pair` became (ready ring) or becomes (booking ring) ready at `due_tick`;
/// live while the pair's record still carries `seq` and the ring's place.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub(super) due_tick: u64,
    pub(super) pair: u32,
    pub(super) seq: u32,
}

const EMPTY_ENTRY: Entry = Entry {
    due_tick: 0,
    pair: NIL,
    seq: 0,
};

/// Head and length of one ring; its storage is its lane's `cap` entries of [`Rings`] from its
/// base.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Ring {
    pub(super) head: u32,
    pub(super) len: u32,
}

impl Ring {
    /// Drops the head entry.
    #[inline]
    pub(super) fn pop_front(&mut self, cap: u32) {
        self.head += 1;
        if self.head == cap {
            self.head = 0;
        }
        self.len -= 1;
    }

    /// Position of the `k`-th entry from the head.
    #[inline]
    fn at(&self, k: u32, cap: u32) -> u32 {
        let mut at = self.head + k;
        if at >= cap {
            at -= cap;
        }
        at
    }
}

/// Whether `e` is live in ring `ring`: its pair still carries its `seq` and the ring's place.
#[inline]
pub(super) fn live(state: &[State], e: &Entry, ring: usize) -> bool {
    let s = &state[e.pair as usize];
    let place = if ring == READY_RING { READY } else { QUEUED };
    s.seq == e.seq && s.place == place
}

/// The storage of every lane's two rings, allocated once: lane by lane, each lane's ready ring
/// then its booking ring, `cap` (twice the lane's pairs) entries each.
pub(super) struct Rings {
    entries: Box<[Entry]>,
}

impl Rings {
    /// Rings for lanes of `lane_pairs[l]` pairs each.
    pub(super) fn new(lane_pairs: &[u32]) -> Rings {
        let total: usize = lane_pairs.iter().map(|&n| 4 * n as usize).sum();
        Rings {
            entries: vec![EMPTY_ENTRY; total].into_boxed_slice(),
        }
    }

    pub(super) fn allocated_bytes(&self) -> usize {
        self.entries.len() * std::mem::size_of::<Entry>()
    }

    /// Where each lane's rings begin in the storage (its ready ring; its booking ring follows),
    /// and their capacity, for lanes of `lane_pairs[l]` pairs.
    pub(super) fn layout(lane_pairs: &[u32]) -> impl Iterator<Item = (usize, u32)> + '_ {
        lane_pairs.iter().scan(0usize, |next, &n| {
            let base = *next;
            *next += 4 * n as usize;
            Some((base, 2 * n))
        })
    }

    /// Where ring `ring` of the lane whose rings begin at `lane_base` begins.
    #[inline(always)]
    pub(super) fn base(lane_base: usize, cap: u32, ring: usize) -> usize {
        lane_base + ring * cap as usize
    }

    /// The entry at storage index `i`, bounds-checked without a panic path.
    #[inline(always)]
    pub(super) fn get(&self, i: usize) -> Option<&Entry> {
        self.entries.get(i)
    }

    /// The head entry of the ring at `base` (which must not be empty), live or not.
    #[inline]
    pub(super) fn head(&self, base: usize, ring: &Ring) -> &Entry {
        &self.entries[base + ring.head as usize]
    }

    /// The `k`-th entry from the head of the ring at `base` of `cap` entries, live or not.
    #[inline]
    pub(super) fn at(&self, base: usize, cap: u32, ring: &Ring, k: u32) -> &Entry {
        &self.entries[base + ring.at(k, cap) as usize]
    }

    /// The newest entry of the ring at `base`, live or not.
    #[inline]
    pub(super) fn last(&self, base: usize, cap: u32, ring: &Ring) -> Option<&Entry> {
        (ring.len != 0).then(|| self.at(base, cap, ring, ring.len - 1))
    }

    /// The first live entry of a ring (dropping stale ones ahead of it), not removed.
    #[inline]
    pub(super) fn front(
        &self,
        base: usize,
        cap: u32,
        ring: &mut Ring,
        state: &[State],
        kind: usize,
    ) -> Option<Entry> {
        loop {
            if ring.len == 0 {
                return None;
            }
            let e = *self.head(base, ring);
            if live(state, &e, kind) {
                return Some(e);
            }
            ring.pop_front(cap);
        }
    }

    /// Appends to a ring, first squeezing out its stale entries if it is full: live entries
    /// are at most the lane's pairs, half the ring, so the pass frees at least half of it.
    #[inline]
    pub(super) fn push(
        &mut self,
        base: usize,
        cap: u32,
        ring: &mut Ring,
        e: Entry,
        state: &[State],
        kind: usize,
    ) {
        if ring.len == cap {
            self.compact(base, cap, ring, state, kind);
        }
        let at = ring.at(ring.len, cap);
        ring.len += 1;
        self.entries[base + at as usize] = e;
    }

    #[cold]
    fn compact(&mut self, base: usize, cap: u32, ring: &mut Ring, state: &[State], kind: usize) {
        let cap = cap as usize;
        let head = ring.head as usize;
        let mut kept = 0usize;
        for k in 0..ring.len as usize {
            let e = self.entries[base + (head + k) % cap];
            if live(state, &e, kind) {
                self.entries[base + (head + kept) % cap] = e;
                kept += 1;
            }
        }
        ring.len = kept as u32;
        assert!(
            kept < cap,
            "the ring at {base} holds more live entries than its lane has pairs"
        );
    }
}
