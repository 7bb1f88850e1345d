//! The relay: what runs where, and the handle that starts and stops it.
//!
//! [`Relay::start`] binds every listener (so errors surface before anything runs and port 0
//! resolves once), then starts one reactor thread per configured core. Each thread owns a
//! share of the egress sources (each source with all its regions), an arena slice and its
//! own listeners (SO_REUSEPORT). Threads share nothing but their counters, which each thread
//! writes alone and anyone may read.

pub mod dispatch;
pub mod intake;
pub mod tips;

use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::arena;
use crate::config::Source;
use crate::egress::resolve::HostAddrs;
use crate::egress::socket;
use crate::egress::transport::TlsTarget;
use crate::h2;
use crate::http1;

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
}

impl RegionSpec {
    /// A plaintext region at one fixed address, its authority that address (tests, the demo).
    pub fn plain(name: &str, remote: SocketAddr) -> RegionSpec {
        RegionSpec {
            name: name.to_string(),
            addrs: HostAddrs::fixed(name, vec![remote]),
            authority: remote.to_string(),
            interval_ms: crate::limiter::DEFAULT_INTERVAL_MS,
            burst: 1,
            pinned: None,
            tls: None,
        }
    }
}

/// Everything the running relay needs, already checked.
#[derive(Clone, Debug)]
pub struct Spec {
    pub threads: usize,
    pub pin_threads: bool,
    /// In-flight cap over all threads.
    pub arena_slots: u32,
    pub bundle_max_age_ms: u64,
    pub upstream_timeout_ms: u64,
    pub rotating: Option<SocketAddr>,
    pub regions: Vec<RegionSpec>,
    /// Egress sources (local addresses or SOCKS5 proxies), split across threads.
    pub sources: Vec<Source>,
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
    /// does none of that work and only the accounting counters ([`Stats`]) run.
    pub metrics: bool,
}

/// Upstream HTTP/2 settings for a relay connection. The limiter holds a pair while its call
/// runs and a call's stream is released before the pair is handed out again, so one stream slot
/// is enough; buffers are sized to what the calls carry (the largest SendBundle out; a
/// SendBundleResponse, a tip-account list or a gRPC error in) rather than to HTTP/2's defaults.
pub fn upstream_h2_config() -> h2::conn::Config {
    h2::conn::Config {
        stream_slots: 1,
        request_body_bytes_max: arena::GRPC_PREFIX_BYTES + arena::SEND_BUNDLE_BYTES_MAX,
        response_body_bytes_max: 1024,
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
                let sni = r.sni.clone().unwrap_or_else(|| r.host.clone());
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
            });
        }
        let sources = cfg.egress.sources.clone();
        Ok(Spec {
            threads: cfg.threads.max(1),
            pin_threads: cfg.pin_threads,
            arena_slots: cfg.arena_slots,
            bundle_max_age_ms: cfg.bundle_max_age_ms,
            upstream_timeout_ms: cfg.upstream_timeout_ms,
            rotating: cfg.intake.rotating,
            regions,
            sources,
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
        })
    }

    /// A loopback setup for tests and the demo: `regions` engines, `sources` egress addresses.
    pub fn local(regions: Vec<RegionSpec>, sources: Vec<IpAddr>) -> Spec {
        let sources = sources.into_iter().map(Source::Local).collect();
        Spec {
            threads: 1,
            pin_threads: false,
            arena_slots: 4096,
            bundle_max_age_ms: 2_000,
            upstream_timeout_ms: 1_000,
            rotating: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            regions,
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
        }
    }

    /// Thread `t`'s share: a contiguous run of sources and of arena slots, split as the config
    /// splits them ([`crate::config::even_share`]), so every thread owns pairs whenever there
    /// are at least as many sources as threads ([`Relay::start`] refuses fewer).
    pub fn thread(&self, t: usize) -> ThreadSpec {
        let n = self.threads.max(1);
        let sources = crate::config::even_share(self.sources.len(), n, t);
        let slots = crate::config::even_share(self.arena_slots as usize, n, t);
        ThreadSpec {
            thread: t,
            sources: self.sources[sources].to_vec(),
            arena_slots: (slots.len() as u32).max(1),
            regions: self.regions.clone(),
            bundle_max_age_ms: self.bundle_max_age_ms,
            upstream_timeout_ms: self.upstream_timeout_ms,
            connect_eagerly: self.connect_eagerly,
            reconnect_min_ms: self.reconnect_min_ms,
            reconnect_max_ms: self.reconnect_max_ms,
            handshakes_max: self.handshakes_max,
            connect_timeout_ms: self.connect_timeout_ms,
            ping_idle_ms: self.ping_idle_ms,
            ping_timeout_ms: self.ping_timeout_ms,
            h2: self.h2.clone(),
        }
    }
}

/// One thread's share of a [`Spec`].
#[derive(Clone, Debug)]
pub struct ThreadSpec {
    pub thread: usize,
    pub sources: Vec<Source>,
    pub arena_slots: u32,
    pub regions: Vec<RegionSpec>,
    pub bundle_max_age_ms: u64,
    pub upstream_timeout_ms: u64,
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
}

/// A counter written by one thread only: a plain load and store, no read-modify-write, so the
/// owner never waits on a contended cache line; readers see a recent value.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn bump(&self) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    #[inline]
    pub fn store(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One thread's counters, on cache lines of their own.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Stats {
    pub requests: Counter,
    pub admitted: Counter,
    pub delivered: Counter,
    pub rejected: Counter,
    pub expired: Counter,
    pub failed: Counter,
    /// Gauge: arena slots held.
    pub in_flight: Counter,
    pub retries: Counter,
    pub cooldowns: Counter,
    pub refused_cap: Counter,
    pub bad_requests: Counter,
    pub connects: Counter,
    pub connect_failures: Counter,
    pub disconnects: Counter,
    /// Gauge: pairs whose connection is up.
    pub pairs_up: Counter,
    /// Gauge.
    pub intake_conns: Counter,
    /// Intake connections refused because the thread's table was full.
    pub intake_refused: Counter,
    /// Intake connections refused because their client address held its share already.
    pub intake_refused_per_source: Counter,
    /// Accepts that failed (out of file descriptors or memory, mostly).
    pub accept_errors: Counter,
    /// Intake connections closed because a request head missed its deadline (after a 408).
    pub intake_head_timeouts: Counter,
    /// Intake connections closed because their client stopped reading answers.
    pub intake_send_timeouts: Counter,
    /// Intake connections closed after the idle deadline.
    pub intake_idle_closes: Counter,
    /// `io_uring_enter` calls retried after EAGAIN or ENOMEM.
    pub ring_retries: Counter,
    /// Times a region went silent (calls unanswered, nothing received) and was paused.
    pub silences: Counter,
    /// Log lines dropped because the thread's log queue was full.
    pub log_lines_dropped: Counter,
    /// Gauge.
    pub arena_capacity: Counter,
    /// TLS sessions established, and how many of them resumed an earlier session.
    pub tls_handshakes: Counter,
    pub tls_resumed: Counter,
    /// Set when the thread has exited its loop.
    pub stopped: Counter,
    /// The config generation this thread last loaded (0: no live config).
    pub config_generation: Counter,
}

/// All threads' counters added up (serializable, so a relay in another process can report
/// them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Totals {
    pub requests: u64,
    pub admitted: u64,
    pub delivered: u64,
    pub rejected: u64,
    pub expired: u64,
    pub failed: u64,
    pub in_flight: u64,
    pub retries: u64,
    pub cooldowns: u64,
    pub refused_cap: u64,
    pub bad_requests: u64,
    pub connects: u64,
    pub connect_failures: u64,
    pub disconnects: u64,
    pub pairs_up: u64,
    pub intake_conns: u64,
    pub intake_refused: u64,
    pub intake_refused_per_source: u64,
    pub accept_errors: u64,
    pub intake_head_timeouts: u64,
    pub intake_send_timeouts: u64,
    pub intake_idle_closes: u64,
    pub ring_retries: u64,
    pub silences: u64,
    pub log_lines_dropped: u64,
    pub arena_capacity: u64,
    pub tls_handshakes: u64,
    pub tls_resumed: u64,
}

impl Totals {
    /// admitted = delivered + rejected + expired + failed + in flight.
    pub fn identity_holds(&self) -> bool {
        self.admitted
            == self.delivered + self.rejected + self.expired + self.failed + self.in_flight
    }

    fn add(&mut self, s: &Stats) {
        self.requests += s.requests.get();
        self.admitted += s.admitted.get();
        self.delivered += s.delivered.get();
        self.rejected += s.rejected.get();
        self.expired += s.expired.get();
        self.failed += s.failed.get();
        self.in_flight += s.in_flight.get();
        self.retries += s.retries.get();
        self.cooldowns += s.cooldowns.get();
        self.refused_cap += s.refused_cap.get();
        self.bad_requests += s.bad_requests.get();
        self.connects += s.connects.get();
        self.connect_failures += s.connect_failures.get();
        self.disconnects += s.disconnects.get();
        self.pairs_up += s.pairs_up.get();
        self.intake_conns += s.intake_conns.get();
        self.intake_refused += s.intake_refused.get();
        self.intake_refused_per_source += s.intake_refused_per_source.get();
        self.accept_errors += s.accept_errors.get();
        self.intake_head_timeouts += s.intake_head_timeouts.get();
        self.intake_send_timeouts += s.intake_send_timeouts.get();
        self.intake_idle_closes += s.intake_idle_closes.get();
        self.ring_retries += s.ring_retries.get();
        self.silences += s.silences.get();
        self.log_lines_dropped += s.log_lines_dropped.get();
        self.arena_capacity += s.arena_capacity.get();
        self.tls_handshakes += s.tls_handshakes.get();
        self.tls_resumed += s.tls_resumed.get();
    }
}

/// A listener bound at start, handed to every thread (each binds its own with SO_REUSEPORT).
#[derive(Clone, Copy, Debug)]
pub struct ListenSpec {
    pub addr: SocketAddr,
    pub port: intake::Port,
}

/// Why the relay could not start.
#[derive(Debug)]
pub enum StartError {
    Bind(SocketAddr, std::io::Error),
    Ring(std::io::Error),
    Thread(std::io::Error),
    Spec(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Bind(a, e) => write!(f, "cannot listen on {a}: {e}"),
            StartError::Ring(e) => write!(f, "cannot set up io_uring: {e}"),
            StartError::Thread(e) => write!(f, "cannot start a reactor thread: {e}"),
            StartError::Spec(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for StartError {}

/// The running relay.
pub struct Relay {
    stats: Vec<Arc<Stats>>,
    metrics: Arc<crate::metrics::Metrics>,
    pairs_text: Vec<Arc<std::sync::Mutex<String>>>,
    stop: Arc<AtomicBool>,
    drain_deadline_ms: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
    /// Why each thread ended on its own, if it did.
    failures: Vec<Arc<std::sync::Mutex<Option<String>>>>,
    /// Looks region host names up again as connections end (only when some region has one).
    resolver: Option<JoinHandle<()>>,
    /// Writes the reactors' log lines (they never write to stderr themselves).
    logger: Option<crate::log::Logger>,
    rotating: Option<SocketAddr>,
    pinned: Vec<(String, SocketAddr)>,
}

impl Relay {
    /// Binds the listeners and starts the reactor threads; returns once every thread runs.
    pub fn start(spec: Spec) -> Result<Relay, StartError> {
        if spec.regions.is_empty() || spec.regions.len() > crate::limiter::MAX_REGIONS {
            return Err(StartError::Spec(format!(
                "the relay needs 1 to {} regions, got {}",
                crate::limiter::MAX_REGIONS,
                spec.regions.len()
            )));
        }
        if spec.sources.len() < spec.threads.max(1) {
            return Err(StartError::Spec(crate::config::too_few_sources(
                spec.sources.len(),
                spec.threads.max(1),
            )));
        }
        let mut spec = spec;
        spec.threads = spec.threads.max(1);
        // Bind once here so port 0 resolves to one port for all threads.
        let mut listens = Vec::new();
        let mut first_fds: Vec<RawFd> = Vec::new();
        let mut wanted: Vec<(SocketAddr, intake::Port)> = Vec::new();
        if let Some(a) = spec.rotating {
            wanted.push((a, intake::Port::Rotating));
        }
        for (i, r) in spec.regions.iter().enumerate() {
            if let Some(a) = r.pinned {
                wanted.push((a, intake::Port::Pinned(i as u8)));
            }
        }
        for (addr, port) in wanted {
            let fd = socket::listener(addr).map_err(|e| StartError::Bind(addr, e))?;
            let bound = socket::local_addr(fd).map_err(|e| StartError::Bind(addr, e))?;
            first_fds.push(fd);
            listens.push(ListenSpec { addr: bound, port });
        }
        let rotating = listens
            .iter()
            .find(|l| l.port == intake::Port::Rotating)
            .map(|l| l.addr);
        let pinned = listens
            .iter()
            .filter_map(|l| match l.port {
                intake::Port::Pinned(r) => Some((spec.regions[r as usize].name.clone(), l.addr)),
                intake::Port::Rotating => None,
            })
            .collect();
        let names: Vec<String> = spec.regions.iter().map(|r| r.name.clone()).collect();
        let metrics = Arc::new(crate::metrics::Metrics::with_switch(
            &names,
            spec.threads,
            spec.metrics,
        ));
        let mut pairs_text = Vec::new();
        let stop = Arc::new(AtomicBool::new(false));
        let drain_deadline_ms = Arc::new(AtomicU64::new(5_000));
        let spec = Arc::new(spec);
        let mut stats = Vec::new();
        let mut threads = Vec::new();
        let mut failures = Vec::new();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for t in 0..spec.threads {
            let st = Arc::new(Stats::default());
            stats.push(st.clone());
            let tm = metrics.thread(t);
            let text = Arc::new(std::sync::Mutex::new(String::new()));
            pairs_text.push(text.clone());
            let fds: Vec<(RawFd, intake::Port)> = if t == 0 {
                first_fds
                    .iter()
                    .zip(&listens)
                    .map(|(&fd, l)| (fd, l.port))
                    .collect()
            } else {
                let mut v = Vec::new();
                for l in &listens {
                    match socket::listener(l.addr) {
                        Ok(fd) => v.push((fd, l.port)),
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            return Err(StartError::Bind(l.addr, e));
                        }
                    }
                }
                v
            };
            let failure = Arc::new(std::sync::Mutex::new(None));
            failures.push(failure.clone());
            let args = crate::reactor::ThreadArgs {
                spec: spec.clone(),
                thread: t,
                listen_fds: fds,
                stats: st,
                metrics: tm,
                pairs_text: text,
                stop: stop.clone(),
                drain_ms: drain_deadline_ms.clone(),
                ready: ready_tx.clone(),
                failure,
            };
            let handle = std::thread::Builder::new()
                .name(format!("relay-{t}"))
                .spawn(move || crate::reactor::run_thread(args))
                .map_err(StartError::Thread)?;
            threads.push(handle);
        }
        drop(ready_tx);
        let named: Vec<Arc<HostAddrs>> = spec
            .regions
            .iter()
            .filter(|r| r.addrs.is_named())
            .map(|r| r.addrs.clone())
            .collect();
        let resolver = if named.is_empty() {
            None
        } else {
            Some(crate::egress::resolve::spawn(named, stop.clone()).map_err(StartError::Thread)?)
        };
        let totals_of = stats.clone();
        metrics.set_totals_source(Box::new(move || {
            let mut t = Totals::default();
            for s in &totals_of {
                t.add(s);
            }
            t
        }));
        let mut queues = Vec::with_capacity(spec.threads);
        for _ in 0..spec.threads {
            match ready_rx.recv() {
                Ok(Ok(queue)) => queues.push(queue),
                Ok(Err(e)) => {
                    stop.store(true, Ordering::Relaxed);
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(e);
                }
                Err(_) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(StartError::Spec("a reactor thread died at start".into()));
                }
            }
        }
        queues.sort_by(|a, b| a.prefix().cmp(b.prefix()));
        let logger = crate::log::Logger::spawn(queues).map_err(StartError::Thread)?;
        Ok(Relay {
            stats,
            metrics,
            pairs_text,
            stop,
            drain_deadline_ms,
            threads,
            failures,
            resolver,
            logger: Some(logger),
            rotating,
            pinned,
        })
    }

    /// Every reactor thread is running, or why one is not: it stopped on an error its loop
    /// cannot recover from, or panicked. The relay is then half alive (the kernel still routes
    /// a share of new connections to the dead thread's listeners), and its owner should stop it
    /// and exit non-zero so a supervisor restarts it.
    pub fn health(&self) -> Result<(), String> {
        for (t, (failure, handle)) in self.failures.iter().zip(&self.threads).enumerate() {
            if let Some(why) = failure.lock().ok().and_then(|f| f.clone()) {
                return Err(why);
            }
            if handle.is_finished() && !self.stop.load(Ordering::Relaxed) {
                return Err(format!("reactor thread relay-{t} exited"));
            }
        }
        Ok(())
    }

    pub fn rotating_addr(&self) -> Option<SocketAddr> {
        self.rotating
    }

    /// (region name, pinned intake address) for each region with a pinned port.
    pub fn pinned_addrs(&self) -> &[(String, SocketAddr)] {
        &self.pinned
    }

    /// Every thread's metrics, for the admin listener and histogram dumps.
    pub fn metrics(&self) -> Arc<crate::metrics::Metrics> {
        self.metrics.clone()
    }

    /// The admin's /debug/pairs: each thread's pairs by state, refreshed every second.
    pub fn pairs_fn(&self) -> crate::admin::PairsFn {
        let texts = self.pairs_text.clone();
        Box::new(move |out: &mut String| {
            for (t, text) in texts.iter().enumerate() {
                out.push_str(&format!("thread {t}\n"));
                if let Ok(text) = text.lock() {
                    out.push_str(&text);
                }
            }
        })
    }

    /// The config generation each thread runs on.
    pub fn config_generations(&self) -> Vec<u64> {
        self.stats
            .iter()
            .map(|s| s.config_generation.get())
            .collect()
    }

    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for s in &self.stats {
            t.add(s);
        }
        t
    }

    /// Stops accepting, lets bundles in flight end for up to `drain`, counts the rest failed,
    /// closes everything and returns the final counts.
    pub fn shutdown(self, drain: Duration) -> Totals {
        self.drain_deadline_ms
            .store(drain.as_millis() as u64, Ordering::Relaxed);
        self.stop.store(true, Ordering::Release);
        let stats = self.stats.clone();
        for t in self.threads {
            let _ = t.join();
        }
        if let Some(r) = self.resolver {
            let _ = r.join();
        }
        if let Some(l) = self.logger {
            l.stop();
        }
        let mut t = Totals::default();
        for s in &stats {
            t.add(s);
        }
        t
    }
}
