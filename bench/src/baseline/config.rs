//! The baseline's configuration: addresses, regions, egress pool, pacing and limits, with the
//! startup checks (including the open-file limit) that refuse a config this machine cannot run.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tonic::transport::Endpoint;

use bundle_relay::jito::INTERVAL_MS_DEFAULT;
pub use bundle_relay::jito::MAINNET_REGIONS;

/// Port of the synthetic engine's listeners (region i at 127.0.0.(11+i)).
pub const ENGINE_PORT: u16 = 10000;
/// Default egress pool: 64 loopback addresses.
pub const DEFAULT_EGRESS: &str = "127.1.0.0/26";
/// Default cap on admitted bundles not yet ended; bounds memory when every pair cools down.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 8192;
/// Default age after which an undelivered bundle is dropped: later than this it misses its slot.
pub const DEFAULT_MAX_AGE_MS: u64 = 2000;
/// Cooldown applied when RESOURCE_EXHAUSTED carries no `Retry after Nms` hint: bundle-relay's.
pub const DEFAULT_RETRY_AFTER_MS: u64 = bundle_relay::grpc::RETRY_AFTER_MS_DEFAULT;
/// Intake connections budgeted in the file-descriptor check (bots keep few, long connections).
pub const DEFAULT_INTAKE_CONNECTIONS_MAX: usize = 1024;
/// Descriptors beyond pairs and intake: listeners, epoll, eventfds, stdio, the admin port.
pub const FD_SLACK: usize = 64;
/// Largest egress pool accepted from one CIDR, to catch a mistyped prefix (a /8) early.
pub const EGRESS_ADDRESSES_MAX: usize = 1 << 16;
/// HTTP/2 PING interval on upstream connections: conservative, well above any server's
/// too-many-pings threshold, frequent enough to notice a dead peer within a minute.
pub const H2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a PING may go unanswered before the connection is closed.
pub const H2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP connect timeout for one upstream connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Everything the baseline relay needs to start.
#[derive(Debug, Clone)]
pub struct BaselineConfig {
    /// The rotating port: each bundle goes to the region that can send soonest.
    pub rotating_addr: SocketAddr,
    /// Region i's pinned port is this address with port + i (port 0: any free port each).
    pub pinned_base: SocketAddr,
    /// `GET /stats` listener; `None` disables it.
    pub admin_addr: Option<SocketAddr>,
    /// Region names and their engine addresses.
    pub regions: Vec<(String, SocketAddr)>,
    /// Egress (local source) addresses; one connection per (address, region).
    pub egress: Vec<IpAddr>,
    /// One send per interval per (egress address, region).
    pub interval_ms: u64,
    pub max_in_flight: usize,
    pub max_age_ms: u64,
    pub default_retry_after_ms: u64,
    /// Connect every pair at startup instead of on first use.
    pub connect_at_startup: bool,
    pub intake_connections_max: usize,
    /// How long shutdown waits for in-flight bundles.
    pub drain_ms: u64,
    /// Record every limiter decision (tests and diagnostics; grows without bound).
    pub journal: bool,
}

impl Default for BaselineConfig {
    fn default() -> Self {
        BaselineConfig {
            rotating_addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            pinned_base: SocketAddr::from(([127, 0, 0, 1], 8081)),
            admin_addr: Some(SocketAddr::from(([127, 0, 0, 1], 9101))),
            regions: default_regions(),
            egress: parse_egress(DEFAULT_EGRESS).expect("the default egress range parses"),
            interval_ms: INTERVAL_MS_DEFAULT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_age_ms: DEFAULT_MAX_AGE_MS,
            default_retry_after_ms: DEFAULT_RETRY_AFTER_MS,
            connect_at_startup: false,
            intake_connections_max: DEFAULT_INTAKE_CONNECTIONS_MAX,
            drain_ms: DEFAULT_MAX_AGE_MS + 500,
            journal: false,
        }
    }
}

/// The mainnet names at the synthetic engine's default addresses, 127.0.0.(11+i):10000.
pub fn default_regions() -> Vec<(String, SocketAddr)> {
    MAINNET_REGIONS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            (
                name.to_string(),
                SocketAddr::from(([127, 0, 0, 11 + i as u8], ENGINE_PORT)),
            )
        })
        .collect()
}

/// A config problem, named precisely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl BaselineConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |m: String| Err(ConfigError(m));
        if self.regions.is_empty() {
            return err("no regions configured".into());
        }
        if self.egress.is_empty() {
            return err("no egress addresses configured".into());
        }
        if self.interval_ms == 0 {
            return err("interval_ms must be at least 1".into());
        }
        if self.max_in_flight == 0 || self.max_in_flight > SEMAPHORE_PERMITS_MAX {
            return err(format!(
                "max_in_flight must be 1..={SEMAPHORE_PERMITS_MAX}, got {}",
                self.max_in_flight
            ));
        }
        if self.max_age_ms == 0 {
            return err("max_age_ms must be at least 1".into());
        }
        for (i, (name, _)) in self.regions.iter().enumerate() {
            if self.regions[..i].iter().any(|(n, _)| n == name) {
                return err(format!("region {name} is configured twice"));
            }
        }
        if self.pinned_base.port() != 0
            && self.pinned_base.port() as usize + self.regions.len() > 65536
        {
            return err(format!(
                "pinned ports {}+{} run past 65535",
                self.pinned_base.port(),
                self.regions.len()
            ));
        }
        Ok(())
    }

    /// Region i's pinned intake address.
    pub fn pinned_addr(&self, i: usize) -> SocketAddr {
        let mut addr = self.pinned_base;
        if addr.port() != 0 {
            addr.set_port(addr.port() + i as u16);
        }
        addr
    }

    /// Upstream connections: one per (egress address, region).
    pub fn pairs(&self) -> usize {
        self.egress.len() * self.regions.len()
    }

    /// File descriptors this config needs at most.
    pub fn fds_needed(&self) -> usize {
        self.pairs() + self.intake_connections_max + FD_SLACK
    }
}

/// Tokio's semaphore holds at most this many permits.
const SEMAPHORE_PERMITS_MAX: usize = tokio::sync::Semaphore::MAX_PERMITS;

/// Raises the soft RLIMIT_NOFILE to the hard one and refuses a config that needs more.
pub fn check_nofile(cfg: &BaselineConfig) -> Result<(), ConfigError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(ConfigError(format!(
            "getrlimit(RLIMIT_NOFILE): {}",
            std::io::Error::last_os_error()
        )));
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        }
    }
    nofile_fits(cfg, lim.rlim_cur, lim.rlim_max)
}

/// The decision of `check_nofile`, separated so it can be tested with any limit.
pub fn nofile_fits(cfg: &BaselineConfig, soft: u64, hard: u64) -> Result<(), ConfigError> {
    let needed = cfg.fds_needed() as u64;
    if needed > soft {
        return Err(ConfigError(format!(
            "this config needs {needed} open files ({} upstream connections = {} egress addresses x {} \
             regions, {} intake connections, {FD_SLACK} spare) but RLIMIT_NOFILE is {soft} (hard {hard}); \
             use fewer egress addresses or regions",
            cfg.pairs(),
            cfg.egress.len(),
            cfg.regions.len(),
            cfg.intake_connections_max
        )));
    }
    Ok(())
}

/// The endpoint of one pair: engine address, bound to the egress address.
pub fn endpoint(engine: SocketAddr, egress: IpAddr) -> Endpoint {
    Endpoint::from_shared(format!("http://{engine}"))
        .expect("a socket address is a valid URI authority")
        .local_address(Some(egress))
        .tcp_nodelay(true)
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(H2_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(H2_KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(false)
}

/// Parses an egress list: comma-separated addresses and CIDR ranges (`127.1.0.0/26,10.0.0.5`).
/// A range yields every address in it, network and broadcast included (loopback and bound
/// source addresses have no such distinction).
pub fn parse_egress(list: &str) -> Result<Vec<IpAddr>, ConfigError> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((addr, prefix)) = item.split_once('/') else {
            let ip = item
                .parse::<IpAddr>()
                .map_err(|e| ConfigError(format!("egress {item:?}: not an IP address: {e}")))?;
            out.push(ip);
            continue;
        };
        let ip: IpAddr = addr
            .parse()
            .map_err(|e| ConfigError(format!("egress {item:?}: not an IP address: {e}")))?;
        let prefix: u32 = prefix
            .parse()
            .map_err(|e| ConfigError(format!("egress {item:?}: bad prefix length: {e}")))?;
        let bits = if ip.is_ipv4() { 32 } else { 128 };
        if prefix > bits {
            return Err(ConfigError(format!(
                "egress {item:?}: prefix /{prefix} is longer than {bits} bits"
            )));
        }
        let host_bits = bits - prefix;
        if host_bits > EGRESS_ADDRESSES_MAX.trailing_zeros() {
            return Err(ConfigError(format!(
                "egress {item:?}: /{prefix} holds more than {EGRESS_ADDRESSES_MAX} addresses"
            )));
        }
        let count = 1u128 << host_bits;
        match ip {
            IpAddr::V4(v4) => {
                let base = u32::from(v4) & !((count - 1) as u32);
                out.extend((0..count as u32).map(|k| IpAddr::V4(Ipv4Addr::from(base + k))));
            }
            IpAddr::V6(v6) => {
                let base = u128::from(v6) & !(count - 1);
                out.extend((0..count).map(|k| IpAddr::V6(Ipv6Addr::from(base + k))));
            }
        }
    }
    if out.is_empty() {
        return Err(ConfigError(format!("egress {list:?}: no addresses")));
    }
    let mut seen = std::collections::HashSet::with_capacity(out.len());
    for ip in &out {
        if !seen.insert(*ip) {
            return Err(ConfigError(format!("egress address {ip} is listed twice")));
        }
    }
    Ok(out)
}

/// Parses `name=host:port`.
pub fn parse_engine(s: &str) -> Result<(String, SocketAddr), ConfigError> {
    let (name, addr) = s
        .split_once('=')
        .ok_or_else(|| ConfigError(format!("engine {s:?}: expected name=host:port")))?;
    if name.is_empty() {
        return Err(ConfigError(format!("engine {s:?}: empty region name")));
    }
    let addr = addr
        .parse()
        .map_err(|e| ConfigError(format!("engine {s:?}: {addr:?} is not host:port: {e}")))?;
    Ok((name.to_owned(), addr))
}
