//! What one switch of the relay costs, measured A/B in one run: the same engine settings, the
//! same pre-generated bundles and the same rate through the relay with the switch off (A) and
//! on (B), alternating A, B, A, B, … so that drift on a shared machine hits both, each step with
//! a fresh engine and a fresh relay process. The table gives each measure's median over the
//! rounds (with its spread), the ratio B/A and the difference B − A.
//!
//! `bench-demo --tls-cost` is the first user: plaintext HTTP/2 against TLS to the engines, so
//! the difference in relay CPU per delivered bundle is the steady-state cost of TLS (the
//! handshakes happen before each step's load and are not in it).

use std::fmt::Write as _;

use serde::Serialize;

use crate::demo::{self, DemoConfig, StepReport};

/// One side of the comparison.
#[derive(Clone, Debug)]
pub struct Variant {
    pub name: String,
    pub cfg: DemoConfig,
}

/// What an A/B run does: `rounds` steps of each variant at `rate_per_s` for `duration_s`.
#[derive(Clone, Debug)]
pub struct AbConfig {
    pub a: Variant,
    pub b: Variant,
    pub rate_per_s: f64,
    pub duration_s: f64,
    pub rounds: usize,
}

impl AbConfig {
    /// The TLS cost: `base` over plaintext against `base` over TLS, at a short engine interval
    /// (no storm) so the pool never limits the rate and every bundle costs the same work.
    pub fn tls_cost(base: DemoConfig) -> AbConfig {
        let base = DemoConfig {
            interval_ms: 10,
            storm: false,
            rates_per_s: vec![2000.0],
            duration_s: 4.0,
            ..base
        };
        AbConfig {
            a: Variant {
                name: "plaintext h2".into(),
                cfg: DemoConfig {
                    tls: false,
                    ..base.clone()
                },
            },
            b: Variant {
                name: "TLS 1.3".into(),
                cfg: DemoConfig { tls: true, ..base },
            },
            rate_per_s: 2000.0,
            duration_s: 4.0,
            rounds: 3,
        }
    }
}

/// Every step of both variants, in run order per variant.
#[derive(Clone, Debug, Serialize)]
pub struct AbReport {
    pub a_name: String,
    pub b_name: String,
    pub rate_per_s: f64,
    pub duration_s: f64,
    pub a: Vec<StepReport>,
    pub b: Vec<StepReport>,
}

impl AbReport {
    /// Steps whose own verdicts failed (errors, broken accounting, early sends).
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, steps) in [(&self.a_name, &self.a), (&self.b_name, &self.b)] {
            for (i, s) in steps.iter().enumerate() {
                out.extend(
                    s.failures()
                        .into_iter()
                        .map(|f| format!("{name} round {}: {f}", i + 1)),
                );
            }
        }
        out
    }
}

/// Runs the rounds, alternating the variants.
pub fn run(cfg: &AbConfig) -> Result<AbReport, String> {
    if cfg.rounds == 0 {
        return Err("at least one round is needed".into());
    }
    let step = |v: &Variant| -> Result<StepReport, String> {
        let c = DemoConfig {
            rates_per_s: vec![cfg.rate_per_s],
            duration_s: cfg.duration_s,
            ..v.cfg.clone()
        };
        let mut report = demo::run(&c)?;
        report
            .steps
            .pop()
            .ok_or_else(|| format!("{}: the step produced no report", v.name))
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for round in 0..cfg.rounds {
        if cfg.a.cfg.progress {
            eprintln!(
                "bench-demo: round {} of {}: {} then {}",
                round + 1,
                cfg.rounds,
                cfg.a.name,
                cfg.b.name
            );
        }
        a.push(step(&cfg.a)?);
        b.push(step(&cfg.b)?);
    }
    Ok(AbReport {
        a_name: cfg.a.name.clone(),
        b_name: cfg.b.name.clone(),
        rate_per_s: cfg.rate_per_s,
        duration_s: cfg.duration_s,
        a,
        b,
    })
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One measure of a step, with its unit for the table.
struct Measure {
    name: &'static str,
    unit: &'static str,
    decimals: usize,
    get: fn(&StepReport) -> f64,
}

const MEASURES: [Measure; 8] = [
    Measure {
        name: "delivered per second",
        unit: "/s",
        decimals: 1,
        get: |s| s.delivered_per_s,
    },
    Measure {
        name: "errors",
        unit: "",
        decimals: 1,
        get: |s| s.errors as f64,
    },
    Measure {
        name: "relay CPU per delivered bundle",
        unit: "µs",
        decimals: 1,
        get: |s| s.cpu.relay_us_per_delivered,
    },
    Measure {
        name: "relay CPU (cores)",
        unit: "",
        decimals: 2,
        get: |s| s.cpu.relay_cores,
    },
    Measure {
        name: "answer latency p50",
        unit: "µs",
        decimals: 1,
        get: |s| s.load.latency.p50_us,
    },
    Measure {
        name: "answer latency p99",
        unit: "µs",
        decimals: 1,
        get: |s| s.load.latency.p99_us,
    },
    Measure {
        name: "delivery latency p50",
        unit: "µs",
        decimals: 1,
        get: |s| s.engine.latency.p50_us,
    },
    Measure {
        name: "delivery latency p99",
        unit: "µs",
        decimals: 1,
        get: |s| s.engine.latency.p99_us,
    },
];

fn cell(values: &[f64], unit: &str, d: usize) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let m = median(values);
    if values.len() > 1 {
        format!("{m:.d$}{unit} ({lo:.d$}–{hi:.d$})")
    } else {
        format!("{m:.d$}{unit}")
    }
}

/// The whole table: every measure, medians over the rounds with min–max, B/A and B − A.
pub fn render(r: &AbReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "=== {} vs {}: {} rounds each at {:.0}/s for {} s, alternating ===",
        r.a_name,
        r.b_name,
        r.a.len(),
        r.rate_per_s,
        r.duration_s
    );
    let _ = writeln!(
        out,
        "| measure | {} median (min–max) | {} median (min–max) | {}/{} | difference |",
        r.a_name, r.b_name, r.b_name, r.a_name
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for m in &MEASURES {
        let a: Vec<f64> = r.a.iter().map(m.get).collect();
        let b: Vec<f64> = r.b.iter().map(m.get).collect();
        let (ma, mb) = (median(&a), median(&b));
        let ratio = if ma > 0.0 {
            format!("{:.2}×", mb / ma)
        } else {
            "—".into()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {ratio} | {:+.d$}{} |",
            m.name,
            cell(&a, m.unit, m.decimals),
            cell(&b, m.unit, m.decimals),
            mb - ma,
            m.unit,
            d = m.decimals
        );
    }
    out
}

pub fn write_json(report: &AbReport, path: &std::path::Path) -> Result<(), String> {
    let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn the_median_of_an_odd_count_is_the_middle_and_of_an_even_count_the_mean_of_the_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(
            median(&[f64::NAN, 5.0]),
            5.0,
            "a missing figure is left out"
        );
    }
}
