//! The mesh between reactor threads: what lets a bundle accepted on one thread leave through
//! another thread's pairs, so any connection reaches the whole egress pool.
//!
//! Per ordered pair of threads (owner, borrower) there are two bounded single-producer rings:
//! - credits, owner → borrower: free arena slots the owner lends the borrower ([`LentSlot`]);
//! - handoffs, borrower → owner: those slots back, each holding a bundle the borrower decoded
//!   straight into it ([`Handoff`]), for the owner to admit, pace and end as its own.
//!
//! A bundle's bytes are written once, by the thread that read the request, into the arena of
//! the thread that will send it: no copy, and the in-flight cap stays each arena's slot count
//! (a lent slot is held by its owner's arena the whole time). The credits outstanding per pair of
//! threads bound the handoffs outstanding, so a handoff ring can never be full.
//!
//! Each thread also publishes, on lines only it writes, when its pool could send a bundle for
//! each lane (a region's pairs of one egress group, [`Estimate`]), whether it is about to sleep in the kernel (so a thread that
//! hands it work knows whether a wake-up is needed), its ring's file descriptor (the target
//! of that wake-up, an io_uring `MSG_RING`), and whether it has drained at shutdown.
//!
//! It is NOT the decision where a bundle goes (`relay::handoff`) and NOT the wake-up itself
//! (the reactor): only the shared state, each piece with one writer.

pub mod spsc;

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering, fence};

use crate::arena::{LentSlot, SlotHandle};
use crate::clock::Instant;
use crate::limiter::{LANES_MAX, REGIONS_MAX};

pub use spsc::Ring;

/// Most slots an owner keeps lent to one borrower: enough that a borrower never waits for a
/// credit while the owner's reply (one loop iteration, tens of µs) is on its way at hundreds of
/// thousands of handoffs a second, few enough that idle credits hold little of an arena.
pub const CREDITS_PER_PEER_MAX: usize = 64;

/// A lent slot coming back to its owner with a bundle in it, bound for `lane`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handoff {
    pub slot: SlotHandle,
    /// The region and egress group it leaves through ([`crate::limiter::LaneId`]).
    pub lane: u8,
    /// Admitted (and counted) by the thread that hands it over, which can no longer send it;
    /// a fresh handoff is admitted by the thread it goes to.
    pub moved: bool,
}

/// No estimate: the thread has no pair up for the lane, or its region's engine is silent.
pub const NEVER: u64 = u64::MAX;

/// When a thread's pool could send one more bundle for a lane, as it last published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// When the next bundle queued there now would leave (ticks; [`NEVER`] for none).
    pub due: u64,
    /// How much later each bundle after it leaves (the region's interval over the lane's pairs
    /// up).
    pub step: u64,
}

impl Estimate {
    pub const NONE: Estimate = Estimate {
        due: NEVER,
        step: 0,
    };

    /// When a bundle sent now would leave, `extra` bundles after the published ones.
    pub fn at(self, now: Instant, extra: u64) -> u64 {
        if self.due == NEVER {
            return NEVER;
        }
        self.due
            .max(now.0)
            .saturating_add(self.step.saturating_mul(extra))
    }
}

/// What one thread publishes, on lines of its own: written by that thread only, but for
/// `news`, which the others set.
#[repr(align(128))]
struct Line {
    /// Set just before the thread sleeps in the kernel, cleared when it wakes.
    sleeping: AtomicBool,
    /// It has drained at shutdown: nothing held, nothing to hand off.
    drained: AtomicBool,
    /// It is stopping: other threads route around it and take no more of its credits
    /// ([`Mesh::leave`]).
    leaving: AtomicBool,
    /// It has stopped for good: it admits and hands off nothing more ([`Mesh::close`]).
    closed: AtomicBool,
    ring_fd: AtomicI32,
    /// Another thread heard a region's engine answer a bundle again after a silence
    /// ([`Mesh::heard_again`]); cleared when this thread looks ([`Mesh::take_news`]).
    news: AtomicBool,
    /// Bumped at each publish, so a reader knows its own handoffs since are not in it yet.
    generation: AtomicU64,
    due: [AtomicU64; LANES_MAX],
    step: [AtomicU64; LANES_MAX],
}

/// One thread's handoff counts to each other thread, on lines of its own (written by that
/// thread only: a load and a store, no read-modify-write).
#[repr(align(128))]
struct Row([AtomicU64; ROW_COUNTERS]);

const ROW_COUNTERS: usize = 16;

/// See the module docs.
pub struct Mesh {
    threads: usize,
    credits_per_peer: usize,
    lines: Box<[Line]>,
    /// `[owner * threads + borrower]`.
    credits: Box<[Ring<LentSlot>]>,
    /// `[borrower * threads + owner]`.
    handoffs: Box<[Ring<Handoff>]>,
    /// Handoffs by sender: `rows[sender * rows_per_thread + receiver / ROW_COUNTERS]`.
    rows: Box<[Row]>,
    rows_per_thread: usize,
    /// Per region: when a thread last heard its engine answer a bundle at the end of a
    /// silence (ticks; 0: never).
    heard: [AtomicU64; REGIONS_MAX],
}

impl Mesh {
    /// The mesh for `threads` threads of `slots_per_thread` arena slots each: every owner lends
    /// each other thread up to a fair share of its slots, at most [`CREDITS_PER_PEER_MAX`].
    pub fn new(threads: usize, slots_per_thread: u32) -> Mesh {
        let threads = threads.max(1);
        let credits_per_peer = credits_per_peer(threads, slots_per_thread);
        let rings = threads * threads;
        let rows_per_thread = threads.div_ceil(ROW_COUNTERS);
        Mesh {
            threads,
            credits_per_peer,
            lines: (0..threads)
                .map(|_| Line {
                    sleeping: AtomicBool::new(false),
                    drained: AtomicBool::new(false),
                    leaving: AtomicBool::new(false),
                    closed: AtomicBool::new(false),
                    ring_fd: AtomicI32::new(-1),
                    news: AtomicBool::new(false),
                    generation: AtomicU64::new(0),
                    due: std::array::from_fn(|_| AtomicU64::new(NEVER)),
                    step: std::array::from_fn(|_| AtomicU64::new(0)),
                })
                .collect(),
            credits: (0..rings).map(|_| Ring::new(credits_per_peer)).collect(),
            handoffs: (0..rings).map(|_| Ring::new(credits_per_peer)).collect(),
            rows: (0..threads * rows_per_thread)
                .map(|_| Row(Default::default()))
                .collect(),
            rows_per_thread,
            heard: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The heap bytes a mesh of `threads` threads holds (the budget counts it).
    pub fn allocation_bytes(threads: usize, slots_per_thread: u32) -> usize {
        let threads = threads.max(1);
        let k = credits_per_peer(threads, slots_per_thread);
        let rings = threads * threads;
        threads * std::mem::size_of::<Line>()
            + rings
                * (std::mem::size_of::<Ring<LentSlot>>() + Ring::<LentSlot>::allocation_bytes(k))
            + rings * (std::mem::size_of::<Ring<Handoff>>() + Ring::<Handoff>::allocation_bytes(k))
            + threads * threads.div_ceil(ROW_COUNTERS) * std::mem::size_of::<Row>()
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Slots an owner keeps lent to each other thread.
    pub fn credits_per_peer(&self) -> usize {
        self.credits_per_peer
    }

    /// Owner → borrower: the slots lent.
    pub fn credits(&self, owner: usize, borrower: usize) -> &Ring<LentSlot> {
        &self.credits[owner * self.threads + borrower]
    }

    /// Borrower → owner: the slots back with their bundles.
    pub fn handoffs(&self, borrower: usize, owner: usize) -> &Ring<Handoff> {
        &self.handoffs[borrower * self.threads + owner]
    }

    /// Any handoff waiting for `owner`.
    pub fn has_handoffs_for(&self, owner: usize) -> bool {
        (0..self.threads).any(|b| b != owner && !self.handoffs(b, owner).is_empty())
    }

    /// Thread `t` publishes lane `r`'s estimate.
    pub fn publish(&self, t: usize, r: usize, e: Estimate) {
        let line = &self.lines[t];
        if line.due[r].load(Ordering::Relaxed) != e.due {
            line.due[r].store(e.due, Ordering::Relaxed);
        }
        if line.step[r].load(Ordering::Relaxed) != e.step {
            line.step[r].store(e.step, Ordering::Relaxed);
        }
    }

    /// Thread `t` is done publishing for now (after [`Mesh::publish`] calls that changed
    /// anything).
    pub fn published(&self, t: usize) {
        let g = &self.lines[t].generation;
        g.store(g.load(Ordering::Relaxed) + 1, Ordering::Release);
    }

    /// Thread `t`'s publish generation.
    pub fn generation(&self, t: usize) -> u64 {
        self.lines[t].generation.load(Ordering::Acquire)
    }

    /// Lane `r`'s estimate as thread `t` last published it.
    pub fn estimate(&self, t: usize, r: usize) -> Estimate {
        let line = &self.lines[t];
        Estimate {
            due: line.due[r].load(Ordering::Relaxed),
            step: line.step[r].load(Ordering::Relaxed),
        }
    }

    /// Thread `by` heard region `r`'s engine answer a bundle at `at`, ending a silence: every
    /// other thread is told (the caller wakes those asleep). A thread that still counts the
    /// region silent, since before `at`, need not wait for its own probe (up to seconds
    /// apart once probes go unanswered) while its bundles age.
    pub fn heard_again(&self, by: usize, r: usize, at: Instant) {
        self.heard[r].fetch_max(at.0, Ordering::Relaxed);
        for (t, line) in self.lines.iter().enumerate() {
            if t != by && !line.leaving.load(Ordering::Acquire) {
                line.news.store(true, Ordering::Release);
            }
        }
    }

    /// Whether thread `t` was told of a region heard again since it last looked (and clears
    /// it).
    pub fn take_news(&self, t: usize) -> bool {
        let line = &self.lines[t];
        line.news.load(Ordering::Relaxed) && line.news.swap(false, Ordering::Acquire)
    }

    /// Whether thread `t` has news waiting: as [`Mesh::has_handoffs_for`], a reason not to
    /// sleep.
    pub fn has_news_for(&self, t: usize) -> bool {
        self.lines[t].news.load(Ordering::Acquire)
    }

    /// When a thread last heard region `r`'s engine answer a bundle after a silence.
    pub fn heard_again_at(&self, r: usize) -> Instant {
        Instant(self.heard[r].load(Ordering::Relaxed))
    }

    /// Thread `t` is about to sleep in the kernel (`true`) or is awake again. The store is
    /// sequentially consistent, and so is [`Mesh::is_sleeping`]: a thread that set it and then
    /// finds no handoff waiting, and a sender that pushed a handoff and then reads it, cannot
    /// both miss each other, so a handoff never waits for a wake-up nobody sends.
    pub fn set_sleeping(&self, t: usize, sleeping: bool) {
        self.lines[t].sleeping.store(sleeping, Ordering::SeqCst);
        // The rings' loads after this must not pass the store.
        fence(Ordering::SeqCst);
    }

    /// Whether thread `t` said it sleeps; call after pushing the handoffs it should see.
    pub fn is_sleeping(&self, t: usize) -> bool {
        // The handoff's store before this must not pass the load (a store buffer would let it).
        fence(Ordering::SeqCst);
        self.lines[t].sleeping.load(Ordering::SeqCst)
    }

    /// Thread `t`'s io_uring file descriptor, the target of a wake-up (`-1` until it runs).
    pub fn set_ring_fd(&self, t: usize, fd: RawFd) {
        self.lines[t].ring_fd.store(fd, Ordering::Release);
    }

    pub fn ring_fd(&self, t: usize) -> RawFd {
        self.lines[t].ring_fd.load(Ordering::Acquire)
    }

    /// Thread `t` has drained (nothing held, nothing in its intake, no handoff waiting) or
    /// not. A thread that drained accepts nothing and so can hand nothing off, so once every
    /// thread reads as drained no handoff can arrive anywhere and each may tear down.
    pub fn set_drained(&self, t: usize, drained: bool) {
        self.lines[t].drained.store(drained, Ordering::SeqCst);
    }

    pub fn all_drained(&self) -> bool {
        self.lines.iter().all(|l| l.drained.load(Ordering::SeqCst))
    }

    /// Whether every thread says it is drained and, looked at after that, no handoff waits
    /// for thread `t`. A thread's word may be stale: it said drained, then a handoff reached
    /// it from a thread that drained after. That handoff was pushed before its sender's flag,
    /// so once the flag reads drained the handoff is seen.
    pub fn all_drained_for(&self, t: usize) -> bool {
        self.all_drained() && !self.has_handoffs_for(t)
    }

    /// Thread `t` is stopping: from now on other threads route no bundle to it and take no
    /// credit it lent (one taken just before still reaches it, and it ends it). It may still
    /// hand bundles off itself until it closes.
    pub fn leave(&self, t: usize) {
        self.lines[t].leaving.store(true, Ordering::Release);
    }

    /// Whether thread `t` is stopping ([`Mesh::leave`]) or stopped.
    pub fn is_leaving(&self, t: usize) -> bool {
        self.lines[t].leaving.load(Ordering::Acquire)
    }

    /// Thread `t` stops for good: it admits nothing and hands nothing off from now on (and is
    /// leaving, if it was not yet). Sequentially consistent, as is [`Mesh::all_closed`]: a
    /// thread that reads every thread closed and then empties its handoff rings has every
    /// bundle any of them handed it (each pushed its last before it closed), and no thread
    /// writes into a slot it lent any more, so its arena may go. A closed thread is drained
    /// for good too: one that failed, or never started, holds no other thread's drain to its
    /// deadline.
    pub fn close(&self, t: usize) {
        self.lines[t].leaving.store(true, Ordering::Release);
        self.lines[t].drained.store(true, Ordering::SeqCst);
        self.lines[t].closed.store(true, Ordering::SeqCst);
    }

    pub fn all_closed(&self) -> bool {
        self.lines.iter().all(|l| l.closed.load(Ordering::SeqCst))
    }

    /// One bundle handed from `sender` to `receiver` (counted by the sender only).
    pub fn count_handoff(&self, sender: usize, receiver: usize) {
        let row = &self.rows[sender * self.rows_per_thread + receiver / ROW_COUNTERS];
        let c = &row.0[receiver % ROW_COUNTERS];
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Bundles `sender` handed to `receiver` so far.
    pub fn handoffs_counted(&self, sender: usize, receiver: usize) -> u64 {
        self.rows[sender * self.rows_per_thread + receiver / ROW_COUNTERS].0
            [receiver % ROW_COUNTERS]
            .load(Ordering::Relaxed)
    }
}

/// Slots each owner lends each other thread: at most a quarter of its arena over all its
/// peers, at most [`CREDITS_PER_PEER_MAX`], at least one.
fn credits_per_peer(threads: usize, slots_per_thread: u32) -> usize {
    if threads <= 1 {
        return 1;
    }
    (slots_per_thread as usize / (4 * (threads - 1))).clamp(1, CREDITS_PER_PEER_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread said it was drained, then a handoff reached it, then its sender drained and
    /// said so: every flag reads drained, but the first thread is not, and must not tear down
    /// (its bundle would end failed with the drain's time still to run).
    #[test]
    fn a_thread_that_said_drained_before_a_handoff_reached_it_is_not_drained() {
        let mesh = Mesh::new(2, 8);
        mesh.set_drained(0, true);
        let h = Handoff {
            slot: SlotHandle {
                index: 0,
                generation: 1,
            },
            lane: 0,
            moved: true,
        };
        assert!(mesh.handoffs(1, 0).push(h).is_ok());
        mesh.set_drained(1, true);
        assert!(!mesh.all_drained_for(0), "a handoff waits for thread 0");
        assert!(mesh.all_drained_for(1));
        let _ = mesh.handoffs(1, 0).pop();
        assert!(mesh.all_drained_for(0));
    }

    /// A thread that failed (or never started) closes without ever saying it drained: the
    /// others still read every thread drained once they are, not only at their deadlines.
    #[test]
    fn a_closed_thread_counts_as_drained() {
        let mesh = Mesh::new(3, 8);
        mesh.close(2);
        mesh.set_drained(0, true);
        mesh.set_drained(1, true);
        assert!(mesh.all_drained_for(0) && mesh.all_drained_for(1));
    }
}
