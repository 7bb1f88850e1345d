//! The current configuration as one immutable snapshot behind an atomic pointer.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, Guard};

use super::diff::Changes;
use super::error::ConfigError;
use super::model::{Config, Overrides, Resolve};

/// One immutable configuration and where it came from.
#[derive(Debug)]
pub struct Snapshot {
    /// 1 for the first snapshot, +1 per successful reload: a reader that remembers the last
    /// generation it acted on sees a change with one comparison.
    pub generation: u64,
    pub config: Config,
    /// The file it was loaded from; `None` for a config built in code (the embedded default).
    pub source: Option<PathBuf>,
}

/// The live configuration shared by every thread. Readers [`load`](Shared::load) (one atomic
/// load, no lock); reloads build a whole new [`Config`] off to the side and swap the pointer only
/// when it is valid, so a bad file never replaces a good config.
#[derive(Debug)]
pub struct Shared {
    current: ArcSwap<Snapshot>,
    /// Serialises reloads (never readers) so generations are handed out once each.
    reloading: Mutex<()>,
    resolve: Resolve,
    /// The command line's overrides, applied to every reload as to the first load.
    overrides: Overrides,
    /// Generation 1, what the relay was sized and opened from: a reload it could not run
    /// ([`Changes::refusal`]) is refused like an invalid file.
    started: Config,
}

impl Shared {
    /// Shares `config` as generation 1. Reloads resolve hosts as `resolve` says.
    pub fn new(config: Config, source: Option<PathBuf>, resolve: Resolve) -> Shared {
        Shared {
            started: config.clone(),
            current: ArcSwap::from_pointee(Snapshot {
                generation: 1,
                config,
                source,
            }),
            reloading: Mutex::new(()),
            resolve,
            overrides: Overrides::default(),
        }
    }

    /// As [`Shared::new`], with `overrides` applied to every reload.
    pub fn with_overrides(mut self, overrides: Overrides) -> Shared {
        self.overrides = overrides;
        self
    }

    /// Loads `path` as generation 1: startup refuses to run on a bad config.
    pub fn from_file(path: &Path, resolve: Resolve) -> Result<Shared, ConfigError> {
        let config = Config::load_with(path, resolve)?;
        Ok(Shared::new(config, Some(path.to_path_buf()), resolve))
    }

    /// The current snapshot: one atomic load. Hold it for one loop iteration, not longer (a held
    /// guard keeps an old snapshot alive).
    pub fn load(&self) -> Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// What the relay started from (generation 1).
    pub fn started(&self) -> &Config {
        &self.started
    }

    /// The current snapshot as an owned `Arc`, for holders that outlive a loop iteration.
    pub fn load_full(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Loads `path`, and only if it is valid and the running relay can run it publishes it as
    /// the next generation, which it returns. On any error the current snapshot stays,
    /// untouched.
    pub fn reload_from(&self, path: &Path) -> Result<u64, ConfigError> {
        let _one_at_a_time = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let config = Config::load_overridden(path, self.resolve, &self.overrides)?;
        if let Some((key, why)) = Changes::refusal(&self.started, &config) {
            return Err(ConfigError::new(&path.display().to_string(), key, why));
        }
        let generation = self.current.load().generation + 1;
        self.current.store(Arc::new(Snapshot {
            generation,
            config,
            source: Some(path.to_path_buf()),
        }));
        Ok(generation)
    }

    /// Reloads the file the current snapshot came from (a SIGHUP's meaning).
    pub fn reload(&self) -> Result<u64, ConfigError> {
        let source = self.current.load().source.clone();
        match source {
            Some(path) => self.reload_from(&path),
            None => Err(ConfigError::new(
                "<embedded default>",
                "",
                "nothing to reload: the running config did not come from a file",
            )),
        }
    }
}
