//! The `check-host` and `egress-ip` commands: what they print and the exit status they end
//! with. What it is NOT: the checks (the module above) or the `ip` commands' making
//! (`egress`); only their presentation.

use std::path::{Path, PathBuf};

use super::egress::{self, Method};
use super::{Inputs, Level};
use crate::config::{Config, Resolve};

/// Prints one line per check and their counts; 0 when none failed, 1 when one did, 2 when the
/// config or the sysctl file cannot be read.
pub fn check_host(config: Option<&Path>, sysctl: Option<&Path>, root: PathBuf) -> i32 {
    // A folder that is not there reads as a host with nothing set: every check would pass or
    // warn about something that is not this host.
    if !root.join("proc").is_dir() {
        eprintln!(
            "bundle-relay check-host: --root {}: no proc/ folder there to read",
            root.display()
        );
        return 2;
    }
    let cfg = match config.map(|p| Config::load_with(p, Resolve::Deferred)) {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
            eprintln!("bundle-relay check-host: {e}");
            return 2;
        }
    };
    let sysctl_text = match sysctl {
        None => super::sysctl::SHIPPED.to_string(),
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("bundle-relay check-host: cannot read {}: {e}", p.display());
                return 2;
            }
        },
    };
    let checks = super::run(&Inputs::host(root, cfg, sysctl_text));
    for c in &checks {
        println!("{c}");
    }
    let count = |l| checks.iter().filter(|c| c.level == l).count();
    println!(
        "{} ok, {} warn, {} fail",
        count(Level::Ok),
        count(Level::Warn),
        count(Level::Fail)
    );
    if super::passed(&checks) { 0 } else { 1 }
}

/// Prints the `ip` commands that make `config`'s local egress addresses local on this host: on
/// `interface` one address a line, or without one a local route per block on lo. 2 when the
/// config cannot be read.
pub fn egress_ip(config: &Path, interface: Option<&str>) -> i32 {
    if let Some(dev) = interface
        && !is_interface_name(dev)
    {
        // What this prints is run as root through a shell.
        eprintln!(
            "bundle-relay egress-ip: --interface {dev:?} is no interface name: 1 to 15 of \
             a-z, A-Z, 0-9, '-', '_', '.', '@'"
        );
        return 2;
    }
    let cfg = match Config::load_with(config, Resolve::Deferred) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bundle-relay egress-ip: {e}");
            return 2;
        }
    };
    let addrs = cfg.egress.local_addresses();
    let (method, dev) = match interface {
        Some(d) => (Method::Interface, d),
        None => (Method::LocalRoute, "lo"),
    };
    println!(
        "# {} egress addresses of {}; run as root (| sh), and have the network route them here",
        addrs.len(),
        config.display()
    );
    for line in egress::commands(&addrs, method, dev) {
        println!("{line}");
    }
    0
}

/// A Linux interface name as `ip` takes it: 1 to 15 bytes (IFNAMSIZ less its NUL), no `/` or
/// space, not `.` or `..`; narrowed to what names are made of, so nothing a shell reads
/// specially can pass.
fn is_interface_name(dev: &str) -> bool {
    (1..=15).contains(&dev.len())
        && dev != "."
        && dev != ".."
        && dev
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'))
}
