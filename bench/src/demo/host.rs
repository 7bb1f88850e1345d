//! The step's components on threads of this process, each on a tokio runtime of its own: the
//! engine (`demo-engine`, one core at most, as `bench-engine` runs it), the relay (`demo-relay`,
//! a multi-thread runtime) and the SOCKS5 proxies (`demo-socks5`). Each start returns once its
//! component listens, with a handle to read it and a way to stop it. The thread names are how
//! `measure.rs` tells each component's CPU apart.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};

use super::RelayKind;
use super::relay::{RelaySetup, RelayStats, RunningRelay};
use crate::engine::{Engine, EngineConfig, EngineHandle, EngineStats};
use crate::socks5::{ProxyConfig, Socks5Proxy};

/// The engine's thread.
pub(crate) const ENGINE_THREAD: &str = "demo-engine";
/// The relay's holder thread and its runtime's workers.
pub(crate) const RELAY_THREAD: &str = "demo-relay";
const PROXY_THREAD: &str = "demo-socks5";
/// How often a stopping component checks whether its handle's last clone is gone.
const SOLE_OWNER_POLL: Duration = Duration::from_millis(10);

/// A component serving on a thread of its own: a handle to read it while it runs, and its
/// final figures once stopped.
pub(crate) struct OnThread<H, R> {
    pub(crate) handle: Arc<H>,
    name: &'static str,
    stop: tokio::sync::oneshot::Sender<()>,
    join: std::thread::JoinHandle<R>,
}

/// The engine on its thread.
pub(crate) type EngineThread = OnThread<EngineHandle, EngineStats>;
/// A relay on threads of this process.
pub(crate) type RelayThread = OnThread<RunningRelay, RelayStats>;

impl<H, R> OnThread<H, R> {
    /// Shuts the component down (the caller has dropped its clones of the handle) and returns
    /// its final figures.
    pub(crate) fn stop(self) -> Result<R, String> {
        let OnThread {
            handle,
            name,
            stop,
            join,
        } = self;
        drop(handle);
        let _ = stop.send(());
        join.join()
            .map_err(|_| format!("the {name} thread panicked"))
    }
}

/// Starts a thread `thread` that builds its runtime with `runtime`, runs `start` on it and
/// serves until stopped, then `shutdown`; returns once `start` has answered. `what` names the
/// component in errors.
fn host<H, R, S, D, F>(
    what: &'static str,
    thread: &str,
    runtime: impl FnOnce() -> std::io::Result<Runtime> + Send + 'static,
    start: S,
    shutdown: D,
) -> Result<OnThread<H, R>, String>
where
    H: Send + Sync + 'static,
    R: Default + Send + 'static,
    S: Future<Output = Result<H, String>> + Send + 'static,
    D: FnOnce(H) -> F + Send + 'static,
    F: Future<Output = R>,
{
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let join = std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            runtime().expect("tokio runtime").block_on(async move {
                let handle = match start.await {
                    Ok(h) => Arc::new(h),
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return R::default();
                    }
                };
                let _ = ready_tx.send(Ok(handle.clone()));
                let _ = stop_rx.await;
                shutdown(sole_owner(handle).await).await
            })
        })
        .map_err(|e| format!("spawning the {what} thread: {e}"))?;
    let handle = ready_rx
        .recv()
        .map_err(|_| format!("the {what} thread died"))??;
    Ok(OnThread {
        handle,
        name: what,
        stop,
        join,
    })
}

fn current_thread() -> std::io::Result<Runtime> {
    Builder::new_current_thread().enable_all().build()
}

/// Waits until `shared` is the last reference, then takes it: shutting a handle down needs it
/// by value, and the caller drops its clones before signalling the stop.
async fn sole_owner<T>(mut shared: Arc<T>) -> T {
    loop {
        match Arc::try_unwrap(shared) {
            Ok(owned) => return owned,
            Err(still_shared) => {
                shared = still_shared;
                tokio::time::sleep(SOLE_OWNER_POLL).await;
            }
        }
    }
}

pub(crate) fn start_engine(cfg: EngineConfig) -> Result<EngineThread, String> {
    host(
        "engine",
        ENGINE_THREAD,
        current_thread,
        async move { Engine::start(cfg).await.map_err(|e| format!("engine: {e}")) },
        EngineHandle::shutdown,
    )
}

pub(crate) fn start_relay(kind: RelayKind, setup: RelaySetup) -> Result<RelayThread, String> {
    // bundle-relay runs its own reactor threads; the runtime only holds its handle.
    let workers = match kind {
        RelayKind::BundleRelay => 1,
        RelayKind::Baseline => setup.threads.max(1),
    };
    host(
        "relay",
        RELAY_THREAD,
        move || {
            Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name(RELAY_THREAD)
                .enable_all()
                .build()
        },
        async move { RunningRelay::start(kind, &setup).await },
        RunningRelay::shutdown,
    )
}

/// SOCKS5 proxies on a runtime of their own, one per outbound source address; dropping this
/// stops them.
pub(crate) struct ProxyThread {
    pub(crate) addrs: Vec<SocketAddr>,
    _stop: Option<tokio::sync::oneshot::Sender<()>>,
}

pub(crate) fn start_proxies(outbound: &[IpAddr]) -> Result<ProxyThread, String> {
    if outbound.is_empty() {
        return Ok(ProxyThread {
            addrs: Vec::new(),
            _stop: None,
        });
    }
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let outbound = outbound.to_vec();
    std::thread::Builder::new()
        .name(PROXY_THREAD.into())
        .spawn(move || {
            current_thread()
                .expect("tokio runtime")
                .block_on(async move {
                    let mut handles = Vec::new();
                    for ip in outbound {
                        let cfg = ProxyConfig {
                            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                            outbound_source: Some(ip),
                            ..ProxyConfig::default()
                        };
                        match Socks5Proxy::start(cfg).await {
                            Ok(h) => handles.push(h),
                            Err(e) => {
                                let _ = ready_tx.send(Err(format!("SOCKS5 proxy: {e}")));
                                return;
                            }
                        }
                    }
                    let _ = ready_tx.send(Ok(handles.iter().map(|h| h.local_addr()).collect()));
                    // Dropping the sender (the step ended) stops the proxies.
                    let _ = stop_rx.await;
                    for h in handles {
                        h.shutdown().await;
                    }
                })
        })
        .map_err(|e| format!("spawning the {PROXY_THREAD} thread: {e}"))?;
    let addrs = ready_rx
        .recv()
        .map_err(|_| "the SOCKS5 proxies' thread died".to_string())??;
    Ok(ProxyThread {
        addrs,
        _stop: Some(stop),
    })
}
