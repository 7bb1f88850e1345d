//! The shipped systemd units, checked by systemd's own tools and against the relay they start:
//! `systemd-analyze verify` finds nothing to say about either unit (installed in a scratch root
//! with the binary they name), `systemd-analyze security` scores them as the README says, and
//! what the units promise (notify, watchdog, reload by SIGHUP, io_uring's calls allowed, enough
//! open files for a large config) matches the relay.
//!
//! Needs `systemd-analyze` (Debian's `systemd` package; `.ci/run` installs it). Where it is
//! absent the two tests that run it say so and pass, except under CI (`CI` set), where they
//! fail; the rest need nothing.

mod process_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use bundle_relay::config::{Config, Overrides, Resolve};
use process_support::installed;

const UNITS: [&str; 2] = ["bundle-relay.service", "bundle-relay@.service"];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn unit(name: &str) -> String {
    std::fs::read_to_string(repo().join("systemd").join(name)).unwrap()
}

/// Every value `key` has in `text` (a key may repeat, as SystemCallFilter does).
fn values<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

/// A root holding the units, the binary and `kill` where the units name them, and the host's
/// own system units (the targets ours are ordered against).
fn scratch_root(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("br-units-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for d in ["usr/bin", "bin", "etc/systemd/system", "lib/systemd/system"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(
        env!("CARGO_BIN_EXE_bundle-relay"),
        root.join("usr/bin/bundle-relay"),
    )
    .unwrap();
    std::fs::copy("/bin/kill", root.join("bin/kill")).unwrap();
    for u in UNITS {
        std::fs::write(root.join("etc/systemd/system").join(u), unit(u)).unwrap();
    }
    for e in std::fs::read_dir("/lib/systemd/system").unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(
                e.path(),
                root.join("lib/systemd/system").join(e.file_name()),
            )
            .unwrap();
        }
    }
    root
}

#[test]
fn systemd_analyze_verify_finds_nothing_to_say_about_either_unit() {
    if !installed("systemd-analyze", "--version", "systemd") {
        return;
    }
    let root = scratch_root("verify");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .args(["bundle-relay.service", "bundle-relay@main.service"])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&root);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

#[test]
fn systemd_analyze_security_scores_both_units_as_the_readme_says() {
    if !installed("systemd-analyze", "--version", "systemd") {
        return;
    }
    let root = scratch_root("security");
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for name in ["bundle-relay.service", "bundle-relay@main.service"] {
        let out = Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(format!("--root={}", root.display()))
            .arg(name)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let score = text
            .lines()
            .find_map(|l| l.split("Overall exposure level for ").nth(1))
            .and_then(|l| l.split(": ").nth(1))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("no score for {name}:\n{text}"));
        let value: f64 = score.parse().unwrap();
        assert!(value <= 2.0, "{name} exposure {score}:\n{text}");
        let claim = format!("`systemd-analyze security` exposure level {score}");
        assert!(
            readme.contains(&claim),
            "README should say \"{claim}\" for {name}"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn the_units_promise_what_the_relay_does() {
    for name in UNITS {
        let u = unit(name);
        assert_eq!(values(&u, "Type"), ["notify"], "{name}");
        assert_eq!(
            values(&u, "NotifyAccess"),
            ["all"],
            "{name}: the takeover's child"
        );
        assert_eq!(
            values(&u, "ExecReload"),
            ["/bin/kill -HUP $MAINPID"],
            "{name}"
        );
        let watchdog: u64 = values(&u, "WatchdogSec")[0].parse().unwrap();
        assert!(
            watchdog >= 1,
            "{name}: the relay refuses a period under 1 s"
        );
        let filter = values(&u, "SystemCallFilter").join(" ");
        for call in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
            assert!(filter.contains(call), "{name} must allow {call}: {filter}");
        }
        // A stop right after an upgrade finds the old process still draining, no longer the
        // main one: `mixed` would SIGKILL it once the main process exited, losing the bundles
        // it answered; every process of the unit gets SIGTERM and drains.
        assert_eq!(values(&u, "KillMode"), ["control-group"], "{name}");
        // The relay's pacing ledger file lives there, for every instance, across restarts.
        assert_eq!(values(&u, "RuntimeDirectory"), ["bundle-relay"], "{name}");
        assert_eq!(values(&u, "RuntimeDirectoryPreserve"), ["yes"], "{name}");
        assert_eq!(values(&u, "KillSignal"), ["SIGTERM"], "{name}");
        assert_eq!(values(&u, "CapabilityBoundingSet"), [""], "{name}");
        assert_eq!(values(&u, "User"), ["bundle-relay"], "{name}");
        let exec = values(&u, "ExecStart")[0];
        assert!(exec.starts_with("/usr/bin/bundle-relay run --config /etc/bundle-relay/"));
    }
}

#[test]
fn limit_nofile_holds_4096_addresses_by_8_regions_on_16_threads() {
    let over = Overrides {
        egress: Some(vec!["10.0.0.0/20".into()]),
        ..Overrides::default()
    };
    let mut cfg = Config::load_overridden(
        &repo().join("configs/mainnet.toml"),
        Resolve::Deferred,
        &over,
    )
    .unwrap();
    cfg.threads = 16;
    let needed = cfg.fds_needed();
    assert_eq!(needed, 49_377, "the unit's comment does this sum");
    for name in UNITS {
        let limit: u64 = values(&unit(name), "LimitNOFILE")[0].parse().unwrap();
        assert!(limit >= needed, "{name}: LimitNOFILE {limit} < {needed}");
    }
}

/// The units' locked-memory limit holds what an upgrade of a 64-thread relay pins where the
/// kernel charges io_uring rings to it: two processes' rings and buffer rings.
#[test]
fn limit_memlock_holds_an_upgrade_of_64_threads_where_rings_are_charged() {
    let need = 2 * bundle_relay::probe::memlock_needed(64, true);
    for name in UNITS {
        let text = unit(name);
        let v = values(&text, "LimitMEMLOCK")[0];
        let limit: u64 = match v.strip_suffix('M') {
            Some(m) => m.parse::<u64>().unwrap() << 20,
            None => v.parse().unwrap(),
        };
        assert!(limit >= need, "{name}: LimitMEMLOCK {limit} < {need}");
    }
}

/// The system calls group `name` (`@system-service`) names, its nested groups expanded, as
/// this host's systemd knows them.
fn syscall_group(name: &str, seen: &mut std::collections::BTreeSet<String>) {
    let out = Command::new("systemd-analyze")
        .args(["syscall-filter", name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "systemd-analyze syscall-filter {name}"
    );
    for line in String::from_utf8_lossy(&out.stdout).lines().skip(1) {
        let item = line.trim();
        if item.is_empty() || item.starts_with('#') {
            continue;
        }
        if item.starts_with('@') {
            syscall_group(item, seen);
        } else {
            seen.insert(item.to_string());
        }
    }
}

/// The calls a unit's `SystemCallFilter=` lines let through: the allowed list's, less the
/// denied (`~`) list's.
fn allowed_calls(text: &str) -> std::collections::BTreeSet<String> {
    let (mut allow, mut deny) = (Default::default(), Default::default());
    for v in values(text, "SystemCallFilter") {
        let (list, items) = match v.strip_prefix('~') {
            Some(rest) => (&mut deny, rest),
            None => (&mut allow, v),
        };
        for item in items.split_whitespace() {
            if item.starts_with('@') {
                syscall_group(item, list);
            } else {
                list.insert(item.to_string());
            }
        }
    }
    allow.difference(&deny).cloned().collect()
}

/// A relay run under strace from start to stop, through what an operator does to it (a
/// `/metrics` scrape, SIGUSR1's percentiles, a SIGHUP reload, SIGTERM's drain), makes no
/// system call the units' filter refuses: one refused fails with EPERM, and some fail
/// silently (`mincore` refused read `bundle_relay_record_resident_bytes` as 0).
#[test]
fn every_system_call_a_relay_makes_passes_the_units_filter() {
    use std::io::{Read, Write};
    if !installed("systemd-analyze", "--version", "systemd") || !installed("strace", "-V", "strace")
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs systemd and strace: this test must run there"
        );
        return;
    }
    let (port, admin) = (process_support::free_port(), process_support::free_port());
    let dir = std::env::temp_dir();
    let config = dir.join(format!("bundle-relay-filter-{}.toml", std::process::id()));
    let trace = dir.join(format!("bundle-relay-filter-{}.strace", std::process::id()));
    std::fs::write(
        &config,
        format!(
            "threads = 1\narena_slots = 64\n[intake]\nrotating = \"127.0.0.1:{port}\"\n\
             [[region]]\nname = \"nowhere\"\nhost = \"127.0.0.1\"\nport = 9\n\
             [egress]\naddresses = [\"127.0.0.1\"]\nconnect = \"lazy\"\n\
             [admin]\nlisten = \"127.0.0.1:{admin}\"\n"
        ),
    )
    .unwrap();
    let child = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut strace = process_support::Reaped(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let scrape = || -> Option<String> {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", admin)).ok()?;
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut s = String::new();
        c.read_to_string(&mut s).ok()?;
        Some(s)
    };
    let metrics = loop {
        if let Some(m) = scrape() {
            break m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the relay never served /metrics"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        metrics.contains("bundle_relay_record_resident_bytes"),
        "{metrics}"
    );
    let relay_pid: i32 =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", strace.0.id()))
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
    for signal in [libc::SIGUSR1, libc::SIGHUP, libc::SIGTERM] {
        // SAFETY: signalling the relay the strace above started.
        unsafe { libc::kill(relay_pid, signal) };
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let status = strace.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let _ = std::fs::remove_file(&trace);
    let _ = std::fs::remove_file(&config);
    let made: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| {
            let rest = l.split_once(' ')?.1.trim_start();
            let rest = rest.strip_prefix("<... ").unwrap_or(rest);
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            (end > 0).then(|| &rest[..end])
        })
        .collect();
    assert!(made.contains("io_uring_enter"), "{made:?}");
    for name in UNITS {
        let allowed = allowed_calls(&unit(name));
        let refused: Vec<&&str> = made.iter().filter(|c| !allowed.contains(**c)).collect();
        assert!(refused.is_empty(), "{name} refuses {refused:?}");
    }
}
