//! HdrHistogram's percentile-distribution text, as `outputPercentileDistribution` (and wrk2's
//! `--latency`) print it: what `/debug/histograms`, SIGUSR1 and `bundle-relay hist` write.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// Writes `h`'s percentile distribution the way HdrHistogram's `outputPercentileDistribution`
/// (and wrk2's `--latency`) does: 5 ticks per half distance, values divided by
/// `value_unit_ns`, then the mean / max / count footer. Tools that read that text (the
/// HdrHistogram plotter) read this.
pub fn write_percentile_distribution(h: &Histogram<u64>, value_unit_ns: f64, out: &mut String) {
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if h.is_empty() {
        let _ = writeln!(out, "#[No values recorded]");
        return;
    }
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let value = h.highest_equivalent(v.value_iterated_to()) as f64 / value_unit_ns;
        if q < 1.0 {
            let _ = writeln!(
                out,
                "{value:12.3} {q:2.12} {total:10} {:14.2}",
                1.0 / (1.0 - q)
            );
        } else {
            let _ = writeln!(out, "{value:12.3} {q:2.12} {total:10}");
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        h.mean() / value_unit_ns,
        h.stdev() / value_unit_ns
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.3}, Total count    = {:12}]",
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
