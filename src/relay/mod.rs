//! The relay's sans-IO core: the dispatcher (bundles, pairs, outcomes), the intake's routing
//! and answers, the tip-account cache, and [`Spec`], what a running relay is made of and how
//! it is split across threads. Threads are started above this layer (`runtime`), and bytes
//! are moved below it (`reactor`).

pub mod auth;
pub mod dispatch;
mod forward;
mod handoff;
pub mod intake;
pub mod leader;
mod links;
mod observe;
mod pairs;
pub mod queries;
mod region;
pub mod statuses;
pub mod tenancy;
pub mod tips;
pub mod tuning;
mod upstream;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::arena;
use crate::config::Source;
use crate::egress::resolve::HostAddrs;
use crate::egress::transport::TlsTarget;
use crate::h2;
use crate::http1;

/// Which intake port a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// The region whose pool can send soonest.
    Rotating,
    /// Always this region.
    Pinned(u8),
}

/// One block-engine region as the relay runs it.
#[derive(Clone, Debug)]
pub struct RegionSpec {
    pub name: String,
    /// Where its connections go: every address its host has, kept current.
    pub addrs: Arc<HostAddrs>,
    /// HTTP/2 `:authority`.
    pub authority: String,
    pub interval_ms: u64,
    pub burst: u32,
    /// An intake port that always sends to this region.
    pub pinned: Option<SocketAddr>,
    /// TLS to the engine (ALPN h2, SNI and trust), or plaintext HTTP/2 when `None`.
    pub tls: Option<TlsTarget>,
    /// The engine's JSON-RPC path for `sendTransaction` (transactions without `bundleOnly`).
    pub transactions_path: String,
    /// The engine's JSON-RPC path for the bundle-status calls the relay forwards.
    pub bundles_path: String,
}

impl RegionSpec {
    /// A plaintext region at one fixed address, its authority that address (tests, the demo).
    pub fn plain(name: &str, remote: SocketAddr) -> RegionSpec {
        RegionSpec {
            name: name.to_string(),
            addrs: HostAddrs::fixed(name, vec![remote]),
            authority: remote.to_string(),
            interval_ms: crate::jito::INTERVAL_MS_DEFAULT,
            burst: 1,
            pinned: None,
            tls: None,
            transactions_path: crate::jito::TRANSACTIONS_PATH.to_string(),
            bundles_path: crate::jito::BUNDLES_PATH.to_string(),
        }
    }
}

/// Everything the running relay needs, already checked.
#[derive(Clone, Debug)]
pub struct Spec {
    pub threads: usize,
    pub pin_threads: bool,
    /// How the reactor threads wait.
    pub reactor: crate::config::Reactor,
    /// In-flight cap over all threads.
    pub arena_slots: u32,
    pub bundle_max_age_ms: u64,
    pub upstream_timeout_ms: u64,
    /// The record of recent bundles covers this long at the pool's full rate (0: off).
    pub record_keep_s: u32,
    /// ... in at most this many records over all threads.
    pub record_bundles_max: u32,
    /// Leader-aware routing's settings, and the next leader as the threads learn it.
    pub leader: crate::config::Leader,
    pub leader_board: Arc<leader::Board>,
    /// Searcher authentication to every region's engine (each thread runs its own flow).
    pub auth: Option<Arc<auth::Signer>>,
    pub rotating: Option<SocketAddr>,
    pub regions: Vec<RegionSpec>,
    /// Egress sources (local addresses or SOCKS5 proxies), split across threads.
    pub sources: Vec<Source>,
    /// Sources the egress pool lists in all: with `egress.slice`, every relay's part (the
    /// pacing ledger is sized for them all), else `sources.len()`.
    pub pool_sources: usize,
    /// Per source, its egress group (0: the shared addresses; `g`: `egress_groups[g - 1]`).
    pub source_group: Vec<u8>,
    /// Egress groups' names: tenants that have addresses to themselves leave only through
    /// their group's, and everyone else only through the shared ones.
    pub egress_groups: Vec<String>,
    pub connect_eagerly: bool,
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    pub connect_timeout_ms: u64,
    pub handshakes_max: u32,
    /// HTTP/2 PING after this long without a frame from the engine (0: off).
    pub ping_idle_ms: u64,
    /// Every PING must be acknowledged within this.
    pub ping_timeout_ms: u64,
    /// `TCP_USER_TIMEOUT` of upstream sockets: sent data unacknowledged this long ends the
    /// connection in the kernel.
    pub tcp_user_timeout_ms: u64,
    pub http: http1::Limits,
    pub head_timeout_ms: u64,
    pub idle_timeout_ms: u64,
    /// An intake connection whose answers make no progress this long is closed.
    pub send_timeout_ms: u64,
    /// Intake connections per thread.
    pub intake_conns_max: u32,
    /// Intake connections one client address may hold per thread.
    pub intake_per_source_max: u32,
    pub h2: h2::conn::Config,
    /// The live configuration: each reactor thread loads it once per loop iteration (one
    /// atomic load) and records the generation it runs on, so a reload reaches every thread
    /// without a lock or a message. `None` for a relay built from a [`Spec`] alone.
    pub live: Option<Arc<crate::config::Shared>>,
    /// Record metrics (histograms, per-region and per-method counters); off, the request path
    /// does none of that work and only the accounting counters run.
    pub metrics: bool,
    /// Bundles may move between threads: a bundle accepted on one thread leaves through the
    /// thread whose pool sends it soonest (off: every thread sends only what it accepted).
    pub handoffs: bool,
    /// Every pair's pacing shared with another relay process on this host (a takeover), so
    /// neither sends on a pair the other just used. `None`: this process paces alone.
    pub ledger: Option<Arc<crate::limiter::ledger::Ledger>>,
    /// Who may send and how much (the live config's, once [`Spec::go_live`]).
    pub tenants: Arc<crate::config::TenantTable>,
    /// Every tenant's share, rate and counts, shared by the threads.
    pub tenant_stats: Arc<crate::metrics::tenants::TenantStats>,
}

/// Upstream HTTP/2 settings for a relay connection. The limiter holds a pair while its call
/// runs and a call's stream is released before the pair is handed out again, so one stream slot
/// is enough; buffers are sized to what the calls carry (the largest SendBundle out; the
/// largest answer a status query keeps in, which also holds a SendBundleResponse, a tip-account
/// list or an error) rather than to HTTP/2's defaults. Only an answer's usual first kilobyte
/// is resident from the connect (`h2::config::RESPONSE_BODY_BYTES_USUAL`).
pub fn upstream_h2_config() -> h2::conn::Config {
    h2::conn::Config {
        stream_slots: 1,
        request_body_bytes_max: arena::GRPC_PREFIX_BYTES + arena::SEND_BUNDLE_BYTES_MAX,
        response_body_bytes_max: queries::QUERY_ANSWER_BYTES,
        header_list_bytes_max: 1024,
        header_block_bytes_max: 2 * 1024,
        header_table_size: 1024,
        transmit_bytes_max: 16 * 1024,
        ..h2::conn::Config::default()
    }
}

impl Spec {
    /// The running shape of a loaded configuration: every region's addresses (resolved at
    /// load), its TLS client config (trust roots or its CA file, built once and shared by every
    /// connection so reconnects resume sessions), and the sources as listed.
    pub fn from_config(cfg: &crate::config::Config) -> Result<Spec, String> {
        use crate::config::ConnectMode;
        let mut regions = Vec::with_capacity(cfg.regions.len());
        for r in &cfg.regions {
            if !r.is_resolved() {
                return Err(format!(
                    "region {}: host {} is not resolved",
                    r.name, r.host
                ));
            }
            if let Some(why) = crate::config::stranded_sources(r, &cfg.egress.sources) {
                return Err(format!("region {why}"));
            }
            let addrs = if r.literal {
                HostAddrs::fixed(&r.name, r.addrs.clone())
            } else {
                HostAddrs::named(&r.name, &r.host, r.port, r.addrs.clone())
            };
            let tls = if r.tls {
                let config = crate::tls::client_config(r.ca_file.as_deref())
                    .map_err(|e| format!("region {}: {e}", r.name))?;
                let sni = r.server_name().to_string();
                Some(TlsTarget {
                    config,
                    sni: sni.into(),
                })
            } else {
                None
            };
            regions.push(RegionSpec {
                name: r.name.clone(),
                addrs,
                authority: r.authority.clone(),
                interval_ms: r.interval_ms,
                burst: r.burst,
                pinned: r.pinned,
                tls,
                transactions_path: r.transactions_path.clone(),
                bundles_path: r.bundles_path.clone(),
            });
        }
        let sources = cfg.egress.sources.clone();
        let pool_sources = cfg.egress.slice.map_or(sources.len(), |s| s.pool);
        let source_group = cfg.egress.source_group.clone();
        let egress_groups = cfg.egress.groups.clone();
        let tenant_stats = Arc::new(crate::metrics::tenants::TenantStats::new(cfg.tenants.max));
        let tenants = Arc::new(cfg.tenant_table(cfg, None, &tenant_stats)?);
        Ok(Spec {
            tenants,
            tenant_stats,
            threads: cfg.threads.max(1),
            pin_threads: cfg.pin_threads,
            reactor: cfg.reactor,
            arena_slots: cfg.arena_slots,
            bundle_max_age_ms: cfg.bundle_max_age_ms,
            upstream_timeout_ms: cfg.upstream_timeout_ms,
            record_keep_s: cfg.record_keep_s,
            record_bundles_max: cfg.record_bundles_max,
            leader: cfg.leader,
            leader_board: Arc::default(),
            auth: cfg.auth.as_ref().map(|k| Arc::new(auth::Signer::new(k))),
            rotating: cfg.intake.rotating,
            regions,
            source_group,
            egress_groups,
            sources,
            pool_sources,
            connect_eagerly: cfg.egress.connect == ConnectMode::Eager,
            reconnect_min_ms: cfg.egress.reconnect_min_ms,
            reconnect_max_ms: cfg.egress.reconnect_max_ms,
            connect_timeout_ms: cfg.egress.connect_timeout_ms,
            handshakes_max: cfg.egress.handshakes_max,
            ping_idle_ms: cfg.egress.ping_idle_ms,
            ping_timeout_ms: cfg.egress.ping_timeout_ms,
            tcp_user_timeout_ms: cfg.egress.tcp_user_timeout_ms,
            http: http1::Limits {
                head_bytes_max: cfg.intake.head_bytes_max,
                body_bytes_max: cfg.intake.body_bytes_max,
            },
            head_timeout_ms: cfg.intake.head_timeout_ms,
            idle_timeout_ms: cfg.intake.idle_timeout_ms,
            send_timeout_ms: cfg.intake.send_timeout_ms,
            intake_conns_max: cfg.intake.connections_max,
            intake_per_source_max: cfg.intake.connections_per_source_max,
            h2: upstream_h2_config(),
            live: None,
            metrics: cfg.metrics,
            handoffs: cfg.handoffs,
            ledger: None,
        })
    }

    /// A loopback setup for tests and the demo: `regions` engines, `sources` egress addresses.
    pub fn local(regions: Vec<RegionSpec>, sources: Vec<IpAddr>) -> Spec {
        let sources: Vec<Source> = sources.into_iter().map(Source::Local).collect();
        let (tenants, tenant_stats) = open_tenants(&regions, crate::config::Policy::open());
        Spec {
            tenants,
            tenant_stats,
            threads: 1,
            pin_threads: false,
            reactor: crate::config::Reactor::default(),
            arena_slots: 4096,
            bundle_max_age_ms: 2_000,
            upstream_timeout_ms: 1_000,
            record_keep_s: crate::journal::KEEP_S_DEFAULT,
            record_bundles_max: 1 << 16,
            leader: crate::config::Leader::default(),
            leader_board: Arc::default(),
            auth: None,
            rotating: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            regions,
            source_group: vec![0; sources.len()],
            egress_groups: Vec::new(),
            pool_sources: sources.len(),
            sources,
            connect_eagerly: true,
            reconnect_min_ms: 100,
            reconnect_max_ms: 30_000,
            connect_timeout_ms: 5_000,
            handshakes_max: 256,
            ping_idle_ms: crate::config::PING_IDLE_MS_DEFAULT,
            ping_timeout_ms: crate::config::PING_TIMEOUT_MS_DEFAULT,
            tcp_user_timeout_ms: crate::config::TCP_USER_TIMEOUT_MS_DEFAULT,
            http: http1::Limits::default(),
            head_timeout_ms: http1::HEAD_TIMEOUT_MS_DEFAULT,
            idle_timeout_ms: http1::IDLE_TIMEOUT_MS_DEFAULT,
            send_timeout_ms: http1::SEND_TIMEOUT_MS_DEFAULT,
            intake_conns_max: 256,
            intake_per_source_max: 256,
            h2: upstream_h2_config(),
            live: None,
            metrics: true,
            handoffs: true,
            ledger: None,
        }
    }

    /// No tenants: everyone's requests get `policy` (replaces any tenants), as a file's
    /// `[default_tenant]` alone does.
    pub fn open_to_all(&mut self, policy: crate::config::Policy) {
        (self.tenants, self.tenant_stats) = open_tenants(&self.regions, policy);
    }

    /// Runs on `live`: each thread follows its reloads, starting from its current tenants.
    pub fn go_live(&mut self, live: Arc<crate::config::Shared>) {
        self.tenants = live.load().tenants.clone();
        self.tenant_stats = live.tenant_stats().clone();
        self.live = Some(live);
    }

    /// Thread `t`'s share: of each egress group a contiguous run of its sources, the groups
    /// one after another (the shared addresses first), and a run of arena slots, split as the
    /// config splits them ([`crate::config::thread_share`]), so every thread owns pairs
    /// whenever there are at least as many sources as threads ([`Relay::start`] refuses
    /// fewer). With no groups, a contiguous run of the sources as listed.
    pub fn thread(&self, t: usize) -> ThreadSpec {
        let n = self.threads.max(1);
        // A source past `source_group` (a spec whose sources were changed alone) is shared.
        let of: Vec<u8> = (0..self.sources.len())
            .map(|i| self.source_group.get(i).copied().unwrap_or(0))
            .collect();
        let (own, groups) = crate::config::thread_share(&of, self.egress_groups.len(), n, t);
        let slots = crate::config::even_share(self.arena_slots as usize, n, t);
        let mut group_names = Vec::with_capacity(self.egress_groups.len() + 1);
        group_names.push(crate::config::SHARED_GROUP.to_string());
        group_names.extend(self.egress_groups.iter().cloned());
        // The thread's pairs' full rate: each of its sources once per interval, per region.
        let sends_per_s: f64 = self
            .regions
            .iter()
            .map(|r| own.len() as f64 * 1_000.0 / r.interval_ms.max(1) as f64)
            .sum();
        ThreadSpec {
            thread: t,
            records: crate::journal::capacity_for(
                sends_per_s,
                self.record_keep_s,
                self.record_bundles_max,
                n,
                slots.len(),
            ),
            sources: own.iter().map(|&i| self.sources[i].clone()).collect(),
            places: {
                let all = places_by_kind(&self.sources);
                own.iter().map(|&i| all[i]).collect()
            },
            groups,
            group_names,
            arena_slots: (slots.len() as u32).max(1),
            regions: self.regions.clone(),
            bundle_max_age_ms: self.bundle_max_age_ms,
            upstream_timeout_ms: self.upstream_timeout_ms,
            leader: self.leader,
            leader_board: self.leader_board.clone(),
            auth: self.auth.clone(),
            connect_eagerly: self.connect_eagerly,
            reconnect_min_ms: self.reconnect_min_ms,
            reconnect_max_ms: self.reconnect_max_ms,
            handshakes_max: self.handshakes_max,
            connect_timeout_ms: self.connect_timeout_ms,
            ping_idle_ms: self.ping_idle_ms,
            ping_timeout_ms: self.ping_timeout_ms,
            h2: self.h2.clone(),
            ledger: self.ledger.clone(),
            tenants: self.tenants.clone(),
            tenant_stats: self.tenant_stats.clone(),
        }
    }
}

/// No tenant: every request is the default tenant's, under `policy`.
fn open_tenants(
    regions: &[RegionSpec],
    policy: crate::config::Policy,
) -> (
    Arc<crate::config::TenantTable>,
    Arc<crate::metrics::tenants::TenantStats>,
) {
    let open = crate::config::Tenants {
        default: Some(policy),
        ..crate::config::Tenants::open()
    };
    let stats = Arc::new(crate::metrics::tenants::TenantStats::new(open.max));
    let names: Vec<String> = regions.iter().map(|r| r.name.clone()).collect();
    let table =
        crate::config::TenantTable::build(&open, &names, &names, &[], &[], u32::MAX, None, &stats)
            .expect("the open table has no rule that can fail");
    (Arc::new(table), stats)
}

/// One thread's share of a [`Spec`].
#[derive(Clone, Debug)]
pub struct ThreadSpec {
    pub thread: usize,
    /// Records of recent bundles it keeps ([`crate::journal::capacity_for`]).
    pub records: usize,
    /// Its sources, grouped by egress group (group 0's first).
    pub sources: Vec<Source>,
    /// Each of `sources`' place among the pool's sources of its kind (local IPv4, local IPv6,
    /// SOCKS5 proxy), over every thread ([`places_by_kind`]).
    pub places: Vec<u32>,
    /// How many of `sources` each egress group has, in order (empty: one group, all shared).
    pub groups: Vec<u32>,
    /// Each group's name, "shared" first.
    pub group_names: Vec<String>,
    pub arena_slots: u32,
    pub regions: Vec<RegionSpec>,
    pub bundle_max_age_ms: u64,
    pub upstream_timeout_ms: u64,
    pub leader: crate::config::Leader,
    /// Shared by every thread.
    pub leader_board: Arc<leader::Board>,
    pub auth: Option<Arc<auth::Signer>>,
    pub connect_eagerly: bool,
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    pub handshakes_max: u32,
    /// Connect, tunnel and TLS handshake together must finish within this.
    pub connect_timeout_ms: u64,
    /// HTTP/2 PING after this long without a frame from the engine (0: off).
    pub ping_idle_ms: u64,
    /// Every PING must be acknowledged within this.
    pub ping_timeout_ms: u64,
    pub h2: h2::conn::Config,
    pub ledger: Option<Arc<crate::limiter::ledger::Ledger>>,
    pub tenants: Arc<crate::config::TenantTable>,
    pub tenant_stats: Arc<crate::metrics::tenants::TenantStats>,
}

/// Each source's place among the pool's sources of its kind: local IPv4, local IPv6, SOCKS5
/// proxy. A kind's sources are given only the addresses of a name they can reach (a local
/// source those of its family, a proxy any), so their places among their kind, over the whole
/// pool, spread them over those addresses: in a list alternating IPv4 and IPv6 sources every
/// IPv4 one would otherwise sit at an even place, and counted per thread each thread's first
/// source would sit at place 0, all on one address.
fn places_by_kind(sources: &[Source]) -> Vec<u32> {
    let mut next = [0u32; 3];
    sources
        .iter()
        .map(|s| {
            let kind = match s {
                Source::Local(ip) if ip.is_ipv4() => 0,
                Source::Local(_) => 1,
                Source::Socks5 { .. } => 2,
            };
            next[kind] += 1;
            next[kind] - 1
        })
        .collect()
}
