//! Text for the plots: the Go fonts (regular and bold, BSD licence, in `fonts/` beside this file
//! and compiled into the binary, so a plot needs no font on the host) rasterised with
//! `ab_glyph`, anti-aliased. Not where text goes (`plot`) nor the pixels (`canvas`).
//!
//! The fonts are cut down to Latin-1 and a few symbols (`fonts/LICENSE` says how); any other
//! character is drawn as the font's missing-glyph box.

use std::sync::OnceLock;

use ab_glyph::{Font as _, FontRef, PxScale, ScaleFont as _, point};

const REGULAR_TTF: &[u8] = include_bytes!("fonts/Go-Regular.ttf");
const BOLD_TTF: &[u8] = include_bytes!("fonts/Go-Bold.ttf");

/// Which of the two faces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    Regular,
    Bold,
}

fn face(weight: Weight) -> &'static FontRef<'static> {
    static FACES: OnceLock<[FontRef<'static>; 2]> = OnceLock::new();
    let faces = FACES.get_or_init(|| {
        [
            FontRef::try_from_slice(REGULAR_TTF).expect("the embedded regular font parses"),
            FontRef::try_from_slice(BOLD_TTF).expect("the embedded bold font parses"),
        ]
    });
    match weight {
        Weight::Regular => &faces[0],
        Weight::Bold => &faces[1],
    }
}

/// Height above the baseline of the tallest glyphs at `size_px`.
pub fn ascent_px(size_px: f32, weight: Weight) -> f32 {
    face(weight).as_scaled(PxScale::from(size_px)).ascent()
}

/// Width of `s` set at `size_px`.
pub fn width_px(s: &str, size_px: f32, weight: Weight) -> f32 {
    lay_out(s, size_px, weight, |_, _, _| {})
}

/// Sets `s` with the top of its line at `(x, y)` and calls `cover(px, py, coverage)` for every
/// pixel a glyph touches (coverage 0..=1); returns the width set.
pub fn lay_out(s: &str, size_px: f32, weight: Weight, mut cover: impl FnMut(i32, i32, f32)) -> f32 {
    let font = face(weight);
    let scale = PxScale::from(size_px);
    let scaled = font.as_scaled(scale);
    let baseline = scaled.ascent();
    let mut caret = 0.0f32;
    let mut previous = None;
    for ch in s.chars() {
        let id = scaled.glyph_id(ch);
        if let Some(p) = previous {
            caret += scaled.kern(p, id);
        }
        previous = Some(id);
        let glyph = id.with_scale_and_position(scale, point(caret, baseline));
        caret += scaled.h_advance(id);
        if let Some(outline) = font.outline_glyph(glyph) {
            let bounds = outline.px_bounds();
            let (gx, gy) = (bounds.min.x as i32, bounds.min.y as i32);
            outline.draw(|x, y, c| cover(gx + x as i32, gy + y as i32, c));
        }
    }
    caret
}
