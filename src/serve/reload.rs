//! SIGHUP (or the file changed, or a new `[tenants_from]` document): the config read again. A good one becomes the next generation, which every
//! reactor thread applies at its next loop (ages, paces, timeouts, regions and sources removed
//! or listed again); a bad one is refused and the last good one kept. The admin token file is
//! read again with it, so a token is rotated without a restart. The log says what was applied
//! and what was kept, key by key.
//!
//! What it is NOT: a restart. The listeners, the thread count, the arena and the admin address
//! stay as started, as do regions and sources the relay did not start with (a new binary or
//! shape is `upgrade`'s); the log line names each such key.

use crate::admin::AdminHandle;
use crate::config::{Changes, ConfigError, Shared, Token};
use crate::metrics::Metrics;

use super::systemd::Manager;

/// What a reload reads.
pub enum What<'a> {
    /// The config file again (SIGHUP, or the file changed).
    File,
    /// A new `[tenants_from]` document, the rest of the config as it is.
    Tenants(&'a str),
}

/// Reloads `live` from `what`, brackets it with RELOADING=1 … READY=1 for the manager (or
/// STATUS= while not yet `ready`), counts a refusal, and hands a changed token to the admin
/// listener. `admin_token` is the token the listener holds. Whether it was applied.
pub fn reload(
    live: &Shared,
    what: What<'_>,
    metrics: &Metrics,
    admin: Option<&AdminHandle>,
    admin_token: &mut Option<Token>,
    manager: &mut Manager,
    ready: bool,
) -> bool {
    manager.reloading();
    // Parsing, checking and diffing the new config yield the core to any reactor that wants it.
    let result = super::yielding::idle(|| -> Result<_, ConfigError> {
        let running = live.load_full();
        let g = match what {
            What::File => live.reload(),
            What::Tenants(doc) => live.reload_tenants(doc),
        }?;
        let next = live.load_full();
        Ok((
            g,
            Changes::between(live.started(), &running.config, &next.config),
        ))
    });
    let applied = result.is_ok();
    let outcome = match result {
        Ok((g, changes)) => {
            metrics.set_config_generation(g);
            println!("config reloaded: generation {g}");
            for line in &changes.applied {
                println!("  applied: {line}");
            }
            for line in &changes.kept {
                println!("  kept until a restart: {line}");
            }
            if let Some(a) = admin {
                rotate_token(a, admin_token, live.load().config.admin_token.clone());
            }
            format!("config reloaded: generation {g}")
        }
        Err(e) => {
            metrics.reload_refused();
            let line = format!(
                "config reload refused, generation {} kept: {e}",
                live.load().generation
            );
            println!("{line}");
            line
        }
    };
    // READY=1 ends the reload for the manager either way: a refused reload leaves the relay
    // serving on the last good config, and the status says which.
    if ready {
        manager.ready(&outcome);
    } else {
        manager.status(&outcome);
    }
    applied
}

/// Gives the admin listener `token` if it differs from `held`, saying what changed: dropping the
/// token on a listener others can reach is a warning.
fn rotate_token(admin: &AdminHandle, held: &mut Option<Token>, token: Option<Token>) {
    if token == *held {
        return;
    }
    match (&*held, &token) {
        (_, None) if !admin.local_addr().ip().to_canonical().is_loopback() => println!(
            "warning: admin: bearer token no longer required on {}: anyone who can reach it \
             can read metrics and /debug",
            admin.local_addr()
        ),
        (_, None) => println!("admin: bearer token no longer required"),
        (None, Some(_)) => println!("admin: bearer token now required on all but /ping"),
        (Some(_), Some(_)) => println!("admin: bearer token replaced"),
    }
    admin.set_token(token.clone());
    *held = token;
}
