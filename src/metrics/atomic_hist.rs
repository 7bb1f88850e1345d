//! A histogram one thread records into and any thread reads: HdrHistogram's log-linear bucket
//! layout (3 significant digits, 1 ns .. 60 s) over a preallocated array of `AtomicU64`, so a
//! scrape converts it bucket for bucket, exactly, into an `hdrhistogram::Histogram`.
//!
//! Recording is an index computation (one `lzcnt`, two shifts) and two owner-only load/store
//! pairs (bucket and sum): no read-modify-write, no lock, no allocation. Memory: 27,648 buckets
//! × 8 bytes = 216 KiB per histogram, allocated once at startup, resident only in the pages
//! values reach.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use hdrhistogram::Histogram;

/// Smallest value told apart from zero: 1 ns.
pub const LOWEST_NS: u64 = 1;
/// Largest value kept exactly: a minute covers any stall worth reading; larger values are
/// recorded as 60 s (and counted in the sum as they were).
pub const HIGHEST_NS: u64 = 60_000_000_000;
/// Significant decimal digits kept: 0.1 % relative error, the usual for latency work.
pub const SIGFIGS: u8 = 3;

// HdrHistogram's layout for (LOWEST_NS, HIGHEST_NS, SIGFIGS), worked out once:
// 2·10^3 = 2000 values need 11 bits of sub-bucket, so 2048 sub-buckets, the upper half of which
// is new in each further bucket; unit magnitude 0 (lowest 1); 26 buckets reach past 60 s.
const SUB_BUCKET_HALF_COUNT_MAGNITUDE: u32 = 10;
const SUB_BUCKET_HALF_COUNT: usize = 1 << SUB_BUCKET_HALF_COUNT_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (2 * SUB_BUCKET_HALF_COUNT as u64) - 1;
const LEADING_ZERO_COUNT_BASE: u32 = 64 - SUB_BUCKET_HALF_COUNT_MAGNITUDE - 1;
const BUCKET_COUNT: usize = 26;
/// Number of buckets, equal to `Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGFIGS)`'s.
pub const COUNTS_LEN: usize = (BUCKET_COUNT + 1) * SUB_BUCKET_HALF_COUNT;

/// Bucket index of `value_ns` (clamped to [`HIGHEST_NS`]), as HdrHistogram computes it.
#[inline]
pub fn index_of(value_ns: u64) -> usize {
    let v = value_ns.min(HIGHEST_NS);
    let bucket = LEADING_ZERO_COUNT_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize + 1) << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + sub - SUB_BUCKET_HALF_COUNT
}

/// Lowest value that lands in bucket `index`.
pub fn value_at(index: usize) -> u64 {
    let mut bucket = (index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) as i64 - 1;
    let mut sub = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
    if bucket < 0 {
        sub -= SUB_BUCKET_HALF_COUNT;
        bucket = 0;
    }
    (sub as u64) << bucket
}

/// An empty `hdrhistogram::Histogram` with this module's bounds.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGFIGS).expect("static histogram bounds")
}

/// Buckets per cache-line pair.
const LINE_COUNTS: usize = 16;

/// 16 buckets on their own 128 bytes, so the bucket array never shares a line with another
/// thread's heap data.
#[repr(align(128))]
struct Line([AtomicU64; LINE_COUNTS]);

/// Bytes one recording histogram holds: its bucket array, and room to align it.
pub const ALLOCATION_BYTES: usize =
    COUNTS_LEN / LINE_COUNTS * std::mem::size_of::<Line>() + std::mem::align_of::<Line>();

/// The bucket array, allocated zeroed without being written: a histogram's values fall in a
/// few of its 54 pages, and only those become resident (each the first time a value reaches
/// it). Allocated at byte alignment and aligned here, since the system allocator clears a
/// stricter-aligned zeroed allocation byte by byte, which would make all of it resident.
struct Lines {
    base: *mut u8,
    lines: *const Line,
    len: usize,
}

// SAFETY: the lines are atomics; `Lines` owns its allocation and hands out only shared
// references to them.
unsafe impl Send for Lines {}
unsafe impl Sync for Lines {}

impl Lines {
    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(
            len * std::mem::size_of::<Line>() + std::mem::align_of::<Line>(),
            1,
        )
        .expect("histogram layout")
    }

    fn zeroed(len: usize) -> Lines {
        if len == 0 {
            return Lines {
                base: std::ptr::null_mut(),
                lines: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            };
        }
        let layout = Self::layout(len);
        // SAFETY: a non-zero size.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: the offset is below the alignment, which the layout holds in excess.
        let lines = unsafe { base.add(base.align_offset(std::mem::align_of::<Line>())) };
        Lines {
            base,
            lines: lines.cast(),
            len,
        }
    }
}

impl std::ops::Deref for Lines {
    type Target = [Line];
    fn deref(&self) -> &[Line] {
        // SAFETY: `len` aligned lines inside the allocation, all-zero bytes being valid atomics.
        unsafe { std::slice::from_raw_parts(self.lines, self.len) }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        if !self.base.is_null() {
            // SAFETY: allocated in `zeroed` with this layout.
            unsafe { std::alloc::dealloc(self.base, Self::layout(self.len)) };
        }
    }
}

/// One histogram, written by one thread only.
pub struct AtomicHist {
    lines: Lines,
    sum_ns: AtomicU64,
}

impl Default for AtomicHist {
    fn default() -> Self {
        Self::new()
    }
}

impl AtomicHist {
    pub fn new() -> AtomicHist {
        AtomicHist {
            lines: Lines::zeroed(COUNTS_LEN / LINE_COUNTS),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// A histogram that records nothing and holds no buckets, for metrics turned off (its
    /// owner never records into it; it reads as empty).
    pub fn off() -> AtomicHist {
        AtomicHist {
            lines: Lines::zeroed(0),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// Records one value. Owner thread only: the load/store pairs are not atomic increments, so
    /// a second writer would lose counts (never memory safety).
    #[inline]
    pub fn record(&self, value_ns: u64) {
        let i = index_of(value_ns);
        let c = &self.lines[i / LINE_COUNTS].0[i % LINE_COUNTS];
        c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
        self.sum_ns
            .store(self.sum_ns.load(Relaxed).wrapping_add(value_ns), Relaxed);
    }

    fn counts(&self) -> impl Iterator<Item = &AtomicU64> {
        self.lines.iter().flat_map(|l| l.0.iter())
    }

    /// Sum of every recorded value, ns (unclamped).
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns.load(Relaxed)
    }

    /// Count in bucket `index`.
    pub fn count_at(&self, index: usize) -> u64 {
        self.lines[index / LINE_COUNTS].0[index % LINE_COUNTS].load(Relaxed)
    }

    /// Adds this histogram's counts into `h` (which must have this module's bounds or
    /// auto-resize); exact, bucket for bucket.
    pub fn add_to(&self, h: &mut Histogram<u64>) {
        for (i, c) in self.counts().enumerate() {
            let n = c.load(Relaxed);
            if n != 0 {
                h.record_n(value_at(i), n).expect("value within bounds");
            }
        }
    }

    /// Adds each bucket's count into `acc[i]` (`acc.len() == COUNTS_LEN`).
    pub fn add_counts(&self, acc: &mut [u64]) {
        for (a, c) in acc.iter_mut().zip(self.counts()) {
            *a += c.load(Relaxed);
        }
    }
}
