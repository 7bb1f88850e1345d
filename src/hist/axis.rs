//! The plots' three scales and their ticks: latency on a log scale, percentiles on
//! HdrHistogram's 1/(1−p) log scale, seconds on a linear one. Each maps a value to a fraction
//! of its axis (0 at the origin, 1 at the far end) and lists its ticks; none knows pixels.

use super::format;

/// Highest percentile decade drawn: 1/(1−p) = 10^7 is the 99.99999th percentile.
pub const DECADES_MAX: u32 = 7;

/// A grid line, labelled or not.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    /// Fraction of the axis, 0..=1.
    pub at: f64,
    /// Decades (and the percentile axis's decades) are major; the steps between are minor.
    pub major: bool,
    pub label: Option<String>,
}

/// The 1-2-5 steps, lowest first, from `10^k_lo` to `10^k_hi`.
fn steps_125(k_lo: i32, k_hi: i32) -> impl Iterator<Item = f64> {
    (k_lo..=k_hi).flat_map(|k| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(k)))
}

/// Latency in ns on a log scale, from a 1-2-5 step below the lowest value to one above the
/// highest, so neither end of a curve runs along the frame. Zeros (a limiter wait that did not
/// wait) have no place on a log scale: when there are any, the bottom of the axis is a band
/// labelled 0 below the scale's lowest step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyAxis {
    pub lo_ns: f64,
    pub hi_ns: f64,
    /// Whether the zero band is there.
    pub zero: bool,
}

/// Headroom kept between the extreme values and the axis ends.
const LATENCY_HEADROOM: f64 = 1.3;
/// Up to this many decades, the 2 and 5 steps are labelled too.
const LATENCY_LABEL_125_DECADES_MAX: f64 = 2.5;
/// Fraction of the axis the zero band takes: room for its label below the lowest step's on
/// the shortest plot.
const ZERO_BAND: f64 = 0.1;

impl LatencyAxis {
    /// The axis that holds `values_ns`.
    pub fn fit(values_ns: impl IntoIterator<Item = f64>) -> LatencyAxis {
        let (mut lo, mut hi, mut zero) = (f64::INFINITY, 0.0f64, false);
        for v in values_ns {
            if v > 0.0 {
                lo = lo.min(v);
                hi = hi.max(v);
            } else {
                zero = true;
            }
        }
        if hi == 0.0 {
            return LatencyAxis {
                lo_ns: 1.0,
                hi_ns: 10.0,
                zero,
            };
        }
        let (k_lo, k_hi) = (lo.log10().floor() as i32 - 1, hi.log10().ceil() as i32 + 1);
        let lo_ns = steps_125(k_lo, k_hi)
            .filter(|s| *s * LATENCY_HEADROOM <= lo)
            .last()
            .unwrap_or(10f64.powi(k_lo))
            .max(1.0);
        let hi_ns = steps_125(k_lo, k_hi)
            .find(|s| *s >= hi * LATENCY_HEADROOM && *s > lo_ns)
            .unwrap_or(10f64.powi(k_hi));
        LatencyAxis { lo_ns, hi_ns, zero }
    }

    /// Where `ns` lies: zero (or anything below the scale) in the middle of the zero band, so
    /// a curve of zeros is not hidden by the axis; 1 at the top.
    pub fn frac(&self, ns: f64) -> f64 {
        let band = if self.zero { ZERO_BAND } else { 0.0 };
        if ns < self.lo_ns {
            return band / 2.0;
        }
        let v = ns.min(self.hi_ns);
        band + (1.0 - band) * (v / self.lo_ns).log10() / (self.hi_ns / self.lo_ns).log10()
    }

    /// Grid lines at every 1..9 × 10^k inside the axis; decades are major and labelled; the
    /// zero band's line is labelled 0.
    pub fn ticks(&self) -> Vec<Tick> {
        let decades = (self.hi_ns / self.lo_ns).log10();
        let label_125 = decades <= LATENCY_LABEL_125_DECADES_MAX;
        let (k_lo, k_hi) = (
            self.lo_ns.log10().floor() as i32,
            self.hi_ns.log10().ceil() as i32,
        );
        let mut out = Vec::new();
        if self.zero {
            out.push(Tick {
                at: self.frac(0.0),
                major: false,
                label: Some("0".into()),
            });
        }
        for k in k_lo..=k_hi {
            for m in 1..=9u32 {
                let v = f64::from(m) * 10f64.powi(k);
                // Within a part in a million of the ends counts as on them.
                if v < self.lo_ns * (1.0 - 1e-6) || v > self.hi_ns * (1.0 + 1e-6) {
                    continue;
                }
                let labelled = m == 1 || (label_125 && (m == 2 || m == 5));
                out.push(Tick {
                    at: self.frac(v.max(self.lo_ns)),
                    major: m == 1,
                    label: labelled.then(|| format::latency(v, true)),
                });
            }
        }
        out
    }
}

/// HdrHistogram's percentile axis: 1/(1−p) on a log scale from 0 % to a whole decade.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PercentileAxis {
    pub decades: u32,
}

impl PercentileAxis {
    /// The axis that reaches `x_max` (the largest 1/(1−p) drawn).
    pub fn fit(x_max: f64) -> PercentileAxis {
        let decades = (x_max.max(10.0).log10() - 1e-9).ceil() as u32;
        PercentileAxis {
            decades: decades.clamp(1, DECADES_MAX),
        }
    }

    /// The 1/(1−p) at the axis' far end.
    pub fn x_max(&self) -> f64 {
        10f64.powi(self.decades as i32)
    }

    /// Where 1/(1−p) = `x` lies.
    pub fn frac(&self, x: f64) -> f64 {
        (x.max(1.0).log10() / f64::from(self.decades)).min(1.0)
    }

    /// A major line per decade (0 %, 90 %, 99 %, …) and the median, minor.
    pub fn ticks(&self) -> Vec<Tick> {
        let mut out: Vec<Tick> = (0..=self.decades)
            .map(|d| Tick {
                at: f64::from(d) / f64::from(self.decades),
                major: true,
                label: Some(percentile_label(d)),
            })
            .collect();
        out.push(Tick {
            at: self.frac(2.0),
            major: false,
            label: Some("50%".into()),
        });
        out
    }
}

/// The percentile at 1/(1−p) = 10^decade: "0%", "90%", "99%", "99.9%", …
pub fn percentile_label(decade: u32) -> String {
    match decade {
        0 => "0%".into(),
        1 => "90%".into(),
        2 => "99%".into(),
        d => format!("99.{}%", "9".repeat(d as usize - 2)),
    }
}

/// Seconds since a log's start, linear.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeAxis {
    pub from_s: f64,
    pub to_s: f64,
}

/// Tick steps for spans past three minutes: whole minutes and hours.
const TIME_STEPS_LONG_S: [f64; 13] = [
    30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10_800.0, 21_600.0, 43_200.0,
    86_400.0,
];
/// At most about this many labelled ticks on a time axis.
const TIME_TICKS_MAX: f64 = 10.0;

impl TimeAxis {
    pub fn new(from_s: f64, to_s: f64) -> TimeAxis {
        let to_s = if to_s > from_s { to_s } else { from_s + 1.0 };
        TimeAxis { from_s, to_s }
    }

    pub fn frac(&self, s: f64) -> f64 {
        ((s - self.from_s) / (self.to_s - self.from_s)).clamp(0.0, 1.0)
    }

    /// Major, labelled lines at round offsets.
    pub fn ticks(&self) -> Vec<Tick> {
        let span = self.to_s - self.from_s;
        let step = if span <= 180.0 {
            let k = (span / TIME_TICKS_MAX).log10().floor() as i32;
            steps_125(k, k + 1)
                .find(|s| span / s <= TIME_TICKS_MAX)
                .unwrap_or(10f64.powi(k + 1))
        } else {
            TIME_STEPS_LONG_S
                .into_iter()
                .find(|s| span / s <= TIME_TICKS_MAX)
                .unwrap_or(span / TIME_TICKS_MAX)
        };
        let mut out = Vec::new();
        let mut i = (self.from_s / step).ceil();
        while i * step <= self.to_s + step * 1e-9 {
            let s = i * step;
            out.push(Tick {
                at: self.frac(s),
                major: true,
                label: Some(format::clock_offset(s, span, step)),
            });
            i += 1.0;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_tick_labels_are_all_different() {
        for (from, to) in [
            (0.0, 0.4),
            (0.0, 0.04),
            (3.0, 10.0),
            (0.0, 60.0),
            (0.0, 4000.0),
        ] {
            let labels: Vec<String> = TimeAxis::new(from, to)
                .ticks()
                .into_iter()
                .filter_map(|t| t.label)
                .collect();
            let mut distinct = labels.clone();
            distinct.dedup();
            assert_eq!(distinct, labels, "{from}..{to} s");
            assert!(labels.len() >= 2, "{from}..{to} s: {labels:?}");
        }
        let labels: Vec<String> = TimeAxis::new(0.0, 0.4)
            .ticks()
            .into_iter()
            .filter_map(|t| t.label)
            .collect();
        assert_eq!(labels[..4], ["0 s", "0.05 s", "0.1 s", "0.15 s"]);
    }

    #[test]
    fn the_latency_axis_holds_every_value_with_room_at_both_ends() {
        let a = LatencyAxis::fit([82_800.0, 21_774_300.0]);
        assert_eq!((a.lo_ns, a.hi_ns, a.zero), (50_000.0, 50_000_000.0, false));
        let labels: Vec<String> = a.ticks().into_iter().filter_map(|t| t.label).collect();
        assert_eq!(labels, ["100 µs", "1 ms", "10 ms"]);
        let narrow = LatencyAxis::fit([25_000.0, 40_000.0]);
        assert_eq!((narrow.lo_ns, narrow.hi_ns), (10_000.0, 100_000.0));
        let labels: Vec<String> = narrow.ticks().into_iter().filter_map(|t| t.label).collect();
        assert_eq!(labels, ["10 µs", "20 µs", "50 µs", "100 µs"]);
        assert_eq!(LatencyAxis::fit([0.0]).lo_ns, 1.0);
    }

    #[test]
    fn zeros_sit_on_a_band_of_their_own_below_the_log_scale() {
        let a = LatencyAxis::fit([0.0, 7e6, 1.9e9]);
        assert!(a.zero);
        assert_eq!(a.frac(0.0), ZERO_BAND / 2.0);
        assert!((a.frac(a.lo_ns) - ZERO_BAND).abs() < 1e-12);
        let ticks = a.ticks();
        assert_eq!(
            (ticks[0].at, ticks[0].label.as_deref()),
            (ZERO_BAND / 2.0, Some("0"))
        );
        assert!(ticks[1..].iter().all(|t| t.at >= ZERO_BAND));
    }

    #[test]
    fn the_percentile_axis_ends_on_the_decade_that_holds_the_tail() {
        assert_eq!(PercentileAxis::fit(1_000.0).decades, 3);
        assert_eq!(PercentileAxis::fit(1_001.0).decades, 4);
        assert_eq!(PercentileAxis::fit(3.0).decades, 1);
        assert_eq!(PercentileAxis::fit(1e12).decades, DECADES_MAX);
        let a = PercentileAxis { decades: 3 };
        assert!((a.frac(2.0) - 2f64.log10() / 3.0).abs() < 1e-12);
    }

    #[test]
    fn time_ticks_fall_on_round_offsets() {
        let t: Vec<String> = TimeAxis::new(0.0, 3.0)
            .ticks()
            .into_iter()
            .filter_map(|t| t.label)
            .collect();
        assert_eq!(t, ["0 s", "0.5 s", "1 s", "1.5 s", "2 s", "2.5 s", "3 s"]);
        let long: Vec<String> = TimeAxis::new(0.0, 3_600.0)
            .ticks()
            .into_iter()
            .filter_map(|t| t.label)
            .collect();
        assert_eq!(long[1], "0:10:00");
    }
}
