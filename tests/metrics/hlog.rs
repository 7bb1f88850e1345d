//! Interval logs: what the writer logs, read back with hdrhistogram's own reader, equals the
//! live histograms (counts and percentiles); intervals hold only their own interval's values;
//! files rotate by size and only the newest are kept.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bundle_relay::metrics::Metrics;
use bundle_relay::metrics::hlog::{HlogConfig, HlogWriter};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "bundle-relay-{name}-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Interval {
    tag: String,
    start_s: f64,
    duration_s: f64,
    hist: Histogram<u64>,
}

fn read_log(path: &std::path::Path) -> (Option<f64>, Option<f64>, Vec<Interval>) {
    let bytes = std::fs::read(path).unwrap();
    let mut d = Deserializer::new();
    let (mut st, mut bt, mut out) = (None, None, Vec::new());
    for e in IntervalLogIterator::new(&bytes) {
        match e.unwrap() {
            LogEntry::StartTime(t) => st = Some(t.as_secs_f64()),
            LogEntry::BaseTime(t) => bt = Some(t.as_secs_f64()),
            LogEntry::Interval(i) => {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(i.encoded_histogram())
                    .unwrap();
                out.push(Interval {
                    tag: i.tag().unwrap().as_str().to_string(),
                    start_s: i.start_timestamp().as_secs_f64(),
                    duration_s: i.duration().as_secs_f64(),
                    hist: d.deserialize(&mut &raw[..]).unwrap(),
                });
            }
        }
    }
    (st, bt, out)
}

/// A one-thread registry and its writer into `dir`, an interval every `interval` from `start`,
/// its config as `tweak` leaves it.
fn writer(
    dir: &Path,
    interval: Duration,
    start: SystemTime,
    tweak: impl FnOnce(&mut HlogConfig),
) -> (Arc<Metrics>, HlogWriter) {
    let m = Arc::new(Metrics::new(&regions(), 1));
    let mut cfg = HlogConfig::new(dir, interval);
    tweak(&mut cfg);
    let w = HlogWriter::new(Arc::clone(&m), cfg, start).unwrap();
    (m, w)
}

/// The names of the files in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn regions() -> Vec<String> {
    vec!["amsterdam".into(), "tokyo".into()]
}

fn record_some(m: &Metrics, rng: &mut StdRng, n: usize) {
    for t in 0..m.threads() {
        let tm = m.thread(t);
        for _ in 0..n {
            tm.record_overhead_ns(rng.random_range(500..50_000));
            tm.record_delivery_ns(rng.random_range(10_000..5_000_000));
            tm.record_limiter_wait_ns(rng.random_range(0..1_000_000_000));
            tm.record_upstream_rtt_ns(
                rng.random_range(0..2),
                rng.random_range(1_000_000..90_000_000),
            );
        }
    }
}

#[test]
fn hlog_read_back_equals_the_live_histograms() {
    let dir = tempdir("hlog-roundtrip");
    let m = Arc::new(Metrics::new(&regions(), 3));
    let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut w = HlogWriter::new(
        Arc::clone(&m),
        HlogConfig::new(&dir, Duration::from_secs(5)),
        t0,
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(42);
    let mut wrote = 0;
    for s in 1..=20u64 {
        record_some(&m, &mut rng, 200);
        if w.tick(t0 + Duration::from_secs(s)).unwrap() {
            wrote += 1;
        }
    }
    assert_eq!(wrote, 4, "one interval per 5 s in 20 s");
    let files: Vec<PathBuf> = w.files().map(|p| p.to_path_buf()).collect();
    assert_eq!(files.len(), 1);
    let (st, bt, intervals) = read_log(&files[0]);
    assert_eq!(st, Some(1_700_000_000.0));
    assert_eq!(bt, Some(1_700_000_000.0));
    assert_eq!(intervals.len(), 4 * m.hist_ids().len());
    let mut merged: HashMap<String, Histogram<u64>> = HashMap::new();
    for i in &intervals {
        assert_eq!(i.duration_s, 5.0);
        assert_eq!(i.start_s % 5.0, 0.0);
        merged
            .entry(i.tag.clone())
            .or_insert_with(|| Histogram::new(3).unwrap())
            .add(&i.hist)
            .unwrap();
    }
    // Four kinds of histogram, 20 s × 200 values × 3 threads each (round trips split by region).
    let logged: u64 = merged.values().map(Histogram::len).sum();
    assert_eq!(logged, 4 * 20 * 200 * 3);
    for id in m.hist_ids() {
        let live = m.histogram(id);
        let got = &merged[&m.hist_tag(id)];
        assert_eq!(got.len(), live.len(), "{id:?}");
        assert!(!live.is_empty(), "{id:?}");
        let pairs = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect()
        };
        assert_eq!(pairs(got), pairs(&live), "{id:?}");
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(
                got.value_at_quantile(q),
                live.value_at_quantile(q),
                "{id:?} q{q}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn each_interval_holds_only_what_was_recorded_during_it() {
    let dir = tempdir("hlog-intervals");
    let m = Arc::new(Metrics::new(&regions(), 1));
    let tm = m.thread(0);
    tm.record_overhead_ns(1_000); // before the writer: not logged
    let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut w = HlogWriter::new(
        Arc::clone(&m),
        HlogConfig::new(&dir, Duration::from_secs(1)),
        t0,
    )
    .unwrap();
    for (s, n) in [(1u64, 3u64), (2, 0), (3, 7)] {
        for _ in 0..n {
            tm.record_overhead_ns(2_000 * s);
        }
        assert!(w.tick(t0 + Duration::from_secs(s)).unwrap());
    }
    assert!(
        !w.tick(t0 + Duration::from_millis(3_500)).unwrap(),
        "interval not yet over"
    );
    let path = w.files().next().unwrap().to_path_buf();
    let (_, _, intervals) = read_log(&path);
    let overhead: Vec<&Interval> = intervals
        .iter()
        .filter(|i| i.tag == "relay_overhead")
        .collect();
    let got: Vec<(f64, u64, u64)> = overhead
        .iter()
        .map(|i| (i.start_s, i.hist.len(), i.hist.max()))
        .collect();
    assert_eq!(got, vec![(0.0, 3, 2_000), (1.0, 0, 0), (2.0, 7, 6_003)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A disk that is full when an interval is written (the log file is `/dev/full` here): the
/// interval is given up, not retried at once (the writer's thread would spin and print the
/// error without end), and once the disk has room the log goes on in a file of its own whose
/// every line reads back, its intervals each as long as it was and none overlapping.
#[test]
fn a_full_disk_loses_its_intervals_only_and_the_log_goes_on_in_a_new_file_once_it_has_room() {
    let dir = tempdir("hlog-full");
    let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let (m, mut w) = writer(&dir, Duration::from_secs(1), t0, |_| {});
    let tm = m.thread(0);
    let full = dir.join("bundle-relay.1800000000.00000.hlog");
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    tm.record_overhead_ns(1_000);
    let err = w.tick(t0 + Duration::from_secs(1)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert_eq!(
        w.next_due(),
        t0 + Duration::from_secs(2),
        "the failed interval is due again at once: the writer's thread would spin"
    );
    assert!(
        std::fs::symlink_metadata(&full).is_err(),
        "a file whose headers failed is no log: removed"
    );
    tm.record_overhead_ns(2_000);
    assert!(w.tick(t0 + Duration::from_secs(2)).unwrap());
    tm.record_overhead_ns(1_500);
    assert!(w.tick(t0 + Duration::from_secs(3)).unwrap());
    let path = w.files().last().unwrap().to_path_buf();
    assert_ne!(path, full, "a file of its own");
    let (start, _, intervals) = read_log(&path);
    assert_eq!(start, Some(1_800_000_000.0));
    let got: Vec<(f64, f64, u64)> = intervals
        .iter()
        .filter(|i| i.tag == "relay_overhead")
        .map(|i| (i.start_s, i.duration_s, i.hist.max()))
        .collect();
    assert_eq!(got, vec![(1.0, 1.0, 2_000), (2.0, 1.0, 1_500)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A full disk for several intervals in a row, each new file failing its headers: no failed
/// file counts among those kept, so the spell does not rotate the real logs away.
#[test]
fn a_spell_of_failed_files_does_not_rotate_the_kept_logs_away() {
    let dir = tempdir("hlog-spell");
    let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let name = |seq: u64| dir.join(format!("bundle-relay.1800000000.{seq:05}.hlog"));
    let (_m, mut w) = writer(&dir, Duration::from_secs(1), t0, |cfg| {
        cfg.keep_files = 2;
        cfg.rotate_bytes = 1;
    });
    for seq in 2..7 {
        std::os::unix::fs::symlink("/dev/full", name(seq)).unwrap();
    }
    for s in 1..=8u64 {
        let wrote = w.tick(t0 + Duration::from_secs(s));
        assert_eq!(
            wrote.is_ok(),
            !(3..=7).contains(&s),
            "interval {s}: {wrote:?}"
        );
    }
    let kept: Vec<PathBuf> = w.files().map(PathBuf::from).collect();
    assert_eq!(kept, [name(1), name(7)]);
    for p in &kept {
        assert!(
            !read_log(p).2.is_empty(),
            "{} holds its interval",
            p.display()
        );
    }
    assert_eq!(
        names_in(&dir),
        [
            "bundle-relay.1800000000.00001.hlog",
            "bundle-relay.1800000000.00007.hlog"
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The file size limit (`RLIMIT_FSIZE`) reached in the middle of an interval, in a process of
/// its own (this test run again, alone): the file is cut back to its last whole interval, so
/// every reader reads it to its end.
#[test]
fn a_write_failing_mid_interval_leaves_the_file_at_its_last_whole_interval() {
    const CHILD: &str = "HLOG_FSIZE_CHILD";
    if let Ok(dir) = std::env::var(CHILD) {
        // The child: one whole interval, then a limit a few bytes past it.
        let mut rng = StdRng::seed_from_u64(7);
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (m, mut w) = writer(Path::new(&dir), Duration::from_secs(1), t0, |_| {});
        record_some(&m, &mut rng, 100);
        assert!(w.tick(t0 + Duration::from_secs(1)).unwrap());
        let path = w.files().next().unwrap().to_path_buf();
        let whole = std::fs::metadata(&path).unwrap().len();
        // SAFETY: this process is the test run alone; past the limit a write fails with EFBIG
        // rather than ending the process by SIGXFSZ.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: whole + 40,
                rlim_max: libc::RLIM_INFINITY,
            };
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
        }
        record_some(&m, &mut rng, 100);
        let err = w.tick(t0 + Duration::from_secs(2)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EFBIG), "{err}");
        return;
    }
    let dir = tempdir("hlog-fsize");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "hlog::a_write_failing_mid_interval_leaves_the_file_at_its_last_whole_interval",
            "--test-threads=1",
        ])
        .env(CHILD, &dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the child: {status}");
    let path = dir.join("bundle-relay.1800000000.00000.hlog");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'), "a line cut short at the end");
    let (_, _, intervals) = read_log(&path);
    let histograms = Metrics::new(&regions(), 1).hist_ids().len();
    assert_eq!(
        intervals.len(),
        histograms,
        "the first interval's histograms, whole"
    );
    assert!(intervals.iter().all(|i| i.start_s == 0.0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every restart and upgrade starts a run of files: the newest `keep_files` of the folder's
/// are kept across runs, not per run, so the folder does not grow by a run's worth at each.
/// A run started in the same second as the last numbers its files on from that one's instead
/// of overwriting them. Files named otherwise are left alone.
#[test]
fn files_kept_count_earlier_runs_so_restarts_do_not_grow_the_folder() {
    let dir = tempdir("hlog-runs");
    let earlier: Vec<PathBuf> = (0..6)
        .map(|seq| dir.join(format!("bundle-relay.1700000000.{seq:05}.hlog")))
        .chain((0..3).map(|seq| dir.join(format!("bundle-relay.1750000000.{seq:05}.hlog"))))
        .collect();
    for p in &earlier {
        std::fs::write(p, "#[Histogram log format version 1.3]\n").unwrap();
    }
    let other = [
        dir.join("notes.txt"),
        dir.join("other.1700000000.00000.hlog"),
    ];
    for p in &other {
        std::fs::write(p, "keep me").unwrap();
    }
    // A run started in the same second as this one, just before it (a restart loop).
    let same_second = dir.join("bundle-relay.1800000000.00000.hlog");
    std::fs::write(&same_second, "#[Histogram log format version 1.3]\n").unwrap();
    let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let (_m, mut w) = writer(&dir, Duration::from_secs(1), t0, |cfg| cfg.keep_files = 4);
    assert!(w.tick(t0 + Duration::from_secs(1)).unwrap());
    assert_eq!(
        names_in(&dir),
        [
            "bundle-relay.1750000000.00001.hlog",
            "bundle-relay.1750000000.00002.hlog",
            "bundle-relay.1800000000.00000.hlog",
            "bundle-relay.1800000000.00001.hlog",
            "notes.txt",
            "other.1700000000.00000.hlog",
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn files_rotate_by_size_and_only_the_newest_are_kept() {
    let dir = tempdir("hlog-rotate");
    let m = Arc::new(Metrics::new(&regions(), 1));
    let tm = m.thread(0);
    let t0 = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
    let cfg = HlogConfig {
        rotate_bytes: 1, // every interval fills a file
        keep_files: 3,
        ..HlogConfig::new(&dir, Duration::from_secs(1))
    };
    let mut w = HlogWriter::new(Arc::clone(&m), cfg, t0).unwrap();
    for s in 1..=5u64 {
        for _ in 0..s {
            tm.record_delivery_ns(1_000_000 * s);
        }
        w.tick(t0 + Duration::from_secs(s)).unwrap();
    }
    let kept: Vec<PathBuf> = w.files().map(|p| p.to_path_buf()).collect();
    let mut on_disk: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, kept, "only the kept files remain");
    let names: Vec<String> = kept
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "bundle-relay.1900000000.00002.hlog",
            "bundle-relay.1900000000.00003.hlog",
            "bundle-relay.1900000000.00004.hlog"
        ]
    );
    // Each kept file is a whole log on the shared time axis: intervals 2, 3 and 4 s after start.
    for (k, p) in kept.iter().enumerate() {
        let (st, bt, intervals) = read_log(p);
        assert_eq!((st, bt), (Some(1_900_000_000.0), Some(1_900_000_000.0)));
        let d: Vec<&Interval> = intervals
            .iter()
            .filter(|i| i.tag == "delivery_latency")
            .collect();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].start_s, (k + 2) as f64);
        assert_eq!(d[0].hist.len(), (k + 3) as u64);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `w` on its thread while `n` limiter waits are recorded on `tm`, `pause` apart, then
/// stops it; the `limiter_wait` intervals of the one file it wrote into `dir`.
fn thread_limiter_waits(
    w: HlogWriter,
    tm: &bundle_relay::metrics::ThreadMetrics,
    n: u64,
    pause: Duration,
    dir: &std::path::Path,
) -> Vec<Interval> {
    let h = w.spawn().unwrap();
    for i in 0..n {
        tm.record_limiter_wait_ns(1_000 + i);
        std::thread::sleep(pause);
    }
    h.stop().unwrap();
    let path = std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let (_, _, intervals) = read_log(&path);
    intervals
        .into_iter()
        .filter(|i| i.tag == "limiter_wait")
        .collect()
}

/// The wall clock steps after the writer's thread starts (a host whose time is set after the
/// relay started at boot, or set back): the intervals keep their length, timed by the monotonic
/// clock. Stepped back, no interval would be written for the step's length; stepped forward,
/// one interval would span the step. The thread here starts an hour ahead of the wall clock,
/// and an hour behind it.
#[test]
fn the_writer_thread_keeps_its_interval_when_the_wall_clock_steps() {
    for (name, start) in [
        ("back", SystemTime::now() + Duration::from_secs(3_600)),
        ("forward", SystemTime::now() - Duration::from_secs(3_600)),
    ] {
        let dir = tempdir(&format!("hlog-step-{name}"));
        let (m, w) = writer(&dir, Duration::from_millis(100), start, |_| {});
        let tm = m.thread(0);
        let waits = thread_limiter_waits(w, &tm, 40, Duration::from_millis(10), &dir);
        assert!(
            waits.len() >= 2,
            "{name}: {} intervals in 0.4 s",
            waits.len()
        );
        for i in &waits {
            assert!(
                i.duration_s < 1.0,
                "{name}: an interval of {} s",
                i.duration_s
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn writer_thread_logs_until_stopped_and_writes_the_last_interval() {
    let dir = tempdir("hlog-thread");
    let (m, w) = writer(&dir, Duration::from_millis(20), SystemTime::now(), |_| {});
    let tm = m.thread(0);
    let waits = thread_limiter_waits(w, &tm, 50, Duration::from_millis(2), &dir);
    assert!(waits.len() >= 2, "{} intervals", waits.len());
    assert_eq!(waits.iter().map(|i| i.hist.len()).sum::<u64>(), 50);
    std::fs::remove_dir_all(&dir).unwrap();
}
