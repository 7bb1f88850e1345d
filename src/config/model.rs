//! What a configuration is: the [`Config`] value and its parts, the defaults the embedded
//! configuration uses, and the arithmetic on it (pairs, file descriptors, the split across
//! threads). Reading and checking files is `schema`'s job, not this file's.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::ops::Range;
use std::path::PathBuf;

use super::error::ConfigError;
use super::token::Token;
use crate::jito::ENGINE_PORT;

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

/// With PINGs off (`ping_idle_ms = 0`) the kernel's keepalive watches idle upstream
/// connections: a probe after this long without a packet from the engine, then one every
/// [`KEEPALIVE_INTERVAL_S`], [`KEEPALIVE_PROBES`] in all. With PINGs on there is no kernel
/// keepalive: a PING is data, so TCP retransmits a lost one, where a lost probe is just lost.
pub const KEEPALIVE_IDLE_S: u64 = 10;
pub const KEEPALIVE_INTERVAL_S: u64 = 1;
pub const KEEPALIVE_PROBES: u32 = 3;
/// The least `tcp_user_timeout_ms` with PINGs off. Once `TCP_USER_TIMEOUT` is set, Linux no
/// longer counts keepalive probes: it ends the connection at the first probe timer that finds
/// a probe unanswered and the user timeout passed since the engine's last packet. A user
/// timeout shorter than the idle time plus every probe would end a healthy connection at its
/// first lost probe.
pub const KEEPALIVE_USER_TIMEOUT_MS_MIN: u64 =
    (KEEPALIVE_IDLE_S + KEEPALIVE_PROBES as u64 * KEEPALIVE_INTERVAL_S) * 1000;

/// Why `tcp_user_timeout_ms` cannot go with `ping_idle_ms`, if it cannot (see
/// [`KEEPALIVE_USER_TIMEOUT_MS_MIN`]); the config's check and a started relay's.
pub fn keepalive_timeout_conflict(ping_idle_ms: u64, tcp_user_timeout_ms: u64) -> Option<String> {
    (ping_idle_ms == 0 && tcp_user_timeout_ms < KEEPALIVE_USER_TIMEOUT_MS_MIN).then(|| {
        format!(
            "must be at least {KEEPALIVE_USER_TIMEOUT_MS_MIN} with egress.ping_idle_ms = 0, got \
             {tcp_user_timeout_ms}: without PINGs the kernel's keepalive watches idle \
             connections ({KEEPALIVE_PROBES} probes {KEEPALIVE_INTERVAL_S} s apart after \
             {KEEPALIVE_IDLE_S} s of silence), and Linux ends a connection once the user timeout \
             has passed with a probe unanswered, so one lost keepalive probe would end a healthy \
             connection; raise egress.tcp_user_timeout_ms or turn PINGs on"
        )
    })
}

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
    /// Sets `egress.slice` (`K/N`).
    pub egress_slice: Option<String>,
    /// The static tenants provider: the tenants are this document (the `[tenants_from]`
    /// endpoint's JSON), fixed for the process's life; the file may then list none.
    pub tenants: Option<String>,
    /// Sets `intake.unready_ms` (`run --unready-ms`), over every reload of the file as well.
    pub unready_ms: Option<u64>,
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
        // Named here, where it was written, not as a `connect` of the file's it never held.
        if port == 0 {
            return Err(format!("{text:?}: port 0 names no engine's port"));
        }
        if addr.port() == 0 {
            return Err(format!(
                "{text:?}: port 0 of \"{addr}\" names nothing to connect to"
            ));
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
    /// How the reactor threads wait (`[reactor]`).
    pub reactor: Reactor,
    /// Bundles may move between threads (`handoffs`, default true): a bundle accepted on one
    /// thread leaves through the thread whose pool can send it soonest, so any connection
    /// reaches the whole pool. Off, each thread sends only what it accepted.
    pub handoffs: bool,
    /// Total in-flight cap, split evenly across threads; default 65,536.
    pub arena_slots: u32,
    /// Bundles older than this are dropped as expired; default 2,000 ms.
    pub bundle_max_age_ms: u64,
    /// Deadline of one SendBundle call; default 1,000 ms.
    pub upstream_timeout_ms: u64,
    /// The record of recent bundles (statuses, `getBundleDelivery`) covers this many seconds at
    /// the pool's full delivery rate; default 300 (Jito's own window), 0: off.
    pub record_keep_s: u32,
    /// ... in at most this many records over all threads; default 1,048,576.
    pub record_bundles_max: u32,
    /// Leader-aware routing (tenants with `rotating = "leader"`).
    pub leader: Leader,
    /// Searcher authentication to every region's engine (`[auth] keypair_file`): its key.
    pub auth: Option<super::keypair::SearcherKey>,
    pub intake: Intake,
    /// 1 to [`crate::limiter::REGIONS_MAX`] regions, names unique.
    pub regions: Vec<Region>,
    pub egress: Egress,
    /// Admin/metrics listener; default 127.0.0.1:9464.
    pub admin: Option<SocketAddr>,
    /// Bearer token every admin endpoint but `/ping` requires (`[admin] token_file`, read at
    /// each load); `Debug` shows it redacted.
    pub admin_token: Option<Token>,
    /// Where `admin_token` was read from, watched for edits as the config file is.
    pub admin_token_file: Option<PathBuf>,
    /// Record metrics (`[admin] metrics`); default true. Read when the relay starts; a reload
    /// keeps the running setting.
    pub metrics: bool,
    /// Who may use the relay and what each may do (`[[tenant]]`, `[default_tenant]`,
    /// `tenants_max`); without them, everyone, everything.
    pub tenants: super::tenants::Tenants,
    /// `[tenants_from]`: the tenants are the document this endpoint serves (polled), not the
    /// file's; `tenants` holds the last good document's.
    pub tenants_from: Option<super::tenants_doc::TenantsFrom>,
    /// `[quota]`: the store that makes tenants' `global_rate` hold across relays; `None`: no
    /// tenant may have one.
    pub quota: Option<super::quota::Quota>,
    /// Things that load but deserve the operator's attention (printed at startup).
    pub warnings: Vec<String>,
}

/// Leader-aware routing: the next leader is asked for once a slot (400 ms) by default.
pub const LEADER_POLL_MS_DEFAULT: u64 = 400;
/// Polls closer than this spend pairs for nothing: a leader holds its turn for 1.6 s.
pub const LEADER_POLL_MS_MIN: u64 = 50;
/// An answer older than three polls is no longer trusted, so a poll far apart is a typo.
pub const LEADER_POLL_MS_MAX: u64 = 60_000;
/// A bundle waits this long at most for a pair of the leader's region.
pub const LEADER_WAIT_MS_DEFAULT: u64 = 20;

/// `[leader]`: how the rotating port's `leader` strategy learns and follows the next Jito
/// leader's region. Live on reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    /// An engine is asked `GetNextScheduledLeader` this often (a call on a pair, paced like
    /// any), while some tenant routes by leader.
    pub poll_ms: u64,
    /// The leader's region takes a bundle when one of its pairs is ready within this; else
    /// the soonest region does.
    pub wait_ms: u64,
}

impl Default for Leader {
    fn default() -> Leader {
        Leader {
            poll_ms: LEADER_POLL_MS_DEFAULT,
            wait_ms: LEADER_WAIT_MS_DEFAULT,
        }
    }
}

/// How a reactor thread waits for work (`[reactor] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReactorMode {
    /// Sleeps in `io_uring_enter` until a completion or its next deadline (the default): a
    /// core is used only while there is work, at the price of a wake-up per burst of events.
    #[default]
    Sleep,
    /// Never sleeps: spins on the completion queue and enters the kernel only to submit or when
    /// the kernel flags completions waiting (`IORING_SQ_TASKRUN`). Each thread keeps its core
    /// 100% busy, idle or not: for cores isolated for the relay (`isolcpus`, `nohz_full`).
    Poll,
}

impl ReactorMode {
    pub const NAMES: &'static str = "\"sleep\" or \"poll\"";

    pub fn name(self) -> &'static str {
        match self {
            ReactorMode::Sleep => "sleep",
            ReactorMode::Poll => "poll",
        }
    }

    pub fn parse(text: &str) -> Option<ReactorMode> {
        match text {
            "sleep" => Some(ReactorMode::Sleep),
            "poll" => Some(ReactorMode::Poll),
            _ => None,
        }
    }
}

impl std::fmt::Display for ReactorMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `[reactor]`: how the reactor threads wait. Fixed until a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reactor {
    pub mode: ReactorMode,
    /// In poll mode, a thread with nothing to do waits in the kernel this long with NAPI busy
    /// polling on (the NIC queues its sockets use are polled instead of waiting for their
    /// interrupts); 0 (the default): it spins in user space. Loopback has no NAPI: a host whose
    /// traffic is all local keeps 0.
    pub napi_busy_poll_us: u32,
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
    /// At SIGTERM or SIGINT, how long the relay keeps serving with `/ping` answering 503
    /// before its listeners close (a load balancer's health checks take it out meanwhile);
    /// default 0. `run --unready-ms` overrides it.
    pub unready_ms: u64,
    /// Proxies (addresses and blocks) whose `X-Forwarded-For` names the client a request is
    /// from, for tenants by address; default none. Live.
    pub trusted_proxies: Vec<super::tenants::Cidr>,
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
    /// The CA (PEM) trusted instead of the bundled web roots, for tests and private engines.
    pub ca_file: Option<PathBuf>,
    /// A digest of `ca_file`'s content as it was read (0 without one): a file rewritten in
    /// place is a change a reload names.
    pub ca_digest: u64,
    /// HTTP/2 `:authority`; default host, plus `:port` unless 443.
    pub authority: String,
    /// Pacing interval per (source, region) pair; default 1,000 ms.
    pub interval_ms: u64,
    /// Sends allowed back to back per interval; default 1.
    pub burst: u32,
    /// Intake listener whose bundles all go to this region.
    pub pinned: Option<SocketAddr>,
    /// The engine's JSON-RPC path for `sendTransaction` (a transaction without `bundleOnly`),
    /// on the same host and connections as its gRPC.
    pub transactions_path: String,
    /// The engine's JSON-RPC path for the bundle-status calls the relay forwards
    /// (`getBundleStatuses`, and `getInflightBundleStatuses` for bundles an engine took or
    /// the asking tenant has no record of).
    pub bundles_path: String,
}

/// The egress pool and how its connections are opened.
#[derive(Debug, Clone, PartialEq)]
pub struct Egress {
    /// Addresses (entries expanded, in order), then SOCKS5 proxies; with a slice, only its
    /// part of them.
    pub sources: Vec<Source>,
    /// `[[egress.group]]` names in file order: group id `i + 1` is `groups[i]`. Id 0 is the
    /// shared addresses, those in no group (and every SOCKS5 proxy). Restart-only: the relay's
    /// limiter lanes and each thread's split of sources are sized by them.
    pub groups: Vec<String>,
    /// The group id of each source, parallel to `sources`. A shorter list (a config built in
    /// code) reads as 0 past its end.
    pub source_group: Vec<u8>,
    /// `egress.slice`: which part of the listed pool this relay owns.
    pub slice: Option<EgressSlice>,
    /// `egress.ledger`: the pacing ledger as a file every relay of the host maps (on tmpfs),
    /// so no (source, region) pair sends early whichever relays use it, across restarts and
    /// overlapping slices; `None`: the process's own, handed only to its successor.
    pub ledger: Option<PathBuf>,
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

pub use super::tenants::SHARED_GROUP;

impl Egress {
    /// The sources that must be this host's own addresses (the rest are SOCKS5 proxies).
    pub fn local_addresses(&self) -> Vec<IpAddr> {
        self.sources
            .iter()
            .filter_map(|s| match s {
                Source::Local(ip) => Some(*ip),
                Source::Socks5 { .. } => None,
            })
            .collect()
    }

    /// The group id of source `i`: 0 past the end of `source_group`, and for an id that
    /// names no group (a config put together in code).
    pub fn group_of(&self, i: usize) -> u8 {
        self.source_group
            .get(i)
            .copied()
            .filter(|&g| usize::from(g) <= self.groups.len())
            .unwrap_or(0)
    }

    /// The name of group `id`: [`SHARED_GROUP`] for 0, else `groups[id - 1]`; an id past the
    /// groups (a table from another generation) reads as `"?"` rather than panicking a log line.
    pub fn group_name(&self, id: u8) -> &str {
        match id {
            0 => SHARED_GROUP,
            id => self.groups.get(id as usize - 1).map_or("?", String::as_str),
        }
    }

    /// This relay's sources per group id (length `groups.len() + 1`, 0 the shared ones).
    pub fn group_counts(&self) -> Vec<usize> {
        let mut counts = vec![0usize; self.groups.len() + 1];
        for i in 0..self.sources.len() {
            counts[usize::from(self.group_of(i))] += 1;
        }
        counts
    }

    /// Thread `t` of `threads`' sources, grouped (see [`thread_share`]).
    pub fn thread_share(&self, threads: usize, t: usize) -> (Vec<usize>, Vec<u32>) {
        let groups: Vec<u8> = (0..self.sources.len()).map(|i| self.group_of(i)).collect();
        thread_share(&groups, self.groups.len(), threads, t)
    }
}

/// This relay's part of a pool that several relays list alike (`egress.slice = "K/N"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EgressSlice {
    /// 1-based.
    pub k: u32,
    pub n: u32,
    /// Index of its first source in the pool as listed.
    pub first: usize,
    /// Sources the pool lists in all.
    pub pool: usize,
}

/// One egress source: a local address to bind, or a SOCKS5 proxy to go through. Equal when
/// every field is, the password included; which source it is, across reloads and in the
/// pacing ledger, is its [`SourceId`], which sets and maps of sources key by (so it has no
/// `Hash` of its own).
#[derive(Clone, PartialEq, Eq)]
pub enum Source {
    Local(IpAddr),
    Socks5 {
        proxy: SocketAddr,
        /// RFC 1929 username and password.
        auth: Option<(String, String)>,
    },
}

/// Which source a [`Source`] is: its address, and for a proxy its username too (each account
/// on a proxy is a source of its own). Never the password: a new password is the same source
/// presenting other credentials, so a reload keeps its pairs and their pacing and the next
/// connects present it; and one proxy and username listed twice is one source listed twice,
/// which would be paced as two while sending as one. Its text is the source's
/// ([`Source`]'s `Display`), which names the pacing ledger's entries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SourceId {
    Local(IpAddr),
    Socks5 {
        proxy: SocketAddr,
        username: Option<String>,
    },
}

impl Source {
    /// See [`SourceId`].
    pub fn id(&self) -> SourceId {
        match self {
            Source::Local(ip) => SourceId::Local(*ip),
            Source::Socks5 { proxy, auth } => SourceId::Socks5 {
                proxy: *proxy,
                username: auth.as_ref().map(|(u, _)| u.clone()),
            },
        }
    }
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
    /// The name its TLS handshakes give the engine: `sni`, else the host (an IPv6 address
    /// without its brackets).
    pub fn server_name(&self) -> &str {
        self.sni
            .as_deref()
            .unwrap_or_else(|| self.host.trim_start_matches('[').trim_end_matches(']'))
    }

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
            .transient()
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
    /// Its intake listeners' ports with their listener index (0 the rotating port, `1 + r`
    /// region `r`'s pinned port), as [`super::tenant_table::TenantTable::build`] takes them.
    pub fn intake_ports(&self) -> Vec<(u16, usize)> {
        let rotating = self.intake.rotating.map(|a| (a.port(), 0));
        let pinned = self
            .regions
            .iter()
            .enumerate()
            .filter_map(|(r, region)| region.pinned.map(|a| (a.port(), 1 + r)));
        rotating.into_iter().chain(pinned).collect()
    }

    /// Its region names, in order.
    pub fn region_names(&self) -> Vec<String> {
        self.regions.iter().map(|r| r.name.clone()).collect()
    }

    /// The tenant table of this config run by a relay started from `running` (its regions,
    /// listeners, arena and egress groups), slots following `previous` as if no thread wrote
    /// any table any more; begun ([`super::tenant_table::TenantTable::begin`]) at once.
    pub fn tenant_table(
        &self,
        running: &Config,
        previous: Option<&super::tenant_table::TenantTable>,
        stats: &crate::metrics::tenants::TenantStats,
    ) -> Result<super::tenant_table::TenantTable, String> {
        let t = self
            .next_tenant_table(running, previous.map(|p| (p, u64::MAX)), stats)
            .map_err(|e| e.why)?;
        t.begin(stats);
        Ok(t)
    }

    /// As [`Config::tenant_table`], `previous` with the oldest generation a thread may still
    /// write (see [`super::tenant_table::TenantTable::build`]), not begun: its publisher
    /// begins it.
    pub fn next_tenant_table(
        &self,
        running: &Config,
        previous: Option<(&super::tenant_table::TenantTable, u64)>,
        stats: &crate::metrics::tenants::TenantStats,
    ) -> Result<super::tenant_table::TenantTable, super::tenant_table::TableError> {
        super::tenant_table::TenantTable::build(
            &self.tenants,
            &self.region_names(),
            &running.region_names(),
            &running.egress.groups,
            &running.intake_ports(),
            running.arena_slots,
            previous,
            stats,
        )
        .map(|t| t.trusting(&self.intake.trusted_proxies))
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
    /// source's pairs for every region belong to its thread. Without egress groups this is
    /// [`Egress::thread_share`]; with them, that is the split (not one run). Panics when
    /// `thread >= threads`.
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

/// With handoffs off a thread sends only what it accepted, so each of `threads` needs a source
/// of every group that has any (group ids `source_group`, 0 the shared addresses, then
/// `groups`): the first group short of that, and why it cannot run, as a load, a start and a
/// reload refuse it.
pub fn group_shortfall(
    source_group: &[u8],
    groups: &[String],
    threads: usize,
) -> Option<(usize, String)> {
    let threads = threads.max(1);
    (0..=groups.len()).find_map(|g| {
        let n = source_group
            .iter()
            .filter(|&&x| usize::from(x) == g)
            .count();
        (n > 0 && n < threads).then(|| {
            let name = g
                .checked_sub(1)
                .map_or(SHARED_GROUP, |i| groups[i].as_str());
            let why = format!(
                "egress group {name} has {n} sources for {threads} threads: with handoffs off \
                 every thread needs one of each group's; list more, use fewer threads, or turn \
                 handoffs on"
            );
            (g, why)
        })
    })
}

/// Thread `t` of `threads`' sources, as indexes into the list whose egress group ids are
/// `source_group` (0 the shared addresses, then `groups` groups): grouped, group 0's first,
/// and how many each group has (`groups + 1` counts). Each group is split with
/// [`even_share`], its larger parts going to the threads after those the group before it gave
/// its larger parts to, so every thread's total is within one of every other's and no thread
/// is left without a source while there are as many sources as threads. With no groups, this
/// is `even_share(sources, threads, t)`: one contiguous run. Panics when `t >= threads`.
pub fn thread_share(
    source_group: &[u8],
    groups: usize,
    threads: usize,
    t: usize,
) -> (Vec<usize>, Vec<u32>) {
    assert!(threads > 0 && t < threads, "thread {t} of {threads}");
    let mut own = Vec::new();
    let mut counts = Vec::with_capacity(groups + 1);
    let mut before = 0usize;
    for g in 0..=groups {
        let members: Vec<usize> = (0..source_group.len())
            .filter(|&i| usize::from(source_group[i]) == g)
            .collect();
        let part = (t + threads - before % threads) % threads;
        let range = even_share(members.len(), threads, part);
        counts.push(range.len() as u32);
        own.extend_from_slice(&members[range]);
        before += members.len();
    }
    (own, counts)
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
