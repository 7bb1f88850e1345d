//! The text `bundle-relay hist` prints: one HdrHistogram percentile distribution per tag, in
//! the layout HdrHistogram's own tools read. Not the reading nor the plot.

use std::fmt::Write as _;

use super::args::HistArgs;
use super::read::{TagGroup, display_files};
use crate::metrics::write_percentile_distribution;

/// The text `run` prints.
pub fn render(args: &HistArgs, groups: &[TagGroup], out: &mut String) {
    for g in groups {
        let _ = writeln!(
            out,
            "# tag {}: {} intervals from {}, values in {}",
            g.tag.as_deref().unwrap_or("(untagged)"),
            g.intervals,
            // The files this tag's intervals came from, not every file read.
            display_files(g.per_file.iter().map(|(fi, _)| &args.files[*fi])),
            args.unit.label()
        );
        write_percentile_distribution(&g.merged, args.unit.ns(), out);
        out.push('\n');
    }
}
