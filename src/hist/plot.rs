//! How the two pictures look: a [`Figure`] laid out and drawn on a [`Canvas`], written as PNG.
//!
//! Distributions: one panel per row, the full width of the image, with the legend as a table
//! beside the plot (each series' p50, p99, max and count, so the figures a report quotes are in
//! the picture); x is HdrHistogram's 1/(1−p) log scale labelled in percentiles, y latency on a
//! log scale of the panel's own. Over time: panels two to a row, p50 and p99 as lines (a short
//! stroke for an interval between gaps) and the max as a dot per interval, the legend in each
//! panel's title row.
//!
//! Series are told apart by colour, [`PALETTE`] in series order within a panel (past its
//! length, the colours repeat dashed, then dotted, then in long dashes). Curves are clipped to
//! the inside of their panel's frame and drawn over the grid; text is anti-aliased Go (`font`).
//!
//! Why by hand and not a plotting crate: the charts are two fixed layouts, and the raster,
//! lines and PNG writer here are a few hundred lines over `ab_glyph`, `flate2` and
//! `crc32fast`; plotters, the crate of the field, would bring an image stack and still need a
//! font file of ours for its bitmap backend.

use std::io;
use std::path::Path;

use super::axis::Tick;
use super::canvas::{self, Canvas, Rect, TextStyle};
use super::figure::{Figure, Ink, Kind, Panel, Series, XScale};
use super::font::Weight;
use super::format;
use super::png;

/// Width of every picture: seven decades of percentiles beside a legend table.
pub const WIDTH_PX: u32 = 1500;
const MARGIN_PX: i32 = 28;
/// Title and facts above the panels.
const HEADER_PX: i32 = 100;
const FOOTER_PX: i32 = 16;
/// One distribution panel: its title, plot and x labels.
const DISTRIBUTION_PANEL_PX: i32 = 450;
const DISTRIBUTION_PLOT_PX: i32 = 340;
/// One over-time panel.
const OVER_TIME_PANEL_PX: i32 = 310;
const OVER_TIME_PLOT_PX: i32 = 206;
const OVER_TIME_GAP_PX: i32 = 40;
/// Room left of a plot for the latency labels.
const Y_LABELS_PX: i32 = 80;
/// Between a plot and its legend table.
const LEGEND_GAP_PX: i32 = 32;
const LEGEND_ROW_PX: i32 = 24;
/// Rows of a legend with more series than [`LEGEND_ROW_PX`] rows fit (runs compared region by
/// region), set in [`LEGEND_COMPACT`].
const LEGEND_ROW_COMPACT_PX: i32 = 18;
const LEGEND_SWATCH_PX: i32 = 34;
const LEGEND_COLUMN_GAP_PX: i32 = 20;
/// The longest series name a legend shows whole.
const LEGEND_LABEL_MAX_PX: i32 = 190;

const BLACK: [u8; 3] = [0, 0, 0];
const MUTED: [u8; 3] = [90, 90, 90];
/// A plot's frame, one pixel inside its rectangle, top and right; left and bottom are the
/// axes, black, [`AXIS_PX`] wide.
pub const FRAME: [u8; 3] = [110, 110, 110];
pub const AXIS_PX: i32 = 2;
/// Grid lines at decades (and at each time tick).
pub const GRID_MAJOR: [u8; 3] = [200, 200, 200];
/// Grid lines at 2..9 × each decade (and at the median).
pub const GRID_MINOR: [u8; 3] = [234, 234, 234];
/// Series colours, in series order within a panel.
pub const PALETTE: [[u8; 3]; 10] = [
    [31, 119, 180],
    [214, 39, 40],
    [44, 160, 44],
    [255, 127, 14],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [23, 190, 207],
    [188, 189, 34],
    [40, 50, 110],
];
/// Over time: the colours of each interval's p50, p99 and max.
pub const P50_COLOUR: [u8; 3] = PALETTE[0];
pub const P99_COLOUR: [u8; 3] = PALETTE[3];
pub const MAX_COLOUR: [u8; 3] = PALETTE[1];
const LINE_PX: f64 = 2.5;
/// Past the palette's length a series is stroked: dashed, then dotted, then in long dashes,
/// so 40 series of a panel (5 relay runs of 8 regions) each look their own.
const DASHES_PX: [(f64, f64); 3] = [(9.0, 5.0), (2.5, 4.0), (18.0, 6.0)];
const DOT_RADIUS_PX: f64 = 2.5;
/// Half the stroke that stands for a line's point with no neighbour.
const LONE_POINT_HALF_PX: f64 = 6.0;

const fn style(size_px: f32, weight: Weight, colour: [u8; 3]) -> TextStyle {
    TextStyle {
        size_px,
        weight,
        colour,
    }
}

/// The title's text.
pub const TITLE: TextStyle = style(26.0, Weight::Bold, BLACK);
const FACTS: TextStyle = style(17.0, Weight::Regular, MUTED);
const PANEL_TITLE: TextStyle = style(19.0, Weight::Bold, BLACK);
const TICK: TextStyle = style(15.0, Weight::Regular, BLACK);
const AXIS_TITLE: TextStyle = style(15.0, Weight::Regular, MUTED);
/// A legend's series names and figures.
pub const LEGEND: TextStyle = style(15.0, Weight::Regular, BLACK);
const LEGEND_COMPACT: TextStyle = style(13.0, Weight::Regular, BLACK);
const LEGEND_HEADER: TextStyle = style(14.0, Weight::Bold, MUTED);
/// A legend row without figures ("no values", "and 3 more").
const LEGEND_NOTE: TextStyle = style(15.0, Weight::Regular, MUTED);
/// A panel with nothing to draw says so.
const NOTE: TextStyle = style(17.0, Weight::Regular, MUTED);

/// Over time: how many panels share a row.
fn columns(kind: Kind, panels: usize) -> usize {
    match kind {
        Kind::Distribution => 1,
        Kind::OverTime if panels <= 1 => 1,
        Kind::OverTime => 2,
    }
}

/// The size of a picture of `kind` with `panels` panels.
pub fn image_size_px(kind: Kind, panels: usize) -> (u32, u32) {
    let rows = panels.div_ceil(columns(kind, panels)).max(1) as i32;
    let panel = match kind {
        Kind::Distribution => DISTRIBUTION_PANEL_PX,
        Kind::OverTime => OVER_TIME_PANEL_PX,
    };
    (WIDTH_PX, (HEADER_PX + rows * panel + FOOTER_PX) as u32)
}

/// Draws `figure`.
pub fn render(figure: &Figure) -> Canvas {
    let (w, h) = image_size_px(figure.kind, figure.panels.len());
    let mut c = Canvas::new(w, h);
    let text_w = WIDTH_PX as i32 - 2 * MARGIN_PX;
    c.text(MARGIN_PX, 24, &fit(&figure.title, TITLE, text_w), TITLE);
    c.text(MARGIN_PX, 62, &fit(&figure.facts, FACTS, text_w), FACTS);
    match figure.kind {
        Kind::Distribution => {
            let legend = LegendTable::columns(&figure.panels);
            let plot_x1 = WIDTH_PX as i32 - MARGIN_PX - legend.width_px() - LEGEND_GAP_PX;
            for (i, p) in figure.panels.iter().enumerate() {
                let top = HEADER_PX + i as i32 * DISTRIBUTION_PANEL_PX;
                c.text(
                    MARGIN_PX,
                    top,
                    &fit(&p.title, PANEL_TITLE, text_w),
                    PANEL_TITLE,
                );
                let plot = Rect {
                    x0: MARGIN_PX + Y_LABELS_PX,
                    y0: top + 34,
                    x1: plot_x1,
                    y1: top + 34 + DISTRIBUTION_PLOT_PX,
                };
                draw_plot(&mut c, p, plot, "percentile");
                legend.draw(&mut c, p, plot.x1 + LEGEND_GAP_PX, plot.y0);
            }
        }
        Kind::OverTime => {
            let cols = columns(figure.kind, figure.panels.len()) as i32;
            let cell_w = (text_w - (cols - 1) * OVER_TIME_GAP_PX) / cols;
            for (i, p) in figure.panels.iter().enumerate() {
                let (row, col) = (i as i32 / cols, i as i32 % cols);
                let left = MARGIN_PX + col * (cell_w + OVER_TIME_GAP_PX);
                let top = HEADER_PX + row * OVER_TIME_PANEL_PX;
                let key_w = inline_legend(&mut c, &p.series, left + cell_w, top, false);
                let title = fit(&p.title, PANEL_TITLE, cell_w - key_w - 16);
                c.text(left, top, &title, PANEL_TITLE);
                inline_legend(&mut c, &p.series, left + cell_w, top, true);
                let plot = Rect {
                    x0: left + Y_LABELS_PX,
                    y0: top + 34,
                    x1: left + cell_w,
                    y1: top + 34 + OVER_TIME_PLOT_PX,
                };
                draw_plot(&mut c, p, plot, "time since the log's start");
            }
        }
    }
    c
}

/// [`render`] into a PNG file.
pub fn write_png(path: &Path, figure: &Figure) -> io::Result<()> {
    let c = render(figure);
    std::fs::write(path, png::encode_rgb(c.width, c.height, &c.rgb)?)
}

/// `s`, cut with an ellipsis where it would be wider than `max_px`.
fn fit(s: &str, style: TextStyle, max_px: i32) -> String {
    if canvas::text_width_px(s, style) <= max_px {
        return s.to_string();
    }
    let mut chars: Vec<char> = s.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let cut: String = chars.iter().collect::<String>().trim_end().to_string() + "…";
        if canvas::text_width_px(&cut, style) <= max_px {
            return cut;
        }
    }
    String::new()
}

/// A series' name in a legend, at most `max_px` wide. A name "run · region" too wide is cut in
/// its run's part: the region is what tells the lines of one run apart, and the run's name
/// begins with what tells the runs apart. The region is set on its own, whole or cut alike.
fn legend_label(c: &mut Canvas, label: &str, x: i32, y: i32, style: TextStyle, max_px: i32) {
    if let Some((run, member)) = label.rsplit_once(" · ") {
        let member_px = canvas::text_width_px(member, style);
        let run_px = max_px - member_px - canvas::text_width_px(" · ", style);
        let run = fit(run, style, run_px);
        // Worth it while a few letters of the run are left beside the region.
        if run.chars().count() > 3 {
            let w = c.text(x, y, &format!("{run} · "), style);
            c.text(x + w, y, member, style);
            return;
        }
    }
    c.text(x, y, &fit(label, style, max_px), style);
}

/// Where fraction `at` of an axis lies inside `plot`, between the axes and the frame, in
/// continuous pixel coordinates (pixel `i` covers `i..i + 1`): 0 is the centre of the row
/// above the bottom axis or of the column right of the left axis. A grid line fills the pixel
/// its position falls in; a curve runs through the position itself.
fn tick_y(plot: Rect, at: f64) -> f64 {
    let (bottom, top) = (f64::from(plot.y1 - 1 - AXIS_PX), f64::from(plot.y0 + 1));
    bottom + 0.5 - at * (bottom - top)
}

fn tick_x(plot: Rect, at: f64) -> f64 {
    let (left, right) = (f64::from(plot.x0 + AXIS_PX), f64::from(plot.x1 - 2));
    left + 0.5 + at * (right - left)
}

/// Grid, series, frame and tick labels of one panel inside `plot`.
fn draw_plot(c: &mut Canvas, p: &Panel, plot: Rect, x_title: &str) {
    let mut x_ticks: Vec<Tick> = match p.x {
        XScale::Percentile(a) => a.ticks(),
        XScale::Time(a) => a.ticks(),
    };
    x_ticks.sort_by(|a, b| a.at.total_cmp(&b.at));
    let y_ticks = p.y.ticks();
    for major in [false, true] {
        let colour = if major { GRID_MAJOR } else { GRID_MINOR };
        for t in y_ticks.iter().filter(|t| t.major == major) {
            let y = tick_y(plot, t.at).floor() as i32;
            c.hline(plot.x0, plot.x1, y, colour);
        }
        for t in x_ticks.iter().filter(|t| t.major == major) {
            let x = tick_x(plot, t.at).floor() as i32;
            c.vline(x, plot.y0, plot.y1, colour);
        }
    }
    let to_px = |x: f64, ns: f64| -> (f64, f64) {
        let fx = match p.x {
            XScale::Percentile(a) => a.frac(x),
            XScale::Time(a) => a.frac(x),
        };
        (tick_x(plot, fx), tick_y(plot, p.y.frac(ns)))
    };
    c.clip(Rect {
        x0: plot.x0 + 1,
        y0: plot.y0 + 1,
        x1: plot.x1 - 1,
        y1: plot.y1 - 1,
    });
    for s in &p.series {
        let (colour, dash) = ink(s.ink);
        if s.ink == Ink::Max {
            for &(x, ns) in s.points.iter().filter(|p| !p.0.is_nan()) {
                c.dot(to_px(x, ns), DOT_RADIUS_PX, colour);
            }
            continue;
        }
        for run in s.points.split(|p| p.0.is_nan()) {
            let px: Vec<(f64, f64)> = run.iter().map(|&(x, ns)| to_px(x, ns)).collect();
            match px[..] {
                // An interval between gaps has no neighbour to draw a line to: a short level
                // stroke of the line's width, where a point as wide as the line would be lost
                // beside the max's dots.
                [(x, y)] => c.polyline(
                    &[(x - LONE_POINT_HALF_PX, y), (x + LONE_POINT_HALF_PX, y)],
                    LINE_PX,
                    colour,
                    None,
                ),
                _ => c.polyline(&px, LINE_PX, colour, dash),
            }
        }
    }
    c.unclip();
    c.frame(plot, FRAME);
    // The axes proper, left and bottom, over the frame.
    for d in 0..AXIS_PX {
        c.vline(plot.x0 + d, plot.y0, plot.y1, BLACK);
        c.hline(plot.x0, plot.x1, plot.y1 - 1 - d, BLACK);
    }
    let ascent = canvas::ascent_px(TICK);
    for t in &y_ticks {
        if let Some(l) = &t.label {
            let y = tick_y(plot, t.at).floor() as i32;
            c.text_right(plot.x0 - 8, y - ascent / 2 - 2, l, TICK);
        }
    }
    let mut right_end = i32::MIN;
    for t in &x_ticks {
        if let Some(l) = &t.label {
            let x = tick_x(plot, t.at).floor() as i32;
            let w = canvas::text_width_px(l, TICK);
            // A label that would run into the previous one (the median beside 0 %) is left out.
            let left = (x - w / 2).min(plot.x1 - w);
            if left < right_end + 6 {
                continue;
            }
            c.text(left, plot.y1 + 6, l, TICK);
            right_end = left + w;
        }
    }
    c.text_centred((plot.x0 + plot.x1) / 2, plot.y1 + 28, x_title, AXIS_TITLE);
    if let Some(n) = &p.note {
        c.text_centred(
            (plot.x0 + plot.x1) / 2,
            (plot.y0 + plot.y1) / 2 - 10,
            n,
            NOTE,
        );
    }
}

/// A series' colour and dash.
fn ink(i: Ink) -> ([u8; 3], Option<(f64, f64)>) {
    match i {
        Ink::Nth(n) => (
            PALETTE[n % PALETTE.len()],
            match n / PALETTE.len() {
                0 => None,
                k => Some(DASHES_PX[(k - 1) % DASHES_PX.len()]),
            },
        ),
        Ink::P50 => (P50_COLOUR, None),
        Ink::P99 => (P99_COLOUR, None),
        Ink::Max => (MAX_COLOUR, None),
    }
}

/// A series' key: a short stroke of its line, or its dot.
fn swatch(c: &mut Canvas, s: &Series, x: i32, y_mid: i32) {
    let (colour, dash) = ink(s.ink);
    let y = f64::from(y_mid) + 0.5;
    if s.ink == Ink::Max {
        c.dot((f64::from(x) + 12.0, y), DOT_RADIUS_PX + 1.0, colour);
    } else {
        let len = if dash.is_some() { 23.0 } else { 24.0 };
        c.polyline(
            &[(f64::from(x), y), (f64::from(x) + len, y)],
            LINE_PX + 0.5,
            colour,
            dash,
        );
    }
}

/// Over time: "— p50  — p99  • max" ending at `right`; returns its width, drawn or not.
fn inline_legend(c: &mut Canvas, series: &[Series], right: i32, top: i32, draw: bool) -> i32 {
    let widths: Vec<i32> = series
        .iter()
        .map(|s| LEGEND_SWATCH_PX + canvas::text_width_px(&s.label, LEGEND))
        .collect();
    let total: i32 = widths.iter().sum::<i32>() + 18 * (series.len() as i32 - 1).max(0);
    if draw {
        let mut x = right - total;
        let ascent = canvas::ascent_px(LEGEND);
        for (s, w) in series.iter().zip(&widths) {
            swatch(c, s, x, top + 4 + ascent / 2 + 2);
            c.text(x + LEGEND_SWATCH_PX - 4, top + 4, &s.label, LEGEND);
            x += w + 18;
        }
    }
    total
}

/// The distributions' legend: a row per series with its p50, p99, max and count, columns
/// aligned across every panel of the picture.
struct LegendTable {
    label_px: i32,
    numbers_px: [i32; 4],
}

const LEGEND_HEADINGS: [&str; 4] = ["p50", "p99", "max", "values"];

fn legend_numbers(s: &Series) -> Option<[String; 4]> {
    let m = s.summary.filter(|m| m.count > 0)?;
    Some([
        format::latency(m.p50_ns as f64, false),
        format::latency(m.p99_ns as f64, false),
        format::latency(m.max_ns as f64, false),
        format::count(m.count),
    ])
}

impl LegendTable {
    fn columns(panels: &[Panel]) -> LegendTable {
        let mut label_px = 0;
        let mut numbers_px = LEGEND_HEADINGS.map(|h| canvas::text_width_px(h, LEGEND_HEADER));
        for s in panels.iter().flat_map(|p| &p.series) {
            label_px = label_px.max(canvas::text_width_px(&s.label, LEGEND));
            if let Some(n) = legend_numbers(s) {
                for (w, t) in numbers_px.iter_mut().zip(&n) {
                    *w = (*w).max(canvas::text_width_px(t, LEGEND));
                }
            }
        }
        LegendTable {
            label_px: label_px.min(LEGEND_LABEL_MAX_PX),
            numbers_px,
        }
    }

    fn width_px(&self) -> i32 {
        LEGEND_SWATCH_PX
            + self.label_px
            + self
                .numbers_px
                .iter()
                .map(|w| w + LEGEND_COLUMN_GAP_PX)
                .sum::<i32>()
    }

    fn draw(&self, c: &mut Canvas, p: &Panel, x: i32, y: i32) {
        // Rows that fit beside the plot, the heading's included.
        let fit_rows = |row_px: i32| (DISTRIBUTION_PLOT_PX / row_px - 1) as usize;
        let (row_px, text) = if p.series.len() <= fit_rows(LEGEND_ROW_PX) {
            (LEGEND_ROW_PX, LEGEND)
        } else {
            (LEGEND_ROW_COMPACT_PX, LEGEND_COMPACT)
        };
        let rows = fit_rows(row_px);
        let ascent = canvas::ascent_px(text);
        let mut right = x + LEGEND_SWATCH_PX + self.label_px;
        let mut rights = [0; 4];
        for (r, w) in rights.iter_mut().zip(self.numbers_px) {
            right += LEGEND_COLUMN_GAP_PX + w;
            *r = right;
        }
        for (h, r) in LEGEND_HEADINGS.iter().zip(rights) {
            c.text_right(r, y, h, LEGEND_HEADER);
        }
        let shown = if p.series.len() > rows {
            rows - 1
        } else {
            p.series.len()
        };
        for (i, s) in p.series.iter().take(shown).enumerate() {
            let top = y + (i as i32 + 1) * row_px;
            swatch(c, s, x, top + ascent / 2 + 2);
            legend_label(c, &s.label, x + LEGEND_SWATCH_PX, top, text, self.label_px);
            match legend_numbers(s) {
                Some(n) => {
                    for (t, r) in n.iter().zip(rights) {
                        c.text_right(r, top, t, text);
                    }
                }
                None => {
                    c.text_right(rights[3], top, "no values", LEGEND_NOTE);
                }
            }
        }
        if shown < p.series.len() {
            let top = y + (shown as i32 + 1) * row_px;
            let more = format!("and {} more", p.series.len() - shown);
            c.text(x + LEGEND_SWATCH_PX, top, &more, LEGEND_NOTE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_of_a_panel_up_to_forty_has_an_ink_of_its_own() {
        let inks: Vec<_> = (0..40).map(|n| ink(Ink::Nth(n))).collect();
        for (i, a) in inks.iter().enumerate() {
            for (j, b) in inks.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "series {i} and {j}");
            }
        }
    }
}
