//! The record of recent bundles: for each bundle the relay admitted, when, which regions and
//! egress addresses it was sent through, what each engine said, and how it ended. It answers
//! `getInflightBundleStatuses` and the relay's own `getBundleDelivery` ([`answer`]).
//!
//! Fixed size and allocated at startup: one ring per reactor thread ([`Ring`]), written only
//! by the thread that sends the bundle (where it is admitted, after any handoff), read by any
//! thread's intake through a sequence lock, so a status query takes no lock, allocates
//! nothing and never stalls the writer. A ring holds the last `capacity` bundles of its
//! thread; older ones are gone. `getInflightBundleStatuses` sees only the last five minutes of
//! it, as Jito's look-back does (`Invalid` past it); `getBundleDelivery` all of it. Sized by
//! [`capacity_for`]: the thread's pairs' delivery rate over `keep_s` seconds and twice its arena
//! slots, within a cap.

pub mod answer;
mod record;
mod ring;

pub use record::{
    ATTEMPTS_KEPT, Attempt, Egress, End, Patch, Record, TEXT_BYTES, Text, Verdict, WORDS,
};
pub use ring::{INDEX_PER_RECORD, Ring, WINDOW};

/// Default span the record covers at the pool's full delivery rate: Jito's own window for
/// bundle statuses.
pub const KEEP_S_DEFAULT: u32 = 300;
/// Default cap on records per relay (all threads): 320 MiB of ring, touched only as bundles
/// come.
pub const RECORDS_MAX_DEFAULT: u32 = 1 << 20;
/// Past this the record would outweigh the arena many times over: a typo.
pub const RECORDS_MAX_LIMIT: u32 = 1 << 26;
/// Past an hour a bundle's blockhash has long expired; nobody asks.
pub const KEEP_S_MAX: u32 = 3_600;
/// A thread keeps at least this many (a small pool still answers for its last bundles).
pub const RECORDS_PER_THREAD_MIN: usize = 1_024;

/// How many records thread of `threads` keeps: its pairs' full delivery rate (`sends_per_s`)
/// over `keep_s` (at least [`RECORDS_PER_THREAD_MIN`]), and twice the `arena_slots` it holds
/// bundles in; its share of `records_max` at most. `keep_s` 0 turns the record off.
///
/// The arena term keeps every bundle still held on record, however fast bots send: records
/// are overwritten oldest first, and while a bundle is held the records opened after it are
/// of bundles still held (fewer than the arena's slots) or of ones ended by a send (the
/// delivery-rate term, as `keep_s` outlasts any bundle's age), and a bundle moved between
/// threads leaves one record more where it was.
pub fn capacity_for(
    sends_per_s: f64,
    keep_s: u32,
    records_max: u32,
    threads: usize,
    arena_slots: usize,
) -> usize {
    if keep_s == 0 || records_max == 0 {
        return 0;
    }
    let share = (records_max as usize / threads.max(1)).max(1);
    let want = (sends_per_s * f64::from(keep_s)).ceil() as usize;
    want.max(RECORDS_PER_THREAD_MIN)
        .saturating_add(arena_slots.saturating_mul(2))
        .min(share)
}

/// Every thread's ring, shared: thread `t` writes `ring(t)`, anyone reads all.
pub struct Journals {
    rings: Box<[Ring]>,
}

/// What the record says of one bundle id for one tenant.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    /// The latest record of it (a bundle sent twice has two).
    pub latest: Record,
    /// The thread whose ring holds it (its clock dates the record).
    pub thread: usize,
    /// Records of it, `latest` included.
    pub submissions: u32,
    /// The region of an engine that took any of its submissions, else of one that may have
    /// (a send lost after it went whole): a later copy that failed does not undo that.
    pub taken_by: Option<u8>,
    /// An engine took one of its submissions.
    pub accepted: bool,
}

impl Journals {
    /// One ring per thread, of the given capacities.
    pub fn new(capacities: &[usize]) -> Journals {
        Journals {
            rings: capacities.iter().map(|&c| Ring::new(c)).collect(),
        }
    }

    pub fn ring(&self, t: usize) -> &Ring {
        &self.rings[t]
    }

    pub fn threads(&self) -> usize {
        self.rings.len()
    }

    /// Records kept over all threads.
    pub fn capacity(&self) -> usize {
        self.rings.iter().map(Ring::capacity).sum()
    }

    /// Bytes of every ring the kernel holds in memory now ([`Ring::resident_bytes`]).
    pub fn resident_bytes(&self) -> u64 {
        self.rings.iter().map(Ring::resident_bytes).sum()
    }

    /// The bundle `id` as tenant slot `tenant` in its epoch `epoch` sent it: its latest record
    /// that is not a move (a bundle moved between threads goes on in the record it moved to).
    pub fn find(&self, id: &[u8; 32], tenant: u16, epoch: u32) -> Option<Found> {
        let epoch = epoch & ((1 << record::TENANT_EPOCH_BITS) - 1);
        let mut best: Option<Found> = None;
        let mut count = 0u32;
        let (mut accepted, mut lost) = (None, None);
        for (t, ring) in self.rings.iter().enumerate() {
            ring.find(id, |r| {
                if r.tenant != tenant || r.tenant_epoch != epoch {
                    return;
                }
                if r.end != End::Moved {
                    count += 1;
                }
                for a in r.kept() {
                    match a.verdict {
                        Verdict::Accepted => accepted = accepted.or(Some(a.region)),
                        Verdict::Lost => lost = Some(a.region),
                        _ => {}
                    }
                }
                // Ties (a move and where it went) go to the one still going on.
                let later = best.as_ref().is_none_or(|b| {
                    (r.end != End::Moved, r.admitted.0)
                        > (b.latest.end != End::Moved, b.latest.admitted.0)
                });
                if later {
                    best = Some(Found {
                        latest: r,
                        thread: t,
                        submissions: 0,
                        taken_by: None,
                        accepted: false,
                    });
                }
            });
        }
        best.map(|b| Found {
            submissions: count.max(1),
            taken_by: accepted.or(lost),
            accepted: accepted.is_some(),
            ..b
        })
    }
}
