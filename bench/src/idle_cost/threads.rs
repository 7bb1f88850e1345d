//! Another process's threads as /proc shows them: each thread's name, its time on a CPU in
//! nanoseconds (`schedstat`'s first field, exact for a sleeping thread where utime + stime
//! move in 10 ms ticks) and its context switches, voluntary and not (each one a wake-up: a
//! thread that sleeps and is woken switches out once per sleep). Two snapshots make a
//! window's figures, summed by what the thread is ([`Role`]). Readers only.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

/// What a relay process's thread is, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Role {
    /// bundle-relay's reactor threads, `relay-N`.
    Reactor,
    /// bundle-relay's log thread, `log`.
    Log,
    /// Everything else: in the demo's relay process its serving loop (the main thread, a
    /// look for a stop signal every 50 ms, as `run`'s supervisor looks every 100 ms), the
    /// stdin reader and the runtime that holds the relay's handle.
    Rest,
}

impl Role {
    /// `relay-` followed by digits only is a reactor (`relay-stdin` is the demo's reader).
    pub fn of(name: &str) -> Role {
        match name.strip_prefix("relay-") {
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => Role::Reactor,
            _ if name == "log" => Role::Log,
            _ => Role::Rest,
        }
    }
}

/// One thread at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadReading {
    pub name: String,
    pub cpu_ns: u64,
    /// Voluntary + involuntary context switches.
    pub switches: u64,
}

/// Every thread of a process at one moment, by thread id.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub threads: BTreeMap<u32, ThreadReading>,
}

/// One thread over a window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadFigure {
    pub name: String,
    pub role: Role,
    pub cpu_ns: u64,
    pub switches: u64,
}

impl Snapshot {
    /// Reads every thread of `pid`; a thread that exits while it is read is left out.
    pub fn of(pid: u32) -> Result<Snapshot, String> {
        let dir = format!("/proc/{pid}/task");
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))?;
        let mut threads = BTreeMap::new();
        for e in entries.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(r) = read_thread(&e.path()) {
                threads.insert(tid, r);
            }
        }
        Ok(Snapshot { threads })
    }

    /// Each thread's figures from `earlier` to this snapshot (a thread born since counts from
    /// zero; one that exited meanwhile is not seen), heaviest first.
    pub fn since(&self, earlier: &Snapshot) -> Vec<ThreadFigure> {
        let mut out: Vec<ThreadFigure> = self
            .threads
            .iter()
            .map(|(tid, now)| {
                let (cpu0, sw0) = earlier
                    .threads
                    .get(tid)
                    .map_or((0, 0), |t| (t.cpu_ns, t.switches));
                ThreadFigure {
                    name: now.name.clone(),
                    role: Role::of(&now.name),
                    cpu_ns: now.cpu_ns.saturating_sub(cpu0),
                    switches: now.switches.saturating_sub(sw0),
                }
            })
            .collect();
        out.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then(a.name.cmp(&b.name)));
        out
    }
}

/// (CPU ns, switches) of the threads in `role`.
pub fn sum(figures: &[ThreadFigure], role: Option<Role>) -> (u64, u64) {
    figures
        .iter()
        .filter(|f| role.is_none_or(|r| f.role == r))
        .fold((0, 0), |(c, s), f| (c + f.cpu_ns, s + f.switches))
}

/// A thread's name, CPU ns and context switches from its /proc/PID/task/TID directory.
fn read_thread(dir: &Path) -> Option<ThreadReading> {
    let name = std::fs::read_to_string(dir.join("comm")).ok()?;
    let cpu_ns = parse_schedstat(&std::fs::read_to_string(dir.join("schedstat")).ok()?)?;
    let switches = parse_switches(&std::fs::read_to_string(dir.join("status")).ok()?)?;
    Some(ThreadReading {
        name: name.trim_end().to_string(),
        cpu_ns,
        switches,
    })
}

/// Time on a CPU in ns: the first of schedstat's three fields.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// voluntary_ctxt_switches + nonvoluntary_ctxt_switches from a /proc status file.
pub fn parse_switches(text: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].trim().parse().ok()
    };
    Some(field("voluntary_ctxt_switches:")? + field("nonvoluntary_ctxt_switches:")?)
}

/// Open files of a process (`/proc/PID/fd` entries; `self` for this one).
pub fn open_files(pid: &str) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reactor_threads_are_relay_and_digits_only() {
        assert_eq!(Role::of("relay-0"), Role::Reactor);
        assert_eq!(Role::of("relay-15"), Role::Reactor);
        assert_eq!(Role::of("relay-stdin"), Role::Rest);
        assert_eq!(Role::of("relay-"), Role::Rest);
        assert_eq!(Role::of("log"), Role::Log);
        assert_eq!(Role::of("bench-demo"), Role::Rest);
    }

    #[test]
    fn proc_files_yield_nanoseconds_and_both_kinds_of_switch() {
        assert_eq!(parse_schedstat("84277363 450006682 44\n"), Some(84_277_363));
        let status = "Name:\trelay-0\nvoluntary_ctxt_switches:\t906\n\
                      nonvoluntary_ctxt_switches:\t71\n";
        assert_eq!(parse_switches(status), Some(977));
        assert_eq!(parse_switches("voluntary_ctxt_switches:\t9\n"), None);
    }

    #[test]
    fn a_window_is_the_difference_and_a_new_thread_counts_from_zero() {
        let reading = |name: &str, cpu_ns, switches| ThreadReading {
            name: name.into(),
            cpu_ns,
            switches,
        };
        let mut a = Snapshot::default();
        a.threads.insert(1, reading("relay-0", 1_000, 10));
        a.threads.insert(2, reading("log", 500, 5));
        let mut b = Snapshot::default();
        b.threads.insert(1, reading("relay-0", 4_000, 30));
        b.threads.insert(2, reading("log", 700, 15));
        b.threads.insert(3, reading("relay-stdin", 50, 1));
        let f = b.since(&a);
        assert_eq!(f[0].name, "relay-0");
        assert_eq!(sum(&f, Some(Role::Reactor)), (3_000, 20));
        assert_eq!(sum(&f, Some(Role::Log)), (200, 10));
        assert_eq!(sum(&f, Some(Role::Rest)), (50, 1));
        assert_eq!(sum(&f, None), (3_250, 31));
    }

    #[test]
    fn this_process_can_be_read() {
        let s = Snapshot::of(std::process::id()).unwrap();
        assert!(!s.threads.is_empty());
        assert!(open_files("self").unwrap() >= 3);
    }
}
