//! bench-demo `--relays N --haproxy`: what HAProxy in front of N relays costs against one
//! relay, side by side in one run. At each rate, on the same pre-generated bundles and one
//! egress list:
//! 1. one relay owning the whole list (`bundle-relay run`, N reactor threads), the load straight
//!    at its intake;
//! 2. N relays, each `bundle-relay run --egress-slice K/N` (one reactor thread each, so both
//!    shapes run N reactor threads), behind HAProxy configured from the shipped
//!    `deploy/haproxy/haproxy.cfg`, the load at HAProxy.
//!
//! Each step has a fresh engine (on a thread of this process), fresh relay processes and a
//! fresh HAProxy, so its row stands alone. Measured per step: what the load was answered, what
//! the engine received and when, its early sends (a pair paced by two relays shows as one), CPU
//! (utime + stime from /proc) of HAProxy, of each relay, of the engine and of the load, and
//! HAProxy's own count of the requests it sent each relay. A step fails on broken relay
//! accounting or an early send; the run fails too when HAProxy left a relay without requests.
//!
//! | file | job |
//! |---|---|
//! | `template.rs` | the shipped HAProxy config on this run's ports, one server line per relay |
//! | `proxy.rs` | HAProxy as a process: started, ready, its `show stat` per relay |
//! | `relay_proc.rs` | one `bundle-relay run` process: config file, ready, stopped, its accounting |
//! | `measure.rs` | a step's CPU window and the live progress line |
//! | `step.rs` | one shape at one rate, every process fresh |
//! | `render.rs` | the tables |

mod measure;
mod proxy;
mod relay_proc;
mod render;
mod step;
mod template;

use std::path::PathBuf;

use serde::Serialize;

pub use measure::ShapeCpu;
pub use proxy::ServerStat;
pub use render::render;
pub use step::{Shape, ShapeStep};

use crate::demo::{self, DemoConfig};

/// Rates offered by default: what one relay, the engine and the load sustain together on 2
/// shared cores with HAProxy's CPU on top (at 8,000/s the HAProxy shape's tail reached
/// hundreds of ms on this machine).
pub const RATES_DEFAULT: &str = "2000,4000,6000";
/// Seconds of load per step by default: 2 shapes x 3 rates stay near a minute in all.
pub const DURATION_S_DEFAULT: f64 = 5.0;
/// Pacing interval by default: 256 addresses x 8 regions at 100 ms carry 20,480 bundles/s,
/// far above the rates, so the pool never holds a step back.
pub const INTERVAL_MS_DEFAULT: u64 = 100;

/// What `--relays N --haproxy` runs; `base` gives the egress, interval, connections, mixes,
/// seed, in-flight cap and progress.
#[derive(Clone, Debug)]
pub struct HaproxyConfig {
    pub base: DemoConfig,
    pub relays: usize,
    pub rates_per_s: Vec<f64>,
    pub duration_s: f64,
    /// The `bundle-relay` binary (by default beside bench-demo).
    pub relay_bin: PathBuf,
    pub haproxy_bin: PathBuf,
}

#[derive(Clone, Debug, Serialize)]
pub struct HaproxyReport {
    pub relays: usize,
    pub egress_addresses: usize,
    pub interval_ms: u64,
    pub cores: usize,
    /// In run order: at each rate, one relay then HAProxy.
    pub steps: Vec<ShapeStep>,
}

impl HaproxyReport {
    /// Each step's failures, and every relay HAProxy sent no request.
    pub fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self.steps.iter().flat_map(|s| s.failures()).collect();
        for s in &self.steps {
            for server in s.servers.iter().filter(|s| s.requests == 0) {
                f.push(format!(
                    "HAProxy sent {} no request at {}/s",
                    server.name, s.rate_per_s
                ));
            }
        }
        f
    }
}

impl HaproxyConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.relays < 2 {
            return Err("--haproxy needs --relays 2 or more".into());
        }
        if self.relays > self.base.egress.len() {
            return Err(format!(
                "--relays {}: {} egress addresses leave some relay none",
                self.relays,
                self.base.egress.len()
            ));
        }
        if !self.relay_bin.exists() {
            return Err(format!(
                "{} is missing: cargo build --release --bin bundle-relay",
                self.relay_bin.display()
            ));
        }
        DemoConfig {
            rates_per_s: self.rates_per_s.clone(),
            duration_s: self.duration_s,
            ..self.base.clone()
        }
        .validate()
    }
}

/// Every rate, one relay then HAProxy + N relays.
pub fn run(cfg: &HaproxyConfig) -> Result<HaproxyReport, String> {
    cfg.validate()?;
    let max_rate = cfg.rates_per_s.iter().cloned().fold(0.0, f64::max);
    let load = demo::generate(&cfg.base, (max_rate * cfg.duration_s).ceil() as u64)?;
    let mut steps = Vec::new();
    for &rate in &cfg.rates_per_s {
        for shape in [Shape::OneRelay, Shape::Haproxy { relays: cfg.relays }] {
            steps.push(step::run_step(cfg, shape, rate, &load.bundles)?);
        }
    }
    Ok(HaproxyReport {
        relays: cfg.relays,
        egress_addresses: cfg.base.egress.len(),
        interval_ms: cfg.base.interval_ms,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        steps,
    })
}
