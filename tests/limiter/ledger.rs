//! The pacing ledger two relay processes share during a takeover: what one books the other
//! honours, a pair is found by its source and region names whatever each process numbers it,
//! two claims racing for one pair never both win within its interval, and memory that holds
//! something else is refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bundle_relay::clock::{Instant, Ticks};
use bundle_relay::limiter::ledger::{ENTRY_BYTES, Entry, Ledger, entries_for, pair_key};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Heap memory two ledgers view at once, as two processes map one file.
fn shared(pairs: usize) -> (Ledger, Ledger) {
    let entries: Arc<[Entry]> = (0..entries_for(pairs)).map(|_| Entry::default()).collect();
    let view = |e: &Arc<[Entry]>| {
        // SAFETY: the Arc keeps the entries alive as long as the ledger.
        unsafe { Ledger::over(e.as_ptr(), e.len(), Box::new(e.clone())) }.unwrap()
    };
    (view(&entries), view(&entries))
}

#[test]
fn a_call_in_flight_and_then_its_booking_hold_the_pair_in_the_other_process() {
    let (old, new) = shared(4);
    let key = pair_key("127.1.0.1", "ny");
    let (a, b) = (old.slot(key).unwrap(), new.slot(key).unwrap());
    assert_eq!(a, b, "both find the pair by its names");
    // A call that may run 300 ticks: held an interval past that while it runs.
    assert_eq!(
        old.claim(a, Instant(1_000), Ticks(500), Ticks(0), Ticks(300)),
        Ok(1_800)
    );
    assert_eq!(
        new.claim(b, Instant(1_600), Ticks(500), Ticks(0), Ticks(300)),
        Err(Instant(1_800)),
        "the call may still be running"
    );
    // It ends at 1,200 and books one interval on, in place of the claim's.
    old.settle(a, 1_800, Ticks(300), Instant(1_700));
    assert_eq!(
        new.claim(b, Instant(1_600), Ticks(500), Ticks(0), Ticks(0)),
        Err(Instant(1_700))
    );
    assert_eq!(
        new.claim(b, Instant(1_700), Ticks(500), Ticks(0), Ticks(0)),
        Ok(2_200)
    );
    assert_eq!(
        old.claim(a, Instant(1_800), Ticks(500), Ticks(0), Ticks(0)),
        Err(Instant(2_200))
    );
}

#[test]
fn a_calls_end_does_not_undo_a_later_booking_of_the_other_process() {
    let (old, new) = shared(4);
    let s = old.slot(pair_key("127.1.0.1", "ny")).unwrap();
    let booked = old
        .claim(s, Instant(1_000), Ticks(500), Ticks(0), Ticks(300))
        .unwrap();
    new.book(s, Instant(5_000));
    old.settle(s, booked, Ticks(300), Instant(1_700));
    assert_eq!(new.next(s), Instant(5_000));
}

#[test]
fn a_later_booking_stands_against_an_earlier_one() {
    let (l, _) = shared(1);
    let s = l.slot(pair_key("127.1.0.1", "ny")).unwrap();
    l.book(s, Instant(5_000));
    l.book(s, Instant(3_000));
    assert_eq!(l.next(s), Instant(5_000));
}

#[test]
fn a_reload_lowers_a_booking_only_while_the_entry_still_holds_it() {
    let (l, other) = shared(4);
    let s = l.slot(pair_key("127.1.0.1", "ny")).unwrap();
    l.book(s, Instant(5_000));
    l.replace(s, 5_000, 2_000);
    assert_eq!(l.next(s), Instant(2_000), "its own booking, repriced");
    other.book(s, Instant(4_000));
    l.replace(s, 2_000, 1_500);
    assert_eq!(
        other.next(s),
        Instant(4_000),
        "the other process's later booking stands"
    );
}

#[test]
fn pairs_are_told_apart_by_source_and_region() {
    let (l, _) = shared(4);
    let slots: Vec<u32> = [
        ("127.1.0.1", "ny"),
        ("127.1.0.2", "ny"),
        ("127.1.0.1", "tokyo"),
        ("127.1.0.2", "tokyo"),
    ]
    .iter()
    .map(|(s, r)| l.slot(pair_key(s, r)).unwrap())
    .collect();
    let mut unique = slots.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4, "{slots:?}");
    assert_ne!(pair_key("127.1.0.1", "ny"), pair_key("127.1.0.1n", "y"));
}

/// Two threads (the two processes) claim one pair at the same instants of a shared, seeded
/// clock, let go together at every step so that their claims contend: each instant the pair is
/// free exactly one of them wins, so the wins are those of a single claimer, never closer
/// together than the hold, and both processes win some.
#[test]
fn racing_claims_never_send_twice_within_the_interval() {
    const HOLD: u64 = 100;
    const STEPS: usize = 4_000;
    let (a, b) = shared(1);
    let slot = a.slot(pair_key("127.1.0.1", "ny")).unwrap();
    // Instants 1 to HOLD / 2 ticks apart: the pair is free again every few steps.
    let mut rng = StdRng::seed_from_u64(7);
    let mut t = 1_000;
    let clock: Arc<Vec<u64>> = Arc::new(
        (0..STEPS)
            .map(|_| {
                t += rng.random_range(1..=HOLD / 2);
                t
            })
            .collect(),
    );
    let arrived = Arc::new(AtomicUsize::new(0));
    let run = |l: Ledger| {
        let (clock, arrived) = (clock.clone(), arrived.clone());
        std::thread::spawn(move || {
            let mut won = Vec::new();
            for (step, &now) in clock.iter().enumerate() {
                // Neither claims step's instant before the other has finished the last one and
                // is spinning here too: both leave within a few hundred nanoseconds.
                arrived.fetch_add(1, Ordering::AcqRel);
                let mut spins = 0u32;
                while arrived.load(Ordering::Acquire) < 2 * (step + 1) {
                    spins += 1;
                    if spins < 2_000 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                if l.claim(slot, Instant(now), Ticks(HOLD), Ticks(0), Ticks(0))
                    .is_ok()
                {
                    won.push(now);
                }
            }
            won
        })
    };
    let (ta, tb) = (run(a), run(b));
    let (won_a, won_b) = (ta.join().unwrap(), tb.join().unwrap());
    // One claimer alone at the same instants: the wins a race must add up to.
    let mut free_at = 0;
    let alone: Vec<u64> = clock
        .iter()
        .copied()
        .filter(|&now| {
            let free = now >= free_at;
            if free {
                free_at = now + HOLD;
            }
            free
        })
        .collect();
    assert!(
        !won_a.is_empty() && !won_b.is_empty(),
        "one process won every race ({} and {}): the claims never contended",
        won_a.len(),
        won_b.len()
    );
    let mut won = won_a;
    won.extend(won_b);
    won.sort();
    for w in won.windows(2) {
        assert!(w[1] - w[0] >= HOLD, "two sends {} ticks apart", w[1] - w[0]);
    }
    assert_eq!(
        won, alone,
        "the race won other instants than one claimer would"
    );
}

#[test]
fn memory_that_holds_another_ledger_layout_is_refused() {
    let entries: Arc<[Entry]> = (0..entries_for(4)).map(|_| Entry::default()).collect();
    // SAFETY: the Arc keeps the entries alive as long as the ledger.
    let first = unsafe { Ledger::over(entries.as_ptr(), entries.len(), Box::new(entries.clone())) };
    assert!(first.is_some());
    // The same memory seen as a shorter table: its header says otherwise.
    let shorter = unsafe {
        Ledger::over(
            entries.as_ptr(),
            (entries.len() - 1) / 2 + 1,
            Box::new(entries.clone()),
        )
    };
    assert!(shorter.is_none());
    assert_eq!(ENTRY_BYTES, 16);
}

#[test]
fn a_region_burst_holds_across_both_processes() {
    let (old, new) = shared(1);
    let s = old.slot(pair_key("127.1.0.1", "ny")).unwrap();
    // Burst 3 at 1,000 ticks: three back to back between the two, then one per interval.
    let (interval, tolerance) = (Ticks(1_000), Ticks(2_000));
    assert_eq!(
        old.claim(s, Instant(10_000), interval, tolerance, Ticks(0))
            .map(|_| ()),
        Ok(())
    );
    assert_eq!(
        new.claim(s, Instant(10_000), interval, tolerance, Ticks(0))
            .map(|_| ()),
        Ok(())
    );
    assert_eq!(
        old.claim(s, Instant(10_000), interval, tolerance, Ticks(0))
            .map(|_| ()),
        Ok(())
    );
    assert_eq!(
        new.claim(s, Instant(10_000), interval, tolerance, Ticks(0)),
        Err(Instant(11_000))
    );
    assert_eq!(
        new.claim(s, Instant(11_000), interval, tolerance, Ticks(0))
            .map(|_| ()),
        Ok(())
    );
}

/// Burst 3 shared by two processes whose calls settle: each process's own booking knows only
/// its own sends, so a settle keeps what its claim counted of the other's (the claim without
/// its hold). Three sends in the burst between them, and the fourth waits.
#[test]
fn a_settled_call_keeps_the_other_processs_sends_in_a_shared_burst() {
    let (old, new) = shared(1);
    let s = old.slot(pair_key("127.1.0.1", "ny")).unwrap();
    let (interval, tolerance, hold) = (Ticks(1_000), Ticks(2_000), Ticks(300));
    // Each process's limiter after its one send at `t`: its arrival time one interval on.
    let own = |t: u64| Instant(t + 1_000);
    for (l, t) in [(&new, 10_000), (&old, 10_100), (&new, 10_200)] {
        let booked = l.claim(s, Instant(t), interval, tolerance, hold).unwrap();
        l.settle(s, booked, hold, own(t));
    }
    assert_eq!(
        old.claim(s, Instant(10_300), interval, tolerance, hold),
        Err(Instant(11_000)),
        "three sends in the burst: the fourth waits an interval"
    );
}
