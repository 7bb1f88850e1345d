//! The `[[tenant]]` tables and `[default_tenant]`: who may use the relay and what each may do,
//! parsed and checked whole (every rule that spans tenants, regions, listeners and the arena).
//!
//! A tenant is recognised by what Jito's own clients send, so a bot changes nothing but its
//! URL: an API key (`x-jito-auth` header or `uuid` query parameter), else its source address
//! (longest matching CIDR), else the intake port it came to. Keys are kept only as SHA-256
//! digests (plaintext `keys` are hashed at load; `key_sha256` gives digests directly, so the
//! file need not hold a secret) and shown only as a short hash.

use std::net::IpAddr;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::error::ConfigError;
use crate::limiter::REGIONS_MAX;

/// `tenants_max` when the file names none.
pub const TENANTS_MAX_DEFAULT: u16 = 1_024;
/// Per-tenant cells are 128-byte lines allocated at startup ([`crate::metrics::tenants`]); past
/// this a value is a typo (16,384 tenants is 2 MiB).
pub const TENANTS_MAX_LIMIT: u16 = 16_384;
/// Tenant names become metric labels.
pub const TENANT_NAME_BYTES_MAX: usize = 64;
/// An API key is a UUID in Jito's clients; anything longer than this is not a key.
pub const KEY_BYTES_MAX: usize = 128;
/// A request rate above this per second is more than any relay serves: a typo.
pub const RATE_MAX: u32 = 1_000_000;
/// A bundle goes to at most this many regions at once: each copy holds a pair of its region,
/// and past a few the copies only spend the pool.
pub const FAN_OUT_MAX: u8 = 4;
/// The name the default policy is counted under in /metrics (not a tenant name).
pub const DEFAULT_NAME: &str = "default";

/// The policy keys, listed once: `[default_tenant]` is a table of them alone, and each
/// `[[tenant]]` has them beside its own keys in its own struct, not `#[serde(flatten)]`ed in,
/// so a wrong value is reported at its key and line (flattening buffers the table and loses
/// both).
macro_rules! policy_keys {
    ($($key:ident: $ty:ty,)*) => {
        #[derive(Deserialize, Default, Clone)]
        #[serde(deny_unknown_fields)]
        pub(super) struct FilePolicy {
            $($key: Option<$ty>,)*
        }

        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct FileTenant {
            name: String,
            #[serde(default)]
            keys: Vec<String>,
            #[serde(default)]
            key_sha256: Vec<String>,
            #[serde(default)]
            cidrs: Vec<String>,
            #[serde(default)]
            ports: Vec<u16>,
            $($key: Option<$ty>,)*
        }

        impl FileTenant {
            /// Its policy keys, as `[default_tenant]` holds them.
            fn take_policy(&mut self) -> FilePolicy {
                FilePolicy {
                    $($key: self.$key.take(),)*
                }
            }
        }
    };
}

policy_keys! {
    enabled: bool,
    regions: Vec<String>,
    rotating: FileStrategy,
    in_flight_min: u32,
    in_flight_max: u32,
    fan_out: u8,
    rate: u32,
    rate_burst: u32,
    global_rate: u32,
    bundle_max_age_ms: u64,
    egress: String,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum FileStrategy {
    Soonest,
    Ordered,
    Leader,
}

/// How a tenant's bundles on the rotating port pick a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// The region whose pool can send soonest (ties round-robin): the relay's own rule.
    Soonest,
    /// The first region in the tenant's list that can send the bundle within its max age: a
    /// primary and its fallbacks.
    Ordered,
    /// The region whose engine is connected to the next Jito leader (`[leader]`), when it is
    /// one of the tenant's and can send within `leader.wait_ms`; else the soonest.
    Leader,
}

/// A SHA-256 digest of an API key. `Debug` shows its first four bytes only.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyDigest(pub [u8; 32]);

impl KeyDigest {
    pub fn of(key: &[u8]) -> KeyDigest {
        KeyDigest(Sha256::digest(key).into())
    }

    /// The first four bytes in hex: what logs and /debug show of a key.
    pub fn short(&self) -> String {
        self.0[..4].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Debug for KeyDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}…", self.short())
    }
}

/// An address block: the network (host bits zero) and the prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    pub network: IpAddr,
    pub len: u8,
}

impl Cidr {
    /// `a.b.c.d/n`, `x::y/n`, or one address (a /32 or /128).
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let text = text.trim();
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| format!("{text:?} is not an address or CIDR block"))?;
        let bits = if ip.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => bits,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= bits => n,
                _ => return Err(format!("{text:?}: the prefix length must be 0 to {bits}")),
            },
        };
        let network = mask(ip, len);
        if network != ip {
            return Err(format!(
                "{text:?} has host bits set: the block is {network}/{len}"
            ));
        }
        // An IPv4-mapped block is the IPv4 block: a peer is matched by its IPv4 address.
        if let IpAddr::V6(v6) = network
            && let Some(v4) = v6.to_ipv4_mapped()
            && len >= 96
        {
            return Ok(Cidr {
                network: IpAddr::V4(v4),
                len: len - 96,
            });
        }
        Ok(Cidr { network, len })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.network.is_ipv4() && mask(ip, self.len) == self.network
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.len)
    }
}

/// `ip` with all but its first `len` bits zeroed.
pub fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// What one tenant (or the default) may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub enabled: bool,
    /// Indexes into the config's regions, in the tenant's order; empty: all of them (a tenant
    /// naming none), so the policy stays the same when the regions change.
    pub regions: Vec<u8>,
    pub strategy: Strategy,
    /// Rotating-port bundles are sent to this many regions at once (1: one), the strategy's
    /// pick first; counted once, each send in the bundle's record.
    pub fan_out: u8,
    /// Bundles in flight always available to the tenant (reserved in the arena).
    pub in_flight_min: u32,
    /// Bundles in flight the tenant may never exceed (`u32::MAX`: the arena, as it is).
    pub in_flight_max: u32,
    /// Requests (sendBundle, sendTransaction) per second, and how many may come back to back.
    pub rate: Option<(u32, u32)>,
    /// Requests per second across every relay sharing the `[quota]` store.
    pub global_rate: Option<u32>,
    /// `None`: the relay's `bundle_max_age_ms` (following its reloads).
    pub bundle_max_age_ms: Option<u64>,
    /// The `[[egress.group]]` its bundles leave through, by name (resolved against the running
    /// relay's groups when the tenant table is built); `None`: the shared addresses, those in
    /// no group (`egress = "shared"` reads the same).
    pub egress: Option<String>,
}

/// One `[[tenant]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant {
    pub name: String,
    pub keys: Vec<KeyDigest>,
    pub cidrs: Vec<Cidr>,
    /// Intake listener ports whose requests are this tenant's (when no key or CIDR says).
    pub ports: Vec<u16>,
    pub policy: Policy,
}

/// Every tenant, the default policy and the room for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenants {
    /// Listed tenants the relay has state for (restart-only).
    pub max: u16,
    pub list: Vec<Tenant>,
    /// For requests no tenant matches; `None`: they are refused (401). With no tenant listed
    /// and no `[default_tenant]`, everything is allowed (the relay without tenants).
    pub default: Option<Policy>,
}

impl Tenants {
    /// No tenant, everything allowed: `regions` all, the whole arena, no rate.
    pub fn open() -> Tenants {
        Tenants {
            max: TENANTS_MAX_DEFAULT,
            list: Vec::new(),
            default: Some(Policy::open()),
        }
    }
}

impl Policy {
    /// Everything allowed: all regions, the whole arena, no rate, the relay's max age.
    pub fn open() -> Policy {
        Policy {
            enabled: true,
            regions: Vec::new(),
            strategy: Strategy::Soonest,
            fan_out: 1,
            in_flight_min: 0,
            in_flight_max: u32::MAX,
            rate: None,
            global_rate: None,
            bundle_max_age_ms: None,
            egress: None,
        }
    }
}

/// The name of the egress addresses in no group: a tenant with no `egress` key leaves
/// through them.
pub const SHARED_GROUP: &str = "shared";

/// ` (this relay's slice K/N)` for a sliced relay's messages, else nothing.
pub(super) fn slice_phrase(slice: Option<(u32, u32)>) -> String {
    match slice {
        Some((k, n)) => format!(" (this relay's slice {k}/{n})"),
        None => String::new(),
    }
}

/// What the tenant rules are checked against.
pub(super) struct Frame<'a> {
    pub origin: &'a str,
    pub regions: &'a [String],
    /// Every intake listener's port, with its key for messages and, for a pinned port, its
    /// region's index.
    pub listeners: &'a [(String, u16, Option<usize>)],
    pub arena_slots: u32,
    pub bundle_max_age_ms_max: u64,
    /// The egress group names, group id `i + 1` being `groups[i]`.
    pub groups: &'a [String],
    /// This relay's sources per group id, 0 the shared addresses (the egress config's
    /// `group_counts`).
    pub group_sources: &'a [usize],
    /// `egress.slice` as (K, N), named when a group has no source in this relay's part.
    pub slice: Option<(u32, u32)>,
    /// `[quota]` is set: a policy may have a `global_rate`.
    pub quota: bool,
}

impl Frame<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.origin, key, message)
    }
}

pub(super) fn build(
    f: &Frame<'_>,
    max: Option<u16>,
    list: Vec<FileTenant>,
    default: Option<FilePolicy>,
) -> Result<Tenants, ConfigError> {
    let max = max.unwrap_or(TENANTS_MAX_DEFAULT);
    if max == 0 || max > TENANTS_MAX_LIMIT {
        return Err(f.err(
            "tenants_max",
            format!("must be 1 to {TENANTS_MAX_LIMIT}, got {max}"),
        ));
    }
    if list.len() > max as usize {
        return Err(f.err(
            "tenant",
            format!(
                "{} tenants are listed but tenants_max is {max}: raise tenants_max (a restart \
                 applies it)",
                list.len()
            ),
        ));
    }
    if list.is_empty() && default.is_none() {
        return Ok(Tenants {
            max,
            list: Vec::new(),
            default: Some(Policy::open()),
        });
    }
    let default = match default {
        Some(p) => Some(policy(f, "default_tenant", "the default tenant", p)?),
        None => None,
    };
    let mut tenants: Vec<Tenant> = Vec::with_capacity(list.len());
    // By the digest's first 8 bytes, the table's lookup key: two keys sharing them (2^-64 per
    // pair) are refused here, so a config that loads always builds its table.
    let mut keys: std::collections::HashMap<[u8; 8], usize> = Default::default();
    let mut cidrs: std::collections::HashMap<Cidr, usize> = Default::default();
    let mut ports: std::collections::HashMap<u16, usize> = Default::default();
    // Names are matched by hash, not by a scan of the tenants so far: a reload of 10,000
    // tenants is linear (the scan was 50 million compares, most of a reload's time).
    let mut names: std::collections::HashMap<String, usize> = Default::default();
    for (i, mut ft) in list.into_iter().enumerate() {
        let key = |k: &str| format!("tenant[{i}].{k}");
        let name = ft.name.trim().to_string();
        if name.is_empty()
            || name.len() > TENANT_NAME_BYTES_MAX
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(f.err(
                key("name"),
                format!(
                    "{:?}: a tenant name is 1 to {TENANT_NAME_BYTES_MAX} characters of a-z, \
                     A-Z, 0-9, '-', '_' and '.'",
                    ft.name
                ),
            ));
        }
        if name == DEFAULT_NAME {
            return Err(f.err(
                key("name"),
                "\"default\" names the [default_tenant] policy: choose another name",
            ));
        }
        if let Some(&j) = names.get(&name) {
            return Err(f.err(
                key("name"),
                format!("{name:?} is already the name of tenant[{j}]"),
            ));
        }
        let mut digests = Vec::new();
        for (k, text) in ft.keys.iter().enumerate() {
            let text = text.trim();
            if text.is_empty()
                || text.len() > KEY_BYTES_MAX
                || !text.bytes().all(|b| b.is_ascii_graphic())
            {
                return Err(f.err(
                    format!("tenant[{i}].keys[{k}]"),
                    format!(
                        "a key is 1 to {KEY_BYTES_MAX} printable characters without spaces (the \
                         key is not shown)"
                    ),
                ));
            }
            digests.push((KeyDigest::of(text.as_bytes()), format!("keys[{k}]")));
        }
        for (k, text) in ft.key_sha256.iter().enumerate() {
            let d = parse_digest(text.trim()).ok_or_else(|| {
                f.err(
                    format!("tenant[{i}].key_sha256[{k}]"),
                    format!("{text:?} is not 64 hex digits (a SHA-256 digest of the key)"),
                )
            })?;
            digests.push((d, format!("key_sha256[{k}]")));
        }
        for (d, given_as) in &digests {
            let prefix: [u8; 8] = d.0[..8].try_into().expect("8 bytes");
            if let Some(j) = keys.insert(prefix, i) {
                let other = if j == i {
                    "this tenant".to_string()
                } else {
                    format!("tenant[{j}] ({})", tenants[j].name)
                };
                return Err(f.err(
                    key(given_as),
                    format!("key {d:?} is also given to {other}: a key names one tenant"),
                ));
            }
        }
        let mut blocks = Vec::new();
        for (k, text) in ft.cidrs.iter().enumerate() {
            let c = Cidr::parse(text).map_err(|e| f.err(format!("tenant[{i}].cidrs[{k}]"), e))?;
            if let Some(j) = cidrs.insert(c, i) {
                return Err(f.err(
                    format!("tenant[{i}].cidrs[{k}]"),
                    format!(
                        "{}/{} is also tenant[{j}]'s: a block names one tenant (a longer \
                         block inside it may name another)",
                        c.network, c.len
                    ),
                ));
            }
            blocks.push(c);
        }
        for (k, &p) in ft.ports.iter().enumerate() {
            if !f.listeners.iter().any(|(_, lp, _)| *lp == p) {
                let known: Vec<String> = f
                    .listeners
                    .iter()
                    .map(|(k, p, _)| format!("{p} ({k})"))
                    .collect();
                return Err(f.err(
                    format!("tenant[{i}].ports[{k}]"),
                    format!(
                        "{p} is not an intake listener's port; they are {}",
                        known.join(", ")
                    ),
                ));
            }
            if let Some(j) = ports.insert(p, i) {
                return Err(f.err(
                    format!("tenant[{i}].ports[{k}]"),
                    format!("port {p} is also tenant[{j}]'s: a port names one tenant"),
                ));
            }
        }
        if digests.is_empty() && blocks.is_empty() && ft.ports.is_empty() {
            return Err(f.err(
                format!("tenant[{i}]"),
                format!(
                    "tenant {name:?} cannot be recognised: give it keys, key_sha256, cidrs or \
                     ports"
                ),
            ));
        }
        let policy = policy(
            f,
            &format!("tenant[{i}]"),
            &format!("tenant {name:?}"),
            ft.take_policy(),
        )?;
        // A pinned port of a region the tenant may not use would answer its every request 403.
        for (k, &p) in ft.ports.iter().enumerate() {
            let pinned = f.listeners.iter().find(|l| l.1 == p).and_then(|l| l.2);
            if let Some(r) = pinned
                && !policy.regions.is_empty()
                && !policy.regions.contains(&(r as u8))
            {
                return Err(f.err(
                    format!("tenant[{i}].ports[{k}]"),
                    format!(
                        "{p} is region {}'s pinned port, which is not one of tenant {name:?}'s \
                         regions: every request there would be refused; add the region or \
                         name another port",
                        f.regions[r]
                    ),
                ));
            }
        }
        names.insert(name.clone(), i);
        tenants.push(Tenant {
            name,
            keys: digests.into_iter().map(|(d, _)| d).collect(),
            cidrs: blocks,
            ports: ft.ports,
            policy,
        });
    }
    let floors: u64 = tenants
        .iter()
        .map(|t| &t.policy)
        .chain(default.iter())
        .filter(|p| p.enabled)
        .map(|p| u64::from(p.in_flight_min))
        .sum();
    if floors > u64::from(f.arena_slots) {
        return Err(f.err(
            "tenant",
            format!(
                "the tenants' in_flight_min add up to {floors} bundles, more than the arena's \
                 {} (arena_slots): lower them or raise arena_slots",
                f.arena_slots
            ),
        ));
    }
    Ok(Tenants {
        max,
        list: tenants,
        default,
    })
}

/// Checks one policy; `at` is its key (`tenant[3]`), `who` how messages name it.
fn policy(f: &Frame<'_>, at: &str, who: &str, p: FilePolicy) -> Result<Policy, ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let regions = match p.regions {
        None => Vec::new(),
        Some(names) => {
            if names.is_empty() {
                return Err(f.err(
                    key("regions"),
                    "no regions: the tenant could send nowhere (leave `regions` out for all of \
                     them, or set enabled = false)",
                ));
            }
            let mut out: Vec<u8> = Vec::with_capacity(names.len());
            for (k, n) in names.iter().enumerate() {
                let Some(r) = f.regions.iter().position(|x| x == n.trim()) else {
                    return Err(f.err(
                        format!("{at}.regions[{k}]"),
                        format!(
                            "{n:?} is not a region; the regions are {}",
                            f.regions.join(", ")
                        ),
                    ));
                };
                if out.contains(&(r as u8)) {
                    return Err(f.err(
                        format!("{at}.regions[{k}]"),
                        format!("{n:?} is listed twice"),
                    ));
                }
                out.push(r as u8);
            }
            out
        }
    };
    debug_assert!(regions.len() <= REGIONS_MAX);
    let fan_out = p.fan_out.unwrap_or(1);
    let reachable = if regions.is_empty() {
        f.regions.len()
    } else {
        regions.len()
    };
    if fan_out == 0 || fan_out > FAN_OUT_MAX || usize::from(fan_out) > reachable {
        return Err(f.err(
            key("fan_out"),
            format!(
                "must be 1 to {} (at most {FAN_OUT_MAX}, and no more than the {reachable} \
                 regions it may use), got {fan_out}",
                FAN_OUT_MAX.min(reachable as u8)
            ),
        ));
    }
    let in_flight_max = p.in_flight_max.unwrap_or(u32::MAX);
    if p.in_flight_max.is_some() && (in_flight_max == 0 || in_flight_max > f.arena_slots) {
        return Err(f.err(
            key("in_flight_max"),
            format!(
                "must be 1 to arena_slots ({}), got {in_flight_max}",
                f.arena_slots
            ),
        ));
    }
    let in_flight_min = p.in_flight_min.unwrap_or(0);
    if in_flight_min > in_flight_max {
        return Err(f.err(
            key("in_flight_min"),
            format!("{in_flight_min} is above in_flight_max ({in_flight_max})"),
        ));
    }
    let rate = match (p.rate, p.rate_burst) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(f.err(key("rate_burst"), "needs `rate` (requests per second)"));
        }
        (Some(r), b) => {
            if r == 0 || r > RATE_MAX {
                return Err(f.err(
                    key("rate"),
                    format!("must be 1 to {RATE_MAX} requests per second, got {r}"),
                ));
            }
            let b = b.unwrap_or(r);
            if b == 0 || b > RATE_MAX {
                return Err(f.err(
                    key("rate_burst"),
                    format!("must be 1 to {RATE_MAX}, got {b}"),
                ));
            }
            Some((r, b))
        }
    };
    if let Some(r) = p.global_rate {
        if r == 0 || r > RATE_MAX {
            return Err(f.err(
                key("global_rate"),
                format!("must be 1 to {RATE_MAX} requests per second, got {r}"),
            ));
        }
        if !f.quota {
            return Err(f.err(
                key("global_rate"),
                "needs [quota] redis = \"host:port\": the store the relays share the rate \
                 through",
            ));
        }
    }
    if let Some(ms) = p.bundle_max_age_ms
        && (ms == 0 || ms > f.bundle_max_age_ms_max)
    {
        return Err(f.err(
            key("bundle_max_age_ms"),
            format!("must be 1 to {}, got {ms}", f.bundle_max_age_ms_max),
        ));
    }
    let enabled = p.enabled.unwrap_or(true);
    let egress = egress_group(f, at, who, enabled, p.egress)?;
    Ok(Policy {
        enabled,
        regions,
        strategy: match p.rotating.unwrap_or(FileStrategy::Soonest) {
            FileStrategy::Soonest => Strategy::Soonest,
            FileStrategy::Ordered => Strategy::Ordered,
            FileStrategy::Leader => Strategy::Leader,
        },
        fan_out,
        in_flight_min,
        in_flight_max,
        rate,
        global_rate: p.global_rate,
        bundle_max_age_ms: p.bundle_max_age_ms,
        egress,
    })
}

/// A policy's `egress`: a group that exists (whether the tenant is enabled or not: a typo is
/// one either way), and, for an enabled tenant, one holding a source in this relay, since a
/// tenant whose bundles can leave through no pair could only watch them expire. No key (or
/// `"shared"`) is the shared addresses, which must then hold a source too.
fn egress_group(
    f: &Frame<'_>,
    at: &str,
    who: &str,
    enabled: bool,
    name: Option<String>,
) -> Result<Option<String>, ConfigError> {
    let key = format!("{at}.egress");
    let name = name.map(|n| n.trim().to_string());
    let explicit_shared = name.as_deref() == Some(SHARED_GROUP);
    let name = name.filter(|_| !explicit_shared);
    let id = match &name {
        None => 0,
        Some(n) => match f.groups.iter().position(|g| g == n) {
            Some(i) => i + 1,
            None => {
                let there = if f.groups.is_empty() {
                    "there are no egress groups ([[egress.group]])".to_string()
                } else {
                    format!("the groups are {}", f.groups.join(", "))
                };
                return Err(f.err(
                    key,
                    format!("{who} names egress group {n:?}, which does not exist; {there}"),
                ));
            }
        },
    };
    if !enabled || f.group_sources.get(id).copied().unwrap_or(0) > 0 {
        return Ok(name);
    }
    let slice = slice_phrase(f.slice);
    Err(match &name {
        None => f.err(
            if explicit_shared { key } else { at.to_string() },
            format!(
                "{who} uses the shared egress addresses ({}) but every source is in a \
                 group{slice}: give it `egress = \"…\"` naming one of {}, or leave some \
                 addresses out of the groups",
                if explicit_shared {
                    "egress = \"shared\""
                } else {
                    "no `egress` key"
                },
                f.groups.join(", ")
            ),
        ),
        Some(n) => f.err(
            key,
            format!(
                "{who} uses egress group {n:?}, which has no source in {}: its addresses are \
                 all in other relays' slices; name a group with addresses in this slice, or \
                 set enabled = false",
                match f.slice {
                    Some((k, n)) => format!("this relay's slice {k}/{n} (egress.slice)"),
                    None => "this relay".to_string(),
                }
            ),
        ),
    })
}

fn parse_digest(text: &str) -> Option<KeyDigest> {
    if text.len() != 64 {
        return None;
    }
    let mut d = [0u8; 32];
    for (i, b) in d.iter_mut().enumerate() {
        *b = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(KeyDigest(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_with_host_bits_names_its_network() {
        assert!(
            Cidr::parse("10.1.2.3/8")
                .unwrap_err()
                .contains("10.0.0.0/8")
        );
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(c.contains("10.200.1.1".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert_eq!(Cidr::parse("::1").unwrap().len, 128);
    }

    #[test]
    fn a_digest_is_64_hex_digits() {
        let d = KeyDigest::of(b"k");
        let hex: String = d.0.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(parse_digest(&hex), Some(d));
        assert_eq!(parse_digest(&hex[1..]), None);
        assert!(!format!("{d:?}").contains(&hex));
    }
}
