//! Every table and verdict the bench prints, in one place: [`Table`] (columns, rows,
//! alignment) rendered as the Markdown the docs paste, the number formats of its cells, the
//! ratio and "met / NOT MET" cells of a target, [`Versus`] (two sides compared figure by
//! figure: `--compare`, `--metrics-cost`, `--tls-cost`), how the relay's accounting reads, and
//! the one JSON writer for every report. Not what a report measures: each mode builds its own
//! rows.

use std::fmt::Write as _;

use bundle_relay::metrics::accounting::Totals;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Where a column's cells sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    /// Numbers: Markdown's `---:`.
    Right,
}

/// A table: headers with their alignment, then rows of cells.
#[derive(Clone, Debug, Default)]
pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table whose every column is left-aligned.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            columns: headers
                .iter()
                .map(|h| (h.to_string(), Align::Left))
                .collect(),
            rows: Vec::new(),
        }
    }

    /// A table with each column's alignment given.
    pub fn aligned(columns: &[(&str, Align)]) -> Table {
        Table {
            columns: columns.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row, one cell per column.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// One `|`-separated line per row, columns padded to their widest cell, under a header
    /// rule that marks right-aligned columns (`---:`): Markdown that reads as plain text.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.columns.iter().map(|(h, _)| width(h)).collect();
        for row in &self.rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(c));
            }
        }
        let mut o = String::new();
        self.line(
            &mut o,
            &widths,
            self.columns.iter().map(|(h, _)| h.as_str()),
        );
        o.push('|');
        for (w, (_, align)) in widths.iter().zip(&self.columns) {
            match align {
                Align::Left => o.push_str(&"-".repeat(w + 2)),
                Align::Right => {
                    o.push_str(&"-".repeat(w + 1));
                    o.push(':');
                }
            }
            o.push('|');
        }
        o.push('\n');
        for row in &self.rows {
            self.line(&mut o, &widths, row.iter().map(String::as_str));
        }
        o
    }

    fn line<'a>(&self, o: &mut String, widths: &[usize], cells: impl Iterator<Item = &'a str>) {
        o.push('|');
        for ((w, (_, align)), c) in widths.iter().zip(&self.columns).zip(cells) {
            let pad = " ".repeat(w - width(c));
            let _ = match align {
                Align::Left => write!(o, " {c}{pad} |"),
                Align::Right => write!(o, " {pad}{c} |"),
            };
        }
        o.push('\n');
    }
}

fn width(cell: &str) -> usize {
    cell.chars().count()
}

/// A latency histogram (in ns) as every report shows it: its count, percentiles, largest
/// value and mean, in µs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

impl Percentiles {
    /// All zero for an empty histogram.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Percentiles {
            count: h.len(),
            p50_us: us(h.value_at_quantile(0.5)),
            p90_us: us(h.value_at_quantile(0.9)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            p9999_us: us(h.value_at_quantile(0.9999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1000.0,
        }
    }
}

/// Microseconds as µs below 10 ms, as ms from there.
pub fn us(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} ms", v / 1000.0)
    } else {
        format!("{v:.0} µs")
    }
}

/// KiB as MiB with one decimal.
pub fn mib(kb: u64) -> String {
    format!("{:.1} MiB", kb as f64 / 1024.0)
}

/// `a / b` when both are finite and `b` is positive.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && b > 0.0).then(|| a / b)
}

/// The median (the mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// A ratio cell: `0.98×`, or `—` when there is none.
pub fn times(r: Option<f64>) -> String {
    r.map_or("—".into(), |x| format!("{x:.2}×"))
}

/// A target's verdict cell: `met`, `NOT MET`, or empty where the row has no target.
pub fn verdict(met: Option<bool>) -> String {
    match met {
        Some(true) => "met".into(),
        Some(false) => "NOT MET".into(),
        None => String::new(),
    }
}

/// A check's mark at the start of its line: `ok  ` or `FAIL`.
pub fn check_mark(ok: bool) -> &'static str {
    if ok { "ok  " } else { "FAIL" }
}

/// Where the admitted bundles went, as the accounting identity's right-hand side:
/// `delivered D + rejected R + expired E + failed F + in flight I`.
pub fn bundle_ends(t: &Totals) -> String {
    format!(
        "delivered {} + rejected {} + expired {} + failed {} + in flight {}",
        t.delivered, t.rejected, t.expired, t.failed, t.in_flight
    )
}

/// Two sides compared figure by figure: each row a metric, one figure per side, their ratio
/// (first / second), the target and whether it was met.
#[derive(Clone, Debug, Serialize)]
pub struct Versus {
    /// The two sides' names, the figure columns' headers.
    pub sides: [String; 2],
    /// The ratio column's header.
    pub ratio_header: String,
    /// Whether the figures are medians over rounds, with the per-round ratios in a column.
    pub rounds: bool,
    pub rows: Vec<VersusRow>,
    /// Lines under the table: who used the CPU, what a switch costs.
    pub notes: Vec<String>,
}

/// One metric of a [`Versus`].
#[derive(Clone, Debug, Serialize)]
pub struct VersusRow {
    pub metric: String,
    /// Each side's figure, as printed.
    pub figures: [String; 2],
    /// First side / second side.
    pub ratio: Option<f64>,
    /// The ratio in each round, where the figures are medians over rounds.
    pub per_round: Vec<Option<f64>>,
    pub target: String,
    /// `None` where the row has no target.
    pub met: Option<bool>,
}

impl Versus {
    /// The table, then a blank line and the notes.
    pub fn render(&self) -> String {
        let [a, b] = &self.sides;
        let rounds_header = format!("rounds {a}/{b}");
        let mut headers = vec!["", a.as_str(), b.as_str(), self.ratio_header.as_str()];
        if self.rounds {
            headers.push(&rounds_header);
        }
        headers.extend(["target", "met"]);
        let mut t = Table::new(&headers);
        for r in &self.rows {
            let mut cells = vec![
                r.metric.clone(),
                r.figures[0].clone(),
                r.figures[1].clone(),
                times(r.ratio),
            ];
            if self.rounds {
                let per_round: Vec<String> = r.per_round.iter().map(|&x| times(x)).collect();
                cells.push(per_round.join(" "));
            }
            cells.extend([r.target.clone(), verdict(r.met)]);
            t.push(cells);
        }
        let mut o = t.render();
        o.push('\n');
        for n in &self.notes {
            let _ = writeln!(o, "{n}");
        }
        o
    }
}

/// Any report as pretty JSON.
pub fn json(report: &impl Serialize) -> String {
    serde_json::to_string_pretty(report).expect("bench reports serialize")
}

/// Any report as pretty JSON in `path`, newline-terminated.
pub fn write_json(report: &impl Serialize, path: &std::path::Path) -> Result<(), String> {
    std::fs::write(path, json(report) + "\n")
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_pad_to_their_widest_cell_and_the_rule_matches() {
        let mut t = Table::new(&["", "a"]);
        t.push(vec!["long metric".into(), "1".into()]);
        t.push(vec!["x".into(), "µs µs".into()]);
        assert_eq!(
            t.render(),
            "|             | a     |\n\
             |-------------|-------|\n\
             | long metric | 1     |\n\
             | x           | µs µs |\n"
        );
    }

    #[test]
    fn right_aligned_columns_pad_on_the_left_and_mark_the_rule() {
        let mut t = Table::aligned(&[("rate/s", Align::Right), ("", Align::Left)]);
        t.push(vec!["500".into(), "<".into()]);
        assert_eq!(
            t.render(),
            "| rate/s |   |\n\
             |-------:|---|\n\
             |    500 | < |\n"
        );
    }

    #[test]
    fn median_of_odd_and_even_counts_ignores_nan_and_empty_is_none() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn microseconds_switch_to_milliseconds_at_ten() {
        assert_eq!(us(9_999.0), "9999 µs");
        assert_eq!(us(10_000.0), "10.0 ms");
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(times(ratio(1.0, 2.0)), "0.50×");
    }

    #[test]
    fn a_target_reads_met_or_not_met_and_no_target_reads_nothing() {
        assert_eq!(verdict(Some(true)), "met");
        assert_eq!(verdict(Some(false)), "NOT MET");
        assert_eq!(verdict(None), "");
    }
}
