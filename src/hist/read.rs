//! Reading HdrHistogram interval logs and selecting their intervals: this relay's (tagged, one
//! tag per histogram) and bench-load's (untagged) alike. Not the output.
//!
//! Time: `--from`/`--to` are seconds since each log's start: its `StartTime` header if it has
//! one, else its first interval. An interval is taken when its start lies in `[from, to)`.
//! Interval timestamps are read as the Java `HistogramLogReader` reads them: deltas from
//! `BaseTime` when there is one; deltas from `StartTime` when they are more than a year
//! smaller than it; seconds since the epoch otherwise.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

use super::args::HistArgs;

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
}

fn empty() -> Histogram<u64> {
    // Auto-resizing: bench-load's logs reach an hour, the relay's a minute.
    Histogram::new(3).expect("3 significant figures")
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Reads `files` and merges the intervals that `args` selects, grouped by tag in first-seen
/// order.
pub fn load(args: &HistArgs) -> Result<Vec<TagGroup>, String> {
    if let (Some(f), Some(t)) = (args.from, args.to) {
        if t <= f {
            return Err(format!("--to {t} must be greater than --from {f}"));
        }
    }
    let mut groups: Vec<TagGroup> = Vec::new();
    let mut deserializer = Deserializer::new();
    for (fi, path) in args.files.iter().enumerate() {
        let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let mut start_time: Option<f64> = None;
        let mut base_time: Option<f64> = None;
        let mut first_abs: Option<f64> = None;
        for entry in IntervalLogIterator::new(&bytes) {
            let entry =
                entry.map_err(|e| format!("{}: not an interval log: {e:?}", path.display()))?;
            let ilh = match entry {
                LogEntry::StartTime(t) => {
                    start_time = Some(secs(t));
                    continue;
                }
                LogEntry::BaseTime(t) => {
                    base_time = Some(secs(t));
                    continue;
                }
                LogEntry::Interval(ilh) => ilh,
            };
            let ts = secs(ilh.start_timestamp());
            let abs = match (base_time, start_time) {
                (Some(b), _) => b + ts,
                (None, Some(s)) if ts < s - YEAR_S => s + ts,
                _ => ts,
            };
            let reference = start_time.unwrap_or_else(|| *first_abs.get_or_insert(abs));
            let offset = abs - reference;
            if args.from.is_some_and(|f| offset < f) || args.to.is_some_and(|t| offset >= t) {
                continue;
            }
            let tag = ilh.tag().map(|t| t.as_str().to_string());
            if args
                .tag
                .as_ref()
                .is_some_and(|want| tag.as_ref() != Some(want))
            {
                continue;
            }
            let raw = base64::engine::general_purpose::STANDARD
                .decode(ilh.encoded_histogram())
                .map_err(|e| {
                    format!("{}: interval at {ts:.3} s: bad base64: {e}", path.display())
                })?;
            let h: Histogram<u64> = deserializer
                .deserialize(&mut &raw[..])
                .map_err(|e| format!("{}: interval at {ts:.3} s: {e:?}", path.display()))?;
            let gi = match groups.iter().position(|g| g.tag == tag) {
                Some(i) => i,
                None => {
                    groups.push(TagGroup {
                        tag: tag.clone(),
                        merged: empty(),
                        intervals: 0,
                        per_file: Vec::new(),
                    });
                    groups.len() - 1
                }
            };
            let g = &mut groups[gi];
            g.merged
                .add(&h)
                .map_err(|e| format!("{}: merging: {e:?}", path.display()))?;
            g.intervals += 1;
            let pf = match g.per_file.iter().position(|(f, _)| *f == fi) {
                Some(i) => i,
                None => {
                    g.per_file.push((fi, empty()));
                    g.per_file.len() - 1
                }
            };
            g.per_file[pf]
                .1
                .add(&h)
                .map_err(|e| format!("{}: merging: {e:?}", path.display()))?;
        }
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
        let _ = write!(why, " in {}", display_files(&args.files));
        return Err(why);
    }
    Ok(groups)
}

pub fn display_files(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
