//! The `bundle-relay` command line.

use std::path::PathBuf;

use bundle_relay::budget::{Budget, BudgetInputs};
use bundle_relay::check_host;
use bundle_relay::clock::Clock;
use bundle_relay::config::{ARENA_SLOTS_MAX, Overrides, SOURCES_MAX, THREADS_MAX};
use bundle_relay::limiter::REGIONS_MAX;
use bundle_relay::serve::{self, READY_PAIRS_PERCENT_DEFAULT};
use clap::{Parser, Subcommand};

// The system allocator unless built with `--features mimalloc`: the relay allocates only at
// startup and on a reload, and mimalloc measured no less CPU per bundle and 70% more RSS
// (README, "Allocator"). The library names no allocator, so the tests' counting ones stay theirs.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "bundle-relay", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the static memory budget: everything the process allocates at startup, one line
    /// per term. The relay never allocates beyond it. From counts, with every region over TLS as
    /// Jito's are; `run --config FILE --check` prints a config file's own.
    Budget {
        /// Request slots (the in-flight cap), over all threads.
        #[arg(long, default_value_t = 65_536,
              value_parser = clap::value_parser!(u64).range(1..=u64::from(ARENA_SLOTS_MAX)))]
        slots: u64,
        /// Egress addresses in the pool.
        #[arg(long, default_value_t = 2_048,
              value_parser = clap::value_parser!(u64).range(1..=SOURCES_MAX as u64))]
        addresses: u64,
        /// Block-engine regions each address sends to.
        #[arg(long, default_value_t = 8,
              value_parser = clap::value_parser!(u64).range(1..=REGIONS_MAX as u64))]
        regions: u64,
        /// Reactor threads.
        #[arg(long, default_value_t = 2,
              value_parser = clap::value_parser!(u64).range(1..=THREADS_MAX as u64))]
        threads: u64,
    },
    /// Calibrate the clock the limiter runs on and say which source it uses.
    Clock,
    /// Run the relay: load the config (or the embedded default: Jito mainnet's eight regions),
    /// check the host (io_uring, open files), print the memory budget, serve until SIGTERM or
    /// SIGINT, then drain in-flight bundles and exit 0 (1: the accounting did not balance; 2:
    /// refused to start; 70: a thread or a takeover failed; 75: start refused for now, to be
    /// retried).
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
        /// At SIGTERM or SIGINT, keep serving this long with /ping answering 503 before the
        /// listeners close, so a load balancer in front stops sending first (a few of its
        /// health-check intervals), in ms; instead of the config's `[intake] unready_ms`.
        #[arg(long, value_parser = clap::value_parser!(u64).range(..=9_000))]
        unready_ms: Option<u64>,
        /// Write every histogram as HdrHistogram interval logs (.hlog, rotated) into this
        /// directory.
        #[arg(long)]
        hlog_dir: Option<PathBuf>,
        /// Seconds per .hlog interval.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
        hlog_interval_s: u64,
        /// HOST:PORT:ADDRESS — regions dialling HOST:PORT connect to ADDRESS instead (TLS
        /// still checks HOST). Repeatable. For running a production config against stand-in
        /// engines.
        #[arg(long = "resolve", value_name = "HOST:PORT:ADDRESS")]
        resolve: Vec<String>,
        /// Every TLS region trusts only this CA (PEM) instead of the bundled web roots (a
        /// relative path is read from the working directory).
        #[arg(long, value_name = "PEM")]
        ca_file: Option<PathBuf>,
        /// Egress address entries replacing the config's (comma-separated; CIDR and ranges
        /// allowed), e.g. 127.1.0.0/26; the config's SOCKS5 proxies are dropped with them.
        #[arg(long, value_delimiter = ',')]
        egress: Option<Vec<String>>,
        /// K/N: this relay owns the K-th of N contiguous, near-equal parts of the egress pool
        /// (as `[egress] slice`), so N relays given the same pool never share a source.
        #[arg(long, value_name = "K/N")]
        egress_slice: Option<String>,
        /// The tenants, fixed for the process's life (the static provider): a JSON document in
        /// the `[tenants_from]` endpoint's shape, e.g.
        /// '{"tenant":[{"name":"alpha","key_sha256":["<hex>"],"regions":["ny"]}]}' (digests, so no
        /// key shows in the process list). The config may then list no tenants of its own; a
        /// reload keeps these.
        #[arg(long, value_name = "JSON")]
        tenants: Option<String>,
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
        #[arg(long, value_name = "PID", allow_negative_numbers = true,
              value_parser = clap::value_parser!(i32).range(2..))]
        takeover: Option<i32>,
        /// With --takeover: the pacing ledger the relay taken over from books its sends in (an
        /// inherited descriptor; SIGUSR2 passes it), so neither process sends on a (source,
        /// region) pair the other used within its interval.
        #[arg(long, value_name = "FD", requires = "takeover")]
        ledger_fd: Option<i32>,
    },
    /// Percentiles and plots from HdrHistogram interval logs (the relay's or bench-load's).
    Hist(bundle_relay::hist::HistArgs),
    /// Compare this host with what a config needs and with sysctl/30-bundle-relay.conf: one
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
    let cli = Cli::parse();
    let serving = matches!(cli.command, Command::Run { check: false, .. });
    if !serving {
        // A command that only prints ends quietly when its reader goes (`| head`), as Unix
        // tools do; a serving relay keeps SIGPIPE ignored and handles EPIPE on its sockets.
        // SAFETY: restores the default disposition of one signal, before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match cli.command {
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
            unready_ms,
            hlog_dir,
            hlog_interval_s,
            resolve,
            ca_file,
            egress,
            egress_slice,
            tenants,
            no_metrics,
            ready_pairs_percent,
            takeover,
            ledger_fd,
        } => {
            let mut overrides = Overrides {
                ca_file,
                egress,
                egress_slice,
                tenants,
                unready_ms,
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
            std::process::exit(serve::run(
                config.as_deref(),
                &overrides,
                serve::Flags {
                    check,
                    drain_ms,
                    hlog: hlog_dir.map(|d| (d, hlog_interval_s)),
                    no_metrics,
                    ready_pairs_percent,
                    takeover,
                    ledger_fd,
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
