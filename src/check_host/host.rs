//! The CPU, clock, memory and interrupt facts a latency engineer looks at first, read from a
//! `/proc` and `/sys` tree (the host's, or a fake one in tests).

use std::path::Path;

use super::report::{Check, Level};

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel))
        .ok()
        .map(|s| s.trim().to_string())
}

/// A CPU list as the kernel writes it (`0-3,8,10-11`); empty for an empty string.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// `cpus` written as the kernel writes a CPU list.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// The limiter reads the TSC: it must be the kernel's clocksource or at least invariant.
pub fn clock(root: &Path) -> Vec<Check> {
    let source = read(
        root,
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
    );
    let cpuinfo = read(root, "proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags")?.split_once(':').map(|(_, f)| f))
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let invariant = flags.contains(&"constant_tsc") && flags.contains(&"nonstop_tsc");
    let mut out = vec![match source.as_deref() {
        Some("tsc") => Check::new(Level::Ok, "clocksource", "tsc", "tsc", ""),
        Some(other) => Check::new(
            Level::Warn,
            "clocksource",
            other,
            "tsc",
            "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource \
             (for good: tsc=reliable clocksource=tsc on the kernel command line); a VM's \
             kvm-clock is slower to read but correct",
        ),
        None => Check::new(Level::Warn, "clocksource", "unreadable", "tsc", ""),
    }];
    out.push(if invariant {
        Check::new(
            Level::Ok,
            "invariant TSC",
            "constant_tsc nonstop_tsc",
            "constant_tsc nonstop_tsc",
            "",
        )
    } else {
        Check::new(
            Level::Warn,
            "invariant TSC",
            format!(
                "{}{}",
                if flags.contains(&"constant_tsc") {
                    "constant_tsc"
                } else {
                    "no constant_tsc"
                },
                if flags.contains(&"nonstop_tsc") {
                    " nonstop_tsc"
                } else {
                    ", no nonstop_tsc"
                }
            ),
            "constant_tsc nonstop_tsc",
            "a CPU (or hypervisor CPU model) with an invariant TSC: the limiter's clock \
             calibrates the TSC once (`bundle-relay clock` shows it)",
        )
    });
    out
}

/// Frequency scaling: `performance` keeps reactor cores from clocking down between bursts.
pub fn governor(root: &Path) -> Check {
    let base = root.join("sys/devices/system/cpu");
    let mut found: Vec<(usize, String)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir(&base) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(n) = name
                .strip_prefix("cpu")
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            if let Ok(g) = std::fs::read_to_string(e.path().join("cpufreq/scaling_governor")) {
                found.push((n, g.trim().to_string()));
            }
        }
    }
    found.sort();
    if found.is_empty() {
        return Check::new(
            Level::Ok,
            "cpu frequency governor",
            "no cpufreq (fixed frequency, or set by the hypervisor)",
            "performance",
            "",
        );
    }
    let slow: Vec<usize> = found
        .iter()
        .filter(|(_, g)| g != "performance")
        .map(|(n, _)| *n)
        .collect();
    if slow.is_empty() {
        Check::new(
            Level::Ok,
            "cpu frequency governor",
            "performance on every cpu",
            "performance",
            "",
        )
    } else {
        let first = &found.iter().find(|(n, _)| *n == slow[0]).unwrap().1;
        Check::new(
            Level::Warn,
            "cpu frequency governor",
            format!("{first} on cpus {}", cpu_list(&slow)),
            "performance",
            "cpupower frequency-set -g performance (or echo performance | tee \
             /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)",
        )
    }
}

/// The bracketed choice of a `/sys/kernel/mm/transparent_hugepage` file.
fn chosen(text: &str) -> Option<&str> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
}

/// Transparent huge pages: `always` lets khugepaged and direct compaction stall a reactor for
/// milliseconds; the relay's memory is preallocated and prefaulted, so it gains nothing.
pub fn thp(root: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    for (file, name, fix) in [
        (
            "sys/kernel/mm/transparent_hugepage/enabled",
            "transparent hugepages",
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (for good: \
             transparent_hugepage=madvise on the kernel command line)",
        ),
        (
            "sys/kernel/mm/transparent_hugepage/defrag",
            "transparent hugepage defrag",
            "echo madvise > /sys/kernel/mm/transparent_hugepage/defrag",
        ),
    ] {
        out.push(match read(root, file).as_deref().and_then(chosen) {
            Some(v @ ("madvise" | "never" | "defer" | "defer+madvise")) => {
                Check::new(Level::Ok, name, v, "madvise or never", "")
            }
            Some(v) => Check::new(Level::Warn, name, v, "madvise or never", fix),
            None => Check::new(Level::Ok, name, "absent", "madvise or never", ""),
        });
    }
    out
}

/// Isolated cores and interrupts: where the kernel isolates cores (`isolcpus=`), the reactor
/// cores should be among them and no device interrupt should land on them.
/// The fix for interrupts on the `guarded` cores: a command for the first one (`irq`), with the
/// online cores no reactor runs on (the host's, else the `cpus` this process may use); with
/// none left, that a core must be left for interrupts first.
fn irq_fix(root: &Path, guarded: &[usize], cpus: &[usize], irq: u32) -> String {
    let online = read(root, "sys/devices/system/cpu/online")
        .and_then(|s| parse_cpu_list(&s))
        .unwrap_or_else(|| cpus.to_vec());
    let housekeeping: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !guarded.contains(c))
        .collect();
    if housekeeping.is_empty() {
        return format!(
            "every online core ({}) runs a reactor thread, so none is left for interrupts: \
             give the relay fewer threads (threads = {}) or a host with more cores, then move \
             the interrupts to the cores left (HARDWARE.md, \"Core layout\")",
            cpu_list(&online),
            guarded.len().saturating_sub(1).max(1)
        );
    }
    format!(
        "stop irqbalance (systemctl disable --now irqbalance) and write the housekeeping cores \
         into /proc/irq/N/smp_affinity_list for each (HARDWARE.md, \"Core layout\"), e.g. echo \
         {} > /proc/irq/{irq}/smp_affinity_list",
        cpu_list(&housekeeping)
    )
}

pub fn cores(root: &Path, reactor_cpus: &[usize], cpus: &[usize]) -> Vec<Check> {
    let isolated = read(root, "sys/devices/system/cpu/isolated")
        .and_then(|s| parse_cpu_list(&s))
        .unwrap_or_default();
    let mut out = Vec::new();
    if isolated.is_empty() {
        out.push(Check::new(
            Level::Ok,
            "isolated cores",
            "none",
            "reactor cores isolated where the host reserves cores (optional)",
            "",
        ));
    } else {
        let outside: Vec<usize> = reactor_cpus
            .iter()
            .copied()
            .filter(|c| !isolated.contains(c))
            .collect();
        out.push(if outside.is_empty() {
            Check::new(
                Level::Ok,
                "isolated cores",
                cpu_list(&isolated),
                format!("reactor cores {} among them", cpu_list(reactor_cpus)),
                "",
            )
        } else {
            Check::new(
                Level::Warn,
                "isolated cores",
                cpu_list(&isolated),
                format!("reactor cores {} among them", cpu_list(reactor_cpus)),
                format!(
                    "CPUAffinity={} in the unit (systemctl edit bundle-relay), so the reactors \
                     run on the isolated cores",
                    cpu_list(&isolated)
                ),
            )
        });
    }
    // Interrupts whose affinity includes a reactor core (or an isolated one).
    let guarded: Vec<usize> = if isolated.is_empty() {
        reactor_cpus.to_vec()
    } else {
        isolated.clone()
    };
    let mut hits: Vec<(u32, Vec<usize>)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir(root.join("proc/irq")) {
        for e in dir.flatten() {
            let Ok(irq) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            // An interrupt no device uses has no action folder: nothing lands anywhere.
            let has_action = std::fs::read_dir(e.path())
                .map(|d| d.flatten().any(|f| f.path().is_dir()))
                .unwrap_or(false);
            if !has_action {
                continue;
            }
            let Some(cpus) = std::fs::read_to_string(e.path().join("smp_affinity_list"))
                .ok()
                .and_then(|s| parse_cpu_list(&s))
            else {
                continue;
            };
            let on: Vec<usize> = cpus.into_iter().filter(|c| guarded.contains(c)).collect();
            if !on.is_empty() {
                hits.push((irq, on));
            }
        }
    }
    hits.sort();
    let what = if isolated.is_empty() {
        "reactor"
    } else {
        "isolated"
    };
    out.push(if hits.is_empty() {
        Check::new(
            Level::Ok,
            "irq affinity",
            format!("no device interrupt on the {what} cores"),
            format!("none on cores {}", cpu_list(&guarded)),
            "",
        )
    } else {
        let shown: Vec<String> = hits
            .iter()
            .take(8)
            .map(|(irq, on)| format!("{irq} on {}", cpu_list(on)))
            .collect();
        Check::new(
            Level::Warn,
            "irq affinity",
            format!(
                "{} interrupts may run on the {what} cores ({}{})",
                hits.len(),
                shown.join(", "),
                if hits.len() > 8 { ", …" } else { "" }
            ),
            format!("none on cores {}", cpu_list(&guarded)),
            irq_fix(root, &guarded, cpus, hits[0].0),
        )
    });
    out
}
