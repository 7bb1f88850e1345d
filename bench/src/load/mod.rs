//! bench-load: an open-loop (wrk2-style) HTTP/1.1 load generator for `sendBundle`.
//!
//! Requests go out at a constant arrival rate whatever the target does: request `i` is due at
//! `t0 + i / rate`, and its latency is measured from that scheduled instant to the end of its
//! answer (coordinated omission corrected); one that timed out counts at the time it did. Keep-alive connections, round-robin over the
//! targets, with an optional pipelining depth. Each request is a distinct pre-signed bundle
//! from [`crate::txgen`], sent once.
//!
//! [`run`] blocks: it starts its worker threads (each an epoll loop, see `worker`), collects one
//! interval per second (progress line, `.hlog` interval), and returns a [`LoadReport`] with the
//! totals, the latency histogram and the outcome of every request.
//!
//! Measured (release build, this 2-core host shared with bench-null and with other builds,
//! load average about 12; base64 bundles of 1 to 5 transactions):
//! - `--connections 16 --pipeline 16 --rate 60000 --duration-s 2`: 120,000 of 120,000 sent
//!   and answered, 60,000 req/s achieved, p50 2.0 ms, p99 38 ms, max 56 ms.
//! - the same at `--rate 100000 --duration-s 1.5`: all 150,000 answered, 99,900 req/s
//!   achieved, but p50 68 ms and max 190 ms: the queue grows, so this is the ceiling.
//! - no pipelining, `--connections 256`: 18,500 req/s achieved of 60,000 asked; each request
//!   then costs both sides a wake-up and a syscall pair, and the contended host could not
//!   schedule them faster. (`--connections 32`: 14,500 req/s.)
//!
//! Generation is slower than sending: 2,400 to 3,400 bundles/s for base64, 1,100 bundles/s for
//! the default base64/base58 mix (base58 encoding is quadratic in the transaction length) on
//! the same contended host.

pub mod epoll;
pub mod response;
mod worker;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use serde::Serialize;

pub use response::Answer;

use crate::fds::{FDS_PROCESS_MAX, raise_nofile};
use crate::report::Percentiles;
use crate::sentlog::{SentLog, monotonic_ns};
use crate::txgen::GeneratedBundle;

/// Files the process holds besides connections: std streams, epoll fds, logs, an in-process
/// responder's listeners in tests.
const FDS_RESERVED: u64 = 64;
/// Latencies above an hour are clamped: nothing in a bounded run waits that long.
const LATENCY_NS_MAX: u64 = 3_600_000_000_000;

/// What to run.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Connection `j` goes to `targets[j % targets.len()]`.
    pub targets: Vec<SocketAddr>,
    pub rate_per_s: f64,
    /// Run length; with `requests` too, whichever ends first.
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    pub connections: usize,
    /// Requests in flight per connection (1: no pipelining).
    pub pipeline_depth: usize,
    /// Load threads; connections and the schedule are split between them.
    pub threads: usize,
    /// A request unanswered this long after it was written fails its connection.
    pub timeout: Duration,
    /// Records each bundle's scheduled send time here for the synthetic engine.
    pub sent_log: Option<PathBuf>,
    /// HdrHistogram interval log, one interval per second.
    pub hlog: Option<PathBuf>,
    /// Print a progress line to stderr every second.
    pub progress: bool,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            targets: vec!["127.0.0.1:8999".parse().expect("literal")],
            rate_per_s: 1000.0,
            duration: Some(Duration::from_secs(10)),
            requests: None,
            connections: 16,
            pipeline_depth: 1,
            threads: 1,
            timeout: Duration::from_secs(2),
            sent_log: None,
            hlog: None,
            progress: false,
        }
    }
}

impl LoadConfig {
    /// Requests the run schedules: `rate × duration`, capped by `requests`.
    pub fn total_requests(&self) -> Result<u64, LoadError> {
        let by_time = self
            .duration
            .map(|d| (self.rate_per_s * d.as_secs_f64()).ceil() as u64);
        match (by_time, self.requests) {
            (Some(a), Some(b)) => Ok(a.min(b)),
            (Some(a), None) | (None, Some(a)) => Ok(a),
            (None, None) => Err(LoadError::Config(
                "give a duration or a request count: an unbounded run is refused".into(),
            )),
        }
    }

    fn validate(&self, bundles: usize) -> Result<u64, LoadError> {
        let total = self.check()?;
        if total as usize > bundles {
            return Err(LoadError::Config(format!(
                "the run needs {total} unique bundles but {bundles} were generated: bundles are never reused"
            )));
        }
        Ok(total)
    }

    /// Everything [`run`] refuses that does not depend on the bundles: called before they are
    /// generated, so a bad configuration costs no signing (or, for a rate past any memory, no
    /// allocation). Returns the requests the run schedules.
    pub fn check(&self) -> Result<u64, LoadError> {
        let bad = |s: String| Err(LoadError::Config(s));
        if self.targets.is_empty() {
            return bad("no target".into());
        }
        if let Some(t) = self.targets.iter().find(|t| !t.ip().is_loopback()) {
            return bad(format!("target {t} is not a loopback address"));
        }
        if !(self.rate_per_s.is_finite() && self.rate_per_s > 0.0) {
            return bad(format!("rate {} is not a positive number", self.rate_per_s));
        }
        if self.connections == 0 || self.pipeline_depth == 0 || self.threads == 0 {
            return bad("connections, pipeline depth and threads must be at least 1".into());
        }
        if self.pipeline_depth > PIPELINE_MAX {
            return bad(format!(
                "pipeline depth {}: at most {PIPELINE_MAX} requests in flight per connection",
                self.pipeline_depth
            ));
        }
        if self.timeout.is_zero() {
            return bad(
                "--timeout-ms 0: a request needs at least 1 ms to be answered in".to_string(),
            );
        }
        if self.threads > self.connections {
            return bad(format!(
                "{} threads need at least as many connections (got {})",
                self.threads, self.connections
            ));
        }
        check_fd_budget(self.connections as u64, self.threads as u64)?;
        let total = self.total_requests()?;
        if total > REQUESTS_MAX {
            return bad(format!(
                "{total} requests: at most {REQUESTS_MAX} (each is a bundle signed and held in \
                 memory beforehand); lower --rate or --duration-s"
            ));
        }
        Ok(total)
    }
}

/// Most requests one connection holds in flight: more than any HTTP/1.1 server reads ahead
/// (each is a sent request's slot, held from the start).
pub const PIPELINE_MAX: usize = 4096;

/// Most requests one run schedules: each is a signed bundle generated and held beforehand
/// (about 2 KiB), so 4 GiB of them.
pub const REQUESTS_MAX: u64 = 2_000_000;

/// A number of seconds from the command line: finite and not negative (`Duration` of
/// anything else panics).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number of seconds: {e}"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!(
            "{s:?} is not a number of seconds (finite, 0 or more)"
        ))
    }
}

/// Raises the soft open-file limit as far as allowed and refuses a run that would pass it.
pub fn check_fd_budget(connections: u64, threads: u64) -> Result<(), LoadError> {
    let need = connections + threads + FDS_RESERVED;
    let limit = raise_nofile().min(FDS_PROCESS_MAX) as u64;
    if need > limit {
        return Err(LoadError::Config(format!(
            "{connections} connections need about {need} open files, over this process's limit of {limit} \
             (at most {FDS_PROCESS_MAX} per process): use fewer --connections and more --pipeline depth"
        )));
    }
    Ok(())
}

#[derive(Debug)]
pub enum LoadError {
    Config(String),
    Io(String, io::Error),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Config(s) => write!(f, "bad load configuration: {s}"),
            LoadError::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// How one request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its send time came after the run's end (the target fell too far behind).
    Unsent,
    Answered(Answer),
    /// Its connection broke or the answer was malformed.
    Error,
    /// No answer within the timeout.
    Timeout,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestOutcome {
    /// The bundle's sequence number (its tag and sent-log slot).
    pub seq: u64,
    pub outcome: Outcome,
    /// From scheduled send to the end of the answer (or to the failure).
    pub latency_ns: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub sent: u64,
    pub answered: u64,
    pub errors: u64,
    pub timeouts: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.sent += o.sent;
        self.answered += o.answered;
        self.errors += o.errors;
        self.timeouts += o.timeouts;
    }
}

/// The run's totals, written as the JSON summary.
#[derive(Clone, Debug, Serialize)]
pub struct LoadSummary {
    pub targets: Vec<String>,
    pub rate_per_s_requested: f64,
    pub connections: usize,
    pub pipeline_depth: usize,
    pub threads: usize,
    pub scheduled: u64,
    #[serde(flatten)]
    pub counts: Counts,
    pub unsent: u64,
    /// From the first scheduled send to the end of the run, timeouts' grace included.
    pub elapsed_s: f64,
    /// Requests sent per second over [`LoadSummary::rate_over_s`].
    pub achieved_rate_per_s: f64,
    /// The whole schedule, or the time sending took when longer.
    pub rate_over_s: f64,
    /// Answers by HTTP status.
    pub by_status: BTreeMap<u16, u64>,
    /// Answers carrying a JSON-RPC error, by code.
    pub by_rpc_error: BTreeMap<i32, u64>,
    /// String results equal to the expected bundle id.
    pub result_ids_matching: u64,
    /// String results that differ from it.
    pub result_ids_differing: u64,
    pub latency: Percentiles,
}

impl fmt::Display for LoadSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.latency;
        writeln!(
            f,
            "scheduled {} sent {} answered {} errors {} timeouts {} unsent {}",
            self.scheduled,
            self.counts.sent,
            self.counts.answered,
            self.counts.errors,
            self.counts.timeouts,
            self.unsent
        )?;
        writeln!(
            f,
            "achieved {:.0} req/s of {:.0} requested, over {:.2} s of schedule (the run took {:.2} s)",
            self.achieved_rate_per_s, self.rate_per_s_requested, self.rate_over_s, self.elapsed_s
        )?;
        writeln!(f, "by HTTP status: {:?}", self.by_status)?;
        writeln!(f, "by JSON-RPC error: {:?}", self.by_rpc_error)?;
        writeln!(
            f,
            "result ids: {} matching, {} differing from the expected bundle id",
            self.result_ids_matching, self.result_ids_differing
        )?;
        // Answered requests have a latency, and timed-out ones one at least as long as when
        // they ended: the line says how many of the scheduled ones that is, since the unsent
        // and failed ones are not in it.
        if self.latency.count == 0 {
            return write!(
                f,
                "latency µs (from scheduled send): none answered or timed out of {} scheduled",
                self.scheduled
            );
        }
        write!(
            f,
            "latency µs (from scheduled send, {} answered and {} timed out, at their timeout, of {} scheduled): p50 {:.1} p90 {:.1} p99 {:.1} p99.9 {:.1} p99.99 {:.1} max {:.1}",
            self.counts.answered,
            self.counts.timeouts,
            self.scheduled,
            l.p50_us,
            l.p90_us,
            l.p99_us,
            l.p999_us,
            l.p9999_us,
            l.max_us
        )
    }
}

pub struct LoadReport {
    pub summary: LoadSummary,
    /// Every answered request's latency in ns.
    pub histogram: Histogram<u64>,
    /// Request `i` (bundle `bundles[i]`) at index `i`.
    pub outcomes: Vec<RequestOutcome>,
}

pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid bounds")
}

/// Runs the load and blocks until every request is answered, failed or timed out.
/// `bundles[i]` is request `i`; there must be one per scheduled request.
pub fn run(cfg: &LoadConfig, bundles: &[GeneratedBundle]) -> Result<LoadReport, LoadError> {
    let total = cfg.validate(bundles.len())?;
    let sent_log = match &cfg.sent_log {
        Some(p) => {
            let slots = bundles[..total as usize]
                .iter()
                .map(|b| b.seq + 1)
                .max()
                .unwrap_or(1);
            Some(
                SentLog::create(p, slots as usize)
                    .map_err(|e| LoadError::Io(format!("creating sent log {}", p.display()), e))?,
            )
        }
        None => None,
    };
    let mut hlog_file = match &cfg.hlog {
        Some(p) => Some(BufWriter::new(File::create(p).map_err(|e| {
            LoadError::Io(format!("creating interval log {}", p.display()), e)
        })?)),
        None => None,
    };

    let addrs: Vec<SocketAddr> = (0..cfg.connections)
        .map(|j| cfg.targets[j % cfg.targets.len()])
        .collect();
    let mut per_worker: Vec<Vec<SocketAddr>> = vec![Vec::new(); cfg.threads];
    for (j, a) in addrs.iter().enumerate() {
        per_worker[j % cfg.threads].push(*a);
    }
    let mut streams = Vec::with_capacity(cfg.threads);
    for w in &per_worker {
        streams.push(
            worker::connect_all(w)
                .map_err(|e| LoadError::Io("connecting to the target".into(), e))?,
        );
    }

    let period_ns = 1e9 / cfg.rate_per_s;
    let timeout_ns = cfg.timeout.as_nanos() as u64;
    // Leave a moment for the threads to start, so request 0 is not late by construction.
    let t0_ns = monotonic_ns() + 2_000_000;
    let wall_start = SystemTime::now();
    let send_end_ns = t0_ns + (total as f64 * period_ns) as u64 + timeout_ns;

    let mut serializer = V2DeflateSerializer::new();
    let mut hlog = match hlog_file.as_mut() {
        Some(f) => Some(
            IntervalLogWriterBuilder::new()
                .with_start_time(wall_start)
                .with_max_value_divisor(1e6)
                .add_comment("bench-load latency in ns from scheduled send; max shown in ms")
                .begin_log_with(f, &mut serializer)
                .map_err(|e| LoadError::Io("writing interval log".into(), e))?,
        ),
        None => None,
    };

    let (tx, rx) = mpsc::channel::<worker::Interval>();
    let mut cumulative = new_histogram();
    let mut cum_counts = Counts::default();
    let mut pending: BTreeMap<u64, (usize, Histogram<u64>, Counts)> = BTreeMap::new();
    let mut hlog_err: Option<LoadError> = None;
    let mut emit = |index: u64, h: Histogram<u64>, c: Counts| {
        cumulative.add(&h).expect("same bounds");
        cum_counts.add(&c);
        if let Some(w) = hlog.as_mut() {
            if let Err(e) =
                w.write_histogram(&h, Duration::from_secs(index), Duration::from_secs(1), None)
            {
                hlog_err.get_or_insert(LoadError::Io(
                    "writing interval log".into(),
                    io::Error::other(format!("{e:?}")),
                ));
            }
        }
        if cfg.progress {
            eprintln!(
                "[{:>4}s] sent {:>7}/s answered {:>7} errors {} timeouts {} p99 so far {:.1} µs",
                index + 1,
                c.sent,
                c.answered,
                cum_counts.errors,
                cum_counts.timeouts,
                cumulative.value_at_quantile(0.99) as f64 / 1000.0
            );
        }
    };

    let sent_log_ref = sent_log.as_ref();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = per_worker
            .into_iter()
            .zip(streams)
            .enumerate()
            .map(|(w, (conns, streams))| {
                let spec = worker::Spec {
                    worker: w,
                    workers: cfg.threads,
                    conns,
                    bundles,
                    total,
                    t0_ns,
                    period_ns,
                    send_end_ns,
                    timeout_ns,
                    depth: cfg.pipeline_depth,
                    sent_log: sent_log_ref,
                    intervals: tx.clone(),
                };
                std::thread::Builder::new()
                    .name(format!("load-{w}"))
                    .spawn_scoped(s, move || worker::run(spec, streams))
                    .expect("spawning a load thread")
            })
            .collect();
        drop(tx);
        for iv in rx.iter() {
            let _ = iv.worker;
            let e = pending
                .entry(iv.index)
                .or_insert_with(|| (0, new_histogram(), Counts::default()));
            e.0 += 1;
            e.1.add(&iv.hist).expect("same bounds");
            e.2.add(&iv.counts);
            // Intervals complete in order, so emit from the front while whole.
            while let Some(entry) = pending.first_entry() {
                if entry.get().0 < cfg.threads {
                    break;
                }
                let (index, (_, h, c)) = entry.remove_entry();
                emit(index, h, c);
            }
        }
        // Threads that finished earlier left later intervals partial.
        while let Some((index, (_, h, c))) = pending.pop_first() {
            emit(index, h, c);
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("load thread panicked"))
            .collect::<Vec<_>>()
    });
    if let Some(e) = hlog_err {
        return Err(e);
    }
    drop(hlog);
    if let Some(mut f) = hlog_file {
        io::Write::flush(&mut f).map_err(|e| LoadError::Io("writing interval log".into(), e))?;
    }
    let elapsed_s = (monotonic_ns().saturating_sub(t0_ns)) as f64 / 1e9;

    let mut histogram = new_histogram();
    let mut counts = Counts::default();
    let mut last_send_ns = t0_ns;
    let mut outcomes = vec![
        RequestOutcome {
            seq: 0,
            outcome: Outcome::Unsent,
            latency_ns: 0
        };
        total as usize
    ];
    for (w, r) in results.into_iter().enumerate() {
        let r = r.map_err(|e| LoadError::Io(format!("load thread {w}"), e))?;
        histogram.add(&r.hist).expect("same bounds");
        counts.add(&r.counts);
        last_send_ns = last_send_ns.max(r.last_send_ns);
        for (j, o) in r.outcomes.into_iter().enumerate() {
            outcomes[w + j * cfg.threads] = o;
        }
    }

    let mut by_status = BTreeMap::new();
    let mut by_rpc_error = BTreeMap::new();
    let (mut matching, mut differing, mut unsent) = (0, 0, 0);
    for o in &outcomes {
        match o.outcome {
            Outcome::Unsent => unsent += 1,
            Outcome::Answered(a) => {
                *by_status.entry(a.status).or_insert(0) += 1;
                if let Some(c) = a.rpc_error {
                    *by_rpc_error.entry(c).or_insert(0) += 1;
                }
                match a.result_matches {
                    Some(true) => matching += 1,
                    Some(false) => differing += 1,
                    None => {}
                }
            }
            Outcome::Error | Outcome::Timeout => {}
        }
    }
    // Over the whole schedule, or the time sending took if longer: a target that stopped
    // taking requests halfway achieved half the rate, whatever the rate before it stopped.
    let sending_s = ((last_send_ns - t0_ns) as f64 + period_ns) / 1e9;
    let schedule_s = total as f64 * period_ns / 1e9;
    let rate_over_s = sending_s.max(schedule_s);
    let summary = LoadSummary {
        targets: cfg.targets.iter().map(|t| t.to_string()).collect(),
        rate_per_s_requested: cfg.rate_per_s,
        connections: cfg.connections,
        pipeline_depth: cfg.pipeline_depth,
        threads: cfg.threads,
        scheduled: total,
        counts,
        unsent,
        elapsed_s,
        achieved_rate_per_s: counts.sent as f64 / rate_over_s,
        rate_over_s,
        by_status,
        by_rpc_error,
        result_ids_matching: matching,
        result_ids_differing: differing,
        latency: Percentiles::of(&histogram),
    };
    Ok(LoadReport {
        summary,
        histogram,
        outcomes,
    })
}
