//! `bundle-relay hist FILE.hlog …`: percentile distributions of HdrHistogram interval logs,
//! this relay's (tagged, one tag per histogram) and bench-load's (untagged) alike. A tool on
//! top of the relay, never on its request path.
//!
//! Output: one distribution per tag (untagged intervals form their own group), each merged over
//! every selected interval of every file, values in `--unit`. `--plot out.png` draws each
//! file's distribution per tag as one line on the usual 1/(1−p) log axis.
//!
//! Files, one job each: `args` (the command line), `read` (reading logs, selecting
//! intervals), `text` (the printed distributions), `plot` (the chart), `canvas` (the raster
//! and its font), `png` (the encoder).

mod args;
mod canvas;
pub mod plot;
mod png;
mod read;
mod text;

use std::path::Path;

pub use args::{HistArgs, Unit};
pub use read::{TagGroup, load};
pub use text::render;

fn file_label(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// `bundle-relay hist`: prints the distributions; writes the plot if asked.
pub fn run(args: &HistArgs) -> Result<(), String> {
    let groups = load(args)?;
    let mut out = String::new();
    render(args, &groups, &mut out);
    print!("{out}");
    if let Some(png) = &args.plot {
        let mut series = Vec::new();
        for g in &groups {
            for (fi, h) in &g.per_file {
                let mut label = file_label(&args.files[*fi]);
                if let Some(t) = &g.tag {
                    label.push(' ');
                    label.push_str(t);
                }
                series.push(plot::Series::of_histogram(label, h));
            }
        }
        let title = "latency by percentile";
        plot::write_png(png, title, args.unit, &series)
            .map_err(|e| format!("writing {}: {e}", png.display()))?;
        eprintln!("plot written to {}", png.display());
    }
    Ok(())
}
