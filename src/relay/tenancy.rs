//! Who may send, and how much: one request's tenant checks, before any slot is taken. Sans-IO.
//!
//! The decision table, in order (tests/relay/tenants.rs names its rows):
//!
//! | the request's identity | answer |
//! |---|---|
//! | from a trusted proxy (`[intake] trusted_proxies`) | as from the address its `X-Forwarded-For` ends in; none or not an address: 400 naming it |
//! | an `X-Forwarded-For` from any other peer | ignored: the peer is who it is |
//! | a key no tenant has | as no key: a bot's own Jito UUID is no key of the relay's |
//! | a tenant, enabled | its policy: regions, egress group, strategy, rate, share, max age |
//! | a tenant, disabled | 403, even when a default exists |
//! | no tenant, a default enabled | the default's policy |
//! | no tenant, no enabled default | 401 naming the key it lacks (or that its key is unknown) |
//! | a pinned port outside the tenant's regions | 403 naming the region |
//! | a region in the path (`/ny/api/v1/…`) on the rotating port | as that region's pinned port, but a tenant by port is the rotating port's |
//! | the tenant's rate used up | 429, `Retry-After`, Jito's -32097 wording with the wait |
//! | the tenant's global rate: nothing left on lease | 429, the same words: the wait to the next second once this second's share is spent, else 10 ms (more is on its way) |
//! | the tenant's share full (its ceiling, or the arena beyond every floor) | 429 naming which |
//!
//! A request refused for want of room (its share, the relay's in-flight cap, its region gone)
//! gives back what it took of the rate and the global rate: the tenant pays its rate for what
//! it sent, not for the relay's room. A bad request keeps it spent, so a flood of them is
//! paced like any other.
//!
//! The tenant's state lives in [`TenantStats`] (shared by every thread, one cell per tenant);
//! this is one thread's view: the current table and, per slot, what its checks need in clock
//! ticks, rebuilt when a reload swaps the table (no allocation then: the arrays are sized by
//! `tenants_max` at startup).
//!
//! A global rate (`global_rate`, across relays) is one compare-and-swap on what this relay
//! holds on lease: the lease thread (`serve/lease.rs`) keeps it topped up from the store, so
//! the check never waits on the network, locks or allocates.

use std::net::IpAddr;
use std::sync::Arc;

use crate::clock::{Instant, TickRate, Ticks};
use crate::config::{Found, Strategy, TenantEntry as Entry, TenantTable, TenantWriter};
use crate::metrics::tenants::{Gcra, Refused, ShareFull, TenantStats};

use super::Port;

/// The tenant table's index of intake port `port`: the rotating port, then each region's.
fn listener(port: Port) -> usize {
    match port {
        Port::Rotating => 0,
        Port::Pinned(r) => 1 + r as usize,
    }
}

/// Who sent a request, as far as tenants are told apart.
#[derive(Clone, Copy, Debug)]
pub struct Claim<'a> {
    /// The `x-jito-auth` header, else the `uuid` query parameter.
    pub key: Option<&'a [u8]>,
    /// The connection's source address; the client's once [`Claim::client`] has looked
    /// behind a trusted proxy.
    pub peer: IpAddr,
    /// Whether `peer` is a trusted proxy ([`Tenancy::trusts`]), and what it forwarded.
    pub via: Via<'a>,
    /// The intake port the request arrived on, when its path chose a region (`/ny/api/v1/…`):
    /// tenants by port are told by where a request arrived, the region by its path. `None`:
    /// the port it is handled as.
    pub arrived_on: Option<Port>,
}

/// How a request reached the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via<'a> {
    /// From the client itself, or from a peer that is not trusted (whatever it says of others).
    Direct,
    /// From a trusted proxy: the value of the last `X-Forwarded-For` field it sent (each hop
    /// appends one; the last is its own), `None` without one.
    Proxy { forwarded_for: Option<&'a [u8]> },
}

/// A trusted proxy's request that does not say which client it is from (no
/// `X-Forwarded-For`, or one not ending in an address): 400, naming the proxy and the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unforwarded<'a> {
    pub proxy: IpAddr,
    pub forwarded_for: Option<&'a [u8]>,
}

impl<'a> Claim<'a> {
    /// A local client without a key.
    pub const LOOPBACK: Claim<'static> = Claim {
        key: None,
        peer: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        via: Via::Direct,
        arrived_on: None,
    };

    /// The claim of the client the request is from: behind a trusted proxy, the address its
    /// `X-Forwarded-For` ends in. A trusted proxy that names none is refused rather than taken
    /// for the client: every tenant behind a proxy set up without the header would silently
    /// be matched as the proxy's address.
    pub fn client(self) -> Result<Claim<'a>, Unforwarded<'a>> {
        let Via::Proxy { forwarded_for } = self.via else {
            return Ok(self);
        };
        let refused = Unforwarded {
            proxy: self.peer.to_canonical(),
            forwarded_for,
        };
        let value = forwarded_for.ok_or(refused)?;
        let peer = crate::http1::forwarded::last_hop(value).map_err(|_| refused)?;
        Ok(Claim {
            peer,
            via: Via::Direct,
            ..self
        })
    }
}

/// The request may go on: its tenant's slot and what it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    pub slot: u16,
    /// Running regions it may use.
    pub mask: u16,
    pub strategy: Strategy,
    /// Regions a rotating-port bundle goes to at once.
    pub fan_out: u8,
    /// The egress group it leaves through (0: the shared addresses).
    pub group: u8,
}

/// Why the request may not go on (the answer names what was wrong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No tenant matched and none is required to: 401.
    Unknown { key_given: bool },
    /// 403.
    Disabled { slot: u16 },
    /// 403: the pinned port's region is not the tenant's.
    Region { slot: u16, region: u8 },
    /// 429 after `retry_after_ms`.
    Rate {
        slot: u16,
        limit: u32,
        retry_after_ms: u64,
    },
    /// 429: it holds its ceiling (`full` [`ShareFull::Ceiling`], `limit` that ceiling), or
    /// holds its floor and the room tenants share past theirs is taken (`limit` its floor).
    Share {
        slot: u16,
        in_flight: u32,
        full: ShareFull,
        limit: u32,
    },
    /// The arena is full: its share met the relay's in-flight cap, not a limit of its own (a
    /// ceiling of the whole arena, or a room shared past floors that is the whole arena).
    Cap { slot: u16 },
}

/// Bytes of one thread's rules for one tenant slot (the budget counts them).
pub const PER_SLOT_BYTES: usize = size_of::<PerSlot>();

#[derive(Clone, Copy, Debug, Default)]
struct PerSlot {
    gcra: Option<(Gcra, u32)>,
    /// The tenant's global rate (requests per second across relays), taken from its lease.
    global: Option<u32>,
    /// `None`: the relay's.
    max_age: Option<Ticks>,
    /// The table entry of the slot (`u32::MAX`: the default policy).
    entry: u32,
}

/// See the module docs.
pub struct Tenancy {
    /// The table this thread admits by, held as a writer of its slots (see
    /// [`crate::config::TenantTable`]'s module docs: no slot of a tenant it lists is reused
    /// while this thread may still count into it).
    table: TenantWriter,
    stats: Arc<TenantStats>,
    rate: TickRate,
    slots: Box<[PerSlot]>,
}

impl Tenancy {
    pub fn new(table: Arc<TenantTable>, stats: Arc<TenantStats>, rate: TickRate) -> Tenancy {
        let slots = vec![PerSlot::default(); usize::from(stats.tenants_max()) + 1];
        let mut t = Tenancy {
            table: TenantWriter::new(table.clone()),
            stats,
            rate,
            slots: slots.into_boxed_slice(),
        };
        t.retune(table);
        t
    }

    /// A reload's table. Slots of removed tenants keep their max age, for their bundles still
    /// in flight.
    pub fn retune(&mut self, table: Arc<TenantTable>) {
        let rate = self.rate;
        let default = table.default_entry().into_iter().map(|e| (u32::MAX, e));
        let listed = table
            .entries()
            .iter()
            .enumerate()
            .map(|(i, e)| (i as u32, e));
        for (entry, e) in default.chain(listed) {
            let s = &mut self.slots[usize::from(e.slot)];
            s.entry = entry;
            s.max_age = e.bundle_max_age_ms.map(|ms| rate.from_ms(ms));
            s.global = e.global_rate;
            s.gcra = e.rate.map(|(per_s, burst)| {
                let interval = (rate.ticks_per_s() / u64::from(per_s)).max(1);
                (
                    Gcra {
                        interval,
                        tolerance: interval * u64::from(burst - 1),
                    },
                    per_s,
                )
            });
        }
        self.table = TenantWriter::new(table);
    }

    pub fn table(&self) -> &Arc<TenantTable> {
        self.table.table()
    }

    pub fn stats(&self) -> &Arc<TenantStats> {
        &self.stats
    }

    /// The max age of the bundles of `slot`, when the tenant has its own.
    pub fn max_age(&self, slot: u16) -> Option<Ticks> {
        self.slots[usize::from(slot)].max_age
    }

    /// The name of `slot`'s tenant (the default's is "default").
    pub fn name(&self, slot: u16) -> &str {
        match self.slots[usize::from(slot)].entry {
            u32::MAX => crate::config::DEFAULT_TENANT_NAME,
            i => &self.table.entries()[i as usize].name,
        }
    }

    /// `slot`'s regions in its own order (for the ordered strategy).
    pub fn order(&self, slot: u16) -> &[u8] {
        match self.slots[usize::from(slot)].entry {
            u32::MAX => self.table.default_entry().map_or(&[], |e| &e.order),
            i => &self.table.entries()[i as usize].order,
        }
    }

    /// The entry of the tenant holding `slot` now: `None` once a reload removed it (its
    /// bundles still in flight keep their slot, not a policy).
    pub fn entry(&self, slot: u16) -> Option<&Entry> {
        match self.slots[usize::from(slot)].entry {
            u32::MAX => self.table.default_entry().filter(|e| e.slot == slot),
            i => self
                .table
                .entries()
                .get(i as usize)
                .filter(|e| e.slot == slot),
        }
    }

    /// Whether `peer` is a trusted proxy: the client is the one its `X-Forwarded-For` names.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        self.table.trusts(peer)
    }

    /// Who is asking, for a call that admits nothing (bundle statuses): the tenant's slot, or
    /// why it may not ask (unknown and no default: 401; disabled: 403).
    pub fn identify(&self, claim: Claim<'_>, port: Port) -> Result<u16, Denied> {
        let listener = listener(claim.arrived_on.unwrap_or(port));
        // Refusals counted as a bundle's are: the counters are of requests, not of bundles.
        match self.table.identify(claim.key, claim.peer, listener) {
            Found::Tenant(e) | Found::Default(e) if e.enabled => Ok(e.slot),
            Found::Tenant(e) | Found::Default(e) => {
                self.stats.refused(e.slot, Refused::Disabled);
                Err(Denied::Disabled { slot: e.slot })
            }
            Found::Unknown { key_given } => {
                self.stats.unknown();
                Err(Denied::Unknown { key_given })
            }
        }
    }

    /// The decision table for one sendBundle or sendTransaction: `Ok` holds one bundle of the
    /// tenant's share (given back by [`Tenancy::release`], or when the bundle ends).
    pub fn check(&self, claim: Claim<'_>, port: Port, now: Instant) -> Result<Pass, Denied> {
        let listener = listener(claim.arrived_on.unwrap_or(port));
        let e = match self.table.identify(claim.key, claim.peer, listener) {
            Found::Tenant(e) | Found::Default(e) => e,
            Found::Unknown { key_given } => {
                self.stats.unknown();
                return Err(Denied::Unknown { key_given });
            }
        };
        let slot = e.slot;
        let refuse = |why: Refused, d: Denied| {
            self.stats.refused(slot, why);
            Err(d)
        };
        if !e.enabled {
            return refuse(Refused::Disabled, Denied::Disabled { slot });
        }
        if let Port::Pinned(r) = port
            && e.mask & (1 << r) == 0
        {
            return refuse(Refused::Region, Denied::Region { slot, region: r });
        }
        if let Some((g, limit)) = self.slots[usize::from(slot)].gcra
            && let Err(wait) = self.stats.take_rate(slot, g, now.0)
        {
            let ms = self.rate.to_ns(Ticks(wait)).div_ceil(1_000_000).max(1);
            return refuse(
                Refused::Rate,
                Denied::Rate {
                    slot,
                    limit,
                    retry_after_ms: ms,
                },
            );
        }
        if let Some(limit) = self.slots[usize::from(slot)].global
            && !self.stats.take_leased(slot)
        {
            return refuse(Refused::Global, global_denied(&self.stats, slot, limit));
        }
        let share =
            self.stats
                .take_share(slot, e.in_flight_min, e.in_flight_max, self.table.pool());
        if share.is_err() {
            // Refused for want of room: the rate it would have spent is not spent.
            self.refund(slot);
        }
        match share {
            // Every slot of the arena is taken: the in-flight cap, as the arena's own check
            // would find (counted as the cap, and answered as it). Read on refusals only.
            Err(ShareFull::Ceiling) if e.in_flight_max >= self.table.arena() => {
                refuse(Refused::Cap, Denied::Cap { slot })
            }
            Err(ShareFull::Pool) if self.table.pool() >= self.table.arena() => {
                refuse(Refused::Cap, Denied::Cap { slot })
            }
            Ok(()) => Ok(Pass {
                slot,
                mask: e.mask,
                strategy: e.strategy,
                fan_out: e.fan_out,
                group: e.group,
            }),
            Err(full) => refuse(
                Refused::Share,
                Denied::Share {
                    slot,
                    in_flight: self.stats.in_flight(slot),
                    full,
                    limit: match full {
                        ShareFull::Ceiling => e.in_flight_max,
                        ShareFull::Pool => e.in_flight_min,
                    },
                },
            ),
        }
    }

    /// A call of tenant slot `slot` that spends an engine call but carries no bundle (a
    /// forwarded status query) takes from the tenant's request rate as a bundle does.
    pub fn take_rate(&self, slot: u16, now: Instant) -> Result<(), Denied> {
        let rules = self.slots[usize::from(slot)];
        if let Some((g, limit)) = rules.gcra
            && let Err(wait) = self.stats.take_rate(slot, g, now.0)
        {
            self.stats.refused(slot, Refused::Rate);
            return Err(Denied::Rate {
                slot,
                limit,
                retry_after_ms: self.rate.to_ns(Ticks(wait)).div_ceil(1_000_000).max(1),
            });
        }
        if let Some(limit) = rules.global
            && !self.stats.take_leased(slot)
        {
            self.stats.refused(slot, Refused::Global);
            return Err(global_denied(&self.stats, slot, limit));
        }
        Ok(())
    }

    /// The pass's bundle never was (no slot, or a bad request): its share goes back.
    pub fn release(&self, pass: &Pass) {
        self.stats.release(pass.slot);
    }

    /// The pass's request was refused for want of room (the in-flight cap, its region gone):
    /// its share goes back, and what it took of the tenant's rate and global rate too. A bad
    /// request is only [`Tenancy::release`]d: it spent the rate, so a flood of them is paced.
    pub fn refuse(&self, pass: &Pass) {
        self.stats.release(pass.slot);
        self.refund(pass.slot);
    }

    fn refund(&self, slot: u16) {
        let rules = self.slots[usize::from(slot)];
        if let Some((g, _)) = rules.gcra {
            self.stats.refund_rate(slot, g);
        }
        if rules.global.is_some() {
            self.stats.refund_leased(slot);
        }
    }
}

/// A global rate used up: the lease comes back with the next second (leases are per second of
/// the wall clock, as the store keys them), so that is the wait. Reading the wall clock is a
/// vDSO call, no syscall, and only a refusal pays it.
fn global_denied(stats: &TenantStats, slot: u16, limit: u32) -> Denied {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let second = ms / crate::quota::WINDOW_MS;
    let retry_after_ms = if stats.lease_spent(slot) == second {
        crate::quota::WINDOW_MS - ms % crate::quota::WINDOW_MS
    } else {
        // More of this second is on its way: the lease thread asks as the balance runs low.
        LEASE_REFILL_MS
    };
    Denied::Rate {
        slot,
        limit,
        retry_after_ms,
    }
}

/// The wait a refusal names while more of the second's global rate is on its way: a lease
/// thread's tick and a store round trip, with room.
pub const LEASE_REFILL_MS: u64 = 10;
