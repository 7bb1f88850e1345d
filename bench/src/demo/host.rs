//! The step's components on threads of this process, each on a tokio runtime of its own: the
//! engine (`demo-engine`, one core at most, as `bench-engine` runs it), the relay (`demo-relay`,
//! a multi-thread runtime) and the SOCKS5 proxies (`demo-socks5`). Each start returns once its
//! component listens, with a handle to read it and a way to stop it. The thread names are how
//! `measure.rs` tells each component's CPU apart.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

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

/// A thread named `name` running `f` on a single-threaded tokio runtime of its own.
fn on_own_runtime<R: Send + 'static>(
    name: &str,
    f: impl FnOnce(tokio::runtime::Runtime) -> R + Send + 'static,
) -> Result<std::thread::JoinHandle<R>, String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            f(rt)
        })
        .map_err(|e| format!("spawning the {name} thread: {e}"))
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

/// The engine on its thread.
pub(crate) struct EngineThread {
    pub(crate) handle: Arc<EngineHandle>,
    stop: tokio::sync::oneshot::Sender<()>,
    join: std::thread::JoinHandle<EngineStats>,
}

impl EngineThread {
    /// Shuts the engine down (the caller has dropped its clones of the handle) and returns its
    /// final counts.
    pub(crate) fn stop(self) -> Result<EngineStats, String> {
        let EngineThread { handle, stop, join } = self;
        drop(handle);
        let _ = stop.send(());
        join.join()
            .map_err(|_| "the engine thread panicked".to_string())
    }
}

pub(crate) fn start_engine(cfg: EngineConfig) -> Result<EngineThread, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let join = on_own_runtime(ENGINE_THREAD, move |rt| {
        rt.block_on(async move {
            let handle = match Engine::start(cfg).await {
                Ok(h) => Arc::new(h),
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("engine: {e}")));
                    return EngineStats::default();
                }
            };
            let _ = ready_tx.send(Ok(handle.clone()));
            let _ = stop_rx.await;
            sole_owner(handle).await.shutdown().await
        })
    })?;
    let handle = ready_rx
        .recv()
        .map_err(|_| "the engine thread died".to_string())??;
    Ok(EngineThread { handle, stop, join })
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
    on_own_runtime(PROXY_THREAD, move |rt| {
        rt.block_on(async move {
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
    })?;
    let addrs = ready_rx
        .recv()
        .map_err(|_| "the SOCKS5 proxies' thread died".to_string())??;
    Ok(ProxyThread {
        addrs,
        _stop: Some(stop),
    })
}

/// A relay on threads of this process.
pub(crate) struct RelayThread {
    pub(crate) handle: Arc<RunningRelay>,
    stop: tokio::sync::oneshot::Sender<()>,
    join: std::thread::JoinHandle<RelayStats>,
}

impl RelayThread {
    /// Shuts the relay down (the caller has dropped its clones of the handle) and returns its
    /// final counters.
    pub(crate) fn stop(self) -> Result<RelayStats, String> {
        let RelayThread { handle, stop, join } = self;
        drop(handle);
        let _ = stop.send(());
        join.join()
            .map_err(|_| "the relay thread panicked".to_string())
    }
}

pub(crate) fn start_relay(kind: RelayKind, setup: RelaySetup) -> Result<RelayThread, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // bundle-relay runs its own reactor threads; the runtime only holds its handle.
    let workers = match kind {
        RelayKind::BundleRelay => 1,
        RelayKind::Baseline => setup.threads.max(1),
    };
    let join = std::thread::Builder::new()
        .name(RELAY_THREAD.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name(RELAY_THREAD)
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(async move {
                let handle = match RunningRelay::start(kind, &setup).await {
                    Ok(h) => Arc::new(h),
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return RelayStats::default();
                    }
                };
                let _ = ready_tx.send(Ok(handle.clone()));
                let _ = stop_rx.await;
                sole_owner(handle).await.shutdown().await
            })
        })
        .map_err(|e| format!("spawning the relay thread: {e}"))?;
    let handle = ready_rx
        .recv()
        .map_err(|_| "the relay thread died".to_string())??;
    Ok(RelayThread { handle, stop, join })
}
