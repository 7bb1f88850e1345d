//! The names metrics are filed under: methods and outcomes of intake requests, upstream
//! call statuses, connection states, and which histogram is which (with their Prometheus
//! family names). Plain data, no recording.

use crate::grpc::Code;
use crate::jsonrpc;

/// The `method` label of an intake request: one slot per Jito method (in
/// [`jsonrpc::Method::ALL`]'s order), then `other` for a request that named none (bad JSON, an
/// unknown method, a wrong path).
pub const METHOD_SLOTS: usize = jsonrpc::Method::ALL.len() + 1;

/// Every `method` label value, slot by slot (`None` is `other`).
pub const METHODS: [Option<jsonrpc::Method>; METHOD_SLOTS] = {
    let mut all = [None; METHOD_SLOTS];
    let mut i = 0;
    while i < jsonrpc::Method::ALL.len() {
        all[i] = Some(jsonrpc::Method::ALL[i]);
        i += 1;
    }
    all
};

/// The slot of a request's method.
#[inline]
pub fn method_slot(method: Option<jsonrpc::Method>) -> usize {
    match method {
        Some(m) => m as usize,
        None => METHOD_SLOTS - 1,
    }
}

/// The `method` label: the JSON-RPC method name, or `other`.
pub fn method_label(method: Option<jsonrpc::Method>) -> &'static str {
    method.map_or("other", jsonrpc::Method::name)
}

/// How an intake request was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReqOutcome {
    /// Answered with a result.
    Ok = 0,
    /// Answered with a JSON-RPC error about the request itself (parse, params, bundle rules).
    Invalid = 1,
    /// Refused because a cap (arena slots, connections) was reached, or a status query found
    /// no pair to an engine free in time: 429.
    RefusedCap = 2,
    /// A right request the relay could not serve now (its region removed by a reload: 503; a
    /// status query no engine answered: a JSON-RPC error).
    Error = 3,
    /// Refused by its tenant's rules (unknown, disabled, region, rate, share): 401, 403, 429.
    RefusedTenant = 4,
    /// A bundle the pool could not send within its max age, behind the bundles waiting
    /// already: 429.
    RefusedBacklog = 5,
}

impl ReqOutcome {
    pub const ALL: [ReqOutcome; 6] = [
        ReqOutcome::Ok,
        ReqOutcome::Invalid,
        ReqOutcome::RefusedCap,
        ReqOutcome::Error,
        ReqOutcome::RefusedTenant,
        ReqOutcome::RefusedBacklog,
    ];
    /// The `outcome` label.
    pub fn label(self) -> &'static str {
        match self {
            ReqOutcome::Ok => "ok",
            ReqOutcome::Invalid => "invalid",
            ReqOutcome::RefusedCap => "refused_cap",
            ReqOutcome::Error => "error",
            ReqOutcome::RefusedTenant => "refused_tenant",
            ReqOutcome::RefusedBacklog => "refused_backlog",
        }
    }
}

/// Upstream connection states, in the order of [`ThreadMetrics::set_conn_states`]'s array
/// (the same order as `limiter::ConnState`).
pub const CONN_STATES: [&str; 4] = ["down", "connecting", "up", "draining"];

/// gRPC status names by code (0..=16), the `status` label of upstream calls.
use crate::grpc::CODE_NAMES as GRPC_CODE_NAMES;
/// Slot for a status code outside the gRPC spec's 0..=16.
pub const STATUS_SLOT_OUT_OF_SPEC: usize = 17;
/// Slot for a call that ended without a gRPC status (connection reset, GOAWAY, timeout).
pub const STATUS_SLOT_TRANSPORT: usize = 18;
/// Number of `status` label values.
pub const STATUS_SLOTS: usize = 19;

/// The `status` label of slot `i` (see [`status_slot`]).
pub fn status_label(slot: usize) -> &'static str {
    match slot {
        s if s < GRPC_CODE_NAMES.len() => GRPC_CODE_NAMES[s],
        STATUS_SLOT_OUT_OF_SPEC => "OUT_OF_SPEC",
        _ => "TRANSPORT_ERROR",
    }
}

/// Slot of a gRPC status code.
#[inline]
pub fn status_slot(code: Code) -> usize {
    if (code.0 as usize) < GRPC_CODE_NAMES.len() {
        code.0 as usize
    } else {
        STATUS_SLOT_OUT_OF_SPEC
    }
}

/// One thread's counters for one region; aligned so the per-thread region array never shares

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HistId {
    Overhead,
    Delivery,
    LimiterWait,
    UpstreamRtt(usize),
}

impl HistId {
    /// The Prometheus family name of the histogram.
    pub fn family_name(self) -> &'static str {
        match self {
            HistId::Overhead => "bundle_relay_relay_overhead_seconds",
            HistId::Delivery => "bundle_relay_delivery_latency_seconds",
            HistId::LimiterWait => "bundle_relay_limiter_wait_seconds",
            HistId::UpstreamRtt(_) => "bundle_relay_upstream_round_trip_seconds",
        }
    }
}
