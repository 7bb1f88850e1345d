//! SIGHUP: the config file read again. A good one becomes the next generation, which every
//! reactor thread picks up at its next loop; a bad one is refused and the last good one kept.
//! The admin token file is read again with it, so a token is rotated without a restart.
//!
//! What it is NOT: a restart. The listeners, the thread count and the admin address stay as
//! started (a new binary or shape is `upgrade`'s).

use crate::admin::AdminHandle;
use crate::config::{Shared, Token};
use crate::metrics::Metrics;

use super::systemd::Manager;

/// Reloads `live`, brackets it with RELOADING=1 … READY=1 for the manager (or STATUS= while not
/// yet `ready`), and hands a changed token to the admin listener. `admin_token` is the token
/// the listener holds.
pub fn reload(
    live: &Shared,
    metrics: &Metrics,
    admin: Option<&AdminHandle>,
    admin_token: &mut Option<Token>,
    manager: &mut Manager,
    ready: bool,
) {
    manager.reloading();
    let outcome = match live.reload() {
        Ok(g) => {
            metrics.set_config_generation(g);
            println!("config reloaded: generation {g}");
            if let Some(a) = admin {
                rotate_token(a, admin_token, live.load().config.admin_token.clone());
            }
            format!("config reloaded: generation {g}")
        }
        Err(e) => {
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
