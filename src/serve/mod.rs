//! `bundle-relay run`: the relay as a process under a supervisor. It checks the plan, starts
//! the relay, the admin listener and the .hlog writer, then supervises from the main thread
//! every 100 ms until told to stop, drains and exits with a status that says how it ended.
//!
//! What it is: the process around the relay: signals (`signals`), systemd's notify protocol
//! and watchdog (`systemd`, `watchdog`), readiness (`ready`), config reloads (`reload`) and
//! upgrades without a refused connection (`upgrade` on the old process, `takeover` on the
//! new). What it is NOT: the relay (`runtime` starts and stops its threads; nothing here runs
//! on the request path), nor the command line (the binary parses it into [`Flags`]).
//!
//! | exit status | when |
//! |---|---|
//! | 0 | stopped (SIGTERM, SIGINT) or taken over, every bundle accounted for; or `--check` passed |
//! | 1 | stopped, yet admitted ≠ delivered + rejected + expired + failed + in flight |
//! | 2 | refused to start: the config, a flag, the host or the unit's environment is wrong |
//! | 70 | a reactor thread failed, or a takeover did; the relay drained and stopped itself |
//! | 75 | start refused for now: what the host may give later (a host name that does not resolve now, an address not yet on this host); the unit retries |

mod fetch;
mod lease;
mod pacing;
mod plan;
mod poll;
mod quota_store;
mod ready;
mod reload;
mod signals;
mod start;
mod systemd;
mod takeover;
mod upgrade;
mod watch;
mod watchdog;
mod yielding;

pub use fetch::fuzz_answer as fuzz_tenants_answer;
pub use yielding::idle;

pub use self::ready::READY_PAIRS_PERCENT_DEFAULT;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use self::plan::Plan;
use self::ready::Readiness;
use self::signals::Signal;
use self::systemd::Manager;
use self::takeover::Takeover;
use self::upgrade::Upgrade;
use self::watchdog::Watchdog;
use crate::admin::AdminHandle;
use crate::config::{Config, ConnectMode, Overrides, Resolve, Shared, Token};
use crate::metrics::Metrics;
use crate::metrics::accounting::Totals;
use crate::metrics::hlog::HlogThread;
use crate::runtime::Relay;

/// `run`'s flags beyond the config and its overrides.
pub struct Flags {
    /// Check the plan and exit without serving.
    pub check: bool,
    /// How long bundles in flight may take to end at shutdown.
    pub drain_ms: u64,
    /// Write .hlog files into this directory, one interval per this many seconds.
    pub hlog: Option<(PathBuf, u64)>,
    /// Record no metrics, whatever the config says.
    pub no_metrics: bool,
    /// The share of pairs up at which the relay is ready (READY=1).
    pub ready_pairs_percent: u8,
    /// Take over from the relay running as this PID.
    pub takeover: Option<i32>,
    /// The pacing ledger the relay taken over from books in (an inherited descriptor).
    pub ledger_fd: Option<i32>,
}

/// A config, a flag, the host's settings or the unit's environment stopped the relay from
/// starting: the same start fails until one of them changes, so the units do not restart on it.
const EXIT_START_REFUSED: i32 = 2;

/// The host or the network refused what the config asks, for now (EX_TEMPFAIL from
/// sysexits.h): a region host that does not resolve, a listener or egress address not (yet)
/// on this host, a port still taken, the tenants endpoint down. A later start of the same
/// config may pass, so the units restart on it.
const EXIT_START_DEFERRED: i32 = 75;

/// A reactor thread died (EX_SOFTWARE from sysexits.h): the relay stopped itself so that its
/// supervisor restarts it. A takeover that failed ends the same way.
const EXIT_THREAD_FAILED: i32 = 70;

/// The drain ended with bundles the accounting identity does not hold for.
const EXIT_IDENTITY_BROKEN: i32 = 1;

/// The supervision loop's period: signals, health, readiness and the watchdog are looked at
/// this often.
const TICK: Duration = Duration::from_millis(100);

/// The longest a reload waits for a `[tenants_from]` endpoint it asks (one it adds).
const RELOAD_FETCH_MS: u64 = 2_000;

/// Ticks between two lines of totals (10 s).
const TOTALS_EVERY_TICKS: u32 = 100;

/// Runs the relay from the config at `path` (or the embedded default) with `overrides`, until
/// it is stopped; returns the exit status.
pub fn run(path: Option<&Path>, overrides: &Overrides, flags: Flags) -> i32 {
    // First: a reload, dump or upgrade asked while the relay starts (a deployment tool's SIGHUP
    // after it saved the file) is a flag the loop reads once serving, not a kill.
    signals::install_early();
    // The relay to take over, pinned before anything else: its SIGQUIT goes through the pidfd,
    // and its ledger, opened by number through /proc, is known to be its own once the pidfd
    // says it has not ended since (checked after the ledger is opened).
    let pinned = match flags.takeover.map(takeover::Pinned::open).transpose() {
        Ok(p) => p,
        Err(why) => return refuse(&why),
    };
    if let Some(Err(why)) = pinned.as_ref().map(takeover::Pinned::check_supervisor) {
        return refuse(&why);
    }
    let mut upgrade = Upgrade::from_env();
    let manager = match Manager::from_env() {
        Ok(m) => m,
        Err(e) => return refuse(&e),
    };
    let watchdog = match watchdog::period_from_env(flags.takeover) {
        Ok(w) => w.map(Watchdog::new),
        Err(e) => return refuse(&e),
    };
    let mut plan = match plan::plan(path, overrides, flags.no_metrics, flags.hlog.is_some()) {
        Ok(p) => p,
        Err(plan::Refusal {
            why,
            for_now: false,
        }) => return refuse(&why),
        Err(plan::Refusal { why, for_now: true }) => return refuse_for_now(&why),
    };
    // A takeover by hand names the relay serving this config; SIGUSR2's successor is the old
    // relay's own child, and may be picking up a changed listen address, which must then be
    // free of other processes' listeners as at any start.
    let listens: Vec<std::net::SocketAddr> = plan.cfg.intake_listeners().collect();
    if let Some(p) = pinned.as_ref().filter(|_| flags.ledger_fd.is_none()) {
        let ports: Vec<u16> = listens.iter().map(std::net::SocketAddr::port).collect();
        if let Err(why) = p.check_listens(&ports) {
            return refuse(&why);
        }
    }
    if let Some(Err(why)) = pinned.as_ref().map(|p| p.check_new_ports(&listens)) {
        return refuse(&why);
    }
    let ledger = pacing::file_of(&plan.cfg);
    if let Some(ledger) = &ledger
        && let Err(why) = pacing::check_place(ledger)
    {
        return refuse(&why);
    }
    if let Some(Err(why)) = flags
        .hlog
        .as_ref()
        .map(|(dir, _)| start::check_hlog_dir(dir))
    {
        return refuse(&why);
    }
    if flags.check {
        println!("config and host check passed");
        return 0;
    }
    // Opened before the pool comes up: a predecessor's bookings hold from the first send.
    let regions = plan.spec.regions.len();
    let (pacing, why) = match pacing::Pacing::open(
        plan.spec.sources.len() * regions,
        plan.spec.pool_sources.max(plan.spec.sources.len()) * regions,
        flags.ledger_fd,
        flags.takeover,
        ledger.as_deref(),
    ) {
        Ok(p) => p,
        Err(pacing::Refused { why, for_now: true }) => return refuse_for_now(&why),
        Err(pacing::Refused { why, .. }) => return refuse(&why),
    };
    if let Some(why) = why {
        eprintln!("bundle-relay: warning: {why}");
    }
    if let Some(p) = &pinned
        && p.ended()
    {
        eprintln!(
            "bundle-relay: takeover: pid {} ended before this process started serving; not \
             serving in its place",
            p.pid
        );
        return EXIT_THREAD_FAILED;
    }
    plan.spec.ledger = Some(pacing.ledger);
    upgrade.hand_over_ledger(pacing.fd);
    let mut serving = match Serving::start(plan, path, overrides, &flags, manager, watchdog, pinned)
    {
        Ok(s) => s,
        Err(status) => return status,
    };
    signals::install();
    let end = serving.serve(upgrade);
    serving.drain(end)
}

/// Says why the relay does not start.
fn refuse(why: &str) -> i32 {
    eprintln!("bundle-relay: {why}");
    EXIT_START_REFUSED
}

/// Says why the relay does not start now.
fn refuse_for_now(why: &str) -> i32 {
    eprintln!("bundle-relay: {why}");
    EXIT_START_DEFERRED
}

/// Says why the relay does not start after all (`status` says whether a later start may),
/// and stops it again.
fn abandon(relay: Relay, drain: Duration, why: &str, status: fn(&str) -> i32) -> i32 {
    let status = status(why);
    relay.shutdown(drain);
    status
}

/// How serving ended.
#[derive(PartialEq, Eq)]
enum End {
    /// SIGTERM or SIGINT.
    Stopped,
    /// SIGQUIT from the process that took over, which listens now.
    TakenOver,
    /// A reactor thread or the takeover failed, for this reason.
    Failed(String),
}

/// Everything a started relay is supervised with.
struct Serving {
    /// The config file, reloaded when it changes (`None`: the embedded default).
    watch: Option<watch::Watch>,
    /// `[tenants_from]`'s poller, while the config has one (started with it, or by a reload).
    poller: Option<poll::Poller>,
    /// Leases tenants' global rates from the `[quota]` store, while the config has one.
    /// Dropped (stopped) when serving ends.
    _leaser: lease::Leaser,
    /// The document last refused and the generation it was refused against: tried again only
    /// once that generation changed (the file may now allow it), not at every poll.
    tenants_refused: Option<(String, u64)>,
    /// The start fetched the document: the poller's first poll is one period away.
    fetched_at_start: bool,
    /// Why the last poll failed, said once until it changes.
    poll_failing: Option<String>,
    /// The reload being built, if one is.
    reloading: Option<reload::Pending>,
    cfg: Config,
    live: Arc<Shared>,
    relay: Relay,
    metrics: Arc<Metrics>,
    admin: Option<AdminHandle>,
    /// The token the admin listener holds.
    admin_token: Option<Token>,
    hlog: Option<HlogThread>,
    manager: Manager,
    watchdog: Option<Watchdog>,
    readiness: Readiness,
    takeover: Option<Takeover>,
    drain_ms: u64,
}

impl Serving {
    /// Starts the relay on `plan`, then the admin listener (unless taking over: its port is
    /// the old process's until that one drains) and the .hlog writer. On an error the relay
    /// is stopped again and the error is the exit status.
    fn start(
        plan: Plan,
        path: Option<&Path>,
        overrides: &Overrides,
        flags: &Flags,
        manager: Manager,
        watchdog: Option<Watchdog>,
        pinned: Option<takeover::Pinned>,
    ) -> Result<Serving, i32> {
        let Plan {
            cfg,
            mut spec,
            tenants_doc,
            watch,
        } = plan;
        let pairs_total = (spec.sources.len() * spec.regions.len()) as u64;
        let lazy = cfg.egress.connect == ConnectMode::Lazy;
        let readiness = Readiness::new(pairs_total, flags.ready_pairs_percent, lazy);
        let mut shared = Shared::new(cfg.clone(), path.map(Path::to_path_buf), Resolve::Now)
            .with_overrides(overrides.clone())
            .with_host_check(plan::check_reload_addresses);
        if let Some(doc) = &tenants_doc {
            shared = shared.with_tenants_doc(doc.clone());
        }
        // A reload that adds [tenants_from] asks the endpoint on the reload's thread: within a
        // bound of its own, so the reload ends in seconds whatever its timeout_ms.
        shared = shared.with_fetch(|from| {
            let mut once = from.clone();
            once.timeout_ms = once.timeout_ms.min(RELOAD_FETCH_MS);
            fetch::get(&once)
        });
        let live = Arc::new(shared);
        spec.go_live(live.clone());
        // A port a process on its way out still holds, or a ring the kernel is short of
        // memory for: a later start may pass. A port the relay may not bind will not.
        let relay = start::relay(spec, flags.takeover.is_some()).map_err(|e| {
            let why = e.to_string();
            if e.transient() {
                refuse_for_now(&why)
            } else {
                refuse(&why)
            }
        })?;
        let metrics = relay.metrics();
        let drain = Duration::from_millis(flags.drain_ms);
        let admin = match cfg.admin {
            Some(addr) if flags.takeover.is_none() => {
                match start::admin(addr, cfg.admin_token.clone(), &relay, Duration::ZERO) {
                    Ok(a) => Some(a),
                    Err(e) => return Err(abandon(relay, drain, &e, refuse_for_now)),
                }
            }
            _ => None,
        };
        let hlog = match &flags.hlog {
            Some((dir, secs)) => match start::hlog(metrics.clone(), dir, *secs) {
                Ok(t) => Some(t),
                Err(e) => return Err(abandon(relay, drain, &e, refuse)),
            },
            None => None,
        };
        let admin_token = cfg.admin_token.clone();
        let leaser = match lease::Leaser::start(live.clone(), metrics.clone()) {
            Ok(l) => l,
            Err(e) => {
                return Err(abandon(
                    relay,
                    drain,
                    &format!("starting the quota lease thread: {e}"),
                    refuse_for_now,
                ));
            }
        };
        Ok(Serving {
            watch,
            poller: None,
            reloading: None,
            tenants_refused: None,
            fetched_at_start: tenants_doc.is_some(),
            _leaser: leaser,
            poll_failing: None,
            cfg,
            live,
            relay,
            metrics,
            admin,
            admin_token,
            hlog,
            manager,
            watchdog,
            readiness,
            takeover: pinned.map(Takeover::new),
            drain_ms: flags.drain_ms,
        })
    }

    /// The supervision loop, until a signal or a failure ends it.
    fn serve(&mut self, mut upgrade: Upgrade) -> End {
        // A process taking over says nothing to the manager until it is the main process.
        self.manager.set_muted(self.takeover.is_some());
        let mut last = self.relay.totals();
        // Said at once, so the manager shows the pool coming up from the start, even one that
        // is all up by the first tick.
        self.readiness.report(last.pairs_up, &mut self.manager);
        let mut ticks = 0u32;
        while !Signal::Stop.asked() {
            std::thread::sleep(TICK);
            ticks += 1;
            if let Err(why) = self.relay.health() {
                // Half alive is worse than dead: the kernel keeps routing a share of new
                // connections to the dead thread's listeners. Drain the rest and exit non-zero
                // so the supervisor restarts the relay.
                eprintln!("bundle-relay: {why}; stopping so the supervisor restarts the relay");
                return End::Failed(why);
            }
            // A process taking over pings only once it is the main process.
            if let Some(w) = &mut self.watchdog
                && (self.readiness.ready() || self.takeover.is_none())
            {
                w.tick(&self.relay, &mut self.manager);
            }
            if !self.readiness.ready()
                && let Err(why) = self.become_ready()
            {
                return End::Failed(why);
            }
            if Signal::Quit.take() {
                upgrade.taken_over(Signal::Upgrade.take(), Signal::Stop.asked());
                return self.taken_over();
            }
            if Signal::Upgrade.take() {
                upgrade.ask(self.readiness.ready());
            }
            upgrade.start_if_asked(self.readiness.ready(), &mut self.manager);
            upgrade.poll(&mut self.manager);
            // A reload is built on a thread of its own and reported once built; a SIGHUP, an
            // edit or a new tenants document meanwhile waits for it.
            if self.reloading.as_ref().is_some_and(reload::Pending::built) {
                self.finish_reload();
            }
            if self.reloading.is_none() {
                let edited = match self.watch.as_mut() {
                    Some(w) => w.changed(std::time::Instant::now()).map(|changed| {
                        println!("{} changed on disk: reloading", changed.display());
                    }),
                    None => None,
                }
                .is_some();
                if Signal::Reload.take() || edited {
                    // The files as they are now are what this reload reads: an edit from here
                    // on is another.
                    if let Some(w) = &mut self.watch {
                        w.read_now();
                    }
                    self.reloading = Some(reload::begin(
                        &self.live,
                        reload::What::File,
                        &mut self.manager,
                    ));
                }
            }
            if let Err(why) = self.poll_tenants() {
                return End::Failed(why);
            }
            // Old snapshots the reactors let go of are freed here, not on a reactor (a reload
            // being built holds the list; the next tick frees them).
            if self.reloading.is_none() {
                self.live.free_retired();
            }
            if Signal::Dump.take() {
                let _ = self.metrics.dump_percentiles(&mut std::io::stdout());
            }
            if ticks % TOTALS_EVERY_TICKS == 0 {
                last = self.report_totals(&last);
            }
        }
        self.abandon_reload();
        // A stop and the successor's SIGQUIT in one tick: it listens and is the main process
        // already, so this one drains as taken over.
        if Signal::Quit.take() {
            upgrade.taken_over(false, true);
            return self.taken_over();
        }
        // Stopped while a successor was still coming up: the operator wants no relay, so it
        // stops too instead of taking over later.
        upgrade.stop();
        End::Stopped
    }

    /// The process we started (or an operator's `run --takeover`) listens now: it is the
    /// service manager's main process, so nothing more is said to the manager.
    fn taken_over(&mut self) -> End {
        self.abandon_reload();
        println!("taken over: closing the listeners and draining");
        self.manager.set_muted(true);
        End::TakenOver
    }

    /// Starts or stops the `[tenants_from]` poller as the config now says, and applies a
    /// document it fetched that differs from the last one. A failed poll keeps the tenants
    /// in force; each is counted as a refused reload, and said once until the reason changes.
    fn poll_tenants(&mut self) -> Result<(), String> {
        let url = self
            .live
            .load()
            .config
            .tenants_from
            .as_ref()
            .map(|f| f.url.clone());
        let wanted = url.is_some();
        if wanted != self.poller.is_some() {
            self.poller = if wanted {
                // Started by a reload that added [tenants_from]: its first poll at once.
                let wait = std::mem::take(&mut self.fetched_at_start);
                let p = poll::Poller::start(self.live.clone(), wait)
                    .map_err(|e| format!("starting the tenants poller: {e}"))?;
                Some(p)
            } else {
                // No document is read any more: a refusal of the last one no longer stands
                // (the reload that took it out cleared it from the status too).
                self.tenants_refused = None;
                None
            };
        }
        if self.reloading.is_some() {
            return Ok(());
        }
        let (Some(poller), Some(url)) = (&self.poller, &url) else {
            return Ok(());
        };
        let Some(result) = poller.latest(url) else {
            return Ok(());
        };
        match result {
            Ok(doc) => {
                self.poll_failing = None;
                let generation = self.live.load().generation;
                let refused_here = self
                    .tenants_refused
                    .as_ref()
                    .is_some_and(|(d, g)| *d == doc && *g == generation);
                if self.live.tenants_doc().as_deref() != Some(doc.as_str()) && !refused_here {
                    println!("tenants document changed: reloading");
                    self.reloading = Some(reload::begin(
                        &self.live,
                        reload::What::Tenants(doc),
                        &mut self.manager,
                    ));
                }
            }
            Err(why) => {
                self.metrics.reload_refused();
                if self.poll_failing.as_deref() != Some(why.as_str()) {
                    println!(
                        "tenants poll failed, generation {} kept: {why}",
                        self.live.load().generation
                    );
                    self.poll_failing = Some(why);
                }
            }
        }
        Ok(())
    }

    /// Reports the reload just built, and follows what it applied: the files the config now
    /// names are watched; a tenants document refused is not tried again against the same
    /// generation.
    fn finish_reload(&mut self) {
        let Some(pending) = self.reloading.take() else {
            return;
        };
        let from = pending.from();
        let tenants = match pending.what() {
            reload::What::File => None,
            reload::What::Tenants(doc) => Some(doc.clone()),
        };
        let applied = pending.finish(
            &self.live,
            &self.metrics,
            self.admin.as_ref(),
            &mut self.admin_token,
            &mut self.manager,
            self.readiness.ready(),
        );
        match tenants {
            None => {
                if let Some(w) = &mut self.watch {
                    w.also(self.live.load().config.admin_token_file.clone());
                }
            }
            Some(_) if applied => self.tenants_refused = None,
            Some(doc) => self.tenants_refused = Some((doc, from)),
        }
    }

    /// Serving ends with a reload still being built: said, and not waited for. What it
    /// publishes meanwhile applies to the drain as any reload would.
    fn abandon_reload(&mut self) {
        if self.reloading.take().is_some() {
            println!("a reload was still being built: stopping does not wait for it");
        }
    }

    /// One tick on the way to ready: once enough pairs are up, READY=1, or when taking over,
    /// listening and becoming the main process. An error ends serving: the takeover failed
    /// (the old process serves on).
    fn become_ready(&mut self) -> Result<(), String> {
        if let Some(why) = self.takeover.as_ref().and_then(Takeover::old_ended) {
            eprintln!("bundle-relay: {why}");
            return Err(why);
        }
        let up = self.relay.totals().pairs_up;
        if let Some(line) = self.readiness.reached(up) {
            match &self.takeover {
                None => {
                    println!("{line}");
                    self.manager.ready(&line);
                }
                Some(t) => {
                    // The token in force now: a reload while the pool came up may have
                    // changed it, and found no admin to hand it to.
                    let token = self.live.load().config.admin_token.clone();
                    let admin = self.cfg.admin.map(|addr| (addr, token.clone()));
                    if let Some(a) = t.complete(&line, &self.relay, admin, &mut self.manager)? {
                        self.admin = Some(a);
                        self.admin_token = token;
                    }
                }
            }
        } else if let Some(why) = self
            .takeover
            .as_ref()
            .and_then(|t| t.timed_out(up, self.readiness.pairs_total, self.readiness.ready_at))
        {
            eprintln!("bundle-relay: {why}");
            return Err(why);
        } else {
            self.readiness.report(up, &mut self.manager);
        }
        Ok(())
    }

    /// Prints the totals (and, once ready, says them in STATUS=); returns them for the next
    /// line's difference.
    fn report_totals(&mut self, last: &Totals) -> Totals {
        let t = self.relay.totals();
        let line = format!(
            "admitted {} (+{}), delivered {}, in flight {}, expired {}, failed {}, refused at cap {}, refused for the backlog {}, pairs up {}",
            t.admitted,
            t.admitted - last.admitted,
            t.delivered,
            t.in_flight,
            t.expired,
            t.failed,
            t.refused_cap,
            t.refused_backlog,
            t.pairs_up
        );
        println!("{line}");
        if self.readiness.ready() {
            self.manager.status(&line);
        }
        t
    }

    /// Stops listening, drains the bundles in flight for up to `drain_ms`, stops the admin
    /// listener and the .hlog writer, and returns the exit status for how serving ended.
    fn drain(self, end: End) -> i32 {
        // The config's at the stop (`run --unready-ms` overrides it in every reload).
        let unready_ms = self.live.load().config.intake.unready_ms;
        let Serving {
            relay,
            mut admin,
            hlog,
            mut manager,
            mut watchdog,
            drain_ms,
            takeover,
            readiness,
            ..
        } = self;
        // A process stopped while it waited to take over never listened: nothing to announce
        // or keep serving.
        let listening = takeover.is_none() || readiness.ready();
        if end == End::Stopped && listening {
            relay.announce_draining();
            if let Some(a) = &admin {
                a.set_draining();
            }
            if unready_ms > 0 {
                let line = format!(
                    "stopping: /ping answers 503 (draining); still serving for {unready_ms} ms \
                     before the listeners close"
                );
                println!("{line}");
                manager.stopping(
                    &line,
                    Duration::from_millis(unready_ms.saturating_add(drain_ms)),
                );
                let until = std::time::Instant::now() + Duration::from_millis(unready_ms);
                while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
                    std::thread::sleep(left.min(TICK));
                    if let Some(w) = &mut watchdog {
                        w.tick(&relay, &mut manager);
                    }
                }
            }
        }
        let line = format!(
            "stopping: no new connections; draining {} bundles in flight for up to {drain_ms} ms",
            relay.totals().in_flight
        );
        println!("{line}");
        if end == End::TakenOver {
            // Free the admin port for the process that took over.
            if let Some(a) = admin.take() {
                a.shutdown();
            }
        } else {
            manager.stopping(&line, Duration::from_millis(drain_ms));
        }
        let t = relay.shutdown(Duration::from_millis(drain_ms));
        if let Some(a) = admin {
            a.shutdown();
        }
        if let Some(h) = hlog
            && let Err(e) = h.stop()
        {
            eprintln!("bundle-relay: the last .hlog interval was not written: {e}");
        }
        println!(
            "stopped: admitted {} = delivered {} + rejected {} + expired {} + failed {} + in flight {}",
            t.admitted, t.delivered, t.rejected, t.expired, t.failed, t.in_flight
        );
        match end {
            End::Failed(why) => {
                eprintln!("bundle-relay: exiting with status {EXIT_THREAD_FAILED}: {why}");
                EXIT_THREAD_FAILED
            }
            _ if t.identity_holds() => 0,
            _ => EXIT_IDENTITY_BROKEN,
        }
    }
}
