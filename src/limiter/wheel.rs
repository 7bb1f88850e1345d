//! The hierarchical timing wheel, as in the Linux kernel and tokio: cooldowns, and bookings
//! that would break the booking queue's order, wait here.
//!
//! A wheel unit is `2^shift` ticks, the largest power of two not above the configured slot
//! width. Each lane has [`LEVELS`] levels of [`SLOTS_PER_LEVEL`] slots, each level 64 times
//! coarser than the one below, and one occupancy word per level, so the next due slot is a
//! `trailing_zeros`, and a 30 s (or 30 day) cooldown is filed in O(1) and cascades down at
//! most once per level. A pair due at tick `t` is filed under unit `ceil(t / 2^shift)`: never
//! early, late by under one unit. Slots are intrusive lists through a per-pair [`Link`],
//! touched only by the wheel.
//!
//! This file holds the lists, the links and each lane's [`WheelState`]; it is NOT where a
//! pair's place, its lane's counts or its wake-up ticks change ([`super::Limiter`] does that
//! around every insert and unlink), nor where slots are fired (`Limiter::advance`).

use super::pair::NIL;

/// Bits of wheel time per level: one `u64` occupancy word covers a level's slots.
pub(super) const LEVEL_BITS: u32 = 6;
/// Slots per level.
pub const SLOTS_PER_LEVEL: usize = 1 << LEVEL_BITS;
/// Enough levels to cover every 64-bit tick value even at a 1 tick slot (11 × 6 ≥ 64), so no
/// deadline is ever clamped and none can wrap.
pub const LEVELS: usize = 11;
/// List heads per lane: one per wheel slot (the ready FIFO and booking queue are rings).
pub const LISTS_PER_REGION: usize = LEVELS * SLOTS_PER_LEVEL;

/// A pair's place in a wheel slot list.
#[derive(Clone, Copy, Debug)]
pub(super) struct Link {
    /// The wheel unit the pair is due at.
    pub(super) due_unit: u64,
    pub(super) prev: u32,
    pub(super) next: u32,
    /// Index into the lists (`NIL` when the pair is not in the wheel).
    pub(super) list: u32,
}

const UNLINKED: Link = Link {
    due_unit: 0,
    prev: NIL,
    next: NIL,
    list: NIL,
};

/// One wheel slot's list of pairs.
#[derive(Clone, Copy, Debug)]
pub(super) struct List {
    pub(super) head: u32,
    pub(super) tail: u32,
}

const EMPTY_LIST: List = List {
    head: NIL,
    tail: NIL,
};

/// One lane's wheel: how far it has been advanced, which slots hold pairs, and the cached
/// earliest due unit.
#[derive(Clone, Debug)]
#[repr(C)]
pub(super) struct WheelState {
    /// Wheel time (units) this lane's wheel has been advanced to.
    pub(super) elapsed_unit: u64,
    /// Smallest `due_unit` in this lane's wheel (`u64::MAX` if empty), when `soonest_valid`.
    pub(super) soonest_unit: u64,
    pub(super) soonest_valid: bool,
    pub(super) occupied: [u64; LEVELS],
}

impl WheelState {
    /// An empty wheel standing at `elapsed_unit`.
    pub(super) fn new(elapsed_unit: u64) -> WheelState {
        WheelState {
            elapsed_unit,
            soonest_unit: u64::MAX,
            soonest_valid: true,
            occupied: [0; LEVELS],
        }
    }

    /// Whether it is known to hold no pair (the common case: only cooldowns and bursts use
    /// the wheel).
    #[inline]
    pub(super) fn is_known_empty(&self) -> bool {
        self.soonest_valid && self.soonest_unit == u64::MAX
    }

    /// The earliest occupied slot: (level, slot, first unit it covers). Every occupied slot
    /// lies after `elapsed_unit` at its level and every entry at a lower level is due before
    /// any entry at a higher one, so the lowest occupied level holds the answer.
    #[inline]
    pub(super) fn next_slot(&self) -> Option<(usize, usize, u64)> {
        for level in 0..LEVELS {
            let word = self.occupied[level];
            if word != 0 {
                let slot = word.trailing_zeros() as usize;
                let level_shift = LEVEL_BITS * level as u32;
                let above = level_shift + LEVEL_BITS;
                let base = if above >= 64 {
                    0
                } else {
                    self.elapsed_unit & !((1u64 << above) - 1)
                };
                return Some((level, slot, base | ((slot as u64) << level_shift)));
            }
        }
        None
    }
}

/// Level at which unit `due` is filed when the wheel stands at `elapsed`: the level of the
/// highest bit where they differ (at least level 0).
#[inline]
pub(super) fn level_for(elapsed: u64, due: u64) -> usize {
    let masked = (elapsed ^ due) | (SLOTS_PER_LEVEL as u64 - 1);
    let significant = 63 - masked.leading_zeros();
    (significant / LEVEL_BITS) as usize
}

/// The slot of `level` that unit `due` falls in.
#[inline]
pub(super) fn slot_for(level: usize, due: u64) -> usize {
    ((due >> (LEVEL_BITS * level as u32)) & (SLOTS_PER_LEVEL as u64 - 1)) as usize
}

/// Every lane's slot lists and every pair's link, allocated once, and the unit width.
pub(super) struct Wheels {
    links: Box<[Link]>,
    lists: Box<[List]>,
    /// log2 of the unit (slot width) in ticks.
    shift: u32,
}

impl Wheels {
    pub(super) fn new(pair_count: usize, lane_count: usize, shift: u32) -> Wheels {
        Wheels {
            links: vec![UNLINKED; pair_count].into_boxed_slice(),
            lists: vec![EMPTY_LIST; lane_count * LISTS_PER_REGION].into_boxed_slice(),
            shift,
        }
    }

    pub(super) fn allocated_bytes(&self) -> usize {
        self.links.len() * std::mem::size_of::<Link>()
            + self.lists.len() * std::mem::size_of::<List>()
    }

    /// log2 of the unit in ticks.
    #[inline]
    pub(super) fn shift(&self) -> u32 {
        self.shift
    }

    /// The unit `tick` lies in.
    #[inline]
    pub(super) fn unit_of(&self, tick: u64) -> u64 {
        tick >> self.shift
    }

    /// The first unit that starts at or after `tick`: a pair filed there is never early.
    #[inline]
    pub(super) fn unit_at_or_after(&self, tick: u64) -> u64 {
        let mask = (1u64 << self.shift) - 1;
        (tick >> self.shift) + (tick & mask != 0) as u64
    }

    /// The tick unit `unit` starts at (saturating).
    #[inline]
    pub(super) fn tick_of(&self, unit: u64) -> u64 {
        unit.saturating_mul(1 << self.shift)
    }

    #[inline]
    pub(super) fn link(&self, pair: u32) -> &Link {
        &self.links[pair as usize]
    }

    #[inline]
    pub(super) fn list(&self, index: usize) -> &List {
        &self.lists[index]
    }

    /// Index of lane `r`'s list for (`level`, `slot`).
    #[inline]
    pub(super) fn list_index(r: usize, level: usize, slot: usize) -> usize {
        r * LISTS_PER_REGION + level * SLOTS_PER_LEVEL + slot
    }

    /// Files `pair` under unit `due_unit` (after `wheel.elapsed_unit`) of lane `r`'s wheel,
    /// at the tail of its slot's list; returns the tick that unit starts at.
    pub(super) fn insert(
        &mut self,
        wheel: &mut WheelState,
        r: usize,
        pair: u32,
        due_unit: u64,
    ) -> u64 {
        debug_assert!(due_unit > wheel.elapsed_unit);
        let level = level_for(wheel.elapsed_unit, due_unit);
        let slot = slot_for(level, due_unit);
        wheel.occupied[level] |= 1 << slot;
        if wheel.soonest_valid && due_unit < wheel.soonest_unit {
            wheel.soonest_unit = due_unit;
        }
        let list = Self::list_index(r, level, slot);
        let tail = self.lists[list].tail;
        self.links[pair as usize] = Link {
            due_unit,
            prev: tail,
            next: NIL,
            list: list as u32,
        };
        if tail == NIL {
            self.lists[list].head = pair;
        } else {
            self.links[tail as usize].next = pair;
        }
        self.lists[list].tail = pair;
        self.tick_of(due_unit)
    }

    /// Takes `pair` out of its slot in lane `r`'s wheel, fixing occupancy and the cached
    /// soonest.
    pub(super) fn unlink(&mut self, wheel: &mut WheelState, r: usize, pair: u32) {
        let l = self.links[pair as usize];
        let list = l.list as usize;
        if l.prev == NIL {
            self.lists[list].head = l.next;
        } else {
            self.links[l.prev as usize].next = l.next;
        }
        if l.next == NIL {
            self.lists[list].tail = l.prev;
        } else {
            self.links[l.next as usize].prev = l.prev;
        }
        self.links[pair as usize] = UNLINKED;
        let within = list - r * LISTS_PER_REGION;
        if self.lists[list].head == NIL {
            wheel.occupied[within / SLOTS_PER_LEVEL] &= !(1 << (within % SLOTS_PER_LEVEL));
        }
        if wheel.soonest_valid && l.due_unit == wheel.soonest_unit {
            wheel.soonest_valid = wheel.occupied.iter().all(|&w| w == 0);
            // An empty wheel's soonest is known without a scan.
            if wheel.soonest_valid {
                wheel.soonest_unit = u64::MAX;
            }
        }
    }

    /// Earliest `due_unit` in lane `r`'s wheel; computed at most once per change of the
    /// earliest entry. A level-0 slot holds a single unit; a coarser slot is scanned once.
    #[inline]
    pub(super) fn soonest_due(&self, wheel: &mut WheelState, r: usize) -> Option<u64> {
        if !wheel.soonest_valid {
            self.recompute_soonest(wheel, r);
        }
        let soonest = wheel.soonest_unit;
        (soonest != u64::MAX).then_some(soonest)
    }

    /// A unit no later than anything in lane `r`'s wheel falls due, reading at most
    /// `scan_max` links: the earliest entry's unit when its slot is at level 0 or holds at most
    /// `scan_max` entries, else that slot's first unit. A caller that sleeps until a slot's
    /// first unit and advances finds its entries cascading to finer levels (each entry at most
    /// once per level) and maybe nothing due: one wake-up per crowded coarse slot, where the
    /// exact earliest ([`Wheels::soonest_due`]) walks the whole list each time its earliest
    /// entry leaves.
    ///
    /// Cached as [`Wheels::soonest_due`] caches the exact one (an insert lowers it, removing the
    /// entry it names drops it), and dropped too once the wheel has advanced to it: a slot's
    /// start stays behind when the slot cascades.
    #[inline]
    pub(super) fn soonest_bound(
        &self,
        wheel: &mut WheelState,
        r: usize,
        scan_max: usize,
    ) -> Option<u64> {
        if !wheel.soonest_valid || wheel.soonest_unit <= wheel.elapsed_unit {
            wheel.soonest_unit = self.scan_bound(wheel, r, scan_max).unwrap_or(u64::MAX);
            wheel.soonest_valid = true;
        }
        (wheel.soonest_unit != u64::MAX).then_some(wheel.soonest_unit)
    }

    fn scan_bound(&self, wheel: &WheelState, r: usize, scan_max: usize) -> Option<u64> {
        let (level, slot, start) = wheel.next_slot()?;
        if level == 0 {
            return Some(start);
        }
        let mut i = self.lists[Self::list_index(r, level, slot)].head;
        let mut min = u64::MAX;
        for _ in 0..scan_max {
            if i == NIL {
                break;
            }
            min = min.min(self.links[i as usize].due_unit);
            i = self.links[i as usize].next;
        }
        Some(if i == NIL { min } else { start })
    }

    #[cold]
    fn recompute_soonest(&self, wheel: &mut WheelState, r: usize) {
        wheel.soonest_unit = match wheel.next_slot() {
            None => u64::MAX,
            Some((0, _, start)) => start,
            Some((level, slot, _)) => {
                let mut i = self.lists[Self::list_index(r, level, slot)].head;
                let mut min = u64::MAX;
                while i != NIL {
                    min = min.min(self.links[i as usize].due_unit);
                    i = self.links[i as usize].next;
                }
                min
            }
        };
        wheel.soonest_valid = true;
    }
}
