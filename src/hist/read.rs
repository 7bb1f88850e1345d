//! Reading HdrHistogram interval logs and selecting their intervals: this relay's (tagged, one
//! tag per histogram) and bench-load's (untagged) alike. Not the output.
//!
//! What comes out: per tag, the merged histogram, the same per file, and each selected
//! interval's count, p50, p99 and max (the over-time view; whole histograms per interval would
//! hold a day of the relay's logs in gigabytes). Files are grouped into runs: the rotated files
//! of one relay (`{prefix}.{start}.{seq:05}.hlog`, one `StartTime`) are one run, any other
//! file is a run of its own.
//!
//! Time: `--from`/`--to` are seconds since each log's start: its `StartTime` header if it has
//! one, else its first interval. An interval is taken when its start lies in `[from, to)`.
//! Interval timestamps are read as the Java `HistogramLogReader` reads them: deltas from
//! `BaseTime` when there is one; deltas from `StartTime` when they are more than a year
//! smaller than it; seconds since the epoch otherwise.
//!
//! Damage: a log is read line by line, so what a killed relay or a full disk leaves (a last
//! line cut short, a histogram that does not decode) costs that line only, with a warning that
//! names its line; blank lines and a missing final newline cost nothing. A file with no
//! readable interval at all is an error that says why.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::{DeserializeError, Deserializer};

use super::args::{HistArgs, Unit};

/// Seconds in a year: the Java reader's threshold between delta and absolute timestamps.
const YEAR_S: f64 = 365.25 * 24.0 * 3600.0;

/// One tag's merged histogram, and the same per file (for the plot).
pub struct TagGroup {
    /// `None` for untagged intervals.
    pub tag: Option<String>,
    pub merged: Histogram<u64>,
    pub intervals: usize,
    /// (file index, histogram of that file's selected intervals).
    pub per_file: Vec<(usize, Histogram<u64>)>,
    /// Every selected interval, in file then log order.
    pub timeline: Vec<IntervalSummary>,
}

/// One selected interval's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalSummary {
    pub file: usize,
    /// Seconds since its log's start.
    pub start_s: f64,
    pub length_s: f64,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// The files of one writer's run, which share one time axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// The file name without `.hlog` (and without a rotation's sequence number), unique among
    /// the runs read.
    pub name: String,
    /// Indexes into the files read.
    pub files: Vec<usize>,
    /// When its time axis starts, seconds since the epoch, if its log says.
    pub start_epoch_s: Option<f64>,
}

/// Everything read: per tag (first-seen order), the runs the files form, and what was skipped.
pub struct Loaded {
    pub groups: Vec<TagGroup>,
    pub runs: Vec<Run>,
    /// Lines skipped as unreadable, for stderr: "load.hlog: line 57 skipped: …".
    pub warnings: Vec<String>,
    /// What was read otherwise than asked, for stderr: a file given twice read once.
    pub notes: Vec<String>,
}

impl Loaded {
    /// The run file `file` belongs to.
    pub fn run_of(&self, file: usize) -> usize {
        self.runs
            .iter()
            .position(|r| r.files.contains(&file))
            .expect("every file is in a run")
    }
}

/// An empty histogram of `first`'s layout (its lowest and highest trackable values and its
/// significant figures), auto-resizing for a log of wider bounds merged into it. The layout
/// of the log's own: merged into another, each bucket's values would move to the new layout's
/// bucket of its lowest value, and the rows' values (each a bucket's top), the Max and the
/// footer would read other than HdrHistogram prints for the log.
fn like(first: &Histogram<u64>) -> Histogram<u64> {
    let mut h = Histogram::new_from(first);
    h.auto(true);
    h
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// `a − b` in seconds, negative when `a` is earlier.
fn signed_secs(a: Duration, b: Duration) -> f64 {
    if a >= b { secs(a - b) } else { -secs(b - a) }
}

/// Reads `files` and merges the intervals that `args` selects, grouped by tag in first-seen
/// order.
pub fn load(args: &HistArgs) -> Result<Vec<TagGroup>, String> {
    read(args).map(|l| l.groups)
}

/// [`load`], with the runs the files form.
pub fn read(args: &HistArgs) -> Result<Loaded, String> {
    check_span(args)?;
    let mut notes = Vec::new();
    let mut seen: Vec<(PathBuf, usize)> = Vec::new();
    let mut contents: Vec<Option<Vec<u8>>> = Vec::with_capacity(args.files.len());
    for (fi, path) in args.files.iter().enumerate() {
        let canonical =
            std::fs::canonicalize(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        // A file named twice (a glob and a typed name, a link) would count its values twice.
        if let Some((_, first)) = seen.iter().find(|(c, _)| *c == canonical) {
            notes.push(format!(
                "{} is {} again: read once",
                path.display(),
                args.files[*first].display()
            ));
            contents.push(None);
            continue;
        }
        seen.push((canonical, fi));
        let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        contents.push(Some(bytes));
    }
    parse(args, &contents, notes)
}

/// `--from` and `--to` as the command line can hold them only by mistake.
fn check_span(args: &HistArgs) -> Result<(), String> {
    for (name, v) in [("--from", args.from), ("--to", args.to)] {
        if let Some(v) = v.filter(|v| !v.is_finite()) {
            return Err(format!("{name} {v}: not a number of seconds"));
        }
    }
    if let (Some(f), Some(t)) = (args.from, args.to) {
        if t <= f {
            return Err(format!("--to {t} must be greater than --from {f}"));
        }
    }
    Ok(())
}

/// [`read`] of files already read: `contents[i]` is `args.files[i]`'s bytes, `None` for a
/// file named before (`notes` says so).
pub(super) fn parse(
    args: &HistArgs,
    contents: &[Option<Vec<u8>>],
    mut notes: Vec<String>,
) -> Result<Loaded, String> {
    check_span(args)?;
    let mut groups: Vec<TagGroup> = Vec::new();
    let mut starts: Vec<Option<f64>> = Vec::new();
    let mut deserializer = Deserializer::new();
    let mut warnings = Vec::new();
    // Every tag the files hold (None: untagged), selected or not, to name when --tag matches
    // none of them.
    let mut tags_held: Vec<Option<String>> = Vec::new();
    let mut no_intervals: Vec<usize> = Vec::new();
    let read_files: Vec<bool> = contents.iter().map(Option::is_some).collect();
    // Files with a selected interval: only they make the runs the title and facts name (a
    // file whose intervals --from, --to or --tag left out has no span to show).
    let mut selected = vec![false; args.files.len()];
    for (fi, path) in args.files.iter().enumerate() {
        let Some(bytes) = &contents[fi] else {
            starts.push(None);
            continue;
        };
        if bytes.starts_with(&[0x1f, 0x8b]) {
            return Err(format!(
                "{}: gzip-compressed, not an interval log as it is: decompress it first \
                 (zcat it into a .hlog file)",
                path.display()
            ));
        }
        // The parser wants every line ended; a last line without its newline is read as if
        // it had one (whole, it reads; cut short, its histogram does not decode).
        let bytes: Cow<[u8]> = if bytes.is_empty() || bytes.ends_with(b"\n") {
            Cow::Borrowed(bytes)
        } else {
            let mut whole = bytes.clone();
            whole.push(b'\n');
            Cow::Owned(whole)
        };
        // Times stay the exact decimals the log writes (nanoseconds) until the offset is
        // taken: an epoch-sized float keeps only about 0.2 µs, so 1796533510.839 −
        // 1796533505.838 came out as 5.00099993 and missed --from 5.001.
        let mut start_time: Option<Duration> = None;
        let mut base_time: Option<Duration> = None;
        let mut first_abs: Option<Duration> = None;
        let mut skipped: Vec<(usize, String)> = Vec::new();
        let mut readable = 0usize;
        for (line_no, line) in lines(&bytes) {
            let entry = match entry_of(line) {
                Ok(Some(e)) => e,
                Ok(None) => continue,
                Err(why) => {
                    skipped.push((line_no, why));
                    continue;
                }
            };
            let ilh = match entry {
                LogEntry::StartTime(t) => {
                    start_time = Some(t);
                    continue;
                }
                LogEntry::BaseTime(t) => {
                    base_time = Some(t);
                    continue;
                }
                LogEntry::Interval(ilh) => ilh,
            };
            let ts = ilh.start_timestamp();
            let abs = match (base_time, start_time) {
                (Some(b), _) => b.checked_add(ts),
                (None, Some(s)) if secs(ts) < secs(s) - YEAR_S => s.checked_add(ts),
                _ => Some(ts),
            };
            let Some(abs) = abs else {
                skipped.push((
                    line_no,
                    "its time is past what the log's base time allows".into(),
                ));
                continue;
            };
            let reference = start_time.unwrap_or_else(|| *first_abs.get_or_insert(abs));
            let offset = signed_secs(abs, reference);
            let tag = ilh.tag().map(|t| t.as_str().to_string());
            if !tags_held.contains(&tag) {
                tags_held.push(tag.clone());
            }
            if args.from.is_some_and(|f| offset < f) || args.to.is_some_and(|t| offset >= t) {
                readable += 1;
                continue;
            }
            if args
                .tag
                .as_ref()
                .is_some_and(|want| tag.as_ref() != Some(want))
            {
                readable += 1;
                continue;
            }
            // Only selected histograms are decoded: a day of logs read for one tag or one hour
            // decodes that.
            let decoded = decode(&mut deserializer, ilh.encoded_histogram())
                .and_then(|h| in_ns(h, args.log_unit));
            let h: Histogram<u64> = match decoded {
                Ok(h) => h,
                Err(why) => {
                    skipped.push((line_no, why));
                    continue;
                }
            };
            readable += 1;
            selected[fi] = true;
            let gi = match groups.iter().position(|g| g.tag == tag) {
                Some(i) => i,
                None => {
                    groups.push(TagGroup {
                        tag: tag.clone(),
                        merged: like(&h),
                        intervals: 0,
                        per_file: Vec::new(),
                        timeline: Vec::new(),
                    });
                    groups.len() - 1
                }
            };
            let g = &mut groups[gi];
            g.merged
                .add(&h)
                .map_err(|e| format!("{}: merging: {e:?}", path.display()))?;
            g.intervals += 1;
            g.timeline.push(IntervalSummary {
                file: fi,
                start_s: offset,
                length_s: secs(ilh.duration()),
                count: h.len(),
                p50_ns: h.value_at_quantile(0.5),
                p99_ns: h.value_at_quantile(0.99),
                max_ns: h.max(),
            });
            let pf = match g.per_file.iter().position(|(f, _)| *f == fi) {
                Some(i) => i,
                None => {
                    g.per_file.push((fi, like(&h)));
                    g.per_file.len() - 1
                }
            };
            g.per_file[pf]
                .1
                .add(&h)
                .map_err(|e| format!("{}: merging: {e:?}", path.display()))?;
        }
        if readable == 0 {
            if let Some((line_no, why)) = skipped.first() {
                return Err(format!(
                    "{}: not an interval log: no readable interval (line {line_no}: {why})",
                    path.display()
                ));
            }
        }
        if readable == 0 {
            no_intervals.push(fi);
        }
        warnings.extend(skip_warnings(path, &skipped));
        // A reference under a year from the epoch is a log of deltas with no date.
        starts.push(start_time.or(first_abs).map(secs).filter(|t| *t >= YEAR_S));
    }
    let named = |fis: &[usize]| {
        fis.iter()
            .map(|&fi| args.files[fi].display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let read_indexes: Vec<usize> = (0..args.files.len()).filter(|&i| read_files[i]).collect();
    if no_intervals.len() == read_indexes.len() {
        let verb = if no_intervals.len() == 1 {
            "holds"
        } else {
            "hold"
        };
        return Err(format!("{} {verb} no intervals", named(&no_intervals)));
    }
    for &fi in &no_intervals {
        notes.push(format!("{} holds no intervals", args.files[fi].display()));
    }
    if groups.is_empty() {
        let mut why = String::from("no interval matches");
        if let Some(t) = &args.tag {
            let _ = write!(why, " --tag {t}");
        }
        if let Some(f) = args.from {
            let _ = write!(why, " --from {f}");
        }
        if let Some(t) = args.to {
            let _ = write!(why, " --to {t}");
        }
        let _ = write!(why, " in {}", named(&read_indexes));
        if args
            .tag
            .as_ref()
            .is_some_and(|t| !tags_held.contains(&Some(t.clone())))
        {
            let names: Vec<&str> = tags_held.iter().flatten().map(String::as_str).collect();
            match (names.is_empty(), tags_held.contains(&None)) {
                (true, _) => why.push_str(": their intervals are untagged"),
                (false, untagged) => {
                    let _ = write!(why, ": the tags there are {}", names.join(", "));
                    if untagged {
                        why.push_str(" (and untagged intervals)");
                    }
                }
            }
        }
        return Err(why);
    }
    let unselected: Vec<usize> = (0..args.files.len())
        .filter(|fi| read_files[*fi] && !selected[*fi] && !no_intervals.contains(fi))
        .collect();
    if !unselected.is_empty() {
        let shown: Vec<usize> = unselected.iter().copied().take(3).collect();
        let more = match unselected.len() - shown.len() {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        notes.push(format!(
            "no interval selected in {}{more}: left out",
            named(&shown)
        ));
    }
    let runs = runs(&args.files, &starts, &selected);
    Ok(Loaded {
        groups,
        runs,
        warnings,
        notes,
    })
}

/// Skipped lines named one by one in warnings; past these, a count.
const SKIPS_NAMED_MAX: usize = 5;

/// Each line of `bytes`, numbered from 1, with its `\n` when it has one.
fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l))
}

/// What one line holds: an entry, nothing (a comment, the legend, a blank line), or why it
/// cannot be read.
fn entry_of(line: &[u8]) -> Result<Option<LogEntry<'_>>, String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match IntervalLogIterator::new(line).next() {
        None => Ok(None),
        Some(Ok(e)) => Ok(Some(e)),
        Some(Err(_)) => Err("not an interval, a comment or a header".to_string()),
    }
}

/// An interval's histogram from its base64 text.
fn decode(deserializer: &mut Deserializer, encoded: &str) -> Result<Histogram<u64>, String> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| format!("its histogram is not base64 ({e}): cut short?"))?;
    deserializer
        .deserialize(&mut &raw[..])
        .map_err(|e| match e {
            // The first four bytes name the encoding, and they are there: the line is whole.
            DeserializeError::InvalidCookie | DeserializeError::UnsupportedFeature => format!(
                "its histogram is in an encoding other than HdrHistogram's V2 integer one ({e:?}: \
             an older HdrHistogram's log, or a DoubleHistogram's), which this reader does not \
             read; HdrHistogram's Java HistogramLogProcessor does"
            ),
            e => format!("its histogram does not decode ({e:?}): cut short?"),
        })
}

/// `h`, whose values are in `unit`, with its values in nanoseconds, as everything after
/// reading holds them: each recorded value's bucket again at `unit`'s nanoseconds times it,
/// into a histogram that grows to what it records (the log's own bounds may be far past its
/// values: Java's default is `Long.MAX_VALUE`).
fn in_ns(h: Histogram<u64>, unit: Unit) -> Result<Histogram<u64>, String> {
    let per = unit.ns() as u64;
    if per == 1 || h.is_empty() {
        return Ok(h);
    }
    let mut out = Histogram::new(h.sigfig())
        .map_err(|e| format!("its histogram at {} in ns: {e:?}", unit.label()))?;
    for v in h.iter_recorded() {
        let ns = v.value_iterated_to().checked_mul(per).ok_or_else(|| {
            format!(
                "a value of {} {} is past what nanoseconds hold",
                v.value_iterated_to(),
                unit.label()
            )
        })?;
        out.record_n(ns, v.count_at_value())
            .map_err(|e| format!("a value at {} in ns: {e:?}", unit.label()))?;
    }
    Ok(out)
}

/// The warnings for the lines of `path` that were skipped.
fn skip_warnings(path: &Path, skipped: &[(usize, String)]) -> Vec<String> {
    let mut out: Vec<String> = skipped
        .iter()
        .take(SKIPS_NAMED_MAX)
        .map(|(n, why)| format!("{}: line {n} skipped: {why}", path.display()))
        .collect();
    if skipped.len() > SKIPS_NAMED_MAX {
        out.push(format!(
            "{}: {} more unreadable lines skipped",
            path.display(),
            skipped.len() - SKIPS_NAMED_MAX
        ));
    }
    out
}

/// The run a file's name says it belongs to, and whether it is one rotation of it:
/// `bundle-relay.1764460800.00003.hlog` is a rotation of `bundle-relay.1764460800`, `load.hlog`
/// is the whole of `load`.
fn run_name(path: &Path) -> (String, bool) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let stem = name.strip_suffix(".hlog").unwrap_or(&name);
    match stem.rsplit_once('.') {
        Some((run, seq))
            if !run.is_empty() && seq.len() == 5 && seq.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (run.to_string(), true)
        }
        _ => (stem.to_string(), false),
    }
}

/// Groups the files with a selected interval (`selected[i]`) into runs: the same run name and
/// the same start. Runs whose names collide (the same file name in two folders) are told apart
/// by their folder, then by a number.
fn runs(files: &[PathBuf], starts: &[Option<f64>], selected: &[bool]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    let mut keys: Vec<(String, Option<f64>, Option<PathBuf>)> = Vec::new();
    for (fi, path) in files.iter().enumerate().filter(|(fi, _)| selected[*fi]) {
        let (name, rotated) = run_name(path);
        // Rotations share a run with their siblings in one folder; any other file is its own.
        let home = if rotated {
            path.parent().map(Path::to_path_buf)
        } else {
            Some(path.clone())
        };
        let key = (name.clone(), starts[fi], home);
        match keys.iter().position(|k| *k == key) {
            Some(i) => out[i].files.push(fi),
            None => {
                keys.push(key);
                out.push(Run {
                    name,
                    files: vec![fi],
                    start_epoch_s: starts[fi],
                });
            }
        }
    }
    // Counted on the names before any is changed: renaming the first of two would leave the
    // second without a clash, and without its folder.
    let names: Vec<String> = out.iter().map(|r| r.name.clone()).collect();
    for i in 0..out.len() {
        let clashes = names.iter().filter(|n| **n == names[i]).count();
        if clashes > 1 {
            let folder = files[out[i].files[0]]
                .parent()
                .and_then(Path::file_name)
                .map(|d| d.to_string_lossy().into_owned());
            if let Some(d) = folder {
                out[i].name = format!("{d}/{}", out[i].name);
            }
        }
    }
    for i in 0..out.len() {
        let before = out[..i].iter().filter(|r| r.name == out[i].name).count();
        if before > 0 {
            out[i].name = format!("{} #{}", out[i].name, before + 1);
        }
    }
    out
}

pub fn display_files<'a>(files: impl IntoIterator<Item = &'a PathBuf>) -> String {
    files
        .into_iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
