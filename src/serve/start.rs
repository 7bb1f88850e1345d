//! Starting what serves: the relay (its listeners bound, its reactor threads running), the
//! admin listener and the .hlog writer, each announced on stdout.
//!
//! What it is NOT: the plan (checked before anything here runs), nor the decision to listen
//! when taking over (that waits for the pool; see `takeover`).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::admin::{Admin, AdminHandle, AdminOptions};
use crate::config::Token;
use crate::metrics::Metrics;
use crate::metrics::hlog::{HlogConfig, HlogThread, HlogWriter};
use crate::relay::Spec;
use crate::runtime::Relay;

/// Starts the relay on `spec`: listening at once, or with `unlistened` (taking over) bound but
/// not yet listening. Prints where bots reach it.
pub fn relay(spec: Spec, unlistened: bool) -> Result<Relay, crate::runtime::StartError> {
    let relay = if unlistened {
        Relay::start_unlistened(spec)
    } else {
        Relay::start(spec)
    }?;
    if let Some(a) = relay.rotating_addr() {
        println!("intake (rotating): http://{a}/api/v1/bundles");
    }
    for (name, a) in relay.pinned_addrs() {
        println!("intake (pinned to {name}): http://{a}/api/v1/bundles");
    }
    let metrics = relay.metrics();
    metrics.set_config_generation(1);
    if !metrics.enabled() {
        println!("metrics: off; /metrics serves the accounting counters only");
    }
    Ok(relay)
}

/// The admin listener on `addr`; while the port is still held (by a process being taken over,
/// which frees it when told to drain) retried every 50 ms for up to `wait`.
pub fn admin(
    addr: SocketAddr,
    token: Option<Token>,
    relay: &Relay,
    wait: Duration,
) -> Result<AdminHandle, String> {
    let until = Instant::now() + wait;
    loop {
        let started = Admin::start_with(
            addr,
            relay.metrics(),
            relay.pairs_fn(),
            AdminOptions {
                token: token.clone(),
                ..AdminOptions::default()
            },
        );
        match started {
            Ok(a) => {
                println!(
                    "admin: http://{0}/metrics, /debug/histograms, /debug/pairs, /debug/tenants, /ping{1}",
                    a.local_addr(),
                    if token.is_some() {
                        " (bearer token required on all but /ping)"
                    } else {
                        ""
                    }
                );
                return Ok(a);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(format!(
                    "cannot listen on {addr} for the admin endpoints: {e}"
                ));
            }
        }
    }
}

/// Whether .hlog files can go into `dir` as the writer puts them (it makes the folder and any
/// missing above it): the nearest part of the path that exists must be a folder. Checked
/// before anything listens, and by `--check`.
pub fn check_hlog_dir(dir: &Path) -> Result<(), String> {
    let mut at = dir;
    loop {
        // A link to nothing is there, and a folder cannot be made at it.
        if std::fs::symlink_metadata(at).is_ok_and(|m| m.file_type().is_symlink())
            && std::fs::metadata(at).is_err()
        {
            return Err(format!(
                "--hlog-dir {}: {} is a link to nothing",
                dir.display(),
                at.display()
            ));
        }
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(format!(
                    "--hlog-dir {}: {} is a file, not a folder",
                    dir.display(),
                    at.display()
                ));
            }
            // Not there, or under a file: what is above says which.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                match at.parent() {
                    Some(up) if !up.as_os_str().is_empty() => at = up,
                    _ => return Ok(()),
                }
            }
            Err(e) => return Err(format!("--hlog-dir {}: {e}", dir.display())),
        }
    }
}

/// The thread writing every histogram into `dir` as .hlog files, one interval per `secs`.
pub fn hlog(metrics: std::sync::Arc<Metrics>, dir: &Path, secs: u64) -> Result<HlogThread, String> {
    let cfg = HlogConfig::new(dir, Duration::from_secs(secs.max(1)));
    let thread = HlogWriter::new(metrics, cfg, SystemTime::now())
        .and_then(HlogWriter::spawn)
        .map_err(|e| format!("cannot write .hlog files into {}: {e}", dir.display()))?;
    println!("histograms: .hlog every {secs} s into {}", dir.display());
    Ok(thread)
}
