//! Percentile-distribution plots rendered to PNG with no system library: a raster drawn here
//! (lines, a built-in 5×7 pixel font), encoded with `flate2` (zlib) and `crc32fast`.
//!
//! The x axis is the usual HdrHistogram one: 1/(1−p) on a log scale, labelled in percentiles
//! (0 %, 90 %, 99 %, 99.9 %, …); the y axis is latency, linear from zero.

use std::io::{self, Write};
use std::path::Path;

use flate2::Compression;
use flate2::write::ZlibEncoder;
use hdrhistogram::Histogram;

use super::hist::Unit;

/// Image size: wide enough for seven decades of percentiles and a legend.
pub const WIDTH_PX: u32 = 1200;
pub const HEIGHT_PX: u32 = 700;
const MARGIN_LEFT_PX: i32 = 120;
const MARGIN_RIGHT_PX: i32 = 40;
const MARGIN_TOP_PX: i32 = 60;
const MARGIN_BOTTOM_PX: i32 = 70;
/// Font scale: 5×7 glyphs drawn at 2× are readable on any screen.
const TEXT_SCALE: i32 = 2;
const GLYPH_ADVANCE_PX: i32 = 6 * TEXT_SCALE;
/// Highest decade drawn: 1/(1−p) = 10^7 is the 99.99999th percentile.
const DECADES_MAX: u32 = 7;

const WHITE: [u8; 3] = [255, 255, 255];
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

/// An RGB raster.
pub struct Canvas {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

impl Canvas {
    pub fn new(width: u32, height: u32) -> Canvas {
        Canvas {
            width,
            height,
            rgb: WHITE.repeat((width * height) as usize),
        }
    }

    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * self.width + x) * 3) as usize;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    fn put(&mut self, x: i32, y: i32, c: [u8; 3]) {
        if x < 0 || y < 0 || x >= self.width as i32 || y >= self.height as i32 {
            return;
        }
        let i = ((y as u32 * self.width + x as u32) * 3) as usize;
        self.rgb[i..i + 3].copy_from_slice(&c);
    }

    fn rect(&mut self, x: i32, y: i32, w: i32, h: i32, c: [u8; 3]) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.put(xx, yy, c);
            }
        }
    }

    /// Bresenham, `thick` pixels square per point.
    fn line(&mut self, (x0, y0): (i32, i32), (x1, y1): (i32, i32), thick: i32, c: [u8; 3]) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            self.rect(x - thick / 2, y - thick / 2, thick, thick, c);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Draws `s` with its top-left corner at (x, y); returns the width drawn.
    pub fn text(&mut self, x: i32, y: i32, s: &str, c: [u8; 3]) -> i32 {
        let mut cx = x;
        for ch in s.chars() {
            let g = glyph(ch);
            for (row, bits) in g.iter().enumerate() {
                for col in 0..5 {
                    if bits & (0x10 >> col) != 0 {
                        self.rect(
                            cx + col * TEXT_SCALE,
                            y + row as i32 * TEXT_SCALE,
                            TEXT_SCALE,
                            TEXT_SCALE,
                            c,
                        );
                    }
                }
            }
            cx += GLYPH_ADVANCE_PX;
        }
        cx - x
    }

    /// The PNG encoding (8-bit RGB, no filter, zlib).
    pub fn encode_png(&self) -> io::Result<Vec<u8>> {
        let mut raw = Vec::with_capacity(((self.width * 3 + 1) * self.height) as usize);
        for row in self.rgb.chunks_exact(self.width as usize * 3) {
            raw.push(0);
            raw.extend_from_slice(row);
        }
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(&raw)?;
        let idat = z.finish()?;
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::with_capacity(13);
        ihdr.extend_from_slice(&self.width.to_be_bytes());
        ihdr.extend_from_slice(&self.height.to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(&mut out, b"IHDR", &ihdr);
        chunk(&mut out, b"IDAT", &idat);
        chunk(&mut out, b"IEND", &[]);
        Ok(out)
    }
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
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
    let png = render(title, unit, series).encode_png()?;
    std::fs::write(path, png)
}

/// 5×7 glyph rows (bit 4 is the leftmost column); lowercase is drawn as uppercase, anything
/// without a glyph as `?`.
fn glyph(c: char) -> [u8; 7] {
    match c.to_ascii_uppercase() {
        ' ' => [0; 7],
        '0' => [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E],
        '1' => [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        '2' => [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F],
        '3' => [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        '4' => [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02],
        '5' => [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        '6' => [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E],
        '7' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        '8' => [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E],
        '9' => [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        'A' => [0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        'B' => [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
        'C' => [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E],
        'D' => [0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C],
        'E' => [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F],
        'F' => [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10],
        'G' => [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F],
        'H' => [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        'I' => [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E],
        'J' => [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C],
        'K' => [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
        'L' => [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F],
        'M' => [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11],
        'N' => [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11],
        'O' => [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        'P' => [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10],
        'Q' => [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D],
        'R' => [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11],
        'S' => [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E],
        'T' => [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
        'U' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        'V' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04],
        'W' => [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A],
        'X' => [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11],
        'Y' => [0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04],
        'Z' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F],
        '%' => [0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03],
        '.' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C],
        ',' => [0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08],
        '-' => [0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00],
        '_' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F],
        ':' => [0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00],
        '(' => [0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02],
        ')' => [0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08],
        '/' => [0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00],
        '=' => [0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00],
        '+' => [0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00],
        _ => [0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04],
    }
}
