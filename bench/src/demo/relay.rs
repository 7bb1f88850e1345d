//! A relay of either kind started from one [`RelaySetup`]: bundle-relay's `Spec` or the
//! baseline's config built from it, and one handle ([`RunningRelay`]) whose counters are
//! bundle-relay's [`Totals`] for both. Not where the relay runs (`host.rs`, `child.rs`).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bundle_relay::egress::transport::TlsTarget;
use bundle_relay::jito::MAINNET_DOMAIN;
use bundle_relay::metrics::accounting::Totals;
use bundle_relay::relay::{RegionSpec, Spec};
use bundle_relay::runtime::Relay;
use serde::{Deserialize, Serialize};

use super::RelayKind;
use crate::baseline::config::BaselineConfig;
use crate::baseline::{Baseline, BaselineHandle};

/// A relay's counters in one shape for every kind, and bundle-relay's per reactor thread.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayStats {
    #[serde(flatten)]
    pub totals: Totals,
    /// bundle-relay: each reactor thread's own counts (a bundle is counted by the thread
    /// whose pairs sent it); empty for the baseline.
    #[serde(default)]
    pub threads: Vec<Totals>,
}

impl RelayStats {
    pub fn of(totals: Totals) -> RelayStats {
        RelayStats {
            totals,
            threads: Vec::new(),
        }
    }
}

impl std::ops::Deref for RelayStats {
    type Target = Totals;
    fn deref(&self) -> &Totals {
        &self.totals
    }
}

impl std::ops::DerefMut for RelayStats {
    fn deref_mut(&mut self) -> &mut Totals {
        &mut self.totals
    }
}

/// How long shutdown lets a relay's bundles in flight end (both relays' max age is 2 s).
const RELAY_DRAIN: Duration = Duration::from_secs(2);
/// The SNI of the regions whose TLS name is wrong: no bench certificate covers it.
const BAD_TLS_NAME: &str = "not-this-engine.example";

/// What a relay needs to know about the engine and its egress; sent as JSON to a relay process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelaySetup {
    pub regions: Vec<(String, SocketAddr)>,
    pub egress: Vec<IpAddr>,
    /// Further sources: SOCKS5 proxies (no authentication) the relay connects through.
    #[serde(default)]
    pub socks5: Vec<SocketAddr>,
    /// The engines speak TLS with a certificate from this CA (PEM); `None`: plaintext.
    #[serde(default)]
    pub tls_ca_pem: Option<String>,
    pub interval_ms: u64,
    /// bundle-relay's reactor threads; the baseline's runtime worker threads.
    pub threads: usize,
    pub in_flight_max: u32,
    /// bundle-relay records metrics (`Spec::metrics`); the baseline ignores it.
    #[serde(default = "metrics_on")]
    pub metrics: bool,
    /// bundle-relay's deadlines and limits, when a run sets them (the fault matrix).
    #[serde(default)]
    pub tuning: Option<RelayTuning>,
    /// Further bundle-relay regions at these engines whose TLS name is wrong: every one of
    /// their pairs fails its handshake (the fault matrix).
    #[serde(default)]
    pub bad_tls_regions: Vec<(String, SocketAddr)>,
    /// Serve bundle-relay's admin endpoints (`/metrics`) on an ephemeral loopback port.
    #[serde(default)]
    pub admin: bool,
    /// bundle-relay's bundles may move between threads (`Spec::handoffs`); the baseline's
    /// runtime always spreads its work.
    #[serde(default = "metrics_on")]
    pub handoffs: bool,
    /// bundle-relay serves this many tenants, the load's in the middle (0: no tenants).
    #[serde(default)]
    pub tenants: usize,
    /// Non-zero: bundle-relay runs from a config file with its tenants and reloads it this
    /// often, one tenant's rate changed each time ([`Reloader`]).
    #[serde(default)]
    pub reload_every_ms: u64,
    /// Non-zero: bundle-relay runs from a config file and this long after it starts reloads
    /// it once with the second half of its egress addresses gone (drained under the load).
    #[serde(default)]
    pub egress_cut_at_ms: u64,
    /// bundle-relay routes the rotating port by the next leader (no tenants).
    #[serde(default)]
    pub leader: bool,
    /// bundle-relay's reactor threads poll instead of sleeping.
    #[serde(default)]
    pub reactor_poll: bool,
    /// Non-empty: the relay process runs on these cores, bundle-relay's thread i pinned to the
    /// i-th.
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// bundle-relay's `ping_idle_ms` (0: no keepalive PINGs); `None`: [`Spec::local`]'s
    /// default, 30 s.
    #[serde(default)]
    pub ping_idle_ms: Option<u64>,
    /// bundle-relay's `tcp_user_timeout_ms` on upstream sockets; `None`: the default, 5 s.
    #[serde(default)]
    pub tcp_user_timeout_ms: Option<u64>,
}

/// The key the demo's load sends (`x-jito-auth`) when the relay has tenants.
pub const DEMO_TENANT_KEY: &str = "bench-demo-load";

/// `n` tenants, each with a key and a /24 block, no limits; the one in the middle holds
/// [`DEMO_TENANT_KEY`].
fn demo_tenants(n: usize) -> bundle_relay::config::Tenants {
    use bundle_relay::config::{Cidr, KeyDigest, Policy, Tenant, Tenants};
    let list = (0..n)
        .map(|i| Tenant {
            name: format!("t{i}"),
            keys: vec![KeyDigest::of(
                if i == n / 2 {
                    DEMO_TENANT_KEY.to_string()
                } else {
                    format!("bench-demo-tenant-{i}")
                }
                .as_bytes(),
            )],
            cidrs: vec![
                Cidr::parse(&format!("10.{}.{}.0/24", (i / 256) % 256, i % 256)).expect("a /24"),
            ],
            ports: Vec::new(),
            policy: Policy::open(),
        })
        .collect();
    Tenants {
        max: (n as u16).max(1),
        list,
        default: None,
    }
}

/// bundle-relay settings a run may change from [`Spec::local`]'s.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayTuning {
    pub upstream_timeout_ms: u64,
    pub ping_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    pub reconnect_max_ms: u64,
    pub head_timeout_ms: u64,
    pub send_timeout_ms: u64,
    pub intake_conns_max: u32,
    pub intake_per_source_max: u32,
    pub bundle_max_age_ms: u64,
}

fn metrics_on() -> bool {
    true
}

/// Every listener on an ephemeral loopback port: no clash with other tools.
fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

impl RelaySetup {
    /// A plaintext relay of `threads` threads to `regions` from `egress`, every other setting
    /// at its default (metrics on, handoffs on, no tenants, reloads, tuning or faults); runs
    /// change what they measure with `..`.
    pub fn plain(
        regions: Vec<(String, SocketAddr)>,
        egress: Vec<IpAddr>,
        threads: usize,
        interval_ms: u64,
        in_flight_max: u32,
    ) -> RelaySetup {
        RelaySetup {
            regions,
            egress,
            socks5: Vec::new(),
            tls_ca_pem: None,
            interval_ms,
            threads,
            in_flight_max,
            metrics: true,
            tuning: None,
            bad_tls_regions: Vec::new(),
            admin: false,
            handoffs: true,
            tenants: 0,
            reload_every_ms: 0,
            egress_cut_at_ms: 0,
            leader: false,
            reactor_poll: false,
            cpus: Vec::new(),
            ping_idle_ms: None,
            tcp_user_timeout_ms: None,
        }
    }

    /// bundle-relay's spec: each region pinned on a port of its own, over TLS with the
    /// production host name as SNI and authority when the engines speak TLS.
    fn bundle_relay_spec(&self) -> Result<Spec, String> {
        let tls = match &self.tls_ca_pem {
            Some(pem) => Some(
                bundle_relay::tls::client_config_from_pem(pem.as_bytes())
                    .map_err(|e| format!("bundle-relay: engine CA: {e}"))?,
            ),
            None => None,
        };
        let target = |sni: &str| {
            tls.clone().map(|config| TlsTarget {
                config,
                sni: sni.into(),
            })
        };
        let regions = self
            .regions
            .iter()
            .map(|(name, addr)| {
                // The production host name: the bench certificate covers it.
                let host = format!("{name}.{MAINNET_DOMAIN}");
                RegionSpec {
                    interval_ms: self.interval_ms,
                    pinned: Some(any_port()),
                    tls: target(&host),
                    authority: if tls.is_some() {
                        host.clone()
                    } else {
                        addr.to_string()
                    },
                    ..RegionSpec::plain(name, *addr)
                }
            })
            .chain(self.bad_tls_regions.iter().map(|(name, addr)| RegionSpec {
                interval_ms: self.interval_ms,
                pinned: Some(any_port()),
                tls: target(BAD_TLS_NAME),
                ..RegionSpec::plain(name, *addr)
            }))
            .collect();
        let mut spec = Spec::local(regions, self.egress.clone());
        if let Some(t) = &self.tuning {
            spec.upstream_timeout_ms = t.upstream_timeout_ms;
            spec.ping_timeout_ms = t.ping_timeout_ms;
            spec.connect_timeout_ms = t.connect_timeout_ms;
            spec.reconnect_max_ms = t.reconnect_max_ms;
            spec.head_timeout_ms = t.head_timeout_ms;
            spec.send_timeout_ms = t.send_timeout_ms;
            spec.intake_conns_max = t.intake_conns_max;
            spec.intake_per_source_max = t.intake_per_source_max;
            spec.bundle_max_age_ms = t.bundle_max_age_ms;
        }
        spec.sources.extend(
            self.socks5
                .iter()
                .map(|&proxy| bundle_relay::config::Source::Socks5 { proxy, auth: None }),
        );
        if let Some(ms) = self.ping_idle_ms {
            spec.ping_idle_ms = ms;
        }
        if let Some(ms) = self.tcp_user_timeout_ms {
            spec.tcp_user_timeout_ms = ms;
        }
        spec.threads = self.threads.max(1);
        spec.arena_slots = self.in_flight_max;
        spec.handoffs = self.handoffs;
        spec.metrics = self.metrics;
        spec.pin_threads = !self.cpus.is_empty();
        if self.reactor_poll {
            spec.reactor.mode = bundle_relay::config::ReactorMode::Poll;
        }
        if self.leader {
            spec.open_to_all(bundle_relay::config::Policy {
                strategy: bundle_relay::config::Strategy::Leader,
                ..bundle_relay::config::Policy::open()
            });
        }
        if self.tenants > 0 {
            let tenants = demo_tenants(self.tenants);
            let names: Vec<String> = spec.regions.iter().map(|r| r.name.clone()).collect();
            let stats = std::sync::Arc::new(bundle_relay::metrics::tenants::TenantStats::new(
                tenants.max,
            ));
            let table = bundle_relay::config::TenantTable::build(
                &tenants,
                &names,
                &names,
                &[],
                &[],
                spec.arena_slots,
                None,
                &stats,
            )
            .map_err(|e| e.why)?;
            spec.tenants = std::sync::Arc::new(table);
            spec.tenant_stats = stats;
        }
        Ok(spec)
    }

    /// bundle-relay as `run` starts it from a config file (plaintext regions at the engine,
    /// the egress, interval, threads, arena, handoffs and metrics of this setup, and its
    /// tenants as `[[tenant]]` tables), live on that file, and the reloads to run on it.
    fn reloading_spec(&self) -> Result<(Spec, Reloads), String> {
        if self.tls_ca_pem.is_some()
            || !self.socks5.is_empty()
            || self.tuning.is_some()
            || !self.bad_tls_regions.is_empty()
        {
            return Err("reloads run on a plain set-up: no TLS, SOCKS5 or tuning".into());
        }
        let dir = std::env::temp_dir().join(format!("bench-demo-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join("relay.toml");
        let (texts, schedule) = if self.egress_cut_at_ms > 0 {
            let half = &self.egress[..self.egress.len().div_ceil(2)];
            (
                [
                    self.config_text(false, &self.egress),
                    self.config_text(false, half),
                ],
                Schedule::Once(Duration::from_millis(self.egress_cut_at_ms)),
            )
        } else {
            (
                [
                    self.config_text(false, &self.egress),
                    self.config_text(true, &self.egress),
                ],
                Schedule::Every(Duration::from_millis(self.reload_every_ms)),
            )
        };
        std::fs::write(&path, &texts[0]).map_err(|e| format!("{}: {e}", path.display()))?;
        let cfg = bundle_relay::config::Config::load(&path).map_err(|e| e.to_string())?;
        let mut spec = Spec::from_config(&cfg)?;
        spec.metrics = self.metrics;
        let live = std::sync::Arc::new(
            bundle_relay::config::Shared::from_file(&path, bundle_relay::config::Resolve::Now)
                .map_err(|e| e.to_string())?,
        );
        spec.go_live(live.clone());
        Ok((
            spec,
            Reloads {
                live,
                path,
                texts,
                schedule,
            },
        ))
    }

    /// The TOML `run` would read for this setup with `egress`; `changed` gives the first
    /// tenant a rate, so two texts alternate and every reload changes the table.
    fn config_text(&self, changed: bool, egress: &[IpAddr]) -> String {
        use std::fmt::Write as _;
        let mut t = format!(
            "threads = {}\npin_threads = false\narena_slots = {}\nhandoffs = {}\n\
             tenants_max = {}\n[intake]\nrotating = \"127.0.0.1:0\"\n",
            self.threads.max(1),
            self.in_flight_max,
            self.handoffs,
            self.tenants.max(1)
        );
        for (name, addr) in &self.regions {
            let _ = write!(
                t,
                "[[region]]\nname = \"{name}\"\nhost = \"{}\"\nport = {}\ntls = false\n\
                 interval_ms = {}\npinned = \"127.0.0.1:0\"\n",
                addr.ip(),
                addr.port(),
                self.interval_ms
            );
        }
        let addrs: Vec<String> = egress.iter().map(|a| format!("\"{a}\"")).collect();
        let _ = write!(
            t,
            "[egress]\naddresses = [{}]\n[admin]\nlisten = \"off\"\nmetrics = {}\n",
            addrs.join(", "),
            self.metrics
        );
        // The same tenants as the in-code table, written as the file would hold them.
        for (i, tenant) in demo_tenants(self.tenants).list.iter().enumerate() {
            let digest: String = tenant.keys[0]
                .0
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let block = tenant.cidrs[0];
            let _ = write!(
                t,
                "[[tenant]]\nname = \"{}\"\nkey_sha256 = [\"{digest}\"]\ncidrs = [\"{}/{}\"]\n",
                tenant.name, block.network, block.len
            );
            if changed && i == 0 {
                t.push_str("rate = 1000\n");
            }
        }
        t
    }

    /// The baseline's config: the same regions, egress, interval and in-flight cap, every pair
    /// connected before it serves, as bundle-relay's are before the load starts (a lazy
    /// channel would put thousands of handshakes in the measured window).
    fn baseline_config(&self) -> Result<BaselineConfig, String> {
        if self.tls_ca_pem.is_some() || !self.socks5.is_empty() {
            return Err("the baseline relay speaks neither TLS nor SOCKS5".into());
        }
        Ok(BaselineConfig {
            rotating_addr: any_port(),
            pinned_base: any_port(),
            admin_addr: None,
            regions: self.regions.clone(),
            egress: self.egress.clone(),
            interval_ms: self.interval_ms,
            max_in_flight: self.in_flight_max as usize,
            connect_at_startup: true,
            ..BaselineConfig::default()
        })
    }
}

/// A started relay of any kind.
pub enum RunningRelay {
    BundleRelay(Relay, Option<Reloader>),
    Baseline(BaselineHandle),
}

impl RunningRelay {
    /// Starts `kind` on the current tokio runtime (bundle-relay starts its own reactor
    /// threads; the baseline serves on the runtime).
    pub(super) async fn start(kind: RelayKind, setup: &RelaySetup) -> Result<RunningRelay, String> {
        match kind {
            RelayKind::BundleRelay if setup.reload_every_ms > 0 || setup.egress_cut_at_ms > 0 => {
                let (spec, reloads) = setup.reloading_spec()?;
                let relay = Relay::start(spec).map_err(|e| format!("bundle-relay: {e}"))?;
                Ok(RunningRelay::BundleRelay(relay, Some(reloads.start())))
            }
            RelayKind::BundleRelay => Relay::start(setup.bundle_relay_spec()?)
                .map(|r| RunningRelay::BundleRelay(r, None))
                .map_err(|e| format!("bundle-relay: {e}")),
            RelayKind::Baseline => Baseline::start(setup.baseline_config()?)
                .await
                .map(RunningRelay::Baseline)
                .map_err(|e| format!("baseline relay: {e}")),
        }
    }

    pub fn rotating_addr(&self) -> SocketAddr {
        match self {
            RunningRelay::BundleRelay(r, _) => r
                .rotating_addr()
                .expect("the demo's bundle-relay spec has a rotating port"),
            RunningRelay::Baseline(h) => h.rotating_addr(),
        }
    }

    pub fn pinned_addrs(&self) -> Vec<SocketAddr> {
        match self {
            RunningRelay::BundleRelay(r, _) => r.pinned_addrs().iter().map(|(_, a)| *a).collect(),
            RunningRelay::Baseline(h) => h.pinned_addrs().into_iter().map(|(_, a)| a).collect(),
        }
    }

    pub fn stats(&self) -> RelayStats {
        match self {
            RunningRelay::BundleRelay(r, _) => RelayStats {
                totals: r.totals(),
                threads: r.thread_totals(),
            },
            RunningRelay::Baseline(h) => RelayStats::of(h.totals()),
        }
    }

    /// Stops it, lets its bundles in flight end, and returns its final counters.
    pub async fn shutdown(self) -> RelayStats {
        match self {
            // Joins the reactor threads: blocking, on this runtime's only busy thread.
            RunningRelay::BundleRelay(r, reloads) => {
                if let Some(reloads) = reloads {
                    let (applied, refused) = reloads.stop();
                    eprintln!("bundle-relay: {applied} reloads applied, {refused} refused");
                }
                let threads = r.shutdown_by_thread(RELAY_DRAIN);
                RelayStats {
                    totals: bundle_relay::metrics::accounting::Totals::of_all(&threads),
                    threads,
                }
            }
            RunningRelay::Baseline(h) => RelayStats::of(h.shutdown().await.totals),
        }
    }
}

/// What a reloading relay reloads: its config file, alternating between two texts.
pub struct Reloads {
    live: std::sync::Arc<bundle_relay::config::Shared>,
    path: std::path::PathBuf,
    texts: [String; 2],
    schedule: Schedule,
}

/// When a [`Reloads`] reloads.
enum Schedule {
    /// Every this long, alternating the texts.
    Every(Duration),
    /// Once, this long after the start, to the second text.
    Once(Duration),
}

impl Reloads {
    /// Reloads every `every` on a thread of its own, as SIGHUP would on `run`'s main thread
    /// (at idle priority, old snapshots freed on the loop's tick).
    fn start(self) -> Reloader {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut applied, mut refused) = (0u64, 0u64);
            let (every, once) = match self.schedule {
                Schedule::Every(d) => (d, false),
                Schedule::Once(d) => (d, true),
            };
            let mut next = std::time::Instant::now() + every;
            let mut k = 1;
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                self.live.free_retired();
                let now = std::time::Instant::now();
                if now < next {
                    std::thread::sleep((next - now).min(Duration::from_millis(20)));
                    continue;
                }
                if once && k > 1 {
                    next += Duration::from_secs(3600);
                    continue;
                }
                next += every;
                let written = std::fs::write(&self.path, &self.texts[k % 2]);
                k += 1;
                let reloaded = written.map_err(|e| e.to_string()).and_then(|()| {
                    let live = self.live.clone();
                    bundle_relay::serve::idle(move || live.reload().map_err(|e| e.to_string()))
                });
                match reloaded {
                    Ok(_) => applied += 1,
                    Err(e) => {
                        refused += 1;
                        eprintln!("bundle-relay: reload refused: {e}");
                    }
                }
            }
            let _ = std::fs::remove_dir_all(self.path.parent().unwrap_or(&self.path));
            (applied, refused)
        });
        Reloader { stop, thread }
    }
}

/// The reloading thread of a [`Reloads`].
pub struct Reloader {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(u64, u64)>,
}

impl Reloader {
    /// Stops reloading; (applied, refused).
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or((0, 0))
    }
}
