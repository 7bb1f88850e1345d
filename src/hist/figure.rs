//! What the two pictures show, decided from the logs read: their panels, each panel's series
//! and scales, the titles and the run's facts. Not how they look (`plot` chooses colours,
//! marks and places).
//!
//! Panels go by kind of measure, read from the tag: `relay_overhead`, `delivery_latency` and
//! `limiter_wait` each have one, the `upstream_round_trip.<region>` tags share one (a series
//! per region), untagged intervals (bench-load's) have one. A tag `kind.member` joins the
//! panel of `kind` as series `member`.
//!
//! - [`distribution`]: one panel per kind; one percentile distribution per tag and run, each
//!   merged over that run's selected intervals; latency on a log scale of its own per panel,
//!   so an 860 ms limiter wait leaves a 20 µs overhead its own decades, not the axis's floor.
//! - [`over_time`]: one panel per tag and run; p50, p99 and max of each interval at the
//!   interval's middle, on one time axis for all panels of a run.
//!
//! Legends name a series by what tells it apart in its panel: the region, and the run when
//! several were read (by the part of its name the others lack; a relay run by its start time);
//! the file names appear once, in the title.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::args::HistArgs;
use super::axis::{DECADES_MAX, LatencyAxis, PercentileAxis, TimeAxis};
use super::format;
use super::read::{IntervalSummary, Loaded, TagGroup};
use crate::metrics::percentile_rows;

/// Which picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Distribution,
    OverTime,
}

pub struct Figure {
    pub kind: Kind,
    pub title: String,
    /// The run's facts: when, how long, how many intervals and values, what was selected.
    pub facts: String,
    pub panels: Vec<Panel>,
}

/// The x scale of a panel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum XScale {
    Percentile(PercentileAxis),
    Time(TimeAxis),
}

pub struct Panel {
    pub title: String,
    pub x: XScale,
    pub y: LatencyAxis,
    pub series: Vec<Series>,
    /// Said in the panel when it has nothing to draw.
    pub note: Option<String>,
}

/// How a series is told apart: the n-th of its panel (distributions), or which percentile of
/// each interval it is (over time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ink {
    Nth(usize),
    P50,
    P99,
    Max,
}

pub struct Series {
    pub label: String,
    pub ink: Ink,
    /// (x, latency ns); x is 1/(1−p) or seconds. A NaN x breaks the line (a gap in the log).
    pub points: Vec<(f64, f64)>,
    /// The distribution's p50, p99, max and count, for its legend.
    pub summary: Option<Summary>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub count: u64,
}

impl Summary {
    fn of(h: &Histogram<u64>) -> Summary {
        Summary {
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            max_ns: h.max(),
            count: h.len(),
        }
    }
}

/// A kind of measure and the tag groups that belong to it.
struct Measure {
    key: String,
    /// "relay overhead", "upstream round trip".
    title: String,
    /// (index into the groups, member name: the part of the tag after the kind).
    members: Vec<(usize, Option<String>)>,
}

/// Kind of measure, its title, and the member name of `tag`.
fn measure_of(tag: Option<&str>) -> (String, String, Option<String>) {
    match tag {
        None => (String::new(), "latency".into(), None),
        Some(t) => {
            let (kind, member) = match t.split_once('.') {
                Some((k, m)) => (k, Some(m.to_string())),
                None => (t, None),
            };
            (kind.to_string(), kind.replace('_', " "), member)
        }
    }
}

fn measures(groups: &[TagGroup]) -> Vec<Measure> {
    let mut out: Vec<Measure> = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let (key, title, member) = measure_of(g.tag.as_deref());
        match out.iter_mut().find(|m| m.key == key) {
            Some(m) => m.members.push((gi, member)),
            None => out.push(Measure {
                key,
                title,
                members: vec![(gi, member)],
            }),
        }
    }
    out
}

/// The panel title of a measure: what it is and how many values it holds.
fn measure_title(m: &Measure, values: u64) -> String {
    let mut t = m.title.clone();
    if m.key.is_empty() {
        t.push_str(" (untagged)");
    }
    let named = m.members.iter().filter(|(_, n)| n.is_some()).count();
    if named > 1 {
        if m.key == "upstream_round_trip" {
            let _ = write!(t, " by region ({named})");
        } else {
            let _ = write!(t, " ({named} tags)");
        }
    }
    let _ = write!(t, " · {}", format::counted(values, "value"));
    t
}

/// A group's histogram per run (runs in the order read), merged over the run's files.
fn per_run(loaded: &Loaded, g: &TagGroup) -> Vec<(usize, Histogram<u64>)> {
    let mut out: Vec<(usize, Histogram<u64>)> = Vec::new();
    for (file, h) in &g.per_file {
        let run = loaded.run_of(*file);
        match out.iter_mut().find(|(r, _)| *r == run) {
            Some((_, acc)) => acc.add(h).expect("auto-resizing histograms merge"),
            None => out.push((run, h.clone())),
        }
    }
    out.sort_by_key(|(r, _)| *r);
    out
}

/// The percentile distribution of `h` as (1/(1−p), ns) points, the rows of the printed table
/// (HdrHistogram's 5 ticks per half distance), without the final 100 % point (its 1/(1−p) is
/// infinite). Rows past the axis's last decade (more than 10 million values) end the curve
/// at that decade with the max, so the slowest values are drawn, not dropped.
pub fn percentile_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let cap = 10f64.powi(DECADES_MAX as i32);
    let mut points = Vec::new();
    let mut beyond = false;
    for r in percentile_rows(h, 5)
        .into_iter()
        .take_while(|r| r.quantile < 1.0)
    {
        if r.inverse_tail <= cap {
            points.push((r.inverse_tail, r.value as f64));
        } else {
            beyond = true;
        }
    }
    if beyond {
        points.push((cap, h.highest_equivalent(h.max()) as f64));
    }
    points
}

/// One panel per kind of measure, one distribution per tag and run.
pub fn distribution(loaded: &Loaded, args: &HistArgs) -> Figure {
    let run_labels = run_labels(loaded);
    let mut panels = Vec::new();
    for m in measures(&loaded.groups) {
        let mut pieces = Vec::new();
        for (gi, member) in &m.members {
            for (run, h) in per_run(loaded, &loaded.groups[*gi]) {
                pieces.push((run, member.clone(), h));
            }
        }
        let several_runs = pieces.iter().any(|p| p.0 != pieces[0].0);
        let mut series = Vec::new();
        let mut values = 0;
        for (i, (run, member, h)) in pieces.iter().enumerate() {
            let mut parts = Vec::new();
            if several_runs {
                parts.push(run_labels[*run].clone());
            }
            if let Some(n) = member {
                parts.push(n.clone());
            }
            let label = if parts.is_empty() {
                m.title.clone()
            } else {
                parts.join(" · ")
            };
            values += h.len();
            series.push(Series {
                label,
                ink: Ink::Nth(i),
                points: percentile_points(h),
                summary: Some(Summary::of(h)),
            });
        }
        let x_max = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .fold(1.0, f64::max);
        let x = PercentileAxis::fit(x_max);
        for s in &mut series {
            // Values all in one bucket leave a single row before 100 %, at 0 %, which is
            // on the axis line: that value is every percentile, so it runs level to the end.
            if let [(x0, ns)] = s.points[..] {
                s.points.push((x0.max(x.x_max()), ns));
            }
        }
        let y = LatencyAxis::fit(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
        panels.push(Panel {
            title: measure_title(&m, values),
            x: XScale::Percentile(x),
            y,
            note: (values == 0).then(|| "no values recorded".to_string()),
            series,
        });
    }
    Figure {
        kind: Kind::Distribution,
        title: format!("Latency by percentile: {}", runs_line(loaded, args)),
        facts: facts(loaded, args),
        panels,
    }
}

/// Points of one percentile of each interval, at the interval's middle; an interval with no
/// values, or time missing between two intervals, breaks the line.
fn interval_points(
    intervals: &[&IntervalSummary],
    pick: impl Fn(&IntervalSummary) -> u64,
) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut end_s: Option<f64> = None;
    for iv in intervals {
        let gap = end_s.is_some_and(|e| iv.start_s > e + iv.length_s * 0.5);
        if iv.count == 0 || gap {
            out.push((f64::NAN, 0.0));
        }
        end_s = Some(iv.start_s + iv.length_s);
        if iv.count > 0 {
            out.push((iv.start_s + iv.length_s / 2.0, pick(iv) as f64));
        }
    }
    out
}

/// One panel per tag and run: each interval's p50, p99 and max.
pub fn over_time(loaded: &Loaded, args: &HistArgs) -> Figure {
    let times: Vec<TimeAxis> = (0..loaded.runs.len())
        .map(|ri| {
            let (from_s, to_s) = span_of(loaded, |iv| loaded.run_of(iv.file) == ri);
            TimeAxis::new(from_s.min(to_s), to_s)
        })
        .collect();
    let several_runs = loaded.runs.len() > 1;
    let run_labels = run_labels(loaded);
    let mut panels = Vec::new();
    let mut empty = Vec::new();
    for m in measures(&loaded.groups) {
        for (gi, member) in &m.members {
            let g = &loaded.groups[*gi];
            for ri in 0..loaded.runs.len() {
                let mut intervals: Vec<&IntervalSummary> = g
                    .timeline
                    .iter()
                    .filter(|iv| loaded.run_of(iv.file) == ri)
                    .collect();
                if intervals.is_empty() {
                    continue;
                }
                let values: u64 = intervals.iter().map(|iv| iv.count).sum();
                let mut title = m.title.clone();
                if let Some(n) = member {
                    let _ = write!(title, " · {n}");
                }
                if several_runs {
                    let _ = write!(title, " · {}", run_labels[ri]);
                }
                if values == 0 {
                    empty.push(title);
                    continue;
                }
                intervals.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
                let _ = write!(
                    title,
                    " · {} in {}",
                    format::counted(values, "value"),
                    format::counted(intervals.len() as u64, "interval")
                );
                let series = vec![
                    Series {
                        label: "p50".into(),
                        ink: Ink::P50,
                        points: interval_points(&intervals, |iv| iv.p50_ns),
                        summary: None,
                    },
                    Series {
                        label: "p99".into(),
                        ink: Ink::P99,
                        points: interval_points(&intervals, |iv| iv.p99_ns),
                        summary: None,
                    },
                    Series {
                        label: "max".into(),
                        ink: Ink::Max,
                        points: interval_points(&intervals, |iv| iv.max_ns),
                        summary: None,
                    },
                ];
                let y = LatencyAxis::fit(
                    series
                        .iter()
                        .flat_map(|s| s.points.iter().filter(|p| !p.0.is_nan()).map(|p| p.1)),
                );
                panels.push(Panel {
                    title,
                    x: XScale::Time(times[ri]),
                    y,
                    series,
                    note: None,
                });
            }
        }
    }
    let mut facts = facts(loaded, args);
    if !empty.is_empty() {
        let _ = write!(facts, " · no values: {}", empty.join(", "));
    }
    Figure {
        kind: Kind::OverTime,
        title: format!("Latency over time: {}", runs_line(loaded, args)),
        facts,
        panels,
    }
}

/// How legends and panel titles tell runs apart: their names less the start and the end all of
/// them share (up to a `.`, `-`, `_` or `/`). What is left of a relay run's name is its start in Unix
/// seconds, shown as the UTC time it is (the date too when the runs span days).
fn run_labels(loaded: &Loaded) -> Vec<String> {
    let names: Vec<&str> = loaded.runs.iter().map(|r| r.name.as_str()).collect();
    if names.len() < 2 {
        return names.iter().map(|n| n.to_string()).collect();
    }
    let mut cut = 0;
    for (i, ch) in names[0].char_indices() {
        let end = i + ch.len_utf8();
        if !names.iter().all(|n| n.get(..end) == Some(&names[0][..end])) {
            break;
        }
        if matches!(ch, '.' | '-' | '_' | '/') {
            cut = end;
        }
    }
    let mut rests: Vec<&str> = names.iter().map(|n| &n[cut..]).collect();
    if rests.iter().any(|r| r.is_empty()) {
        return names.iter().map(|n| n.to_string()).collect();
    }
    // And the end they share, from a separator on: one relay's logs from two hosts' folders
    // are told apart by the folders.
    let mut keep = rests[0].len();
    for (i, ch) in rests[0].char_indices().rev() {
        let tail = &rests[0][i..];
        if !rests.iter().all(|r| r.ends_with(tail)) {
            break;
        }
        if matches!(ch, '.' | '-' | '_' | '/') {
            keep = i;
        }
    }
    let shared_tail = rests[0].len() - keep;
    if rests.iter().all(|r| r.len() > shared_tail) {
        rests = rests.iter().map(|r| &r[..r.len() - shared_tail]).collect();
    }
    let starts: Option<Vec<String>> = rests
        .iter()
        .zip(&loaded.runs)
        .map(|(rest, run)| {
            let secs: f64 = rest.parse::<u64>().ok()? as f64;
            let t0 = run.start_epoch_s.filter(|t| (t - secs).abs() < 1.0)?;
            Some(format::utc(t0))
        })
        .collect();
    match starts {
        Some(s) if s.iter().all(|d| d[..10] == s[0][..10]) => {
            s.iter().map(|d| d[11..].to_string()).collect()
        }
        Some(s) => s,
        None => rests.iter().map(|r| r.to_string()).collect(),
    }
}

/// Runs shown in a title at most; the rest are counted.
const TITLE_RUNS_MAX: usize = 3;

/// The files read, by run: "load.hlog", "bundle-relay.1764460800.*.hlog (4 files)", "a.hlog,
/// b.hlog and 2 more".
fn runs_line(loaded: &Loaded, args: &HistArgs) -> String {
    let named: Vec<String> = loaded
        .runs
        .iter()
        .take(TITLE_RUNS_MAX)
        .map(|r| match r.files.len() {
            1 => {
                let p = &args.files[r.files[0]];
                p.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| p.display().to_string())
            }
            n => format!("{}.*.hlog ({n} files)", r.name),
        })
        .collect();
    let mut s = named.join(", ");
    if loaded.runs.len() > TITLE_RUNS_MAX {
        let _ = write!(s, " and {} more", loaded.runs.len() - TITLE_RUNS_MAX);
    }
    s
}

/// The first start and the last end, seconds since their logs' start, of the intervals `pick`
/// takes.
fn span_of(loaded: &Loaded, pick: impl Fn(&IntervalSummary) -> bool) -> (f64, f64) {
    let mut span = (f64::INFINITY, f64::NEG_INFINITY);
    for iv in loaded
        .groups
        .iter()
        .flat_map(|g| &g.timeline)
        .filter(|iv| pick(iv))
    {
        span.0 = span.0.min(iv.start_s);
        span.1 = span.1.max(iv.start_s + iv.length_s);
    }
    span
}

/// When a run's selected intervals ran: "2025-11-30 00:00:01 – 00:00:04 UTC (3 s)", or "3 s
/// to 7 s into the log" when the log gives no date.
fn when(loaded: &Loaded, run: usize) -> String {
    let (first, last) = span_of(loaded, |iv| loaded.run_of(iv.file) == run);
    match loaded.runs[run].start_epoch_s {
        Some(t0) => {
            let (a, b) = (format::utc(t0 + first), format::utc(t0 + last));
            let b_short = if a[..10] == b[..10] { &b[11..] } else { &b[..] };
            format!("{a} – {b_short} UTC ({})", format::span(last - first))
        }
        None => format!(
            "{} to {} into the log",
            format::span(first),
            format::span(last)
        ),
    }
}

/// When the selected intervals ran (each run's own span when there are several), how many
/// there were and how long each, how many values and histograms they hold, and what was
/// selected.
fn facts(loaded: &Loaded, args: &HistArgs) -> String {
    let mut out = match loaded.runs.len() {
        1 => when(loaded, 0),
        n if n <= TITLE_RUNS_MAX => (0..n)
            .map(|r| format!("{}: {}", loaded.runs[r].name, when(loaded, r)))
            .collect::<Vec<_>>()
            .join("; "),
        n => {
            let spans: Vec<f64> = (0..n)
                .map(|r| {
                    let (a, b) = span_of(loaded, |iv| loaded.run_of(iv.file) == r);
                    b - a
                })
                .collect();
            let (lo, hi) = (
                spans.iter().copied().fold(f64::INFINITY, f64::min),
                spans.iter().copied().fold(0.0, f64::max),
            );
            format!("{n} runs of {} to {}", format::span(lo), format::span(hi))
        }
    };
    let all: Vec<&IntervalSummary> = loaded.groups.iter().flat_map(|g| &g.timeline).collect();
    let intervals = loaded.groups.iter().map(|g| g.intervals).max().unwrap_or(0);
    let mut lengths: Vec<f64> = all.iter().map(|i| i.length_s).collect();
    lengths.sort_by(f64::total_cmp);
    let length = lengths.get(lengths.len() / 2).copied().unwrap_or(0.0);
    let _ = write!(
        out,
        " · {} of {}",
        format::counted(intervals as u64, "interval"),
        format::span(length)
    );
    let values: u64 = loaded.groups.iter().map(|g| g.merged.len()).sum();
    let tags = loaded.groups.iter().filter(|g| g.tag.is_some()).count();
    let _ = write!(out, " · {}", format::counted(values, "value"));
    if tags > 0 {
        let _ = write!(out, " in {}", format::counted(tags as u64, "tag"));
    }
    let mut picked = Vec::new();
    if let Some(f) = args.from {
        picked.push(format!("from {f} s"));
    }
    if let Some(t) = args.to {
        picked.push(format!("to {t} s"));
    }
    if let Some(t) = &args.tag {
        picked.push(format!("tag {t}"));
    }
    if !picked.is_empty() {
        let _ = write!(out, " · selected {}", picked.join(", "));
    }
    out
}
