//! `bundle-relay check-host`: this host against what a config needs and what
//! `sysctl/30-bundle-relay.conf` sets, one line per check (ok / warn / fail, the value found,
//! the value wanted, the command that fixes it).
//!
//! What it is: a report an operator reads before starting the relay, and that provisioning can
//! gate on (the exit status is non-zero when any check fails). What it is NOT: the startup
//! probe (`probe`), which refuses to start on what would break the relay and fixes the one
//! thing it may (the soft open-file limit); and it changes nothing on the host.
//!
//! Checked: io_uring (allowed, the ring the relay wants, its features, provided-buffer rings,
//! socket options set through it),
//! the open-file and locked-memory limits against the config's budget, every egress address
//! local and bindable, each sysctl of the shipped file, the clocksource and an invariant TSC,
//! the CPU frequency governor, transparent huge pages, and where the host sets them, isolated
//! cores and the interrupts on the reactor cores. Every read goes through [`Inputs::root`], so
//! tests run it against fake `/proc` and `/sys` trees; io_uring and binding are tried for real.
//! A `fail` is what stops the relay or makes it drop work; a `warn` costs latency or restarts.

pub mod command;
pub mod egress;
pub mod host;
mod report;
pub mod sysctl;

pub use report::{Check, Level};

use std::path::PathBuf;

use crate::config::Config;
use crate::probe::{Problem, RingFacts, RingSetup};

/// What the checks read. [`Inputs::host`] gathers the running host's; tests build their own.
pub struct Inputs {
    /// Where `proc/` and `sys/` are read from: `/` on the host.
    pub root: PathBuf,
    /// The config to hold the host to; without one, only the host-wide checks run.
    pub config: Option<Config>,
    /// The sysctl.d text to compare with ([`sysctl::SHIPPED`] unless given).
    pub sysctl: String,
    /// What creating an io_uring found.
    pub ring: Result<RingFacts, Problem>,
    /// `RLIMIT_NOFILE` and `RLIMIT_MEMLOCK`, `(soft, hard)` each.
    pub nofile: (u64, u64),
    pub memlock: (u64, u64),
    /// Whether the kernel charges io_uring's ring memory to `RLIMIT_MEMLOCK` for this process
    /// ([`crate::probe::rings_charged`]).
    pub rings_charged: bool,
    /// The CPUs this process may run on, in order: reactor thread i runs on the i-th.
    pub cpus: Vec<usize>,
}

impl Inputs {
    /// The running host's facts, under `root`.
    pub fn host(root: PathBuf, config: Option<Config>, sysctl: String) -> Inputs {
        let (nofile, memlock) = crate::probe::limits();
        Inputs {
            root,
            config,
            sysctl,
            ring: crate::probe::ring_facts(),
            nofile,
            memlock,
            rings_charged: crate::probe::rings_charged(),
            cpus: allowed_cpus(),
        }
    }
}

/// Every check, in report order. An unreadable sysctl file is itself a failed check.
pub fn run(inputs: &Inputs) -> Vec<Check> {
    let mut out = Vec::new();
    ring(&inputs.ring, &mut out);
    if let Some(cfg) = &inputs.config {
        limits(cfg, inputs, &mut out);
        egress_addresses(cfg, &mut out);
    }
    match sysctl::parse(&inputs.sysctl) {
        Ok(wanted) => {
            let mut checks = sysctl::checks(&inputs.root, &wanted);
            if let Some(cfg) = &inputs.config {
                nr_open_for(cfg, &inputs.root, &mut checks);
                port_range_for(cfg, &inputs.root, &mut checks);
            }
            out.extend(checks);
        }
        Err(e) => out.push(Check::new(
            Level::Fail,
            "sysctl file",
            e,
            "key = value lines, numbers for a key compared by size",
            "",
        )),
    }
    out.extend(host::clock(&inputs.root));
    out.push(host::governor(&inputs.root));
    out.extend(host::thp(&inputs.root));
    let threads = inputs
        .config
        .as_ref()
        .map_or(inputs.cpus.len(), |c| c.threads);
    let reactor: Vec<usize> = inputs.cpus.iter().copied().take(threads).collect();
    out.extend(host::cores(&inputs.root, &reactor, &inputs.cpus));
    out
}

/// True when no check failed.
pub fn passed(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.level != Level::Fail)
}

fn ring(ring: &Result<RingFacts, Problem>, out: &mut Vec<Check>) {
    match ring {
        Err(problem) => out.push(Check::new(
            Level::Fail,
            "io_uring",
            "refused",
            "a ring",
            problem.to_string(),
        )),
        Ok(facts) => {
            out.push(Check::new(
                Level::Ok,
                "io_uring",
                format!("allowed (kernel {})", facts.kernel),
                "allowed",
                "",
            ));
            out.push(match &facts.ring {
                RingSetup::SingleIssuerDeferTaskrun => Check::new(
                    Level::Ok,
                    "io_uring ring",
                    "single issuer + deferred task running",
                    "single issuer + deferred task running",
                    "",
                ),
                RingSetup::Plain { why } => Check::new(
                    Level::Warn,
                    "io_uring ring",
                    format!("plain ({why})"),
                    "single issuer + deferred task running",
                    "Linux 6.1 or later: completions then run only when a reactor enters the kernel",
                ),
            });
            let missing: Vec<&str> = ["nodrop", "fast_poll", "ext_arg"]
                .into_iter()
                .filter(|f| !facts.features.contains(f))
                .collect();
            out.push(Check::new(
                if missing.is_empty() {
                    Level::Ok
                } else {
                    Level::Warn
                },
                "io_uring features",
                facts.features.join(" "),
                "nodrop fast_poll ext_arg (at least)",
                "Linux 6.1 or later",
            ));
            out.push(match &facts.buf_ring {
                Ok(()) => Check::new(
                    Level::Ok,
                    "provided-buffer ring",
                    "registers",
                    "registers",
                    "",
                ),
                Err(e) => Check::new(
                    Level::Fail,
                    "provided-buffer ring",
                    e.clone(),
                    "registers",
                    "Linux 5.19 or later (6.1+ recommended)",
                ),
            });
            out.push(match &facts.socket_options {
                Ok(()) => Check::new(
                    Level::Ok,
                    "io_uring socket options",
                    "set through the ring",
                    "set through the ring",
                    "",
                ),
                Err(e) => Check::new(
                    Level::Warn,
                    "io_uring socket options",
                    e.clone(),
                    "set through the ring",
                    "Linux 6.7 or later: until then a reload that changes \
                     egress.tcp_user_timeout_ms or turns egress.ping_idle_ms on or off (0) \
                     reconnects every pair to apply it",
                ),
            });
        }
    }
}

fn count(n: u64) -> String {
    if n == u64::MAX {
        "unlimited".into()
    } else {
        n.to_string()
    }
}

fn limits(cfg: &Config, inputs: &Inputs, out: &mut Vec<Check>) {
    let fds = cfg.fd_budget();
    let needed = fds.total();
    let (soft, hard) = inputs.nofile;
    let found = format!("soft {}, hard {}", count(soft), count(hard));
    let wanted = format!("{needed} ({fds})");
    let fix = format!("LimitNOFILE={needed} (or more) in the unit, or ulimit -n {needed}");
    out.push(if hard < needed {
        Check::new(Level::Fail, "open files", found, wanted, fix)
    } else if soft < needed {
        Check::new(
            Level::Ok,
            "open files",
            format!("{found} (the relay raises the soft limit)"),
            wanted,
            "",
        )
    } else {
        Check::new(Level::Ok, "open files", found, wanted, "")
    });
    let need = crate::probe::memlock_needed(cfg.threads, inputs.rings_charged);
    let (given, hard) = inputs.memlock;
    // What the relay will have: it raises its soft limit toward twice the need as far as the
    // hard limit allows (`probe::check`).
    let soft = if given < 2 * need && hard > given {
        hard.min(2 * need)
    } else {
        given
    };
    let found = format!(
        "soft {}, hard {} bytes{}",
        count(given),
        count(hard),
        if soft > given {
            " (the relay raises the soft limit)"
        } else {
            ""
        }
    );
    let what = crate::probe::memlock_terms(cfg.threads, inputs.rings_charged);
    let fix = format!(
        "LimitMEMLOCK={} (or more) in the unit, or ulimit -l {}",
        2 * need,
        (2 * need).div_ceil(1024)
    );
    out.push(if soft < need {
        Check::new(
            Level::Fail,
            "locked memory",
            found,
            format!("at least {need} bytes ({what})"),
            fix,
        )
    } else if soft < 2 * need {
        Check::new(
            Level::Warn,
            "locked memory",
            found,
            format!(
                "{} bytes: {need} ({what}) twice, for an upgrade's two processes under one user",
                2 * need
            ),
            fix,
        )
    } else {
        Check::new(
            Level::Ok,
            "locked memory",
            found,
            format!("at least {} bytes ({what}, twice for an upgrade)", 2 * need),
            "",
        )
    });
}

/// `fs.nr_open` caps every process's open-file limit: it must hold what the config needs. Not
/// in the sysctl file (systemd raises it to the maximum at boot, and a number there would
/// lower it), so checked here, against the config.
fn nr_open_for(cfg: &Config, root: &std::path::Path, checks: &mut Vec<Check>) {
    let needed = cfg.fds_needed();
    let key = "fs.nr_open";
    let wanted = format!("at least the config's {needed} open files");
    let fix = format!(
        "sysctl -w fs.nr_open=\"{needed}\" (for good: fs.nr_open = {needed} in /etc/sysctl.d/99-zz-bundle-relay-nr-open.conf, then sysctl --system)"
    );
    let path = root.join("proc/sys/fs/nr_open");
    checks.push(match std::fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(found) if found >= needed => Check::new(Level::Ok, key, text.trim(), wanted, ""),
            Ok(_) => Check::new(Level::Fail, key, text.trim(), wanted, fix),
            Err(_) => Check::new(Level::Warn, key, text.trim(), wanted, fix),
        },
        Err(e) => Check::new(
            Level::Warn,
            key,
            format!("unreadable ({}: {e})", path.display()),
            wanted,
            fix,
        ),
    });
}

/// `net.ipv4.ip_local_port_range` must leave out the relay's listening ports, or the host must
/// reserve them (`net.ipv4.ip_local_reserved_ports`): the kernel picks an upstream
/// connection's source port from the range, and a port it picked is one a restarting relay
/// cannot listen on.
fn port_range_for(cfg: &Config, root: &std::path::Path, checks: &mut [Check]) {
    let Some(c) = checks
        .iter_mut()
        .find(|c| c.name == "net.ipv4.ip_local_port_range")
    else {
        return;
    };
    let mut ends = c.found.split_whitespace().map(str::parse::<u16>);
    let (Some(Ok(low)), Some(Ok(high))) = (ends.next(), ends.next()) else {
        return;
    };
    let reserved = std::fs::read_to_string(root.join("proc/sys/net/ipv4/ip_local_reserved_ports"))
        .unwrap_or_default();
    let mut taken: Vec<u16> = cfg
        .intake_listeners()
        .chain(cfg.admin)
        .map(|a| a.port())
        .filter(|p| (low..=high).contains(p) && !port_listed(&reserved, *p))
        .collect();
    if taken.is_empty() {
        return;
    }
    taken.sort_unstable();
    taken.dedup();
    let list: Vec<String> = taken.iter().map(u16::to_string).collect();
    if c.level == Level::Ok {
        c.level = Level::Warn;
    }
    c.found = format!(
        "{} (takes in the relay's listening ports {}: a connect may take one before a restart listens on it)",
        c.found,
        list.join(", ")
    );
    c.wanted = format!(
        "{} and none of the relay's listening ports unless reserved",
        c.wanted
    );
    c.fix = format!(
        "reserve them: net.ipv4.ip_local_reserved_ports = {} (in /etc/sysctl.d, with any already \
         reserved), or a range that leaves them out, or listeners outside {low}-{high}",
        list.join(",")
    );
}

/// Whether `port` is in a kernel port list such as `ip_local_reserved_ports` ("8080,9000-9010";
/// empty: none).
fn port_listed(list: &str, port: u16) -> bool {
    list.trim().split(',').any(|item| {
        let mut ends = item.trim().splitn(2, '-').map(str::parse::<u16>);
        match (ends.next(), ends.next()) {
            (Some(Ok(one)), None) => one == port,
            (Some(Ok(low)), Some(Ok(high))) => (low..=high).contains(&port),
            _ => false,
        }
    })
}

fn egress_addresses(cfg: &Config, out: &mut Vec<Check>) {
    let local = cfg.egress.local_addresses();
    if local.is_empty() {
        return;
    }
    let bad = crate::probe::unbindable(&local);
    let total = local.len();
    if bad.is_empty() {
        out.push(Check::new(
            Level::Ok,
            "egress addresses",
            format!("{total} of {total} local and bindable"),
            "every one",
            "",
        ));
        return;
    }
    let shown: Vec<String> = bad
        .iter()
        .take(4)
        .map(|(a, e)| format!("{a} ({e})"))
        .collect();
    // A route that makes the failed addresses local (`egress-ip` prints them for the whole
    // config, in blocks of every address it lists).
    let unbound: Vec<std::net::IpAddr> = bad.iter().map(|(a, _)| *a).collect();
    let routes = egress::commands(&unbound, egress::Method::LocalRoute, "lo");
    let first = routes.first().cloned().unwrap_or_default();
    let more = if routes.len() > 1 {
        format!(" and {} more", routes.len() - 1)
    } else {
        String::new()
    };
    out.push(Check::new(
        Level::Fail,
        "egress addresses",
        format!(
            "{} of {total} not local and bindable: {}{}",
            bad.len(),
            shown.join(", "),
            if bad.len() > 4 { ", …" } else { "" }
        ),
        "every one local and bindable",
        format!(
            "bundle-relay egress-ip --config FILE | sh (one local route per block; for the \
             ones that failed: {first}{more})"
        ),
    ));
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}
