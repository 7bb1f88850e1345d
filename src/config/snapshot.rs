//! The current configuration as one immutable snapshot behind an atomic pointer.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, Guard};

use super::diff::Changes;
use super::error::ConfigError;
use super::model::{Config, Overrides, Resolve};
use super::tenant_table::TenantTable;
use crate::metrics::tenants::TenantStats;

/// One immutable configuration and where it came from.
#[derive(Debug)]
pub struct Snapshot {
    /// 1 for the first snapshot, +1 per successful reload: a reader that remembers the last
    /// generation it acted on sees a change with one comparison.
    pub generation: u64,
    pub config: Config,
    /// The file it was loaded from; `None` for a config built in code (the embedded default).
    pub source: Option<PathBuf>,
    /// The config's tenants as the request path reads them, built with the snapshot.
    pub tenants: Arc<TenantTable>,
}

/// The live configuration shared by every thread. Readers [`load`](Shared::load) (one atomic
/// load, no lock); reloads build a whole new [`Config`] off to the side and swap the pointer only
/// when it is valid, so a bad file never replaces a good config.
#[derive(Debug)]
pub struct Shared {
    current: ArcSwap<Snapshot>,
    /// Serialises reloads (never readers) so generations are handed out once each, and holds
    /// the snapshots they replaced until no reader holds one ([`Shared::free_retired`]).
    reloading: Mutex<Vec<Arc<Snapshot>>>,
    resolve: Resolve,
    /// The command line's overrides, applied to every reload as to the first load.
    overrides: Overrides,
    /// Generation 1, what the relay was sized and opened from: a reload it could not run
    /// ([`Changes::refusal`]) is refused like an invalid file.
    started: Config,
    /// Every tenant's share, rate and counts, sized by the started config's `tenants_max`.
    tenant_stats: Arc<TenantStats>,
    /// The last good document of `[tenants_from]` and the URL it came from, applied again
    /// when the file reloads with that URL.
    tenants_doc: Mutex<Option<(String, String)>>,
    /// How a reload asks a `[tenants_from]` endpoint for its document when it has none from
    /// that URL (added by this reload, or moved): `None`, it is refused instead.
    fetch: Option<Fetch>,
    /// What the host must give a config for the relay to run it (its addresses), checked at
    /// start by the caller and here on every reload, so a reload never leaves a relay that
    /// cannot start again. `None`: no such check (a config held in code).
    host_check: Option<HostCheck>,
}

/// A check of a reload (the running config, the next) against the host: `Err` names what the
/// host does not give the next.
pub type HostCheck = fn(&Config, &Config) -> Result<(), String>;

/// A `[tenants_from]` endpoint's document, or why there is none.
pub type Fetch = fn(&super::tenants_doc::TenantsFrom) -> Result<String, String>;

impl Shared {
    /// Shares `config` as generation 1. Reloads resolve hosts as `resolve` says.
    pub fn new(config: Config, source: Option<PathBuf>, resolve: Resolve) -> Shared {
        let tenant_stats = Arc::new(TenantStats::new(config.tenants.max));
        let tenants = Arc::new(
            config
                .tenant_table(&config, None, &tenant_stats)
                .expect("a config that loaded builds its own tenant table"),
        );
        Shared {
            started: config.clone(),
            tenant_stats,
            current: ArcSwap::from_pointee(Snapshot {
                generation: 1,
                config,
                source,
                tenants,
            }),
            reloading: Mutex::new(Vec::new()),
            resolve,
            overrides: Overrides::default(),
            tenants_doc: Mutex::new(None),
            fetch: None,
            host_check: None,
        }
    }

    /// As [`Shared::new`], with every reload held to the host by `check`.
    pub fn with_host_check(mut self, check: HostCheck) -> Shared {
        self.host_check = Some(check);
        self
    }

    /// As [`Shared::new`], `doc` being the `[tenants_from]` document generation 1's tenants
    /// came from.
    pub fn with_tenants_doc(self, doc: String) -> Shared {
        let url = self.tenants_url();
        *self.tenants_doc.lock().unwrap_or_else(|e| e.into_inner()) = url.map(|url| (url, doc));
        self
    }

    /// The URL the running config takes its tenants from, if any.
    fn tenants_url(&self) -> Option<String> {
        let current = self.current.load();
        current.config.tenants_from.as_ref().map(|f| f.url.clone())
    }

    /// As [`Shared::new`], a reload that adds `[tenants_from]` (or moves its URL) asking the
    /// endpoint with `fetch`.
    pub fn with_fetch(mut self, fetch: Fetch) -> Shared {
        self.fetch = Some(fetch);
        self
    }

    /// The last good `[tenants_from]` document, if any.
    pub fn tenants_doc(&self) -> Option<String> {
        let held = self.tenants_doc.lock().unwrap_or_else(|e| e.into_inner());
        held.as_ref().map(|(_, doc)| doc.clone())
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

    /// Every tenant's shared state (the same for every generation).
    pub fn tenant_stats(&self) -> &Arc<TenantStats> {
        &self.tenant_stats
    }

    /// The current snapshot as an owned `Arc`, for holders that outlive a loop iteration.
    pub fn load_full(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Loads `path`, and only if it is valid and the running relay can run it publishes it as
    /// the next generation, which it returns. On any error the current snapshot stays,
    /// untouched. A file with `[tenants_from]` takes its tenants from the last good document
    /// of that URL while the running config takes them from it too; otherwise (the reload adds
    /// `[tenants_from]`, back or anew, or moves it), from the endpoint, asked now: no
    /// document, no reload, as at start.
    pub fn reload_from(&self, path: &Path) -> Result<u64, ConfigError> {
        let mut retired = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let origin = path.display().to_string();
        let mut config = Config::load_overridden(path, self.resolve, &self.overrides)?;
        let mut fetched = None;
        if let Some(from) = &config.tenants_from {
            let held = self
                .tenants_doc
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            // The held document only while the running config takes its tenants from the same
            // URL: a reload that adds `[tenants_from]` back asks the endpoint, since the
            // document held from before may list tenants removed since.
            let running = self.tenants_url();
            let doc = match held {
                Some((url, doc)) if url == from.url && running.as_ref() == Some(&from.url) => doc,
                _ => {
                    let Some(fetch) = self.fetch else {
                        return Err(ConfigError::new(
                            &origin,
                            "tenants_from",
                            format!("no document from {} yet to take the tenants from", from.url),
                        ));
                    };
                    let doc = fetch(from).map_err(|e| {
                        ConfigError::new(
                            &origin,
                            "tenants_from",
                            format!("{e}: no tenants from it"),
                        )
                    })?;
                    fetched = Some((from.url.clone(), doc.clone()));
                    doc
                }
            };
            config = config.with_tenants_json(&doc, &from.url)?;
        }
        let takes_doc = config.tenants_from.is_some();
        let generation = self.publish(config, Some(path.to_path_buf()), &origin, &mut retired)?;
        if fetched.is_some() || !takes_doc {
            // A config without `[tenants_from]` holds no document any more.
            *self.tenants_doc.lock().unwrap_or_else(|e| e.into_inner()) = fetched;
        }
        Ok(generation)
    }

    /// Applies `doc`, a document the running config's `[tenants_from]` endpoint served, as the
    /// next generation (the rest of the config as it is); on any error nothing changes.
    pub fn reload_tenants(&self, doc: &str) -> Result<u64, ConfigError> {
        let mut retired = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.current.load_full();
        let Some(from) = &current.config.tenants_from else {
            return Err(ConfigError::new(
                "<tenants document>",
                "tenants_from",
                "the running config takes no tenants from an endpoint",
            ));
        };
        let config = current.config.with_tenants_json(doc, &from.url)?;
        let url = from.url.clone();
        let generation = self.publish(config, current.source.clone(), &url, &mut retired)?;
        *self.tenants_doc.lock().unwrap_or_else(|e| e.into_inner()) = Some((url, doc.to_string()));
        Ok(generation)
    }

    /// Publishes `config` as the next generation if the running relay can run it (its tenant
    /// table builds); the caller holds `reloading`, whose list keeps the snapshot replaced.
    ///
    /// A new tenant that can only have a removed tenant's slot waits for it: the removals are
    /// published first (the config without the tenants it adds), and once no thread writes a
    /// table that lists the removed tenants (a reactor moves on at its next loop, within
    /// [`WRITERS_WAIT`]), the whole config. Its generation is then the second.
    fn publish(
        &self,
        config: Config,
        source: Option<PathBuf>,
        origin: &str,
        retired: &mut Vec<Arc<Snapshot>>,
    ) -> Result<u64, ConfigError> {
        if let Some((key, why)) = Changes::refusal(&self.started, &config) {
            return Err(ConfigError::new(origin, key, why));
        }
        let current = self.current.load_full();
        if let Some(check) = self.host_check {
            check(&current.config, &config).map_err(|why| ConfigError::new(origin, "", why))?;
        }
        drop(current);
        let deadline = std::time::Instant::now() + WRITERS_WAIT;
        let mut removals = None;
        loop {
            sweep(retired);
            let current = self.current.load_full();
            let since = written_since(&current, retired);
            let built = config.next_tenant_table(
                &self.started,
                Some((&current.tenants, since)),
                &self.tenant_stats,
            );
            let e = match built {
                Ok(tenants) => {
                    drop(current);
                    return Ok(self.swap(config, source, tenants, retired));
                }
                // Once the removals are out, a slot may still hold a bundle a thread on an
                // older table admitted for its removed tenant: that too ends; wait for it.
                Err(e) if e.slot_freeing || (e.no_slot && removals.is_some()) => e,
                Err(e) => return Err(ConfigError::new(origin, "tenant", e.why)),
            };
            // Publish nothing that could not end in the whole config.
            if removals.is_none()
                && !current
                    .tenants
                    .fits_once_freed(&config.tenants, &self.tenant_stats)
            {
                return Err(ConfigError::new(origin, "tenant", e.why));
            }
            let listed = |name: &str| config.tenants.list.iter().any(|t| t.name == name);
            if removals.is_none() && current.tenants.entries().iter().any(|t| !listed(&t.name)) {
                let kept = |name: &str| current.tenants.entries().iter().any(|t| t.name == name);
                let mut first = config.clone();
                first.tenants.list.retain(|t| kept(&t.name));
                let tenants = first
                    .next_tenant_table(
                        &self.started,
                        Some((&current.tenants, since)),
                        &self.tenant_stats,
                    )
                    .map_err(|e| ConfigError::new(origin, "tenant", e.why))?;
                drop(current);
                removals = Some(self.swap(first, source.clone(), tenants, retired));
                continue;
            }
            if std::time::Instant::now() >= deadline {
                let applied = match removals {
                    Some(g) => format!(
                        "; the tenants it removes are gone (generation {g}), the ones it adds \
                         wait for the next reload"
                    ),
                    None => String::new(),
                };
                return Err(ConfigError::new(
                    origin,
                    "tenant",
                    format!(
                        "{}: a thread still counts into the removed tenants' slots after {} ms{applied}",
                        e.why,
                        WRITERS_WAIT.as_millis()
                    ),
                ));
            }
            drop(current);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Makes `config` with `tenants` the current snapshot; returns its generation.
    fn swap(
        &self,
        config: Config,
        source: Option<PathBuf>,
        tenants: TenantTable,
        retired: &mut Vec<Arc<Snapshot>>,
    ) -> u64 {
        let generation = self.current.load().generation + 1;
        tenants.begin(&self.tenant_stats);
        let old = self.current.swap(Arc::new(Snapshot {
            generation,
            config,
            source,
            tenants: Arc::new(tenants),
        }));
        retired.push(old);
        sweep(retired);
        generation
    }

    /// Frees the snapshots reloads replaced that no reader holds any more (their tenant tables
    /// included), and says how many are still held. A reactor that applies a reload lets go
    /// of the old table between two requests; were its reference the last, it would free tens
    /// of thousands of allocations there, on the request path. The list makes the reloading
    /// thread the last holder instead: this runs after every reload and from the supervision
    /// loop's tick, so an old snapshot lives one tick past its last reader.
    pub fn free_retired(&self) -> usize {
        let mut retired = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        sweep(&mut retired);
        retired.len()
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

/// How long a reload waits for every thread to move on from the tables that list the tenants
/// it removes, when a tenant it adds needs one of their slots: reactors apply a reload at
/// their next loop, which comes within 50 ms even when idle.
const WRITERS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The oldest generation whose tenant table a thread may still write into: the current one
/// (a thread may have loaded it and not yet said so) or an older one a thread holds as a
/// writer.
fn written_since(current: &Snapshot, retired: &[Arc<Snapshot>]) -> u64 {
    retired
        .iter()
        .map(|s| &s.tenants)
        .filter(|t| t.is_written())
        .map(|t| t.generation())
        .fold(current.tenants.generation(), u64::min)
}

/// Drops every snapshot of `retired` that only the list holds. One the list alone holds cannot
/// be reached again, so its table's count can only fall: checked after the snapshot's, its
/// reading 1 means no reactor applies that table any more.
fn sweep(retired: &mut Vec<Arc<Snapshot>>) {
    retired.retain(|s| Arc::strong_count(s) > 1 || Arc::strong_count(&s.tenants) > 1);
}
