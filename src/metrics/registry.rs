//! The registry: every reactor thread's metrics and accounting, merged when read (scrapes,
//! percentile dumps, the accounting check). Reads only; the threads write.

use std::fmt::Write as _;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use hdrhistogram::Histogram;

use super::accounting::{self, Stats};
use super::atomic_hist;
use super::labels::{HistId, METHOD_SLOTS, ReqOutcome, STATUS_SLOTS};
use super::percentiles::write_percentile_distribution;
use super::tenants::TenantStats;
use super::thread::ThreadMetrics;
use crate::mesh::Mesh;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionSnapshot {
    /// The region's accounting (admitted, how bundles ended, in flight, cooldowns).
    pub bundles: accounting::RegionTotals,
    pub upstream: [u64; STATUS_SLOTS],
    pub cooldowns_active: u64,
    pub conns: [u64; 4],
    pub reconnects: u64,
}

/// Every counter and gauge, summed over threads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// `[method_slot(method)][outcome as usize]`.
    pub requests: [[u64; ReqOutcome::ALL.len()]; METHOD_SLOTS],
    pub intake_connections: u64,
    pub intake_refused: u64,
    pub arena_capacity: u64,
    pub arena_in_use: u64,
    pub config_generation: u64,
    pub config_reloads_refused: u64,
    pub regions: Vec<RegionSnapshot>,
}

/// The registry: every thread's metrics and accounting, rendered merged.
pub struct Metrics {
    region_names: Box<[String]>,
    threads: Box<[Arc<ThreadMetrics>]>,
    /// Each thread's accounting, counted whether metrics are on or off.
    stats: Box<[Arc<Stats>]>,
    config_generation: AtomicU64,
    config_reloads_refused: AtomicU64,
    enabled: bool,
    /// The threads' mesh, for the handoff counts (set once by the relay at start).
    mesh: OnceLock<Arc<Mesh>>,
    journals: OnceLock<Arc<crate::journal::Journals>>,
    /// The tenants' shared state and who they are now (set once by the relay at start).
    tenants: OnceLock<(Arc<TenantStats>, TenantsFn)>,
    /// The lease thread's counts (tenants' global rates).
    quota: super::quota::QuotaStats,
}

/// Calls its argument once per tenant of the current config (the default policy first, when
/// there is one): its name, its slot and its policy as one line for `/debug/tenants`.
pub type TenantsFn = Box<dyn Fn(&mut dyn FnMut(&str, u16, &str)) + Send + Sync>;

impl Metrics {
    /// Registry for `threads` reactor threads and regions `0..region_names.len()`, recording.
    pub fn new(region_names: &[String], threads: usize) -> Metrics {
        Metrics::with_switch(region_names, threads, true)
    }

    /// As [`Metrics::new`]; with `enabled` false every thread's recording calls return at
    /// once (see [`ThreadMetrics::enabled`]) and a scrape serves the relay's accounting
    /// counters, unlabelled, and `bundle_relay_metrics_enabled 0`.
    pub fn with_switch(region_names: &[String], threads: usize, enabled: bool) -> Metrics {
        assert!(
            region_names.len() <= crate::limiter::REGIONS_MAX,
            "{} regions",
            region_names.len()
        );
        Metrics {
            region_names: region_names.into(),
            threads: (0..threads)
                .map(|_| Arc::new(ThreadMetrics::new(region_names.len(), enabled)))
                .collect(),
            stats: (0..threads).map(|_| Arc::new(Stats::default())).collect(),
            config_generation: AtomicU64::new(0),
            config_reloads_refused: AtomicU64::new(0),
            enabled,
            mesh: OnceLock::new(),
            journals: OnceLock::new(),
            tenants: OnceLock::new(),
            quota: super::quota::QuotaStats::new(),
        }
    }

    /// The lease thread's counts.
    pub fn quota(&self) -> &super::quota::QuotaStats {
        &self.quota
    }

    /// Where the tenants' counts are read, and their names (set once, by the relay at start).
    pub fn set_tenants(&self, stats: Arc<TenantStats>, list: TenantsFn) {
        let _ = self.tenants.set((stats, list));
    }

    /// The tenants' shared state and their current list, once the relay set them.
    pub fn tenants(&self) -> Option<&(Arc<TenantStats>, TenantsFn)> {
        self.tenants.get()
    }

    /// `/debug/tenants`: one line per tenant, its policy and counts (keys as short hashes).
    pub fn render_tenants_debug(&self, out: &mut String) {
        let Some((stats, list)) = self.tenants.get() else {
            out.push_str("no tenants: the relay has not started\n");
            return;
        };
        let _ = writeln!(
            out,
            "unknown (401): {}; beyond floors: {} bundles",
            stats.unknown_count(),
            stats.beyond_floor()
        );
        list(&mut |name, slot, policy| {
            let c = stats.counts(slot);
            let refused: Vec<String> = super::tenants::Refused::ALL
                .iter()
                .zip(c.refused)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| format!("{} {n}", r.label()))
                .collect();
            // Only a tenant that ever leased has a global rate worth a word.
            let lease = match (c.leased_total, c.on_last_lease) {
                (0, _) => String::new(),
                (_, false) => format!(", on lease {}", c.leased),
                (_, true) => format!(
                    ", on lease {} (its last lease: the store is down)",
                    c.leased
                ),
            };
            let _ = writeln!(
                out,
                "{name}: {policy}; in flight {}{lease}, admitted {}, delivered {}, rejected {}, \
                 expired {}, failed {}, refused: {}",
                c.in_flight,
                c.admitted,
                c.delivered,
                c.rejected,
                c.expired,
                c.failed,
                if refused.is_empty() {
                    "none".to_string()
                } else {
                    refused.join(", ")
                }
            );
        });
    }

    /// The record of recent bundles, for its size and resident bytes (set once at start).
    pub fn set_journals(&self, journals: Arc<crate::journal::Journals>) {
        let _ = self.journals.set(journals);
    }

    /// The record's (capacity in records, bytes resident now), when it is set.
    pub fn record(&self) -> Option<(u64, u64)> {
        let j = self.journals.get()?;
        Some((j.capacity() as u64, j.resident_bytes()))
    }

    /// Where the handoff counts between threads are read (set once, by the relay at start).
    pub fn set_mesh(&self, mesh: Arc<Mesh>) {
        let _ = self.mesh.set(mesh);
    }

    /// Bundles thread `from` handed to thread `to`, for every pair of threads that handed any.
    pub fn handoffs(&self) -> Vec<(usize, usize, u64)> {
        let Some(mesh) = self.mesh.get() else {
            return Vec::new();
        };
        let n = mesh.threads();
        (0..n)
            .flat_map(|a| (0..n).map(move |b| (a, b)))
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (a, b, mesh.handoffs_counted(a, b)))
            .collect()
    }

    /// Whether the threads record (the config's `[admin] metrics`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Thread `i`'s accounting, for the reactor thread `i` to count into.
    pub fn stats(&self, i: usize) -> Arc<Stats> {
        Arc::clone(&self.stats[i])
    }

    /// The relay's accounting, summed over threads.
    pub fn totals(&self) -> accounting::Totals {
        accounting::Totals::of(self.stats.iter().map(|s| &**s))
    }

    /// Thread `i`'s metrics, for the reactor thread `i` to record into.
    pub fn thread(&self, i: usize) -> Arc<ThreadMetrics> {
        Arc::clone(&self.threads[i])
    }

    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    pub fn region_names(&self) -> &[String] {
        &self.region_names
    }

    /// The configuration generation now in force (bumped on each reload).
    pub fn set_config_generation(&self, generation: u64) {
        self.config_generation.store(generation, Relaxed);
    }

    /// A reload was refused (the last good config kept).
    pub fn reload_refused(&self) {
        self.config_reloads_refused.fetch_add(1, Relaxed);
    }

    pub fn reloads_refused(&self) -> u64 {
        self.config_reloads_refused.load(Relaxed)
    }

    /// The configuration generation last set.
    pub fn config_generation(&self) -> u64 {
        self.config_generation.load(Relaxed)
    }

    /// Every counter and gauge summed over threads.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot {
            regions: vec![RegionSnapshot::default(); self.region_names.len()],
            config_generation: self.config_generation.load(Relaxed),
            config_reloads_refused: self.config_reloads_refused.load(Relaxed),
            ..Snapshot::default()
        };
        for (t, st) in self.threads.iter().zip(self.stats.iter()) {
            for (m, row) in s.requests.iter_mut().enumerate() {
                for (o, v) in row.iter_mut().enumerate() {
                    *v += t.requests[m][o].get();
                }
            }
            s.intake_connections += st.intake_conns.get();
            s.intake_refused += st.intake_refused.get();
            s.arena_capacity += st.arena_capacity.get();
            for (i, (rs, r)) in s.regions.iter_mut().zip(t.regions.iter()).enumerate() {
                rs.bundles.add(st.region(i));
                s.arena_in_use += st.region(i).in_flight.get();
                for (a, c) in rs.upstream.iter_mut().zip(r.upstream.iter()) {
                    *a += c.get();
                }
                rs.cooldowns_active += r.cooldowns_active.get();
                for (a, g) in rs.conns.iter_mut().zip(r.conns.iter()) {
                    *a += g.get();
                }
                rs.reconnects += r.reconnects.get();
            }
        }
        s
    }

    /// Every histogram this registry has, in rendering order.
    pub fn hist_ids(&self) -> Vec<HistId> {
        let mut v = vec![HistId::Overhead, HistId::Delivery, HistId::LimiterWait];
        v.extend((0..self.region_names.len()).map(HistId::UpstreamRtt));
        v
    }

    /// The hlog tag of a histogram: `relay_overhead`, `delivery_latency`, `limiter_wait`,
    /// `upstream_round_trip.<region>` (characters an hlog tag may not hold become `_`).
    pub fn hist_tag(&self, id: HistId) -> String {
        match id {
            HistId::Overhead => "relay_overhead".into(),
            HistId::Delivery => "delivery_latency".into(),
            HistId::LimiterWait => "limiter_wait".into(),
            HistId::UpstreamRtt(r) => {
                let name: String = self.region_names[r]
                    .chars()
                    .map(|c| {
                        if matches!(c, ',' | ' ' | '\r' | '\n') {
                            '_'
                        } else {
                            c
                        }
                    })
                    .collect();
                format!("upstream_round_trip.{name}")
            }
        }
    }

    /// Histogram `id` merged over threads, exactly (values in ns).
    pub fn histogram(&self, id: HistId) -> Histogram<u64> {
        let mut h = atomic_hist::new_histogram();
        for t in self.threads.iter() {
            t.hist(id).add_to(&mut h);
        }
        h
    }

    /// Sum of histogram `id`'s values over threads, ns.
    pub fn histogram_sum_ns(&self, id: HistId) -> u64 {
        self.threads.iter().map(|t| t.hist(id).sum_ns()).sum()
    }

    /// Bucket counts of histogram `id` summed over threads, into `acc` (length
    /// [`atomic_hist::COUNTS_LEN`], zeroed here).
    pub fn histogram_counts(&self, id: HistId, acc: &mut [u64]) {
        acc.fill(0);
        for t in self.threads.iter() {
            t.hist(id).add_counts(acc);
        }
    }

    /// Per region: admitted against delivered + rejected + expired + failed + in flight. With
    /// metrics off, one entry for the whole relay, region `all` (the exposition then has no
    /// per-region series either).
    pub fn accounting(&self) -> Vec<Accounting> {
        if !self.enabled {
            let t = self.totals();
            return vec![Accounting {
                region: "all".into(),
                admitted: t.admitted,
                settled_or_held: t.delivered + t.rejected + t.expired + t.failed + t.in_flight,
            }];
        }
        self.snapshot()
            .regions
            .iter()
            .zip(self.region_names.iter())
            .map(|(r, name)| {
                let b = &r.bundles;
                Accounting {
                    region: name.clone(),
                    admitted: b.admitted,
                    settled_or_held: b.delivered + b.rejected + b.expired + b.failed + b.in_flight,
                }
            })
            .collect()
    }

    /// Checks `admitted == delivered + rejected + expired + failed + in_flight` for every
    /// region; the error names each region that does not add up. Exact only while the reactors
    /// are quiet (see the module docs).
    pub fn check_accounting(&self) -> Result<(), String> {
        let mut err = String::new();
        for a in self.accounting() {
            if a.admitted != a.settled_or_held {
                let _ = write!(
                    err,
                    "region {}: admitted {} != delivered+rejected+expired+failed+in_flight {}; ",
                    a.region, a.admitted, a.settled_or_held
                );
            }
        }
        if err.is_empty() { Ok(()) } else { Err(err) }
    }

    /// Every histogram's percentile distribution (HdrHistogram / wrk2 text, values in µs).
    pub fn render_histograms(&self, out: &mut String) {
        if !self.enabled {
            out.push_str(DISABLED_NOTE);
            out.push('\n');
            return;
        }
        for id in self.hist_ids() {
            let h = self.histogram(id);
            let _ = writeln!(
                out,
                "# {} ({}), values in microseconds",
                self.hist_tag(id),
                id.family_name()
            );
            write_percentile_distribution(&h, 1000.0, out);
            out.push('\n');
        }
    }

    /// [`Metrics::render_histograms`] to `w`, for SIGUSR1.
    pub fn dump_percentiles(&self, w: &mut impl io::Write) -> io::Result<()> {
        let mut s = String::new();
        self.render_histograms(&mut s);
        w.write_all(s.as_bytes())
    }
}

/// What a scrape says when metrics are off.
pub const DISABLED_NOTE: &str = "# metrics are disabled ([admin] metrics = false, or bundle-relay run --no-metrics): no histograms and no per-region, per-method or upstream series are recorded; the relay's accounting counters are served";

/// One region's side of the accounting identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accounting {
    pub region: String,
    pub admitted: u64,
    /// delivered + rejected + expired + failed + in_flight.
    pub settled_or_held: u64,
}
