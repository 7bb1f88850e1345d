//! The seed relay's limiter: per region, one `Mutex` around an indexed min-heap of egress pairs
//! ordered by the time each may next send. `acquire` picks the head and books its next slot in one
//! step (no check-then-act gap); `cooldown` pushes one pair's time forward and re-sorts it, which
//! is the decrease-key `std::collections::BinaryHeap` lacks, hence the hand-written heap.
//!
//! Times are nanoseconds on the caller's clock (`now_ns`), so tests drive it with a simulated
//! clock. Cost: O(log pairs) per call under one uncontended-or-not mutex per region.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// A min-heap of pair ids keyed by next-allowed time, with each id's heap position tracked so
/// one pair's key can change in O(log n).
#[derive(Debug, Clone)]
pub struct IndexedHeap {
    /// Next-allowed time of each pair, indexed by pair id.
    next_ns: Vec<u64>,
    /// Pair ids in heap order.
    heap: Vec<u32>,
    /// Heap position of each pair id.
    pos: Vec<u32>,
}

impl IndexedHeap {
    /// `pairs` pairs, all allowed to send from time 0.
    pub fn new(pairs: usize) -> IndexedHeap {
        assert!(
            pairs > 0 && pairs <= u32::MAX as usize,
            "a region needs at least one pair"
        );
        IndexedHeap {
            next_ns: vec![0; pairs],
            heap: (0..pairs as u32).collect(),
            pos: (0..pairs as u32).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The pair with the earliest next-allowed time and that time.
    pub fn peek(&self) -> (usize, u64) {
        let id = self.heap[0] as usize;
        (id, self.next_ns[id])
    }

    /// Next-allowed time of one pair.
    pub fn next_ns(&self, pair: usize) -> u64 {
        self.next_ns[pair]
    }

    /// Sets one pair's next-allowed time and restores heap order (Go's `heap.Fix`).
    pub fn set(&mut self, pair: usize, next_ns: u64) {
        let old = self.next_ns[pair];
        self.next_ns[pair] = next_ns;
        let i = self.pos[pair] as usize;
        if next_ns < old {
            self.sift_up(i);
        } else {
            self.sift_down(i);
        }
    }

    fn less(&self, a: usize, b: usize) -> bool {
        self.next_ns[self.heap[a] as usize] < self.next_ns[self.heap[b] as usize]
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a] as usize] = a as u32;
        self.pos[self.heap[b] as usize] = b as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.less(i, parent) {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && self.less(right, left) {
                right
            } else {
                left
            };
            if !self.less(child, i) {
                break;
            }
            self.swap(i, child);
            i = child;
        }
    }
}

/// One limiter decision, recorded in lock order when a `RegionLimiter` keeps a journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `pair` was handed out at `now_ns`.
    Acquired { pair: usize, now_ns: u64 },
    /// `pair` was told at `now_ns` to wait until `until_ns`.
    Cooldown {
        pair: usize,
        now_ns: u64,
        until_ns: u64,
    },
    /// `pair`'s send was answered at `now_ns`; its next slot is `until_ns`.
    Settled {
        pair: usize,
        now_ns: u64,
        until_ns: u64,
    },
}

struct Inner {
    heap: IndexedHeap,
    /// Decisions in lock order, kept only when enabled (tests and diagnostics).
    journal: Option<Vec<Event>>,
}

/// One region's limiter: the pairs (egress address index, this region) behind one mutex.
pub struct RegionLimiter {
    inner: Mutex<Inner>,
    interval_ns: u64,
    /// How long an acquired pair stays booked while its send is unanswered (at least the
    /// interval). See [`RegionLimiter::holding_in_flight`].
    hold_ns: u64,
    /// Copy of the head's next-allowed time, updated under the lock, so the rotating port can
    /// compare regions without taking eight locks.
    head_next_ns: AtomicU64,
}

impl RegionLimiter {
    /// `pairs` egress addresses, one send per `interval_ns` each.
    pub fn new(pairs: usize, interval_ns: u64) -> RegionLimiter {
        RegionLimiter::with_journal(pairs, interval_ns, false)
    }

    /// Like `new`; with `journal`, every decision is also recorded (see `journal`).
    pub fn with_journal(pairs: usize, interval_ns: u64, journal: bool) -> RegionLimiter {
        RegionLimiter {
            inner: Mutex::new(Inner {
                heap: IndexedHeap::new(pairs),
                journal: journal.then(Vec::new),
            }),
            interval_ns,
            hold_ns: interval_ns,
            head_next_ns: AtomicU64::new(0),
        }
    }

    /// Keeps an acquired pair booked for up to `hold_ns` until [`RegionLimiter::settle`] books
    /// its next slot from the moment the answer came. The engine stamps a request when it
    /// arrives, somewhere between our send and its answer; counting the interval from the answer
    /// is the only booking that scheduling delay on either side can never make early.
    pub fn holding_in_flight(mut self, hold_ns: u64) -> RegionLimiter {
        self.hold_ns = hold_ns.max(self.interval_ns);
        self
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Picks the pair that may send soonest and, when it may send at `now_ns`, books its next
    /// slot at `now_ns + interval` and returns it. Otherwise returns how long until one is ready.
    pub fn acquire(&self, now_ns: u64) -> Result<usize, u64> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (pair, next_ns) = inner.heap.peek();
        if next_ns > now_ns {
            return Err(next_ns - now_ns);
        }
        inner.heap.set(pair, now_ns + self.hold_ns);
        self.head_next_ns
            .store(inner.heap.peek().1, Ordering::Relaxed);
        if let Some(journal) = &mut inner.journal {
            journal.push(Event::Acquired { pair, now_ns });
        }
        Ok(pair)
    }

    /// Honours an engine's Retry-After: the pair may not send before `now_ns + retry_after_ns`.
    /// A later booking is kept as it is.
    pub fn cooldown(&self, pair: usize, retry_after_ns: u64, now_ns: u64) {
        let until_ns = now_ns.saturating_add(retry_after_ns);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if until_ns > inner.heap.next_ns(pair) {
            inner.heap.set(pair, until_ns);
            self.head_next_ns
                .store(inner.heap.peek().1, Ordering::Relaxed);
        }
        if let Some(journal) = &mut inner.journal {
            journal.push(Event::Cooldown {
                pair,
                now_ns,
                until_ns,
            });
        }
    }

    /// `pair`'s send was answered at `now_ns`: its next slot is `now_ns` plus the interval, or
    /// plus `wait_ns` when the engine asked for longer. Replaces the in-flight hold.
    pub fn settle(&self, pair: usize, wait_ns: u64, now_ns: u64) {
        let until_ns = now_ns.saturating_add(wait_ns.max(self.interval_ns));
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.heap.set(pair, until_ns);
        self.head_next_ns
            .store(inner.heap.peek().1, Ordering::Relaxed);
        if let Some(journal) = &mut inner.journal {
            journal.push(Event::Settled {
                pair,
                now_ns,
                until_ns,
            });
        }
    }

    /// Earliest time any pair of this region may send (a hint; read without the lock).
    pub fn head_next_ns(&self) -> u64 {
        self.head_next_ns.load(Ordering::Relaxed)
    }

    /// Next-allowed time of one pair (for tests and diagnostics).
    pub fn pair_next_ns(&self, pair: usize) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .heap
            .next_ns(pair)
    }

    /// The recorded decisions in lock order (empty unless built `with_journal`).
    pub fn journal(&self) -> Vec<Event> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .journal
            .clone()
            .unwrap_or_default()
    }
}
