//! `bundle-relay hist`: percentiles of bench-load's interval logs (untagged, StartTime header,
//! delta timestamps, max in ms, bounds to an hour) and of the relay's own (tagged, rotated),
//! merged, by time range and tag, and plotted to a PNG.

use crate::hist_support;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bundle_relay::hist::figure::Kind;
use bundle_relay::hist::{self, Unit, plot};
use bundle_relay::metrics::Metrics;
use bundle_relay::metrics::hlog::{HlogConfig, HlogWriter};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hist_support::{Cli, args, one_interval_log, one_interval_log_at, tempdir};

/// An interval log written the way bench/src/load/mod.rs writes one: bounds 1 ns .. 1 h,
/// StartTime, MaxValueDivisor 1e6, a comment, untagged one-second intervals at 0, 1, 2, … s.
/// Interval `i` holds `per_interval` values of `(i + 1) * 10 µs`.
fn bench_load_style_log(path: &Path, intervals: u64, per_interval: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    let mut ser = V2DeflateSerializer::new();
    let mut w = IntervalLogWriterBuilder::new()
        .with_start_time(UNIX_EPOCH + Duration::from_secs(1_764_460_800))
        .with_max_value_divisor(1e6)
        .add_comment("bench-load latency in ns from scheduled send; max shown in ms")
        .begin_log_with(&mut f, &mut ser)
        .unwrap();
    for i in 0..intervals {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record_n((i + 1) * 10_000, per_interval).unwrap();
        w.write_histogram(&h, Duration::from_secs(i), Duration::from_secs(1), None)
            .unwrap();
    }
}

#[test]
fn bench_load_log_gives_its_percentiles() {
    let dir = tempdir("hist-bench");
    let p = dir.join("load.hlog");
    bench_load_style_log(&p, 10, 100);
    let groups = hist::load(&args(vec![p.clone()])).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].tag, None);
    assert_eq!(groups[0].intervals, 10);
    let h = &groups[0].merged;
    assert_eq!(h.len(), 1_000);
    assert!(h.equivalent(h.value_at_quantile(0.5), 50_000));
    assert!(h.equivalent(h.max(), 100_000));
    let mut text = String::new();
    hist::render(&args(vec![p]), &groups, &mut text);
    assert!(text.contains("# tag (untagged): 10 intervals"), "{text}");
    assert!(
        text.contains("#[Max     =      100.031, Total count    =         1000]"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tag_with_no_values_prints_hdrhistograms_footer_with_a_zero_count() {
    // A limiter that never made a bundle wait: its tag's intervals are all empty. Scripts
    // that read HdrHistogram's text find the footer they read for any other tag.
    let dir = tempdir("hist-empty-tag");
    let p = dir.join("quiet.hlog");
    one_interval_log(&p, &[]);
    let groups = hist::load(&args(vec![p.clone()])).unwrap();
    let mut text = String::new();
    hist::render(&args(vec![p]), &groups, &mut text);
    for line in [
        "#[Mean    =        0.000, StdDeviation   =        0.000]",
        "#[Max     =        0.000, Total count    =            0]",
        "#[Buckets = ",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn from_and_to_select_intervals_by_seconds_since_the_log_start() {
    let dir = tempdir("hist-range");
    let p = dir.join("load.hlog");
    bench_load_style_log(&p, 10, 100);
    let mut a = args(vec![p]);
    a.from = Some(3.0);
    a.to = Some(6.0);
    let groups = hist::load(&a).unwrap();
    // Intervals starting at 3, 4 and 5 s: values 40, 50 and 60 µs.
    assert_eq!(groups[0].intervals, 3);
    let h = &groups[0].merged;
    assert_eq!(h.len(), 300);
    assert!(h.equivalent(h.min(), 40_000));
    assert!(h.equivalent(h.max(), 60_000));
    a.from = Some(20.0);
    a.to = None;
    let err = hist::load(&a).err().unwrap();
    assert!(err.contains("no interval matches --from 20"), "{err}");
    a.from = Some(5.0);
    a.to = Some(5.0);
    assert!(
        hist::load(&a)
            .err()
            .unwrap()
            .contains("--to 5 must be greater")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn several_logs_merge_and_tag_selects_one_histogram() {
    let dir = tempdir("hist-merge");
    let regions = vec!["frankfurt".to_string(), "ny".to_string()];
    let m = Arc::new(Metrics::new(&regions, 1));
    let tm = m.thread(0);
    let t0 = UNIX_EPOCH + Duration::from_secs(1_764_460_800);
    let cfg = HlogConfig {
        rotate_bytes: 1,
        ..HlogConfig::new(dir.join("relay"), Duration::from_secs(1))
    };
    let mut w = HlogWriter::new(Arc::clone(&m), cfg, t0).unwrap();
    for s in 1..=4u64 {
        for _ in 0..10 {
            tm.record_upstream_rtt_ns(1, s * 1_000_000);
            tm.record_overhead_ns(s * 1_000);
        }
        w.tick(t0 + Duration::from_secs(s)).unwrap();
    }
    let files: Vec<PathBuf> = w.files().map(Path::to_path_buf).collect();
    assert_eq!(files.len(), 4);
    let mut a = args(files.clone());
    a.tag = Some("upstream_round_trip.ny".into());
    let groups = hist::load(&a).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].merged.len(), 40);
    assert_eq!(groups[0].per_file.len(), 4);
    let live = m.histogram(bundle_relay::metrics::HistId::UpstreamRtt(1));
    assert_eq!(
        groups[0].merged.value_at_quantile(0.99),
        live.value_at_quantile(0.99)
    );
    // The rotated files share one time axis: --from 2 takes the last two seconds' intervals.
    a.from = Some(2.0);
    assert_eq!(hist::load(&a).unwrap()[0].merged.len(), 20);
    // No --tag: one group per tag, merged over the files.
    let all = hist::load(&args(files)).unwrap();
    let tags: Vec<&str> = all.iter().map(|g| g.tag.as_deref().unwrap()).collect();
    assert_eq!(
        tags,
        [
            "relay_overhead",
            "delivery_latency",
            "limiter_wait",
            "upstream_round_trip.frankfurt",
            "upstream_round_trip.ny"
        ]
    );
    assert_eq!(all[0].merged.len(), 40);
    assert_eq!(all[1].merged.len(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unreadable_input_is_named_in_the_error() {
    let dir = tempdir("hist-bad");
    let p = dir.join("junk.hlog");
    std::fs::write(&p, "this is not an interval log\n").unwrap();
    let err = hist::run(&args(vec![p])).unwrap_err();
    assert!(err.contains("junk.hlog: not an interval log"), "{err}");
    let err = hist::run(&args(vec![dir.join("missing.hlog")])).unwrap_err();
    assert!(
        err.contains("reading") && err.contains("missing.hlog"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Decodes the PNG this module writes: checks the signature and every chunk's CRC, inflates
/// the image data and undoes the (none) row filter.
fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let mut i = 8;
    let (mut w, mut h, mut idat) = (0, 0, Vec::new());
    loop {
        let len = u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap()) as usize;
        let kind = &bytes[i + 4..i + 8];
        let data = &bytes[i + 8..i + 8 + len];
        let crc = u32::from_be_bytes(bytes[i + 8 + len..i + 12 + len].try_into().unwrap());
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(kind);
        hasher.update(data);
        assert_eq!(
            hasher.finalize(),
            crc,
            "chunk {:?} CRC",
            std::str::from_utf8(kind)
        );
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(data[0..4].try_into().unwrap());
                h = u32::from_be_bytes(data[4..8].try_into().unwrap());
                assert_eq!(&data[8..], &[8, 2, 0, 0, 0]);
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            k => panic!("unexpected chunk {k:?}"),
        }
        i += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .unwrap();
    let stride = w as usize * 3 + 1;
    assert_eq!(raw.len(), stride * h as usize);
    let rgb = raw
        .chunks_exact(stride)
        .flat_map(|row| {
            assert_eq!(row[0], 0, "filter type none");
            row[1..].to_vec()
        })
        .collect();
    (w, h, rgb)
}

#[test]
fn plot_draws_one_line_per_input_log_into_a_valid_png() {
    let dir = tempdir("hist-plot");
    let (a_log, b_log) = (dir.join("a.hlog"), dir.join("b.hlog"));
    bench_load_style_log(&a_log, 5, 200);
    bench_load_style_log(&b_log, 10, 50);
    let png = dir.join("out.png");
    let mut a = args(vec![a_log, b_log]);
    a.plot = Some(png.clone());
    hist::run(&a).unwrap();
    let (w, h, rgb) = decode_png(&std::fs::read(&png).unwrap());
    assert_eq!((w, h), plot::image_size_px(Kind::Distribution, 1));
    let count = |c: [u8; 3]| rgb.chunks_exact(3).filter(|p| *p == c).count();
    // Each input's line is drawn in its own colour, long enough to be a line, not a legend key.
    for (i, c) in plot::PALETTE.iter().take(2).enumerate() {
        assert!(count(*c) > 500, "series {i}: {} pixels", count(*c));
    }
    assert_eq!(count(plot::PALETTE[2]), 0, "only two series");
    // Text is drawn (black pixels beyond the two axes' lines).
    assert!(count([0, 0, 0]) > 5_000);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn command_line_reads_files_range_tag_unit_and_plot() {
    use clap::Parser as _;
    let cli = Cli::try_parse_from([
        "hist",
        "a.hlog",
        "b.hlog",
        "--from",
        "1.5",
        "--to",
        "5",
        "--tag",
        "relay_overhead",
        "--unit",
        "ms",
        "--plot",
        "out.png",
    ])
    .unwrap();
    let a = cli.hist;
    assert_eq!(a.files, [PathBuf::from("a.hlog"), PathBuf::from("b.hlog")]);
    assert_eq!((a.from, a.to), (Some(1.5), Some(5.0)));
    assert_eq!(a.tag.as_deref(), Some("relay_overhead"));
    assert_eq!(a.unit, Unit::Ms);
    assert_eq!(a.plot, Some(PathBuf::from("out.png")));
    let defaults = Cli::try_parse_from(["hist", "x.hlog"]).unwrap().hist;
    assert_eq!(defaults.unit, Unit::Us);
    assert!(Cli::try_parse_from(["hist"]).is_err(), "a file is required");
    assert!(Cli::try_parse_from(["hist", "x.hlog", "--unit", "weeks"]).is_err());
}

/// A log bench-load itself wrote: `bench-null --listen 127.0.0.1:18999` answering
/// `bench-load --target 127.0.0.1:18999 --rate 2000 --duration-s 3 --connections 4 --hlog …`,
/// which reported "p50 82.8 µs … max 21774.3 µs" over 6000 answered requests.
#[test]
fn a_real_bench_load_log_gives_the_percentiles_bench_load_reported() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hist_fixtures/bench-load-3s.hlog");
    let groups = hist::load(&args(vec![fixture.clone()])).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].tag, None);
    let h = &groups[0].merged;
    assert_eq!(h.len(), 6_000);
    let us = |ns: u64| ns as f64 / 1_000.0;
    assert!(
        (us(h.value_at_quantile(0.5)) - 82.8).abs() < 0.1,
        "p50 {}",
        h.value_at_quantile(0.5)
    );
    assert!((us(h.max()) - 21_774.3).abs() < 0.1, "max {}", h.max());
    // Its three one-second intervals, selected one at a time, add up to the whole.
    let mut per_second = Vec::new();
    for s in 0..3 {
        let mut a = args(vec![fixture.clone()]);
        a.from = Some(f64::from(s));
        a.to = Some(f64::from(s + 1));
        let g = hist::load(&a).unwrap();
        assert_eq!(g[0].intervals, 1);
        per_second.push(g[0].merged.len());
    }
    assert!(per_second.iter().all(|&n| n > 0), "{per_second:?}");
    assert_eq!(per_second.iter().sum::<u64>(), 6_000);
}

/// A log at two significant figures (jHiccup's default) is read at its own precision, and
/// printed as HdrHistogram's `outputPercentileDistribution` prints that histogram: values
/// with two decimals, each row's value its bucket's top, the footer's buckets its own. Merged
/// into a histogram of three figures, its values moved to lower buckets and the Max came out
/// below what was recorded.
#[test]
fn a_log_at_two_significant_figures_prints_as_hdrhistogram_prints_it() {
    let dir = tempdir("hist-two-figures");
    let p = dir.join("two.hlog");
    let h = one_interval_log_at(&p, &[1_000_000; 10], 2);
    let a = args(vec![p]);
    let mut text = String::new();
    hist::render(&a, &hist::load(&a).unwrap(), &mut text);
    let top = h.highest_equivalent(1_000_000) as f64 / 1_000.0;
    for line in [
        format!("{top:12.2} 0.000000000000         10           1.00"),
        format!("#[Max     = {top:12.2}, Total count    =           10]"),
        format!(
            "#[Buckets = {:12}, SubBuckets     =          256]",
            h.buckets()
        ),
    ] {
        assert!(text.contains(&line), "{line:?} in\n{text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The Percentile column as HdrHistogram's Java text has it: the level's shortest decimal
/// form rounded half up to 12 places (Java's `%2.12f`), not its binary value rounded; and the
/// footer's buckets those of the log's own bounds (bench-load's: 1 ns to an hour).
#[test]
fn a_real_bench_load_log_prints_the_levels_and_footer_hdrhistograms_java_text_has() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hist_fixtures/bench-load-3s.hlog");
    let a = args(vec![fixture]);
    let mut text = String::new();
    hist::render(&a, &hist::load(&a).unwrap(), &mut text);
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().nth(1) == Some("0.999780273438")),
        "{text}"
    );
    let buckets = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
        .unwrap()
        .buckets();
    let footer = format!("#[Buckets = {buckets:12}, SubBuckets     =         2048]");
    assert!(text.contains(&footer), "{footer:?} in\n{text}");
}

#[test]
fn a_percentile_row_at_an_exact_sample_count_shows_that_sample() {
    let dir = tempdir("hist-exact");
    let p = dir.join("ten.hlog");
    let values: Vec<u64> = (1..=10).map(|us| us * 1_000).collect();
    one_interval_log(&p, &values);
    let mut a = args(vec![p]);
    a.unit = Unit::Ns;
    let mut text = String::new();
    hist::render(&a, &hist::load(&a).unwrap(), &mut text);
    // q × 10 values is a whole number of values at each of these rows: the row's value is that
    // many values' largest (each value's bucket top at 3 significant figures).
    for (q, ns) in [
        ("0.300000000000", "3001.000"),
        ("0.600000000000", "6003.000"),
        ("0.700000000000", "7003.000"),
        ("0.800000000000", "8003.000"),
        ("0.900000000000", "9007.000"),
    ] {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(q))
            .unwrap_or_else(|| panic!("no row {q}:\n{text}"));
        assert_eq!(row.split_whitespace().next(), Some(ns), "{q}:\n{text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn from_and_to_match_an_interval_at_the_offset_its_log_writes() {
    let dir = tempdir("hist-fraction");
    // Stamped in seconds since the epoch, 5.001 s and 6.001 s after a StartTime with
    // milliseconds; and as deltas from a BaseTime with milliseconds.
    let absolute = dir.join("absolute.hlog");
    let delta = dir.join("delta.hlog");
    let line = |ts: &str| {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record(10_000).unwrap();
        let mut raw = Vec::new();
        hdrhistogram::serialization::Serializer::serialize(
            &mut V2DeflateSerializer::new(),
            &h,
            &mut raw,
        )
        .unwrap();
        use base64::Engine as _;
        format!(
            "{ts},1.000,0.010,{}\n",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    };
    let header = "#[StartTime: 1796533505.838 (seconds since epoch)]\n";
    std::fs::write(
        &absolute,
        format!(
            "{header}{}{}",
            line("1796533510.839"),
            line("1796533511.839")
        ),
    )
    .unwrap();
    std::fs::write(
        &delta,
        format!(
            "{header}#[BaseTime: 1796533505.838 (seconds since epoch)]\n{}{}",
            line("5.001"),
            line("6.001")
        ),
    )
    .unwrap();
    for p in [absolute, delta] {
        let mut a = args(vec![p.clone()]);
        a.from = Some(5.001);
        assert_eq!(hist::load(&a).unwrap()[0].intervals, 2, "{}", p.display());
        a.from = None;
        a.to = Some(6.001);
        assert_eq!(hist::load(&a).unwrap()[0].intervals, 1, "{}", p.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn from_or_to_that_is_not_a_number_of_seconds_is_refused() {
    use clap::Parser as _;
    for bad in ["nan", "inf", "NaN", "infinity"] {
        for opt in ["--from", "--to"] {
            let err = Cli::try_parse_from(["hist", "x.hlog", opt, bad])
                .err()
                .unwrap_or_else(|| panic!("{opt} {bad} accepted"))
                .to_string();
            assert!(err.contains(bad) && err.contains("seconds"), "{err}");
        }
    }
    let mut a = args(vec![PathBuf::from("x.hlog")]);
    a.from = Some(f64::NAN);
    let err = hist::load(&a).err().unwrap();
    assert!(err.contains("--from"), "{err}");
}

#[test]
fn a_file_given_twice_is_counted_once_with_a_note() {
    let dir = tempdir("hist-twice");
    let p = dir.join("load.hlog");
    bench_load_style_log(&p, 3, 100);
    // The same file by another path, as a shell glob and a typed name can give it.
    let again = dir.join(".").join("load.hlog");
    let loaded = hist::read(&args(vec![p.clone(), again, p.clone()])).unwrap();
    assert_eq!(loaded.groups[0].intervals, 3);
    assert_eq!(loaded.groups[0].merged.len(), 300);
    assert_eq!(loaded.runs.len(), 1, "{:?}", loaded.runs);
    assert_eq!(loaded.runs[0].files, [0]);
    assert_eq!(loaded.notes.len(), 2, "{:?}", loaded.notes);
    assert!(
        loaded.notes[0].contains("load.hlog") && loaded.notes[0].contains("once"),
        "{:?}",
        loaded.notes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `bundle-relay hist ARGS…` as a shell runs it, stdout going to `stdout`.
fn hist_command(args: &[&std::ffi::OsStr], stdout: std::process::Stdio) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .arg("hist")
        .args(args)
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn the_plot_is_written_though_the_reader_of_the_text_has_gone() {
    let dir = tempdir("hist-head");
    let p = dir.join("load.hlog");
    bench_load_style_log(&p, 3, 100);
    let png = dir.join("p.png");
    // `hist load.hlog --plot p.png | head -0`: the reader is gone before the first line.
    let mut child = hist_command(
        &[p.as_os_str(), "--plot".as_ref(), png.as_os_str()],
        std::process::Stdio::piped(),
    );
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let (w, _, _) = decode_png(&std::fs::read(&png).unwrap());
    assert_eq!(w, plot::WIDTH_PX);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_stdout_is_a_one_line_error_not_a_panic() {
    let dir = tempdir("hist-full");
    let p = dir.join("load.hlog");
    bench_load_style_log(&p, 3, 100);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = hist_command(&[p.as_os_str()], full.into())
        .wait_with_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("stdout") && stderr.contains("No space left"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_log_with_no_intervals_is_said_to_hold_none() {
    let dir = tempdir("hist-none");
    let empty = dir.join("empty.hlog");
    std::fs::write(&empty, "").unwrap();
    let header = dir.join("header.hlog");
    std::fs::write(
        &header,
        "#[Histogram log format version 1.3]\n#[StartTime: 1796533505.838 (seconds since epoch)]\n\
         \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
    )
    .unwrap();
    for p in [&empty, &header] {
        let err = hist::load(&args(vec![p.clone()])).err().unwrap();
        assert!(err.contains("holds no intervals"), "{err}");
        assert!(!err.contains("matches"), "{err}");
    }
    // Beside a log that has some, it is a note, not an error.
    let load = dir.join("load.hlog");
    bench_load_style_log(&load, 2, 10);
    let loaded = hist::read(&args(vec![load, empty])).unwrap();
    assert!(
        loaded
            .notes
            .iter()
            .any(|n| n.contains("empty.hlog") && n.contains("no intervals")),
        "{:?}",
        loaded.notes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tag_the_logs_do_not_hold_is_refused_naming_the_tags_they_do() {
    let dir = tempdir("hist-tags");
    let regions = vec!["ny".to_string()];
    let m = Arc::new(Metrics::new(&regions, 1));
    let t0 = UNIX_EPOCH + Duration::from_secs(1_764_460_800);
    let mut w = HlogWriter::new(
        Arc::clone(&m),
        HlogConfig::new(dir.join("relay"), Duration::from_secs(1)),
        t0,
    )
    .unwrap();
    m.thread(0).record_overhead_ns(5_000);
    w.tick(t0 + Duration::from_secs(1)).unwrap();
    let files: Vec<PathBuf> = w.files().map(Path::to_path_buf).collect();
    let mut a = args(files);
    a.tag = Some("relay_overhea".into());
    let err = hist::load(&a).err().unwrap();
    assert!(err.contains("--tag relay_overhea"), "{err}");
    assert!(
        err.contains("relay_overhead, delivery_latency, limiter_wait, upstream_round_trip.ny"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn each_tags_header_names_only_the_files_that_hold_it() {
    let dir = tempdir("hist-header-files");
    let load = dir.join("load.hlog");
    bench_load_style_log(&load, 2, 10);
    let m = Arc::new(Metrics::new(&["ny".to_string()], 1));
    let t0 = UNIX_EPOCH + Duration::from_secs(1_764_460_800);
    let mut w = HlogWriter::new(
        Arc::clone(&m),
        HlogConfig::new(dir.join("relay"), Duration::from_secs(1)),
        t0,
    )
    .unwrap();
    m.thread(0).record_overhead_ns(5_000);
    w.tick(t0 + Duration::from_secs(1)).unwrap();
    let relay: PathBuf = w.files().next().unwrap().to_path_buf();
    let a = args(vec![relay.clone(), load.clone()]);
    let mut text = String::new();
    hist::render(&a, &hist::load(&a).unwrap(), &mut text);
    let header = |tag: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("# tag {tag}:")))
            .unwrap_or_else(|| panic!("no {tag}:\n{text}"))
            .to_string()
    };
    let overhead = header("relay_overhead");
    assert!(
        overhead.contains(&relay.display().to_string()),
        "{overhead}"
    );
    assert!(!overhead.contains("load.hlog"), "{overhead}");
    let untagged = header("(untagged)");
    assert!(untagged.contains(&load.display().to_string()), "{untagged}");
    assert!(!untagged.contains("bundle-relay."), "{untagged}");
    std::fs::remove_dir_all(&dir).unwrap();
}
