//! The `bundle-relay` command line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bundle_relay::admin::{Admin, AdminOptions};
use bundle_relay::budget::{Budget, BudgetInputs};
use bundle_relay::clock::Clock;
use bundle_relay::config::{Config, Overrides, Resolve, Shared};
use bundle_relay::metrics::hlog::{HlogConfig, HlogWriter};
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
    },
    /// Percentiles and plots from HdrHistogram interval logs (the relay's or bench-load's).
    Hist(bundle_relay::hist::HistArgs),
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
                check,
                drain_ms,
                hlog_dir.map(|d| (d, hlog_interval_s)),
                no_metrics,
            ))
        }
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

/// Set by SIGUSR1: print every histogram's percentile distribution.
static DUMP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr1(_: libc::c_int) {
    DUMP.store(true, Ordering::Relaxed);
}

fn run(
    path: Option<&Path>,
    overrides: &Overrides,
    check: bool,
    drain_ms: u64,
    hlog: Option<(PathBuf, u64)>,
    no_metrics: bool,
) -> i32 {
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
    let budget = Budget::new(BudgetInputs {
        arena_slots: spec.arena_slots as u64,
        addresses: spec.sources.len() as u64,
        regions: spec.regions.len() as u64,
        threads: spec.threads as u64,
        intake_conns_per_thread: spec.intake_conns_max as u64,
        intake_request_bytes: (spec.http.head_bytes_max + spec.http.body_bytes_max) as u64,
        tls_pairs: spec.regions.iter().filter(|r| r.tls.is_some()).count() as u64
            * spec.sources.len() as u64,
        socks5_pairs: spec
            .sources
            .iter()
            .filter(|s| matches!(s, bundle_relay::config::Source::Socks5 { .. }))
            .count() as u64
            * spec.regions.len() as u64,
    });
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
    let live = Arc::new(
        Shared::new(cfg.clone(), path.map(Path::to_path_buf), Resolve::Now)
            .with_overrides(overrides.clone()),
    );
    let mut spec = spec;
    spec.live = Some(live.clone());
    let relay = match Relay::start(spec) {
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
    let admin = match cfg.admin {
        Some(addr) => match Admin::start_with(
            addr,
            metrics.clone(),
            relay.pairs_fn(),
            AdminOptions {
                token: cfg.admin_token.clone(),
                ..AdminOptions::default()
            },
        ) {
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
                Some(a)
            }
            Err(e) => {
                eprintln!("bundle-relay: cannot listen on {addr} for the admin endpoints: {e}");
                relay.shutdown(Duration::from_millis(drain_ms));
                return 2;
            }
        },
        None => None,
    };
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
    }
    let mut admin_token = cfg.admin_token.clone();
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
        if RELOAD.swap(false, Ordering::Relaxed) {
            match live.reload() {
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
                }
                Err(e) => println!(
                    "config reload refused, generation {} kept: {e}",
                    live.load().generation
                ),
            }
        }
        if DUMP.swap(false, Ordering::Relaxed) {
            let _ = metrics.dump_percentiles(&mut std::io::stdout());
        }
        if ticks % 100 == 0 {
            let t = relay.totals();
            println!(
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
            last = t;
        }
    }
    println!("stopping: no new connections; draining bundles in flight for up to {drain_ms} ms");
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
