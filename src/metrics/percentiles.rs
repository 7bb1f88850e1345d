//! HdrHistogram's percentile-distribution text, as `outputPercentileDistribution` (and wrk2's
//! `--latency`) print it: what `/debug/histograms`, SIGUSR1 and `bundle-relay hist` write.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// One row of a percentile distribution: the percentile level, the value at it and how many
/// values are at or below that value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PercentileRow {
    /// The level iterated to, as a fraction (0.3, not 30 %).
    pub quantile: f64,
    /// 1/(1 − quantile), infinite at the last row.
    pub inverse_tail: f64,
    /// The highest value equivalent to the level's value.
    pub value: u64,
    /// Values at or below `value`.
    pub total: u64,
}

/// The level denominators stop growing here (about 60 halvings, far beyond any count), so the
/// products compared below stay within `u128`.
const DENOMINATOR_MAX: u128 = 1 << 63;

/// The rows of `h`'s percentile distribution at HdrHistogram's levels (`ticks_per_half_distance`
/// equal steps in each half of the distance left to 100 %), each level held as an exact
/// fraction. The crate's `iter_quantiles` sums float steps, so 0.1 + 0.1 + 0.1 lands just
/// above 0.3 and the 0.3 row of ten values showed the fourth; Java's iterator counts in
/// percent, where these steps add exactly. A level is reached at the first bucket whose running
/// count is at least level × count, as `value_at_quantile` reads it; past the last bucket one
/// row at 100 % ends the table, as both iterators do.
pub fn percentile_rows(h: &Histogram<u64>, ticks_per_half_distance: u32) -> Vec<PercentileRow> {
    assert!(ticks_per_half_distance > 0, "ticks per half distance");
    let n = u128::from(h.len());
    let mut rows = Vec::new();
    if n == 0 {
        return rows;
    }
    let ticks = u128::from(ticks_per_half_distance);
    // The level is num / den; den is always ticks × 2^k.
    let (mut num, mut den) = (0u128, ticks * 2);
    let mut exhausted = false;
    let mut total = 0u64;
    for v in h.iter_recorded() {
        total += v.count_at_value();
        let value = h.highest_equivalent(v.value_iterated_to());
        let last = u128::from(total) == n;
        while !exhausted && u128::from(total) * den >= num * n {
            rows.push(PercentileRow {
                quantile: num as f64 / den as f64,
                inverse_tail: den as f64 / (den - num) as f64,
                value,
                total,
            });
            if last {
                break;
            }
            // Halvings so far: the largest m with 2^m × (1 − level) ≤ 1. Each half distance
            // is cut into `ticks`, so the step is 1 / (ticks × 2^(m + 1)).
            let mut step_den = ticks * 2;
            while (den - num) * (step_den / ticks) <= den {
                step_den *= 2;
            }
            if step_den > DENOMINATOR_MAX {
                exhausted = true;
                break;
            }
            while den < step_den {
                num *= 2;
                den *= 2;
            }
            num += den / step_den;
        }
        if last {
            rows.push(PercentileRow {
                quantile: 1.0,
                inverse_tail: f64::INFINITY,
                value,
                total,
            });
            break;
        }
    }
    rows
}

/// `x` with `places` decimals as Java's `%.Nf` writes it: its shortest decimal form (the
/// digits that read back as `x`) rounded half up, not its binary value rounded. A level such
/// as 0.9997802734375 is just below that in binary, so `{:.12}` wrote ...437 where
/// HdrHistogram's text has ...438. For finite non-negative `x`.
fn java_fixed(x: f64, places: usize) -> String {
    let shortest = format!("{x}");
    let (int, frac) = shortest.split_once('.').unwrap_or((&shortest, ""));
    if frac.len() <= places {
        return format!("{int}.{frac:0<places$}");
    }
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes().take(places)).collect();
    if frac.as_bytes()[places] >= b'5' {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let split = digits.len() - places;
    let (int, frac) = digits.split_at(split);
    format!(
        "{}.{}",
        std::str::from_utf8(int).expect("digits"),
        std::str::from_utf8(frac).expect("digits")
    )
}

/// Writes `h`'s percentile distribution the way HdrHistogram's `outputPercentileDistribution`
/// (and wrk2's `--latency`) does: 5 ticks per half distance, values divided by
/// `value_unit_ns` with as many decimals as `h` has significant figures, then the mean / max
/// / count footer. Tools that read that text (the HdrHistogram plotter) read this.
pub fn write_percentile_distribution(h: &Histogram<u64>, value_unit_ns: f64, out: &mut String) {
    let d = usize::from(h.sigfig());
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    // An empty histogram has no rows but the footer, zeros in it, as HdrHistogram prints it.
    let rows = if h.is_empty() {
        Vec::new()
    } else {
        percentile_rows(h, 5)
    };
    for row in rows {
        let (q, total) = (row.quantile, row.total);
        let value = row.value as f64 / value_unit_ns;
        let level = java_fixed(q, 12);
        if q < 1.0 {
            let _ = writeln!(
                out,
                "{value:12.d$} {level:>2} {total:10} {:14.2}",
                row.inverse_tail
            );
        } else {
            let _ = writeln!(out, "{value:12.d$} {level:>2} {total:10}");
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:12.d$}, StdDeviation   = {:12.d$}]",
        h.mean() / value_unit_ns,
        h.stdev() / value_unit_ns
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.d$}, Total count    = {:12}]",
        h.max() as f64 / value_unit_ns,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        (2 * 10u64.pow(u32::from(h.sigfig()))).next_power_of_two()
    );
}

#[cfg(test)]
mod tests {
    use super::java_fixed;

    /// Java's `String.format("%.12f", x)` for each: the shortest digits rounded half up.
    #[test]
    fn java_fixed_rounds_the_shortest_digits_half_up_as_javas_format_does() {
        for (x, java) in [
            (0.9997802734375, "0.999780273438"),
            (0.3, "0.300000000000"),
            (0.0, "0.000000000000"),
            (1.0, "1.000000000000"),
            (0.9999999999995, "1.000000000000"),
            (0.1234567890124, "0.123456789012"),
            (12.5, "12.500000000000"),
        ] {
            assert_eq!(java_fixed(x, 12), java, "{x}");
        }
        assert_eq!(java_fixed(2.675, 2), "2.68", "2.675 is 2.67499.. in binary");
    }
}
