//! `bundle-relay hist FILE.hlog …`: percentile distributions of HdrHistogram interval logs,
//! this relay's (tagged, one tag per histogram) and bench-load's (untagged) alike, as text and
//! as pictures. A tool beside the relay, never on its request path; it reads logs, not a live
//! relay (that is `/debug/histograms`).
//!
//! Output: one distribution per tag (untagged intervals form their own group), each merged over
//! every selected interval of every file, values in `--unit`. `--plot out.png` draws them, a
//! panel per kind of measure; `--plot-over-time out.png` draws each interval's p50, p99 and
//! max, a panel per tag (`figure` says what each picture holds).
//!
//! Files, one job each: `args` (the command line), `read` (reading logs, selecting intervals,
//! grouping files into runs), `text` (the printed distributions), `figure` (what a picture
//! shows), `axis` (scales and ticks), `format` (numbers and times), `plot` (how a picture
//! looks), `canvas` (the raster), `font` (the glyphs), `png` (the encoder).

mod args;
mod axis;
pub mod canvas;
pub mod figure;
pub mod font;
mod format;
pub mod plot;
mod png;
mod read;
mod text;

use std::io::Write as _;

pub use args::{HistArgs, Unit};
pub use read::{IntervalSummary, Loaded, Run, TagGroup, load, read};
pub use text::render;

/// `bundle-relay hist`: writes the plots asked for, then prints the distributions. The
/// pictures come first so that a reader of the text that stops early (`| head`) does not cost
/// them.
pub fn run(args: &HistArgs) -> Result<(), String> {
    let loaded = read(args)?;
    for n in &loaded.notes {
        eprintln!("note: {n}");
    }
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(png) = &args.plot {
        plot::write_png(png, &figure::distribution(&loaded, args))
            .map_err(|e| format!("writing {}: {e}", png.display()))?;
        eprintln!("plot written to {}", png.display());
    }
    if let Some(png) = &args.plot_over_time {
        plot::write_png(png, &figure::over_time(&loaded, args))
            .map_err(|e| format!("writing {}: {e}", png.display()))?;
        eprintln!("plot over time written to {}", png.display());
    }
    let mut out = String::new();
    render(args, &loaded.groups, &mut out);
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // A reader that has gone wanted no more; the command line restores SIGPIPE so this
        // is only seen where it is ignored.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(format!("writing the percentiles to stdout: {e}")),
        Ok(()) => Ok(()),
    }
}

/// Whatever bytes one log holds, read as `hist` reads a file, then printed and drawn as it
/// prints and draws them (into memory): an error that names the damage, never a panic. The
/// `hist_log` fuzz target's body; `tests/hist/read.rs` runs it under a seeded proptest.
pub fn fuzz_log(data: &[u8]) {
    let args = HistArgs {
        files: vec![std::path::PathBuf::from("fuzz.hlog")],
        from: None,
        to: None,
        tag: None,
        unit: Unit::Us,
        log_unit: Unit::Ns,
        plot: None,
        plot_over_time: None,
    };
    if let Ok(loaded) = read::parse(&args, &[Some(data.to_vec())], Vec::new()) {
        let mut out = String::new();
        render(&args, &loaded.groups, &mut out);
        plot::render(&figure::distribution(&loaded, &args));
        plot::render(&figure::over_time(&loaded, &args));
    }
}
