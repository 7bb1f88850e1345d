//! The record of recent bundles as a reader on another thread sees it: what was written reads
//! back whole, a ring forgets only what it has no room for, a tenant finds only its own
//! bundles, and a reader racing the writer never gets a torn record.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::journal::answer::{self, Names};
use bundle_relay::journal::{
    ATTEMPTS_KEPT, Attempt, Egress, End, Journals, Record, Ring, TEXT_BYTES, Text, Verdict,
};
use bundle_relay::jsonrpc::Writer;

/// A bundle id from a number (ids are SHA-256 digests: spread over every byte).
fn id(n: u64) -> [u8; 32] {
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead_beef;
    let mut out = [0u8; 32];
    for chunk in out.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    out
}

fn opened(ring: &Ring, n: u64, tenant: u16, at: u64) -> u64 {
    let mut r = Record {
        id: id(n),
        admitted: Instant(at),
        tenant,
        tx_count: 3,
        ..Record::default()
    };
    ring.open(&mut r).expect("the record is on")
}

#[test]
fn a_record_reads_back_whole_with_every_kept_attempt() {
    let journals = Journals::new(&[1_024]);
    let ring = journals.ring(0);
    let serial = opened(ring, 7, 2, 1_000);
    let proxy: SocketAddr = "[2001:db8::7]:1080".parse().unwrap();
    let local: IpAddr = "127.1.0.9".parse().unwrap();
    for k in 0..6u64 {
        ring.update(serial, |r| {
            r.push_attempt(Attempt {
                region: k as u8,
                egress: if k % 2 == 0 {
                    Egress::Local(local)
                } else {
                    Egress::Socks5(proxy)
                },
                sent: Instant(2_000 + k),
                ..Attempt::default()
            });
            let a = r.running().expect("the send just started runs");
            a.answered = Some(Instant(3_000 + k));
            a.verdict = Verdict::RateLimited;
            a.grpc_code = Some(8);
            a.retry_after_ms = 1_606;
        });
    }
    ring.update(serial, |r| {
        r.end = End::Delivered;
        r.ended = Instant(9_000);
        r.text = Text::new(b"uuid-of-the-engine");
    });
    let found = journals.find(&id(7), 2, 0).expect("found");
    let r = found.latest;
    assert_eq!(
        (r.end, r.ended, r.tx_count, r.attempts),
        (End::Delivered, Instant(9_000), 3, 6)
    );
    assert_eq!(r.text.as_str(), "uuid-of-the-engine");
    let kept = r.kept();
    assert_eq!(kept.len(), ATTEMPTS_KEPT);
    // The first three and the latest.
    let regions: Vec<u8> = kept.iter().map(|a| a.region).collect();
    assert_eq!(regions, [0, 1, 2, 5]);
    assert_eq!(kept[0].egress, Egress::Local(local));
    assert_eq!(kept[1].egress, Egress::Socks5(proxy));
    assert_eq!(kept[3].answered, Some(Instant(3_005)));
    assert_eq!(
        (kept[3].grpc_code, kept[3].retry_after_ms),
        (Some(8), 1_606)
    );
    assert_eq!(found.submissions, 1);
}

/// A bundle fanned out to regions 0 and 1, each copy rate-limited and sent again: the fifth
/// send must not take the place of region 0's copy still running, or the engine's acceptance
/// of it would find no send to record it in (the bundle would show no engine that took it).
#[test]
fn a_send_past_the_fourth_never_takes_the_place_of_one_still_running() {
    let journals = Journals::new(&[1_024]);
    let ring = journals.ring(0);
    let serial = opened(ring, 9, 0, 1_000);
    let send = |region: u8, at: u64| Attempt {
        region,
        egress: Egress::Local("127.1.0.1".parse().unwrap()),
        sent: Instant(at),
        ..Attempt::default()
    };
    let limited = |a: &mut Attempt| {
        a.answered = Some(Instant(a.sent.0 + 10));
        a.verdict = Verdict::RateLimited;
    };
    ring.patch(serial, |p| {
        p.push_attempt(&send(0, 2_000));
        p.push_attempt(&send(1, 2_001));
        p.running_in(1, limited);
        p.push_attempt(&send(1, 3_000));
        p.running_in(0, limited);
        p.push_attempt(&send(0, 3_001));
        p.running_in(1, limited);
        // The fifth: region 0's copy (the fourth) still runs.
        p.push_attempt(&send(1, 4_000));
        p.running_in(0, |a| {
            a.answered = Some(Instant(4_500));
            a.verdict = Verdict::Accepted;
        });
    });
    let r = journals.find(&id(9), 0, 0).expect("found").latest;
    assert_eq!(r.attempts, 5);
    let kept: Vec<(u8, u64, Verdict)> = r
        .kept()
        .iter()
        .map(|a| (a.region, a.sent.0, a.verdict))
        .collect();
    assert!(
        kept.contains(&(0, 3_001, Verdict::Accepted)),
        "the acceptance is kept: {kept:?}"
    );
    assert!(
        kept.contains(&(1, 4_000, Verdict::Sending)),
        "the latest send is kept: {kept:?}"
    );
    assert!(
        kept.windows(2).all(|w| w[0].1 <= w[1].1),
        "oldest first: {kept:?}"
    );
}

/// A send's and its answer's times are kept as offsets from the admission and from the send:
/// exact to the tick within minutes of it (a send comes within the bundle's max age, a minute
/// at most), and past that at the widest, never wrapped to an earlier time.
#[test]
fn a_sends_times_read_back_to_the_tick_and_far_ones_at_the_widest_not_wrapped() {
    let journals = Journals::new(&[1_024]);
    let ring = journals.ring(0);
    let admitted = 7_000_000_000_000u64;
    let minute = 60 * 5_000_000_000u64; // a minute of a 5 GHz TSC
    let cases = [
        (admitted, Some(admitted)),
        (admitted + 1, Some(admitted + 2)),
        (admitted + minute, Some(admitted + 2 * minute)),
        (admitted + 3, None),
        (admitted + (1 << 50), Some(admitted + (1 << 51))),
    ];
    for (n, (sent, answered)) in cases.iter().enumerate() {
        let serial = opened(ring, 100 + n as u64, 0, admitted);
        ring.update(serial, |r| {
            r.push_attempt(Attempt {
                region: 15,
                egress: Egress::Socks5("[2001:db8::7]:65535".parse().unwrap()),
                sent: Instant(*sent),
                answered: answered.map(Instant),
                verdict: Verdict::RegionThrottled,
                grpc_code: Some(16),
                retry_after_ms: 32_767,
            });
        });
        let r = journals.find(&id(100 + n as u64), 0, 0).unwrap().latest;
        let a = r.kept()[0];
        let (region, verdict, code, wait) = (a.region, a.verdict, a.grpc_code, a.retry_after_ms);
        assert_eq!(
            (region, verdict, code, wait),
            (15, Verdict::RegionThrottled, Some(16), 32_767),
            "case {n}"
        );
        assert_eq!(
            a.egress,
            Egress::Socks5("[2001:db8::7]:65535".parse().unwrap())
        );
        if n < 4 {
            assert_eq!(
                (a.sent, a.answered),
                (Instant(*sent), answered.map(Instant)),
                "case {n}"
            );
        } else {
            let (s, t) = (a.sent.0, a.answered.expect("answered").0);
            assert!(s > admitted + minute && s <= *sent, "sent read as {s}");
            assert!(t > s && t <= answered.unwrap(), "answered read as {t}");
        }
    }
}

/// A bot that sends one bundle again and again (every slot until it lands) fills the index
/// around that bundle's place: its new copies push out its own oldest copy, never another
/// bundle whose place is nearby, which would then read as unknown while the ring holds it.
#[test]
fn copies_of_one_bundle_never_push_another_bundle_out_of_the_index() {
    let journals = Journals::new(&[1_024]);
    let ring = journals.ring(0);
    // Two ids with the same place in the index (their first eight bytes), told apart by the
    // bytes after.
    let mut other = id(1);
    let mut resent = other;
    resent[8] ^= 0xff;
    let open = |id: [u8; 32], at: u64| {
        let mut r = Record {
            id,
            admitted: Instant(at),
            tx_count: 1,
            ..Record::default()
        };
        ring.open(&mut r).expect("the record is on")
    };
    open(other, 1_000);
    for k in 0..(2 * bundle_relay::journal::WINDOW as u64) {
        open(resent, 2_000 + k);
    }
    let found = journals
        .find(&other, 0, 0)
        .expect("the other bundle is still found");
    assert_eq!(found.latest.admitted, Instant(1_000));
    let copies = journals
        .find(&resent, 0, 0)
        .expect("the resent bundle is found");
    assert_eq!(
        copies.latest.admitted,
        Instant(2_000 + 2 * bundle_relay::journal::WINDOW as u64 - 1),
        "its latest copy"
    );
    other[31] ^= 1;
    assert!(journals.find(&other, 0, 0).is_none());
}

/// An engine's wait reads back exactly up to 32.767 s, and longer ones (up to a day, what
/// the limiter honours) in whole 4 s steps rounded up: never shorter than the engine said.
#[test]
fn an_engines_wait_reads_back_exact_to_half_a_minute_and_up_to_a_day_never_shorter() {
    let journals = Journals::new(&[1_024]);
    let ring = journals.ring(0);
    let cases: [(u32, u32); 5] = [
        (1_606, 1_606),
        (32_767, 32_767),
        (60_001, 64_000),
        (600_000, 600_000),
        (86_400_000, 86_400_000),
    ];
    for (n, (asked, read)) in cases.into_iter().enumerate() {
        let serial = opened(ring, 100 + n as u64, 0, 1_000);
        ring.update(serial, |r| {
            r.push_attempt(Attempt {
                retry_after_ms: asked,
                verdict: Verdict::RateLimited,
                ..Attempt::default()
            })
        });
        let r = journals.find(&id(100 + n as u64), 0, 0).unwrap().latest;
        assert_eq!(r.kept()[0].retry_after_ms, read, "{asked} ms");
    }
}

#[test]
fn an_engine_text_longer_than_the_record_keeps_is_cut_at_a_character() {
    // TEXT_BYTES is even: after one ASCII byte the two-byte 'é's straddle the limit, so the
    // last one that would fit only in part is dropped whole.
    let straddling = format!("x{}", "é".repeat(TEXT_BYTES));
    let t = Text::new(straddling.as_bytes());
    assert_eq!(t.as_str().len(), TEXT_BYTES - 1);
    assert_eq!(t.as_str(), format!("x{}", "é".repeat((TEXT_BYTES - 2) / 2)));
    let aligned = "é".repeat(TEXT_BYTES);
    assert_eq!(
        Text::new(aligned.as_bytes()).as_str(),
        "é".repeat(TEXT_BYTES / 2)
    );
    assert_eq!(Text::new(b"ok\xff\xfe").as_str(), "ok");
}

#[test]
fn a_ring_forgets_a_bundle_only_once_it_has_no_room_for_it() {
    let journals = Journals::new(&[1_024]);
    let ring = journals.ring(0);
    for n in 0..1_024 {
        opened(ring, n, 0, n);
    }
    assert!(
        journals.find(&id(0), 0, 0).is_some(),
        "still within capacity"
    );
    opened(ring, 5_000, 0, 5_000);
    assert!(
        journals.find(&id(0), 0, 0).is_none(),
        "overwritten by the 1,025th"
    );
    for n in 1..1_024 {
        assert!(
            journals.find(&id(n), 0, 0).is_some(),
            "bundle {n} of the last 1,024"
        );
    }
}

#[test]
fn every_bundle_of_the_last_capacity_is_found_after_many_wraps() {
    let journals = Journals::new(&[4_096]);
    let ring = journals.ring(0);
    let total = 10 * 4_096u64;
    for n in 0..total {
        opened(ring, n, 0, n);
    }
    let missing = (total - 4_096..total)
        .filter(|n| journals.find(&id(*n), 0, 0).is_none())
        .count();
    assert_eq!(missing, 0);
    let stale = (0..total - 4_096)
        .filter(|n| journals.find(&id(*n), 0, 0).is_some())
        .count();
    assert_eq!(stale, 0);
}

#[test]
fn a_tenant_finds_only_its_own_bundles() {
    let journals = Journals::new(&[1_024, 1_024]);
    opened(journals.ring(0), 1, 3, 10);
    assert!(journals.find(&id(1), 3, 0).is_some());
    assert!(
        journals.find(&id(1), 4, 0).is_none(),
        "another tenant's id reads as unknown"
    );
    // The slot's next tenant (its epoch 1) reads the one before's as unknown too.
    let mut r = Record {
        id: id(2),
        tenant: 3,
        tenant_epoch: 1,
        ..Record::default()
    };
    journals.ring(1).open(&mut r).unwrap();
    assert!(journals.find(&id(1), 3, 1).is_none());
    assert_eq!(
        journals.find(&id(2), 3, 1).unwrap().latest.tenant_epoch,
        1,
        "kept through the ring"
    );
    assert!(journals.find(&id(2), 3, 0).is_none());
}

#[test]
fn a_bundle_sent_twice_answers_with_its_latest_record_and_counts_both() {
    let journals = Journals::new(&[1_024, 1_024]);
    let first = opened(journals.ring(0), 1, 0, 10);
    journals.ring(0).update(first, |r| r.end = End::Expired);
    opened(journals.ring(1), 1, 0, 20);
    let f = journals.find(&id(1), 0, 0).unwrap();
    assert_eq!((f.thread, f.latest.end, f.submissions), (1, End::Open, 2));
}

#[test]
fn a_moved_bundle_answers_from_the_thread_it_moved_to() {
    let journals = Journals::new(&[1_024, 1_024]);
    let old = opened(journals.ring(0), 1, 0, 10);
    journals.ring(0).update(old, |r| {
        r.end = End::Moved;
        r.moved_to = 1;
    });
    opened(journals.ring(1), 1, 0, 10);
    let f = journals.find(&id(1), 0, 0).unwrap();
    assert_eq!((f.thread, f.latest.end, f.submissions), (1, End::Open, 1));
}

#[test]
fn a_record_that_is_off_keeps_nothing() {
    let journals = Journals::new(&[0]);
    let mut r = Record::default();
    assert_eq!(journals.ring(0).open(&mut r), None);
    assert!(journals.find(&r.id, 0, 0).is_none());
    assert_eq!(Ring::bytes_for(0), 0);
}

/// One writer rewriting a record as fast as it can, with every field derived from one counter;
/// a reader on another thread copies it meanwhile and checks every copy agrees with itself.
/// The schedule is the machine's; the check holds whatever it is.
#[test]
fn a_reader_racing_the_writer_never_gets_a_torn_record() {
    let journals = Arc::new(Journals::new(&[1_024]));
    let serial = opened(journals.ring(0), 42, 0, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (journals, stop) = (journals.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) && k < 2_000_000 {
                k += 1;
                journals.ring(0).update(serial, |r| {
                    r.ended = Instant(k);
                    r.attempts = (k % 1_000) as u16;
                    for a in r.kept.iter_mut() {
                        a.sent = Instant(k);
                        a.retry_after_ms = (k % 30_000) as u32;
                    }
                    let t = format!("{k:0>80}");
                    r.text = Text::new(t.as_bytes());
                });
            }
            k
        })
    };
    let mut seen = 0u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    while std::time::Instant::now() < deadline {
        let Some(f) = journals.find(&id(42), 0, 0) else {
            continue;
        };
        let r = f.latest;
        let k = r.ended.0;
        assert_eq!(u64::from(r.attempts), k % 1_000, "torn at {k}");
        for a in &r.kept {
            assert_eq!(a.sent.0, k, "torn at {k}");
            assert_eq!(u64::from(a.retry_after_ms), k % 30_000, "torn at {k}");
        }
        if k > 0 {
            assert_eq!(r.text.as_str(), format!("{k:0>80}"), "torn at {k}");
        }
        seen += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(seen > 100 && written > 100, "read {seen}, wrote {written}");
}

#[test]
fn the_largest_delivery_answer_fits_the_intake_buffer() {
    // Every field at its widest: 4 SOCKS5 IPv6 attempts, their times as late as the record
    // keeps them, a long region name, a tenant name of 64 quotes (each escaped to 2 bytes), an
    // engine text of control characters (6 each).
    let journals = Journals::new(&[1_024]);
    let ring = journals.ring(0);
    let serial = opened(ring, 1, 0, u64::MAX / 4);
    let proxy: SocketAddr = "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
        .parse()
        .unwrap();
    ring.update(serial, |r| {
        for _ in 0..9 {
            r.push_attempt(Attempt {
                region: 0,
                egress: Egress::Socks5(proxy),
                sent: Instant(u64::MAX / 2),
                answered: Some(Instant(u64::MAX - 1)),
                verdict: Verdict::RateLimited,
                grpc_code: Some(255),
                retry_after_ms: 60_000,
            });
        }
        r.end = End::Delivered;
        r.ended = Instant(u64::MAX / 2);
        r.text = Text::new(&[0x01; TEXT_BYTES]);
    });
    let f = journals.find(&id(1), 0, 0).unwrap();
    let region = "r".repeat(32);
    let name_of = |_| region.as_str();
    let tenant = "\"".repeat(64);
    let names = Names {
        region: &name_of,
        tenant: &tenant,
    };
    let mut buf = [0u8; bundle_relay::relay::intake::BODY_BYTES_MAX];
    let mut w = Writer::new(&mut buf);
    answer::write_delivery(&mut w, &f, TickRate::NANOS, |t| t.0, &names);
    let out = w.finish().expect("fits");
    let v: serde_json::Value = serde_json::from_slice(out).expect("valid JSON");
    assert_eq!(v["attempts"].as_array().unwrap().len(), ATTEMPTS_KEPT);
    assert_eq!(v["attempts_total"], 9);
}

#[test]
fn a_rings_index_is_resident_at_once_and_its_records_only_as_far_as_they_reached() {
    let capacity = 1 << 16;
    let journals = Journals::new(&[capacity]);
    let ring = journals.ring(0);
    let ring_bytes = (capacity * bundle_relay::journal::WORDS * 8) as u64;
    let index_bytes = bundle_relay::journal::Ring::bytes_for(capacity) as u64 - ring_bytes;
    let before = journals.resident_bytes();
    assert!(
        before >= index_bytes,
        "the index is touched at once: {before} of {index_bytes}"
    );
    assert!(
        before - index_bytes < ring_bytes / 4,
        "records allocated untouched: {} of {ring_bytes}",
        before - index_bytes
    );
    for n in 0..capacity as u64 {
        opened(ring, n, 0, n);
    }
    let after = journals.resident_bytes();
    assert!(
        after >= ring_bytes,
        "every record written: {after} of {ring_bytes}"
    );
}

/// One change the relay makes to a record, in both forms: on a decoded [`Record`] and as a
/// field patch on its words.
#[derive(Clone, Debug)]
enum Change {
    Push(Attempt),
    Answer {
        region: u8,
        at: Instant,
        verdict: Verdict,
        grpc_code: Option<u8>,
        retry_after_ms: u32,
    },
    Text(Vec<u8>),
    End(End, Instant),
    Moved(u8, Instant),
}

fn change() -> impl proptest::strategy::Strategy<Value = Change> {
    use proptest::prelude::*;
    let verdict = prop_oneof![
        Just(Verdict::Sending),
        Just(Verdict::Accepted),
        Just(Verdict::RateLimited),
        Just(Verdict::Lost),
        Just(Verdict::RegionThrottled),
    ];
    let end = prop_oneof![
        Just(End::Open),
        Just(End::Delivered),
        Just(End::Expired),
        Just(End::Moved)
    ];
    let egress = prop_oneof![
        any::<[u8; 4]>().prop_map(|b| Egress::Local(IpAddr::from(b))),
        any::<[u8; 16]>().prop_map(|b| Egress::Local(IpAddr::from(b))),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(b, p)| Egress::Socks5(SocketAddr::new(IpAddr::from(b), p))),
    ];
    let time = || (1_000_000u64..1_000_000 + (1 << 42)).prop_map(Instant);
    prop_oneof![
        (0u8..4, egress, time(), proptest::option::of(time())).prop_map(
            |(region, egress, sent, answered)| Change::Push(Attempt {
                region,
                egress,
                sent,
                answered,
                ..Attempt::default()
            })
        ),
        (
            0u8..4,
            time(),
            verdict,
            proptest::option::of(any::<u8>()),
            0u32..100_000
        )
            .prop_map(|(region, at, verdict, grpc_code, retry_after_ms)| {
                Change::Answer {
                    region,
                    at,
                    verdict,
                    grpc_code,
                    retry_after_ms,
                }
            }),
        proptest::collection::vec(any::<u8>(), 0..120).prop_map(Change::Text),
        (end, time()).prop_map(|(e, at)| Change::End(e, at)),
        (any::<u8>(), time()).prop_map(|(to, at)| Change::Moved(to, at)),
    ]
}

proptest::proptest! {
    /// The relay changes its records field by field on the words; readers decode them. Every
    /// sequence of changes reads back the same as the changes made on a decoded record.
    #[test]
    fn a_record_patched_field_by_field_reads_back_as_the_same_changes_on_the_record(
        changes in proptest::collection::vec(change(), 0..12),
    ) {
        let journals = Journals::new(&[16, 16]);
        let (whole, patched) = (journals.ring(0), journals.ring(1));
        let a = opened(whole, 1, 3, 1_000_000);
        let b = opened(patched, 1, 3, 1_000_000);
        for c in &changes {
            match c.clone() {
                Change::Push(at) => {
                    whole.update(a, |r| r.push_attempt(at));
                    patched.patch(b, |p| p.push_attempt(&at));
                }
                Change::Answer { region, at, verdict, grpc_code, retry_after_ms } => {
                    let answer = |x: &mut Attempt| {
                        x.answered = Some(at);
                        x.verdict = verdict;
                        x.grpc_code = grpc_code;
                        x.retry_after_ms = retry_after_ms;
                    };
                    whole.update(a, |r| {
                        if let Some(x) = r.running_in(region) {
                            answer(x);
                        }
                    });
                    patched.patch(b, |p| p.running_in(region, answer));
                }
                Change::Text(t) => {
                    whole.update(a, |r| r.text = Text::new(&t));
                    patched.patch(b, |p| p.set_text(&Text::new(&t)));
                }
                Change::End(e, at) => {
                    whole.update(a, |r| {
                        r.end = e;
                        r.ended = at;
                    });
                    patched.patch(b, |p| p.set_end(e, at));
                }
                Change::Moved(to, at) => {
                    whole.update(a, |r| {
                        r.end = End::Moved;
                        r.moved_to = to;
                        r.ended = at;
                    });
                    patched.patch(b, |p| {
                        p.set_end(End::Moved, at);
                        p.set_moved_to(to);
                    });
                }
            }
        }
        let read = |ring: &Ring| {
            let mut found = Vec::new();
            ring.find(&id(1), |r| found.push(r));
            found
        };
        let (w, p) = (read(whole), read(patched));
        proptest::prop_assert_eq!(w.len(), 1);
        proptest::prop_assert_eq!(w, p);
    }
}
