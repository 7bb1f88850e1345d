//! What a reload changes in a running thread: the settings read from a new config that the
//! dispatcher, its pairs and the intake apply between loop iterations. Regions are matched to
//! the running ones by name (a running region the config no longer lists is retired), sources
//! by [`SourceId`] (a running source no longer listed is drained; one whose proxy password
//! changed stays, and its next connects present the new password).
//!
//! What it is NOT: the restart-only part of a config (threads, arena, listeners, regions and
//! sources the relay did not start with), which [`crate::config::Changes`] names and the
//! running relay leaves as it was.

use std::collections::HashMap;

use crate::config::{Config, Source, SourceId};

use super::{RegionSpec, Spec};

/// One running region's pacing under the new config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    pub interval_ms: u64,
    pub burst: u32,
}

/// See the module docs. Built by each thread from the snapshot (off the request path: once
/// per reload).
#[derive(Clone, Debug)]
pub struct Tuning {
    pub bundle_max_age_ms: u64,
    pub upstream_timeout_ms: u64,
    pub head_timeout_ms: u64,
    pub idle_timeout_ms: u64,
    pub send_timeout_ms: u64,
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    pub connect_timeout_ms: u64,
    pub handshakes_max: u32,
    pub ping_idle_ms: u64,
    pub ping_timeout_ms: u64,
    pub tcp_user_timeout_ms: u64,
    pub leader: crate::config::Leader,
    /// Per running region, in the running order: its pace, or `None` when the config no longer
    /// lists it.
    pub regions: Vec<Option<Pace>>,
    /// Every source the config lists, by identity.
    pub sources: HashMap<SourceId, Source>,
    /// The snapshot's tenants, when they are to be applied.
    pub tenants: Option<std::sync::Arc<crate::config::TenantTable>>,
}

impl Tuning {
    /// The settings of `cfg` for a relay running `running` regions.
    pub fn of(cfg: &Config, running: &[RegionSpec]) -> Tuning {
        let e = &cfg.egress;
        Tuning {
            bundle_max_age_ms: cfg.bundle_max_age_ms,
            upstream_timeout_ms: cfg.upstream_timeout_ms,
            head_timeout_ms: cfg.intake.head_timeout_ms,
            idle_timeout_ms: cfg.intake.idle_timeout_ms,
            send_timeout_ms: cfg.intake.send_timeout_ms,
            reconnect_min_ms: e.reconnect_min_ms,
            reconnect_max_ms: e.reconnect_max_ms,
            connect_timeout_ms: e.connect_timeout_ms,
            handshakes_max: e.handshakes_max,
            ping_idle_ms: e.ping_idle_ms,
            ping_timeout_ms: e.ping_timeout_ms,
            tcp_user_timeout_ms: e.tcp_user_timeout_ms,
            leader: cfg.leader,
            regions: running
                .iter()
                .map(|r| {
                    cfg.regions.iter().find(|c| c.name == r.name).map(|c| Pace {
                        interval_ms: c.interval_ms,
                        burst: c.burst.max(1),
                    })
                })
                .collect(),
            sources: e.sources.iter().map(|s| (s.id(), s.clone())).collect(),
            tenants: None,
        }
    }

    /// The settings `spec` starts with: a reload of the same config changes nothing.
    pub fn of_spec(spec: &Spec) -> Tuning {
        Tuning {
            bundle_max_age_ms: spec.bundle_max_age_ms,
            upstream_timeout_ms: spec.upstream_timeout_ms,
            head_timeout_ms: spec.head_timeout_ms,
            idle_timeout_ms: spec.idle_timeout_ms,
            send_timeout_ms: spec.send_timeout_ms,
            reconnect_min_ms: spec.reconnect_min_ms,
            reconnect_max_ms: spec.reconnect_max_ms,
            connect_timeout_ms: spec.connect_timeout_ms,
            handshakes_max: spec.handshakes_max,
            ping_idle_ms: spec.ping_idle_ms,
            ping_timeout_ms: spec.ping_timeout_ms,
            tcp_user_timeout_ms: spec.tcp_user_timeout_ms,
            leader: spec.leader,
            regions: spec
                .regions
                .iter()
                .map(|r| {
                    Some(Pace {
                        interval_ms: r.interval_ms,
                        burst: r.burst.max(1),
                    })
                })
                .collect(),
            sources: spec.sources.iter().map(|s| (s.id(), s.clone())).collect(),
            tenants: Some(spec.tenants.clone()),
        }
    }
}
