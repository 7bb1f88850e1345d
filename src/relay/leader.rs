//! Leader-aware routing: which region's engine is connected to the next Jito leader, learned
//! from the engines' own `GetNextScheduledLeader` answers, for the rotating port's `leader`
//! strategy (a tenant's `rotating = "leader"`).
//!
//! One [`Board`] serves every reactor thread. Whichever thread finds a poll due claims it with
//! one compare-and-swap on the due instant (so the relay asks once per period, not once per
//! thread, and any thread with a pair carries on when another has none) and makes the call on
//! a pair the limiter hands out like any other: it counts against the address's one request
//! per interval. The answer is published as two relaxed-ordered words; a reader can see a new
//! region with the previous validity for an instant, which only routes one bundle by a
//! slightly older hint. An answer is trusted for [`VALID_POLLS`] periods: with no fresh answer
//! (engines silent, every pair busy) routing falls back to the soonest region instead of
//! following a leader that has moved on.
//!
//! The request names every region the relay runs (Jito answers for the asking engine's region
//! alone when the list is empty); the answer's region is matched against them by name, and
//! one the relay does not run reads as "no leader known". Decoding is by hand
//! ([`decode_next_leader`], checked against prost by a fuzz target): a reactor allocates
//! nothing after startup.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use prost::Message;

use crate::clock::{Instant, Ticks};
use crate::grpc::protowire::{self, Fields, Value};
use crate::proto::searcher::NextScheduledLeaderResponse;

/// An answer is trusted for this many poll periods.
pub const VALID_POLLS: u64 = 3;

/// `NextScheduledLeaderRequest.regions`, `NextScheduledLeaderResponse`'s fields.
const REQUEST_REGIONS_FIELD: u32 = 1;
const CURRENT_SLOT_FIELD: u32 = 1;
const NEXT_LEADER_SLOT_FIELD: u32 = 2;
const NEXT_LEADER_IDENTITY_FIELD: u32 = 3;
const NEXT_LEADER_REGION_FIELD: u32 = 4;

/// An engine's answer, its region matched to the relay's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextLeader {
    pub current_slot: u64,
    pub next_leader_slot: u64,
    /// The running region the next leader's engine is in; `None` when the engine named none
    /// or one the relay does not run.
    pub region: Option<u8>,
}

/// A thread's claim on a leader poll ([`Board::claim`]): the instant the claim holds the board
/// until, which no other claim has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim(u64);

/// See the module docs.
#[derive(Debug)]
pub struct Board {
    /// When the next poll is due (ticks). A thread claims a poll by moving it forward.
    due: AtomicU64,
    /// The leader's region + 1 (0: none known).
    region: AtomicU64,
    /// Until when that region is trusted (ticks).
    valid_until: AtomicU64,
    current_slot: AtomicU64,
    next_leader_slot: AtomicU64,
    /// The poll period the threads last said (ticks; 0: none yet).
    period: AtomicU64,
}

impl Default for Board {
    fn default() -> Board {
        Board {
            due: AtomicU64::new(0),
            region: AtomicU64::new(0),
            valid_until: AtomicU64::new(0),
            current_slot: AtomicU64::new(0),
            next_leader_slot: AtomicU64::new(0),
            period: AtomicU64::new(0),
        }
    }
}

impl Board {
    /// The next leader's region, if an answer still trusted at `now` named one.
    #[inline]
    pub fn region(&self, now: Instant) -> Option<u8> {
        if now.0 >= self.valid_until.load(Relaxed) {
            return None;
        }
        (self.region.load(Relaxed) as u8).checked_sub(1)
    }

    /// Claims the poll due at or before `now` for this thread, holding it `hold` (the call's
    /// deadline) so no other thread asks meanwhile. `Err(due)`: not due yet, or another thread
    /// claimed it first. The claim is what [`Board::unanswered`] and [`Board::answered`] are
    /// given: once it lapsed and another thread claimed the poll, they leave that one be.
    pub fn claim(&self, now: Instant, hold: Ticks) -> Result<Claim, Instant> {
        let due = self.due.load(Relaxed);
        if now.0 < due {
            return Err(Instant(due));
        }
        let held = now.after(hold).0;
        self.due
            .compare_exchange(due, held, Relaxed, Relaxed)
            .map(|_| Claim(held))
            .map_err(Instant)
    }

    /// The claimed poll could not be made, or got no usable answer: the next is due at `at`
    /// (the last answer stays trusted until it ages out). Nothing, if the claim lapsed and
    /// another thread's poll holds the board now.
    pub fn unanswered(&self, claim: Claim, at: Instant) {
        let _ = self.due.compare_exchange(claim.0, at.0, Relaxed, Relaxed);
    }

    /// An engine answered at `now`: trusted for `valid`, the next poll due after `poll`; true.
    /// Not kept (false) if the claim lapsed and another thread's poll holds the board now: its
    /// answer is the newer.
    pub fn answered(
        &self,
        claim: Claim,
        l: NextLeader,
        now: Instant,
        poll: Ticks,
        valid: Ticks,
    ) -> bool {
        if self
            .due
            .compare_exchange(claim.0, now.after(poll).0, Relaxed, Relaxed)
            .is_err()
        {
            return false;
        }
        self.current_slot.store(l.current_slot, Relaxed);
        self.next_leader_slot.store(l.next_leader_slot, Relaxed);
        self.region
            .store(l.region.map_or(0, |r| u64::from(r) + 1), Relaxed);
        self.valid_until.store(now.after(valid).0, Relaxed);
        true
    }

    /// The poll period is `poll` from `now` on (each thread says so at start and at each
    /// reload). The first to say a shorter one moves the next poll a period on at the latest,
    /// and the last answer, taken under the longer period, is trusted `valid` on at most: else
    /// the poll the old period scheduled (a minute on, say) would stand, and its answer stay
    /// trusted three old periods. The threads that say it after find it said, and leave a
    /// claim made since alone. A claim in flight at the first holds `due` until its call's
    /// deadline; moved sooner, it lapses: its answer is not kept, and the poll goes again a
    /// new period on.
    pub fn set_period(&self, now: Instant, poll: Ticks, valid: Ticks) {
        if self.period.swap(poll.0, Relaxed) <= poll.0 {
            return;
        }
        let due = now.after(poll).0;
        let _ = self
            .due
            .fetch_update(Relaxed, Relaxed, |d| (d > due).then_some(due));
        self.valid_until.fetch_min(now.after(valid).0, Relaxed);
    }

    /// The last answer's region, however old (for `/debug/pairs`; routing uses [`Board::region`]).
    pub fn last_region(&self) -> Option<u8> {
        (self.region.load(Relaxed) as u8).checked_sub(1)
    }

    /// The last answer's slots (current, next leader's), 0 before any.
    pub fn slots(&self) -> (u64, u64) {
        (
            self.current_slot.load(Relaxed),
            self.next_leader_slot.load(Relaxed),
        )
    }
}

/// Writes `NextScheduledLeaderRequest { regions }` into `out`, returning its length (`None`
/// when it does not fit).
pub fn encode_request<'a>(
    regions: impl IntoIterator<Item = &'a str>,
    out: &mut [u8],
) -> Option<usize> {
    let mut n = 0;
    for name in regions {
        n += protowire::put_len_field(REQUEST_REGIONS_FIELD, name.as_bytes(), out.get_mut(n..)?)?;
    }
    Some(n)
}

/// Decodes a `NextScheduledLeaderResponse`, its region looked up by `region_index` (a name
/// the relay does not run, or an empty one, reads as `None`). `None` for a message prost
/// would refuse, a known field with the wrong wire type, or a region that is not UTF-8.
/// Scalars repeated take their last value, as protobuf says.
pub fn decode_next_leader(
    msg: &[u8],
    region_index: impl Fn(&str) -> Option<u8>,
) -> Option<NextLeader> {
    let mut l = NextLeader {
        current_slot: 0,
        next_leader_slot: 0,
        region: None,
    };
    let mut region = "";
    for f in Fields::new(msg) {
        match f.ok()? {
            (CURRENT_SLOT_FIELD, Value::Varint(v)) => l.current_slot = v,
            (NEXT_LEADER_SLOT_FIELD, Value::Varint(v)) => l.next_leader_slot = v,
            (NEXT_LEADER_IDENTITY_FIELD, Value::Len(s)) => {
                core::str::from_utf8(s).ok()?;
            }
            // Each string must be UTF-8, a repeated one too (prost checks every occurrence).
            (NEXT_LEADER_REGION_FIELD, Value::Len(s)) => region = core::str::from_utf8(s).ok()?,
            (CURRENT_SLOT_FIELD..=NEXT_LEADER_REGION_FIELD, _) => return None,
            _ => {}
        }
    }
    l.region = if region.is_empty() {
        None
    } else {
        region_index(region)
    };
    Some(l)
}

/// The `next_leader` fuzz target's body (also run as a seeded proptest in
/// `tests/relay/leader.rs`): whatever the bytes, [`decode_next_leader`] must not panic and must
/// decode exactly what prost decodes, its region matched among `REGIONS`.
pub fn fuzz_answer(data: &[u8]) -> Option<NextLeader> {
    const REGIONS: [&str; 3] = ["frankfurt", "ny", "tokyo"];
    let index = |name: &str| REGIONS.iter().position(|r| *r == name).map(|i| i as u8);
    let ours = decode_next_leader(data, index);
    let theirs = NextScheduledLeaderResponse::decode(data)
        .ok()
        .map(|m| NextLeader {
            current_slot: m.current_slot,
            next_leader_slot: m.next_leader_slot,
            region: index(&m.next_leader_region),
        });
    assert_eq!(ours, theirs, "{data:?}");
    ours
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each thread says the reload's shorter period as it applies it; only the first moves
    /// the poll, so a claim another thread made in between stands.
    #[test]
    fn a_shorter_period_moves_the_poll_once_whichever_threads_say_it() {
        let b = Board::default();
        let (minute, short) = (Ticks(60_000), Ticks(400));
        b.set_period(Instant(0), minute, Ticks(3 * minute.0));
        let first = b.claim(Instant(0), Ticks(1_000)).unwrap();
        let l = NextLeader {
            current_slot: 1,
            next_leader_slot: 4,
            region: Some(0),
        };
        assert!(b.answered(first, l, Instant(5), minute, Ticks(3 * minute.0)));
        assert_eq!(b.claim(Instant(100), Ticks(1_000)), Err(Instant(60_005)));
        // Thread 0 applies the reload at 100: due at 500, the answer trusted until 1,300.
        b.set_period(Instant(100), short, Ticks(3 * short.0));
        assert_eq!(b.region(Instant(1_299)), Some(0));
        assert_eq!(b.region(Instant(1_300)), None);
        let claim = b.claim(Instant(500), Ticks(1_000)).unwrap();
        // Thread 1 applies it at 510, after thread 0's claim: that claim stands.
        b.set_period(Instant(510), short, Ticks(3 * short.0));
        assert!(b.answered(claim, l, Instant(520), short, Ticks(3 * short.0)));
        assert_eq!(b.claim(Instant(600), Ticks(1_000)), Err(Instant(920)));
    }

    #[test]
    fn a_poll_is_claimed_by_one_thread_until_it_is_answered_or_given_up() {
        let b = Board::default();
        let hold = Ticks(1_000);
        let c = b.claim(Instant(10), hold).unwrap();
        assert_eq!(b.claim(Instant(20), hold), Err(Instant(1_010)));
        b.unanswered(c, Instant(130));
        assert_eq!(b.claim(Instant(129), hold), Err(Instant(130)));
        assert!(b.claim(Instant(130), hold).is_ok());
    }

    /// A poll that outlived its claim (its call timed out just as another thread claimed the
    /// next): its end leaves the other thread's claim standing, so no third poll overlaps the
    /// second, and its late answer does not replace the newer one.
    #[test]
    fn a_lapsed_claim_leaves_the_next_claim_and_its_answer_alone() {
        let b = Board::default();
        let hold = Ticks(1_000);
        let first = b.claim(Instant(10), hold).unwrap();
        let second = b.claim(Instant(1_010), hold).unwrap();
        b.unanswered(first, Instant(1_020 + 400));
        assert_eq!(
            b.claim(Instant(1_500), hold),
            Err(Instant(2_010)),
            "the second poll still holds the board"
        );
        let old = NextLeader {
            current_slot: 1,
            next_leader_slot: 2,
            region: Some(1),
        };
        b.answered(first, old, Instant(1_600), Ticks(400), Ticks(1_200));
        assert_eq!(
            b.region(Instant(1_600)),
            None,
            "the lapsed poll's answer is not kept"
        );
        let new = NextLeader {
            current_slot: 5,
            next_leader_slot: 8,
            region: Some(2),
        };
        assert!(b.answered(second, new, Instant(1_700), Ticks(400), Ticks(1_200)));
        assert_eq!(b.region(Instant(1_700)), Some(2));
        assert_eq!(b.claim(Instant(2_099), hold), Err(Instant(2_100)));
    }

    #[test]
    fn an_answer_is_trusted_for_its_validity_only() {
        let b = Board::default();
        assert_eq!(b.region(Instant(0)), None);
        let l = NextLeader {
            current_slot: 7,
            next_leader_slot: 8,
            region: Some(3),
        };
        let c = b.claim(Instant(100), Ticks(10)).unwrap();
        assert!(b.answered(c, l, Instant(100), Ticks(400), Ticks(1_200)));
        assert_eq!(b.region(Instant(100)), Some(3));
        assert_eq!(b.region(Instant(1_299)), Some(3));
        assert_eq!(b.region(Instant(1_300)), None);
        assert_eq!(b.slots(), (7, 8));
        assert_eq!(b.claim(Instant(499), Ticks(1)), Err(Instant(500)));
        let none = NextLeader { region: None, ..l };
        let c = b.claim(Instant(500), Ticks(10)).unwrap();
        assert!(b.answered(c, none, Instant(500), Ticks(400), Ticks(1_200)));
        assert_eq!(b.region(Instant(501)), None);
    }
}
