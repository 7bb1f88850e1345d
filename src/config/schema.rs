//! The TOML file's shape (serde, unknown keys denied) and its translation into a checked
//! [`Config`]: defaults, limits, expansion, and every cross-field rule.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::egress::{self, AddrRange, SOURCES_MAX};
use super::error::{ConfigError, line_column};
use super::model::{
    ADMIN_PORT, Config, ConnectMode, Egress, EgressSlice, Intake, LEADER_POLL_MS_DEFAULT,
    LEADER_POLL_MS_MAX, LEADER_POLL_MS_MIN, LEADER_WAIT_MS_DEFAULT, Leader, Overrides,
    PING_IDLE_MS_DEFAULT, PING_TIMEOUT_MS_DEFAULT, ROTATING_PORT, Reactor, ReactorMode, Region,
    Resolve, SHARED_GROUP, Source, SourceId, TCP_USER_TIMEOUT_MS_DEFAULT, even_share,
    keepalive_timeout_conflict, too_few_sources,
};
use super::tenants::Cidr;
use super::token::{TOKEN_BYTES_MAX, Token};
use crate::limiter::{LANES_MAX, REGIONS_MAX};
use crate::wire::{BASE58_LEN_MAX, BUNDLE_TXS_MAX};

pub const ARENA_SLOTS_DEFAULT: u32 = 65_536;
/// Each slot costs `arena::SLOT_BYTES` (~6 KiB) at startup; 2^22 slots is ~25 GiB, past which a
/// value is a typo rather than a plan.
pub const ARENA_SLOTS_MAX: u32 = 1 << 22;
pub const BUNDLE_MAX_AGE_MS_DEFAULT: u64 = 2_000;
/// A transaction's blockhash expires after 150 slots (about 60 s): older bundles cannot land.
pub const BUNDLE_MAX_AGE_MS_MAX: u64 = 60_000;
pub const UPSTREAM_TIMEOUT_MS_DEFAULT: u64 = 1_000;
/// Past the bundle age limit no answer is still useful.
pub const UPSTREAM_TIMEOUT_MS_MAX: u64 = 60_000;
/// Per-thread tables are sized by thread; more threads than this is a typo.
pub const THREADS_MAX: usize = 1024;

pub const HEAD_BYTES_MAX_DEFAULT: usize = 8 * 1024;
/// A head must hold the request line and a few headers.
pub const HEAD_BYTES_MIN: usize = 256;
/// Heads are read into fixed per-connection buffers.
pub const HEAD_BYTES_LIMIT: usize = 64 * 1024;
pub const BODY_BYTES_MAX_DEFAULT: usize = 64 * 1024;
/// The largest valid sendBundle: 5 base58 transactions, quoted and comma-separated, plus the
/// JSON-RPC envelope. A smaller limit would refuse valid bundles.
pub const BODY_BYTES_MIN: usize = BUNDLE_TXS_MAX * (BASE58_LEN_MAX + 3) + 256;
/// Bodies are read into fixed per-connection buffers.
pub const BODY_BYTES_LIMIT: usize = 1024 * 1024;
pub const HEAD_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// A head that takes over a minute to arrive is a client holding a slot, not a slow network.
pub const HEAD_TIMEOUT_MS_MAX: u64 = 60_000;
pub const IDLE_TIMEOUT_MS_DEFAULT: u64 = 60_000;
/// Bots keep connections warm every few seconds; an hour of silence is a dead peer.
pub const IDLE_TIMEOUT_MS_MAX: u64 = 3_600_000;
pub const SEND_TIMEOUT_MS_DEFAULT: u64 = crate::http1::SEND_TIMEOUT_MS_DEFAULT;
/// An answer nobody reads for a minute pins a slot for nothing.
pub const SEND_TIMEOUT_MS_MAX: u64 = 60_000;
/// The units give a stop 15 s (`TimeoutStopSec=`), which the default drain (5 s) and this
/// much unready time fit in; the relay asks for more when its stop needs it
/// (`EXTEND_TIMEOUT_USEC=`, `notify`). A load balancer takes a relay out within a few health
/// checks: longer only delays every stop.
pub const UNREADY_MS_MAX: u64 = 9_000;
pub const CONNECTIONS_MAX_DEFAULT: u32 = 1_024;
/// Per-thread connection tables are allocated at startup.
pub const CONNECTIONS_MAX_LIMIT: u32 = 65_536;
/// One source address may hold at most this share of a thread's connection table by default,
/// so a single misbehaving host cannot lock every other client out.
pub const CONNECTIONS_PER_SOURCE_SHARE_DEFAULT: u32 = 4;
/// Every request from a trusted proxy is matched against each entry: a few blocks of a
/// site's proxies, not a list of hosts.
pub const TRUSTED_PROXIES_MAX: usize = 64;

/// Jito's rule is one send per second; a pair that may send less than once an hour is a typo.
/// The bound also keeps every interval far inside the limiter's tick arithmetic.
pub const INTERVAL_MS_MAX: u64 = 3_600_000;
pub const BURST_DEFAULT: u32 = 1;
/// Jito's rule is 1 per interval; a burst in the thousands is a typo.
pub const BURST_MAX: u32 = 1_000;
/// Region names become metric labels and log fields.
pub const REGION_NAME_BYTES_MAX: usize = 32;

pub const RECONNECT_MIN_MS_DEFAULT: u64 = 100;
pub const RECONNECT_MAX_MS_DEFAULT: u64 = 30_000;
/// A pair that waits over ten minutes between attempts might as well be removed from the
/// pool; the bound keeps back-off doubling far from overflow.
pub const RECONNECT_MS_MAX: u64 = 600_000;
pub const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// TCP gives up on a SYN after about two minutes; a connect and handshake that needs more
/// than one will not carry bundles.
pub const CONNECT_TIMEOUT_MS_MAX: u64 = 60_000;
pub const HANDSHAKES_MAX_DEFAULT: u32 = 256;
/// gRPC's own keepalive policy bounds how seldom a PING is useful; beyond it, turn it off (0).
pub const PING_IDLE_MS_MAX: u64 = crate::h2::conn::KEEPALIVE_INTERVAL_MS_POLICY;
/// A PING deadline beyond a minute finds a dead engine long after every call to it failed.
pub const PING_TIMEOUT_MS_MAX: u64 = 60_000;
/// Beyond ten minutes TCP's own retransmission gives up first; below 100 ms a busy host's
/// scheduling delays would end healthy connections.
pub const TCP_USER_TIMEOUT_MS_MIN: u64 = 100;
pub const TCP_USER_TIMEOUT_MS_MAX: u64 = 600_000;
/// More concurrent handshakes than a thread can own pairs is a typo.
pub const HANDSHAKES_MAX_LIMIT: u32 = (SOURCES_MAX * REGIONS_MAX) as u32;
/// Egress group names are log fields and metric labels, as tenant names are.
pub const GROUP_NAME_BYTES_MAX: usize = 64;
/// A request path goes out in every forwarded call's headers; longer is a typo.
const PATH_BYTES_MAX: usize = 256;
/// RFC 1929: username and password are 1 to 255 bytes each.
pub const SOCKS5_FIELD_BYTES_MAX: usize = 255;
/// Read no more of `[admin] token_file` than a token and its surrounding whitespace can take.
const TOKEN_FILE_BYTES_MAX: u64 = TOKEN_BYTES_MAX as u64 + 256;

/// Threads when the config names none: one per available core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Threads when the config names none, for `sources` egress sources: one per available core,
/// but no more than there are sources (a thread sends only through sources it owns).
pub fn default_threads_for(sources: usize) -> usize {
    default_threads().min(sources).max(1)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    threads: Option<usize>,
    pin_threads: Option<bool>,
    handoffs: Option<bool>,
    arena_slots: Option<u32>,
    bundle_max_age_ms: Option<u64>,
    upstream_timeout_ms: Option<u64>,
    record_keep_s: Option<u32>,
    record_bundles_max: Option<u32>,
    intake: Option<FileIntake>,
    #[serde(default)]
    region: Vec<FileRegion>,
    egress: Option<FileEgress>,
    admin: Option<FileAdmin>,
    tenants_max: Option<u16>,
    #[serde(default)]
    tenant: Vec<super::tenants::FileTenant>,
    default_tenant: Option<super::tenants::FilePolicy>,
    tenants_from: Option<super::tenants_doc::FileTenantsFrom>,
    leader: Option<FileLeader>,
    auth: Option<FileAuth>,
    reactor: Option<FileReactor>,
    quota: Option<super::quota::FileQuota>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileReactor {
    mode: Option<String>,
    napi_busy_poll_us: Option<u32>,
}

/// A NAPI busy-poll wait longer than this holds a thread in the kernel past its timers' grain.
pub const NAPI_BUSY_POLL_US_MAX: u32 = 1_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAuth {
    keypair_file: std::path::PathBuf,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileLeader {
    poll_ms: Option<u64>,
    wait_ms: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileIntake {
    rotating: Option<String>,
    head_bytes_max: Option<usize>,
    body_bytes_max: Option<usize>,
    head_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    send_timeout_ms: Option<u64>,
    connections_max: Option<u32>,
    connections_per_source_max: Option<u32>,
    unready_ms: Option<u64>,
    trusted_proxies: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(untagged, expecting = "an \"ip:port\" or a list of them")]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRegion {
    name: String,
    host: String,
    port: Option<u16>,
    connect: Option<OneOrMany>,
    tls: Option<bool>,
    sni: Option<String>,
    ca_file: Option<std::path::PathBuf>,
    authority: Option<String>,
    interval_ms: Option<u64>,
    burst: Option<u32>,
    pinned: Option<String>,
    transactions_path: Option<String>,
    bundles_path: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileEgress {
    #[serde(default)]
    addresses: Vec<String>,
    #[serde(default)]
    socks5: Vec<FileSocks5>,
    slice: Option<String>,
    ledger: Option<String>,
    connect: Option<FileConnect>,
    reconnect_min_ms: Option<u64>,
    reconnect_max_ms: Option<u64>,
    connect_timeout_ms: Option<u64>,
    handshakes_max: Option<u32>,
    ping_idle_ms: Option<u64>,
    ping_timeout_ms: Option<u64>,
    tcp_user_timeout_ms: Option<u64>,
    #[serde(default)]
    group: Vec<FileGroup>,
}

/// One `[[egress.group]]`: some of the pool's addresses, dedicated to the tenants naming it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGroup {
    name: String,
    #[serde(default)]
    addresses: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSocks5 {
    proxy: String,
    username: Option<String>,
    password: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum FileConnect {
    Eager,
    Lazy,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileAdmin {
    listen: Option<String>,
    metrics: Option<bool>,
    token_file: Option<std::path::PathBuf>,
}

/// Collects the origin so every check is one line.
struct Ctx<'a> {
    origin: &'a str,
}

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.origin, key, message)
    }

    fn range<T>(&self, key: &str, value: T, min: T, max: T) -> Result<T, ConfigError>
    where
        T: PartialOrd + std::fmt::Display + Copy,
    {
        if value < min {
            return Err(self.err(key, format!("must be at least {min}, got {value}")));
        }
        if value > max {
            return Err(self.err(key, format!("must be at most {max}, got {value}")));
        }
        Ok(value)
    }

    /// A listen address, or `"off"` for none.
    fn listen(&self, key: &str, text: &str) -> Result<Option<SocketAddr>, ConfigError> {
        if text.trim() == "off" {
            return Ok(None);
        }
        self.socket_addr(key, text).map(Some)
    }

    /// An address the relay dials: port 0 is no listener's.
    fn dial_addr(&self, key: &str, text: &str) -> Result<SocketAddr, ConfigError> {
        let addr = self.socket_addr(key, text)?;
        if addr.port() == 0 {
            return Err(self.err(key, format!("{text:?}: port 0 names nothing to dial")));
        }
        Ok(addr)
    }

    /// An IP address and port (never looked up: listeners and proxies are this host's or
    /// its network's literal addresses); an error says which part is wrong.
    fn socket_addr(&self, key: &str, text: &str) -> Result<SocketAddr, ConfigError> {
        const LIKE: &str = "(like \"127.0.0.1:8080\" or \"[::1]:8080\")";
        let t = text.trim();
        // An IPv6 address and a port written without brackets: the port either makes it no
        // address at all ("::1:10000") or reads as its last group ("::1:8081").
        let unbracketed = t.rsplit_once(':').filter(|(ip, port)| {
            ip.contains(':')
                && ip.parse::<std::net::Ipv6Addr>().is_ok()
                && port.parse::<u16>().is_ok()
                && !port.is_empty()
        });
        t.parse().map_err(|_| {
            let why = if let Some((_, rest)) = t.split_once("://") {
                format!("{text:?} is a URL: write the address alone, {rest:?}")
            } else if let Some((ip, port)) = unbracketed {
                format!("{text:?} is an IPv6 address and a port without brackets: write \"[{ip}]:{port}\"")
            } else if t.parse::<std::net::IpAddr>().is_ok()
                || t.trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok()
            {
                format!("{text:?} has no port {LIKE}")
            } else if t
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
            {
                format!("{text:?} names a host: an IP address is needed here, with its port {LIKE}")
            } else {
                format!("{text:?} is not an address with a port {LIKE}")
            };
            self.err(key, why)
        })
    }
}

/// The parser's "duplicate key" with what was given twice: the key and the table it is in,
/// or the table whose header came twice. `None` for any other message.
fn given_twice(text: &str, message: &str, span: std::ops::Range<usize>) -> Option<String> {
    if message.trim_end() != "duplicate key" {
        return None;
    }
    let name = text.get(span.clone())?.trim().trim_matches(['"', '\'']);
    let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    if text[line_start..].trim_start().starts_with('[') {
        return Some(format!(
            "table [{name}] given twice: list its keys under one [{name}]"
        ));
    }
    // The table the key is in: the last header before it.
    let table = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .and_then(|l| l.split('#').next())
        .map(str::trim_end);
    Some(match table {
        Some(t) => format!("duplicate key `{name}` in {t}: a key is given once per table"),
        None => format!("duplicate key `{name}`: a key is given once per table"),
    })
}

pub fn from_toml(
    text: &str,
    origin: &str,
    base: &Path,
    resolve: Resolve,
) -> Result<Config, ConfigError> {
    from_toml_with(text, origin, base, resolve, &Overrides::default())
}

/// As [`from_toml`], with command-line overrides applied to the file before it is checked, so
/// an overridden config passes the same validation as a written one.
pub fn from_toml_with(
    text: &str,
    origin: &str,
    base: &Path,
    resolve: Resolve,
    overrides: &Overrides,
) -> Result<Config, ConfigError> {
    let toml_error = |key: String, e: toml::de::Error| ConfigError {
        origin: origin.to_string(),
        key,
        message: e
            .span()
            .and_then(|span| given_twice(text, e.message(), span))
            .unwrap_or_else(|| e.message().trim_end().to_string()),
        location: e.span().map(|s| line_column(text, s.start)),
        transient: false,
    };
    let de = toml::Deserializer::parse(text).map_err(|e| toml_error(String::new(), e))?;
    let file: File = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let key = if path == "." { String::new() } else { path };
        toml_error(key, e.into_inner())
    })?;
    let mut file = file;
    let mut notes = Vec::new();
    for (host, port, addr) in &overrides.resolve {
        let mut hit = false;
        for fr in file.region.iter_mut() {
            if fr.host == *host && fr.port.unwrap_or(crate::jito::ENGINE_PORT) == *port {
                fr.connect = Some(OneOrMany::One(addr.to_string()));
                hit = true;
            }
        }
        if !hit {
            return Err(ConfigError::new(
                origin,
                "--resolve",
                format!("{host}:{port} is not the host and port of any region"),
            ));
        }
        notes.push(format!("override: {host}:{port} connects to {addr}"));
    }
    if let Some(ca) = &overrides.ca_file {
        let ca = flag_path(ca);
        for fr in file.region.iter_mut() {
            // Only TLS regions trust a CA; a plaintext one given a ca_file would be refused.
            let port = fr.port.unwrap_or(crate::jito::ENGINE_PORT);
            if fr.tls.unwrap_or(port == crate::jito::ENGINE_PORT) {
                fr.ca_file = Some(ca.clone());
            }
        }
        notes.push(format!("override: TLS regions trust only {}", ca.display()));
    }
    if let Some(entries) = &overrides.egress {
        let fe = file.egress.get_or_insert_with(FileEgress::default);
        fe.addresses = entries.clone();
        fe.socks5.clear();
        notes.push(format!("override: egress addresses {}", entries.join(", ")));
    }
    if let Some(slice) = &overrides.egress_slice {
        file.egress.get_or_insert_with(FileEgress::default).slice = Some(slice.clone());
    }
    if let Some(ms) = overrides.unready_ms {
        file.intake
            .get_or_insert_with(FileIntake::default)
            .unready_ms = Some(ms);
        notes.push(format!("override: intake.unready_ms = {ms} (--unready-ms)"));
    }
    if overrides.tenants.is_some()
        && (!file.tenant.is_empty() || file.default_tenant.is_some() || file.tenants_from.is_some())
    {
        return Err(ConfigError::new(
            origin,
            "--tenants",
            "tenants come from one provider: --tenants gives them and this file lists \
             [[tenant]], [default_tenant] or [tenants_from]; keep one",
        ));
    }
    let file_tenants = !file.tenant.is_empty()
        || file.default_tenant.is_some()
        || file.tenants_from.is_some()
        || overrides.tenants.is_some();
    let mut config =
        build(file, &Ctx { origin }, base, resolve).map_err(|e| blame_override(e, overrides))?;
    // Without tenants every request is the open default's, on the shared addresses: with every
    // source in a group there are none, and every bundle would wait for a pair it has not.
    if !file_tenants && !config.egress.groups.is_empty() && config.egress.group_counts()[0] == 0 {
        return Err(ConfigError::new(
            origin,
            "egress.group",
            format!(
                "every source is in an egress group{} and no tenant is listed: without tenants \
                 every request uses the shared egress addresses, and there are none; list \
                 [[tenant]] tables naming their `egress` group, or leave some addresses out of \
                 the groups",
                super::tenants::slice_phrase(config.egress.slice.map(|s| (s.k, s.n)))
            ),
        ));
    }
    if let Some(doc) = &overrides.tenants {
        config = config.with_tenants_json(doc, "--tenants")?;
        notes.push(format!(
            "override: {} tenants{} from --tenants",
            config.tenants.list.len(),
            if config.tenants.default.is_some() {
                " and a default"
            } else {
                ""
            }
        ));
    }
    config.warnings.extend(notes);
    Ok(config)
}

/// A path given on the command line, as the overrides use it: the shell's, relative to the
/// working directory (not to the config file's folder, as a path written in the file is).
fn flag_path(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// An error about a value a command-line flag put in place of the file's names the flag, not
/// the file: `--egress-slice: "5/4": ...`, `--ca-file: ...`.
fn blame_override(e: ConfigError, overrides: &Overrides) -> ConfigError {
    let flag = if overrides.egress_slice.is_some() && e.key == "egress.slice" {
        "--egress-slice"
    } else if overrides.egress.is_some() && e.key.starts_with("egress.addresses") {
        "--egress"
    } else if overrides.unready_ms.is_some() && e.key == "intake.unready_ms" {
        "--unready-ms"
    } else if let Some(ca) = &overrides.ca_file
        && e.key.starts_with("region[")
        && e.key.ends_with("].ca_file")
        // The flag's own file (a region's written ca_file it did not replace is the file's).
        && e.message.contains(&flag_path(ca).display().to_string())
    {
        "--ca-file"
    } else {
        return e;
    };
    ConfigError {
        origin: flag.to_string(),
        key: String::new(),
        location: None,
        ..e
    }
}

fn build(file: File, cx: &Ctx<'_>, base: &Path, resolve: Resolve) -> Result<Config, ConfigError> {
    let mut warnings = Vec::new();
    // Egress first: the default thread count depends on how many sources there are.
    let egress = build_egress(cx, file.egress.unwrap_or_default())?;
    let threads = match file.threads {
        None => default_threads_for(egress.sources.len()),
        Some(t) => {
            let t = cx.range("threads", t, 1, THREADS_MAX)?;
            if egress.sources.len() < t {
                return Err(cx.err("threads", too_few_sources(egress.sources.len(), t)));
            }
            t
        }
    };
    let arena_slots = cx.range(
        "arena_slots",
        file.arena_slots.unwrap_or(ARENA_SLOTS_DEFAULT),
        1,
        ARENA_SLOTS_MAX,
    )?;
    if (arena_slots as usize) < threads {
        return Err(cx.err(
            "arena_slots",
            format!(
                "must be at least threads ({threads}) so each thread has a slot, got {arena_slots}"
            ),
        ));
    }
    let bundle_max_age_ms = cx.range(
        "bundle_max_age_ms",
        file.bundle_max_age_ms.unwrap_or(BUNDLE_MAX_AGE_MS_DEFAULT),
        1,
        BUNDLE_MAX_AGE_MS_MAX,
    )?;
    let upstream_timeout_ms = cx.range(
        "upstream_timeout_ms",
        file.upstream_timeout_ms
            .unwrap_or(UPSTREAM_TIMEOUT_MS_DEFAULT),
        1,
        UPSTREAM_TIMEOUT_MS_MAX,
    )?;
    let file_reactor = file.reactor.unwrap_or_default();
    let reactor = Reactor {
        mode: match file_reactor.mode.as_deref() {
            None => ReactorMode::Sleep,
            Some(text) => ReactorMode::parse(text).ok_or_else(|| {
                cx.err(
                    "reactor.mode",
                    format!("must be {}, got {text:?}", ReactorMode::NAMES),
                )
            })?,
        },
        napi_busy_poll_us: cx.range(
            "reactor.napi_busy_poll_us",
            file_reactor.napi_busy_poll_us.unwrap_or(0),
            0,
            NAPI_BUSY_POLL_US_MAX,
        )?,
    };
    if reactor.napi_busy_poll_us > 0 && reactor.mode != ReactorMode::Poll {
        return Err(cx.err(
            "reactor.napi_busy_poll_us",
            "applies in mode = \"poll\" only (a sleeping thread is woken by interrupts)",
        ));
    }
    let file_leader = file.leader.unwrap_or_default();
    let leader = Leader {
        poll_ms: cx.range(
            "leader.poll_ms",
            file_leader.poll_ms.unwrap_or(LEADER_POLL_MS_DEFAULT),
            LEADER_POLL_MS_MIN,
            LEADER_POLL_MS_MAX,
        )?,
        wait_ms: file_leader.wait_ms.unwrap_or(LEADER_WAIT_MS_DEFAULT),
    };
    if leader.wait_ms >= bundle_max_age_ms {
        return Err(cx.err(
            "leader.wait_ms",
            format!(
                "must be below bundle_max_age_ms ({bundle_max_age_ms}), got {}: a bundle \
                 waiting that long for the leader's region would expire instead of going to \
                 another",
                leader.wait_ms
            ),
        ));
    }
    let record_keep_s = cx.range(
        "record_keep_s",
        file.record_keep_s.unwrap_or(crate::journal::KEEP_S_DEFAULT),
        0,
        crate::journal::KEEP_S_MAX,
    )?;
    let record_bundles_max = cx.range(
        "record_bundles_max",
        file.record_bundles_max
            .unwrap_or(crate::journal::RECORDS_MAX_DEFAULT),
        1,
        crate::journal::RECORDS_MAX_LIMIT,
    )?;

    let fi = file.intake.unwrap_or_default();
    let connections_max = cx.range(
        "intake.connections_max",
        fi.connections_max.unwrap_or(CONNECTIONS_MAX_DEFAULT),
        1,
        CONNECTIONS_MAX_LIMIT,
    )?;
    let intake = Intake {
        rotating: match &fi.rotating {
            Some(text) => cx.listen("intake.rotating", text)?,
            None => Some(SocketAddr::from(([127, 0, 0, 1], ROTATING_PORT))),
        },
        head_bytes_max: cx.range(
            "intake.head_bytes_max",
            fi.head_bytes_max.unwrap_or(HEAD_BYTES_MAX_DEFAULT),
            HEAD_BYTES_MIN,
            HEAD_BYTES_LIMIT,
        )?,
        body_bytes_max: cx.range(
            "intake.body_bytes_max",
            fi.body_bytes_max.unwrap_or(BODY_BYTES_MAX_DEFAULT),
            BODY_BYTES_MIN,
            BODY_BYTES_LIMIT,
        )?,
        head_timeout_ms: cx.range(
            "intake.head_timeout_ms",
            fi.head_timeout_ms.unwrap_or(HEAD_TIMEOUT_MS_DEFAULT),
            1,
            HEAD_TIMEOUT_MS_MAX,
        )?,
        idle_timeout_ms: cx.range(
            "intake.idle_timeout_ms",
            fi.idle_timeout_ms.unwrap_or(IDLE_TIMEOUT_MS_DEFAULT),
            1,
            IDLE_TIMEOUT_MS_MAX,
        )?,
        send_timeout_ms: cx.range(
            "intake.send_timeout_ms",
            fi.send_timeout_ms.unwrap_or(SEND_TIMEOUT_MS_DEFAULT),
            1,
            SEND_TIMEOUT_MS_MAX,
        )?,
        connections_max,
        connections_per_source_max: cx.range(
            "intake.connections_per_source_max",
            fi.connections_per_source_max
                .unwrap_or((connections_max / CONNECTIONS_PER_SOURCE_SHARE_DEFAULT).max(1)),
            1,
            connections_max,
        )?,
        unready_ms: cx.range(
            "intake.unready_ms",
            fi.unready_ms.unwrap_or(0),
            0,
            UNREADY_MS_MAX,
        )?,
        trusted_proxies: trusted_proxies(cx, fi.trusted_proxies.as_deref().unwrap_or(&[]))?,
    };

    if file.region.is_empty() {
        return Err(cx.err("region", "at least one [[region]] table is required"));
    }
    if file.region.len() > REGIONS_MAX {
        return Err(cx.err(
            "region",
            format!(
                "at most {REGIONS_MAX} regions are allowed, got {}",
                file.region.len()
            ),
        ));
    }
    let mut regions = Vec::with_capacity(file.region.len());
    for (i, fr) in file.region.into_iter().enumerate() {
        let region = build_region(cx, i, fr, base, resolve)?;
        if let Some(j) = regions.iter().position(|r: &Region| r.name == region.name) {
            return Err(cx.err(
                format!("region[{i}].name"),
                format!("{:?} is already the name of region[{j}]", region.name),
            ));
        }
        // Pacing is per (source, region): two regions at one engine would send it twice an
        // interval from each source.
        for (j, other) in regions.iter().enumerate() {
            if let Some((k, engine)) = same_engine(other, &region) {
                return Err(cx.err(
                    format!("region[{i}].{k}"),
                    format!(
                        "{engine} is region[{j}]'s engine too: each source would send to it once \
                         an interval for each region, more than its rule allows; name each \
                         engine once"
                    ),
                ));
            }
        }
        regions.push(region);
    }

    for (i, r) in regions.iter().enumerate() {
        if let Some(why) = stranded_sources(r, &egress.sources) {
            return Err(cx.err(format!("region[{i}]"), why));
        }
    }
    // The limiter keeps one lane per (group, region), the shared addresses being a group.
    let lanes = (egress.groups.len() + 1) * regions.len();
    if lanes > LANES_MAX {
        return Err(cx.err(
            "egress.group",
            format!(
                "{} egress groups and {} regions need {lanes} limiter lanes ((groups + 1) × \
                 regions, the shared addresses counting as a group); at most {LANES_MAX}: fewer \
                 groups or fewer regions",
                egress.groups.len(),
                regions.len()
            ),
        ));
    }

    let auth = match &file.auth {
        Some(a) => Some(read_keypair(cx, &base.join(&a.keypair_file))?),
        None => None,
    };

    let file_admin = file.admin.unwrap_or_default();
    let metrics = file_admin.metrics.unwrap_or(true);
    let admin = match file_admin.listen {
        Some(text) => cx.listen("admin.listen", &text)?,
        None => Some(SocketAddr::from(([127, 0, 0, 1], ADMIN_PORT))),
    };
    let admin_token_file = file_admin.token_file.as_ref().map(|p| base.join(p));
    let admin_token = match &admin_token_file {
        Some(path) => Some(read_token(cx, path)?),
        None => None,
    };
    if let Some(addr) = admin
        && !addr.ip().to_canonical().is_loopback()
    {
        warnings.push(if admin_token.is_some() {
            format!(
                "admin.listen {addr} is not a loopback address: the admin endpoints are open to \
                 the network, guarded by admin.token_file's bearer token (all but /ping)"
            )
        } else {
            format!(
                "admin.listen {addr} is not a loopback address and admin.token_file is not set: \
                 anyone who can reach it can read metrics and /debug; listen on 127.0.0.1 or set \
                 admin.token_file"
            )
        });
    }

    // Listeners: every intake address and the admin one must be bindable together.
    let mut listeners: Vec<(String, SocketAddr)> = Vec::new();
    listeners.extend(intake.rotating.map(|a| ("intake.rotating".to_string(), a)));
    for (i, r) in regions.iter().enumerate() {
        listeners.extend(r.pinned.map(|a| (format!("region[{i}].pinned"), a)));
    }
    if listeners.is_empty() {
        return Err(cx.err(
            "intake",
            "no intake listener: intake.rotating is \"off\" and no region has `pinned`",
        ));
    }
    listeners.extend(admin.map(|a| ("admin.listen".to_string(), a)));
    for (i, (key, addr)) in listeners.iter().enumerate() {
        for (other_key, other) in &listeners[..i] {
            if clashes(*addr, *other) {
                return Err(cx.err(
                    key.clone(),
                    format!("{addr} clashes with {other_key} ({other}): duplicate listen address"),
                ));
            }
        }
    }

    let names: Vec<String> = regions.iter().map(|r| r.name.clone()).collect();
    let ports: Vec<(String, u16, Option<usize>)> = intake
        .rotating
        .map(|a| ("intake.rotating".to_string(), a.port(), None))
        .into_iter()
        .chain(regions.iter().enumerate().filter_map(|(i, r)| {
            r.pinned
                .map(|a| (format!("region[{i}].pinned"), a.port(), Some(i)))
        }))
        .collect();
    let tenants_from = match file.tenants_from {
        Some(_) if !file.tenant.is_empty() || file.default_tenant.is_some() => {
            return Err(cx.err(
                "tenants_from",
                "tenants come from one provider: this file lists [[tenant]] or \
                 [default_tenant] and names [tenants_from]; keep one",
            ));
        }
        Some(f) => Some(super::tenants_doc::tenants_from(cx.origin, f)?),
        None => None,
    };
    let quota = match file.quota {
        Some(f) => Some(super::quota::quota(cx.origin, f)?),
        None => None,
    };
    let group_sources = egress.group_counts();
    let tenants = super::tenants::build(
        &super::tenants::Frame {
            origin: cx.origin,
            quota: quota.is_some(),
            regions: &names,
            listeners: &ports,
            arena_slots,
            bundle_max_age_ms_max: BUNDLE_MAX_AGE_MS_MAX,
            groups: &egress.groups,
            group_sources: &group_sources,
            slice: egress.slice.map(|s| (s.k, s.n)),
        },
        file.tenants_max,
        file.tenant,
        file.default_tenant,
    )?;

    let handoffs = file.handoffs.unwrap_or(true);
    if !handoffs {
        let groups: Vec<u8> = (0..egress.sources.len())
            .map(|i| egress.group_of(i))
            .collect();
        if let Some((g, why)) = super::model::group_shortfall(&groups, &egress.groups, threads) {
            let key = match g.checked_sub(1) {
                Some(i) => format!("egress.group[{i}].addresses"),
                None => "egress.addresses".to_string(),
            };
            let whose = if file.threads.is_none() {
                " (threads defaults to the cores here)"
            } else {
                ""
            };
            return Err(cx.err(key, format!("{why}{whose}")));
        }
    }

    Ok(Config {
        tenants,
        tenants_from,
        quota,
        threads,
        pin_threads: file.pin_threads.unwrap_or(true),
        reactor,
        handoffs,
        arena_slots,
        bundle_max_age_ms,
        upstream_timeout_ms,
        record_keep_s,
        record_bundles_max,
        leader,
        auth,
        intake,
        regions,
        egress,
        admin,
        admin_token,
        admin_token_file,
        metrics,
        warnings,
    })
}

/// `[intake] trusted_proxies`: each an address or block, none twice, at most
/// [`TRUSTED_PROXIES_MAX`] (every request from a listed peer is matched against them).
fn trusted_proxies(cx: &Ctx<'_>, list: &[String]) -> Result<Vec<Cidr>, ConfigError> {
    if list.len() > TRUSTED_PROXIES_MAX {
        return Err(cx.err(
            "intake.trusted_proxies",
            format!(
                "at most {TRUSTED_PROXIES_MAX} entries are allowed, got {}: list only the \
                 proxies (a host in a listed block can name any client address and has no \
                 per-address share)",
                list.len()
            ),
        ));
    }
    let mut out: Vec<Cidr> = Vec::with_capacity(list.len());
    for (k, text) in list.iter().enumerate() {
        let key = format!("intake.trusted_proxies[{k}]");
        let c = Cidr::parse(text).map_err(|e| cx.err(&key, e))?;
        if let Some(j) = out.iter().position(|o| *o == c) {
            return Err(cx.err(
                &key,
                format!("{text:?} is listed already as intake.trusted_proxies[{j}]"),
            ));
        }
        out.push(c);
    }
    Ok(out)
}

/// Why some of `sources` can never reach region `r`: a local source connects only within its
/// own address family, so a region with no address of that family strands it (a SOCKS5 source
/// connects to its proxy and reaches any family). `None` when every source can reach it, or
/// while the region is unresolved.
pub fn stranded_sources(r: &Region, sources: &[Source]) -> Option<String> {
    if !r.is_resolved() {
        return None;
    }
    let has = |v4: bool| r.addrs.iter().any(|a| a.is_ipv4() == v4);
    for v4 in [true, false] {
        if has(v4) {
            continue;
        }
        let stranded = sources
            .iter()
            .filter(|s| matches!(s, Source::Local(ip) if ip.is_ipv4() == v4))
            .count();
        if stranded > 0 {
            let (family, other) = if v4 {
                ("IPv4", "IPv6")
            } else {
                ("IPv6", "IPv4")
            };
            return Some(format!(
                "{} ({}) has only {other} addresses {:?}, but {stranded} egress sources are \
                 {family}: give the region an {family} address (or `connect`) or remove those \
                 sources",
                r.name, r.host, r.addrs
            ));
        }
    }
    None
}

/// The bearer token in `path`, surrounding whitespace (a trailing newline) trimmed. Errors name
/// the file, never its content.
/// The searcher keypair at `path` (`[auth] keypair_file`), read bounded; the error names the
/// file and what is wrong, never its content.
fn read_keypair(cx: &Ctx<'_>, path: &Path) -> Result<super::keypair::SearcherKey, ConfigError> {
    let key = "auth.keypair_file";
    let bytes = read_bounded(
        path,
        super::keypair::KEYPAIR_FILE_BYTES_MAX,
        "a keypair file",
    )
    .map_err(|why| cx.err(key, format!("{} {why}", path.display())))?;
    let text = String::from_utf8_lossy(&bytes);
    super::keypair::SearcherKey::from_json(&text)
        .map_err(|why| cx.err(key, format!("{}: {why}", path.display())))
}

fn read_token(cx: &Ctx<'_>, path: &Path) -> Result<Token, ConfigError> {
    let key = "admin.token_file";
    let bytes = read_bounded(path, TOKEN_FILE_BYTES_MAX, "a token file")
        .map_err(|why| cx.err(key, format!("{} {why}", path.display())))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| {
        cx.err(
            key,
            format!(
                "{} is not text: it must hold the bearer token",
                path.display()
            ),
        )
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Err(cx.err(
            key,
            format!("{} is empty: it must hold the bearer token", path.display()),
        ));
    }
    Token::new(text).map_err(|why| cx.err(key, format!("{}: {why}", path.display())))
}

/// A CA bundle larger than this is no CA file (the web's whole root set is about 250 KiB).
const CA_FILE_BYTES_MAX: u64 = 4 << 20;

/// Why [`read_plain`] read nothing.
pub(super) enum Unreadable {
    Io(std::io::Error),
    /// A FIFO, a device, a folder: anything but a plain file.
    NotPlain,
    /// Over this many bytes.
    Over(u64),
}

/// The plain file at `path`, refused past `max` bytes.
pub(super) fn read_plain(path: &Path, max: u64) -> Result<Vec<u8>, Unreadable> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Opened without waiting: a FIFO opened for reading would hold the load until someone
    // wrote to it (and a reload with it, and a stop behind the reload). Only a plain file is
    // read: a device could be read without end.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(Unreadable::Io)?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Err(Unreadable::NotPlain);
    }
    let mut out = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut out)
        .map_err(Unreadable::Io)?;
    if out.len() as u64 > max {
        return Err(Unreadable::Over(max));
    }
    Ok(out)
}

/// [`read_plain`], its error phrased after the path (`what` names what the file should be);
/// the error says what was wrong, never the content.
fn read_bounded(path: &Path, max: u64, what: &str) -> Result<Vec<u8>, String> {
    read_plain(path, max).map_err(|e| match e {
        Unreadable::Io(e) => format!("cannot be read: {e}"),
        Unreadable::NotPlain => "is not a plain file".to_string(),
        Unreadable::Over(max) => format!("is over {max} bytes: not {what}"),
    })
}

/// Two listen addresses that cannot both be bound: same port (not 0, which the kernel picks) and
/// the same IP, or one of them the wildcard of the same family, or `[::]`, which on Linux
/// listens on IPv4 too (net.ipv6.bindv6only = 0, the default).
fn clashes(a: SocketAddr, b: SocketAddr) -> bool {
    let v6_any = |s: SocketAddr| s.is_ipv6() && s.ip().is_unspecified();
    a.port() != 0
        && a.port() == b.port()
        && (v6_any(a)
            || v6_any(b)
            || (a.is_ipv4() == b.is_ipv4()
                && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())))
}

/// The address of an IP-literal host (`[..]` allowed for IPv6); empty for a name.
fn addrs_from_host(host: &str, port: u16) -> Vec<SocketAddr> {
    match host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => Vec::new(),
    }
}

/// Whether `b` names an engine `a` names too: where both give addresses (`connect`, or an IP
/// host), one address both connect to; where both go by name, the same host name and port.
/// The key of `b` that says so, and the engine. Addresses a name resolved to are not
/// compared: what DNS answers this moment is no fault of the file's.
fn same_engine(a: &Region, b: &Region) -> Option<(&'static str, String)> {
    if a.literal && b.literal {
        let addr = b.addrs.iter().find(|x| a.addrs.contains(x))?;
        let k = if b.host.parse::<IpAddr>().is_ok() || !addrs_from_host(&b.host, b.port).is_empty()
        {
            "host"
        } else {
            "connect"
        };
        return Some((k, addr.to_string()));
    }
    if a.literal || b.literal {
        return None;
    }
    let name = |r: &Region| {
        r.host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase()
    };
    (name(a) == name(b) && a.port == b.port).then(|| ("host", format!("{}:{}", name(b), b.port)))
}

fn build_region(
    cx: &Ctx<'_>,
    i: usize,
    fr: FileRegion,
    base: &Path,
    resolve: Resolve,
) -> Result<Region, ConfigError> {
    let key = |k: &str| format!("region[{i}].{k}");
    let name = fr.name.trim().to_string();
    if name.is_empty()
        || name.len() > REGION_NAME_BYTES_MAX
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Err(cx.err(
            key("name"),
            format!(
                "{:?}: a region name is 1 to {REGION_NAME_BYTES_MAX} characters of a-z, 0-9, '-' \
                 and '_'",
                fr.name
            ),
        ));
    }
    let host = fr.host.trim().to_string();
    if host.is_empty() || host.contains(char::is_whitespace) || host.contains('/') {
        return Err(cx.err(
            key("host"),
            format!("{:?} is not a host name or address", fr.host),
        ));
    }
    // A colon or brackets make an IPv6 address or nothing: a name with its port can never
    // resolve (and a failed lookup reads as the network's, retried for ever).
    let bracketed = host.starts_with('[') || host.ends_with(']');
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if (bracketed || host.contains(':')) && bare.parse::<std::net::Ipv6Addr>().is_err() {
        return Err(cx.err(
            key("host"),
            format!(
                "{host:?} is not a host name or an IP address (brackets hold an IPv6 address; \
                 a port goes in {})",
                key("port")
            ),
        ));
    }
    let port = fr.port.unwrap_or(crate::jito::ENGINE_PORT);
    if port == 0 {
        return Err(cx.err(key("port"), "must be at least 1, got 0"));
    }
    let tls = fr.tls.unwrap_or(port == crate::jito::ENGINE_PORT);
    if !tls {
        if fr.sni.is_some() {
            return Err(cx.err(key("sni"), "is set but tls is false"));
        }
        if fr.ca_file.is_some() {
            return Err(cx.err(key("ca_file"), "is set but tls is false"));
        }
    }
    if let Some(sni) = &fr.sni
        && (sni.is_empty() || sni.contains(char::is_whitespace))
    {
        return Err(cx.err(key("sni"), format!("{sni:?} is not a server name")));
    }
    // The name every handshake gives the engine: one TLS cannot carry would fail them all.
    let server_name = fr.sni.clone().unwrap_or_else(|| bare.to_string());
    if tls && rustls::pki_types::ServerName::try_from(server_name.clone()).is_err() {
        return Err(cx.err(
            key(if fr.sni.is_some() { "sni" } else { "host" }),
            format!("{server_name:?} is not a DNS name or an IP address, so no TLS handshake can name it"),
        ));
    }
    let mut ca_digest = 0;
    let ca_file = match fr.ca_file {
        Some(path) => {
            let path = base.join(path);
            let pem = read_bounded(&path, CA_FILE_BYTES_MAX, "a CA file")
                .map_err(|why| cx.err(key("ca_file"), format!("{} {why}", path.display())))?;
            // Read here, as at start: a reload that took a file the TLS layer cannot use
            // would leave a relay that cannot start again.
            if let Err(why) = crate::tls::check_ca_pem(&pem) {
                return Err(cx.err(
                    key("ca_file"),
                    format!("{} holds no CA: {why}", path.display()),
                ));
            }
            ca_digest = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                pem.hash(&mut h);
                h.finish()
            };
            Some(path)
        }
        None => None,
    };
    let authority = match fr.authority {
        Some(a) if a.is_empty() || a.contains(char::is_whitespace) => {
            return Err(cx.err(key("authority"), format!("{a:?} is not an authority")));
        }
        Some(a) => a,
        None => Region::default_authority(&host, port),
    };
    let interval_ms = cx.range(
        &key("interval_ms"),
        fr.interval_ms.unwrap_or(crate::jito::INTERVAL_MS_DEFAULT),
        1,
        INTERVAL_MS_MAX,
    )?;
    let burst = cx.range(
        &key("burst"),
        fr.burst.unwrap_or(BURST_DEFAULT),
        1,
        BURST_MAX,
    )?;
    let pinned = match &fr.pinned {
        Some(text) => cx.listen(&key("pinned"), text)?,
        None => None,
    };
    let literal = fr.connect.is_some() || !addrs_from_host(&host, port).is_empty();
    let addrs = match fr.connect {
        Some(connect) => {
            let list = match connect {
                OneOrMany::One(a) => vec![a],
                OneOrMany::Many(list) => list,
            };
            if list.is_empty() {
                return Err(cx.err(key("connect"), "lists no address"));
            }
            let mut addrs = Vec::with_capacity(list.len());
            for (j, text) in list.iter().enumerate() {
                addrs.push(cx.dial_addr(&format!("region[{i}].connect[{j}]"), text)?);
            }
            addrs
        }
        None => addrs_from_host(&host, port),
    };
    let engine_path = |name: &str, given: Option<String>, default: &str| {
        let path = given.unwrap_or_else(|| default.to_string());
        if !path.starts_with('/')
            || path.len() > PATH_BYTES_MAX
            || !path.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(cx.err(
                key(name),
                format!(
                    "{path:?}: a path on the engine's host, starting with '/', at most \
                     {PATH_BYTES_MAX} printable ASCII characters without spaces"
                ),
            ));
        }
        Ok(path)
    };
    let transactions_path = engine_path(
        "transactions_path",
        fr.transactions_path,
        crate::jito::TRANSACTIONS_PATH,
    )?;
    let bundles_path = engine_path("bundles_path", fr.bundles_path, crate::jito::BUNDLES_PATH)?;
    let mut region = Region {
        name,
        host,
        port,
        addrs,
        literal,
        tls,
        sni: fr.sni,
        ca_file,
        ca_digest,
        authority,
        interval_ms,
        burst,
        pinned,
        transactions_path,
        bundles_path,
    };
    if resolve == Resolve::Now {
        region
            .resolve()
            .map_err(|e| cx.err(key("host"), e.message).transient())?;
    }
    Ok(region)
}

/// `[[egress.group]]` over `pool` (the sources as listed, before any slice): the group names
/// in file order and each source's group id (0: in no group; SOCKS5 proxies are never in
/// one). A group's entries are parsed like `egress.addresses` and must all be local addresses
/// of the pool; a source belongs to one group at most. Linear in the pool and the entries: an
/// entry is walked address by address only while each is new to the groups.
fn build_groups(
    cx: &Ctx<'_>,
    file: Vec<FileGroup>,
    pool: &[Source],
) -> Result<(Vec<String>, Vec<u8>), ConfigError> {
    let mut names: Vec<String> = Vec::with_capacity(file.len());
    let mut of = vec![0u8; pool.len()];
    if file.is_empty() {
        return Ok((names, of));
    }
    // Ids are a byte; the limiter's lanes bound them long before that (checked with the
    // regions, once they are known).
    if file.len() >= LANES_MAX {
        return Err(cx.err(
            "egress.group",
            format!(
                "{} egress groups: at most {} (each group and the shared addresses take a \
                 limiter lane per region, {LANES_MAX} lanes in all)",
                file.len(),
                LANES_MAX - 1
            ),
        ));
    }
    let index: HashMap<IpAddr, usize> = pool
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Source::Local(ip) => Some((*ip, i)),
            Source::Socks5 { .. } => None,
        })
        .collect();
    for (g, fg) in file.into_iter().enumerate() {
        let key = |k: &str| format!("egress.group[{g}].{k}");
        let name = fg.name.trim().to_string();
        if name.is_empty()
            || name.len() > GROUP_NAME_BYTES_MAX
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(cx.err(
                key("name"),
                format!(
                    "{:?}: an egress group name is 1 to {GROUP_NAME_BYTES_MAX} characters of \
                     a-z, A-Z, 0-9, '-', '_' and '.'",
                    fg.name
                ),
            ));
        }
        if name == SHARED_GROUP {
            return Err(cx.err(
                key("name"),
                format!(
                    "{SHARED_GROUP:?} names the addresses in no group (the shared ones): choose \
                     another name"
                ),
            ));
        }
        if let Some(j) = names.iter().position(|n| *n == name) {
            return Err(cx.err(
                key("name"),
                format!("{name:?} is already the name of egress.group[{j}]"),
            ));
        }
        if fg.addresses.is_empty() {
            return Err(cx.err(
                key("addresses"),
                format!("group {name:?} lists no address: a group holds some of egress.addresses"),
            ));
        }
        let id = (g + 1) as u8;
        for (j, text) in fg.addresses.iter().enumerate() {
            let key = format!("egress.group[{g}].addresses[{j}]");
            let range = egress::parse_entry(text).map_err(|why| cx.err(&key, why))?;
            for ip in range.iter() {
                let Some(&i) = index.get(&ip) else {
                    let entry = if range.count() == 1 {
                        String::new()
                    } else {
                        format!(" (of {text:?})")
                    };
                    return Err(cx.err(
                        key,
                        format!(
                            "{ip}{entry} is not in the pool: a group's addresses are some of \
                             egress.addresses (as listed, before egress.slice)"
                        ),
                    ));
                };
                match of[i] {
                    0 => of[i] = id,
                    other if other == id => {
                        return Err(cx.err(key, format!("{ip} is listed twice in group {name:?}")));
                    }
                    other => {
                        let o = other as usize - 1;
                        return Err(cx.err(
                            key,
                            format!(
                                "{ip} is in group {:?} (egress.group[{o}]) and in group \
                                 {name:?}: a source belongs to one group at most",
                                names[o]
                            ),
                        ));
                    }
                }
            }
        }
        names.push(name);
    }
    Ok((names, of))
}

/// `K/N` (1 ≤ K ≤ N ≤ the pool's sources, so every slice holds one at least).
fn parse_slice(text: &str, pool: usize) -> Result<(u32, u32), String> {
    let bad = || format!("{text:?}: expected K/N, this relay's part K of N (e.g. \"2/4\")");
    let (k, n) = text.trim().split_once('/').ok_or_else(bad)?;
    let (k, n): (u32, u32) = (
        k.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || k == 0 || k > n {
        return Err(format!("{text:?}: K must be 1 to N, and N at least 1"));
    }
    if n as usize > pool {
        return Err(format!(
            "{text:?}: {n} slices of {pool} sources would leave some relay none"
        ));
    }
    Ok((k, n))
}

fn build_egress(cx: &Ctx<'_>, fe: FileEgress) -> Result<Egress, ConfigError> {
    if fe.addresses.is_empty() && fe.socks5.is_empty() {
        return Err(cx.err(
            "egress",
            "no egress sources: list addresses (egress.addresses) or proxies (egress.socks5)",
        ));
    }
    let mut ranges: Vec<AddrRange> = Vec::with_capacity(fe.addresses.len());
    let mut total: u128 = 0;
    for (i, text) in fe.addresses.iter().enumerate() {
        let range = egress::parse_entry(text)
            .map_err(|why| cx.err(format!("egress.addresses[{i}]"), why))?;
        total += range.count();
        if total > SOURCES_MAX as u128 {
            return Err(cx.err(
                format!("egress.addresses[{i}]"),
                format!(
                    "{text:?} brings the pool to {total} sources; at most {SOURCES_MAX} are allowed"
                ),
            ));
        }
        ranges.push(range);
    }
    if let Some((a, b, addr)) = egress::find_overlap(&ranges) {
        return Err(cx.err(
            format!("egress.addresses[{b}]"),
            format!(
                "{:?} overlaps egress.addresses[{a}] ({:?}) at {addr}: a source may be listed once",
                fe.addresses[b], fe.addresses[a]
            ),
        ));
    }
    let mut sources: Vec<Source> = Vec::with_capacity(total as usize + fe.socks5.len());
    for range in &ranges {
        sources.extend(range.iter().map(Source::Local));
    }
    if sources.len() + fe.socks5.len() > SOURCES_MAX {
        return Err(cx.err(
            "egress.socks5",
            format!(
                "{} addresses and {} proxies exceed {SOURCES_MAX} sources",
                sources.len(),
                fe.socks5.len()
            ),
        ));
    }
    let first_proxy = sources.len();
    let mut seen: HashMap<SourceId, usize> = HashMap::with_capacity(fe.socks5.len());
    for (i, fs) in fe.socks5.into_iter().enumerate() {
        let key = |k: &str| format!("egress.socks5[{i}].{k}");
        let proxy = cx.dial_addr(&key("proxy"), &fs.proxy)?;
        let auth = match (fs.username, fs.password) {
            (None, None) => None,
            (Some(u), Some(p)) => {
                for (k, v) in [("username", &u), ("password", &p)] {
                    if v.is_empty() || v.len() > SOCKS5_FIELD_BYTES_MAX {
                        return Err(cx.err(
                            key(k),
                            format!(
                                "must be 1 to {SOCKS5_FIELD_BYTES_MAX} bytes (RFC 1929), got {}",
                                v.len()
                            ),
                        ));
                    }
                }
                Some((u, p))
            }
            (Some(_), None) => return Err(cx.err(key("password"), "username is set without it")),
            (None, Some(_)) => return Err(cx.err(key("username"), "password is set without it")),
        };
        let source = Source::Socks5 { proxy, auth };
        if let Some(j) = seen.insert(source.id(), i) {
            let why = if sources[first_proxy + j] == source {
                ""
            } else {
                " with another password: a proxy and username are one source"
            };
            return Err(cx.err(
                format!("egress.socks5[{i}]"),
                format!("{source:?} is already listed as egress.socks5[{j}]{why}"),
            ));
        }
        sources.push(source);
    }
    // Groups are read against the pool as listed, before the slice: the relays of a sliced
    // pool share one file, and each keeps the members its slice holds.
    let (groups, mut source_group) = build_groups(cx, fe.group, &sources)?;
    // One relay's share of a pool several relays list alike: the K-th of N contiguous,
    // near-equal parts, so the relays' slices never share a source (issue of pacing one pair
    // from two relays) while their configs stay one file.
    let slice = match &fe.slice {
        None => None,
        Some(text) => {
            let pool = sources.len();
            let (k, n) = parse_slice(text, pool).map_err(|why| cx.err("egress.slice", why))?;
            let mine = even_share(pool, n as usize, k as usize - 1);
            sources = sources.drain(mine.clone()).collect();
            source_group = source_group.drain(mine.clone()).collect();
            Some(EgressSlice {
                k,
                n,
                first: mine.start,
                pool,
            })
        }
    };
    let reconnect_min_ms = cx.range(
        "egress.reconnect_min_ms",
        fe.reconnect_min_ms.unwrap_or(RECONNECT_MIN_MS_DEFAULT),
        1,
        RECONNECT_MS_MAX,
    )?;
    let reconnect_max_ms = cx.range(
        "egress.reconnect_max_ms",
        fe.reconnect_max_ms.unwrap_or(RECONNECT_MAX_MS_DEFAULT),
        1,
        RECONNECT_MS_MAX,
    )?;
    let ping_idle_ms = cx.range(
        "egress.ping_idle_ms",
        fe.ping_idle_ms.unwrap_or(PING_IDLE_MS_DEFAULT),
        0,
        PING_IDLE_MS_MAX,
    )?;
    let tcp_user_timeout_ms = cx.range(
        "egress.tcp_user_timeout_ms",
        fe.tcp_user_timeout_ms
            .unwrap_or(TCP_USER_TIMEOUT_MS_DEFAULT),
        TCP_USER_TIMEOUT_MS_MIN,
        TCP_USER_TIMEOUT_MS_MAX,
    )?;
    if let Some(why) = keepalive_timeout_conflict(ping_idle_ms, tcp_user_timeout_ms) {
        return Err(cx.err("egress.tcp_user_timeout_ms", why));
    }
    if reconnect_max_ms < reconnect_min_ms {
        return Err(cx.err(
            "egress.reconnect_max_ms",
            format!(
                "must be at least egress.reconnect_min_ms ({reconnect_min_ms}), got {reconnect_max_ms}"
            ),
        ));
    }
    let ledger = match fe.ledger.as_deref().map(str::trim) {
        None => None,
        Some(p) if p.starts_with('/') && !p.ends_with('/') => Some(std::path::PathBuf::from(p)),
        Some(p) => {
            return Err(cx.err(
                "egress.ledger",
                format!(
                    "{p:?} is not an absolute file path: the relays sharing a host name one \
                     file on tmpfs, like \"/run/bundle-relay/pacing.ledger\""
                ),
            ));
        }
    };
    Ok(Egress {
        sources,
        groups,
        source_group,
        slice,
        ledger,
        connect: match fe.connect {
            None | Some(FileConnect::Eager) => ConnectMode::Eager,
            Some(FileConnect::Lazy) => ConnectMode::Lazy,
        },
        reconnect_min_ms,
        reconnect_max_ms,
        connect_timeout_ms: cx.range(
            "egress.connect_timeout_ms",
            fe.connect_timeout_ms.unwrap_or(CONNECT_TIMEOUT_MS_DEFAULT),
            1,
            CONNECT_TIMEOUT_MS_MAX,
        )?,
        handshakes_max: cx.range(
            "egress.handshakes_max",
            fe.handshakes_max.unwrap_or(HANDSHAKES_MAX_DEFAULT),
            1,
            HANDSHAKES_MAX_LIMIT,
        )?,
        ping_idle_ms,
        ping_timeout_ms: cx.range(
            "egress.ping_timeout_ms",
            fe.ping_timeout_ms.unwrap_or(PING_TIMEOUT_MS_DEFAULT),
            1,
            PING_TIMEOUT_MS_MAX,
        )?,
        tcp_user_timeout_ms,
    })
}
