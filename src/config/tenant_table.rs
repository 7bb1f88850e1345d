//! The tenants as the request path reads them: one immutable table per config generation,
//! built off the request path (at load and on each reload) and swapped with the snapshot.
//!
//! Lookup costs one SHA-256 of the presented key (~0.2 µs for a UUID), one hash-map probe on
//! the digest's first 8 bytes, and a constant-time compare of the whole digest, so a key's
//! bytes never steer a branch or an early exit; without a key, one probe per distinct prefix
//! length of the CIDR blocks (longest first); then one array index by intake port. Nothing
//! allocates. The cost does not grow with the number of tenants (README: 1 against 10,000).
//!
//! Slots: each tenant holds a slot of [`TenantStats`] (its share, rate state and counts). A
//! tenant keeps its slot across reloads (matched by name); a new one takes a slot never used
//! before, else one whose tenant was removed, that holds no bundle any more, and that no thread
//! can still write: every table that listed its tenant has no [`Writer`] left (a reactor lets
//! go of its table when it applies the next, a lease pass holds one for the pass). So a slot's
//! counts always belong to one tenant: a thread still on an older table can never count the
//! removed tenant's request into the new tenant's slot.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::tenants::{Cidr, DEFAULT_NAME, KeyDigest, Policy, Strategy, Tenants};
use crate::limiter::REGIONS_MAX;
use crate::metrics::tenants::{DEFAULT_SLOT, TenantStats};

/// Intake listeners by index: 0 the rotating port, `1 + r` region `r`'s pinned port.
pub const LISTENERS_MAX: usize = 1 + REGIONS_MAX;

/// A hasher for keys that are already uniformly random (digest prefixes): the value itself.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type ByPrefix = HashMap<u64, (KeyDigest, u16), BuildHasherDefault<Identity>>;

/// One tenant (or the default policy) as the request path applies it.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub slot: u16,
    pub enabled: bool,
    /// Running regions it may use, as a bit mask (bit `r`: running region `r`).
    pub mask: u16,
    /// The same regions in the tenant's order.
    pub order: Vec<u8>,
    pub strategy: Strategy,
    pub fan_out: u8,
    pub in_flight_min: u32,
    pub in_flight_max: u32,
    pub rate: Option<(u32, u32)>,
    /// Requests per second across every relay sharing the `[quota]` store.
    pub global_rate: Option<u32>,
    /// `None`: the relay's.
    pub bundle_max_age_ms: Option<u64>,
    /// The running relay's egress group its bundles leave through: 0 the shared addresses,
    /// `i + 1` the relay's `egress.groups[i]` as it started (groups change on restart only).
    pub group: u8,
    /// That group's name (`"shared"` for 0), for /debug.
    pub group_name: String,
    /// Short hashes of its keys, for /debug.
    pub keys: Vec<String>,
    pub cidrs: Vec<Cidr>,
}

impl Entry {
    /// Its policy in one line, keys as short hashes (`/debug/tenants`); `regions` names the
    /// running regions.
    pub fn describe(&self, regions: &[String]) -> String {
        let names: Vec<&str> = self
            .order
            .iter()
            .filter_map(|&r| regions.get(r as usize).map(String::as_str))
            .collect();
        let mut s = format!(
            "{}, regions {} ({:?}), in flight {}..{}",
            if self.enabled { "enabled" } else { "disabled" },
            names.join(","),
            self.strategy,
            self.in_flight_min,
            self.in_flight_max
        );
        if self.fan_out > 1 {
            s.push_str(&format!(", fan-out {}", self.fan_out));
        }
        match self.rate {
            Some((r, b)) => s.push_str(&format!(", rate {r}/s burst {b}")),
            None => s.push_str(", no rate limit"),
        }
        if let Some(g) = self.global_rate {
            s.push_str(&format!(", global rate {g}/s"));
        }
        if let Some(ms) = self.bundle_max_age_ms {
            s.push_str(&format!(", max age {ms} ms"));
        }
        s.push_str(&format!(", egress {}", self.group_name));
        if !self.keys.is_empty() {
            s.push_str(&format!(", keys sha256:{}", self.keys.join(",")));
        }
        if !self.cidrs.is_empty() {
            let c: Vec<String> = self
                .cidrs
                .iter()
                .map(|c| format!("{}/{}", c.network, c.len))
                .collect();
            s.push_str(&format!(", cidrs {}", c.join(",")));
        }
        s
    }
}

/// What a request's identity came to.
#[derive(Clone, Copy, Debug)]
pub enum Found<'a> {
    /// A listed tenant (enabled or not: the caller answers a disabled one with 403).
    Tenant(&'a Entry),
    /// No tenant matched; the default policy applies.
    Default(&'a Entry),
    /// No tenant matched and there is no enabled default: 401. `key_given`: a key was
    /// presented (and is not known), else none was.
    Unknown { key_given: bool },
}

/// A table could not be built: why, and whether it was only for want of a slot that a
/// removed tenant will free once no thread writes the tables that still list it.
#[derive(Debug)]
pub struct TableError {
    pub why: String,
    /// A new tenant found no slot.
    pub no_slot: bool,
    /// ... and a removed tenant's slot will do once no thread writes its tables.
    pub slot_freeing: bool,
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl From<String> for TableError {
    fn from(why: String) -> TableError {
        TableError {
            why,
            no_slot: false,
            slot_freeing: false,
        }
    }
}

/// A thread that writes into `table`'s slots (admits, refuses, counts, leases by it) for as
/// long as it holds this: while any is held, no slot of a tenant this table lists goes to
/// another tenant.
#[derive(Debug)]
pub struct Writer(Arc<TenantTable>);

impl Writer {
    pub fn new(table: Arc<TenantTable>) -> Writer {
        table.writers.fetch_add(1, Ordering::SeqCst);
        Writer(table)
    }

    pub fn table(&self) -> &Arc<TenantTable> {
        &self.0
    }
}

impl std::ops::Deref for Writer {
    type Target = TenantTable;
    fn deref(&self) -> &TenantTable {
        &self.0
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.0.writers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct TenantTable {
    entries: Vec<Entry>,
    default: Option<Entry>,
    keys: ByPrefix,
    v4: Vec<(u8, HashMap<u32, u16>)>,
    v6: Vec<(u8, HashMap<u128, u16>)>,
    ports: [Option<u16>; LISTENERS_MAX],
    /// Slots of removed tenants with the generation of the first table without them and the
    /// tenant's name: reusable once they hold no bundle and no table before that generation
    /// has a writer; the tenant's again if it is listed again before that.
    retired: Vec<(u16, u64, String)>,
    /// 1 for the first table, +1 for each built from the one before.
    generation: u64,
    /// Threads that may write into this table's slots now ([`Writer`]).
    writers: AtomicUsize,
    /// The lowest slot never used.
    fresh: u16,
    max: u16,
    /// Bundles the arena holds beyond every floor: what tenants above their floors share.
    pool: u32,
    /// Bundles the arena holds in all (`arena_slots` the relay started with).
    arena: u32,
    /// Some enabled entry's rotating port follows the next leader: the relay must learn it.
    by_leader: bool,
    /// Slots this table gives to new tenants: zeroed ([`TenantStats::reset`]) when it is
    /// published ([`TenantTable::begin`]), not when it is built, since a reload may build
    /// tables it never publishes and a slot stays its old tenant's until one is.
    fresh_slots: Vec<u16>,
    /// `[intake] trusted_proxies`: peers whose `X-Forwarded-For` names the client.
    proxies: Vec<Cidr>,
}

impl TenantTable {
    /// Builds the table of `tenants` for a relay running `running` regions (names, in their
    /// order), egress `groups` (names, group id `i + 1` being `groups[i]`) and intake
    /// listeners (`(port, listener index)`), with `cfg_regions` the names the tenants' region
    /// indexes refer to. Slots follow `previous`, the table before with the oldest generation
    /// a thread may still write (`u64::MAX`: none); new ones are zeroed in `stats` when the
    /// table is published ([`TenantTable::begin`]).
    /// `arena_slots` is the running arena.
    // Each argument is one thing the running relay was sized by; a struct of them would be
    // built at its one caller only to be taken apart here.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        tenants: &Tenants,
        cfg_regions: &[String],
        running: &[String],
        groups: &[String],
        listeners: &[(u16, usize)],
        arena_slots: u32,
        previous: Option<(&TenantTable, u64)>,
        stats: &TenantStats,
    ) -> Result<TenantTable, TableError> {
        // The table's size is the one the relay started with; a reload asking for more
        // applies the rest of its edit and finds only that many slots.
        let max = stats.tenants_max();
        if tenants.list.len() > usize::from(max) {
            return Err(format!(
                "{} tenants listed, more than the {max} of tenants_max the relay started with \
                 (its {} applies at a restart): list at most {max} until then",
                tenants.list.len(),
                tenants.max
            )
            .into());
        }
        let written_since = previous.map_or(u64::MAX, |(_, g)| g);
        let previous = previous.map(|(p, _)| p);
        let generation = previous.map_or(1, |p| p.generation + 1);
        let mut t = TenantTable {
            entries: Vec::with_capacity(tenants.list.len()),
            default: None,
            keys: ByPrefix::default(),
            v4: Vec::new(),
            v6: Vec::new(),
            ports: [None; LISTENERS_MAX],
            retired: previous.map(|p| p.retired.clone()).unwrap_or_default(),
            generation,
            writers: AtomicUsize::new(0),
            fresh: previous.map_or(DEFAULT_SLOT + 1, |p| p.fresh),
            max,
            pool: 0,
            arena: arena_slots,
            by_leader: false,
            fresh_slots: Vec::new(),
            proxies: Vec::new(),
        };
        // By name, so a reload of n tenants costs O(n), not O(n²).
        let before: HashMap<&str, u16> = previous
            .map(|p| {
                p.entries
                    .iter()
                    .map(|e| (e.name.as_str(), e.slot))
                    .collect()
            })
            .unwrap_or_default();
        let listed: std::collections::HashSet<&str> =
            tenants.list.iter().map(|n| n.name.as_str()).collect();
        // Slots of tenants the new list no longer has are retired.
        if let Some(p) = previous {
            for e in &p.entries {
                if !listed.contains(e.name.as_str()) {
                    t.retired.push((e.slot, generation, e.name.clone()));
                }
            }
        }
        let compile = |name: &str, slot: u16, p: &Policy| -> Result<Entry, String> {
            let mut order = Vec::with_capacity(p.regions.len().max(running.len()));
            if p.regions.is_empty() {
                // All regions: every running one the config still lists.
                for (run, name) in running.iter().enumerate() {
                    if cfg_regions.contains(name) {
                        order.push(run as u8);
                    }
                }
            }
            for &r in &p.regions {
                let region = &cfg_regions[r as usize];
                if let Some(run) = running.iter().position(|x| x == region) {
                    order.push(run as u8);
                }
            }
            if order.is_empty() && p.enabled {
                return Err(format!(
                    "tenant {name}: none of its regions is running (a region the relay did \
                     not start with needs a restart)"
                ));
            }
            // By name: a disabled tenant sends nothing, so the group it names need not run.
            let group = match p.egress.as_deref() {
                None => 0,
                Some(g) => match groups.iter().position(|x| x == g) {
                    Some(i) => (i + 1) as u8,
                    None if !p.enabled => 0,
                    None => {
                        return Err(format!(
                            "tenant {name}: egress group {g} is not one the relay started with \
                             (egress groups change on restart)"
                        ));
                    }
                },
            };
            let group_name = match group {
                0 => super::tenants::SHARED_GROUP.to_string(),
                g => groups[g as usize - 1].clone(),
            };
            Ok(Entry {
                name: name.to_string(),
                slot,
                enabled: p.enabled,
                // All regions: every running one, so a pinned port of a region the config
                // dropped gets the relay's own answer (503, gone from the config), not 403.
                mask: if p.regions.is_empty() {
                    ((1u32 << running.len()) - 1) as u16
                } else {
                    order.iter().fold(0u16, |m, &r| m | 1 << r)
                },
                order,
                strategy: p.strategy,
                fan_out: p.fan_out,
                in_flight_min: p.in_flight_min.min(arena_slots),
                in_flight_max: p.in_flight_max.min(arena_slots),
                rate: p.rate,
                global_rate: p.global_rate,
                bundle_max_age_ms: p.bundle_max_age_ms,
                group,
                group_name,
                keys: Vec::new(),
                cidrs: Vec::new(),
            })
        };
        if let Some(p) = &tenants.default {
            t.default = Some(compile(DEFAULT_NAME, DEFAULT_SLOT, p)?);
        }
        let mut v4: HashMap<u8, HashMap<u32, u16>> = HashMap::new();
        let mut v6: HashMap<u8, HashMap<u128, u16>> = HashMap::new();
        for tenant in &tenants.list {
            // A tenant listed again whose slot no other took gets it back, with the bundles
            // it holds there, its rate's state, its counts and its records.
            let kept = before.get(tenant.name.as_str()).copied().or_else(|| {
                let i = t.retired.iter().position(|r| r.2 == tenant.name)?;
                Some(t.retired.swap_remove(i).0)
            });
            let slot = match kept {
                Some(s) => s,
                None => {
                    let Some(s) = t.take_slot(stats, written_since, &listed) else {
                        let slot_freeing = t.retired.iter().any(|r| stats.in_flight(r.0) == 0);
                        return Err(TableError {
                            why: format!(
                                "no tenant slot free for {}: all {max} (tenants_max) are held \
                                 by tenants, by removed tenants' bundles still in flight, or by \
                                 removed tenants a thread may still count into; once those \
                                 bundles end (within their max age) the same reload passes: \
                                 reload again then, or raise tenants_max (a restart)",
                                tenant.name
                            ),
                            no_slot: true,
                            slot_freeing,
                        });
                    };
                    t.fresh_slots.push(s);
                    s
                }
            };
            let idx = t.entries.len() as u16;
            let mut e = compile(&tenant.name, slot, &tenant.policy)?;
            for d in &tenant.keys {
                let prefix = u64::from_le_bytes(d.0[..8].try_into().expect("8 bytes"));
                if t.keys.insert(prefix, (*d, idx)).is_some() {
                    return Err(format!(
                        "tenant {}: key {d:?} shares its first 8 digest bytes with another \
                         tenant's key; give one of them a new key",
                        tenant.name
                    )
                    .into());
                }
                e.keys.push(d.short());
            }
            for c in &tenant.cidrs {
                match c.network {
                    IpAddr::V4(a) => {
                        v4.entry(c.len).or_default().insert(u32::from(a), idx);
                    }
                    IpAddr::V6(a) => {
                        v6.entry(c.len).or_default().insert(u128::from(a), idx);
                    }
                }
            }
            e.cidrs = tenant.cidrs.clone();
            for &port in &tenant.ports {
                let mut heard = false;
                for &(p, listener) in listeners {
                    if p == port {
                        t.ports[listener] = Some(idx);
                        heard = true;
                    }
                }
                if !heard {
                    // The config's own listeners were checked at load: this is a listener a
                    // reload moved, which the running relay does not serve until a restart.
                    let running: Vec<String> =
                        listeners.iter().map(|(p, _)| p.to_string()).collect();
                    return Err(format!(
                        "tenant {}: port {port} is not one the relay listens on (it serves {}; \
                         listeners change on restart)",
                        tenant.name,
                        running.join(", ")
                    )
                    .into());
                }
            }
            t.entries.push(e);
        }
        t.v4 = v4.into_iter().collect();
        t.v4.sort_by_key(|e| std::cmp::Reverse(e.0));
        t.v6 = v6.into_iter().collect();
        t.v6.sort_by_key(|e| std::cmp::Reverse(e.0));
        // A disabled tenant sends nothing: its floor reserves nothing.
        let floors: u32 = t
            .entries
            .iter()
            .chain(t.default.iter())
            .filter(|e| e.enabled)
            .map(|e| e.in_flight_min)
            .sum();
        if floors > arena_slots {
            // The config's own arena was checked at load: this is a reload whose floors fit
            // only the arena it asks for, which the running relay does not have until a
            // restart (every tenant without a floor would find no shared slot).
            return Err(format!(
                "the tenants' in_flight_min add up to {floors} bundles, more than the arena's \
                 {arena_slots} the relay started with (arena_slots changes on restart): lower \
                 them"
            )
            .into());
        }
        t.pool = arena_slots - floors;
        let by_leader = t.all().any(|e| e.enabled && e.strategy == Strategy::Leader);
        t.by_leader = by_leader;
        Ok(t)
    }

    /// A slot for a new tenant: a never-used one, else a retired one holding no bundle whose
    /// tenant no table a thread may still write (from generation `written_since` on) lists,
    /// and whose tenant is not `listed` again (that one takes its own back).
    fn take_slot(
        &mut self,
        stats: &TenantStats,
        written_since: u64,
        listed: &std::collections::HashSet<&str>,
    ) -> Option<u16> {
        if self.fresh <= self.max {
            self.fresh += 1;
            return Some(self.fresh - 1);
        }
        let i = self.retired.iter().position(|(s, gone_from, name)| {
            *gone_from <= written_since
                && stats.in_flight(*s) == 0
                && !listed.contains(name.as_str())
        })?;
        Some(self.retired.swap_remove(i).0)
    }

    /// Whether `next`'s tenants all find a slot once every slot its removals and earlier
    /// ones retire holds no bundle and no thread writes the tables that list their tenants:
    /// whether waiting for that can be worth it.
    pub fn fits_once_freed(&self, next: &super::tenants::Tenants, stats: &TenantStats) -> bool {
        let now: std::collections::HashSet<&str> =
            self.entries.iter().map(|e| e.name.as_str()).collect();
        let then: std::collections::HashSet<&str> =
            next.list.iter().map(|t| t.name.as_str()).collect();
        // A tenant listed again whose slot is retired takes that one: it needs none.
        let returning = |name: &str| self.retired.iter().any(|r| r.2 == name);
        let needed = next
            .list
            .iter()
            .filter(|t| !now.contains(t.name.as_str()) && !returning(&t.name))
            .count();
        let fresh = usize::from(self.max + 1).saturating_sub(usize::from(self.fresh));
        let retired = self
            .retired
            .iter()
            .filter(|r| stats.in_flight(r.0) == 0 && !then.contains(r.2.as_str()))
            .count();
        let removed = self
            .entries
            .iter()
            .filter(|e| !then.contains(e.name.as_str()) && stats.in_flight(e.slot) == 0)
            .count();
        needed <= fresh + retired + removed
    }

    /// The table is published: the slots it gives to new tenants begin their epoch, counts and
    /// rate state zeroed. Once, by whoever publishes it.
    pub fn begin(&self, stats: &TenantStats) {
        for &s in &self.fresh_slots {
            stats.reset(s);
        }
    }

    /// Removed tenants whose slots still hold bundles of theirs: name and slot.
    pub fn removed_holding<'a>(
        &'a self,
        stats: &'a TenantStats,
    ) -> impl Iterator<Item = (&'a str, u16)> + 'a {
        self.retired
            .iter()
            .filter(|r| stats.in_flight(r.0) > 0)
            .map(|r| (r.2.as_str(), r.0))
    }

    /// This table's generation (1 for the first built).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether a thread may write into this table's slots now.
    pub fn is_written(&self) -> bool {
        self.writers.load(Ordering::SeqCst) > 0
    }

    /// The table trusting `proxies` ([`TenantTable::trusts`]).
    pub fn trusting(mut self, proxies: &[Cidr]) -> TenantTable {
        self.proxies = proxies.to_vec();
        self
    }

    /// Whether `peer` is a trusted proxy: the client it forwards for is the one its
    /// `X-Forwarded-For` names, not itself.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        // Most relays trust none: the common case costs one compare.
        !self.proxies.is_empty() && {
            let peer = peer.to_canonical();
            self.proxies.iter().any(|c| c.contains(peer))
        }
    }

    /// Who a request is: by `key` (the `x-jito-auth` header or `uuid` parameter), else by
    /// `peer` (longest matching block), else by the intake `listener` it came to.
    pub fn identify(&self, key: Option<&[u8]>, peer: IpAddr, listener: usize) -> Found<'_> {
        if let Some(key) = key {
            let d = KeyDigest::of(key);
            let prefix = u64::from_le_bytes(d.0[..8].try_into().expect("8 bytes"));
            if let Some((known, idx)) = self.keys.get(&prefix)
                && constant_time_eq(&known.0, &d.0)
            {
                return Found::Tenant(&self.entries[*idx as usize]);
            }
        }
        if let Some(idx) = self.by_address(peer.to_canonical()) {
            return Found::Tenant(&self.entries[idx as usize]);
        }
        if let Some(idx) = self.ports.get(listener).copied().flatten() {
            return Found::Tenant(&self.entries[idx as usize]);
        }
        match &self.default {
            Some(d) if d.enabled => Found::Default(d),
            _ => Found::Unknown {
                key_given: key.is_some(),
            },
        }
    }

    fn by_address(&self, ip: IpAddr) -> Option<u16> {
        match ip {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                self.v4.iter().find_map(|(len, m)| {
                    let masked = if *len == 0 {
                        0
                    } else {
                        a & (u32::MAX << (32 - len))
                    };
                    m.get(&masked).copied()
                })
            }
            IpAddr::V6(a) => {
                let a = u128::from(a);
                self.v6.iter().find_map(|(len, m)| {
                    let masked = if *len == 0 {
                        0
                    } else {
                        a & (u128::MAX << (128 - len))
                    };
                    m.get(&masked).copied()
                })
            }
        }
    }

    /// The listed tenants, in the config's order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The default policy, if there is one (enabled or not).
    pub fn default_entry(&self) -> Option<&Entry> {
        self.default.as_ref()
    }

    /// Every entry, the default first when there is one.
    pub fn all(&self) -> impl Iterator<Item = &Entry> {
        self.default.iter().chain(self.entries.iter())
    }

    /// Some enabled tenant (or the default) routes the rotating port by the next leader.
    pub fn routes_by_leader(&self) -> bool {
        self.by_leader
    }

    /// Bundles tenants above their floors share.
    pub fn pool(&self) -> u32 {
        self.pool
    }

    /// Bundles the arena holds in all.
    pub fn arena(&self) -> u32 {
        self.arena
    }

    /// Slots in use by tenants of this table, the highest plus one (for per-slot arrays).
    pub fn slots(&self) -> usize {
        usize::from(self.max) + 1
    }
}

/// `a == b` in time independent of where they differ.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for i in 0..32 {
        diff |= a[i] ^ b[i];
    }
    // The optimiser may not turn the fold into an early exit through a black box.
    core::hint::black_box(diff) == 0
}
