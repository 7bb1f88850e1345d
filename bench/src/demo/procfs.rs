//! What Linux says about CPU time and memory: utime + stime in clock ticks of this process and
//! of each of its threads (by name) from /proc, another process's CPU time (its exited threads
//! included) exactly from its CPU-time clock, and a process's VmRSS and VmHWM. Readers only;
//! what the figures mean for a step is `measure.rs`'s.

use std::collections::HashMap;
use std::path::Path;

/// Per-thread CPU ticks by tid, the latest seen, with the thread's name: a thread that exits
/// between samples keeps its last figure.
#[derive(Default)]
pub(crate) struct CpuSampler {
    ticks: HashMap<u32, (String, u64)>,
}

impl CpuSampler {
    /// Reads every thread of this process once.
    pub(crate) fn sample(&mut self) {
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((name, t)) = read_stat(&e.path().join("stat")) {
                let entry = self.ticks.entry(tid).or_insert((name.clone(), 0));
                entry.0 = name;
                entry.1 = entry.1.max(t);
            }
        }
    }

    /// Ticks of every thread whose name starts with `prefix`.
    pub(crate) fn by_prefix(&self, prefix: &str) -> u64 {
        self.ticks
            .values()
            .filter(|(n, _)| n.starts_with(prefix))
            .map(|(_, t)| t)
            .sum()
    }
}

/// (comm, utime + stime) from a /proc stat file.
fn read_stat(path: &Path) -> Option<(String, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text[open + 1..close].to_string();
    // After ") ": state is field 3; utime and stime are fields 14 and 15.
    let rest: Vec<&str> = text[close + 2..].split_whitespace().collect();
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

/// utime + stime of this whole process (its exited threads included), in clock ticks.
pub(crate) fn process_ticks() -> u64 {
    read_stat(Path::new("/proc/self/stat")).map_or(0, |(_, t)| t)
}

/// utime + stime of a whole process (its exited threads included), in clock ticks.
pub(crate) fn pid_ticks(pid: u32) -> u64 {
    read_stat(Path::new(&format!("/proc/{pid}/stat"))).map_or(0, |(_, t)| t)
}

/// CPU time of a whole process (every thread, exited ones included) in nanoseconds, read from
/// its CPU-time clock: exact, where /proc's utime + stime come in clock ticks (10 ms), which is
/// a tenth of what bench-null spends in a 5 s round. `None` when the process is gone.
pub(crate) fn pid_cpu_ns(pid: u32) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: `clock` is a valid out-pointer for the call's duration.
    if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the call's duration.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(u64::try_from(ts.tv_sec).ok()? * 1_000_000_000 + u64::try_from(ts.tv_nsec).ok()?)
}

/// Microseconds per clock tick.
pub(crate) fn tick_us() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1e6 / if hz > 0 { hz as f64 } else { 100.0 }
}

/// A process's memory, from /proc/<pid>/status: (VmRSS, VmHWM) in KiB.
pub fn read_mem_kb(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_mem_kb(&text)
}

/// (VmRSS, VmHWM) in KiB from the text of a /proc status file.
pub fn parse_mem_kb(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_status_yields_rss_and_its_high_water_mark_in_kib() {
        let text =
            "Name:\tbench-demo\nVmPeak:\t  900000 kB\nVmHWM:\t   212000 kB\nVmRSS:\t   61000 kB\n";
        assert_eq!(parse_mem_kb(text), Some((61_000, 212_000)));
        assert_eq!(parse_mem_kb("Name:\tx\nVmRSS:\t 5 kB\n"), None, "no VmHWM");
    }

    #[test]
    fn a_process_cpu_time_reads_finer_than_the_clock_tick() {
        let me = std::process::id();
        let before = pid_cpu_ns(me).expect("this process's CPU clock");
        // Spin until this thread alone has spent 15 ms: /proc's ticks would read 10 or 20.
        let thread_ns = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid out-pointer.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        let start = thread_ns();
        while thread_ns() - start < 15_000_000 {
            std::hint::spin_loop();
        }
        let spent = pid_cpu_ns(me).unwrap() - before;
        assert!(spent >= 15_000_000, "{spent} ns");
        assert_ne!(spent % 10_000_000, 0, "{spent} ns: whole ticks");
        assert_eq!(pid_cpu_ns(u32::MAX), None, "no such process");
    }

    #[test]
    fn thread_stat_lines_yield_name_and_ticks() {
        let dir = std::env::temp_dir().join(format!("demo-stat-{}", std::process::id()));
        std::fs::write(
            &dir,
            "123 (demo relay) S 1 2 3 4 5 6 7 8 9 10 40 2 0 0 20 0 1 0\n",
        )
        .unwrap();
        assert_eq!(read_stat(&dir), Some(("demo relay".to_string(), 42)));
        std::fs::remove_file(&dir).unwrap();
    }
}
