//! bench-engine: a synthetic Jito block engine that every relay measurement goes through.
//!
//! It serves, on one loopback address per region (as Jito's engines do, all on the same host):
//!
//! - gRPC `searcher.SearcherService`: SendBundle, GetTipAccounts, GetNextScheduledLeader,
//!   GetRegions;
//! - JSON-RPC `sendTransaction` on `/api/v1/transactions`;
//! - JSON-RPC `getBundleStatuses` and `getInflightBundleStatuses` on `/api/v1/bundles`,
//!   `/api/v1/getBundleStatuses` and `/api/v1/getInflightBundleStatuses`, answered from a
//!   landing model: an accepted bundle lands `land_ms` after acceptance, in the slot of that
//!   instant, iff its id's first byte is below `land_share × 256`, else it fails then;
//! - gRPC `auth.AuthService`: GenerateAuthChallenge, GenerateAuthTokens, RefreshAccessToken,
//!   Jito's searcher authentication (an ed25519-signed challenge buys an access and a refresh
//!   token), served always and checked as Jito checks it ([`auth`]). With
//!   [`EngineConfig::auth`] set, every SearcherService and JSON-RPC call must carry
//!   `authorization: Bearer <access token>` of a live token, else it is refused before anything
//!   else looks at it (gRPC UNAUTHENTICATED, JSON-RPC HTTP 401 with -32001). Tokens are good on
//!   every region; auth calls are not under the per-source rule. The `revoke` fault makes the
//!   engine forget every access token it has issued, as a restart would ([`fault`]).
//!
//! It enforces Jito's one call per interval per (source IP, region) on every SendBundle and
//! JSON-RPC call alike, checks every packet with the Solana crates, answers Jito's bundle id
//! (and a transaction's signature), runs a leader schedule (the next leader's region changes
//! every four `slot_ms`; accepted bundles that arrived at it are counted; the status calls'
//! slots are the same clock), injects faults on a schedule, measures delivery latency from
//! bench-load's shared sent log, and reports everything as JSON ([`EngineStats`]).
//!
//! Layers: [`limiter`] (the rate rule), [`validate`] (bundle checks and id), [`landing`] (which
//! bundles land, and when), [`auth`] (challenges, tokens, their expiry), [`fault`] (rule syntax
//! and schedule) and [`grpc`] (framing, statuses) decide; `server` (gRPC) and `jsonrpc` (the JSON-RPC methods) only do I/O.
//!
//! gRPC is served on the `h2` crate directly, not on tonic: the faults need what tonic's server
//! hides (RST_STREAM on one stream, GOAWAY at a chosen instant, withholding flow-control credit,
//! dropping a connection without GOAWAY), and skipping tonic's tower stack makes each call cheaper
//! on the two cores the engine shares with everything else.
//!
//! Runtime: [`Engine::start`] spawns its tasks on the caller's tokio runtime (any flavour). The
//! binary runs it on a current-thread runtime, one core at most.
//!
//! Measured cost: `target/debug/bench-engine --cpu-probe 20000` (dev profile: this crate at
//! opt-level 1, dependencies at 2; 3 × 250-byte signed transactions per bundle; 256 loopback
//! connections from 32 sources to 8 regions, one call in flight each, ≈2k calls/s; 2 cores with
//! a load average of 11 from other builds): 77–79 µs of engine-thread CPU per accepted
//! SendBundle, of which ≈25% is kernel (one read and one write per call at this rate: no
//! batching). shared/measurements.md puts a tonic server at 69 µs in the same 512 × 1 shape.
//! Base58 of the first signatures was the largest single user-space cost until `validate` got
//! its own limb-wise encoder (≈5 µs → well under 1 µs per signature).

pub mod auth;
pub mod fault;
pub mod grpc;
mod jsonrpc;
pub mod landing;
pub mod limiter;
pub mod probe;
mod server;
pub mod stats;
pub mod testkit;
pub mod tls;
pub mod validate;

pub use auth::AuthConfig;
pub use fault::{FaultKind, FaultParseError, FaultSpec, storm_picks};
pub use stats::{EngineStats, FaultRuleStats, LatencyStats, RegionStats};

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use crate::report::Percentiles;
use crate::sentlog::{self, SentLog, SentLogReader};
use auth::AuthStore;
pub use bundle_relay::jito::{INTERVAL_MS_DEFAULT, MAINNET_REGIONS, TIP_ACCOUNTS};
use fault::{FaultRule, Faults};
use landing::Landing;
use limiter::Limiter;
use stats::{Counters, DupSet, Latency, get};
use validate::Reject;

/// Default region i listens on 127.0.0.(11 + i).
pub const BASE_IP_DEFAULT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 11);
pub const PORT_DEFAULT: u16 = 10_000;
pub const STATS_ADDR_DEFAULT: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)), 9100);
/// Bundle ids remembered for duplicate counting: 32 B each plus set overhead, ≈16 MiB, more than
/// a minute of any load these two cores can offer.
pub const DUP_CAPACITY_DEFAULT: usize = 262_144;
/// Solana's slot time, for the synthetic leader schedule.
pub const SLOT_MS_DEFAULT: u64 = 400;
/// Leaders hold 4 consecutive slots, as on Solana.
pub const LEADER_SLOTS: u64 = 4;
/// The slot the engine's clock starts at: a plausible mainnet slot to count from.
pub const SLOT_BASE: u64 = 380_000_000;
/// An accepted bundle that lands does so this long after acceptance: two of Solana's 400 ms
/// slots.
pub const LAND_MS_DEFAULT: u64 = 800;
/// Share of accepted bundles that land (by their id's first byte, see [`landing`]).
pub const LAND_SHARE_DEFAULT: f64 = 1.0;
/// Accepted bundles remembered for the status calls: ≈300 B each with 3 transactions
/// (≈20 MiB), half a minute of the most these two cores can offer and far longer than a relay
/// polls a bundle's status.
pub const LANDING_CAPACITY: usize = 65_536;

/// The engine's slot `elapsed_ns` after it started, `slot_ms` a slot: the one clock the leader
/// schedule and the bundle statuses share.
pub fn slot_at(elapsed_ns: u64, slot_ms: u64) -> u64 {
    SLOT_BASE + elapsed_ns / (slot_ms * 1_000_000)
}

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub regions: Vec<String>,
    /// Region i listens on `base_ip + i * ip_step`, port `port + i * port_step`.
    pub base_ip: Ipv4Addr,
    pub ip_step: u32,
    /// 0 in tests: every region gets an ephemeral port (see [`EngineHandle::region_addrs`]).
    pub port: u16,
    pub port_step: u16,
    pub interval_ms: u64,
    /// The synthetic leader schedule's slot: leaders hold [`LEADER_SLOTS`] slots each, the
    /// regions in turn.
    pub slot_ms: u64,
    /// An accepted bundle that lands does so this many ms after acceptance; one that does not
    /// is `Pending` until then, `Failed` after (see [`landing`]).
    pub land_ms: u64,
    /// 0.0..=1.0: a bundle lands iff its id's first byte is below `land_share × 256`.
    pub land_share: f64,
    pub faults: Vec<FaultSpec>,
    /// Seeds the storm's choice of sources.
    pub seed: u64,
    pub tls: bool,
    pub tls_cert_out: Option<PathBuf>,
    pub sent_log: Option<PathBuf>,
    /// Only bench tags of this run count for latency.
    pub run_id: Option<u32>,
    /// `None`: no stats endpoint.
    pub stats_addr: Option<SocketAddr>,
    pub dup_capacity: usize,
    /// Keep every accepted bundle for [`EngineHandle::recorded`] (memory grows with each).
    pub record: bool,
    /// `Some`: every engine call must carry a live access token from the auth service, which
    /// issues them with these lifetimes. `None`: no token is asked for, and the auth service
    /// (still served) issues them with Jito's lifetimes ([`AuthConfig::default`]).
    pub auth: Option<AuthConfig>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            regions: MAINNET_REGIONS.iter().map(|s| s.to_string()).collect(),
            base_ip: BASE_IP_DEFAULT,
            ip_step: 1,
            port: PORT_DEFAULT,
            port_step: 0,
            interval_ms: INTERVAL_MS_DEFAULT,
            slot_ms: SLOT_MS_DEFAULT,
            land_ms: LAND_MS_DEFAULT,
            land_share: LAND_SHARE_DEFAULT,
            faults: Vec::new(),
            seed: 0,
            tls: false,
            tls_cert_out: None,
            sent_log: None,
            run_id: None,
            stats_addr: Some(STATS_ADDR_DEFAULT),
            dup_capacity: DUP_CAPACITY_DEFAULT,
            record: false,
            auth: None,
        }
    }
}

impl EngineConfig {
    /// A loopback layout for in-process tests: the given regions on 127.0.0.1 with ephemeral
    /// ports, no stats endpoint.
    pub fn for_tests(regions: &[&str]) -> EngineConfig {
        EngineConfig {
            regions: regions.iter().map(|s| s.to_string()).collect(),
            base_ip: Ipv4Addr::LOCALHOST,
            ip_step: 0,
            port: 0,
            stats_addr: None,
            ..EngineConfig::default()
        }
    }

    /// The address region `i` listens on.
    pub fn region_addr(&self, i: usize) -> SocketAddr {
        let ip = Ipv4Addr::from(u32::from(self.base_ip) + i as u32 * self.ip_step);
        let port = if self.port == 0 {
            0
        } else {
            self.port + i as u16 * self.port_step
        };
        SocketAddr::new(IpAddr::V4(ip), port)
    }
}

/// One accepted bundle, as the recorder keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedBundle {
    pub id: String,
    pub region: String,
    pub source: IpAddr,
    pub packets: Vec<Vec<u8>>,
}

pub(crate) struct Region {
    pub name: String,
    pub addr: SocketAddr,
    pub limiter: Mutex<Limiter>,
    pub accepted: AtomicU64,
    pub early: AtomicU64,
    pub open: AtomicU64,
}

/// State every task shares.
pub(crate) struct Shared {
    pub start_ns: u64,
    pub start_instant: tokio::time::Instant,
    pub interval_ms: u64,
    pub slot_ms: u64,
    pub land_ms: u64,
    pub land_share: f64,
    pub seed: u64,
    pub regions: Vec<Region>,
    pub faults: Faults,
    pub counters: Counters,
    pub latency: Mutex<Latency>,
    pub dups: Mutex<DupSet>,
    pub landing: Mutex<Landing>,
    pub recorded: Option<Mutex<Vec<RecordedBundle>>>,
    /// Whether engine calls need an access token.
    pub auth_required: bool,
    /// One store for every region: a token bought on one is good on all.
    pub auth: Mutex<AuthStore>,
    pub sent_log: Option<SentLogReader>,
    pub run_id: Option<u32>,
    pub shutdown: watch::Sender<bool>,
    /// Index of a connection fault rule whose instant has come.
    pub events: broadcast::Sender<usize>,
}

impl Shared {
    pub fn elapsed_ns(&self) -> u64 {
        sentlog::monotonic_ns().saturating_sub(self.start_ns)
    }

    /// The engine's slot at `elapsed_ns`.
    pub fn slot_at(&self, elapsed_ns: u64) -> u64 {
        slot_at(elapsed_ns, self.slot_ms)
    }

    pub fn snapshot(&self) -> EngineStats {
        let c = &self.counters;
        let mut early_by_source = BTreeMap::new();
        let mut sources = BTreeSet::new();
        let mut regions = Vec::with_capacity(self.regions.len());
        for r in &self.regions {
            for (ip, s) in r.limiter.lock().expect("limiter lock").sources() {
                sources.insert(*ip);
                if s.early > 0 {
                    *early_by_source.entry(ip.to_string()).or_insert(0) += s.early;
                }
            }
            regions.push(RegionStats {
                name: r.name.clone(),
                addr: r.addr.to_string(),
                accepted: get(&r.accepted),
                early_sends: get(&r.early),
                connections_open: get(&r.open),
            });
        }
        let mut rejected = BTreeMap::new();
        rejected.insert("early_send".to_string(), get(&c.early_sends));
        rejected.insert("throttled".to_string(), get(&c.throttled));
        rejected.insert("storm".to_string(), get(&c.storm_told));
        rejected.insert("body_too_large".to_string(), get(&c.body_too_large));
        for r in Reject::ALL {
            rejected.insert(r.name().to_string(), get(&c.rejected[r as usize]));
        }
        let mut faults: BTreeMap<String, u64> = FaultKind::ALL
            .iter()
            .map(|k| (k.name().to_string(), 0))
            .collect();
        let elapsed_ns = self.elapsed_ns();
        let mut fault_rules = Vec::new();
        for rule in &self.faults.rules {
            let n = rule.injected_by(elapsed_ns);
            *faults
                .get_mut(rule.spec.kind.name())
                .expect("every kind listed") += n;
            fault_rules.push(FaultRuleStats {
                rule: rule.spec.text.clone(),
                injected: n,
            });
        }
        let latency = LatencyStats {
            percentiles: Percentiles::of(&self.latency.lock().expect("latency lock").hist),
            untagged: get(&c.latency_untagged),
            unsent: get(&c.latency_unsent),
            other_run: get(&c.latency_other_run),
        };
        let bundles_landed = self
            .landing
            .lock()
            .expect("landing lock")
            .landed(elapsed_ns);
        EngineStats {
            uptime_ms: elapsed_ns / 1_000_000,
            interval_ms: self.interval_ms,
            send_bundle_calls: get(&c.send_bundle_calls),
            accepted: get(&c.accepted),
            early_sends: get(&c.early_sends),
            early_sends_by_source: early_by_source,
            rejected,
            decode_failures: get(&c.decode_failures),
            duplicates: get(&c.duplicates),
            distinct_sources: sources.len() as u64,
            regions,
            faults,
            fault_rules,
            latency,
            other_calls: get(&c.other_calls),
            slot_ms: self.slot_ms,
            land_ms: self.land_ms,
            land_share: self.land_share,
            at_leader: get(&c.at_leader),
            send_transaction_calls: get(&c.send_transaction_calls),
            transactions_accepted: get(&c.transactions_accepted),
            transactions_rejected: get(&c.transactions_rejected),
            status_calls: get(&c.status_calls),
            inflight_status_calls: get(&c.inflight_status_calls),
            bundles_landed,
            unknown_method: get(&c.unknown_method),
            connections_accepted: get(&c.connections_accepted),
            connections_open: get(&c.connections_open),
            accept_errors: get(&c.accept_errors),
            accept_emfile: get(&c.accept_emfile),
            tls_handshake_failures: get(&c.tls_handshake_failures),
            auth: self.auth_required,
            auth_access_ttl_ms: self.auth.lock().expect("auth lock").config().access_ttl_ms,
            auth_challenges: get(&c.auth_challenges),
            auth_tokens_issued: get(&c.auth_tokens_issued),
            auth_refreshes: get(&c.auth_refreshes),
            auth_refused: get(&c.auth_refused),
            unauthenticated_calls: get(&c.unauthenticated_calls),
            expired_token_calls: get(&c.expired_token_calls),
        }
    }
}

pub struct Engine;

impl Engine {
    /// Binds every region (and the stats endpoint), then serves on the caller's tokio runtime
    /// until [`EngineHandle::shutdown`]. Errors name what could not be set up.
    pub async fn start(cfg: EngineConfig) -> io::Result<EngineHandle> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        if cfg.regions.is_empty() {
            return Err(bad("no regions configured".into()));
        }
        for (i, name) in cfg.regions.iter().enumerate() {
            if let Some(j) = cfg.regions[i + 1..].iter().position(|n| n == name) {
                return Err(bad(format!(
                    "region {name} is named twice (regions {i} and {})",
                    i + 1 + j
                )));
            }
        }
        if cfg.interval_ms == 0 {
            return Err(bad("interval_ms must be at least 1".into()));
        }
        if cfg.slot_ms == 0 {
            return Err(bad("slot_ms must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&cfg.land_share) {
            return Err(bad(format!(
                "land_share {} is outside 0.0..=1.0",
                cfg.land_share
            )));
        }
        if cfg
            .auth
            .is_some_and(|a| a.access_ttl_ms == 0 || a.refresh_ttl_ms == 0)
        {
            return Err(bad("auth token lifetimes must be at least 1 ms".into()));
        }
        let rules = cfg
            .faults
            .iter()
            .map(|s| FaultRule::new(s.clone(), &cfg.regions))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(e.0))?;
        let sent_log = match &cfg.sent_log {
            None => None,
            Some(p) => Some(SentLog::open(p).map_err(|e| {
                io::Error::new(e.kind(), format!("opening sent log {}: {e}", p.display()))
            })?),
        };
        let mut listeners = Vec::with_capacity(cfg.regions.len());
        let mut regions = Vec::with_capacity(cfg.regions.len());
        for (i, name) in cfg.regions.iter().enumerate() {
            let want = cfg.region_addr(i);
            let l = TcpListener::bind(want).await.map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("binding region {name} to {want}: {e} (is another engine running?)"),
                )
            })?;
            regions.push(Region {
                name: name.clone(),
                addr: l.local_addr()?,
                limiter: Mutex::new(Limiter::new(cfg.interval_ms)),
                accepted: AtomicU64::new(0),
                early: AtomicU64::new(0),
                open: AtomicU64::new(0),
            });
            listeners.push(l);
        }
        let stats_listener = match cfg.stats_addr {
            None => None,
            Some(a) => Some(TcpListener::bind(a).await.map_err(|e| {
                io::Error::new(e.kind(), format!("binding stats endpoint to {a}: {e}"))
            })?),
        };
        let stats_addr = stats_listener
            .as_ref()
            .map(|l| l.local_addr())
            .transpose()?;
        let addrs: Vec<SocketAddr> = regions.iter().map(|r| r.addr).collect();
        let tls = if cfg.tls {
            let m = tls::generate(&cfg.regions, &addrs).map_err(io::Error::other)?;
            if let Some(p) = &cfg.tls_cert_out {
                std::fs::write(p, &m.ca_pem).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("writing TLS certificate to {}: {e}", p.display()),
                    )
                })?;
            }
            Some(m)
        } else {
            None
        };
        let (shutdown, _) = watch::channel(false);
        let (events, _) = broadcast::channel(64);
        let faults = Faults { rules };
        let sh = Arc::new(Shared {
            start_ns: sentlog::monotonic_ns(),
            start_instant: tokio::time::Instant::now(),
            interval_ms: cfg.interval_ms,
            slot_ms: cfg.slot_ms,
            land_ms: cfg.land_ms,
            land_share: cfg.land_share,
            seed: cfg.seed,
            regions,
            auth: Mutex::new(
                AuthStore::new(cfg.auth.unwrap_or_default()).with_revokes(faults.revoke_instants()),
            ),
            faults,
            counters: Counters::default(),
            latency: Mutex::new(Latency::new()),
            dups: Mutex::new(DupSet::new(cfg.dup_capacity)),
            landing: Mutex::new(Landing::new(LANDING_CAPACITY, cfg.land_ms, cfg.land_share)),
            recorded: cfg.record.then(|| Mutex::new(Vec::new())),
            auth_required: cfg.auth.is_some(),
            sent_log,
            run_id: cfg.run_id,
            shutdown,
            events,
        });
        let mut tasks = Vec::new();
        for (i, l) in listeners.into_iter().enumerate() {
            let acceptor = tls.as_ref().map(|m| m.acceptor.clone());
            tasks.push(tokio::spawn(server::accept_loop(
                sh.clone(),
                i,
                l,
                acceptor,
            )));
        }
        if let Some(l) = stats_listener {
            tasks.push(tokio::spawn(server::stats_loop(sh.clone(), l)));
        }
        tasks.push(tokio::spawn(schedule_connection_faults(sh.clone())));
        Ok(EngineHandle {
            shared: sh,
            tasks,
            stats_addr,
            ca_pem: tls.map(|m| m.ca_pem),
        })
    }
}

/// Fires each goaway/close rule at its instant, to every connection open then.
async fn schedule_connection_faults(sh: Arc<Shared>) {
    let mut due: Vec<(u64, usize)> = sh
        .faults
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.spec.kind.is_connection_event())
        .map(|(i, r)| (r.start_ns(), i))
        .collect();
    due.sort();
    let mut shutdown = sh.shutdown.subscribe();
    for (at_ns, i) in due {
        tokio::select! {
            _ = tokio::time::sleep_until(sh.start_instant + Duration::from_nanos(at_ns)) => {}
            _ = shutdown.changed() => return,
        }
        let _ = sh.events.send(i);
    }
}

/// A running engine.
pub struct EngineHandle {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    stats_addr: Option<SocketAddr>,
    ca_pem: Option<String>,
}

impl EngineHandle {
    /// Each region's name and bound address, in configuration order.
    pub fn region_addrs(&self) -> Vec<(String, SocketAddr)> {
        self.shared
            .regions
            .iter()
            .map(|r| (r.name.clone(), r.addr))
            .collect()
    }

    pub fn stats_addr(&self) -> Option<SocketAddr> {
        self.stats_addr
    }

    /// The CA certificate (PEM) in TLS mode.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    pub fn stats(&self) -> EngineStats {
        self.shared.snapshot()
    }

    /// Every accepted bundle so far, in arrival order (empty unless `record` was set).
    pub fn recorded(&self) -> Vec<RecordedBundle> {
        self.shared
            .recorded
            .as_ref()
            .map(|r| r.lock().expect("recorder lock").clone())
            .unwrap_or_default()
    }

    /// Stops listening, drops every connection and waits for the listeners to close.
    pub async fn shutdown(self) -> EngineStats {
        self.shared.shutdown.send_replace(true);
        for t in self.tasks {
            let _ = t.await;
        }
        self.shared.snapshot()
    }
}
