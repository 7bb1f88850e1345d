//! The Prometheus text exposition format (0.0.4) of a [`Metrics`] registry.
//!
//! Histograms are Prometheus histograms over one fixed set of `le` bounds for every family
//! recorded in HdrHistograms: 1 µs .. 60 s in 1-2.5-5 steps, wide enough for the µs-scale relay
//! overhead and the ms-scale upstream round trip, and the same everywhere so series aggregate
//! across instances and families. A bucket counts the recorded values whose HdrHistogram
//! bucket starts at or below `le`, so a bound is exact to the histograms' 0.1 % resolution.
//! The one exception is `bundle_relay_tenant_delivery_seconds`: each tenant counts into seven
//! fixed buckets of its own (`tenants::LATENCY_BOUNDS_US`, 250 µs .. 2 s), so that 10,000 tenants fit,
//! and its `_sum` is in whole microseconds; its series aggregate with each other, not with the
//! other families'. No summary (quantile) series
//! is exported: quantiles since start hide what happened in the last minute and cannot be
//! aggregated; `histogram_quantile()` over the buckets does both, and `/debug/histograms` has
//! the exact HdrHistogram percentiles.

use std::fmt::Write as _;

use super::atomic_hist::{COUNTS_LEN, index_of};
use super::labels::{
    CONN_STATES, HistId, METHODS, ReqOutcome, STATUS_SLOTS, method_label, method_slot, status_label,
};
use super::registry::{DISABLED_NOTE, Metrics};

/// `le` bounds: (ns, label in seconds).
const LE_BOUNDS: [(u64, &str); 24] = [
    (1_000, "0.000001"),
    (2_500, "0.0000025"),
    (5_000, "0.000005"),
    (10_000, "0.00001"),
    (25_000, "0.000025"),
    (50_000, "0.00005"),
    (100_000, "0.0001"),
    (250_000, "0.00025"),
    (500_000, "0.0005"),
    (1_000_000, "0.001"),
    (2_500_000, "0.0025"),
    (5_000_000, "0.005"),
    (10_000_000, "0.01"),
    (25_000_000, "0.025"),
    (50_000_000, "0.05"),
    (100_000_000, "0.1"),
    (250_000_000, "0.25"),
    (500_000_000, "0.5"),
    (1_000_000_000, "1"),
    (2_500_000_000, "2.5"),
    (5_000_000_000, "5"),
    (10_000_000_000, "10"),
    (30_000_000_000, "30"),
    (60_000_000_000, "60"),
];

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn escape_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            escape_into(out, v);
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

fn per_region(
    out: &mut String,
    m: &Metrics,
    name: &str,
    kind: &str,
    help: &str,
    value: impl Fn(usize) -> u64,
) {
    family(out, name, kind, help);
    for (r, region) in m.region_names().iter().enumerate() {
        sample(out, name, &[("region", region)], value(r));
    }
}

fn histogram(out: &mut String, m: &Metrics, id: HistId, labels: &[(&str, &str)], acc: &mut [u64]) {
    let name = id.family_name();
    m.histogram_counts(id, acc);
    let bucket = format!("{name}_bucket");
    let mut cumulative = 0u64;
    let mut next = 0usize;
    let mut with_le: Vec<(&str, &str)> = labels.to_vec();
    with_le.push(("le", ""));
    for (i, c) in acc.iter().enumerate() {
        while next < LE_BOUNDS.len() && index_of(LE_BOUNDS[next].0) < i {
            *with_le.last_mut().expect("le label") = ("le", LE_BOUNDS[next].1);
            sample(out, &bucket, &with_le, cumulative);
            next += 1;
        }
        cumulative += c;
    }
    while next < LE_BOUNDS.len() {
        *with_le.last_mut().expect("le label") = ("le", LE_BOUNDS[next].1);
        sample(out, &bucket, &with_le, cumulative);
        next += 1;
    }
    *with_le.last_mut().expect("le label") = ("le", "+Inf");
    sample(out, &bucket, &with_le, cumulative);
    let sum_s = m.histogram_sum_ns(id) as f64 / 1e9;
    sample(out, &format!("{name}_sum"), labels, sum_s);
    sample(out, &format!("{name}_count"), labels, cumulative);
}

/// The gauge that says whether the per-thread series below are recorded.
const ENABLED_NAME: &str = "bundle_relay_metrics_enabled";
const ENABLED_HELP: &str = "1 when histograms and per-region, per-method and upstream series are recorded ([admin] metrics).";

impl Metrics {
    /// The Prometheus text exposition format 0.0.4 of every metric.
    pub fn render_prometheus(&self, out: &mut String) {
        render(self, out);
    }
}

fn render(m: &Metrics, out: &mut String) {
    family(out, ENABLED_NAME, "gauge", ENABLED_HELP);
    sample(out, ENABLED_NAME, &[], u64::from(m.enabled()));
    render_defences(&m.totals(), out);
    render_handoffs(m, out);
    render_leader(m, out);
    render_record(m, out);
    render_tenants(m, out);
    render_quota(m, out);
    if !m.enabled() {
        render_accounting(m, out);
        return;
    }
    let s = m.snapshot();

    let name = "bundle_relay_requests_total";
    family(
        out,
        name,
        "counter",
        "Intake requests answered, by JSON-RPC method and outcome (a status query that asks \
         an engine when its answer is written).",
    );
    for method in METHODS {
        for outcome in ReqOutcome::ALL {
            sample(
                out,
                name,
                &[
                    ("method", method_label(method)),
                    ("outcome", outcome.label()),
                ],
                s.requests[method_slot(method)][outcome as usize],
            );
        }
    }

    let regions = &s.regions;
    per_region(
        out,
        m,
        "bundle_relay_bundles_admitted_total",
        "counter",
        "Bundles that took an arena slot, by region.",
        |r| regions[r].bundles.admitted,
    );
    per_region(
        out,
        m,
        "bundle_relay_bundles_delivered_total",
        "counter",
        "Bundles an engine accepted (a fanned-out bundle: any of its copies), by the region each was admitted for.",
        |r| regions[r].bundles.delivered,
    );
    per_region(
        out,
        m,
        "bundle_relay_bundles_rejected_total",
        "counter",
        "Bundles an engine refused for good (an error status not worth a retry), or tried 8 times without an engine processing them, by the region each was admitted for.",
        |r| regions[r].bundles.rejected,
    );
    per_region(
        out,
        m,
        "bundle_relay_bundles_expired_total",
        "counter",
        "Bundles that reached their max age before an engine took them (waiting, or sent and answered with a retry, a cooldown or a refusal of the source), by the region each was admitted for.",
        |r| regions[r].bundles.expired,
    );
    per_region(
        out,
        m,
        "bundle_relay_bundles_failed_total",
        "counter",
        "Bundles whose fate is unknown: lost after being sent whole (the connection died, the engine went silent, or it failed the call or answered unreadably), or still held when a stop's drain deadline passed, by the region each was admitted for.",
        |r| regions[r].bundles.failed,
    );
    per_region(
        out,
        m,
        "bundle_relay_bundles_in_flight",
        "gauge",
        "Bundles admitted and not yet settled, by region.",
        |r| regions[r].bundles.in_flight,
    );

    let name = "bundle_relay_upstream_calls_total";
    family(
        out,
        name,
        "counter",
        "Upstream calls (SendBundle, tip accounts, leader, authentication, forwarded JSON-RPC), by region and the gRPC status they ended with (an HTTP error maps to its gRPC status; TRANSPORT_ERROR: none, the stream ended without one).",
    );
    for (r, region) in m.region_names().iter().enumerate() {
        for slot in 0..STATUS_SLOTS {
            sample(
                out,
                name,
                &[("region", region), ("status", status_label(slot))],
                regions[r].upstream[slot],
            );
        }
    }

    per_region(
        out,
        m,
        "bundle_relay_cooldowns_started_total",
        "counter",
        "Pair cooldowns started (RESOURCE_EXHAUSTED and the like), by region.",
        |r| regions[r].bundles.cooldowns,
    );
    per_region(
        out,
        m,
        "bundle_relay_region_throttles_total",
        "counter",
        "Region-wide back-offs started: the engine throttled everyone (globally rate limited), by region.",
        |r| regions[r].bundles.throttles,
    );
    per_region(
        out,
        m,
        "bundle_relay_leader_routed_total",
        "counter",
        "Bundles from the rotating port the leader strategy sent to the region whose engine holds the next Jito leader, by region.",
        |r| regions[r].bundles.leader_routed,
    );
    per_region(
        out,
        m,
        "bundle_relay_bundles_rerouted_total",
        "counter",
        "Moves of bundles from the rotating port out of the region's queue to another of their tenant's regions, the region unable to send them within their max age, by the region they left.",
        |r| regions[r].bundles.rerouted,
    );
    per_region(
        out,
        m,
        "bundle_relay_requests_refused_backlog_total",
        "counter",
        "Bundles refused because the region's pool could not send them within their max age, behind the bundles waiting already (429), by the region judged (a rotating bundle's soonest).",
        |r| regions[r].bundles.refused_backlog,
    );
    per_region(
        out,
        m,
        "bundle_relay_cooldowns_active",
        "gauge",
        "Pairs waiting out a cooldown the engine asked for (not those deferred for another relay's send), by region.",
        |r| regions[r].cooldowns_active,
    );

    let name = "bundle_relay_upstream_connections";
    family(
        out,
        name,
        "gauge",
        "Upstream connections, by region and state.",
    );
    for (r, region) in m.region_names().iter().enumerate() {
        for (i, state) in CONN_STATES.iter().enumerate() {
            sample(
                out,
                name,
                &[("region", region), ("state", state)],
                regions[r].conns[i],
            );
        }
    }
    per_region(
        out,
        m,
        "bundle_relay_upstream_reconnects_total",
        "counter",
        "Upstream reconnections, by region.",
        |r| regions[r].reconnects,
    );

    let singles: [(&str, &str, &str, u64); 6] = [
        (
            "bundle_relay_arena_capacity_slots",
            "gauge",
            ARENA_CAPACITY_HELP,
            s.arena_capacity,
        ),
        (
            "bundle_relay_arena_in_use_slots",
            "gauge",
            ARENA_IN_USE_HELP,
            s.arena_in_use,
        ),
        (
            "bundle_relay_intake_connections",
            "gauge",
            "Intake (searcher) connections open now.",
            s.intake_connections,
        ),
        (
            "bundle_relay_intake_connections_refused_total",
            "counter",
            "Intake connections refused at the connection cap.",
            s.intake_refused,
        ),
        (
            "bundle_relay_config_generation",
            "gauge",
            "Configuration generation in force (bumped on each reload).",
            s.config_generation,
        ),
        (
            "bundle_relay_config_reloads_refused_total",
            "counter",
            RELOADS_REFUSED_HELP,
            s.config_reloads_refused,
        ),
    ];
    for (name, kind, help, v) in singles {
        family(out, name, kind, help);
        sample(out, name, &[], v);
    }

    let mut acc = vec![0u64; COUNTS_LEN];
    let plain: [(HistId, &str); 3] = [
        (
            HistId::Overhead,
            "Relay overhead: request read to answer written.",
        ),
        (
            HistId::Delivery,
            "Delivery latency: request read to upstream request fully written.",
        ),
        (
            HistId::LimiterWait,
            "Limiter wait: bundle admitted to a pair acquired for it, each send (a retry's and a fanned-out copy's from admission too).",
        ),
    ];
    for (id, help) in plain {
        family(out, id.family_name(), "histogram", help);
        histogram(out, m, id, &[], &mut acc);
    }
    let id0 = HistId::UpstreamRtt(0);
    family(
        out,
        id0.family_name(),
        "histogram",
        "Upstream round trip: a call's last byte written to its stream ended (answered, reset or timed out), every kind of call that left whole, by region.",
    );
    for (r, region) in m.region_names().iter().enumerate() {
        histogram(
            out,
            m,
            HistId::UpstreamRtt(r),
            &[("region", region)],
            &mut acc,
        );
    }
}

/// Bundles moving between threads: how many each thread handed each other one, and how often a
/// bundle another thread could have sent sooner stayed (no slot lent at that moment). Counted
/// whether metrics are on or off; one series per ordered pair of threads.
/// The lease thread's counts: leases asked of the quota store and its answers, its failures,
/// and tenants running on their last lease; per tenant, what is held on lease.
fn render_quota(m: &Metrics, out: &mut String) {
    let q = m.quota().counts();
    let counters: [(&str, &str, u64); 7] = [
        (
            "bundle_relay_quota_leases_asked_total",
            "Leases of tenants' global rates asked of the quota store.",
            q.asked,
        ),
        (
            "bundle_relay_quota_leases_granted_total",
            "Leases the quota store granted, in part or whole.",
            q.granted,
        ),
        (
            "bundle_relay_quota_leases_refused_total",
            "Leases the quota store granted nothing of: the tenant's global rate was used up for that second.",
            q.refused,
        ),
        (
            "bundle_relay_quota_leases_failed_total",
            "Leases the quota store answered with an error, or whose round trip failed: asked = granted + refused + failed.",
            q.failed,
        ),
        (
            "bundle_relay_quota_requests_granted_total",
            "Requests of tenants' global rates the quota store granted this relay.",
            q.granted_requests,
        ),
        (
            "bundle_relay_quota_store_errors_total",
            "Round trips to the quota store that failed (refused, timed out, or an error reply).",
            q.store_errors,
        ),
        (
            "bundle_relay_quota_store_outages_total",
            "Times the quota store stopped answering.",
            q.outages,
        ),
    ];
    for (name, help, v) in counters {
        family(out, name, "counter", help);
        sample(out, name, &[], v);
    }
    let gauges: [(&str, &str, u64); 2] = [
        (
            "bundle_relay_quota_store_up",
            "1 while the quota store answers (or none is configured), 0 in an outage.",
            u64::from(q.store_up),
        ),
        (
            "bundle_relay_quota_tenants_on_last_lease",
            "Tenants with a global rate running on their last lease: the quota store does not answer.",
            q.on_last_lease,
        ),
    ];
    for (name, help, v) in gauges {
        family(out, name, "gauge", help);
        sample(out, name, &[], v);
    }
    let Some((stats, list)) = m.tenants() else {
        return;
    };
    let mut rows: Vec<(String, u64, u64)> = Vec::new();
    list(&mut |name, slot, _| {
        let c = stats.counts(slot);
        rows.push((name.to_string(), c.leased, c.leased_total));
    });
    // Not `…_quota_leased`: beside the counter `…_quota_leased_total` that would be one
    // family twice to OpenMetrics readers, which name a counter without `_total`.
    let name = "bundle_relay_tenant_quota_held";
    family(
        out,
        name,
        "gauge",
        "Requests of the tenant's global rate this relay holds on lease, unused.",
    );
    for (t, held, _) in &rows {
        sample(out, name, &[("tenant", t)], *held);
    }
    let name = "bundle_relay_tenant_quota_leased_total";
    family(
        out,
        name,
        "counter",
        "Requests of the tenant's global rate leased by this relay (from the store, or on its last lease).",
    );
    for (t, _, total) in &rows {
        sample(out, name, &[("tenant", t)], *total);
    }
}

/// Per tenant of the current config: its bundles by end, in flight, refusals by reason and
/// delivery latency. Labels are the config's tenant names, so their number is the config's.
fn render_tenants(m: &Metrics, out: &mut String) {
    use super::tenants::{LATENCY_BOUNDS_US, Refused, TenantCounts};
    let Some((stats, list)) = m.tenants() else {
        return;
    };
    let mut rows: Vec<(String, TenantCounts)> = Vec::new();
    list(&mut |name, slot, _| rows.push((name.to_string(), stats.counts(slot))));
    let name = "bundle_relay_tenant_unknown_total";
    family(
        out,
        name,
        "counter",
        "Requests no tenant matched, refused with 401 (no [default_tenant]).",
    );
    sample(out, name, &[], stats.unknown_count());
    type Count = fn(&TenantCounts) -> u64;
    let counters: [(&str, &str, Count); 5] = [
        ("admitted", "took an arena slot", |c| c.admitted),
        ("delivered", "an engine accepted", |c| c.delivered),
        ("rejected", "an engine refused for good", |c| c.rejected),
        ("expired", "passed the max age unsent", |c| c.expired),
        (
            "failed",
            "lost after being sent, or held at shutdown",
            |c| c.failed,
        ),
    ];
    for (what, help, get) in counters {
        let name = format!("bundle_relay_tenant_bundles_{what}_total");
        family(
            out,
            &name,
            "counter",
            &format!("Bundles that {help}, by tenant."),
        );
        for (t, c) in &rows {
            sample(out, &name, &[("tenant", t)], get(c));
        }
    }
    let name = "bundle_relay_tenant_in_flight";
    family(
        out,
        name,
        "gauge",
        "Bundles held for the tenant (its share of the arena).",
    );
    for (t, c) in &rows {
        sample(out, name, &[("tenant", t)], c.in_flight);
    }
    let name = "bundle_relay_tenant_refused_total";
    family(
        out,
        name,
        "counter",
        "Requests refused, by tenant and reason (rate, global, share, cap, backlog: 429; region, disabled: 403).",
    );
    for (t, c) in &rows {
        for r in Refused::ALL {
            sample(
                out,
                name,
                &[("tenant", t), ("reason", r.label())],
                c.refused[r as usize],
            );
        }
    }
    if !m.enabled() {
        return;
    }
    let name = "bundle_relay_tenant_delivery_seconds";
    family(
        out,
        name,
        "histogram",
        "Admitted to written to the engine, by tenant, for delivered bundles.",
    );
    for (t, c) in &rows {
        let mut cumulative = 0u64;
        for (i, le) in LATENCY_BOUNDS_US.iter().enumerate() {
            cumulative += c.latency[i];
            let le = format!("{}", *le as f64 / 1e6);
            sample(
                out,
                &format!("{name}_bucket"),
                &[("tenant", t), ("le", &le)],
                cumulative,
            );
        }
        cumulative += c.latency[LATENCY_BOUNDS_US.len()];
        sample(
            out,
            &format!("{name}_bucket"),
            &[("tenant", t), ("le", "+Inf")],
            cumulative,
        );
        sample(
            out,
            &format!("{name}_sum"),
            &[("tenant", t)],
            c.latency_sum_us as f64 / 1e6,
        );
        sample(out, &format!("{name}_count"), &[("tenant", t)], cumulative);
    }
}

fn render_record(m: &Metrics, out: &mut String) {
    let Some((capacity, resident)) = m.record() else {
        return;
    };
    let name = "bundle_relay_record_capacity";
    family(
        out,
        name,
        "gauge",
        "Bundles the record of recent bundles holds (getInflightBundleStatuses, getBundleDelivery), over all threads.",
    );
    sample(out, name, &[], capacity);
    let name = "bundle_relay_record_resident_bytes";
    family(
        out,
        name,
        "gauge",
        "Bytes of the record in memory now: it fills its pages as bundles come, up to its budget.",
    );
    sample(out, name, &[], resident);
}

fn render_leader(m: &Metrics, out: &mut String) {
    let t = m.totals();
    for (name, help, v) in [
        (
            "bundle_relay_leader_polls_total",
            "GetNextScheduledLeader calls made for the leader strategy.",
            t.leader_polls,
        ),
        (
            "bundle_relay_leader_answers_total",
            "GetNextScheduledLeader answers kept (decoded, region matched by name).",
            t.leader_answers,
        ),
        (
            "bundle_relay_leader_fallbacks_total",
            "Bundles of the leader strategy sent to the soonest region instead: the leader's region had no pair ready within leader.wait_ms, or no answer was fresh.",
            t.leader_fallbacks,
        ),
        (
            "bundle_relay_tip_calls_total",
            "GetTipAccounts calls made to refresh the tip accounts bots are answered.",
            t.tip_calls,
        ),
        (
            "bundle_relay_tip_answers_total",
            "GetTipAccounts answers kept: getTipAccounts answers the engines' list since the first.",
            t.tip_answers,
        ),
        (
            "bundle_relay_tip_answers_refused_total",
            "GetTipAccounts answers refused (not 1 to 16 public keys): bots keep the list they had.",
            t.tip_answers_refused,
        ),
        (
            "bundle_relay_status_queries_total",
            "Bots' bundle-status queries forwarded to an engine's JSON-RPC (getBundleStatuses; getInflightBundleStatuses for bundles an engine took or the tenant has no record of).",
            t.status_queries,
        ),
        (
            "bundle_relay_status_queries_answered_total",
            "Forwarded bundle-status queries the engine answered.",
            t.status_queries_answered,
        ),
        (
            "bundle_relay_status_queries_unanswered_total",
            "Forwarded bundle-status queries answered without the engine: no pair free within 250 ms, an engine error, or the relay stopping.",
            t.status_queries_unanswered,
        ),
        (
            "bundle_relay_auth_calls_total",
            "Searcher-authentication calls made to the engines (GenerateAuthChallenge, GenerateAuthTokens, RefreshAccessToken).",
            t.auth_calls,
        ),
        (
            "bundle_relay_auth_tokens_total",
            "New access tokens the engines issued (a whole flow or a refresh).",
            t.auth_tokens,
        ),
        (
            "bundle_relay_auth_failures_total",
            "Searcher-authentication calls that failed (refused, unanswered or undecodable): retried after a back-off.",
            t.auth_failures,
        ),
    ] {
        family(out, name, "counter", help);
        sample(out, name, &[], v);
    }
}

fn render_handoffs(m: &Metrics, out: &mut String) {
    let handoffs = m.handoffs();
    if !handoffs.is_empty() {
        let name = "bundle_relay_handoffs_total";
        family(
            out,
            name,
            "counter",
            "Bundles one reactor thread handed to another to send (from its intake, or moved when a reload left it no source for them), by thread pair.",
        );
        for (from, to, v) in handoffs {
            let (from, to) = (from.to_string(), to.to_string());
            sample(out, name, &[("from", &from), ("to", &to)], v);
        }
    }
    let name = "bundle_relay_handoffs_without_credit_total";
    family(
        out,
        name,
        "counter",
        "Bundles another thread could have sent sooner that stayed, because it had no arena slot lent to this one at that moment.",
    );
    sample(out, name, &[], m.totals().handoffs_without_credit);
    let name = "bundle_relay_ledger_waits_total";
    family(
        out,
        name,
        "counter",
        "Pairs that waited because another relay process on the host (one taking over, or the one taken over from) had sent on them within their interval.",
    );
    sample(out, name, &[], m.totals().ledger_waits);
}

/// What the intake and the reactors did to protect themselves (counted by the relay's own
/// counters, so they are served whether metrics are on or off).
fn render_defences(t: &super::accounting::Totals, out: &mut String) {
    let name = "bundle_relay_intake_connections_closed_total";
    family(
        out,
        name,
        "counter",
        "Intake connections the relay closed on a deadline: a request head too slow (answered 408), a client that stopped reading its answers, or an idle connection.",
    );
    for (reason, v) in [
        ("head_timeout", t.intake_head_timeouts),
        ("send_timeout", t.intake_send_timeouts),
        ("idle", t.intake_idle_closes),
    ] {
        sample(out, name, &[("reason", reason)], v);
    }
    let singles: [(&str, &str, u64); 4] = [
        (
            "bundle_relay_intake_connections_refused_per_source_total",
            "Intake connections refused because their client address held its share of the table ([intake] connections_per_source_max).",
            t.intake_refused_per_source,
        ),
        (
            "bundle_relay_accept_errors_total",
            "Accepts that failed (out of file descriptors or memory); the listener is re-armed from the reactor's sweep.",
            t.accept_errors,
        ),
        (
            "bundle_relay_ring_retries_total",
            "io_uring_enter calls retried after EAGAIN or ENOMEM (memory pressure).",
            t.ring_retries,
        ),
        (
            "bundle_relay_log_lines_dropped_total",
            "Log lines dropped because a reactor's log queue was full (stderr not keeping up).",
            t.log_lines_dropped,
        ),
    ];
    for (name, help, v) in singles {
        family(out, name, "counter", help);
        sample(out, name, &[], v);
    }
}

/// Help of the arena's gauges, served with metrics on and off.
const ARENA_CAPACITY_HELP: &str = "Arena bundle slots in all threads.";
const ARENA_IN_USE_HELP: &str = "Arena bundle slots held now.";
const RELOADS_REFUSED_HELP: &str = "Reloads refused (a bad file or tenants document, or one the running relay cannot run) and [tenants_from] polls that failed (each poll while the endpoint fails); the last good config kept.";

/// Metrics off: the relay's own accounting counters, summed over threads (no labels: the
/// threads do not count by region or method then), under the families' usual names so a
/// `sum()` over them reads the same either way.
fn render_accounting(m: &Metrics, out: &mut String) {
    out.push_str(DISABLED_NOTE);
    out.push('\n');
    let generation: [(&str, &str, &str, u64); 2] = [
        (
            "bundle_relay_config_generation",
            "gauge",
            "Configuration generation in force (bumped on each reload).",
            m.config_generation(),
        ),
        (
            "bundle_relay_config_reloads_refused_total",
            "counter",
            RELOADS_REFUSED_HELP,
            m.reloads_refused(),
        ),
    ];
    let t = m.totals();
    // The arena's gauges are the accounting's too (slots per thread, bundles held).
    let arena = m.snapshot();
    let singles: [(&str, &str, &str, u64); 18] = [
        (
            "bundle_relay_requests_total",
            "counter",
            "Intake requests read (a status query that asks an engine counts before its answer).",
            t.requests,
        ),
        (
            "bundle_relay_arena_capacity_slots",
            "gauge",
            ARENA_CAPACITY_HELP,
            arena.arena_capacity,
        ),
        (
            "bundle_relay_arena_in_use_slots",
            "gauge",
            ARENA_IN_USE_HELP,
            arena.arena_in_use,
        ),
        (
            "bundle_relay_requests_refused_cap_total",
            "counter",
            "Intake requests refused because a cap was reached (429).",
            t.refused_cap,
        ),
        (
            "bundle_relay_requests_refused_backlog_total",
            "counter",
            "Bundles refused because the pool could not send them within their max age, behind \
             the bundles waiting already (429).",
            t.refused_backlog,
        ),
        (
            "bundle_relay_requests_invalid_total",
            "counter",
            "Intake requests answered with an error about the request itself.",
            t.bad_requests,
        ),
        (
            "bundle_relay_bundles_admitted_total",
            "counter",
            "Bundles that took an arena slot.",
            t.admitted,
        ),
        (
            "bundle_relay_bundles_delivered_total",
            "counter",
            "Bundles an engine accepted (a fanned-out bundle: any of its copies).",
            t.delivered,
        ),
        (
            "bundle_relay_bundles_rejected_total",
            "counter",
            "Bundles an engine refused for good, or tried 8 times without an engine processing them.",
            t.rejected,
        ),
        (
            "bundle_relay_bundles_expired_total",
            "counter",
            "Bundles that reached their max age before an engine took them.",
            t.expired,
        ),
        (
            "bundle_relay_bundles_failed_total",
            "counter",
            "Bundles whose fate is unknown: lost after being sent whole, or still held when a stop's drain deadline passed.",
            t.failed,
        ),
        (
            "bundle_relay_bundles_in_flight",
            "gauge",
            "Bundles admitted and not yet settled.",
            t.in_flight,
        ),
        (
            "bundle_relay_intake_connections",
            "gauge",
            "Intake (searcher) connections open now.",
            t.intake_conns,
        ),
        (
            "bundle_relay_intake_connections_refused_total",
            "counter",
            "Intake connections refused at the connection cap.",
            t.intake_refused,
        ),
        (
            "bundle_relay_cooldowns_started_total",
            "counter",
            "Pair cooldowns started (RESOURCE_EXHAUSTED and the like).",
            t.cooldowns,
        ),
        (
            "bundle_relay_region_throttles_total",
            "counter",
            "Region-wide back-offs started: the engine throttled everyone (globally rate limited).",
            t.throttles,
        ),
        (
            "bundle_relay_leader_routed_total",
            "counter",
            "Bundles from the rotating port the leader strategy sent to the region whose engine holds the next Jito leader.",
            t.leader_routed,
        ),
        (
            "bundle_relay_bundles_rerouted_total",
            "counter",
            "Moves of bundles from the rotating port out of a region's queue to another of their tenant's regions, the region they left unable to send them within their max age.",
            t.rerouted,
        ),
    ];
    for (name, kind, help, v) in singles.into_iter().chain(generation) {
        family(out, name, kind, help);
        sample(out, name, &[], v);
    }
}
