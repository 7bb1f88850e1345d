//! A step's measured window, from the load's start until the engine stopped receiving: CPU
//! ticks (utime + stime, /proc, as `demo::measure` reads them) of the HAProxy process, of each
//! relay process, of the engine's thread and of the rest of this process (the load), and a
//! live progress line each second from a sampler thread (`haproxy-cpu`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::demo::{CpuSampler, ENGINE_THREAD, pid_ticks, process_ticks, tick_us};
use crate::engine::EngineHandle;

/// How often the progress line is printed (and the CPU it shows read).
const PROGRESS_PERIOD: Duration = Duration::from_secs(1);
const SAMPLER_POLL: Duration = Duration::from_millis(50);
/// This mode's own threads (the sampler, the relays' output readers): not the load's CPU.
pub(crate) const OWN_THREADS: &str = "haproxy-";

/// Which processes a window watches.
#[derive(Clone)]
pub(crate) struct Pids {
    pub(crate) haproxy: Option<u32>,
    pub(crate) relays: Vec<u32>,
}

/// CPU over a step's window, µs, per component.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ShapeCpu {
    pub haproxy_us: u64,
    /// Every relay process together.
    pub relays_us: u64,
    /// Each relay process.
    pub relay_us: Vec<u64>,
    pub engine_us: u64,
    pub load_us: u64,
    pub window_us: u64,
}

impl ShapeCpu {
    /// `us` over the window in cores (1.0: one core busy throughout).
    pub fn cores(&self, us: u64) -> f64 {
        us as f64 / self.window_us.max(1) as f64
    }
}

/// The window's readings at its start, and the sampler printing progress.
pub(crate) struct Window {
    pids: Pids,
    start: Instant,
    process: u64,
    haproxy: u64,
    relays: Vec<u64>,
    engine: u64,
    own: u64,
    done: Arc<AtomicBool>,
    sampler: JoinHandle<()>,
}

fn thread_ticks(prefix: &str) -> u64 {
    let mut s = CpuSampler::default();
    s.sample();
    s.by_prefix(prefix)
}

impl Window {
    /// Opens the window; with `progress`, prints `label`'s line each second until closed.
    pub(crate) fn open(
        pids: Pids,
        engine: Arc<EngineHandle>,
        label: String,
        progress: bool,
    ) -> Result<Window, String> {
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let watched = pids.clone();
        let sampler = std::thread::Builder::new()
            .name(format!("{OWN_THREADS}cpu"))
            .spawn(move || progress_loop(&watched, &engine, &label, progress, &stop))
            .map_err(|e| format!("spawning the sampler: {e}"))?;
        Ok(Window {
            start: Instant::now(),
            process: process_ticks(),
            haproxy: pids.haproxy.map_or(0, pid_ticks),
            relays: pids.relays.iter().map(|&p| pid_ticks(p)).collect(),
            engine: thread_ticks(ENGINE_THREAD),
            own: thread_ticks(OWN_THREADS),
            pids,
            done,
            sampler,
        })
    }

    /// Closes the window (the processes still run) and returns its CPU.
    pub(crate) fn close(self) -> ShapeCpu {
        let us = tick_us();
        let window_us = self.start.elapsed().as_secs_f64() * 1e6;
        self.done.store(true, Ordering::Relaxed);
        let _ = self.sampler.join();
        let relay_ticks: Vec<u64> = self
            .pids
            .relays
            .iter()
            .zip(&self.relays)
            .map(|(&p, &t0)| pid_ticks(p).saturating_sub(t0))
            .collect();
        let haproxy = self
            .pids
            .haproxy
            .map_or(0, pid_ticks)
            .saturating_sub(self.haproxy);
        let engine = thread_ticks(ENGINE_THREAD).saturating_sub(self.engine);
        let own = thread_ticks(OWN_THREADS).saturating_sub(self.own);
        let process = process_ticks().saturating_sub(self.process);
        let to_us = |t: u64| (t as f64 * us) as u64;
        ShapeCpu {
            haproxy_us: to_us(haproxy),
            relays_us: to_us(relay_ticks.iter().sum()),
            relay_us: relay_ticks.iter().map(|&t| to_us(t)).collect(),
            engine_us: to_us(engine),
            load_us: to_us(process.saturating_sub(engine + own)),
            window_us: window_us as u64,
        }
    }
}

/// Each second: what the engine accepted, its early sends, and the last second's CPU of
/// HAProxy and of the relays, in cores.
fn progress_loop(
    pids: &Pids,
    engine: &EngineHandle,
    label: &str,
    progress: bool,
    done: &AtomicBool,
) {
    let start = Instant::now();
    let read = || {
        (
            pids.haproxy.map_or(0, pid_ticks),
            pids.relays.iter().map(|&p| pid_ticks(p)).sum::<u64>(),
        )
    };
    let mut last = (read(), Instant::now());
    let mut next = PROGRESS_PERIOD;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(SAMPLER_POLL);
        if !progress || start.elapsed() < next {
            continue;
        }
        next += PROGRESS_PERIOD;
        let now = (read(), Instant::now());
        let secs_us = now.1.duration_since(last.1).as_secs_f64() * 1e6;
        let cores = |a: u64, b: u64| a.saturating_sub(b) as f64 * tick_us() / secs_us.max(1.0);
        let e = engine.stats();
        let haproxy = match pids.haproxy {
            Some(_) => format!("haproxy {:.2} ", cores(now.0.0, last.0.0)),
            None => String::new(),
        };
        eprintln!(
            "[haproxy {:>3}s] {label} | engine accepted {} early sends {} | CPU {haproxy}relays {:.2} cores",
            start.elapsed().as_secs(),
            e.accepted,
            e.early_sends,
            cores(now.0.1, last.0.1),
        );
        last = now;
    }
}
