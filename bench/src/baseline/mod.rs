//! bench-baseline: the conventional relay every bundle-relay figure is compared with, in the same
//! run. It is the seed relay's Rust port done competently: tokio multi-thread runtime, axum
//! intake, serde/bincode decoding with the Solana crates, a `Semaphore` in-flight cap, the seed's
//! mutex-guarded ready-queue limiter per region, one tonic `Channel` per (egress address, region)
//! bound to its local address, one tokio task per admitted bundle that retries until
//! delivered, rejected or expired, and its counts in bundle-relay's `Totals` behind one mutex.
//!
//! Measured (dev profile: this crate at opt-level 1, dependencies at 2; 2 shared cores under
//! load average ~14; `bench/tests/baseline_process.rs` with `N=10000`, one relay worker thread,
//! 16 closed-loop HTTP connections, 3-transaction bundles of ~215-byte transfers, 64 egress x 8
//! regions at 10 ms): ~650 bundles/s delivered (bounded by the load side and the in-process test
//! engine sharing the cores), relay CPU ~270 us per delivered bundle with base58 and ~210 us with
//! base64, so quadratic base58 decoding costs ~20 us per transaction; the rest is hyper/axum,
//! serde, one task spawn, one limiter lock and one tonic unary call per bundle.
//!
//! Pacing is judged by the engine when a request arrives, not when we pick a pair: booking the
//! next slot at pick time lets scheduling jitter put two sends of one pair closer than the
//! interval at the engine, and lets a second send leave before the first one's back-off answer.
//! So an acquired pair stays held while its send is unanswered, and its next slot is counted
//! from the answer (`RegionLimiter::settle`): one request in flight per pair, never early.
//!
//! `config.rs` is what it runs with and the checks that refuse what this machine cannot run;
//! `rpc.rs` decodes JSON-RPC; `intake.rs` holds the axum routers; `relay.rs` the shared state
//! and each bundle's retry loop; `limiter.rs` the seed's limiter. This file starts them and is
//! the running relay's handle.

pub mod config;
mod intake;
pub mod limiter;
mod relay;
pub mod rpc;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use bundle_relay::metrics::accounting::Totals;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tonic::transport::Channel;

pub use config::{BaselineConfig, ConfigError};
pub use intake::MAX_BODY_BYTES;
use intake::{bind, intake_router, serve, stats_handler};
use limiter::RegionLimiter;
use relay::{Region, Shared};
pub use relay::{Stats, parse_retry_after_ms};

use crate::searcher_grpc::searcher_service_client::SearcherServiceClient;

/// Errors from `Baseline::start`.
#[derive(Debug)]
pub enum StartError {
    Config(ConfigError),
    Bind(SocketAddr, std::io::Error),
    Connect {
        region: String,
        engine: SocketAddr,
        egress: IpAddr,
        error: String,
    },
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "{e}"),
            StartError::Bind(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            StartError::Connect {
                region,
                engine,
                egress,
                error,
            } => {
                write!(
                    f,
                    "cannot connect to region {region} at {engine} from {egress}: {error}"
                )
            }
        }
    }
}

impl std::error::Error for StartError {}

/// The conventional relay.
pub struct Baseline;

impl Baseline {
    /// Checks the config and the file limit, binds every port, builds the channels and starts
    /// serving on the current tokio runtime.
    pub async fn start(cfg: BaselineConfig) -> Result<BaselineHandle, StartError> {
        cfg.validate().map_err(StartError::Config)?;
        config::check_nofile(&cfg).map_err(StartError::Config)?;

        let interval_ns = cfg.interval_ms * 1_000_000;
        let channels = connect_all(&cfg).await?;
        let regions: Vec<Region> = cfg
            .regions
            .iter()
            .zip(channels)
            .map(|((name, _), channels)| Region {
                name: name.clone(),
                limiter: RegionLimiter::with_journal(cfg.egress.len(), interval_ns, cfg.journal)
                    .holding_in_flight(cfg.max_age_ms * 1_000_000),
                clients: channels
                    .into_iter()
                    .map(SearcherServiceClient::new)
                    .collect(),
            })
            .collect();

        let shared = Arc::new(Shared {
            regions,
            permits: Arc::new(Semaphore::new(cfg.max_in_flight)),
            max_in_flight: cfg.max_in_flight,
            totals: Mutex::new(Totals::default()),
            reasons: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            max_age_ns: cfg.max_age_ms * 1_000_000,
            default_retry_after_ns: cfg.default_retry_after_ms * 1_000_000,
            rotation: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
        });

        let (stop_tx, stop_rx) = watch::channel(false);
        let mut servers = Vec::new();
        let mut pinned_addrs = Vec::with_capacity(cfg.regions.len());
        let rotating_listener =
            bind(cfg.rotating_addr).map_err(|e| StartError::Bind(cfg.rotating_addr, e))?;
        let rotating_addr = rotating_listener
            .local_addr()
            .map_err(|e| StartError::Bind(cfg.rotating_addr, e))?;
        servers.push(serve(
            rotating_listener,
            intake_router(&shared, None),
            stop_rx.clone(),
        ));
        for i in 0..cfg.regions.len() {
            let want = cfg.pinned_addr(i);
            let listener = bind(want).map_err(|e| StartError::Bind(want, e))?;
            pinned_addrs.push(
                listener
                    .local_addr()
                    .map_err(|e| StartError::Bind(want, e))?,
            );
            servers.push(serve(
                listener,
                intake_router(&shared, Some(i)),
                stop_rx.clone(),
            ));
        }
        let mut admin_addr = None;
        if let Some(want) = cfg.admin_addr {
            let listener = bind(want).map_err(|e| StartError::Bind(want, e))?;
            admin_addr = Some(
                listener
                    .local_addr()
                    .map_err(|e| StartError::Bind(want, e))?,
            );
            let router = Router::new()
                .route("/stats", get(stats_handler))
                .with_state(shared.clone());
            servers.push(serve(listener, router, stop_rx.clone()));
        }
        Ok(BaselineHandle {
            shared,
            rotating_addr,
            pinned_addrs,
            admin_addr,
            stop_tx,
            servers,
            drain: Duration::from_millis(cfg.drain_ms),
        })
    }
}

/// One channel per (region, egress address). Lazy by default; with `connect_at_startup` every
/// pair connects now, concurrently, so the first bundles do not pay the handshakes.
async fn connect_all(cfg: &BaselineConfig) -> Result<Vec<Vec<Channel>>, StartError> {
    let mut channels: Vec<Vec<Channel>> = Vec::with_capacity(cfg.regions.len());
    let mut connects = tokio::task::JoinSet::new();
    for (r, (name, engine)) in cfg.regions.iter().enumerate() {
        let mut row = Vec::with_capacity(cfg.egress.len());
        for (e, &egress) in cfg.egress.iter().enumerate() {
            let endpoint = config::endpoint(*engine, egress);
            row.push(endpoint.connect_lazy());
            if cfg.connect_at_startup {
                let (name, engine) = (name.clone(), *engine);
                connects.spawn(async move {
                    let channel =
                        endpoint
                            .connect()
                            .await
                            .map_err(|error| StartError::Connect {
                                region: name,
                                engine,
                                egress,
                                error: format!("{error:?}"),
                            })?;
                    Ok::<_, StartError>((r, e, channel))
                });
            }
        }
        channels.push(row);
    }
    while let Some(joined) = connects.join_next().await {
        match joined {
            Ok(Ok((r, e, channel))) => channels[r][e] = channel,
            Ok(Err(error)) => return Err(error),
            Err(join) => {
                return Err(StartError::Connect {
                    region: String::new(),
                    engine: cfg.rotating_addr,
                    egress: cfg.egress[0],
                    error: join.to_string(),
                });
            }
        }
    }
    Ok(channels)
}

/// A running baseline relay.
pub struct BaselineHandle {
    shared: Arc<Shared>,
    rotating_addr: SocketAddr,
    pinned_addrs: Vec<SocketAddr>,
    admin_addr: Option<SocketAddr>,
    stop_tx: watch::Sender<bool>,
    servers: Vec<JoinHandle<()>>,
    drain: Duration,
}

impl BaselineHandle {
    /// The rotating port's address.
    pub fn rotating_addr(&self) -> SocketAddr {
        self.rotating_addr
    }

    /// Each region's name and pinned port address, in config order.
    pub fn pinned_addrs(&self) -> Vec<(String, SocketAddr)> {
        self.shared
            .regions
            .iter()
            .map(|r| r.name.clone())
            .zip(self.pinned_addrs.iter().copied())
            .collect()
    }

    /// Every intake address: the rotating one first, then the pinned ones in region order.
    pub fn intake_addrs(&self) -> Vec<SocketAddr> {
        std::iter::once(self.rotating_addr)
            .chain(self.pinned_addrs.iter().copied())
            .collect()
    }

    /// The admin address serving `GET /stats`, when enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The counters and the rejection reasons.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// The counters alone.
    pub fn totals(&self) -> Totals {
        self.shared.totals()
    }

    /// One region's limiter decisions in lock order, when `BaselineConfig::journal` is set.
    pub fn journal(&self, region: usize) -> Vec<limiter::Event> {
        self.shared.regions[region].limiter.journal()
    }

    /// The relay's clock: ns since start, the time base of `journal` and `pair_next_ns`.
    pub fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    /// Next-allowed time of one pair in ns since start (diagnostics and tests).
    pub fn pair_next_ns(&self, region: usize, egress: usize) -> u64 {
        self.shared.regions[region].limiter.pair_next_ns(egress)
    }

    /// Stops accepting, waits up to the drain deadline for in-flight bundles, ends the rest as
    /// failed, and returns the final stats.
    pub async fn shutdown(self) -> Stats {
        let _ = self.stop_tx.send(true);
        let all = self.shared.max_in_flight as u32;
        let drained = tokio::time::timeout(
            self.drain,
            self.shared.permits.clone().acquire_many_owned(all),
        )
        .await;
        if drained.is_err() {
            self.shared.stopping.store(true, Ordering::Relaxed);
        }
        for server in self.servers {
            if tokio::time::timeout(Duration::from_millis(200), server)
                .await
                .is_err()
            {
                // An idle keep-alive client holds the graceful shutdown open; its task is
                // simply dropped with the runtime.
            }
        }
        self.shared.stats()
    }
}
