//! Which cores a process runs on: `--poll-cost` and `--pin-relay` give the relay's threads cores
//! of their own and keep the engine and the load off them.

/// Confines the calling thread, and every thread it starts afterwards, to `cpus`.
pub fn confine(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it (indexes past
    // CPU_SETSIZE are skipped); pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The cores a pinned relay runs on: 0.., one per thread.
pub fn relay_cores(relay_threads: usize) -> Vec<usize> {
    (0..relay_threads.max(1)).collect()
}

/// Moves this process (the engine and the load) to the cores above the relay's, where the
/// machine has any; the relay processes it starts run on [`relay_cores`], one thread each
/// (`DemoConfig::pin_relay`). A relay thread then has its core to itself, as on a host with
/// isolated cores. Returns what it did, for the report; with no core to spare it says so and
/// leaves the affinity as it is.
pub fn keep_off_relay_cores(relay_threads: usize, cores: usize) -> String {
    let relay = relay_threads.max(1);
    if cores <= relay {
        return format!(
            "{cores} cores, {relay} relay threads: no core left for the engine and the load, \
             which share the relay's"
        );
    }
    let others: Vec<usize> = (relay..cores).collect();
    match confine(&others) {
        Ok(()) => format!(
            "relay threads pinned to {}, the engine and the load on {}",
            span(0, relay - 1),
            span(relay, cores - 1)
        ),
        Err(e) => format!("keeping the engine and the load off the relay's cores: {e}"),
    }
}

/// "core 3" or "cores 2-15".
fn span(first: usize, last: usize) -> String {
    if first == last {
        format!("core {first}")
    } else {
        format!("cores {first}-{last}")
    }
}

/// A `--cores` list: core numbers, comma-separated.
pub fn parse_cores(s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|c| {
            c.trim()
                .parse::<usize>()
                .map_err(|e| format!("{c:?} is not a core number: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cores_list_is_comma_separated_numbers_and_anything_else_is_named() {
        assert_eq!(parse_cores("0,1, 3"), Ok(vec![0, 1, 3]));
        let e = parse_cores("0,x").unwrap_err();
        assert!(e.contains("\"x\" is not a core number"), "{e}");
    }

    #[test]
    fn a_machine_with_no_core_beyond_the_relays_leaves_the_affinity_and_says_so() {
        let note = keep_off_relay_cores(2, 2);
        assert!(
            note.contains("no core left for the engine and the load"),
            "{note}"
        );
        assert_eq!(relay_cores(0), [0]);
        assert_eq!(relay_cores(3), [0, 1, 2]);
        assert_eq!(span(1, 1), "core 1");
        assert_eq!(span(2, 15), "cores 2-15");
    }
}
