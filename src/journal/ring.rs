//! One thread's records: a ring of fixed-size records, each behind a sequence lock, and an
//! index from bundle id to serial. Only the owning thread writes; any thread reads, without a
//! lock and without allocating: a reader copies a record and keeps the copy only when the
//! record's sequence word did not move meanwhile (its writer was not in the middle of it).
//!
//! The index is open addressing over `4 × capacity` words (a quarter full at most), each the
//! record's serial and 24 bits of its id. An insert takes the first word of its window that is
//! empty or names a record the ring has since overwritten, else the window's oldest; a lookup
//! reads the whole window ([`WINDOW`] words, two cache lines) and checks the full id in the
//! record, so a stale or colliding word costs a compare, never a wrong answer.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::clock::{Instant, TickRate};

use super::record::{PAYLOAD, Patch, Record, WORDS};

/// Index words a lookup reads, from the id's home word on.
pub const WINDOW: usize = 16;
/// Index words per record (the budget counts them).
pub const INDEX_PER_RECORD: usize = 4;
/// A reader gives up on a record whose writer keeps changing it after this many tries (it is
/// being rewritten for a newer bundle: what the reader wanted is gone anyway).
const READ_TRIES: u32 = 64;
/// Serials live in the low 40 bits of an index word.
const SERIAL_BITS: u32 = 40;
const SERIAL_MASK: u64 = (1 << SERIAL_BITS) - 1;

/// See the module docs.
pub struct Ring {
    words: Box<[AtomicU64]>,
    index: Box<[AtomicU64]>,
    capacity: u64,
    /// The next serial: the owner advances it; readers compare serials with it.
    next: AtomicU64,
    /// Converts the owner's clock to wall time: a tick and the Unix time at it, and its rate.
    anchor_tick: AtomicU64,
    anchor_unix_ns: AtomicU64,
    ticks_per_s: AtomicU64,
}

/// Index words a page holds (the smallest page size; on larger pages the touch is repeated).
const PAGE_WORDS: usize = 4096 / size_of::<u64>();

/// Zeroed words, allocated without being written: the pages of a large ring stay untouched
/// (and out of the resident set) until records reach them.
fn zeroed(n: usize) -> Box<[AtomicU64]> {
    const _: () = assert!(
        size_of::<AtomicU64>() == size_of::<u64>() && align_of::<AtomicU64>() == align_of::<u64>()
    );
    let plain: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    // SAFETY: AtomicU64 has the same size, alignment and bit validity as u64.
    unsafe { Box::from_raw(Box::into_raw(plain) as *mut [AtomicU64]) }
}

/// Resident bytes of the pages `words` spans.
fn resident(words: &[AtomicU64]) -> u64 {
    if words.is_empty() {
        return 0;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let start = words.as_ptr() as usize / page * page;
    let end = (words.as_ptr() as usize + size_of_val(words)).div_ceil(page) * page;
    let pages = (end - start) / page;
    let mut vec = vec![0u8; pages];
    // SAFETY: [start, end) covers pages of one live allocation; `vec` has a byte per page.
    let rc = unsafe { libc::mincore(start as *mut libc::c_void, end - start, vec.as_mut_ptr()) };
    if rc != 0 {
        return 0;
    }
    vec.iter().filter(|&&b| b & 1 == 1).count() as u64 * page as u64
}

impl Ring {
    /// Room for `capacity` records (0: the record is off; nothing is kept).
    pub fn new(capacity: usize) -> Ring {
        let index = if capacity == 0 {
            0
        } else {
            (capacity * INDEX_PER_RECORD)
                .next_power_of_two()
                .max(WINDOW)
        };
        // The index is made resident now: ids hash all over it, so a few thousand bundles
        // touch every page of it whatever the load, and a burst would otherwise grow the
        // resident set by the whole index while it fills. The records are not: they fill in
        // order, a page per 12 bundles, and a relay keeping fewer bundles than its capacity
        // never needs the rest.
        let index = zeroed(index);
        for word in index.iter().step_by(PAGE_WORDS) {
            word.store(0, Ordering::Relaxed);
        }
        Ring {
            words: zeroed(capacity * WORDS),
            index,
            capacity: capacity as u64,
            next: AtomicU64::new(0),
            anchor_tick: AtomicU64::new(0),
            anchor_unix_ns: AtomicU64::new(0),
            ticks_per_s: AtomicU64::new(TickRate::NANOS.ticks_per_s()),
        }
    }

    /// Heap bytes a ring of `capacity` records takes.
    pub const fn bytes_for(capacity: usize) -> usize {
        if capacity == 0 {
            return 0;
        }
        let index = (capacity * INDEX_PER_RECORD).next_power_of_two();
        let index = if index < WINDOW { WINDOW } else { index };
        (capacity * WORDS + index) * 8
    }

    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Bytes of the ring and its index the kernel holds in memory now (`mincore`): the
    /// record fills its pages only as bundles come, so a growing resident set is it filling,
    /// up to its budget, not a leak. For the admin thread; never on the request path.
    pub fn resident_bytes(&self) -> u64 {
        resident(&self.words) + resident(&self.index)
    }

    /// The owner's clock: `now` is `unix_ns` on the wall clock, ticking at `rate`.
    pub fn set_clock(&self, now: Instant, unix_ns: u64, rate: TickRate) {
        self.anchor_tick.store(now.0, Ordering::Relaxed);
        self.anchor_unix_ns.store(unix_ns, Ordering::Relaxed);
        self.ticks_per_s
            .store(rate.ticks_per_s(), Ordering::Release);
    }

    /// Unix time in ns of `t` on the owner's clock.
    pub fn unix_ns(&self, t: Instant) -> u64 {
        let rate = TickRate::new(self.ticks_per_s.load(Ordering::Acquire));
        let (tick, unix) = (
            self.anchor_tick.load(Ordering::Relaxed),
            self.anchor_unix_ns.load(Ordering::Relaxed),
        );
        if t.0 >= tick {
            unix.saturating_add(rate.to_ns(crate::clock::Ticks(t.0 - tick)))
        } else {
            unix.saturating_sub(rate.to_ns(crate::clock::Ticks(tick - t.0)))
        }
    }

    /// The owner's clock rate.
    pub fn rate(&self) -> TickRate {
        TickRate::new(self.ticks_per_s.load(Ordering::Acquire))
    }

    // ---- the owner's side ----

    /// Starts a record for a newly admitted bundle: `r` as given (its serial set here);
    /// returns the serial, `None` when the record is off.
    pub fn open(&self, r: &mut Record) -> Option<u64> {
        if self.capacity == 0 {
            return None;
        }
        let serial = self.next.load(Ordering::Relaxed);
        r.serial = serial;
        self.write(serial, r);
        // Published after the record, so a reader that sees the serial finds it written.
        self.next.store(serial + 1, Ordering::Release);
        self.insert(&r.id, serial);
        Some(serial)
    }

    /// Changes the record `serial` (when the ring has not overwritten it since).
    pub fn update(&self, serial: u64, f: impl FnOnce(&mut Record)) {
        if self.capacity == 0 || !self.live(serial) {
            return;
        }
        let mut r = self.read_own(serial);
        f(&mut r);
        self.write(serial, &r);
    }

    /// Changes the record `serial` field by field (when the ring has not overwritten it
    /// since): what the relay's own updates use, touching only the words they change.
    pub fn patch(&self, serial: u64, f: impl FnOnce(&mut Patch<'_>)) {
        if self.capacity == 0 || !self.live(serial) {
            return;
        }
        let mut w = self.read_own_words(serial);
        f(&mut Patch { w: &mut w });
        self.write_words(serial, &w);
    }

    fn base(&self, serial: u64) -> usize {
        (serial % self.capacity) as usize * WORDS
    }

    /// The owner's read: nothing else writes, so no retry.
    fn read_own(&self, serial: u64) -> Record {
        Record::decode(&self.read_own_words(serial))
    }

    fn read_own_words(&self, serial: u64) -> [u64; PAYLOAD] {
        let at = self.base(serial) + 1;
        let mut w = [0u64; PAYLOAD];
        for (i, v) in w.iter_mut().enumerate() {
            *v = self.words[at + i].load(Ordering::Relaxed);
        }
        w
    }

    fn write(&self, serial: u64, r: &Record) {
        let mut w = [0u64; PAYLOAD];
        r.encode(&mut w);
        self.write_words(serial, &w);
    }

    fn write_words(&self, serial: u64, w: &[u64; PAYLOAD]) {
        let at = self.base(serial);
        let seq = &self.words[at];
        let v = seq.load(Ordering::Relaxed);
        seq.store(v.wrapping_add(1), Ordering::Relaxed);
        // The odd sequence is visible before any payload word changes.
        fence(Ordering::Release);
        for (i, v) in w.iter().enumerate() {
            self.words[at + 1 + i].store(*v, Ordering::Relaxed);
        }
        seq.store(v.wrapping_add(2), Ordering::Release);
    }

    fn live(&self, serial: u64) -> bool {
        live_before(self.next.load(Ordering::Acquire), self.capacity, serial)
    }

    fn home(&self, id: &[u8; 32]) -> (usize, u64) {
        let h = u64::from_le_bytes(id[..8].try_into().expect("8 bytes"));
        let tag = u64::from(id[8]) | u64::from(id[9]) << 8 | u64::from(id[10]) << 16;
        (h as usize & (self.index.len() - 1), tag << SERIAL_BITS)
    }

    /// Files `serial` under `id` in the first free (or dead) entry of its window. A full window
    /// gives up its oldest entry of the same id if it has one (a bundle sent again and again
    /// fills its own window: its copies push out its oldest copy, not another bundle that
    /// shares the window), else its oldest.
    fn insert(&self, id: &[u8; 32], serial: u64) {
        let (home, tag) = self.home(id);
        let mask = self.index.len() - 1;
        // Only this thread moves `next`: read once, not per entry.
        let next = self.next.load(Ordering::Relaxed);
        let live = |serial| live_before(next, self.capacity, serial);
        // The entry to give up, by one key: another id's entries rank after every one of the
        // same id (the top bit, above any serial), then the older first.
        let mut victim = (u64::MAX, home);
        for k in 0..WINDOW {
            let i = (home + k) & mask;
            let e = self.index[i].load(Ordering::Relaxed);
            if e == 0 || !live((e & SERIAL_MASK) - 1) {
                victim.1 = i;
                break;
            }
            let key = e & SERIAL_MASK | u64::from(e & !SERIAL_MASK != tag) << 63;
            if key < victim.0 {
                victim = (key, i);
            }
        }
        let entry = tag | ((serial + 1) & SERIAL_MASK);
        self.index[victim.1].store(entry, Ordering::Release);
    }

    // ---- any thread's side ----

    /// Every record of bundle `id` the ring still holds, each a consistent copy.
    pub fn find(&self, id: &[u8; 32], mut each: impl FnMut(Record)) {
        if self.capacity == 0 {
            return;
        }
        let (home, tag) = self.home(id);
        let mask = self.index.len() - 1;
        for k in 0..WINDOW {
            let e = self.index[(home + k) & mask].load(Ordering::Acquire);
            if e == 0 || e & !SERIAL_MASK != tag {
                continue;
            }
            let serial = (e & SERIAL_MASK) - 1;
            if !self.live(serial) {
                continue;
            }
            if let Some(r) = self.read(serial)
                && r.serial == serial
                && r.id == *id
            {
                each(r);
            }
        }
    }

    /// A consistent copy of record `serial`'s place (whatever record holds it now).
    fn read(&self, serial: u64) -> Option<Record> {
        let at = self.base(serial);
        let seq = &self.words[at];
        let mut w = [0u64; PAYLOAD];
        for _ in 0..READ_TRIES {
            let before = seq.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            for (i, v) in w.iter_mut().enumerate() {
                *v = self.words[at + 1 + i].load(Ordering::Relaxed);
            }
            // The payload loads complete before the sequence is read again.
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == before {
                return Some(Record::decode(&w));
            }
        }
        None
    }
}

/// Whether record `serial` is still in a ring of `capacity` whose next serial is `next`.
fn live_before(next: u64, capacity: u64, serial: u64) -> bool {
    serial < next && next - serial <= capacity
}
