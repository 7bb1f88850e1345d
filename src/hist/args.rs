//! The command line of `bundle-relay hist`: which logs, which intervals, which unit, which
//! pictures. Not the reading (`read`) nor the output (`text`, `plot`).

use std::path::PathBuf;

/// Unit of printed values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Unit {
    Ns,
    Us,
    Ms,
    S,
}

impl Unit {
    pub fn ns(self) -> f64 {
        match self {
            Unit::Ns => 1.0,
            Unit::Us => 1e3,
            Unit::Ms => 1e6,
            Unit::S => 1e9,
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }
}

/// Arguments of `bundle-relay hist`.
#[derive(clap::Args, Clone, Debug)]
pub struct HistArgs {
    /// Interval logs (.hlog); several are merged.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Only intervals starting this many seconds or more after each log's start.
    #[arg(long, value_parser = seconds)]
    pub from: Option<f64>,
    /// Only intervals starting less than this many seconds after each log's start.
    #[arg(long, value_parser = seconds)]
    pub to: Option<f64>,
    /// Only histograms with this tag (e.g. relay_overhead, upstream_round_trip.frankfurt).
    #[arg(long)]
    pub tag: Option<String>,
    /// Unit of the printed values (the plots label each tick in the unit that suits it).
    #[arg(long, value_enum, default_value = "us")]
    pub unit: Unit,
    /// Unit of the values in the logs: nanoseconds in the relay's and bench-load's; other
    /// tools' logs may hold microseconds or milliseconds (what HistogramLogProcessor's
    /// `-outputValueUnitRatio` is told).
    #[arg(long, value_enum, default_value = "ns")]
    pub log_unit: Unit,
    /// Also draw the percentile distributions into this PNG file: a panel per kind of measure
    /// (relay overhead, delivery, limiter wait, upstream round trip by region), log scales.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Also draw latency over time into this PNG file: each interval's p50, p99 and max, a
    /// panel per tag.
    #[arg(long, value_name = "PLOT")]
    pub plot_over_time: Option<PathBuf>,
}

/// `--from` and `--to`: a finite number of seconds (`nan` and `inf` parse as floats, but
/// select nothing or everything without saying so).
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{s} is not a number of seconds")),
    }
}
