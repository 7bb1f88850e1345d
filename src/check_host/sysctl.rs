//! The shipped `sysctl/30-bundle-relay.conf`, read as the table of what the host should have,
//! and each running value compared with it by the rule its key needs.

use std::path::Path;

use super::report::{Check, Level};

/// The file the package installs in `/usr/lib/sysctl.d/`, compiled in so `check-host` compares
/// with exactly what ships.
pub const SHIPPED: &str = include_str!("../../sysctl/30-bundle-relay.conf");

/// Where the package installs it (the fix of every sysctl line names it).
pub const INSTALLED_PATH: &str = "/usr/lib/sysctl.d/30-bundle-relay.conf";

/// How a running value is held to the file's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The same value.
    Exactly,
    /// Every field at least the file's (one number, or a `min default max` triple).
    AtLeast,
    /// At most the file's.
    AtMost,
    /// A `low high` range that covers the file's.
    Covers,
    /// A `min default max` triple: min and default at least the file's, max at most the
    /// file's (and no less than the default): the cap on what one socket may pin.
    Capped,
}

/// The rule for `key` and what a miss costs: a miss on a key the relay cannot run without is a
/// fail, on anything else a warning.
pub fn rule(key: &str) -> (Rule, Level) {
    match key {
        "kernel.io_uring_disabled" => (Rule::Exactly, Level::Fail),
        "net.ipv4.tcp_migrate_req" | "net.ipv4.tcp_tw_reuse" => (Rule::Exactly, Level::Warn),
        "net.ipv4.ip_local_port_range" => (Rule::Covers, Level::Warn),
        "vm.swappiness" => (Rule::AtMost, Level::Warn),
        "net.ipv4.tcp_rmem" | "net.ipv4.tcp_wmem" => (Rule::Capped, Level::Warn),
        _ => (Rule::AtLeast, Level::Warn),
    }
}

/// The `key = value` lines of a sysctl.d file, comments and blanks skipped, in order; a key's
/// leading `-` (apply where the kernel has it, sysctl.d(5)) is not part of it. A line that is
/// not `key = value`, or whose value is not the numbers its key's rule compares (any key but
/// an exact one that the shipped file sets to numbers, a range's two, a triple's three), is
/// an error naming it: compared as it stands, a word would read "wanted at least lots", and its
/// fix would write it.
pub fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("line {}: {line:?} is not \"key = value\"", i + 1));
        };
        let k = k.trim();
        let k = k.strip_prefix('-').unwrap_or(k);
        let v = normalise(v);
        if let Some(wants) = numbers_wanted(k, &v) {
            return Err(format!("line {}: {k} = {v:?}: {wants}", i + 1));
        }
        out.push((k.to_string(), v));
    }
    Ok(out)
}

/// What `key`'s rule wants of `value` that it lacks, if anything.
fn numbers_wanted(key: &str, value: &str) -> Option<&'static str> {
    let count = numbers(value).map(|n| n.len());
    match rule(key).0 {
        Rule::Exactly => None,
        Rule::Covers if count != Some(2) => Some("covering wants two numbers, low high"),
        Rule::Capped if count != Some(3) => {
            Some("a capped triple wants three numbers, min default max")
        }
        Rule::AtMost if count.is_none_or(|n| n == 0) => Some("at most wants numbers"),
        Rule::AtLeast if count.is_none_or(|n| n == 0) && shipped_as_numbers(key) => {
            Some("at least wants numbers")
        }
        _ => None,
    }
}

/// Whether the shipped file sets `key` to numbers (a key it does not set, such as
/// `net.ipv4.tcp_congestion_control`, may be a word, compared exactly).
fn shipped_as_numbers(key: &str) -> bool {
    SHIPPED.lines().any(|line| {
        line.split_once('=').is_some_and(|(k, v)| {
            let k = k.trim();
            k.strip_prefix('-').unwrap_or(k) == key && numbers(v).is_some_and(|n| !n.is_empty())
        })
    })
}

/// Whitespace-separated fields joined by one space (the kernel prints tabs).
fn normalise(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn numbers(v: &str) -> Option<Vec<i64>> {
    v.split_whitespace().map(|f| f.parse().ok()).collect()
}

/// Whether `found` satisfies `wanted` under `rule`.
pub fn holds(rule: Rule, found: &str, wanted: &str) -> bool {
    let (f, w) = (normalise(found), normalise(wanted));
    match rule {
        Rule::Exactly => f == w,
        _ => {
            let (Some(f), Some(w)) = (numbers(&f), numbers(&w)) else {
                return f == w;
            };
            if f.len() != w.len() {
                return false;
            }
            match rule {
                Rule::AtLeast => f.iter().zip(&w).all(|(f, w)| f >= w),
                Rule::AtMost => f.iter().zip(&w).all(|(f, w)| f <= w),
                Rule::Covers => f.len() == 2 && f[0] <= w[0] && f[1] >= w[1],
                Rule::Capped => {
                    f.len() == 3 && f[0] >= w[0] && f[1] >= w[1] && f[2] <= w[2] && f[2] >= f[1]
                }
                Rule::Exactly => unreachable!(),
            }
        }
    }
}

/// One check per key of `wanted` against the values under `root`'s `proc/sys`.
pub fn checks(root: &Path, wanted: &[(String, String)]) -> Vec<Check> {
    wanted
        .iter()
        .map(|(key, want)| {
            let path = root.join("proc/sys").join(key.replace('.', "/"));
            let (rule, miss) = rule(key);
            let wanted_text = match rule {
                // A word (a congestion control, a qdisc) is wanted as it is.
                _ if numbers(want).is_none() => want.clone(),
                Rule::Exactly => want.clone(),
                Rule::AtLeast => format!("at least {want}"),
                Rule::AtMost => format!("at most {want}"),
                Rule::Covers => format!("covering {want}"),
                Rule::Capped => match want.rsplit_once(' ') {
                    Some((low, max)) => format!("at least {low}, a maximum of at most {max}"),
                    None => format!("at most {want}"),
                },
            };
            let fix = format!(
                "sysctl -w {key}=\"{want}\" (for good: install {INSTALLED_PATH}, as the package does, then sysctl --system)"
            );
            match std::fs::read_to_string(&path) {
                Ok(found) => {
                    let found = normalise(&found);
                    if key == "kernel.io_uring_disabled" && found == "1" {
                        // io_uring for the members of kernel.io_uring_group only: a host
                        // that lists the relay's group there runs it (the io_uring check
                        // says whether this user may).
                        return Check::new(
                            Level::Warn,
                            key,
                            found,
                            format!("{wanted_text}, or 1 with the relay's group in kernel.io_uring_group"),
                            fix,
                        );
                    }
                    let level = if holds(rule, &found, want) {
                        Level::Ok
                    } else {
                        miss
                    };
                    Check::new(level, key, found, wanted_text, fix)
                }
                // io_uring_disabled and tcp_migrate_req are newer than some kernels: absent
                // io_uring_disabled means always allowed; absent migration means none.
                Err(_) if key == "kernel.io_uring_disabled" => Check::new(
                    Level::Ok,
                    key,
                    "absent (kernel before 6.6: io_uring always allowed)",
                    wanted_text,
                    "",
                ),
                Err(e) => Check::new(
                    miss,
                    key,
                    format!("unreadable ({e})"),
                    wanted_text,
                    "a kernel without this setting: see HARDWARE.md for the version wanted",
                ),
            }
        })
        .collect()
}
