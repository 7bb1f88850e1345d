//! What a demo run is: [`DemoConfig`] (the no-argument run is its `Default`), which relay it
//! measures ([`RelayKind`]), and the open-file budget every bench process lives within. Not how
//! a run is carried out (`step.rs`) nor how a relay is started (`relay.rs`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::baseline::config as bconfig;
use crate::engine::FaultSpec;
pub use crate::fds::FDS_PROCESS_MAX;
use crate::fds::raise_nofile;
use crate::txgen;

/// Files besides connections: std streams, listeners (8 engine regions, 9 relay intakes),
/// epoll and timer fds, the sent log, /proc reads.
pub const FDS_RESERVE: usize = 256;
/// Default egress range: 256 addresses, so 2,048 (address, region) pairs over 8 regions.
pub const EGRESS_DEFAULT: &str = "127.1.0.0/24";
/// Default storm: a quarter of the sources are told to back off 30 s, mid-run. A quarter
/// leaves the default 2,048 pairs about 1,500 sends/s, so the default 1,000/s stays inside
/// capacity and the report shows the back-off honoured rather than an overload; half
/// (`--no-storm --fault storm@5s:fraction=0.5,retry_ms=30000`) leaves ~900/s, below 1,000/s,
/// and the relay then expires bundles.
pub const STORM_FRACTION_DEFAULT: f64 = 0.25;
pub const STORM_RETRY_MS_DEFAULT: u64 = 30_000;
/// A run's errors must stay below this fraction of its requests for its rate to count as
/// sustained ("throughput at < 0.1% errors").
pub const SUSTAINED_ERROR_FRACTION_MAX: f64 = 0.001;
/// A run must also have sent at this share of its offered rate: past saturation the open-loop
/// sender itself falls behind (every request still answered, but late), and that rate was not
/// sustained either.
pub const SUSTAINED_SEND_FRACTION_MIN: f64 = 0.99;
/// Default in-flight cap, the same for both relays: bundle-relay's arena slots, the baseline's
/// semaphore. 4,096 holds two seconds (the max age) of 2,000 bundles/s.
pub const IN_FLIGHT_MAX_DEFAULT: u32 = 4096;

/// Which relay sits between the load and the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelayKind {
    /// The io_uring relay, `bundle_relay::relay`.
    BundleRelay,
    /// The conventional relay, `crate::baseline`.
    Baseline,
}

impl RelayKind {
    /// The name `--relay` takes.
    pub fn name(self) -> &'static str {
        match self {
            RelayKind::BundleRelay => "bundle-relay",
            RelayKind::Baseline => "baseline",
        }
    }
}

impl std::fmt::Display for RelayKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RelayKind {
    type Err = String;
    fn from_str(s: &str) -> Result<RelayKind, String> {
        match s {
            "bundle-relay" => Ok(RelayKind::BundleRelay),
            "baseline" => Ok(RelayKind::Baseline),
            other => Err(format!(
                "unknown relay `{other}` (known: bundle-relay, baseline)"
            )),
        }
    }
}

/// The demo's configuration; `Default` is the no-argument run.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    pub relay: RelayKind,
    /// Requests per second, one step per rate.
    pub rates_per_s: Vec<f64>,
    pub duration_s: f64,
    pub egress: Vec<IpAddr>,
    pub interval_ms: u64,
    /// A storm at each step's middle (`STORM_FRACTION_DEFAULT`, `STORM_RETRY_MS_DEFAULT`).
    pub storm: bool,
    /// Further engine faults, `KIND@START[+DURATION][:k=v,...]`, times from engine start.
    pub faults: Vec<String>,
    pub connections: usize,
    /// Also spread the load's connections over the relay's pinned ports.
    pub pinned: bool,
    pub txs_mix: Vec<(u8, u32)>,
    pub encoding_mix: Vec<(bundle_relay::wire::Encoding, u32)>,
    pub relay_threads: usize,
    /// The relay's in-flight cap (bundle-relay's arena slots, the baseline's semaphore).
    pub in_flight_max: u32,
    pub seed: u64,
    /// Print the live progress lines.
    pub progress: bool,
    /// Run the relay as a child process of this executable (`bench-demo`, which serves it
    /// under [`super::SERVE_RELAY_ARG`]), so its CPU time and memory are its own; `None` runs
    /// it on threads of this process.
    pub relay_exe: Option<std::path::PathBuf>,
    /// TLS between relay and engine (the engine's own CA, production host names as SNI).
    pub tls: bool,
    /// This many of the egress addresses leave through SOCKS5 proxies (run in this process,
    /// each bound to one of those addresses) rather than from the relay directly.
    pub socks5: usize,
    /// bundle-relay records metrics (the default); off, its request path skips them.
    pub metrics: bool,
    /// bundle-relay's bundles may move between threads (the default); off, each thread sends
    /// only what its own connections brought.
    pub handoffs: bool,
    /// bundle-relay serves this many tenants (0: none, everyone allowed); the load is the
    /// one in the middle of the list, by its key ([`super::relay::DEMO_TENANT_KEY`]).
    pub tenants: usize,
    /// bundle-relay runs from a config file (its tenants in it) and, when non-zero, reloads it
    /// this often with one tenant's policy changed each time (0: never).
    pub reload_every_ms: u64,
    /// bundle-relay runs from a config file and this many seconds after it starts reloads it
    /// once with the second half of its egress addresses removed, drained under the load.
    pub egress_cut_at_s: Option<f64>,
    /// bundle-relay routes the rotating port by the next leader (`rotating = "leader"`); the
    /// engine's report counts the bundles that reached the next leader's region.
    pub leader: bool,
    /// bundle-relay's reactor threads poll (`[reactor] mode = "poll"`) instead of sleeping.
    pub reactor_poll: bool,
    /// bundle-relay's process on cores 0..relay_threads, thread i pinned to core i.
    pub pin_relay: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            relay: RelayKind::BundleRelay,
            rates_per_s: vec![1000.0],
            duration_s: 10.0,
            egress: bconfig::parse_egress(EGRESS_DEFAULT).expect("the default egress parses"),
            interval_ms: crate::engine::INTERVAL_MS_DEFAULT,
            storm: true,
            faults: Vec::new(),
            connections: 16,
            pinned: false,
            txs_mix: txgen::parse_txs_mix("1:20,3:60,5:20").expect("literal"),
            encoding_mix: txgen::parse_encoding_mix("base64:50,base58:50").expect("literal"),
            relay_threads: 2,
            in_flight_max: IN_FLIGHT_MAX_DEFAULT,
            seed: 1,
            progress: true,
            relay_exe: None,
            tls: false,
            socks5: 0,
            metrics: true,
            handoffs: true,
            tenants: 0,
            reload_every_ms: 0,
            egress_cut_at_s: None,
            leader: false,
            reactor_poll: false,
            pin_relay: false,
        }
    }
}

impl DemoConfig {
    pub fn regions(&self) -> usize {
        crate::engine::MAINNET_REGIONS.len()
    }

    /// (egress, region) pairs of the whole pool.
    pub fn pairs(&self) -> usize {
        self.egress.len() * self.regions()
    }

    /// Open files the whole process needs: both ends of every (egress, region) connection
    /// (relay and engine share the process), both ends of every load connection, a reserve.
    pub fn fds_needed(&self) -> usize {
        // A proxied pair adds the proxy's two ends (relay side and engine side).
        2 * self.pairs() + 2 * self.socks5 * self.regions() + 2 * self.connections + FDS_RESERVE
    }

    /// Refuses what cannot run, with the reason.
    pub fn validate(&self) -> Result<(), String> {
        if self.rates_per_s.is_empty() || self.rates_per_s.iter().any(|r| r.is_nan() || *r <= 0.0) {
            return Err("rates must be positive".into());
        }
        if self.duration_s.is_nan() || self.duration_s <= 0.0 {
            return Err("duration must be positive".into());
        }
        if self.egress.is_empty() {
            return Err("no egress addresses".into());
        }
        for f in &self.faults {
            f.parse::<FaultSpec>().map_err(|e| e.to_string())?;
        }
        if self.connections == 0 {
            return Err("at least one load connection is needed".into());
        }
        if self.in_flight_max == 0 {
            return Err("the in-flight cap must be at least 1".into());
        }
        if (self.tls || self.socks5 > 0) && self.relay != RelayKind::BundleRelay {
            return Err("--tls and --socks5 need bundle-relay: the baseline speaks neither".into());
        }
        if self.socks5 >= self.egress.len() {
            return Err(format!(
                "--socks5 {} leaves no egress address for the relay's own sources ({} in all)",
                self.socks5,
                self.egress.len()
            ));
        }
        if self.relay == RelayKind::BundleRelay && self.egress.len() < self.relay_threads.max(1) {
            return Err(format!(
                "bundle-relay shares egress addresses between its {} threads: give at least {} \
                 addresses or fewer --relay-threads",
                self.relay_threads, self.relay_threads
            ));
        }
        let need = self.fds_needed();
        let limit = raise_nofile().min(FDS_PROCESS_MAX);
        if need > limit {
            let per_addr = 2 * self.regions();
            let max_egress = (limit.saturating_sub(2 * self.connections + FDS_RESERVE)) / per_addr;
            return Err(format!(
                "{} egress addresses x {} regions need {need} open files in this process \
                 (2 x {} relay-engine pairs + 2 x {} load connections + {FDS_RESERVE} reserve), \
                 over the limit of {limit}: use at most {max_egress} egress addresses",
                self.egress.len(),
                self.regions(),
                self.pairs(),
                self.connections
            ));
        }
        Ok(())
    }
}

/// Parses `--egress` text (addresses and CIDR ranges, comma-separated).
pub fn parse_egress(s: &str) -> Result<Vec<IpAddr>, String> {
    bconfig::parse_egress(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_files_count_both_ends_of_every_connection() {
        let cfg = DemoConfig::default();
        assert_eq!(cfg.egress.len(), 256);
        assert_eq!(cfg.fds_needed(), 2 * 2048 + 2 * 16 + FDS_RESERVE);
        assert!(cfg.fds_needed() <= FDS_PROCESS_MAX);
    }

    #[test]
    fn relay_names_parse_both_ways() {
        for k in [RelayKind::BundleRelay, RelayKind::Baseline] {
            assert_eq!(k.name().parse::<RelayKind>(), Ok(k));
        }
        assert!(
            "nginx"
                .parse::<RelayKind>()
                .unwrap_err()
                .contains("known: bundle-relay, baseline")
        );
    }
}
