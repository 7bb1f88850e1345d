//! The running relay: the handle that binds the listeners, starts one reactor thread per
//! configured core, watches their health and stops them.
//!
//! [`Relay::start`] binds every listener (so errors surface before anything runs and port 0
//! resolves once), then starts the reactor threads. Each thread owns a share of the egress
//! sources (each source with all its regions), an arena slice and its own listeners
//! (SO_REUSEPORT). Threads share nothing but their counters, which each thread writes alone
//! and anyone may read.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::egress::resolve::HostAddrs;
use crate::metrics::accounting::{Stats, Totals};
use crate::reactor::socket;
use crate::relay::{Spec, intake};

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
            StartError::Ring(e) if e.raw_os_error() == Some(libc::ENOMEM) => write!(
                f,
                "cannot set up io_uring: {e}: the kernel is short of memory, or what this \
                 user's processes pin is over RLIMIT_MEMLOCK (during an upgrade the old process \
                 still holds its rings: the startup line `locked memory` says what one process \
                 needs)"
            ),
            StartError::Ring(e) => write!(f, "cannot set up io_uring: {e}"),
            StartError::Thread(e) => write!(f, "cannot start a reactor thread: {e}"),
            StartError::Spec(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for StartError {}

impl StartError {
    /// Whether the same start may pass later without a change to the config: a port a
    /// process on its way out still holds, an address not yet on the host, the kernel short
    /// of memory or threads. A port the relay may not bind (EACCES) or io_uring refused
    /// (EPERM, ENOSYS) will not change by waiting.
    pub fn transient(&self) -> bool {
        use std::io::ErrorKind::{AddrInUse, AddrNotAvailable, OutOfMemory, WouldBlock};
        match self {
            StartError::Bind(_, e) => matches!(e.kind(), AddrInUse | AddrNotAvailable),
            StartError::Ring(e) => {
                matches!(e.kind(), OutOfMemory | WouldBlock)
                    || matches!(e.raw_os_error(), Some(libc::ENOMEM | libc::EAGAIN))
            }
            StartError::Thread(_) => true,
            StartError::Spec(_) => false,
        }
    }
}

/// The running relay.
pub struct Relay {
    stats: Vec<Arc<Stats>>,
    metrics: Arc<crate::metrics::Metrics>,
    pairs_text: Vec<Arc<std::sync::Mutex<String>>>,
    /// The next leader as the threads learned it, and the region names it indexes.
    leader: Arc<crate::relay::leader::Board>,
    region_names: Vec<String>,
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
    /// Every thread's listening sockets, for [`Relay::listen`].
    listen_fds: Vec<(RawFd, SocketAddr)>,
    accepting: Arc<AtomicBool>,
}

/// A listener for `addr`, listening now or only bound (see [`Relay::start_unlistened`]).
fn bind(addr: SocketAddr, listen_now: bool) -> std::io::Result<RawFd> {
    if listen_now {
        socket::listener(addr)
    } else {
        socket::bound_listener(addr)
    }
}

impl Relay {
    /// Binds the listeners and starts the reactor threads; returns once every thread runs.
    pub fn start(spec: Spec) -> Result<Relay, StartError> {
        Relay::start_with(spec, true)
    }

    /// As [`Relay::start`], with the listeners bound but not listening until
    /// [`Relay::listen`]: a process taking over from another brings its pool up first, and
    /// only then joins the listeners' SO_REUSEPORT groups.
    pub fn start_unlistened(spec: Spec) -> Result<Relay, StartError> {
        Relay::start_with(spec, false)
    }

    fn start_with(spec: Spec, listen_now: bool) -> Result<Relay, StartError> {
        check_spec(&spec)?;
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
            // A takeover joins the old process's ports; any other start has them to itself.
            if listen_now {
                socket::no_other_listener(addr).map_err(|e| StartError::Bind(addr, e))?;
            }
            let fd = bind(addr, listen_now).map_err(|e| StartError::Bind(addr, e))?;
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
        let accepting = Arc::new(AtomicBool::new(listen_now));
        let mut listen_fds: Vec<(RawFd, SocketAddr)> = Vec::new();
        let drain_deadline_ms = Arc::new(AtomicU64::new(5_000));
        let spec = Arc::new(spec);
        // One mesh for all threads: any thread's intake can hand a bundle to any other's pairs.
        let slots_min = (0..spec.threads)
            .map(|t| spec.thread(t).arena_slots)
            .min()
            .unwrap_or(1);
        let mesh = Arc::new(crate::mesh::Mesh::new(spec.threads, slots_min));
        // Each thread records the bundles it sends; a status query on any thread reads all.
        let records: Vec<usize> = (0..spec.threads).map(|t| spec.thread(t).records).collect();
        let journals = Arc::new(crate::journal::Journals::new(&records));
        metrics.set_journals(journals.clone());
        metrics.set_mesh(mesh.clone());
        let (live, fixed, regions) = (spec.live.clone(), spec.tenants.clone(), names.clone());
        let tenant_stats = spec.tenant_stats.clone();
        metrics.set_tenants(
            spec.tenant_stats.clone(),
            Box::new(move |each| {
                let table = live
                    .as_ref()
                    .map_or_else(|| fixed.clone(), |l| l.load().tenants.clone());
                for e in table.all() {
                    each(&e.name, e.slot, &e.describe(&regions));
                }
                // A removed tenant is still shown while its bundles finish: they count as its.
                for (name, slot) in table.removed_holding(&tenant_stats) {
                    each(
                        name,
                        slot,
                        "removed from the config: its bundles in flight finish",
                    );
                }
            }),
        );
        let mut stats = Vec::new();
        let mut threads = Vec::new();
        let mut failures = Vec::new();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for t in 0..spec.threads {
            let st = metrics.stats(t);
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
                    match bind(l.addr, listen_now) {
                        Ok(fd) => v.push((fd, l.port)),
                        Err(e) => {
                            never_started(&stop, &mesh, t);
                            return Err(StartError::Bind(l.addr, e));
                        }
                    }
                }
                v
            };
            listen_fds.extend(
                fds.iter()
                    .map(|&(fd, _)| fd)
                    .zip(listens.iter().map(|l| l.addr)),
            );
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
                accepting: accepting.clone(),
                mesh: mesh.clone(),
                journals: journals.clone(),
            };
            let handle = match std::thread::Builder::new()
                .name(format!("relay-{t}"))
                .spawn(move || crate::reactor::run_thread(args))
            {
                Ok(h) => h,
                Err(e) => {
                    never_started(&stop, &mesh, t);
                    return Err(StartError::Thread(e));
                }
            };
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
            match crate::egress::resolve::spawn(named, stop.clone()) {
                Ok(r) => Some(r),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(StartError::Thread(e));
                }
            }
        };

        let mut queues = Vec::with_capacity(spec.threads);
        for _ in 0..spec.threads {
            match ready_rx.recv() {
                Ok(Ok(queue)) => queues.push(queue),
                Ok(Err(e)) => {
                    let e = StartError::Ring(e);
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
        let logger = crate::log::Logger::spawn(queues).map_err(|e| {
            stop.store(true, Ordering::Relaxed);
            StartError::Thread(e)
        })?;
        Ok(Relay {
            stats,
            metrics,
            pairs_text,
            leader: spec.leader_board.clone(),
            region_names: names.clone(),
            stop,
            drain_deadline_ms,
            threads,
            failures,
            resolver,
            logger: Some(logger),
            rotating,
            pinned,
            listen_fds,
            accepting,
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

    /// Starts listening on the sockets [`Relay::start_unlistened`] bound; the reactors arm
    /// their accepts within one sweep (50 ms), connections meanwhile wait in the backlog. A
    /// no-op when already listening.
    pub fn listen(&self) -> Result<(), StartError> {
        if self.accepting.load(Ordering::Acquire) {
            return Ok(());
        }
        for (i, &(fd, addr)) in self.listen_fds.iter().enumerate() {
            if let Err(e) = socket::listen(fd) {
                // Those already listening stop again: in their ports' reuse groups, with no
                // thread accepting, they would hold the share of new connections the kernel
                // steers to them in a backlog nobody reads.
                for &(done, _) in &self.listen_fds[..i] {
                    // SAFETY: shutting down a socket this relay owns; it stays open.
                    unsafe { libc::shutdown(done, libc::SHUT_RDWR) };
                }
                return Err(StartError::Bind(addr, e));
            }
        }
        self.accepting.store(true, Ordering::Release);
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
        let (leader, names) = (self.leader.clone(), self.region_names.clone());
        Box::new(move |out: &mut String| {
            // The leader strategy's view, once an engine has answered a poll.
            let (current, next) = leader.slots();
            if next != 0 {
                let region = leader
                    .last_region()
                    .and_then(|r| names.get(usize::from(r)))
                    .map_or("none the relay runs", String::as_str);
                out.push_str(&format!(
                    "next leader: slot {next} (current slot {current}), region {region}\n"
                ));
            }
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

    /// The relay is stopping: `GET /ping` on the intake answers 503 (`draining`) from now
    /// on, while everything else is served as before, so a load balancer's health checks take
    /// it out of rotation before its listeners close.
    pub fn announce_draining(&self) {
        for s in &self.stats {
            s.draining.set(1);
        }
    }

    /// Each reactor thread's loop iterations so far: a count that stops moving between two
    /// calls (the loop wakes at least every 50 ms) is a wedged thread.
    pub fn thread_iterations(&self) -> Vec<u64> {
        self.stats.iter().map(|s| s.iterations.get()).collect()
    }

    /// Each reactor thread's own counts: what it admitted and how those ended (a bundle is
    /// counted by the thread whose pairs sent it), what it handed to others.
    pub fn thread_totals(&self) -> Vec<Totals> {
        self.stats.iter().map(|s| s.totals()).collect()
    }

    pub fn totals(&self) -> Totals {
        self.metrics.totals()
    }

    /// Stops accepting, lets bundles in flight end for up to `drain`, counts the rest failed,
    /// closes everything and returns the final counts.
    pub fn shutdown(self, drain: Duration) -> Totals {
        Totals::of_all(&self.shutdown_by_thread(drain))
    }

    /// As [`Relay::shutdown`], with each reactor thread's final counts.
    pub fn shutdown_by_thread(self, drain: Duration) -> Vec<Totals> {
        self.drain_deadline_ms
            .store(drain.as_millis() as u64, Ordering::Relaxed);
        self.stop.store(true, Ordering::Release);
        let stats = self.stats.clone();
        for t in self.threads {
            let _ = t.join();
        }
        // The resolver is told to stop (above) and not waited for: a lookup the name server
        // does not answer blocks it for the resolver's whole timeout (10 s and more), which a
        // stop must not wait out. It ends when that lookup returns.
        drop(self.resolver);
        if let Some(l) = self.logger {
            l.stop();
        }
        stats.iter().map(|s| s.totals()).collect()
    }
}

/// What a spec must be for the relay to start, checked before anything is bound or spawned
/// (and by `run --check`, which starts nothing): the regions, a source per thread, the
/// keepalive settings, and without handoffs a source of every egress group per thread.
pub fn check_spec(spec: &Spec) -> Result<(), StartError> {
    if spec.regions.is_empty() || spec.regions.len() > crate::limiter::REGIONS_MAX {
        return Err(StartError::Spec(format!(
            "the relay needs 1 to {} regions, got {}",
            crate::limiter::REGIONS_MAX,
            spec.regions.len()
        )));
    }
    if spec.sources.len() < spec.threads.max(1) {
        return Err(StartError::Spec(crate::config::too_few_sources(
            spec.sources.len(),
            spec.threads.max(1),
        )));
    }
    if let Some(why) =
        crate::config::keepalive_timeout_conflict(spec.ping_idle_ms, spec.tcp_user_timeout_ms)
    {
        return Err(StartError::Spec(format!(
            "egress.tcp_user_timeout_ms {why}"
        )));
    }
    if !spec.handoffs
        && let Some(why) =
            crate::config::group_shortfall(&spec.source_group, &spec.egress_groups, spec.threads)
    {
        return Err(StartError::Spec(why.1));
    }
    Ok(())
}

/// Start failed at thread `first`: the threads before it stop, and those from it on, which
/// never ran, count as having left the mesh, so the running ones need not wait for them.
fn never_started(stop: &AtomicBool, mesh: &crate::mesh::Mesh, first: usize) {
    for t in first..mesh.threads() {
        mesh.close(t);
    }
    stop.store(true, Ordering::Relaxed);
}
