//! `bundle-relay hist --plot` and `--plot-over-time`, judged by what a reader of the PNG sees:
//! one panel per kind of measure, a colour of its own per series within a panel, log-scaled
//! axes, legends that name the region (and the files once, in the title), a dot per interval
//! over time. The PNGs are decoded with the `png` crate, not by the code that wrote them.

use crate::hist_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bundle_relay::hist::canvas::{Canvas, TextStyle};
use bundle_relay::hist::{self, figure, plot};
use bundle_relay::metrics::Metrics;
use bundle_relay::metrics::hlog::{HlogConfig, HlogWriter};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hist_support::{Cli, args, one_interval_log, tempdir};

const T0_EPOCH_S: u64 = 1_764_460_800;

/// The relay's own logs, rotated every interval: four one-second intervals of overhead in
/// microseconds, limiter waits of zero up to 860 ms, and a round trip per region an order of
/// magnitude apart (frankfurt 2–5 ms, ny 33–43 ms, tokyo 110–170 ms, tails clear of the grid
/// lines), no delivery.
fn relay_logs(dir: &Path) -> Vec<PathBuf> {
    relay_logs_from(dir, T0_EPOCH_S)
}

/// [`relay_logs`] of a relay started at `t0_epoch_s`.
fn relay_logs_from(dir: &Path, t0_epoch_s: u64) -> Vec<PathBuf> {
    let regions = vec!["frankfurt".to_string(), "ny".into(), "tokyo".into()];
    let m = Arc::new(Metrics::new(&regions, 1));
    let tm = m.thread(0);
    let t0 = UNIX_EPOCH + Duration::from_secs(t0_epoch_s);
    let cfg = HlogConfig {
        rotate_bytes: 1,
        ..HlogConfig::new(dir, Duration::from_secs(1))
    };
    let mut w = HlogWriter::new(Arc::clone(&m), cfg, t0).unwrap();
    for s in 1..=4u64 {
        for i in 0..200u64 {
            tm.record_overhead_ns(8_000 + i * 150 + s * 2_000);
            tm.record_limiter_wait_ns(if i % 2 == 0 { 0 } else { i * 4_300_000 });
            tm.record_upstream_rtt_ns(0, 2_200_000 + i * 12_000);
            tm.record_upstream_rtt_ns(1, 33_000_000 + i * 50_000);
            tm.record_upstream_rtt_ns(2, 110_000_000 + i * 300_000);
        }
        w.tick(t0 + Duration::from_secs(s)).unwrap();
    }
    w.files().map(Path::to_path_buf).collect()
}

/// A bench-load style log (untagged, StartTime, one-second intervals): interval `i` holds 90
/// values of 20 µs, 9 of 200 µs and one of `(i + 1)` ms, so p50, p99 and max differ; all
/// times `scale`.
fn spread_log(path: &Path, intervals: u64, scale: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    let mut ser = V2DeflateSerializer::new();
    let mut w = IntervalLogWriterBuilder::new()
        .with_start_time(UNIX_EPOCH + Duration::from_secs(T0_EPOCH_S))
        .with_max_value_divisor(1e6)
        .begin_log_with(&mut f, &mut ser)
        .unwrap();
    for i in 0..intervals {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record_n(20_000 * scale, 90).unwrap();
        h.record_n(200_000 * scale, 9).unwrap();
        h.record((i + 1) * 1_000_000 * scale).unwrap();
        w.write_histogram(&h, Duration::from_secs(i), Duration::from_secs(1), None)
            .unwrap();
    }
}

struct Image {
    w: i32,
    h: i32,
    rgb: Vec<u8>,
}

impl Image {
    fn read(path: &Path) -> Image {
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut rgb).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        rgb.truncate(info.buffer_size());
        Image {
            w: info.width as i32,
            h: info.height as i32,
            rgb,
        }
    }

    fn at(&self, x: i32, y: i32) -> [u8; 3] {
        if x < 0 || y < 0 || x >= self.w || y >= self.h {
            return [255, 255, 255];
        }
        let i = ((y * self.w + x) * 3) as usize;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// The plots: rectangles with black axes left and bottom and a `plot::FRAME` outline top
    /// and right, found by where the top of the frame meets the left axis.
    fn frames(&self) -> Vec<Frame> {
        let is = |x, y| self.at(x, y) == plot::FRAME;
        let mut out = Vec::new();
        for y in 0..self.h {
            for x in 0..self.w {
                if !is(x, y) || self.at(x - 1, y) != [0, 0, 0] || is(x, y - 1) {
                    continue;
                }
                if !(1..40).all(|d| is(x + d, y)) {
                    continue;
                }
                let mut x1 = x;
                while is(x1 + 1, y) {
                    x1 += 1;
                }
                let mut y1 = y;
                while is(x1, y1 + 1) {
                    y1 += 1;
                }
                // Inside: right of the left axis, below the top line, left of the right line,
                // above the bottom axis.
                out.push(Frame {
                    x0: x - 1,
                    y0: y,
                    x1,
                    y1: y1 + 1,
                });
            }
        }
        out
    }

    /// Pixels of exactly `c` strictly inside `f`.
    fn count(&self, f: &Frame, c: [u8; 3]) -> usize {
        let mut n = 0;
        for y in f.y0 + 1..f.y1 {
            for x in f.x0 + 1..f.x1 {
                n += usize::from(self.at(x, y) == c);
            }
        }
        n
    }

    /// Rows inside `f` that are mostly `c`: the horizontal grid lines of that colour.
    fn rows_of(&self, f: &Frame, c: [u8; 3]) -> Vec<i32> {
        (f.y0 + 1..f.y1)
            .filter(|&y| {
                let n = (f.x0 + 1..f.x1).filter(|&x| self.at(x, y) == c).count();
                n * 2 > (f.x1 - f.x0) as usize
            })
            .collect()
    }

    /// Columns inside `f` that are mostly `c`: the vertical grid lines of that colour.
    fn columns_of(&self, f: &Frame, c: [u8; 3]) -> Vec<i32> {
        (f.x0 + 1..f.x1)
            .filter(|&x| {
                let n = (f.y0 + 1..f.y1).filter(|&y| self.at(x, y) == c).count();
                n * 2 > (f.y1 - f.y0) as usize
            })
            .collect()
    }

    /// Blobs of exactly `c` inside `f` (4-connected), as their centres' x, left to right.
    fn blobs(&self, f: &Frame, c: [u8; 3]) -> Vec<f64> {
        let mut seen = vec![false; (self.w * self.h) as usize];
        let mut out = Vec::new();
        for y in f.y0 + 1..f.y1 {
            for x in f.x0 + 1..f.x1 {
                if seen[(y * self.w + x) as usize] || self.at(x, y) != c {
                    continue;
                }
                let (mut sum, mut n, mut todo) = (0i64, 0i64, vec![(x, y)]);
                seen[(y * self.w + x) as usize] = true;
                while let Some((px, py)) = todo.pop() {
                    sum += i64::from(px);
                    n += 1;
                    for (qx, qy) in [(px + 1, py), (px - 1, py), (px, py + 1), (px, py - 1)] {
                        if qx > f.x0 && qx < f.x1 && qy > f.y0 && qy < f.y1 {
                            let k = (qy * self.w + qx) as usize;
                            if !seen[k] && self.at(qx, qy) == c {
                                seen[k] = true;
                                todo.push((qx, qy));
                            }
                        }
                    }
                }
                out.push(sum as f64 / n as f64);
            }
        }
        out.sort_by(f64::total_cmp);
        out
    }

    /// How often `s`, set in `style` as the plots set it, appears in the image, pixel for
    /// pixel.
    fn occurrences(&self, s: &str, style: TextStyle) -> usize {
        let mut c = Canvas::new(2_000, 60);
        c.text(4, 4, s, style);
        let ink: Vec<(i32, i32)> = (0..60)
            .flat_map(|y| (0..2_000).map(move |x| (x, y)))
            .filter(|&(x, y)| c.pixel(x as u32, y as u32) != [255, 255, 255])
            .collect();
        let (x0, y0) = (
            ink.iter().map(|p| p.0).min().unwrap(),
            ink.iter().map(|p| p.1).min().unwrap(),
        );
        let (x1, y1) = (
            ink.iter().map(|p| p.0).max().unwrap(),
            ink.iter().map(|p| p.1).max().unwrap(),
        );
        let first = ink[0];
        let first_colour = c.pixel(first.0 as u32, first.1 as u32);
        let mut n = 0;
        for y in 0..self.h - (y1 - y0) {
            for x in 0..self.w - (x1 - x0) {
                // Cheap rejection on the template's first inked pixel.
                if self.at(x + first.0 - x0, y + first.1 - y0) != first_colour {
                    continue;
                }
                let same = (y0..=y1).all(|ty| {
                    (x0..=x1).all(|tx| {
                        self.at(x + tx - x0, y + ty - y0) == c.pixel(tx as u32, ty as u32)
                    })
                });
                n += usize::from(same);
            }
        }
        n
    }
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    x0: i32,
    y0: i32,
    x1: i32,
    y1: i32,
}

/// Equal within a pixel (grid lines are placed on whole pixels).
fn evenly_spaced(lines: &[i32]) -> bool {
    let gaps: Vec<i32> = lines.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.iter().all(|g| (g - gaps[0]).abs() <= 1)
}

#[test]
fn a_relay_log_plots_a_panel_per_kind_of_measure_with_a_colour_per_region() {
    let dir = tempdir("hist-plot-relay");
    let files = relay_logs(&dir);
    assert_eq!(files.len(), 4);
    let png = dir.join("relay.png");
    let mut a = args(files.clone());
    a.plot = Some(png.clone());
    hist::run(&a).unwrap();
    let img = Image::read(&png);
    // Relay overhead, delivery latency (empty, said so), limiter wait, upstream round trip.
    let frames = img.frames();
    assert_eq!(frames.len(), 4, "{frames:?}");
    assert_eq!((img.w as u32, img.h as u32), {
        plot::image_size_px(figure::Kind::Distribution, 4)
    });
    let [overhead, delivery, limiter, upstream] = [frames[0], frames[1], frames[2], frames[3]];
    assert!(
        frames.windows(2).all(|w| w[0].y1 < w[1].y0),
        "one panel per row"
    );

    // Three regions, three colours of their own, and no fourth.
    for (i, c) in plot::PALETTE.iter().take(3).enumerate() {
        let n = img.count(&upstream, *c);
        assert!(n > 300, "region {i}: {n} pixels of {c:?}");
    }
    assert_eq!(img.count(&upstream, plot::PALETTE[3]), 0);
    // One series per single-measure panel, none where nothing was recorded.
    assert!(img.count(&overhead, plot::PALETTE[0]) > 300);
    assert_eq!(img.count(&overhead, plot::PALETTE[1]), 0);
    assert_eq!(img.count(&delivery, plot::PALETTE[0]), 0);
    assert!(img.count(&limiter, plot::PALETTE[0]) > 300);

    // The microsecond overhead has an axis of its own: its curve climbs through a good part of
    // the panel instead of lying along the bottom under an 860 ms limiter wait.
    let rows: Vec<i32> = (overhead.y0..overhead.y1)
        .filter(|&y| (overhead.x0..overhead.x1).any(|x| img.at(x, y) == plot::PALETTE[0]))
        .collect();
    let climb = rows.last().unwrap() - rows[0];
    assert!(
        climb * 4 > overhead.y1 - overhead.y0,
        "overhead spans {climb} of {} px",
        overhead.y1 - overhead.y0
    );

    // Log latency axis: decade lines evenly spaced, the eight lines between two decades
    // closer and closer together (2, 3, … 9 × the decade).
    let majors = img.rows_of(&upstream, plot::GRID_MAJOR);
    assert!(majors.len() >= 2, "{majors:?}");
    assert!(evenly_spaced(&majors), "{majors:?}");
    let minors: Vec<i32> = img
        .rows_of(&upstream, plot::GRID_MINOR)
        .into_iter()
        .filter(|&y| y > majors[0] && y < majors[1])
        .collect();
    assert_eq!(minors.len(), 8, "{minors:?}");
    // Rows grow downwards: from the upper decade down, 9× is nearest it, 2× farthest.
    let mut ladder = vec![majors[0]];
    ladder.extend(&minors);
    ladder.push(majors[1]);
    let gaps: Vec<i32> = ladder.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.windows(2).all(|g| g[0] <= g[1]), "{gaps:?}");
    assert!(gaps[0] < *gaps.last().unwrap(), "{gaps:?}");
    // Log percentile axis: 0 %, 90 %, 99 % (and on) evenly spaced.
    let decades = img.columns_of(&overhead, plot::GRID_MAJOR);
    assert!(decades.len() >= 3, "{decades:?}");
    assert!(evenly_spaced(&decades), "{decades:?}");

    // Legends name the regions as they are spelt; the files are named once, in the title.
    for region in ["frankfurt", "ny", "tokyo"] {
        assert_eq!(img.occurrences(region, plot::LEGEND), 1, "{region}");
    }
    let title = format!("Latency by percentile: bundle-relay.{T0_EPOCH_S}.*.hlog (4 files)");
    assert_eq!(img.occurrences(&title, plot::TITLE), 1);
    assert_eq!(img.occurrences("bundle-relay", plot::LEGEND), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_with_no_selected_interval_is_left_out_of_the_title_and_facts() {
    let dir = tempdir("hist-plot-unselected");
    // The relay's run has intervals at 0 to 3 s; this one only at 0 s, before --from 1.
    let early = dir.join("early.hlog");
    one_interval_log(&early, &[10_000]);
    let mut files = relay_logs(&dir);
    files.push(early.clone());
    let mut a = args(files);
    a.from = Some(1.0);
    let loaded = hist::read(&a).unwrap();
    let f = figure::distribution(&loaded, &a);
    assert_eq!(
        f.title,
        format!("Latency by percentile: bundle-relay.{T0_EPOCH_S}.*.hlog (3 files)"),
        "the relay's first file holds only the interval at 0 s"
    );
    assert!(
        f.facts
            .starts_with("2025-11-30 00:00:01 – 00:00:04 UTC (3 s) · 3 intervals of 1 s"),
        "{}",
        f.facts
    );
    assert!(
        loaded
            .notes
            .iter()
            .any(|n| n.starts_with("no interval selected in ")
                && n.contains("early.hlog")
                && n.ends_with(": left out")),
        "{:?}",
        loaded.notes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_title_gives_the_runs_facts() {
    let dir = tempdir("hist-plot-facts");
    let mut a = args(relay_logs(&dir));
    a.from = Some(1.0);
    let loaded = hist::read(&a).unwrap();
    let f = figure::distribution(&loaded, &a);
    // The first of the four files holds only the interval at 0 s, before --from.
    assert_eq!(
        f.title,
        format!("Latency by percentile: bundle-relay.{T0_EPOCH_S}.*.hlog (3 files)")
    );
    // Intervals at 1, 2 and 3 s after the start: 200 values each of overhead, limiter wait and
    // three round trips.
    assert_eq!(
        f.facts,
        "2025-11-30 00:00:01 – 00:00:04 UTC (3 s) · 3 intervals of 1 s · 3,000 values in 6 \
         tags · selected from 1 s"
    );
    let titles: Vec<&str> = f.panels.iter().map(|p| p.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "relay overhead · 600 values",
            "delivery latency · 0 values",
            "limiter wait · 600 values",
            "upstream round trip by region (3) · 1,800 values"
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn two_logs_share_a_panel_and_their_legend_names_each_by_its_file() {
    let dir = tempdir("hist-plot-two");
    let (a_log, b_log) = (dir.join("before.hlog"), dir.join("after.hlog"));
    spread_log(&a_log, 5, 1);
    spread_log(&b_log, 8, 3);
    let png = dir.join("two.png");
    let mut a = args(vec![a_log, b_log]);
    a.plot = Some(png.clone());
    hist::run(&a).unwrap();
    let img = Image::read(&png);
    let frames = img.frames();
    assert_eq!(frames.len(), 1);
    assert!(img.count(&frames[0], plot::PALETTE[0]) > 300);
    assert!(img.count(&frames[0], plot::PALETTE[1]) > 300);
    assert_eq!(img.occurrences("before", plot::LEGEND), 1);
    assert_eq!(img.occurrences("after", plot::LEGEND), 1);
    assert_eq!(img.occurrences("BEFORE", plot::LEGEND), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn relay_runs_compared_are_named_by_when_they_started() {
    let dir = tempdir("hist-plot-runs");
    let mut files = relay_logs_from(&dir, T0_EPOCH_S);
    files.extend(relay_logs_from(&dir, T0_EPOCH_S + 600));
    let a = args(files);
    let loaded = hist::read(&a).unwrap();
    assert_eq!(loaded.runs.len(), 2);
    let f = figure::distribution(&loaded, &a);
    let labels: Vec<&str> = f.panels[3]
        .series
        .iter()
        .map(|s| s.label.as_str())
        .collect();
    assert_eq!(
        labels,
        [
            "00:00:00 · frankfurt",
            "00:10:00 · frankfurt",
            "00:00:00 · ny",
            "00:10:00 · ny",
            "00:00:00 · tokyo",
            "00:10:00 · tokyo"
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn over_time_draws_p50_p99_and_a_max_dot_per_interval() {
    let dir = tempdir("hist-plot-time");
    let log = dir.join("load.hlog");
    spread_log(&log, 12, 1);
    let png = dir.join("time.png");
    let mut a = args(vec![log]);
    a.plot_over_time = Some(png.clone());
    hist::run(&a).unwrap();
    let img = Image::read(&png);
    let frames = img.frames();
    assert_eq!(frames.len(), 1);
    let f = frames[0];
    // One max dot per interval, at evenly spaced times (each interval lasts one second).
    let dots = img.blobs(&f, plot::MAX_COLOUR);
    assert_eq!(dots.len(), 12, "{dots:?}");
    let gaps: Vec<f64> = dots.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.iter().all(|g| (g - gaps[0]).abs() < 1.5), "{gaps:?}");
    // p50 and p99 are lines across the run, each in its own colour, p99 above p50.
    let extent = |c: [u8; 3]| {
        let xs: Vec<i32> = (f.x0..f.x1)
            .filter(|&x| (f.y0..f.y1).any(|y| img.at(x, y) == c))
            .collect();
        let ys: Vec<i32> = (f.y0..f.y1)
            .filter(|&y| (f.x0..f.x1).any(|x| img.at(x, y) == c))
            .collect();
        (xs[xs.len() - 1] - xs[0], ys[0])
    };
    let (p50_width, p50_top) = extent(plot::P50_COLOUR);
    let (p99_width, p99_top) = extent(plot::P99_COLOUR);
    assert!(p50_width as f64 > dots[11] - dots[0] - 4.0, "{p50_width}");
    assert!(p99_width as f64 > dots[11] - dots[0] - 4.0, "{p99_width}");
    assert!(p99_top < p50_top, "p99 at row {p99_top}, p50 at {p50_top}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn over_time_gives_each_tag_with_values_a_panel() {
    let dir = tempdir("hist-plot-time-relay");
    let png = dir.join("time.png");
    let mut a = args(relay_logs(&dir.join("logs")));
    a.plot_over_time = Some(png.clone());
    hist::run(&a).unwrap();
    let img = Image::read(&png);
    // Overhead, limiter wait and three regions; delivery had no values and is said so.
    let frames = img.frames();
    assert_eq!(frames.len(), 5, "{frames:?}");
    for f in &frames {
        assert_eq!(img.blobs(f, plot::MAX_COLOUR).len(), 4, "{f:?}");
    }
    let loaded = hist::read(&a).unwrap();
    let fig = figure::over_time(&loaded, &a);
    assert!(
        fig.facts.ends_with(" · no values: delivery latency"),
        "{}",
        fig.facts
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn command_line_asks_for_either_picture_or_both() {
    use clap::Parser as _;
    let both = Cli::try_parse_from([
        "hist",
        "x.hlog",
        "--plot",
        "p.png",
        "--plot-over-time",
        "t.png",
    ])
    .unwrap()
    .hist;
    assert_eq!(both.plot, Some(PathBuf::from("p.png")));
    assert_eq!(both.plot_over_time, Some(PathBuf::from("t.png")));
    let neither = Cli::try_parse_from(["hist", "x.hlog"]).unwrap().hist;
    assert_eq!((neither.plot, neither.plot_over_time), (None, None));
}

#[test]
fn a_plotted_distribution_passes_through_the_sample_at_an_exact_count() {
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    for us in 1..=10 {
        h.record(us * 1_000).unwrap();
    }
    let points = figure::percentile_points(&h);
    // 70 % of the values are at or below 7 µs: at 1/(1 − 0.7) the curve is at 7 µs, not 8.
    let at_70 = points
        .iter()
        .find(|p| (p.0 - 1.0 / 0.3).abs() < 1e-9)
        .unwrap_or_else(|| panic!("no point at 70 %: {points:?}"));
    assert_eq!(at_70.1, 7_003.0, "{points:?}");
}

#[test]
fn a_distribution_past_the_axis_last_decade_still_draws_its_max_at_the_axis_end() {
    // A day of a relay at a few hundred bundles a second: 20 million values, one slow.
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    h.record_n(100_000, 20_000_000).unwrap();
    h.record(50_000_000).unwrap();
    let points = figure::percentile_points(&h);
    let last = *points.last().unwrap();
    assert_eq!(last.0, 1e7, "at the percentile axis's end: {points:?}");
    assert_eq!(
        last.1,
        h.highest_equivalent(50_000_000) as f64,
        "the slowest value is drawn: {points:?}"
    );
    assert!(points.iter().all(|p| p.0 <= 1e7), "{points:?}");
}

#[test]
fn a_distribution_in_one_bucket_is_a_flat_line_across_the_percentiles() {
    let dir = tempdir("hist-plot-one-bucket");
    let (equal, single) = (dir.join("equal.hlog"), dir.join("single.hlog"));
    one_interval_log(&equal, &[20_000; 128]);
    one_interval_log(&single, &[50_000]);
    let png = dir.join("flat.png");
    let mut a = args(vec![equal, single]);
    a.plot = Some(png.clone());
    hist::run(&a).unwrap();
    let img = Image::read(&png);
    let frames = img.frames();
    assert_eq!(frames.len(), 1, "{frames:?}");
    let f = frames[0];
    // Every percentile of either is its one value: each is a level line from 0 % to the
    // axis' end, in rows of its own.
    for (i, c) in plot::PALETTE.iter().take(2).enumerate() {
        let columns = img.columns_of(&f, *c).len();
        let across = (f.x0 + 1..f.x1)
            .filter(|&x| (f.y0 + 1..f.y1).any(|y| img.at(x, y) == *c))
            .count() as i32;
        assert_eq!(columns, 0, "series {i} is not a vertical line");
        assert!(
            across * 10 > (f.x1 - f.x0) * 9,
            "series {i} spans {across} of {} px",
            f.x1 - f.x0
        );
        let rows = (f.y0 + 1..f.y1)
            .filter(|&y| (f.x0 + 1..f.x1).any(|x| img.at(x, y) == *c))
            .count();
        assert!(rows <= 4, "series {i} is level: {rows} rows");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_distribution_of_zeros_is_a_line_clear_of_the_axis() {
    let dir = tempdir("hist-plot-zeros");
    let zeros = dir.join("zeros.hlog");
    // A limiter that never waited.
    one_interval_log(&zeros, &[0; 128]);
    let png = dir.join("zeros.png");
    let mut a = args(vec![zeros]);
    a.plot = Some(png.clone());
    hist::run(&a).unwrap();
    let img = Image::read(&png);
    let f = img.frames()[0];
    let c = plot::PALETTE[0];
    let rows: Vec<i32> = (f.y0 + 1..f.y1)
        .filter(|&y| (f.x0 + 1..f.x1).any(|x| img.at(x, y) == c))
        .collect();
    assert!(!rows.is_empty(), "no line drawn");
    let above_axis = f.y1 - plot::AXIS_PX - rows.last().unwrap();
    assert!(
        above_axis >= 6,
        "the line lies {above_axis} px above the axis"
    );
    let across = (f.x0 + 1..f.x1)
        .filter(|&x| rows.iter().any(|&y| img.at(x, y) == c))
        .count() as i32;
    assert!(across * 10 > (f.x1 - f.x0) * 9, "{across} px across");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn relay_runs_from_two_folders_are_named_by_their_folders() {
    let dir = tempdir("hist-plot-folders");
    let (staging, production) = (
        dir.join("staging-frankfurt-canary"),
        dir.join("production-frankfurt-main"),
    );
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::create_dir_all(&production).unwrap();
    // One relay's start, logged on two hosts.
    let mut files = relay_logs_from(&staging, T0_EPOCH_S);
    files.extend(relay_logs_from(&production, T0_EPOCH_S));
    let a = args(files);
    let loaded = hist::read(&a).unwrap();
    assert_eq!(loaded.runs.len(), 2);
    let f = figure::distribution(&loaded, &a);
    let labels: Vec<&str> = f.panels[3]
        .series
        .iter()
        .map(|s| s.label.as_str())
        .collect();
    assert_eq!(
        &labels[..2],
        [
            "staging-frankfurt-canary · frankfurt",
            "production-frankfurt-main · frankfurt",
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_legend_label_too_long_to_show_whole_keeps_its_region() {
    let dir = tempdir("hist-plot-long-runs");
    let (one, two) = (
        dir.join("relay-host-in-the-staging-cluster-canary-one"),
        dir.join("relay-host-in-the-production-cluster-main-two"),
    );
    std::fs::create_dir_all(&one).unwrap();
    std::fs::create_dir_all(&two).unwrap();
    let mut files = relay_logs_from(&one, T0_EPOCH_S);
    files.extend(relay_logs_from(&two, T0_EPOCH_S));
    let png = dir.join("long.png");
    let mut a = args(files);
    a.plot = Some(png.clone());
    hist::run(&a).unwrap();
    let img = Image::read(&png);
    // A run's name and a region, wider than the legend's column: the run's name is cut, the
    // region it is a line of stays.
    for region in ["frankfurt", "ny", "tokyo"] {
        assert_eq!(img.occurrences(region, plot::LEGEND), 2, "{region}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn over_time_an_interval_alone_between_gaps_shows_its_p50_and_p99() {
    let dir = tempdir("hist-plot-lone");
    let log = dir.join("gaps.hlog");
    // One-second intervals at 0, 10 and 20 s: each stands alone, its neighbours far off.
    let mut f = std::fs::File::create(&log).unwrap();
    let mut ser = V2DeflateSerializer::new();
    let mut w = IntervalLogWriterBuilder::new()
        .with_start_time(UNIX_EPOCH + Duration::from_secs(T0_EPOCH_S))
        .begin_log_with(&mut f, &mut ser)
        .unwrap();
    for s in [0, 10, 20] {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record_n(20_000, 90).unwrap();
        h.record_n(200_000, 9).unwrap();
        h.record(5_000_000).unwrap();
        w.write_histogram(&h, Duration::from_secs(s), Duration::from_secs(1), None)
            .unwrap();
    }
    drop(w);
    let png = dir.join("gaps.png");
    let mut a = args(vec![log]);
    a.plot_over_time = Some(png.clone());
    hist::run(&a).unwrap();
    let img = Image::read(&png);
    let frame = img.frames()[0];
    // As plain to see as the max's dot: a mark per interval, a dozen pixels or more of it in
    // the line's colour.
    for (name, c) in [("p50", plot::P50_COLOUR), ("p99", plot::P99_COLOUR)] {
        let marks = img.blobs(&frame, c);
        assert_eq!(marks.len(), 3, "{name}: {marks:?}");
        let pixels = img.count(&frame, c);
        assert!(pixels >= 3 * 12, "{name}: {pixels} pixels");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
