//! bench-demo: engine + relay + load on loopback in one process, one command, a report at the end.
//! See `bundle_relay_bench::demo`.
//!
//! ```text
//! bench-demo                                    # bundle-relay, 1,000 req/s for 10 s, 2,048 pairs, storm mid-run
//! bench-demo --relay baseline                   # the same through the conventional baseline
//! bench-demo --rates 500,1000,1500,2000 --duration-s 5 --json sweep.json
//! bench-demo --egress 127.1.0.0/26 --interval-ms 100 --no-storm --fault rst@2s+1s:every=10
//! bench-demo --compare --json compare.json      # bundle-relay vs baseline, one table
//! bench-demo --compare --pin-relay              # the same, the relays on cores of their own
//! bench-demo --tls --socks5 32                  # TLS to the engines, 32 of the 256 addresses via SOCKS5
//! bench-demo --tls-cost                         # bundle-relay, TLS vs plaintext to the engines, one table
//! bench-demo --metrics-cost                     # bundle-relay, metrics on vs off, one table
//! bench-demo --leader-cost                      # bundle-relay, routed by leader vs soonest
//! bench-demo --poll-cost                        # bundle-relay, reactor poll mode vs sleep mode
//! bench-demo --handoffs                         # one connection against the whole pool
//! bench-demo --idle-cost                        # an idle relay, 16,384 pairs, keepalive on vs off
//! bench-demo --faults                           # every fault at once, what the relay did, what was lost
//! bench-demo --relays 2 --haproxy               # one relay vs HAProxy + 2 relays (egress sliced), one table
//! ```
//!
//! The relay runs as a child process of this executable (`bench-demo --serve-relay KIND --spec
//! JSON`, see `demo::serve_relay`), so its CPU time and RSS are its own; `--in-process` runs it
//! on threads of this process instead. Open files: the budget counts both ends of every
//! relay-engine connection and of every load connection as if in one process, 2 x egress x 8 +
//! 2 x connections + 256 of the 20,000 allowed: at most 1,232 egress addresses with 16
//! connections.
//!
//! Exits 0 when every step's relay accounting holds and the engine saw no early send; 1 when
//! either failed; 2 on a bad argument or a failure to start. `--compare`, `--metrics-cost` and
//! `--idle-cost` report missed targets in their tables without failing; `--idle-cost` exits 1
//! when a pool never came all up.

use std::path::PathBuf;
use std::process::ExitCode;

use bundle_relay_bench::compare::{self, CompareConfig};
use bundle_relay_bench::demo::{self, DemoConfig, RelayKind};
use bundle_relay_bench::switch_cost::{self, CostConfig, Switch};
use bundle_relay_bench::txgen;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "bench-demo",
    about = "Synthetic engine + relay + open-loop load on loopback, with a report"
)]
struct Args {
    /// Relay under test: `bundle-relay` or `baseline`.
    #[arg(long, default_value = "bundle-relay")]
    relay: RelayKind,
    /// Requests per second; a comma-separated list runs one fresh engine and relay per rate.
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    rates: Vec<f64>,
    #[arg(long, default_value_t = 10.0)]
    duration_s: f64,
    /// Relay egress addresses: addresses and CIDR ranges, comma-separated.
    #[arg(long, default_value = demo::EGRESS_DEFAULT)]
    egress: String,
    /// Engine interval: one bundle per (source IP, region) per this many ms.
    #[arg(long, default_value_t = bundle_relay_bench::engine::INTERVAL_MS_DEFAULT)]
    interval_ms: u64,
    /// No storm (by default a quarter of the sources are told to back off 30 s half the step's duration after its engine starts, connecting the pairs included, so somewhat before the load's middle).
    #[arg(long)]
    no_storm: bool,
    /// bundle-relay runs from a config file and this many seconds after it starts (each
    /// step) reloads it once with the second half of its egress addresses removed: their
    /// pairs drain under the load; the report's accounting and early sends are the verdict.
    #[arg(long, value_name = "S")]
    egress_cut_at_s: Option<f64>,
    /// Engine fault KIND@START[+DURATION][:k=v,...], repeatable; times from each step's start.
    #[arg(long = "fault")]
    faults: Vec<String>,
    /// Load connections.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Also spread the load over the relay's pinned per-region ports.
    #[arg(long)]
    pinned: bool,
    /// Transactions per bundle as count:weight items.
    #[arg(long, default_value = "1:20,3:60,5:20")]
    txs_mix: String,
    /// Transaction string encodings as name:weight items.
    #[arg(long, default_value = "base64:50,base58:50")]
    encoding_mix: String,
    /// Relay threads: bundle-relay's reactors, the baseline's runtime workers.
    #[arg(long, default_value_t = 2)]
    relay_threads: usize,
    /// The relay's in-flight cap (bundle-relay's arena slots, the baseline's semaphore).
    #[arg(long, default_value_t = demo::IN_FLIGHT_MAX_DEFAULT)]
    in_flight_max: u32,
    /// A plain run only: run the relay on threads of this process, not in a process of its own
    /// (its CPU is then its threads' and its memory is not reported).
    #[arg(long)]
    in_process: bool,
    /// Compare bundle-relay with the baseline: rate sweep, common rate, all-cooldown storm, one
    /// table (`--rates`, `--duration-s`, `--interval-ms` and the storm flags are not used).
    #[arg(long)]
    compare: bool,
    /// --compare or a plain run: the relay under test (with --compare each relay and bench-null)
    /// on cores 0.., one thread each, and the engine and the load on the cores above: on a host
    /// with cores to spare the relay has its own, as deployed.
    #[arg(long)]
    pin_relay: bool,
    /// --compare: sweep rates.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "2000,4000,6000,8000,10000,12000"
    )]
    sweep_rates: Vec<f64>,
    /// --compare: seconds per sweep step.
    #[arg(long, default_value_t = 3.0)]
    sweep_duration_s: f64,
    /// --compare: the rate both relays are measured at for latency and CPU per bundle.
    #[arg(long, default_value_t = 2000.0)]
    common_rate: f64,
    #[arg(long, default_value_t = 5.0)]
    common_duration_s: f64,
    /// --compare: rounds of the common step, each running bundle-relay, the baseline and
    /// bench-null once (the CPU rows are medians of the rounds).
    #[arg(long, default_value_t = 3)]
    common_rounds: usize,
    /// --compare: the storm step's egress (its pool's capacity sets the storm step's rate).
    #[arg(long, default_value = "127.1.0.0/27")]
    storm_egress: String,
    #[arg(long, default_value_t = 100)]
    storm_interval_ms: u64,
    #[arg(long, default_value_t = 5.0)]
    storm_duration_s: f64,
    /// What bundle-relay's metrics cost: the same load with metrics on and off, alternating
    /// rounds, at a fixed rate and at saturation, one table (`--rates`, `--duration-s`,
    /// `--egress`, `--interval-ms` and the storm flags are not used).
    #[arg(long)]
    metrics_cost: bool,
    /// The cost modes (--metrics-cost, --tls-cost, --tenants-cost, --reload-cost,
    /// --leader-cost, --poll-cost): rounds of (on, off) pairs per load.
    #[arg(long, default_value_t = 5)]
    cost_rounds: usize,
    /// The cost modes: the fixed rate both modes sustain.
    #[arg(long, default_value_t = 3000.0)]
    cost_rate: f64,
    /// The cost modes: a rate near saturation that both modes should still sustain cleanly.
    #[arg(long, default_value_t = 10000.0)]
    cost_saturation_rate: f64,
    /// The cost modes: seconds per step.
    #[arg(long, default_value_t = 3.0)]
    cost_duration_s: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No live progress lines.
    #[arg(long)]
    quiet: bool,
    /// TLS between relay and engine (ALPN h2, the production host names as SNI, the engine's
    /// own CA trusted).
    #[arg(long)]
    tls: bool,
    /// Send this many of the egress addresses through SOCKS5 proxies (run by the demo, one
    /// per address) instead of from the relay directly.
    #[arg(long, default_value_t = 0)]
    socks5: usize,
    /// What TLS to the engines costs: the same load over plaintext HTTP/2 and over TLS,
    /// alternating rounds, at a fixed rate and at saturation, one table (the `--cost-*` flags
    /// apply).
    #[arg(long)]
    tls_cost: bool,
    /// What tenants cost: the same load from one tenant of a relay serving 1 tenant and one
    /// serving 10,000, alternating rounds, at a fixed rate and at saturation, one table (the
    /// `--cost-*` flags apply).
    #[arg(long)]
    tenants_cost: bool,
    /// What a reload costs: a relay of 10,000 tenants run from its config file, reloaded
    /// every second (one tenant changed each time) and never, alternating rounds, at a fixed
    /// rate and at saturation, one table (the `--cost-*` flags apply).
    #[arg(long)]
    reload_cost: bool,
    /// What leader-aware routing gives and costs: the rotating port routed by the next leader
    /// (the engine's schedule, learned with GetNextScheduledLeader) and to the soonest region,
    /// alternating rounds, at a fixed rate and at saturation: the share of bundles at the next
    /// leader's region, and latency (the `--cost-*` flags apply).
    #[arg(long)]
    leader_cost: bool,
    /// What poll mode buys and costs: the relay's reactor threads spinning (`[reactor] mode =
    /// "poll"`) and sleeping in io_uring_enter, pinned to cores 0.. in both, the engine and the
    /// load kept off those cores where the machine has others; alternating rounds at a fixed
    /// rate and at saturation: answer and delivery p50 / p99 / p99.9 and relay CPU (the
    /// `--cost-*` flags apply).
    #[arg(long)]
    poll_cost: bool,
    /// The fault matrix: bundle-relay over TLS through an engine with a different fault on
    /// every region (black hole, stalls, RST, GOAWAY, down-then-up, throttle, storm, latency,
    /// a bad TLS name) while abusive clients hit the intake; one table per side and the
    /// verdicts.
    #[arg(long = "faults")]
    faults_matrix: bool,
    /// --faults: seconds of load.
    #[arg(long, default_value_t = 12.0)]
    faults_duration_s: f64,
    /// --faults: the load's rate (the pool carries 640/s at the matrix's 400 ms interval).
    #[arg(long, default_value_t = 500.0)]
    faults_rate: f64,
    /// bundle-relay's threads send only what their own connections brought (by default a
    /// bundle leaves through whichever thread's pool sends it soonest).
    #[arg(long)]
    no_handoffs: bool,
    /// One connection against the whole pool: 64 connections, one connection on 2 threads,
    /// one on 4 threads with an uneven pool, and that with handoffs off, at 90% of the pool's
    /// capacity (`--egress`, `--interval-ms`, `--duration-s` apply); one table and the
    /// verdicts.
    #[arg(long)]
    handoffs: bool,
    /// One relay against HAProxy in front of this many relays (each `--egress-slice K/N` of
    /// `--egress`), at each `--haproxy-rates`, one table; needs `--haproxy`.
    #[arg(long, value_name = "N")]
    relays: Option<usize>,
    /// Run `--relays N` behind HAProxy (the shipped deploy/haproxy/haproxy.cfg).
    #[arg(long, requires = "relays")]
    haproxy: bool,
    /// --haproxy: the rates both shapes are offered.
    #[arg(long, value_delimiter = ',', default_value = bundle_relay_bench::haproxy::RATES_DEFAULT)]
    haproxy_rates: Vec<f64>,
    /// --haproxy: seconds of load per step.
    #[arg(long, default_value_t = bundle_relay_bench::haproxy::DURATION_S_DEFAULT)]
    haproxy_duration_s: f64,
    /// --haproxy: the engine's and the relays' interval.
    #[arg(long, default_value_t = bundle_relay_bench::haproxy::INTERVAL_MS_DEFAULT)]
    haproxy_interval_ms: u64,
    /// --haproxy: the relay binary (default: `bundle-relay` beside this executable).
    #[arg(long)]
    relay_bin: Option<PathBuf>,
    /// --haproxy: the HAProxy binary.
    #[arg(long, default_value = "haproxy")]
    haproxy_bin: PathBuf,
    /// What an idle bundle-relay costs: every pair up (eager connects), no load, the relay
    /// process's CPU (reactor threads, log thread, the rest), wake-ups and RSS over a window,
    /// with keepalive PINGs on (`--idle-ping-ms`) and off; one table against issue 18's
    /// "< 1% of a core with 16,384 pairs" (`--relay-threads` applies).
    #[arg(long)]
    idle_cost: bool,
    /// --idle-cost: egress addresses (127.1.0.0 up), 8 regions each.
    #[arg(long, default_value_t = bundle_relay_bench::idle_cost::SOURCES_DEFAULT)]
    idle_sources: usize,
    /// --idle-cost: pools to measure, in pairs (multiples of 8), e.g. 1024,16384; replaces
    /// --idle-sources.
    #[arg(long, value_delimiter = ',')]
    idle_pairs_list: Vec<usize>,
    /// --idle-cost: seconds of the measured window (long enough for a keepalive round).
    #[arg(long, default_value_t = bundle_relay_bench::idle_cost::WINDOW_S_DEFAULT)]
    idle_secs: f64,
    /// --idle-cost: seconds between the last pair up and the window.
    #[arg(long, default_value_t = bundle_relay_bench::idle_cost::SETTLE_S_DEFAULT)]
    idle_settle_s: f64,
    /// --idle-cost: the keepalive rows' ping_idle_ms.
    #[arg(long, default_value_t = bundle_relay::config::PING_IDLE_MS_DEFAULT)]
    idle_ping_ms: u64,
    /// --idle-cost: seconds a pool may take to come all up.
    #[arg(long, default_value_t = bundle_relay_bench::idle_cost::UP_WAIT_S_DEFAULT)]
    idle_up_wait_s: f64,
    /// --idle-cost: the relay's tcp_user_timeout_ms on its upstream sockets (default: the
    /// relay's own, 5 s, and 13 s, the least it accepts, for the rows without PINGs).
    #[arg(long)]
    idle_tcp_user_timeout_ms: Option<u64>,
}

/// `bench-demo --serve-relay KIND --spec JSON`: the relay process the demo starts.
fn serve(args: &[String]) -> ExitCode {
    let (kind, spec) = match args {
        [kind, flag, spec] if flag == "--spec" => (kind, spec),
        _ => {
            eprintln!(
                "bench-demo {}: usage: KIND --spec JSON",
                demo::SERVE_RELAY_ARG
            );
            return ExitCode::from(2);
        }
    };
    let kind: RelayKind = match kind.parse() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("bench-demo {}: {e}", demo::SERVE_RELAY_ARG);
            return ExitCode::from(2);
        }
    };
    let stdin = std::io::BufReader::new(std::io::stdin());
    match demo::serve_relay(kind, spec, stdin, &mut std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-demo relay process: {e}");
            ExitCode::from(2)
        }
    }
}

bundle_relay_bench::allocator!();

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(demo::SERVE_RELAY_ARG) {
        return serve(&argv[2..]);
    }
    let a = Args::parse();
    // The modes other than a plain run and --compare.
    let other_mode = a.idle_cost
        || a.tls_cost
        || a.tenants_cost
        || a.reload_cost
        || a.leader_cost
        || a.poll_cost
        || a.metrics_cost
        || a.faults_matrix
        || a.handoffs
        || a.haproxy;
    if a.pin_relay && (a.in_process || other_mode) {
        eprintln!(
            "bench-demo: --pin-relay: with --compare or a plain run, the relay in a process of its own"
        );
        return ExitCode::from(2);
    }
    // Every mode but a plain run runs the relay in a process of its own: it measures the
    // relay's CPU and memory apart from the load's.
    if a.in_process && (a.compare || other_mode) {
        eprintln!(
            "bench-demo: --in-process: a plain run only (this mode runs the relay in a process of its own)"
        );
        return ExitCode::from(2);
    }
    if a.idle_cost {
        return idle_cost(&a);
    }
    let bad = |m: String| {
        eprintln!("bench-demo: {m}");
        ExitCode::from(2)
    };
    let egress = match demo::parse_egress(&a.egress) {
        Ok(e) => e,
        Err(e) => return bad(format!("--egress: {e}")),
    };
    let txs_mix = match txgen::parse_txs_mix(&a.txs_mix) {
        Ok(m) => m,
        Err(e) => return bad(format!("--txs-mix: {e}")),
    };
    let encoding_mix = match txgen::parse_encoding_mix(&a.encoding_mix) {
        Ok(m) => m,
        Err(e) => return bad(format!("--encoding-mix: {e}")),
    };
    let cfg = DemoConfig {
        relay: a.relay,
        rates_per_s: a.rates,
        duration_s: a.duration_s,
        egress,
        interval_ms: a.interval_ms,
        storm: !a.no_storm,
        faults: a.faults,
        connections: a.connections,
        pinned: a.pinned,
        txs_mix,
        encoding_mix,
        relay_threads: a.relay_threads,
        in_flight_max: a.in_flight_max,
        seed: a.seed,
        progress: !a.quiet,
        relay_exe: None,
        tls: a.tls,
        socks5: a.socks5,
        metrics: true,
        handoffs: !a.no_handoffs,
        tenants: 0,
        reload_every_ms: 0,
        egress_cut_at_s: a.egress_cut_at_s,
        leader: false,
        reactor_poll: false,
        pin_relay: a.pin_relay,
    };
    let cfg = if a.in_process {
        cfg
    } else {
        match std::env::current_exe() {
            Ok(exe) => DemoConfig {
                relay_exe: Some(exe),
                ..cfg
            },
            Err(e) => return bad(format!("finding this executable to run the relay: {e}")),
        }
    };
    if a.relays.is_some() && !a.haproxy {
        return bad("--relays N runs behind HAProxy: add --haproxy".into());
    }
    if a.haproxy {
        let Some(relay_bin) = a.relay_bin.clone().or_else(|| {
            cfg.relay_exe
                .as_ref()
                .and_then(|e| e.parent())
                .map(|d| d.join("bundle-relay"))
        }) else {
            return bad("--haproxy: no --relay-bin and no directory of this executable".into());
        };
        let hcfg = bundle_relay_bench::haproxy::HaproxyConfig {
            base: DemoConfig {
                interval_ms: a.haproxy_interval_ms,
                storm: false,
                faults: Vec::new(),
                ..cfg
            },
            relays: a.relays.unwrap_or(2),
            rates_per_s: a.haproxy_rates,
            duration_s: a.haproxy_duration_s,
            relay_bin,
            haproxy_bin: a.haproxy_bin,
        };
        return match bundle_relay_bench::haproxy::run(&hcfg) {
            Ok(r) => finish(
                bundle_relay_bench::haproxy::render(&r),
                &r,
                a.json.as_deref(),
                r.failures(),
            ),
            Err(e) => bad(e),
        };
    }
    if a.faults_matrix {
        let Some(exe) = cfg.relay_exe.clone() else {
            return bad("--faults runs the relay in a process of its own".into());
        };
        let mut mcfg = bundle_relay_bench::matrix::MatrixConfig::new(exe);
        mcfg.progress = !a.quiet;
        mcfg.duration_s = a.faults_duration_s;
        mcfg.rate_per_s = a.faults_rate;
        return match bundle_relay_bench::matrix::run(&mcfg) {
            Ok(r) => finish(
                bundle_relay_bench::matrix::render(&r),
                &r,
                a.json.as_deref(),
                r.failures(),
            ),
            Err(e) => bad(e),
        };
    }
    if a.handoffs {
        let hcfg = bundle_relay_bench::handoff::HandoffConfig::new(cfg);
        return match bundle_relay_bench::handoff::run(&hcfg) {
            Ok(r) => finish(
                bundle_relay_bench::handoff::render(&r),
                &r,
                a.json.as_deref(),
                r.failures(),
            ),
            Err(e) => bad(e),
        };
    }
    if a.metrics_cost
        || a.tls_cost
        || a.tenants_cost
        || a.reload_cost
        || a.leader_cost
        || a.poll_cost
    {
        let switch = if a.tls_cost {
            Switch::Tls
        } else if a.tenants_cost {
            Switch::Tenants
        } else if a.reload_cost {
            Switch::Reload
        } else if a.leader_cost {
            Switch::Leader
        } else if a.poll_cost {
            Switch::Poll
        } else {
            Switch::Metrics
        };
        let ccfg = CostConfig {
            rounds: a.cost_rounds,
            fixed_rate_per_s: a.cost_rate,
            saturation_rate_per_s: a.cost_saturation_rate,
            duration_s: a.cost_duration_s,
            ..CostConfig::new(cfg, switch)
        };
        return match switch_cost::run(&ccfg) {
            Ok(r) => finish(switch_cost::render(&r), &r, a.json.as_deref(), r.failures()),
            Err(e) => bad(e),
        };
    }
    if a.compare {
        let storm_egress = match demo::parse_egress(&a.storm_egress) {
            Ok(e) => e,
            Err(e) => return bad(format!("--storm-egress: {e}")),
        };
        let ccfg = CompareConfig {
            sweep_rates_per_s: a.sweep_rates,
            sweep_duration_s: a.sweep_duration_s,
            common_rate_per_s: a.common_rate,
            common_duration_s: a.common_duration_s,
            common_rounds: a.common_rounds,
            storm_egress,
            storm_interval_ms: a.storm_interval_ms,
            storm_duration_s: a.storm_duration_s,
            ..CompareConfig::new(cfg)
        };
        return match compare::run(&ccfg) {
            Ok(r) => finish(compare::render(&r), &r, a.json.as_deref(), r.failures()),
            Err(e) => bad(e),
        };
    }
    if a.pin_relay {
        let note = bundle_relay_bench::affinity::keep_off_relay_cores(a.relay_threads, {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        });
        eprintln!("bench-demo: {note}");
    }
    match demo::run(&cfg) {
        Ok(r) => finish(demo::render(&r), &r, a.json.as_deref(), r.failures()),
        Err(e) => bad(e),
    }
}

/// `--idle-cost`: exits 1 when a pool never came all up or lost pairs while idle; a missed
/// target is reported in the table without failing.
fn idle_cost(a: &Args) -> ExitCode {
    use bundle_relay_bench::idle_cost::{self, IdleConfig};
    let bad = |m: String| {
        eprintln!("bench-demo: {m}");
        ExitCode::from(2)
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return bad(format!("finding this executable to run the relay: {e}")),
    };
    let regions = IdleConfig::regions();
    let pools = if a.idle_pairs_list.is_empty() {
        vec![a.idle_sources]
    } else {
        if let Some(p) = a
            .idle_pairs_list
            .iter()
            .find(|&&p| p == 0 || p % regions != 0)
        {
            return bad(format!(
                "--idle-pairs-list: {p} is not a positive multiple of the {regions} regions"
            ));
        }
        a.idle_pairs_list.iter().map(|p| p / regions).collect()
    };
    let cfg = IdleConfig {
        pools,
        relay_threads: a.relay_threads,
        ping_idle_ms: a.idle_ping_ms,
        settle_s: a.idle_settle_s,
        window_s: a.idle_secs,
        up_wait_s: a.idle_up_wait_s,
        tcp_user_timeout_ms: a.idle_tcp_user_timeout_ms,
        progress: !a.quiet,
        ..IdleConfig::new(exe)
    };
    match idle_cost::run(&cfg) {
        Ok(r) => finish(idle_cost::render(&r), &r, a.json.as_deref(), r.failures()),
        Err(e) => bad(e),
    }
}

/// Prints a report, writes it as JSON when asked, and exits 0 with no failures, else names
/// each on stderr and exits 1 (2 when the JSON cannot be written).
fn finish(
    text: String,
    report: &impl serde::Serialize,
    json: Option<&std::path::Path>,
    failures: Vec<String>,
) -> ExitCode {
    println!("{text}");
    if let Some(p) = json
        && let Err(e) = bundle_relay_bench::report::write_json(report, p)
    {
        eprintln!("bench-demo: {e}");
        return ExitCode::from(2);
    }
    if failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    for f in failures {
        eprintln!("bench-demo: FAILED: {f}");
    }
    ExitCode::FAILURE
}
