//! An RGB raster and what the plots draw on it: crisp rules and rectangles, anti-aliased lines,
//! dots and text. Not the layout of a chart (`plot`), the glyphs (`font`) nor the encoding
//! (`png`).
//!
//! Anti-aliasing is by coverage: a pixel is blended with the ink in proportion to how much of
//! it the shape covers, and a pixel the shape covers whole takes the ink's exact colour, so a
//! reader of the image (a test) finds every series by its palette colour.

use super::font::{self, Weight};

pub const WHITE: [u8; 3] = [255, 255, 255];
/// Glyph coverage is scaled up by this much: at 14–19 px, plain coverage leaves stems grey and
/// thin on white; a fifth more reads as printed text (the "stem darkening" of font renderers).
const TEXT_DARKENING: f32 = 1.2;

/// A rectangle of pixels: `x0..x1` × `y0..y1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

impl Rect {
    pub fn width(&self) -> i32 {
        self.x1 - self.x0
    }
    pub fn height(&self) -> i32 {
        self.y1 - self.y0
    }
    fn contains(&self, x: i32, y: i32) -> bool {
        x >= self.x0 && x < self.x1 && y >= self.y0 && y < self.y1
    }
}

/// How text is set.
#[derive(Clone, Copy, Debug)]
pub struct TextStyle {
    pub size_px: f32,
    pub weight: Weight,
    pub colour: [u8; 3],
}

/// An RGB raster, white to start with.
pub struct Canvas {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
    /// Where drawing may touch; the whole canvas unless narrowed by [`Canvas::clip`].
    clip: Rect,
}

impl Canvas {
    pub fn new(width: u32, height: u32) -> Canvas {
        Canvas {
            width,
            height,
            rgb: WHITE.repeat((width * height) as usize),
            clip: Rect {
                x0: 0,
                y0: 0,
                x1: width as i32,
                y1: height as i32,
            },
        }
    }

    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * self.width + x) * 3) as usize;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Limits drawing to `r` (within the canvas) until [`Canvas::unclip`].
    pub fn clip(&mut self, r: Rect) {
        self.clip = Rect {
            x0: r.x0.max(0),
            y0: r.y0.max(0),
            x1: r.x1.min(self.width as i32),
            y1: r.y1.min(self.height as i32),
        };
    }

    pub fn unclip(&mut self) {
        self.clip = Rect {
            x0: 0,
            y0: 0,
            x1: self.width as i32,
            y1: self.height as i32,
        };
    }

    /// Mixes `c` into pixel (x, y) by `coverage` (0..=1); full coverage writes `c` exactly.
    fn blend(&mut self, x: i32, y: i32, c: [u8; 3], coverage: f32) {
        if coverage <= 0.0 || !self.clip.contains(x, y) {
            return;
        }
        let i = ((y as u32 * self.width + x as u32) * 3) as usize;
        if coverage >= 0.996 {
            self.rgb[i..i + 3].copy_from_slice(&c);
            return;
        }
        for (px, ink) in self.rgb[i..i + 3].iter_mut().zip(c) {
            let old = f32::from(*px);
            *px = (old + (f32::from(ink) - old) * coverage).round() as u8;
        }
    }

    pub fn fill(&mut self, r: Rect, c: [u8; 3]) {
        for y in r.y0..r.y1 {
            for x in r.x0..r.x1 {
                self.blend(x, y, c, 1.0);
            }
        }
    }

    /// A one-pixel horizontal rule from `x0` to `x1` (exclusive) on row `y`.
    pub fn hline(&mut self, x0: i32, x1: i32, y: i32, c: [u8; 3]) {
        self.fill(
            Rect {
                x0,
                y0: y,
                x1,
                y1: y + 1,
            },
            c,
        );
    }

    /// A one-pixel vertical rule from `y0` to `y1` (exclusive) on column `x`.
    pub fn vline(&mut self, x: i32, y0: i32, y1: i32, c: [u8; 3]) {
        self.fill(
            Rect {
                x0: x,
                y0,
                x1: x + 1,
                y1,
            },
            c,
        );
    }

    /// A one-pixel outline just inside `r`.
    pub fn frame(&mut self, r: Rect, c: [u8; 3]) {
        self.hline(r.x0, r.x1, r.y0, c);
        self.hline(r.x0, r.x1, r.y1 - 1, c);
        self.vline(r.x0, r.y0, r.y1, c);
        self.vline(r.x1 - 1, r.y0, r.y1, c);
    }

    /// Line segments through `points` (pixel centres at .5), `width_px` wide, with round ends
    /// and joints. `dash_px`: (drawn, skipped) lengths along the line, or solid.
    pub fn polyline(
        &mut self,
        points: &[(f64, f64)],
        width_px: f64,
        c: [u8; 3],
        dash_px: Option<(f64, f64)>,
    ) {
        if let [only] = points {
            self.dot(*only, width_px / 2.0, c);
        }
        let mut along = 0.0;
        for pair in points.windows(2) {
            self.segment(pair[0], pair[1], width_px, c, dash_px, along);
            along += (pair[1].0 - pair[0].0).hypot(pair[1].1 - pair[0].1);
        }
    }

    /// Each pixel near the segment is covered by how far its centre lies from it. A joint is
    /// covered by both its segments, so its edge pixels are blended twice: a trace darker, and
    /// nothing at full coverage.
    fn segment(
        &mut self,
        (ax, ay): (f64, f64),
        (bx, by): (f64, f64),
        width_px: f64,
        c: [u8; 3],
        dash_px: Option<(f64, f64)>,
        along_start: f64,
    ) {
        let half = width_px / 2.0;
        let reach = half + 1.0;
        let (px0, px1) = (
            (ax.min(bx) - reach).floor() as i32,
            (ax.max(bx) + reach).ceil() as i32,
        );
        let (py0, py1) = (
            (ay.min(by) - reach).floor() as i32,
            (ay.max(by) + reach).ceil() as i32,
        );
        let (dx, dy) = (bx - ax, by - ay);
        let len2 = dx * dx + dy * dy;
        let len = len2.sqrt();
        for y in py0.max(self.clip.y0)..=py1.min(self.clip.y1 - 1) {
            for x in px0.max(self.clip.x0)..=px1.min(self.clip.x1 - 1) {
                let (cx, cy) = (f64::from(x) + 0.5, f64::from(y) + 0.5);
                let t = if len2 > 0.0 {
                    (((cx - ax) * dx + (cy - ay) * dy) / len2).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                if let Some((on, off)) = dash_px
                    && (along_start + t * len) % (on + off) > on
                {
                    continue;
                }
                let d = (cx - (ax + t * dx)).hypot(cy - (ay + t * dy));
                let coverage = (half + 0.5 - d).clamp(0.0, 1.0);
                self.blend(x, y, c, coverage as f32);
            }
        }
    }

    /// A filled disc of `radius_px` around `(x, y)`.
    pub fn dot(&mut self, (x, y): (f64, f64), radius_px: f64, c: [u8; 3]) {
        let r = radius_px + 1.0;
        for py in (y - r).floor() as i32..=(y + r).ceil() as i32 {
            for px in (x - r).floor() as i32..=(x + r).ceil() as i32 {
                let d = (f64::from(px) + 0.5 - x).hypot(f64::from(py) + 0.5 - y);
                let coverage = (radius_px + 0.5 - d).clamp(0.0, 1.0);
                self.blend(px, py, c, coverage as f32);
            }
        }
    }

    /// Sets `s` with the top of its line at (x, y); returns the width set.
    pub fn text(&mut self, x: i32, y: i32, s: &str, style: TextStyle) -> i32 {
        let w = font::lay_out(s, style.size_px, style.weight, |px, py, coverage| {
            self.blend(x + px, y + py, style.colour, coverage * TEXT_DARKENING)
        });
        w.ceil() as i32
    }

    /// [`Canvas::text`] ending at `x_right`.
    pub fn text_right(&mut self, x_right: i32, y: i32, s: &str, style: TextStyle) -> i32 {
        let w = text_width_px(s, style);
        self.text(x_right - w, y, s, style)
    }

    /// [`Canvas::text`] centred on `x_centre`.
    pub fn text_centred(&mut self, x_centre: i32, y: i32, s: &str, style: TextStyle) -> i32 {
        let w = text_width_px(s, style);
        self.text(x_centre - w / 2, y, s, style)
    }
}

/// Width of `s` set in `style`, whole pixels.
pub fn text_width_px(s: &str, style: TextStyle) -> i32 {
    font::width_px(s, style.size_px, style.weight).ceil() as i32
}

/// Height of a line of text in `style` above its baseline, whole pixels.
pub fn ascent_px(style: TextStyle) -> i32 {
    font::ascent_px(style.size_px, style.weight).ceil() as i32
}
