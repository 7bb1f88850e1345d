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
}

/// The key the demo's load sends (`x-jito-auth`) when the relay has tenants.
pub const DEMO_TENANT_KEY: &str = "bench-demo-load";

/// `n` tenants, each with a key and a /24 block, no limits; the one in the middle holds
/// [`DEMO_TENANT_KEY`].
fn demo_tenants(n: usize, regions: usize) -> bundle_relay::config::Tenants {
    use bundle_relay::config::{Cidr, KeyDigest, Policy, Strategy, Tenant, Tenants};
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
            policy: Policy {
                enabled: true,
                regions: (0..regions as u8).collect(),
                strategy: Strategy::Soonest,
                in_flight_min: 0,
                in_flight_max: u32::MAX,
                rate: None,
                bundle_max_age_ms: None,
            },
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
        spec.threads = self.threads.max(1);
        spec.arena_slots = self.in_flight_max;
        spec.handoffs = self.handoffs;
        spec.metrics = self.metrics;
        if self.tenants > 0 {
            let tenants = demo_tenants(self.tenants, spec.regions.len());
            let names: Vec<String> = spec.regions.iter().map(|r| r.name.clone()).collect();
            let stats = std::sync::Arc::new(bundle_relay::metrics::tenants::TenantStats::new(
                tenants.max,
            ));
            let table = bundle_relay::config::TenantTable::build(
                &tenants,
                &names,
                &names,
                &[],
                spec.arena_slots,
                None,
                &stats,
            )?;
            spec.tenants = std::sync::Arc::new(table);
            spec.tenant_stats = stats;
        }
        Ok(spec)
    }

    /// The baseline's config: the same regions, egress, interval and in-flight cap.
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
            ..BaselineConfig::default()
        })
    }
}

/// A started relay of any kind.
pub enum RunningRelay {
    BundleRelay(Relay),
    Baseline(BaselineHandle),
}

impl RunningRelay {
    /// Starts `kind` on the current tokio runtime (bundle-relay starts its own reactor
    /// threads; the baseline serves on the runtime).
    pub(super) async fn start(kind: RelayKind, setup: &RelaySetup) -> Result<RunningRelay, String> {
        match kind {
            RelayKind::BundleRelay => Relay::start(setup.bundle_relay_spec()?)
                .map(RunningRelay::BundleRelay)
                .map_err(|e| format!("bundle-relay: {e}")),
            RelayKind::Baseline => Baseline::start(setup.baseline_config()?)
                .await
                .map(RunningRelay::Baseline)
                .map_err(|e| format!("baseline relay: {e}")),
        }
    }

    pub fn rotating_addr(&self) -> SocketAddr {
        match self {
            RunningRelay::BundleRelay(r) => r
                .rotating_addr()
                .expect("the demo's bundle-relay spec has a rotating port"),
            RunningRelay::Baseline(h) => h.rotating_addr(),
        }
    }

    pub fn pinned_addrs(&self) -> Vec<SocketAddr> {
        match self {
            RunningRelay::BundleRelay(r) => r.pinned_addrs().iter().map(|(_, a)| *a).collect(),
            RunningRelay::Baseline(h) => h.pinned_addrs().into_iter().map(|(_, a)| a).collect(),
        }
    }

    pub fn stats(&self) -> RelayStats {
        match self {
            RunningRelay::BundleRelay(r) => RelayStats {
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
            RunningRelay::BundleRelay(r) => {
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
