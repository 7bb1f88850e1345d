//! What the bench reports share: a plain-text table (Markdown-compatible, so a run pastes into
//! the docs as it is), the number formats of its cells, ratios and medians.

use std::fmt::Write as _;

/// `headers` and `rows` as a table with one `|`-separated line per row and columns padded to
/// their widest cell.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut o = String::new();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |o: &mut String, row: &mut dyn Iterator<Item = &str>| {
        let _ = write!(o, "|");
        for (w, c) in widths.iter().zip(row) {
            let pad = w - c.chars().count();
            let _ = write!(o, " {c}{} |", " ".repeat(pad));
        }
        let _ = writeln!(o);
    };
    line(&mut o, &mut headers.iter().copied());
    let _ = writeln!(
        o,
        "|{}",
        widths
            .iter()
            .map(|w| format!("{}|", "-".repeat(w + 2)))
            .collect::<String>()
    );
    for row in rows {
        line(&mut o, &mut row.iter().map(String::as_str));
    }
    o
}

/// Microseconds as µs below 10 ms, as ms from there.
pub fn us(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} ms", v / 1000.0)
    } else {
        format!("{v:.0} µs")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_pad_to_their_widest_cell_and_the_rule_matches() {
        let t = render(
            &["", "a"],
            &[
                vec!["long metric".into(), "1".into()],
                vec!["x".into(), "µs µs".into()],
            ],
        );
        assert_eq!(
            t,
            "|             | a     |\n\
             |-------------|-------|\n\
             | long metric | 1     |\n\
             | x           | µs µs |\n"
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
}
