//! Reading logs as a relay leaves them: cut off mid-line when it is killed or the disk fills,
//! without a final newline, with blank lines; and inputs that are no log at all.

use crate::hist_support;

use std::path::Path;
use std::time::Duration;

use bundle_relay::hist;
use hist_support::{args, one_interval_log, tempdir};

/// A log of `n` one-interval lines (intervals at 0, 1, … s of one 10 µs value each), as text.
fn log_text(dir: &Path, n: u64) -> String {
    let mut text = String::new();
    for i in 0..n {
        let p = dir.join(format!("part{i}.hlog"));
        one_interval_log(&p, &[10_000]);
        let part = std::fs::read_to_string(&p).unwrap();
        let line = part
            .lines()
            .last()
            .unwrap()
            .replacen("0.000,", &format!("{i}.000,"), 1);
        if i == 0 {
            for l in part.lines().filter(|l| l.starts_with(['#', '"'])) {
                text.push_str(l);
                text.push('\n');
            }
        }
        text.push_str(&line);
        text.push('\n');
        std::fs::remove_file(&p).unwrap();
    }
    text
}

/// The 1-based number of the line holding `byte`.
fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
}

#[test]
fn a_log_cut_off_mid_line_gives_its_complete_intervals_and_names_the_line_it_skipped() {
    let dir = tempdir("hist-read-cut");
    let text = log_text(&dir, 5);
    let last = text.trim_end().rfind('\n').unwrap() + 1;
    let cut = last + (text.len() - last) / 2;
    let p = dir.join("cut.hlog");
    std::fs::write(&p, &text[..cut]).unwrap();
    let loaded = hist::read(&args(vec![p])).unwrap();
    assert_eq!(loaded.groups[0].intervals, 4);
    assert_eq!(loaded.groups[0].merged.len(), 4);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    let w = &loaded.warnings[0];
    let line = line_of(&text, last);
    assert!(
        w.contains("cut.hlog") && w.contains(&format!("line {line}")),
        "{w}"
    );
    assert!(!w.contains("offset"), "{w}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_log_without_a_final_newline_or_with_blank_lines_reads_every_interval_silently() {
    let dir = tempdir("hist-read-lines");
    let text = log_text(&dir, 5);
    let no_newline = dir.join("nonl.hlog");
    std::fs::write(&no_newline, text.trim_end()).unwrap();
    let blank = dir.join("blank.hlog");
    let second = text.match_indices('\n').nth(4).unwrap().0 + 1;
    let with_blanks = format!("{}\n  \n{}\n\n", &text[..second], &text[second..]);
    std::fs::write(&blank, with_blanks).unwrap();
    let crlf = dir.join("crlf.hlog");
    std::fs::write(&crlf, text.replace('\n', "\r\n")).unwrap();
    for p in [no_newline, blank, crlf] {
        let loaded = hist::read(&args(vec![p.clone()])).unwrap();
        assert_eq!(loaded.groups[0].intervals, 5, "{}", p.display());
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_histogram_is_skipped_with_its_line_named() {
    let dir = tempdir("hist-read-b64");
    let text = log_text(&dir, 3);
    // The second interval's histogram cut short: the line is whole, its histogram is not.
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let n = lines.len();
    let damaged = &mut lines[n - 2];
    damaged.truncate(damaged.len() - 12);
    let p = dir.join("damaged.hlog");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let loaded = hist::read(&args(vec![p])).unwrap();
    assert_eq!(loaded.groups[0].intervals, 2);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(
        loaded.warnings[0].contains(&format!("damaged.hlog: line {}", n - 1)),
        "{:?}",
        loaded.warnings
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_input_with_no_readable_interval_is_an_error_naming_the_file_and_why() {
    let dir = tempdir("hist-read-none");
    let text = log_text(&dir, 1);
    // The relay killed while writing its first interval.
    let cut = dir.join("first-cut.hlog");
    std::fs::write(&cut, &text[..text.len() - 20]).unwrap();
    let err = hist::read(&args(vec![cut])).err().unwrap();
    let line = text.lines().count();
    assert!(
        err.contains("first-cut.hlog") && err.contains(&format!("line {line}")),
        "{err}"
    );
    let csv = dir.join("table.hlog");
    std::fs::write(&csv, "a,b,c\n1,2,3\n").unwrap();
    let err = hist::read(&args(vec![csv])).err().unwrap();
    assert!(
        err.contains("table.hlog: not an interval log") && err.contains("line 1"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A log whose histograms are in an encoding this reader does not decode (an older
/// HdrHistogram's V0 or V1 cookie, a DoubleHistogram's) is named as that, with the way out, not
/// as a log cut short: the file is whole.
#[test]
fn a_log_in_an_older_encoding_is_named_as_such_not_as_cut_short() {
    use base64::Engine as _;
    let dir = tempdir("hist-read-v1");
    let text = log_text(&dir, 1);
    let header: String = text
        .lines()
        .filter(|l| l.starts_with(['#', '"']))
        .map(|l| format!("{l}\n"))
        .collect();
    // V1's compressed cookie, then what would follow it.
    let mut v1 = vec![0x1c, 0x84, 0x93, 0x02];
    v1.extend_from_slice(&[0; 40]);
    let encoded = base64::engine::general_purpose::STANDARD.encode(&v1);
    let p = dir.join("jhiccup-2014.hlog");
    std::fs::write(&p, format!("{header}0.000,1.000,0.010,{encoded}\n")).unwrap();
    let err = hist::read(&args(vec![p])).err().unwrap();
    assert!(
        err.contains("jhiccup-2014.hlog")
            && err.contains("an encoding other than HdrHistogram's V2")
            && err.contains("HistogramLogProcessor")
            && !err.contains("cut short"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Another tool's log recorded in microseconds: `--log-unit us` reads its values as such, so
/// a 10 µs value prints as 10 µs, not as 10 ns.
#[test]
fn a_log_in_microseconds_reads_at_its_unit_with_log_unit() {
    let dir = tempdir("hist-read-us");
    let p = dir.join("wrk2.hlog");
    hist_support::one_interval_log(&p, &[10, 20, 30_000]);
    let mut a = args(vec![p]);
    let as_ns = hist::read(&a).unwrap();
    assert_eq!(
        as_ns.groups[0].merged.max(),
        30_015,
        "read as ns: 1,000 times too small"
    );
    a.log_unit = hist::Unit::Us;
    let loaded = hist::read(&a).unwrap();
    let h = &loaded.groups[0].merged;
    assert_eq!(h.len(), 3);
    for (q, want) in [(0.0, 10_000), (0.5, 20_000), (1.0, 30_000_000)] {
        let got = h.value_at_quantile(q);
        assert!(h.equivalent(got, want), "p{q}: {got} for {want}");
    }

    // A log whose histograms were made with Java's default bound, `Long.MAX_VALUE`: its small
    // values read, whatever the bound times 1,000 would be.
    let p = dir.join("java.hlog");
    {
        use hdrhistogram::serialization::V2DeflateSerializer;
        use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
        let mut f = std::fs::File::create(&p).unwrap();
        let mut ser = V2DeflateSerializer::new();
        let mut w = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut f, &mut ser)
            .unwrap();
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, i64::MAX as u64, 3).unwrap();
        h.record(10).unwrap();
        w.write_histogram(&h, Duration::ZERO, Duration::from_secs(1), None)
            .unwrap();
    }
    let mut a = args(vec![p]);
    a.log_unit = hist::Unit::Us;
    let loaded = hist::read(&a).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let h = &loaded.groups[0].merged;
    assert!(h.equivalent(h.max(), 10_000), "{}", h.max());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_gzipped_log_is_named_as_gzip_to_decompress_first() {
    use std::io::Write as _;
    let dir = tempdir("hist-read-gz");
    let text = log_text(&dir, 2);
    let p = dir.join("load.hlog.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    std::fs::write(&p, gz.finish().unwrap()).unwrap();
    let err = hist::read(&args(vec![p])).err().unwrap();
    assert!(
        err.contains("load.hlog.gz") && err.contains("gzip") && err.contains("decompress"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs of the `hist_log` fuzz target's body: a fixed seed, so a failure repeats.
fn fuzz_config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(2026),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

proptest::proptest! {
    #![proptest_config(fuzz_config())]

    /// A real bench-load log with bytes overwritten anywhere (a histogram's payload, a
    /// timestamp, a header) reads as a report or an error, and prints and draws without a
    /// panic.
    #[test]
    fn a_log_with_any_bytes_overwritten_is_read_printed_and_drawn_without_a_panic(
        edits in proptest::collection::vec((0usize..4229, proptest::prelude::any::<u8>()), 1..8),
    ) {
        let mut log = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hist_fixtures/bench-load-3s.hlog"),
        )
        .unwrap();
        for (at, byte) in edits {
            let at = at % log.len();
            log[at] = byte;
        }
        hist::fuzz_log(&log);
    }

    /// Bytes that are no log at all give an error, not a panic.
    #[test]
    fn any_bytes_read_as_a_log_are_an_error_or_a_report_never_a_panic(
        data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
    ) {
        hist::fuzz_log(&data);
    }
}

#[test]
fn a_timestamp_past_what_a_duration_holds_is_a_skipped_line_not_a_panic() {
    let dir = tempdir("hist-read-huge-time");
    let text = log_text(&dir, 3);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let n = lines.len();
    lines.insert(
        n - 1,
        "#[BaseTime: 18446744073709551615.000 (seconds since epoch)]".to_string(),
    );
    let p = dir.join("huge.hlog");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let loaded = hist::read(&args(vec![p])).unwrap();
    assert_eq!(loaded.groups[0].intervals, 2);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(
        loaded.warnings[0].contains(&format!("huge.hlog: line {}", n + 1))
            && loaded.warnings[0].contains("time"),
        "{:?}",
        loaded.warnings
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
