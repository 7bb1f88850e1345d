//! One block-engine region as a reactor thread's upstream sees it: its calls' settings, where
//! its connections go, whether its engine went silent, and what of its errors was logged.
//! Plain state; the decisions about it are the upstream's. Its waiting bundles are the
//! dispatcher's.

use std::sync::Arc;

use crate::clock::{Instant, TickRate};
use crate::egress::resolve::HostAddrs;
use crate::egress::transport::TlsTarget;
use crate::grpc::CallConfig;

use super::RegionSpec;
use super::auth::{RegionAuth, Signer};

/// Probes of a silent region: the first soon, then doubling while unanswered.
pub const PROBE_BACKOFF_MS_MIN: u64 = 100;
pub const PROBE_BACKOFF_MS_MAX: u64 = 5_000;

/// A region whose engine throttles everyone gets no call for this long, doubling while it keeps
/// saying so, back to the least once a call is accepted again.
pub const THROTTLE_BACKOFF_MS_MIN: u64 = 100;
pub const THROTTLE_BACKOFF_MS_MAX: u64 = 5_000;

/// The same connection error of one region is logged again at most this often.
pub const ERROR_RELOG_MS: u64 = 10_000;

/// A region whose engine stopped answering: calls went unanswered for the dispatcher's silence
/// threshold with nothing at all received from it meanwhile.
#[derive(Clone, Copy, Debug)]
pub struct Silence {
    pub since: Instant,
    /// When the next probe call may go.
    pub probe_at: Instant,
    /// Back-off between probes, doubling while they go unanswered.
    pub probe_backoff_ms: u64,
    pub probe_in_flight: bool,
}

impl Silence {
    /// Silent since `since`, the first probe due at `now`.
    pub fn new(since: Instant, now: Instant) -> Silence {
        Silence {
            since,
            probe_at: now,
            probe_backoff_ms: PROBE_BACKOFF_MS_MIN,
            probe_in_flight: false,
        }
    }

    /// A probe got no answer: the next waits twice as long.
    pub fn probe_unanswered(&mut self, now: Instant, rate: TickRate) {
        self.probe_in_flight = false;
        self.probe_at = now.after(rate.from_ms(self.probe_backoff_ms));
        self.probe_backoff_ms = (self.probe_backoff_ms * 2).min(PROBE_BACKOFF_MS_MAX);
    }
}

/// See the module docs.
pub struct Region {
    pub name: String,
    pub call: CallConfig,
    /// The engine's JSON-RPC path for a forwarded `sendTransaction`.
    pub transactions_path: String,
    /// The engine's JSON-RPC path for a forwarded bundle-status query.
    pub bundles_path: String,
    pub addrs: Arc<HostAddrs>,
    pub tls: Option<TlsTarget>,
    /// The last error logged for this region and when, so a thousand pairs failing alike log
    /// one line (again after [`ERROR_RELOG_MS`] if it persists).
    logged_error: Option<(String, Instant)>,
    /// A line about this region's first TLS session was logged.
    pub tls_logged: bool,
    /// Its pairs were queued to connect (at start when eager, on its first bundle when lazy).
    pub connect_requested: bool,
    /// When anything last arrived from any of its connections.
    pub last_rx: Instant,
    /// Set while its engine is silent: no bundle is sent until a probe is answered.
    pub silence: Option<Silence>,
    /// HTTP/2 PING after this long without a frame (`None`: off); doubled, up to the gRPC
    /// policy, when the engine says ENHANCE_YOUR_CALM.
    pub keepalive_ms: Option<u64>,
    /// It left the config (a reload) and nothing of it waits any more: its pairs are drained
    /// and stay down until it is listed again.
    pub retired: bool,
    /// Its engine said it throttles everyone: no call goes to it before this.
    pub throttled_until: Instant,
    /// The next region-wide back-off (doubling while throttled).
    pub throttle_backoff_ms: u64,
    /// Searcher authentication to its engine, when configured: no call but the auth service's
    /// goes to it until a token is held.
    pub auth: Option<RegionAuth>,
}

impl Region {
    pub fn new(
        spec: &RegionSpec,
        connect_eagerly: bool,
        ping_idle_ms: u64,
        signer: Option<&Arc<Signer>>,
        now: Instant,
    ) -> Region {
        Region {
            name: spec.name.clone(),
            call: CallConfig::new(
                if spec.tls.is_some() { "https" } else { "http" },
                spec.authority.clone(),
            ),
            transactions_path: spec.transactions_path.clone(),
            bundles_path: spec.bundles_path.clone(),
            addrs: spec.addrs.clone(),
            tls: spec.tls.clone(),
            logged_error: None,
            tls_logged: false,
            connect_requested: connect_eagerly,
            last_rx: now,
            silence: None,
            keepalive_ms: (ping_idle_ms > 0).then_some(ping_idle_ms),
            retired: false,
            throttled_until: Instant(0),
            throttle_backoff_ms: THROTTLE_BACKOFF_MS_MIN,
            auth: signer.map(|s| RegionAuth::new(s.clone())),
        }
    }

    /// Its engine throttles everyone: no call before `now` plus the back-off, which doubles;
    /// returns the back-off applied.
    pub fn throttle(&mut self, now: Instant, rate: TickRate) -> u64 {
        let ms = self.throttle_backoff_ms;
        self.throttled_until = now.after(rate.from_ms(ms));
        self.throttle_backoff_ms = (ms * 2).min(THROTTLE_BACKOFF_MS_MAX);
        ms
    }

    /// A call was accepted: the next throttle starts from the least back-off again.
    pub fn accepted(&mut self) {
        self.throttle_backoff_ms = THROTTLE_BACKOFF_MS_MIN;
    }

    /// Whether an error reading `text` should be logged now: it differs from the last one
    /// logged, or that was [`ERROR_RELOG_MS`] ago. Remembers it when so.
    pub fn error_worth_logging(&mut self, text: &str, now: Instant, rate: TickRate) -> bool {
        let relog = rate.from_ms(ERROR_RELOG_MS);
        let fresh = match &self.logged_error {
            Some((t, at)) => t != text || now.since(*at).0 >= relog.0,
            None => true,
        };
        if fresh {
            self.logged_error = Some((text.to_string(), now));
        }
        fresh
    }
}
