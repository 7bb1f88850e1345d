//! Percentile-distribution plots: the chart laid out on a [`Canvas`] and written as PNG.
//!
//! The x axis is the usual HdrHistogram one: 1/(1−p) on a log scale, labelled in percentiles
//! (0 %, 90 %, 99 %, 99.9 %, …); the y axis is latency, linear from zero.

use std::io;
use std::path::Path;

use hdrhistogram::Histogram;

use super::args::Unit;
use super::canvas::{Canvas, GLYPH_ADVANCE_PX};
use super::png;

/// Image size: wide enough for seven decades of percentiles and a legend.
pub const WIDTH_PX: u32 = 1200;
pub const HEIGHT_PX: u32 = 700;
const MARGIN_LEFT_PX: i32 = 120;
const MARGIN_RIGHT_PX: i32 = 40;
const MARGIN_TOP_PX: i32 = 60;
const MARGIN_BOTTOM_PX: i32 = 70;
/// Highest decade drawn: 1/(1−p) = 10^7 is the 99.99999th percentile.
const DECADES_MAX: u32 = 7;

const BLACK: [u8; 3] = [0, 0, 0];
const GRID: [u8; 3] = [220, 220, 220];
/// Line colours, in series order (then repeated).
pub const PALETTE: [[u8; 3]; 8] = [
    [31, 119, 180],
    [214, 39, 40],
    [44, 160, 44],
    [255, 127, 14],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [23, 190, 207],
];

/// One line: (1/(1−p), value in ns) points.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// The percentile distribution of `h` (HdrHistogram's 5 ticks per half distance), without
    /// the final 100 % point, whose 1/(1−p) is infinite.
    pub fn of_histogram(label: String, h: &Histogram<u64>) -> Series {
        let mut points = Vec::new();
        if !h.is_empty() {
            for v in h.iter_quantiles(5) {
                let q = v.quantile_iterated_to();
                if q >= 1.0 {
                    break;
                }
                let x = 1.0 / (1.0 - q);
                if x > 10f64.powi(DECADES_MAX as i32) {
                    break;
                }
                points.push((x, h.highest_equivalent(v.value_iterated_to()) as f64));
            }
        }
        Series { label, points }
    }
}

/// A 1-2-5 step giving at most about eight ticks up to `max`.
fn nice_step(max: f64) -> f64 {
    let raw = (max / 8.0).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * mag >= raw {
            return m * mag;
        }
    }
    10.0 * mag
}

fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

fn percentile_label(decade: u32) -> String {
    match decade {
        0 => "0%".into(),
        1 => "90%".into(),
        2 => "99%".into(),
        d => format!("99.{}%", "9".repeat(d as usize - 2)),
    }
}

/// Draws `series` (values in ns, shown in `unit`).
pub fn render(title: &str, unit: Unit, series: &[Series]) -> Canvas {
    let mut c = Canvas::new(WIDTH_PX, HEIGHT_PX);
    let (x0, y0) = (MARGIN_LEFT_PX, MARGIN_TOP_PX);
    let (pw, ph) = (
        WIDTH_PX as i32 - MARGIN_LEFT_PX - MARGIN_RIGHT_PX,
        HEIGHT_PX as i32 - MARGIN_TOP_PX - MARGIN_BOTTOM_PX,
    );
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(10.0, f64::max);
    let decades = (x_max.log10().ceil() as u32).clamp(1, DECADES_MAX);
    let y_max_raw = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1 / unit.ns()))
        .fold(0.0, f64::max);
    let step = nice_step(if y_max_raw > 0.0 { y_max_raw } else { 1.0 });
    let y_max = ((y_max_raw / step).ceil().max(1.0)) * step;
    let to_px = |x: f64, y: f64| -> (i32, i32) {
        let fx = x.max(1.0).log10() / f64::from(decades);
        let fy = y / y_max;
        (
            x0 + (fx * f64::from(pw)).round() as i32,
            y0 + ph - (fy * f64::from(ph)).round() as i32,
        )
    };

    // Grid and tick labels.
    for d in 0..=decades {
        let (px, _) = to_px(10f64.powi(d as i32), 0.0);
        c.line((px, y0), (px, y0 + ph), 1, GRID);
        let label = percentile_label(d);
        let w = label.chars().count() as i32 * GLYPH_ADVANCE_PX;
        c.text(px - w / 2, y0 + ph + 10, &label, BLACK);
    }
    let ticks = (y_max / step).round() as i32;
    for i in 0..=ticks {
        let v = f64::from(i) * step;
        let (_, py) = to_px(1.0, v);
        c.line((x0, py), (x0 + pw, py), 1, GRID);
        let label = fmt_tick(v, step);
        let w = label.chars().count() as i32 * GLYPH_ADVANCE_PX;
        c.text(x0 - w - 10, py - 7, &label, BLACK);
    }
    c.line((x0, y0), (x0, y0 + ph), 2, BLACK);
    c.line((x0, y0 + ph), (x0 + pw, y0 + ph), 2, BLACK);
    c.text(x0, 15, title, BLACK);
    let ylabel = format!("latency ({})", unit.label());
    c.text(10, y0 - 25, &ylabel, BLACK);
    c.text(x0 + pw / 2 - 50, y0 + ph + 40, "percentile", BLACK);

    for (i, s) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut last: Option<(i32, i32)> = None;
        for &(x, v) in &s.points {
            let p = to_px(x, v / unit.ns());
            if let Some(l) = last {
                c.line(l, p, 3, colour);
            }
            last = Some(p);
        }
        let ly = y0 + 10 + i as i32 * 20;
        c.line((x0 + 10, ly + 7), (x0 + 40, ly + 7), 3, colour);
        c.text(x0 + 50, ly, &s.label, BLACK);
    }
    c
}

/// [`render`] into a PNG file.
pub fn write_png(path: &Path, title: &str, unit: Unit, series: &[Series]) -> io::Result<()> {
    let c = render(title, unit, series);
    let png = png::encode_rgb(c.width, c.height, &c.rgb)?;
    std::fs::write(path, png)
}
