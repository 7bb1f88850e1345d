//! The CPU probe: how much engine CPU one SendBundle costs.
//!
//! The engine runs alone on its own thread (a current-thread runtime, as in the binary); a tonic
//! client on the calling thread sends bench-tagged bundles over many loopback connections, each
//! from its own source address and paced under the engine's interval so every send is on time.
//! The engine thread's CPU is read with `getrusage(RUSAGE_THREAD)` on that thread before and after,
//! so the client's own cost is not counted.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::{Engine, EngineConfig, EngineStats, testkit};
use crate::searcher_grpc::searcher_service_client::SearcherServiceClient;
use crate::sentlog::{self, SentLog};

/// The engine interval the probe runs under.
const PROBE_INTERVAL_MS: u64 = 1;
/// Each connection waits this long between its sends: twice the interval, so arrival jitter
/// never makes a send early.
const PROBE_SPACING_US: u64 = 2_000;
/// Bundle shape of the figures in shared/measurements.md: 3 transactions of 250 bytes.
const PROBE_TXS: u8 = 3;
const PROBE_TX_BYTES: usize = 250;
/// Source addresses 127.0.2.1.. (each connects to every region).
const PROBE_SOURCE_BASE: u32 = 0x7f00_0201;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeReport {
    pub bundles: u64,
    pub connections: u64,
    pub wall_s: f64,
    pub calls_per_s: f64,
    /// Engine-thread CPU (user + system) over the whole run.
    pub engine_cpu_ms: f64,
    pub engine_cpu_us_per_call: f64,
    pub engine: EngineStats,
}

fn thread_cpu_us() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

enum Cmd {
    Cpu(oneshot::Sender<u64>),
    Stop(oneshot::Sender<EngineStats>),
}

/// Runs `bundles` SendBundles from `sources` source addresses to each of 8 regions.
pub fn run(bundles: u64, sources: u32) -> io::Result<ProbeReport> {
    let log_path = std::env::temp_dir().join(format!("bench-engine-probe-{}", std::process::id()));
    let log = Arc::new(SentLog::create(&log_path, bundles as usize)?);
    let mut cfg = EngineConfig::for_tests(&super::MAINNET_REGIONS);
    cfg.interval_ms = PROBE_INTERVAL_MS;
    cfg.sent_log = Some(log_path.clone());
    cfg.run_id = Some(1);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (cmd_tx, mut cmd_rx) = mpsc::channel::<Cmd>(4);
    let engine_thread = std::thread::Builder::new()
        .name("engine".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("engine runtime");
            rt.block_on(async move {
                let h = match Engine::start(cfg).await {
                    Ok(h) => h,
                    Err(e) => {
                        let _ = addr_tx.send(Err(e));
                        return;
                    }
                };
                let _ = addr_tx.send(Ok(h.region_addrs()));
                while let Some(cmd) = cmd_rx.recv().await {
                    match cmd {
                        Cmd::Cpu(r) => {
                            let _ = r.send(thread_cpu_us());
                        }
                        Cmd::Stop(r) => {
                            let _ = r.send(h.shutdown().await);
                            return;
                        }
                    }
                }
            })
        })?;
    let addrs = addr_rx.recv().map_err(io::Error::other)??;
    let keys: Vec<_> = (0..sources as u64).map(testkit::key).collect();
    let requests: Vec<_> = (0..bundles)
        .map(|seq| {
            let k = &keys[(seq % sources as u64) as usize];
            testkit::send_bundle_request(&testkit::bench_bundle(
                k,
                1,
                seq,
                PROBE_TXS,
                PROBE_TX_BYTES,
            ))
        })
        .collect();
    let requests = Arc::new(requests);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(async move {
        let mut clients = Vec::new();
        for s in 0..sources {
            let src = IpAddr::V4(Ipv4Addr::from(PROBE_SOURCE_BASE + s));
            for (_, addr) in &addrs {
                clients.push(connect(*addr, src).await?);
            }
        }
        let ask_cpu = || async {
            let (tx, rx) = oneshot::channel();
            cmd_tx.send(Cmd::Cpu(tx)).await.map_err(io::Error::other)?;
            rx.await.map_err(io::Error::other)
        };
        let cpu0 = ask_cpu().await?;
        let t0 = std::time::Instant::now();
        let next = Arc::new(AtomicU64::new(0));
        let connections = clients.len() as u64;
        let mut tasks = Vec::new();
        for mut client in clients {
            let next = next.clone();
            let requests = requests.clone();
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let mut last = tokio::time::Instant::now() - Duration::from_secs(1);
                loop {
                    let seq = next.fetch_add(1, Ordering::Relaxed);
                    if seq >= requests.len() as u64 {
                        return;
                    }
                    tokio::time::sleep_until(last + Duration::from_micros(PROBE_SPACING_US)).await;
                    last = tokio::time::Instant::now();
                    log.record(seq, sentlog::monotonic_ns());
                    let _ = client.send_bundle(requests[seq as usize].clone()).await;
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
        let wall_s = t0.elapsed().as_secs_f64();
        let cpu1 = ask_cpu().await?;
        let (tx, rx) = oneshot::channel();
        cmd_tx.send(Cmd::Stop(tx)).await.map_err(io::Error::other)?;
        let engine = rx.await.map_err(io::Error::other)?;
        let calls = engine.send_bundle_calls.max(1);
        Ok::<_, io::Error>(ProbeReport {
            bundles,
            connections,
            wall_s,
            calls_per_s: calls as f64 / wall_s,
            engine_cpu_ms: (cpu1 - cpu0) as f64 / 1_000.0,
            engine_cpu_us_per_call: (cpu1 - cpu0) as f64 / calls as f64,
            engine,
        })
    });
    let _ = engine_thread.join();
    let _ = std::fs::remove_file(&log_path);
    report
}

async fn connect(
    addr: SocketAddr,
    src: IpAddr,
) -> io::Result<SearcherServiceClient<tonic::transport::Channel>> {
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(io::Error::other)?
        .local_address(Some(src))
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(|e| io::Error::other(format!("connecting {src} -> {addr}: {e}")))?;
    Ok(SearcherServiceClient::new(ch))
}
