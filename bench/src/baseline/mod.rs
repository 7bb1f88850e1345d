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

pub mod config;
pub mod limiter;
pub mod rpc;

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt as _;
use bundle_relay::jito::RETRY_AFTER_PREFIX;
use bundle_relay::metrics::accounting::Totals;
use bundle_relay::proto::bundle::Bundle;
use bundle_relay::proto::searcher::SendBundleRequest;
use serde::Serialize;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinHandle;
use tonic::Code;
use tonic::transport::Channel;

pub use config::{BaselineConfig, ConfigError};
use limiter::RegionLimiter;
use rpc::{RpcError, error_body, result_body};

use crate::searcher_grpc::searcher_service_client::SearcherServiceClient;

/// Listen backlog of every intake socket: bursts of new bot connections queue in the kernel
/// instead of being refused.
const LISTEN_BACKLOG: u32 = 4096;
/// Largest request body accepted: five base58 transactions at 1683 chars plus JSON framing and
/// an options object fit in 16 KiB with room to spare.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Distinct rejection reasons kept in the stats; more are folded into one "other" entry so a
/// misbehaving engine cannot grow the map without bound.
const REJECTION_REASONS_MAX: usize = 64;
/// Seconds a client is told to wait when the in-flight cap is reached (`Retry-After`).
const CAP_RETRY_AFTER_S: &str = "1";

/// The counters and the rejection reasons, as served on `GET /stats` and printed at exit.
///
/// The counters are bundle-relay's [`Totals`], of which the baseline keeps admitted,
/// delivered, rejected, expired, failed and in flight (so `admitted = delivered + rejected +
/// expired + failed + in_flight` at every quiescent point), retries (RESOURCE_EXHAUSTED,
/// UNAVAILABLE, transport), cooldowns (the engine's Retry-After), refused_cap (answered 429 at
/// the in-flight cap) and bad_requests (answered with a JSON-RPC error); the others stay 0.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    #[serde(flatten)]
    pub totals: Totals,
    pub rejection_reasons: BTreeMap<String, u64>,
}

struct Region {
    name: String,
    limiter: RegionLimiter,
    /// One client per egress address, indexed like `Shared::egress`.
    clients: Vec<SearcherServiceClient<Channel>>,
}

struct Shared {
    regions: Vec<Region>,
    permits: Arc<Semaphore>,
    max_in_flight: usize,
    /// One lock for every count, so a snapshot is consistent.
    totals: Mutex<Totals>,
    reasons: Mutex<HashMap<String, u64>>,
    epoch: Instant,
    max_age_ns: u64,
    default_retry_after_ns: u64,
    rotation: AtomicUsize,
    /// Set after the drain deadline: bundles still looping end as failed.
    stopping: AtomicBool,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Counts with the totals held.
    fn count(&self, f: impl FnOnce(&mut Totals)) {
        f(&mut self.totals.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn totals(&self) -> Totals {
        *self.totals.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stats(&self) -> Stats {
        Stats {
            totals: self.totals(),
            rejection_reasons: self
                .reasons
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        }
    }

    fn record_reason(&self, reason: String) {
        let mut reasons = self.reasons.lock().unwrap_or_else(|e| e.into_inner());
        if reasons.len() >= REJECTION_REASONS_MAX && !reasons.contains_key(&reason) {
            *reasons.entry("other".to_owned()).or_default() += 1;
        } else {
            *reasons.entry(reason).or_default() += 1;
        }
    }

    /// Rotating port: the region whose limiter can send soonest; regions that can all send now
    /// (or at the same time) take turns.
    fn pick_region(&self, now_ns: u64) -> usize {
        let n = self.regions.len();
        let start = self.rotation.fetch_add(1, Ordering::Relaxed) % n;
        let mut best = start;
        let mut best_ns = self.regions[start].limiter.head_next_ns().max(now_ns);
        for k in 1..n {
            let r = (start + k) % n;
            let t = self.regions[r].limiter.head_next_ns().max(now_ns);
            if t < best_ns {
                best = r;
                best_ns = t;
            }
        }
        best
    }
}

enum Outcome {
    Delivered,
    Rejected(String),
    Expired,
    Failed,
}

/// Ends one admitted bundle exactly once, even when its task is dropped at runtime shutdown.
struct InFlight {
    shared: Arc<Shared>,
    done: bool,
    _permit: OwnedSemaphorePermit,
}

impl InFlight {
    fn finish(mut self, outcome: Outcome) {
        match outcome {
            Outcome::Delivered => self.shared.count(|t| t.delivered += 1),
            Outcome::Rejected(reason) => {
                self.shared.record_reason(reason);
                self.shared.count(|t| t.rejected += 1);
            }
            Outcome::Expired => self.shared.count(|t| t.expired += 1),
            Outcome::Failed => self.shared.count(|t| t.failed += 1),
        }
        self.done = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let done = self.done;
        self.shared.count(|t| {
            if !done {
                t.failed += 1;
            }
            t.in_flight -= 1;
        });
    }
}

/// Parses Jito's `... Retry after 1606ms` hint from a gRPC status message.
pub fn parse_retry_after_ms(message: &str) -> Option<u64> {
    let rest = &message[message.find(RETRY_AFTER_PREFIX)? + RETRY_AFTER_PREFIX.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].starts_with("ms") {
        return None;
    }
    rest[..digits].parse().ok()
}

/// One admitted bundle's life: acquire a pair, send, and retry on another pair until it is
/// delivered, rejected or too old.
async fn deliver(
    shared: Arc<Shared>,
    pinned: Option<usize>,
    request: SendBundleRequest,
    admitted_ns: u64,
    guard: InFlight,
) {
    let deadline_ns = admitted_ns + shared.max_age_ns;
    let outcome = loop {
        let now_ns = shared.now_ns();
        if shared.stopping.load(Ordering::Relaxed) {
            break Outcome::Failed;
        }
        if now_ns >= deadline_ns {
            break Outcome::Expired;
        }
        let region = pinned.unwrap_or_else(|| shared.pick_region(now_ns));
        let r = &shared.regions[region];
        let pair = match r.limiter.acquire(now_ns) {
            Ok(pair) => pair,
            Err(wait_ns) => {
                // Sleep the exact wait (tokio rounds up to its millisecond tick, never early),
                // but no longer than the bundle may live, nor than one interval: a pair held by
                // an unanswered send is settled, and so freed sooner, when its answer comes.
                let wait_ns = wait_ns
                    .min(r.limiter.interval_ns())
                    .min(deadline_ns - now_ns);
                tokio::time::sleep(Duration::from_nanos(wait_ns)).await;
                continue;
            }
        };
        let mut client = r.clients[pair].clone();
        let call = client.send_bundle(request.clone());
        let result =
            match tokio::time::timeout(Duration::from_nanos(deadline_ns - now_ns), call).await {
                Ok(result) => result,
                Err(_) => break Outcome::Expired,
            };
        let status = match result {
            Ok(_) => {
                r.limiter.settle(pair, 0, shared.now_ns());
                break Outcome::Delivered;
            }
            Err(status) => status,
        };
        let retry_ns = match status.code() {
            Code::ResourceExhausted => parse_retry_after_ms(status.message())
                .map_or(shared.default_retry_after_ns, |ms| ms * 1_000_000),
            _ => 0,
        };
        let now_ns = shared.now_ns();
        r.limiter.settle(pair, retry_ns, now_ns);
        match status.code() {
            Code::ResourceExhausted => {
                r.limiter.cooldown(pair, retry_ns, now_ns);
                shared.count(|t| {
                    t.cooldowns += 1;
                    t.retries += 1;
                });
            }
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
                shared.count(|t| t.retries += 1);
            }
            code => break Outcome::Rejected(format!("{}: {code:?}: {}", r.name, status.message())),
        }
    };
    guard.finish(outcome);
}

#[derive(Clone)]
struct PortState {
    shared: Arc<Shared>,
    /// `None` for the rotating port.
    region: Option<usize>,
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn rpc_error(shared: &Shared, id: &str, error: &RpcError) -> Response {
    shared.count(|t| t.bad_requests += 1);
    json_response(StatusCode::OK, error_body(id, error))
}

/// Paths that carry JSON-RPC, old style (`bundles`, `transactions`) and one per method.
fn known_path(path: &str) -> bool {
    matches!(
        path,
        "/api/v1/bundles"
            | "/api/v1/transactions"
            | "/api/v1/sendBundle"
            | "/api/v1/sendTransaction"
            | "/api/v1/getTipAccounts"
            | "/api/v1/getBundleStatuses"
            | "/api/v1/getInflightBundleStatuses"
    )
}

async fn rpc_handler(
    State(st): State<PortState>,
    uri: Uri,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    if !known_path(uri.path()) {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    }
    let shared = &st.shared;
    let request = match rpc::parse_request(&body) {
        Ok(r) => r,
        Err((id, e)) => return rpc_error(shared, id, &e),
    };
    let id = request.id;
    let is_transaction = match request.method.as_ref() {
        "sendBundle" => false,
        "sendTransaction" => true,
        "getTipAccounts" => {
            return json_response(StatusCode::OK, result_body(id, rpc::tip_accounts_json()));
        }
        other => {
            let e = RpcError::new(
                rpc::code::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            );
            return rpc_error(shared, id, &e);
        }
    };
    // The cap is checked first so an overloaded relay refuses before spending CPU on decoding.
    let Ok(permit) = shared.permits.clone().try_acquire_owned() else {
        shared.count(|t| t.refused_cap += 1);
        let e = RpcError::new(
            rpc::code::RATE_LIMITED,
            format!(
                "in-flight cap reached: {} bundles in flight; retry after 1s",
                shared.max_in_flight
            ),
        );
        let mut response = json_response(StatusCode::TOO_MANY_REQUESTS, error_body(id, &e));
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_static(CAP_RETRY_AFTER_S),
        );
        return response;
    };
    let decoded = if is_transaction {
        rpc::decode_send_transaction(request.params)
    } else {
        rpc::decode_send_bundle(request.params)
    };
    let bundle = match decoded {
        Ok(b) => b,
        Err(e) => return rpc_error(shared, id, &e),
    };
    let admitted_ns = shared.now_ns();
    shared.count(|t| {
        t.admitted += 1;
        t.in_flight += 1;
    });
    let guard = InFlight {
        shared: shared.clone(),
        done: false,
        _permit: permit,
    };
    let send = SendBundleRequest {
        bundle: Some(Bundle {
            header: None,
            packets: bundle.packets,
        }),
    };
    tokio::spawn(deliver(shared.clone(), st.region, send, admitted_ns, guard));

    if !is_transaction {
        let result = format!("\"{}\"", bundle.bundle_id);
        return json_response(StatusCode::OK, result_body(id, &result));
    }
    let result = format!("\"{}\"", bundle.first_signature);
    let mut response = json_response(StatusCode::OK, result_body(id, &result));
    let bundle_only = query
        .as_deref()
        .is_some_and(|q| q.split('&').any(|kv| kv == "bundleOnly=true"));
    if bundle_only {
        if let Ok(v) = HeaderValue::from_str(&bundle.bundle_id) {
            response.headers_mut().insert("x-bundle-id", v);
        }
    }
    response
}

async fn ping() -> &'static str {
    "ok"
}

async fn stats_handler(State(shared): State<Arc<Shared>>) -> Response {
    let body = serde_json::to_string(&shared.stats()).unwrap_or_default();
    json_response(StatusCode::OK, body)
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

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

fn intake_router(shared: &Arc<Shared>, region: Option<usize>) -> Router {
    Router::new()
        .route("/ping", get(ping))
        .route("/api/v1/{*rest}", post(rpc_handler))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(PortState {
            shared: shared.clone(),
            region,
        })
}

fn serve(listener: TcpListener, router: Router, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
    let listener = listener.tap_io(|tcp| {
        // Bots send one small request and wait for the answer: Nagle would only add delay.
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await;
    })
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
