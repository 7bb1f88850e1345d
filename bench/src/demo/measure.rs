//! A step's measured window, from the load's start until the relay settled: a sampler thread
//! (`demo-cpu`) reads every thread's CPU ticks and the relay process's RSS every
//! [`CPU_SAMPLE_PERIOD`] and prints the live progress line each second; closing the window
//! turns the ticks into each component's CPU. In a process of its own the relay's CPU is that
//! process's; on threads of this one it is its threads'. The load's CPU is this process's over
//! the window (exited threads included) less the engine's, the relay threads' and the
//! sampler's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::host::{ENGINE_THREAD, RELAY_THREAD};
use super::procfs::{CpuSampler, pid_cpu_ns, process_ticks, read_mem_kb, tick_us};
use super::relay_run::RelayProbe;
use super::results::{CpuFigures, RelayMemory};
use crate::engine::EngineHandle;

/// How often the CPU sampler reads /proc: short, so a thread that exits loses little.
const CPU_SAMPLE_PERIOD: Duration = Duration::from_millis(50);
/// How often the live progress line is printed.
const PROGRESS_PERIOD: Duration = Duration::from_secs(1);
const SAMPLER_THREAD: &str = "demo-cpu";
/// bundle-relay names its reactor threads `relay-N`.
const REACTOR_THREAD: &str = "relay-";

/// The relay's threads in this process: its holder runtime and bundle-relay's reactors.
fn relay_thread_ticks(s: &CpuSampler) -> u64 {
    s.by_prefix(RELAY_THREAD) + s.by_prefix(REACTOR_THREAD)
}

/// What the sampler thread watches and how it reports.
pub(super) struct Watched {
    pub(super) relay_pid: Option<u32>,
    pub(super) engine: Arc<EngineHandle>,
    pub(super) relay: RelayProbe,
    pub(super) rate_per_s: f64,
    pub(super) progress: bool,
}

/// The sampler thread.
pub(super) struct Monitor {
    sampler: Arc<Mutex<CpuSampler>>,
    rss_max_kb: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    join: JoinHandle<()>,
    relay_pid: Option<u32>,
}

/// The readings at the window's start.
pub(super) struct Window {
    start: Instant,
    process_ticks: u64,
    /// The relay process's CPU clock (exact; its own process only).
    relay_process_ns: Option<u64>,
    relay_rss_kb: u64,
    relay_thread_ticks: u64,
    engine_ticks: u64,
    sampler_ticks: u64,
}

/// A closed window's CPU per component (the relay's in µs, the others in ticks) and the relay
/// process's memory.
pub(super) struct Measured {
    /// 0 where a reading failed: no figure, which no verdict takes as met.
    relay_us: f64,
    engine_ticks: u64,
    load_ticks: u64,
    window_us: f64,
    relay_in_own_process: bool,
    pub(super) memory: Option<RelayMemory>,
}

impl Monitor {
    pub(super) fn start(w: Watched) -> Result<Monitor, String> {
        let sampler = Arc::new(Mutex::new(CpuSampler::default()));
        let rss_max_kb = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let relay_pid = w.relay_pid;
        let join = {
            let (sampler, rss_max_kb, done) = (sampler.clone(), rss_max_kb.clone(), done.clone());
            std::thread::Builder::new()
                .name(SAMPLER_THREAD.into())
                .spawn(move || {
                    let start = Instant::now();
                    let mut next_print = PROGRESS_PERIOD;
                    while !done.load(Ordering::Relaxed) {
                        sampler.lock().expect("sampler").sample();
                        if let Some((rss, _)) = w.relay_pid.and_then(read_mem_kb) {
                            rss_max_kb.fetch_max(rss, Ordering::Relaxed);
                        }
                        if w.progress && start.elapsed() >= next_print {
                            eprintln!("{}", progress_line(&w, next_print));
                            next_print += PROGRESS_PERIOD;
                        }
                        std::thread::sleep(CPU_SAMPLE_PERIOD);
                    }
                    sampler.lock().expect("sampler").sample();
                })
                .map_err(|e| format!("spawning the sampler: {e}"))?
        };
        Ok(Monitor {
            sampler,
            rss_max_kb,
            done,
            join,
            relay_pid,
        })
    }

    /// Marks the start of the measured window.
    pub(super) fn open_window(&self) -> Window {
        let mut s = self.sampler.lock().expect("sampler");
        s.sample();
        Window {
            start: Instant::now(),
            process_ticks: process_ticks(),
            relay_process_ns: self.relay_pid.and_then(pid_cpu_ns),
            relay_rss_kb: self.relay_pid.and_then(read_mem_kb).map_or(0, |(r, _)| r),
            relay_thread_ticks: relay_thread_ticks(&s),
            engine_ticks: s.by_prefix(ENGINE_THREAD),
            sampler_ticks: s.by_prefix(SAMPLER_THREAD),
        }
    }

    /// Ends the window, stops the sampler thread, and returns what the window measured.
    pub(super) fn close(self, w: Window) -> Measured {
        self.sampler.lock().expect("sampler").sample();
        let process_ticks = process_ticks().saturating_sub(w.process_ticks);
        let relay_process_us = match (w.relay_process_ns, self.relay_pid.and_then(pid_cpu_ns)) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e3,
            _ => 0.0,
        };
        let window_us = w.start.elapsed().as_secs_f64() * 1e6;
        let memory = self.relay_pid.map(|pid| {
            let (rss, hwm) = read_mem_kb(pid).unwrap_or((0, 0));
            RelayMemory {
                pid,
                rss_kb_at_load_start: w.relay_rss_kb,
                rss_kb_max: self.rss_max_kb.load(Ordering::Relaxed).max(rss),
                hwm_kb: hwm,
            }
        });
        self.done.store(true, Ordering::Relaxed);
        let _ = self.join.join();
        let s = self.sampler.lock().expect("sampler");
        let relay_thread = relay_thread_ticks(&s) - w.relay_thread_ticks;
        let engine_ticks = s.by_prefix(ENGINE_THREAD) - w.engine_ticks;
        let sampler_ticks = s.by_prefix(SAMPLER_THREAD).saturating_sub(w.sampler_ticks);
        let (relay_us, relay_in_this_process) = match self.relay_pid {
            Some(_) => (relay_process_us, 0),
            None => (relay_thread as f64 * tick_us(), relay_thread),
        };
        Measured {
            relay_us,
            engine_ticks,
            load_ticks: process_ticks
                .saturating_sub(relay_in_this_process + engine_ticks + sampler_ticks),
            window_us,
            relay_in_own_process: self.relay_pid.is_some(),
            memory,
        }
    }
}

/// `[demo  Ns] offered …/s | relay … | engine …`.
fn progress_line(w: &Watched, at: Duration) -> String {
    let e = w.engine.stats();
    let relay = match w.relay.stats() {
        Ok(r) => format!(
            "relay admitted {} delivered {} in flight {} retries {} refused {}",
            r.admitted,
            r.delivered,
            r.in_flight,
            r.retries,
            r.refused_cap + r.refused_backlog
        ),
        Err(e) => format!("relay: {e}"),
    };
    let rss = w
        .relay_pid
        .and_then(read_mem_kb)
        .map_or(String::new(), |(rss, _)| format!(" rss {} MiB", rss / 1024));
    format!(
        "[demo {:>3}s] offered {:.0}/s | {relay}{rss} | engine accepted {} early sends {} storm {}",
        at.as_secs(),
        w.rate_per_s,
        e.accepted,
        e.early_sends,
        e.faults.get("storm").copied().unwrap_or(0)
    )
}

impl Measured {
    /// Each component's CPU, in total and per delivered bundle, and in cores over the window.
    pub(super) fn cpu(&self, delivered: u64) -> CpuFigures {
        let us = tick_us();
        let delivered = delivered.max(1) as f64;
        let window_us = self.window_us.max(1.0);
        let (relay, engine, load) = (
            self.relay_us,
            self.engine_ticks as f64 * us,
            self.load_ticks as f64 * us,
        );
        CpuFigures {
            relay_us: relay as u64,
            engine_us: engine as u64,
            load_us: load as u64,
            relay_us_per_delivered: relay / delivered,
            engine_us_per_delivered: engine / delivered,
            load_us_per_delivered: load / delivered,
            window_us: self.window_us as u64,
            relay_cores: relay / window_us,
            engine_cores: engine / window_us,
            load_cores: load / window_us,
            relay_in_own_process: self.relay_in_own_process,
        }
    }
}
