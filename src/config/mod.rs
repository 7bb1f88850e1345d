//! The relay's configuration: the schema, its validation, and one immutable snapshot behind an
//! atomic pointer ([`Shared`]) that reactor threads load once per loop iteration.
//!
//! A config is built whole and checked whole before anyone sees it; a reload that fails keeps the
//! last good snapshot serving (availability over freshness), while a bad config at startup refuses
//! to start. Reading the current snapshot is one atomic load (`arc_swap::ArcSwap::load`), no lock.
//!
//! # TOML schema
//!
//! Every key is optional unless marked *required*; unknown keys are errors. Key paths in errors
//! count array indexes from 0 (`region[2].interval_ms`). A listen address may be `"off"`.
//!
//! ```toml
//! threads = 8                  # reactor threads; default: available cores, at most one per
//!                              # egress source (fewer sources than threads is refused)
//! pin_threads = true           # pin thread i to core i
//! arena_slots = 65536          # total in-flight bundles, split evenly across threads
//! bundle_max_age_ms = 2000     # older undelivered bundles are dropped as expired
//! upstream_timeout_ms = 1000   # one SendBundle call
//!
//! [intake]
//! rotating = "127.0.0.1:8080"  # bundles go to the region whose pool can send soonest; or "off"
//! head_bytes_max = 8192
//! body_bytes_max = 65536
//! head_timeout_ms = 5000       # a request head must arrive within this (else 408)
//! idle_timeout_ms = 60000      # a keep-alive connection with nothing to do is closed after it
//! send_timeout_ms = 10000      # answers that make no progress into the socket this long: closed
//! connections_max = 1024       # intake connections per thread
//! connections_per_source_max = 256  # per client address per thread; default connections_max / 4
//!
//! [[region]]                   # 1 to 16 tables
//! name = "frankfurt"           # required; a-z, 0-9, '-', '_'; unique
//! host = "frankfurt.mainnet.block-engine.jito.wtf"   # required
//! port = 443
//! connect = "127.0.0.11:10000" # literal address(es) instead of resolving host (string or array)
//! tls = true                   # default: port == 443
//! sni = "..."                  # TLS server name; default: host
//! ca_file = "ca.pem"           # extra CA (PEM), relative to the config file's folder
//! authority = "..."            # HTTP/2 :authority; default: host, plus ":port" unless 443
//! interval_ms = 1000           # one send per (source, region) per interval ...
//! burst = 1                    # ... with this many back to back
//! pinned = "127.0.0.1:8081"    # intake port whose bundles all go to this region
//!
//! [egress]                     # required: at least one source
//! addresses = ["127.1.0.0/24", "10.0.0.5", "127.1.1.1-127.1.1.9"]
//! socks5 = [{ proxy = "127.0.0.1:1080", username = "u", password = "p" }]
//! connect = "eager"            # "eager": open every pair at startup; "lazy": on first use
//! reconnect_min_ms = 100       # jittered exponential backoff bounds
//! reconnect_max_ms = 30000
//! connect_timeout_ms = 5000
//! handshakes_max = 256         # concurrent connects/handshakes per thread at startup
//! ping_idle_ms = 30000         # HTTP/2 PING after this long without a frame (0: off)
//! ping_timeout_ms = 2000       # a PING unanswered this long closes its connection
//! tcp_user_timeout_ms = 5000   # sent data unacknowledged this long ends the connection
//!
//! [admin]
//! listen = "127.0.0.1:9464"    # admin/metrics listener; or "off"; beyond loopback, a warning
//! token_file = "admin.token"   # bearer token required on all but /ping, relative to the
//!                              # config file's folder; read at every load and reload
//! metrics = true               # record histograms and per-region/method series; false: the
//!                              # request path skips them (and their clock reads), /metrics
//!                              # serves only the accounting counters; read at start only
//! ```
//!
//! Sources are the addresses (in order, each entry expanded) followed by the SOCKS5 proxies. A
//! CIDR block lists every address in it; one address listed twice (in any two entries) is an
//! error, as is a block or range of more than [`SOURCES_MAX`] addresses.
//!
//! Region hosts are resolved at load with the system resolver ([`Resolve::Now`]) unless `connect`
//! gives literal addresses or the host is an IP literal. With [`Resolve::Deferred`] (and in
//! [`Config::embedded_default`]) they are left unresolved — empty [`Region::addrs`] — so a config
//! loads with no network, and [`Region::resolve`] fills them in later.
//!
//! # Costs
//!
//! Loading (parse, expand, validate, and DNS when resolving) is startup and reload work on the
//! admin thread, not benchmarked. The hot path only ever does [`Shared::load`]: one atomic load
//! plus arc-swap's debt-slot bookkeeping, no lock, and no allocation after a thread's first load.

mod egress;
mod error;
mod host;
mod schema;
mod snapshot;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::ops::Range;
use std::path::{Path, PathBuf};

pub use egress::SOURCES_MAX;

use crate::jito::{ENGINE_PORT, MAINNET_DOMAIN, MAINNET_REGIONS};
pub use error::ConfigError;
pub use host::host_addresses;
pub use schema::stranded_sources;
pub use snapshot::{Shared, Snapshot};

/// The embedded default's rotating intake port on 127.0.0.1.
pub const ROTATING_PORT: u16 = 8080;
/// The embedded default's first pinned intake port (8081..8088 for the 8 regions).
pub const PINNED_PORT_FIRST: u16 = 8081;
/// Default admin/metrics port on 127.0.0.1 (Prometheus exporters' customary range).
pub const ADMIN_PORT: u16 = 9464;

/// An idle upstream connection is PINGed after this long without a frame from its engine, so a
/// dead one is found before a bundle is sent into it. Engines that find this too often say so
/// (GOAWAY ENHANCE_YOUR_CALM) and the relay backs off for that region, as gRPC clients do.
pub const PING_IDLE_MS_DEFAULT: u64 = 30_000;
/// A PING unanswered this long ends its connection: an engine a few milliseconds away that
/// cannot answer within two seconds is not serving.
pub const PING_TIMEOUT_MS_DEFAULT: u64 = 2_000;
/// Data sent upstream and not acknowledged by the engine's kernel for this long ends the
/// connection (`TCP_USER_TIMEOUT`), where without it TCP retransmits for many minutes.
pub const TCP_USER_TIMEOUT_MS_DEFAULT: u64 = 5_000;

/// File descriptors kept free beyond pairs, intake, listeners and rings: stdio, the config file
/// during a reload, resolver sockets, admin connections, log files.
pub const FD_SLACK: u64 = 64;

/// How the loader treats region host names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolve {
    /// Resolve every region host now (std `ToSocketAddrs`); a host that does not resolve is an
    /// error naming it.
    Now,
    /// Leave hosts unresolved (empty `addrs`) unless given literally; the relay resolves later.
    Deferred,
}

/// Changes the command line makes to a config file before it is checked: run a production
/// config unchanged against stand-in engines (`--resolve`, `--ca-file`) from local addresses
/// (`--egress`). Each applied override is listed in [`Config::warnings`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `(host, port, address)`: regions dialling `host:port` connect to `address` instead of
    /// resolving it; SNI, certificate checks and `:authority` still use the host name.
    pub resolve: Vec<(String, u16, SocketAddr)>,
    /// Every TLS region trusts only this CA (PEM).
    pub ca_file: Option<PathBuf>,
    /// Replaces `[egress] addresses` (and drops `socks5`) with these entries.
    pub egress: Option<Vec<String>>,
}

impl Overrides {
    /// Parses one `--resolve HOST:PORT:ADDRESS` (ADDRESS an `IP:PORT`, `[IPv6]:PORT` allowed).
    pub fn parse_resolve(text: &str) -> Result<(String, u16, SocketAddr), String> {
        let mut parts = text.splitn(3, ':');
        let (Some(host), Some(port), Some(addr)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!(
                "{text:?}: expected HOST:PORT:ADDRESS, e.g. ny.mainnet.block-engine.jito.wtf:443:127.0.0.15:10000"
            ));
        };
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{text:?}: {port:?} is not a port"))?;
        let addr: SocketAddr = addr
            .parse()
            .map_err(|_| format!("{text:?}: {addr:?} is not an IP:PORT address"))?;
        if host.is_empty() {
            return Err(format!("{text:?}: the host is empty"));
        }
        Ok((host.to_string(), port, addr))
    }
}

/// The whole configuration. Immutable once built; shared through [`Shared`].
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Reactor threads; default: available cores.
    pub threads: usize,
    /// Pin reactor thread i to core i; default true.
    pub pin_threads: bool,
    /// Total in-flight cap, split evenly across threads; default 65,536.
    pub arena_slots: u32,
    /// Bundles older than this are dropped as expired; default 2,000 ms.
    pub bundle_max_age_ms: u64,
    /// Deadline of one SendBundle call; default 1,000 ms.
    pub upstream_timeout_ms: u64,
    pub intake: Intake,
    /// 1 to [`crate::limiter::MAX_REGIONS`] regions, names unique.
    pub regions: Vec<Region>,
    pub egress: Egress,
    /// Admin/metrics listener; default 127.0.0.1:9464.
    pub admin: Option<SocketAddr>,
    /// Bearer token every admin endpoint but `/ping` requires (`[admin] token_file`, read at
    /// each load); `Debug` shows it redacted.
    pub admin_token: Option<crate::admin::Token>,
    /// Record metrics (`[admin] metrics`); default true. Read when the relay starts; a reload
    /// keeps the running setting.
    pub metrics: bool,
    /// Things that load but deserve the operator's attention (printed at startup).
    pub warnings: Vec<String>,
}

/// The HTTP intake: listeners and per-connection limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Intake {
    /// Listener whose bundles go to the region whose pool can send soonest; default 127.0.0.1:8080.
    pub rotating: Option<SocketAddr>,
    /// Request head limit; default 8 KiB.
    pub head_bytes_max: usize,
    /// Request body limit; default 64 KiB.
    pub body_bytes_max: usize,
    /// Time allowed for a request head to arrive; default 5 s.
    pub head_timeout_ms: u64,
    /// An idle keep-alive connection is closed after this; default 60 s.
    pub idle_timeout_ms: u64,
    /// A connection whose answers make no progress into the socket for this long (a client
    /// that never reads) is closed; default 10 s.
    pub send_timeout_ms: u64,
    /// Intake connections per thread; default 1,024.
    pub connections_max: u32,
    /// Intake connections one client address may hold per thread; default a quarter of
    /// `connections_max`.
    pub connections_per_source_max: u32,
}

/// One block-engine region.
#[derive(Debug, Clone, PartialEq)]
pub struct Region {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// Where to connect. Empty means "not resolved yet" (see [`Region::resolve`]).
    pub addrs: Vec<SocketAddr>,
    /// `addrs` were given literally (`connect`, or an IP host): never looked up again.
    pub literal: bool,
    pub tls: bool,
    /// TLS server name override (default: `host`).
    pub sni: Option<String>,
    /// Extra trusted CA (PEM) for tests and private engines.
    pub ca_file: Option<PathBuf>,
    /// HTTP/2 `:authority`; default host, plus `:port` unless 443.
    pub authority: String,
    /// Pacing interval per (source, region) pair; default 1,000 ms.
    pub interval_ms: u64,
    /// Sends allowed back to back per interval; default 1.
    pub burst: u32,
    /// Intake listener whose bundles all go to this region.
    pub pinned: Option<SocketAddr>,
}

/// The egress pool and how its connections are opened.
#[derive(Debug, Clone, PartialEq)]
pub struct Egress {
    /// Addresses (entries expanded, in order), then SOCKS5 proxies.
    pub sources: Vec<Source>,
    pub connect: ConnectMode,
    /// Jittered exponential reconnect backoff bounds; default 100 ms and 30 s.
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    /// One connect (and its handshakes); default 5 s.
    pub connect_timeout_ms: u64,
    /// Concurrent connects/handshakes per thread at startup; default 256.
    pub handshakes_max: u32,
    /// HTTP/2 PING after this long without a frame from the engine (0: off); default 30 s.
    pub ping_idle_ms: u64,
    /// Every PING must be acknowledged within this; default 2 s.
    pub ping_timeout_ms: u64,
    /// `TCP_USER_TIMEOUT` of upstream sockets; default 5 s.
    pub tcp_user_timeout_ms: u64,
}

/// One egress source: a local address to bind, or a SOCKS5 proxy to go through.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Local(IpAddr),
    Socks5 {
        proxy: SocketAddr,
        /// RFC 1929 username and password.
        auth: Option<(String, String)>,
    },
}

impl std::fmt::Debug for Source {
    // The password never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Local(ip) => write!(f, "Local({ip})"),
            Source::Socks5 { proxy, auth: None } => write!(f, "Socks5({proxy})"),
            Source::Socks5 {
                proxy,
                auth: Some((user, _)),
            } => {
                write!(f, "Socks5({user}:<redacted>@{proxy})")
            }
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Local(ip) => write!(f, "{ip}"),
            Source::Socks5 { proxy, auth: None } => write!(f, "socks5://{proxy}"),
            Source::Socks5 {
                proxy,
                auth: Some((user, _)),
            } => write!(f, "socks5://{user}@{proxy}"),
        }
    }
}

/// When pair connections are opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectMode {
    /// Every (source, region) connection at startup, `handshakes_max` at a time per thread.
    Eager,
    /// A pair's connection on its first use.
    Lazy,
}

/// The file descriptors a config needs, term by term (see [`Config::fds_needed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdBudget {
    /// One upstream connection per (source, region) pair.
    pub pairs: u64,
    /// `intake.connections_max` × threads.
    pub intake: u64,
    /// Each thread's own listener per intake address (SO_REUSEPORT).
    pub listeners: u64,
    /// The admin listener.
    pub admin: u64,
    /// One io_uring per thread.
    pub rings: u64,
    /// [`FD_SLACK`].
    pub slack: u64,
}

impl FdBudget {
    pub fn total(&self) -> u64 {
        self.pairs + self.intake + self.listeners + self.admin + self.rings + self.slack
    }
}

impl std::fmt::Display for FdBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pairs + {} intake connections + {} listeners + {} admin + {} rings + {} slack",
            self.pairs, self.intake, self.listeners, self.admin, self.rings, self.slack
        )
    }
}

impl Region {
    /// True once `addrs` holds where to connect.
    pub fn is_resolved(&self) -> bool {
        !self.addrs.is_empty()
    }

    /// Resolves `host:port` with the system resolver when `addrs` is empty; a no-op otherwise.
    /// A host that does not resolve (or resolves to nothing) is an error naming it.
    pub fn resolve(&mut self) -> Result<(), ConfigError> {
        if self.is_resolved() {
            return Ok(());
        }
        let key = format!("region {:?} host", self.name);
        let fail = |why: String| {
            ConfigError::new(
                "<resolve>",
                key.clone(),
                format!("host {:?} does not resolve: {why}", self.host),
            )
        };
        let addrs: Vec<SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| fail(e.to_string()))?
            .collect();
        if addrs.is_empty() {
            return Err(fail("no addresses".into()));
        }
        self.addrs = addrs;
        Ok(())
    }

    /// The default `:authority` for a host and port: the host, plus `:port` unless 443.
    pub fn default_authority(host: &str, port: u16) -> String {
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        if port == ENGINE_PORT {
            host
        } else {
            format!("{host}:{port}")
        }
    }
}

impl Config {
    /// Reads, validates and resolves a config file ([`Resolve::Now`]).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_with(path, Resolve::Now)
    }

    /// Reads and validates a config file, resolving hosts as `resolve` says. Relative `ca_file`
    /// and `token_file` paths are taken relative to the file's folder.
    pub fn load_with(path: &Path, resolve: Resolve) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(&origin, "", format!("cannot read the file: {e}")))?;
        let base = path.parent().unwrap_or(Path::new(""));
        schema::from_toml(&text, &origin, base, resolve)
    }

    /// As [`Config::load_with`], with command-line [`Overrides`] applied before validation.
    pub fn load_overridden(
        path: &Path,
        resolve: Resolve,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(&origin, "", format!("cannot read the file: {e}")))?;
        let base = path.parent().unwrap_or(Path::new(""));
        schema::from_toml_with(&text, &origin, base, resolve, overrides)
    }

    /// Validates TOML text; `origin` names it in errors, relative `ca_file` and `token_file`
    /// paths are taken relative to the current folder.
    pub fn parse(text: &str, origin: &str, resolve: Resolve) -> Result<Config, ConfigError> {
        schema::from_toml(text, origin, Path::new(""), resolve)
    }

    /// Jito mainnet: the 8 regions of [`MAINNET_REGIONS`] over TLS on 443, hosts unresolved (no
    /// network needed to load), pinned intake ports 8081..8088 and rotating 8080 on 127.0.0.1,
    /// admin 127.0.0.1:9464, and egress = this host's own addresses ([`host_addresses`]). With no
    /// such address it falls back to 127.0.0.1, with a warning in [`Config::warnings`].
    pub fn embedded_default() -> Config {
        let mut warnings = Vec::new();
        let sources = match host_addresses() {
            Ok(addrs) if !addrs.is_empty() => addrs.into_iter().map(Source::Local).collect(),
            found => {
                let why = match found {
                    Err(e) => format!("listing interfaces failed: {e}"),
                    Ok(_) => "no interface has a non-loopback address".to_string(),
                };
                warnings.push(format!(
                    "egress: {why}; falling back to 127.0.0.1, which cannot reach Jito's block \
                     engines — give [egress] addresses in a config file"
                ));
                vec![Source::Local(IpAddr::V4(Ipv4Addr::LOCALHOST))]
            }
        };
        let regions = MAINNET_REGIONS
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let host = format!("{name}.{MAINNET_DOMAIN}");
                Region {
                    name: name.to_string(),
                    authority: Region::default_authority(&host, ENGINE_PORT),
                    host,
                    port: ENGINE_PORT,
                    addrs: Vec::new(),
                    literal: false,
                    tls: true,
                    sni: None,
                    ca_file: None,
                    interval_ms: crate::jito::INTERVAL_MS_DEFAULT,
                    burst: schema::BURST_DEFAULT,
                    pinned: Some(SocketAddr::new(
                        IpAddr::V4(Ipv4Addr::LOCALHOST),
                        PINNED_PORT_FIRST + i as u16,
                    )),
                }
            })
            .collect();
        Config {
            threads: schema::default_threads_for(sources.len()),
            pin_threads: true,
            arena_slots: schema::ARENA_SLOTS_DEFAULT,
            bundle_max_age_ms: schema::BUNDLE_MAX_AGE_MS_DEFAULT,
            upstream_timeout_ms: schema::UPSTREAM_TIMEOUT_MS_DEFAULT,
            intake: Intake {
                rotating: Some(SocketAddr::new(
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    ROTATING_PORT,
                )),
                head_bytes_max: schema::HEAD_BYTES_MAX_DEFAULT,
                body_bytes_max: schema::BODY_BYTES_MAX_DEFAULT,
                head_timeout_ms: schema::HEAD_TIMEOUT_MS_DEFAULT,
                idle_timeout_ms: schema::IDLE_TIMEOUT_MS_DEFAULT,
                send_timeout_ms: schema::SEND_TIMEOUT_MS_DEFAULT,
                connections_max: schema::CONNECTIONS_MAX_DEFAULT,
                connections_per_source_max: schema::CONNECTIONS_MAX_DEFAULT
                    / schema::CONNECTIONS_PER_SOURCE_SHARE_DEFAULT,
            },
            regions,
            egress: Egress {
                sources,
                connect: ConnectMode::Eager,
                reconnect_min_ms: schema::RECONNECT_MIN_MS_DEFAULT,
                reconnect_max_ms: schema::RECONNECT_MAX_MS_DEFAULT,
                connect_timeout_ms: schema::CONNECT_TIMEOUT_MS_DEFAULT,
                handshakes_max: schema::HANDSHAKES_MAX_DEFAULT,
                ping_idle_ms: PING_IDLE_MS_DEFAULT,
                ping_timeout_ms: PING_TIMEOUT_MS_DEFAULT,
                tcp_user_timeout_ms: TCP_USER_TIMEOUT_MS_DEFAULT,
            },
            admin: Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), ADMIN_PORT)),
            admin_token: None,
            metrics: true,
            warnings,
        }
    }

    /// Resolves every unresolved region (see [`Region::resolve`]); errors name the region.
    pub fn resolve(&mut self) -> Result<(), ConfigError> {
        for (i, region) in self.regions.iter_mut().enumerate() {
            region.resolve().map_err(|mut e| {
                e.key = format!("region[{i}].host");
                e
            })?;
        }
        Ok(())
    }

    /// True when every region has addresses to connect to.
    pub fn is_resolved(&self) -> bool {
        self.regions.iter().all(Region::is_resolved)
    }

    /// (source, region) pairs: sources × regions.
    pub fn pairs(&self) -> usize {
        self.egress.sources.len() * self.regions.len()
    }

    /// Intake listening addresses: the rotating one, then each region's pinned one.
    pub fn intake_listeners(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.intake
            .rotating
            .into_iter()
            .chain(self.regions.iter().filter_map(|r| r.pinned))
    }

    /// The file descriptors this config needs, term by term.
    pub fn fd_budget(&self) -> FdBudget {
        let threads = self.threads as u64;
        FdBudget {
            pairs: self.pairs() as u64,
            intake: self.intake.connections_max as u64 * threads,
            listeners: self.intake_listeners().count() as u64 * threads,
            admin: self.admin.is_some() as u64,
            rings: threads,
            slack: FD_SLACK,
        }
    }

    /// Total file descriptors needed: one per pair + intake `connections_max` × threads + one
    /// listener per intake address per thread + admin + one ring per thread + [`FD_SLACK`].
    pub fn fds_needed(&self) -> u64 {
        self.fd_budget().total()
    }

    /// The sources thread `thread` owns, as indexes into `egress.sources`: [`even_share`]. A
    /// source's pairs for every region belong to its thread. Panics when `thread >= threads`.
    pub fn per_thread_sources(&self, thread: usize) -> Range<usize> {
        assert!(thread < self.threads, "thread {thread} of {}", self.threads);
        even_share(self.egress.sources.len(), self.threads, thread)
    }

    /// Arena slots thread `thread` owns: the same even split as sources.
    pub fn per_thread_arena_slots(&self, thread: usize) -> u32 {
        assert!(thread < self.threads, "thread {thread} of {}", self.threads);
        even_share(self.arena_slots as usize, self.threads, thread).len() as u32
    }
}

/// Why `threads` reactor threads cannot share `sources` egress sources (fewer sources than
/// threads): a thread sends only through the pairs it owns, so a thread without a source would
/// answer bundles it can never send.
pub fn too_few_sources(sources: usize, threads: usize) -> String {
    format!(
        "{threads} threads but {sources} egress sources: each thread sends only through the \
         sources it owns, so {} threads would own none; give at least one source per thread, or \
         set threads = {sources}",
        threads - sources
    )
}

/// Part `i` of `total` things split into `parts` contiguous runs as evenly as they go: the
/// first `total % parts` runs take one more. The one split of sources and arena slots across
/// reactor threads: with `total >= parts` every part is non-empty.
pub fn even_share(total: usize, parts: usize, i: usize) -> Range<usize> {
    assert!(parts > 0 && i < parts, "part {i} of {parts}");
    let (base, extra) = (total / parts, total % parts);
    let start = i * base + i.min(extra);
    start..start + base + usize::from(i < extra)
}
