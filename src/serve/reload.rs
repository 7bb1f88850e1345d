//! SIGHUP (or the file changed, or a new `[tenants_from]` document): the config read again,
//! on a thread of its own beside the supervision loop. A good one becomes the next generation,
//! which every reactor thread applies at its next loop (ages, paces, timeouts, regions and
//! sources removed or listed again); a bad one is refused and the last good one kept. The admin token file is
//! read again with it, so a token is rotated without a restart. The log says what was applied
//! and what was kept, key by key.
//!
//! What it is NOT: a restart. The listeners, the thread count, the arena and the admin address
//! stay as started, as do regions and sources the relay did not start with (a new binary or
//! shape is `upgrade`'s); the log line names each such key.

use std::sync::Arc;

use crate::admin::AdminHandle;
use crate::config::{Changes, ConfigError, Shared, Snapshot, Token};
use crate::metrics::Metrics;

use super::systemd::{Manager, Standing};
use super::yielding::Idle;

/// What a reload reads.
pub enum What {
    /// The config file again (SIGHUP, or the file changed).
    File,
    /// A new `[tenants_from]` document, the rest of the config as it is.
    Tenants(String),
}

/// A reload being built on a thread of its own; the supervision loop goes on meanwhile
/// (pings, signals, a stop) and reports it with [`Pending::finish`] once
/// [`Pending::built`].
pub struct Pending {
    what: What,
    /// The generation running when it began.
    from: u64,
    building: Idle<(Arc<Snapshot>, Result<u64, ConfigError>)>,
}

/// Says RELOADING=1 to the manager and starts reloading `live` from `what`.
pub fn begin(live: &Arc<Shared>, what: What, manager: &mut Manager) -> Pending {
    manager.reloading();
    let from = live.load().generation;
    let doc = match &what {
        What::File => None,
        What::Tenants(doc) => Some(doc.clone()),
    };
    let live = live.clone();
    // Parsing, checking and diffing the new config yield the core to any reactor that wants it.
    let building = super::yielding::start(move || {
        let running = live.load_full();
        let result = match &doc {
            None => live.reload(),
            Some(doc) => live.reload_tenants(doc),
        };
        (running, result)
    });
    Pending {
        what,
        from,
        building,
    }
}

impl Pending {
    /// Whether [`Pending::finish`] reports without waiting.
    pub fn built(&self) -> bool {
        self.building.is_finished()
    }

    /// What it reads.
    pub fn what(&self) -> &What {
        &self.what
    }

    /// The generation that ran when it began.
    pub fn from(&self) -> u64 {
        self.from
    }

    /// Reports the reload: the log says what was applied and kept, the manager READY=1 with
    /// the outcome (or STATUS= while not yet `ready`); a refusal is counted, a changed token
    /// handed to the admin listener (`admin_token` is the token it holds). Whether it was
    /// applied.
    pub fn finish(
        self,
        live: &Shared,
        metrics: &Metrics,
        admin: Option<&AdminHandle>,
        admin_token: &mut Option<Token>,
        manager: &mut Manager,
        ready: bool,
    ) -> bool {
        let (running, result) = self.building.join();
        let next = live.load_full();
        // A reload refused after it published part of itself (a tenant swap's removals, whose
        // additions waited in vain) is reported as what runs now: that part applied, the rest
        // refused.
        let published = next.generation != running.generation;
        if published {
            let g = next.generation;
            let changes = Changes::between(live.started(), &running.config, &next.config);
            metrics.set_config_generation(g);
            println!(
                "config reloaded{}: generation {g}",
                if result.is_ok() { "" } else { " in part" }
            );
            for line in &changes.applied {
                println!("  applied: {line}");
            }
            for line in &changes.kept {
                println!("  kept until a restart: {line}");
            }
            // The admin token is said below, by what it became.
            let token_changed = running.config.admin_token != next.config.admin_token;
            if changes.applied.is_empty() && changes.kept.is_empty() && !token_changed {
                // Said, so an operator who expected an edit to apply knows the relay saw none.
                println!("  no changes: what was read is what already runs");
            }
            if let Some(a) = admin {
                rotate_token(a, admin_token, next.config.admin_token.clone());
            }
        }
        let applied = result.is_ok();
        if next.config.tenants_from.is_none() {
            // No document is read any more: a refusal of the last one no longer stands, and
            // this reload's status must not say it does.
            manager.stand(Standing::Tenants, None);
        }
        let standing = match self.what {
            What::File => Standing::File,
            What::Tenants(_) => Standing::Tenants,
        };
        let outcome = match result {
            Ok(g) => {
                manager.stand(standing, None);
                format!("config reloaded: generation {g}")
            }
            Err(e) => {
                metrics.reload_refused();
                let line = if published {
                    format!(
                        "config reload refused in part, generation {} runs: {e}",
                        next.generation
                    )
                } else {
                    format!(
                        "config reload refused, generation {} kept: {e}",
                        next.generation
                    )
                };
                println!("{line}");
                manager.stand(standing, Some(&line));
                line
            }
        };
        drop((running, next));
        // READY=1 ends the reload for the manager either way: a refused reload leaves the relay
        // serving on the last good config, and the status says which.
        if ready {
            manager.ready(&outcome);
        } else {
            manager.status(&outcome);
        }
        applied
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
