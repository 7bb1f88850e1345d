//! The `bundle-relay` command line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bundle_relay::admin::{Admin, AdminOptions};
use bundle_relay::budget::{Budget, BudgetInputs};
use bundle_relay::check_host;
use bundle_relay::clock::Clock;
use bundle_relay::config::{Config, ConnectMode, Overrides, Resolve, Shared};
use bundle_relay::metrics::hlog::{HlogConfig, HlogWriter};
use bundle_relay::notify::{self, Notifier};
use bundle_relay::probe;
use bundle_relay::relay::Spec;
use bundle_relay::runtime::Relay;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "bundle-relay", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the static memory budget: everything the process allocates at startup, one line
    /// per term. The relay never allocates beyond it.
    Budget {
        /// Request slots (the in-flight cap), over all threads.
        #[arg(long, default_value_t = 65_536)]
        slots: u64,
        /// Egress addresses in the pool.
        #[arg(long, default_value_t = 2_048)]
        addresses: u64,
        /// Block-engine regions each address sends to.
        #[arg(long, default_value_t = 8)]
        regions: u64,
        /// Reactor threads.
        #[arg(long, default_value_t = 2)]
        threads: u64,
    },
    /// Calibrate the clock the limiter runs on and say which source it uses.
    Clock,
    /// Run the relay: load the config (or the embedded default: Jito mainnet's eight regions),
    /// check the host (io_uring, open files), print the memory budget, serve until SIGTERM or
    /// SIGINT, then drain in-flight bundles and exit 0.
    Run {
        /// A TOML config (see configs/); without it, the embedded default.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Check the config and the host, print the plan, and exit without serving.
        #[arg(long)]
        check: bool,
        /// How long bundles in flight may take to end at shutdown, in ms.
        #[arg(long, default_value_t = 5_000)]
        drain_ms: u64,
        /// Write every histogram as HdrHistogram interval logs (.hlog, rotated) into this
        /// directory.
        #[arg(long)]
        hlog_dir: Option<PathBuf>,
        /// Seconds per .hlog interval.
        #[arg(long, default_value_t = 10)]
        hlog_interval_s: u64,
        /// HOST:PORT:ADDRESS — regions dialling HOST:PORT connect to ADDRESS instead (TLS
        /// still checks HOST). Repeatable. For running a production config against stand-in
        /// engines.
        #[arg(long = "resolve", value_name = "HOST:PORT:ADDRESS")]
        resolve: Vec<String>,
        /// Every TLS region trusts only this CA (PEM) instead of the bundled web roots.
        #[arg(long, value_name = "PEM")]
        ca_file: Option<PathBuf>,
        /// Egress address entries replacing the config's (comma-separated; CIDR and ranges
        /// allowed), e.g. 127.1.0.0/26.
        #[arg(long, value_delimiter = ',')]
        egress: Option<Vec<String>>,
        /// Record no metrics (as `[admin] metrics = false`): no histograms and no per-region,
        /// per-method or upstream series; /metrics serves the accounting counters only.
        #[arg(long)]
        no_metrics: bool,
        /// Under systemd (Type=notify), READY=1 is sent once the listeners are open and this
        /// share of the (source, region) pairs is up; until then STATUS= says how many are.
        /// With `connect = "lazy"` pairs open on first use and only the listeners count.
        #[arg(long, default_value_t = READY_PAIRS_PERCENT_DEFAULT, value_parser = clap::value_parser!(u8).range(0..=100))]
        ready_pairs_percent: u8,
        /// Take over from the relay running as PID, without a refused connection: bind the
        /// same listeners (SO_REUSEPORT), bring the pool up, then listen, tell the service
        /// manager this is the main process (MAINPID=, READY=1) and send PID SIGQUIT, on which
        /// it stops listening and drains. SIGUSR2 to a running relay starts its own binary
        /// (as now on disk) this way.
        #[arg(long, value_name = "PID")]
        takeover: Option<i32>,
    },
    /// Percentiles and plots from HdrHistogram interval logs (the relay's or bench-load's).
    Hist(bundle_relay::hist::HistArgs),
    /// Compare this host with what a config needs and with sysctl/99-bundle-relay.conf: one
    /// line per check (ok / warn / fail, found, wanted, the fix); exit status 1 on any fail.
    CheckHost {
        /// The config to hold the host to (limits, egress addresses, reactor cores); without
        /// it, only the host-wide checks run.
        #[arg(long)]
        config: Option<PathBuf>,
        /// A sysctl.d file to compare with instead of the shipped one.
        #[arg(long)]
        sysctl: Option<PathBuf>,
        /// Read proc/ and sys/ under this folder instead of / (a container's or a saved view).
        #[arg(long, default_value = "/")]
        root: PathBuf,
    },
    /// Print the `ip` commands that make a config's egress addresses local: one local route per
    /// CIDR block (default), or one address per line on an interface.
    EgressIp {
        /// The config whose [egress] addresses to put on this host.
        #[arg(long)]
        config: PathBuf,
        /// Put each address on this interface instead of one local route per block on lo.
        #[arg(long, value_name = "DEV")]
        interface: Option<String>,
    },
}

fn main() {
    match Cli::parse().command {
        Command::Budget {
            slots,
            addresses,
            regions,
            threads,
        } => {
            let budget = Budget::new(BudgetInputs::with_default_intake(
                slots, addresses, regions, threads,
            ));
            println!("{budget}");
        }
        Command::Clock => println!("{}", Clock::calibrate()),
        Command::Run {
            config,
            check,
            drain_ms,
            hlog_dir,
            hlog_interval_s,
            resolve,
            ca_file,
            egress,
            no_metrics,
            ready_pairs_percent,
            takeover,
        } => {
            let mut overrides = Overrides {
                ca_file,
                egress,
                ..Overrides::default()
            };
            for r in &resolve {
                match Overrides::parse_resolve(r) {
                    Ok(o) => overrides.resolve.push(o),
                    Err(e) => {
                        eprintln!("bundle-relay: --resolve {e}");
                        std::process::exit(2);
                    }
                }
            }
            std::process::exit(run(
                config.as_deref(),
                &overrides,
                RunFlags {
                    check,
                    drain_ms,
                    hlog: hlog_dir.map(|d| (d, hlog_interval_s)),
                    no_metrics,
                    ready_pairs_percent,
                    takeover,
                },
            ))
        }
        Command::CheckHost {
            config,
            sysctl,
            root,
        } => std::process::exit(check_host::command::check_host(
            config.as_deref(),
            sysctl.as_deref(),
            root,
        )),
        Command::EgressIp { config, interface } => std::process::exit(
            check_host::command::egress_ip(&config, interface.as_deref()),
        ),
        Command::Hist(args) => {
            if let Err(e) = bundle_relay::hist::run(&args) {
                eprintln!("bundle-relay hist: {e}");
                std::process::exit(2);
            }
        }
    }
}

/// Set by SIGTERM and SIGINT.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Set by SIGHUP: reload the config file (a bad one is refused and the last good one kept).
static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_hup(_: libc::c_int) {
    RELOAD.store(true, Ordering::Relaxed);
}

/// Set by SIGUSR2: start this binary (as now on disk) to take over from this process.
static UPGRADE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr2(_: libc::c_int) {
    UPGRADE.store(true, Ordering::Relaxed);
}

/// Set by SIGQUIT from the process that took over: stop listening, drain, exit 0.
static QUIT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_quit(_: libc::c_int) {
    QUIT.store(true, Ordering::Relaxed);
}

/// The command line again without a `--takeover PID` of its own (a relay that took over once
/// and is upgraded again).
fn without_takeover(args: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut skip = false;
    for a in args {
        if std::mem::replace(&mut skip, false) {
            continue;
        }
        if a == "--takeover" {
            skip = true;
        } else if !a.to_string_lossy().starts_with("--takeover=") {
            out.push(a.clone());
        }
    }
    out
}

/// The admin listener on `addr`; while the port is still held (by a process being taken over,
/// which frees it when told to drain) retried every 50 ms for up to `wait`.
fn start_admin(
    addr: std::net::SocketAddr,
    cfg: &Config,
    relay: &Relay,
    wait: Duration,
) -> Result<bundle_relay::admin::AdminHandle, String> {
    let until = std::time::Instant::now() + wait;
    loop {
        let started = Admin::start_with(
            addr,
            relay.metrics(),
            relay.pairs_fn(),
            AdminOptions {
                token: cfg.admin_token.clone(),
                ..AdminOptions::default()
            },
        );
        match started {
            Ok(a) => {
                println!(
                    "admin: http://{0}/metrics, /debug/histograms, /debug/pairs{1}",
                    a.local_addr(),
                    if cfg.admin_token.is_some() {
                        " (bearer token required on all but /ping)"
                    } else {
                        ""
                    }
                );
                return Ok(a);
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && std::time::Instant::now() < until =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(format!(
                    "cannot listen on {addr} for the admin endpoints: {e}"
                ));
            }
        }
    }
}

/// Set by SIGUSR1: print every histogram's percentile distribution.
static DUMP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr1(_: libc::c_int) {
    DUMP.store(true, Ordering::Relaxed);
}

/// `run`'s flags beyond the config and its overrides.
struct RunFlags {
    check: bool,
    drain_ms: u64,
    hlog: Option<(PathBuf, u64)>,
    no_metrics: bool,
    ready_pairs_percent: u8,
    takeover: Option<i32>,
}

fn run(path: Option<&Path>, overrides: &Overrides, flags: RunFlags) -> i32 {
    let RunFlags {
        check,
        drain_ms,
        hlog,
        no_metrics,
        ready_pairs_percent,
        takeover,
    } = flags;
    // Read now: once a package upgrade replaced the binary, /proc/self/exe names the deleted
    // old file, while this path names the new one.
    let exe = std::env::current_exe().ok();
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // A unit that names a notify socket or a watchdog we cannot use is a broken unit: say so
    // before anything starts rather than be restarted for never reporting ready.
    let notifier = match Notifier::from_env() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("bundle-relay: {e}");
            return 2;
        }
    };
    // The manager set WATCHDOG_PID to the process being taken over: the period is this one's
    // once it becomes the main process.
    if let Some(old) = takeover
        && std::env::var(notify::WATCHDOG_PID_ENV).ok() == Some(old.to_string())
    {
        // SAFETY: single-threaded here: no thread reads the environment concurrently.
        unsafe { std::env::set_var(notify::WATCHDOG_PID_ENV, std::process::id().to_string()) };
    }
    let watchdog = match notify::watchdog_period() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("bundle-relay: {e}");
            return 2;
        }
    };
    if let Some(period) = watchdog
        && period < WATCHDOG_PERIOD_MIN
    {
        eprintln!(
            "bundle-relay: the watchdog period ({} ms) is below {} ms: a reactor loop wakes only \
             every 50 ms when idle, so progress cannot be told from a stall; set WatchdogSec= to \
             1s or more",
            period.as_millis(),
            WATCHDOG_PERIOD_MIN.as_millis()
        );
        return 2;
    }
    let cfg = match path {
        Some(p) => Config::load_overridden(p, Resolve::Now, overrides),
        None if *overrides != Overrides::default() => {
            eprintln!(
                "bundle-relay: --resolve, --ca-file and --egress change a --config file; give one"
            );
            return 2;
        }
        None => {
            println!("no --config: using the embedded default (Jito mainnet, 8 regions)");
            let mut cfg = Config::embedded_default();
            cfg.regions
                .iter_mut()
                .try_for_each(|r| r.resolve())
                .map(|()| cfg)
        }
    };
    let cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bundle-relay: {e}");
            return 2;
        }
    };
    for w in &cfg.warnings {
        println!("warning: {w}");
    }
    let spec = match Spec::from_config(&cfg) {
        Ok(s) => Spec {
            metrics: s.metrics && !no_metrics,
            ..s
        },
        Err(e) => {
            eprintln!("bundle-relay: {e}");
            return 2;
        }
    };
    for r in &cfg.regions {
        let how = if r.tls {
            format!("TLS, SNI {}", r.sni.as_deref().unwrap_or(&r.host))
        } else {
            "plaintext".to_string()
        };
        println!(
            "region {}: {}:{} -> {:?} ({how}, {} ms per pair)",
            r.name, r.host, r.port, r.addrs, r.interval_ms
        );
    }
    if !spec.metrics && hlog.is_some() {
        eprintln!(
            "bundle-relay: --hlog-dir writes the metrics' histograms, which are off \
             (--no-metrics or [admin] metrics = false)"
        );
        return 2;
    }
    match probe::check(&cfg) {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("bundle-relay: {e}");
            return 2;
        }
    }
    let budget = Budget::new(BudgetInputs::of(&spec));
    println!("{budget}");
    println!(
        "{} threads, {} sources x {} regions = {} pairs, {} open files needed",
        spec.threads,
        spec.sources.len(),
        spec.regions.len(),
        spec.sources.len() * spec.regions.len(),
        cfg.fds_needed()
    );
    if check {
        println!("config and host check passed");
        return 0;
    }
    let spec_pairs = spec.sources.len() * spec.regions.len();
    let lazy = cfg.egress.connect == ConnectMode::Lazy;
    let live = Arc::new(
        Shared::new(cfg.clone(), path.map(Path::to_path_buf), Resolve::Now)
            .with_overrides(overrides.clone()),
    );
    let mut spec = spec;
    spec.live = Some(live.clone());
    let started = match takeover {
        Some(_) => Relay::start_unlistened(spec),
        None => Relay::start(spec),
    };
    let relay = match started {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bundle-relay: {e}");
            return 2;
        }
    };
    if let Some(a) = relay.rotating_addr() {
        println!("intake (rotating): http://{a}/api/v1/bundles");
    }
    for (name, a) in relay.pinned_addrs() {
        println!("intake (pinned to {name}): http://{a}/api/v1/bundles");
    }
    let metrics = relay.metrics();
    metrics.set_config_generation(1);
    if !metrics.enabled() {
        println!("metrics: off; /metrics serves the accounting counters only");
    }
    // Taking over, the admin port is the old process's until it is told to drain.
    let mut admin = None;
    if takeover.is_none()
        && let Some(addr) = cfg.admin
    {
        match start_admin(addr, &cfg, &relay, Duration::ZERO) {
            Ok(a) => admin = Some(a),
            Err(e) => {
                eprintln!("bundle-relay: {e}");
                relay.shutdown(Duration::from_millis(drain_ms));
                return 2;
            }
        }
    }
    let hlog = match hlog {
        Some((dir, secs)) => {
            let cfg = HlogConfig::new(&dir, Duration::from_secs(secs.max(1)));
            match HlogWriter::new(metrics.clone(), cfg, std::time::SystemTime::now())
                .and_then(HlogWriter::spawn)
            {
                Ok(t) => {
                    println!("histograms: .hlog every {secs} s into {}", dir.display());
                    Some(t)
                }
                Err(e) => {
                    eprintln!(
                        "bundle-relay: cannot write .hlog files into {}: {e}",
                        dir.display()
                    );
                    relay.shutdown(Duration::from_millis(drain_ms));
                    return 2;
                }
            }
        }
        None => None,
    };
    // SAFETY: the handlers only store to atomics, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, on_hup as *const () as libc::sighandler_t);
        libc::signal(libc::SIGUSR2, on_usr2 as *const () as libc::sighandler_t);
        libc::signal(libc::SIGQUIT, on_quit as *const () as libc::sighandler_t);
    }
    let mut successor: Option<std::process::Child> = None;
    let mut taken_over = false;
    let takeover_deadline = std::time::Instant::now() + TAKEOVER_READY_WAIT;
    let mut admin_token = cfg.admin_token.clone();
    let pairs_total = (spec_pairs) as u64;
    let ready_at = if lazy {
        0
    } else {
        (pairs_total * u64::from(ready_pairs_percent)).div_ceil(100)
    };
    let mut ready = false;
    let mut status_up = u64::MAX;
    let mut progress = notify::Progress::default();
    let mut next_ping = std::time::Instant::now();
    let mut stuck_reported = false;
    let mut notify_failed = false;
    // A process taking over says nothing to the manager until it is the main process (a
    // STOPPING=1 from it would stop the unit); one taken over says nothing after.
    notifier.set_muted(takeover.is_some());
    let mut say = |what: &str, r: std::io::Result<()>| {
        if let Err(e) = r
            && !std::mem::replace(&mut notify_failed, true)
        {
            eprintln!("bundle-relay: telling the service manager {what} failed: {e}");
        }
    };
    let mut last = relay.totals();
    let mut ticks = 0u32;
    let mut failed: Option<String> = None;
    while !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        ticks += 1;
        if let Err(why) = relay.health() {
            // Half alive is worse than dead: the kernel keeps routing a share of new
            // connections to the dead thread's listeners. Drain the rest and exit non-zero so
            // the supervisor restarts the relay.
            eprintln!("bundle-relay: {why}; stopping so the supervisor restarts the relay");
            failed = Some(why);
            break;
        }
        // A process taking over pings only once it is the main process.
        if let Some(period) = watchdog
            && (ready || takeover.is_none())
            && std::time::Instant::now() >= next_ping
        {
            // Pinged at half the period, and only when every reactor loop moved since the
            // last ping: a thread stuck in a syscall or a loop stops the pings, and systemd
            // restarts the relay once the period passes.
            next_ping = std::time::Instant::now() + period / 2;
            match progress.check(&relay.thread_iterations()) {
                Ok(()) => {
                    say("WATCHDOG=1", notifier.watchdog());
                    if std::mem::replace(&mut stuck_reported, false) {
                        println!("watchdog: every reactor thread is making progress again");
                    }
                }
                Err(stuck) if !stuck_reported => {
                    stuck_reported = true;
                    let names: Vec<String> = stuck.iter().map(|t| format!("relay-{t}")).collect();
                    eprintln!(
                        "bundle-relay: watchdog: reactor thread {} made no progress in {} ms; \
                         withholding the ping (systemd restarts the relay after {} ms)",
                        names.join(", "),
                        (period / 2).as_millis(),
                        period.as_millis()
                    );
                    say(
                        "STATUS=",
                        notifier.status(&format!("stalled: reactor thread {}", names.join(", "))),
                    );
                }
                Err(_) => {}
            }
        }
        if !ready {
            let up = relay.totals().pairs_up;
            if up >= ready_at {
                ready = true;
                let line = if lazy {
                    format!("ready: listening; pairs connect on first use ({pairs_total} pairs)")
                } else {
                    format!("ready: listening, {up} of {pairs_total} pairs up")
                };
                match takeover {
                    None => {
                        println!("{line}");
                        say("READY=1", notifier.ready(&line));
                    }
                    Some(old) => {
                        // Listen first, so someone always listens; then become the main
                        // process and let the old one close its listeners and drain.
                        if let Err(e) = relay.listen() {
                            eprintln!("bundle-relay: takeover: {e}; pid {old} keeps serving");
                            failed = Some(e.to_string());
                            break;
                        }
                        println!("{line}; taking over from pid {old}");
                        notifier.set_muted(false);
                        say("MAINPID=", notifier.main_pid_ready(&line));
                        // SAFETY: a signal to the process we take over from.
                        unsafe { libc::kill(old, libc::SIGQUIT) };
                        if let Some(addr) = cfg.admin {
                            match start_admin(addr, &cfg, &relay, ADMIN_TAKEOVER_WAIT) {
                                Ok(a) => admin = Some(a),
                                Err(e) => eprintln!("bundle-relay: {e}; serving without it"),
                            }
                        }
                    }
                }
            } else if let Some(old) = takeover
                && std::time::Instant::now() >= takeover_deadline
            {
                let why = format!(
                    "takeover: {up} of {pairs_total} pairs up after {} s, {ready_at} wanted; \
                     pid {old} keeps serving",
                    TAKEOVER_READY_WAIT.as_secs()
                );
                eprintln!("bundle-relay: {why}");
                failed = Some(why);
                break;
            } else if up != status_up {
                status_up = up;
                say(
                    "STATUS=",
                    notifier.status(&format!(
                        "{up} of {pairs_total} pairs up (ready at {ready_at}, {ready_pairs_percent}%)"
                    )),
                );
            }
        }
        if QUIT.swap(false, Ordering::Relaxed) {
            // The process we started (or an operator's `run --takeover`) listens now: it is
            // the service manager's main process, so nothing more is said to the manager.
            println!("taken over: closing the listeners and draining");
            notifier.set_muted(true);
            taken_over = true;
            break;
        }
        if UPGRADE.swap(false, Ordering::Relaxed) {
            match (&successor, &exe) {
                (Some(c), _) => println!("upgrade: pid {} is already taking over", c.id()),
                (None, None) => eprintln!("bundle-relay: upgrade: this binary's path is unknown"),
                (None, Some(_)) if !ready => println!("upgrade: refused until this relay is ready"),
                (None, Some(exe)) => {
                    let mut cmd = std::process::Command::new(exe);
                    cmd.args(without_takeover(&args))
                        .arg("--takeover")
                        .arg(std::process::id().to_string());
                    match cmd.spawn() {
                        Ok(c) => {
                            let line = format!(
                                "upgrade: started {} as pid {}; serving until it is ready",
                                exe.display(),
                                c.id()
                            );
                            println!("{line}");
                            say("STATUS=", notifier.status(&line));
                            successor = Some(c);
                        }
                        Err(e) => {
                            eprintln!("bundle-relay: upgrade: cannot start {}: {e}", exe.display())
                        }
                    }
                }
            }
        }
        if let Some(c) = &mut successor
            && let Ok(Some(status)) = c.try_wait()
        {
            let line = format!(
                "upgrade failed: pid {} exited ({status}); still serving",
                c.id()
            );
            eprintln!("bundle-relay: {line}");
            say("STATUS=", notifier.status(&line));
            successor = None;
        }
        if RELOAD.swap(false, Ordering::Relaxed) {
            say("RELOADING=1", notifier.reloading());
            let outcome = match live.reload() {
                Ok(g) => {
                    metrics.set_config_generation(g);
                    println!("config reloaded: generation {g}");
                    // The token file is read again on reload so a token can be rotated
                    // without a restart; the listen address stays as started.
                    let token = live.load().config.admin_token.clone();
                    if let Some(a) = &admin
                        && token != admin_token
                    {
                        match (&admin_token, &token) {
                            (_, None) if !a.local_addr().ip().to_canonical().is_loopback() => {
                                println!(
                                    "warning: admin: bearer token no longer required on {}: \
                                     anyone who can reach it can read metrics and /debug",
                                    a.local_addr()
                                )
                            }
                            (_, None) => println!("admin: bearer token no longer required"),
                            (None, Some(_)) => {
                                println!("admin: bearer token now required on all but /ping")
                            }
                            (Some(_), Some(_)) => println!("admin: bearer token replaced"),
                        }
                        a.set_token(token.clone());
                        admin_token = token;
                    }
                    format!("config reloaded: generation {g}")
                }
                Err(e) => {
                    let line = format!(
                        "config reload refused, generation {} kept: {e}",
                        live.load().generation
                    );
                    println!("{line}");
                    line
                }
            };
            // READY=1 ends the reload for the manager either way: a refused reload leaves the
            // relay serving on the last good config, and the status says which.
            if ready {
                say("READY=1", notifier.ready(&outcome));
            } else {
                say("STATUS=", notifier.status(&outcome));
            }
        }
        if DUMP.swap(false, Ordering::Relaxed) {
            let _ = metrics.dump_percentiles(&mut std::io::stdout());
        }
        if ticks % 100 == 0 {
            let t = relay.totals();
            let line = format!(
                "admitted {} (+{}), delivered {}, in flight {}, expired {}, failed {}, refused at cap {}, pairs up {}",
                t.admitted,
                t.admitted - last.admitted,
                t.delivered,
                t.in_flight,
                t.expired,
                t.failed,
                t.refused_cap,
                t.pairs_up
            );
            println!("{line}");
            if ready {
                say("STATUS=", notifier.status(&line));
            }
            last = t;
        }
    }
    let line = format!(
        "stopping: no new connections; draining {} bundles in flight for up to {drain_ms} ms",
        relay.totals().in_flight
    );
    println!("{line}");
    if taken_over {
        // Free the admin port for the process that took over.
        if let Some(a) = admin.take() {
            a.shutdown();
        }
    } else {
        say("STOPPING=1", notifier.stopping(&line));
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
    if let Some(why) = failed {
        eprintln!("bundle-relay: exiting with status {EXIT_THREAD_FAILED}: {why}");
        return EXIT_THREAD_FAILED;
    }
    if t.identity_holds() { 0 } else { 1 }
}

/// Exit status when a reactor thread died (EX_SOFTWARE from sysexits.h): the relay stopped
/// itself so that its supervisor restarts it.
const EXIT_THREAD_FAILED: i32 = 70;

/// The default share of pairs that must be up before READY=1: most of the pool, so a restart
/// under load does not serve from a pool still connecting, yet not all of it, so one region
/// that is down (one of eight is 12.5%) does not hold a start back until systemd gives up.
const READY_PAIRS_PERCENT_DEFAULT: u8 = 85;

/// The shortest watchdog period the pings can mean anything at: the supervision loop runs every
/// 100 ms and an idle reactor loop every 50 ms, so half a period must cover several of both.
const WATCHDOG_PERIOD_MIN: Duration = Duration::from_millis(1_000);

/// How long a process taking over waits for its pool before giving up (the old one serves on).
const TAKEOVER_READY_WAIT: Duration = Duration::from_secs(60);

/// How long a process that took over retries the admin port the old one is freeing.
const ADMIN_TAKEOVER_WAIT: Duration = Duration::from_secs(5);
