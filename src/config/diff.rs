//! What a reload changes, read from two configs: what the running relay applies between loop
//! iterations, and what it leaves as it was until a restart (its threads, arena, listeners and
//! connection tables are sized and opened at start). Each line names the key and both values,
//! so the reload's log says exactly what happened.
//!
//! What it is NOT: where changes are applied (the reactor threads do, from the snapshot).

use std::collections::{HashMap, HashSet};
use std::fmt::Display;

use super::model::{Config, Region, SHARED_GROUP, Source, SourceId};

/// The [`SourceId`]s of `sources`: sources are matched across configs by these, so a proxy
/// whose password changed is the same source.
fn ids(sources: &[Source]) -> HashSet<SourceId> {
    sources.iter().map(Source::id).collect()
}

/// The keys a reload applies and the ones it keeps, as log phrases.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Applied by every reactor thread at its next loop iteration.
    pub applied: Vec<String>,
    /// Left as started: they take a restart (`upgrade` or `systemctl restart`).
    pub kept: Vec<String>,
}

impl Changes {
    /// `started` is what the relay was sized and opened from (the restart-only keys are read
    /// against it, since no reload changed them); `running` the last config applied.
    pub fn between(started: &Config, running: &Config, next: &Config) -> Changes {
        let mut c = Changes::default();
        c.restart_only(started, next);
        c.live(started, running, next);
        c
    }

    /// Why a relay started from `started` cannot run `next` at all: none of its regions is
    /// left, none of its sources, an egress group an enabled tenant sends through would keep
    /// none of its sources, or (bundles not moving between threads) a thread would keep none
    /// of its own sources, or `next` gives a group fewer sources than threads (as a start
    /// would refuse it), so bundles it accepts would expire. The key and the reason; `None`
    /// when it can.
    pub fn refusal(started: &Config, next: &Config) -> Option<(&'static str, String)> {
        if !started
            .regions
            .iter()
            .any(|r| next.regions.iter().any(|n| n.name == r.name))
        {
            let names: Vec<&str> = started.regions.iter().map(|r| r.name.as_str()).collect();
            return Some((
                "region",
                format!(
                    "none of the regions the relay runs ({}) is listed: regions it did not start \
                     with take a restart",
                    names.join(", ")
                ),
            ));
        }
        let listed = ids(&next.egress.sources);
        let sources = &started.egress.sources;
        if !sources.iter().any(|x| listed.contains(&x.id())) {
            return Some((
                "egress",
                format!(
                    "none of the {} sources the relay runs is listed: sources it did not start \
                     with take a restart",
                    sources.len()
                ),
            ));
        }
        // Groups are restart-only, and so are sources the relay did not start with: a group
        // runs the sources it started with that `next` still lists. One an enabled tenant of
        // `next` sends through must keep one, or that tenant's bundles would be answered and
        // then expire.
        let counts = started.egress.group_counts();
        let mut kept = vec![0usize; counts.len()];
        for (i, x) in sources.iter().enumerate() {
            if listed.contains(&x.id()) {
                kept[usize::from(started.egress.group_of(i))] += 1;
            }
        }
        let tenants = &next.tenants;
        let policies = tenants
            .list
            .iter()
            .map(|t| (format!("tenant {}", t.name), &t.policy))
            .chain(
                tenants
                    .default
                    .iter()
                    .map(|p| ("the default tenant".to_string(), p)),
            );
        for (who, p) in policies.filter(|(_, p)| p.enabled) {
            let g = match p.egress.as_deref() {
                None | Some(SHARED_GROUP) => 0,
                Some(n) => match started.egress.groups.iter().position(|x| x == n) {
                    Some(i) => i + 1,
                    // A group the relay did not start with: the tenant table's to refuse.
                    None => continue,
                },
            };
            if counts[g] > 0 && kept[g] == 0 {
                let first = (0..sources.len())
                    .find(|&i| usize::from(started.egress.group_of(i)) == g)
                    .map(|i| &sources[i])
                    .expect("a group with sources has a first");
                return Some((
                    "egress",
                    format!(
                        "egress group {} would keep none of the {} sources it runs ({first} …), \
                         and {who} sends through it: sources the relay did not start with take a \
                         restart, so its bundles could leave through no pair; keep at least one \
                         of them, or restart with the new pool",
                        started.egress.group_name(g as u8),
                        counts[g]
                    ),
                ));
            }
        }
        if !started.handoffs {
            let threads = started.threads.max(1);
            // The file itself as a start would hold it: accepted, the next restart (or
            // reboot) would refuse it and leave the relay down.
            let groups: Vec<u8> = (0..next.egress.sources.len())
                .map(|i| next.egress.group_of(i))
                .collect();
            if let Some((_, why)) =
                super::model::group_shortfall(&groups, &next.egress.groups, threads)
            {
                return Some(("egress", why));
            }
            for t in 0..threads {
                // The split the relay's threads were given (by group, when there are groups).
                let (mine, _) = started.egress.thread_share(threads, t);
                let own: Vec<&Source> = mine.iter().map(|&i| &sources[i]).collect();
                if own.is_empty() {
                    continue;
                }
                if !own.iter().any(|x| listed.contains(&x.id())) {
                    return Some((
                        "egress",
                        format!(
                            "thread {t} would keep none of its {} sources ({} …) and, with \
                             handoffs off, could send none of the bundles it accepts: keep at \
                             least one of them, or restart with the new pool",
                            own.len(),
                            own[0]
                        ),
                    ));
                }
                // Nor of one group's: the bundles of that group's tenants it accepts.
                for g in 0..=started.egress.groups.len() {
                    let of_group: Vec<&Source> = mine
                        .iter()
                        .filter(|&&i| usize::from(started.egress.group_of(i)) == g)
                        .map(|&i| &sources[i])
                        .collect();
                    if !of_group.is_empty() && !of_group.iter().any(|x| listed.contains(&x.id())) {
                        let name = match g.checked_sub(1) {
                            Some(i) => format!("egress group {}", started.egress.groups[i]),
                            None => "the shared addresses".to_string(),
                        };
                        return Some((
                            "egress",
                            format!(
                                "thread {t} would keep none of its {} sources of {name} ({} …) \
                                 and, with handoffs off, could send none of the bundles of that \
                                 group it accepts: keep at least one of them, or restart with the \
                                 new pool",
                                of_group.len(),
                                of_group[0]
                            ),
                        ));
                    }
                }
            }
        }
        None
    }

    fn keep<T: PartialEq + Display>(&mut self, key: &str, was: T, now: T) {
        if was != now {
            self.kept.push(format!("{key} {was} → {now}"));
        }
    }

    fn apply<T: PartialEq + Display>(&mut self, key: &str, was: T, now: T) {
        if was != now {
            self.applied.push(format!("{key} {was} → {now}"));
        }
    }

    /// The record of recent bundles is sized at start for the sends a second the regions'
    /// intervals then allow, `record_bundles_max` at most ([`crate::journal::capacity_for`]):
    /// shorter intervals (of the regions the relay runs) fill it sooner, so it covers less
    /// than `record_keep_s` until a restart, and status calls forget bundles sooner. Its
    /// per-thread floors only add, hence "as little as".
    fn record_sizing(&mut self, s: &Config, n: &Config) {
        let sources = s.egress.sources.len() as f64;
        let per_s = |c: &Config| -> f64 {
            c.regions
                .iter()
                .filter(|r| s.regions.iter().any(|x| x.name == r.name))
                .map(|r| sources * 1_000.0 / r.interval_ms.max(1) as f64)
                .sum()
        };
        let (was, now) = (per_s(s), per_s(n));
        if s.record_keep_s > 0 && s.record_bundles_max > 0 && now > was * 1.001 {
            let records = (f64::from(s.record_keep_s) * was).min(f64::from(s.record_bundles_max));
            let covers = (records / now).floor();
            self.kept.push(format!(
                "record: sized at start for the regions' intervals then; at the shorter ones it \
                 may hold as little as {covers} s of bundles, not record_keep_s's {} s",
                s.record_keep_s
            ));
        }
    }

    fn restart_only(&mut self, s: &Config, n: &Config) {
        let searcher = |c: &Config| c.auth.as_ref().map(|k| k.pubkey_b58().to_string());
        self.keep("auth.keypair_file", Opt(&searcher(s)), Opt(&searcher(n)));
        self.keep("threads", s.threads, n.threads);
        self.keep("pin_threads", s.pin_threads, n.pin_threads);
        self.keep("reactor.mode", s.reactor.mode, n.reactor.mode);
        self.keep(
            "reactor.napi_busy_poll_us",
            s.reactor.napi_busy_poll_us,
            n.reactor.napi_busy_poll_us,
        );
        self.keep("handoffs", s.handoffs, n.handoffs);
        let ledger = |c: &Config| c.egress.ledger.as_ref().map(|p| p.display().to_string());
        self.keep("egress.ledger", Opt(&ledger(s)), Opt(&ledger(n)));
        self.keep("arena_slots", s.arena_slots, n.arena_slots);
        self.keep("record_keep_s", s.record_keep_s, n.record_keep_s);
        self.keep(
            "record_bundles_max",
            s.record_bundles_max,
            n.record_bundles_max,
        );
        self.record_sizing(s, n);
        self.keep("tenants_max", s.tenants.max, n.tenants.max);
        self.keep(
            "intake.rotating",
            Addr(s.intake.rotating),
            Addr(n.intake.rotating),
        );
        self.keep(
            "intake.head_bytes_max",
            s.intake.head_bytes_max,
            n.intake.head_bytes_max,
        );
        self.keep(
            "intake.body_bytes_max",
            s.intake.body_bytes_max,
            n.intake.body_bytes_max,
        );
        self.keep(
            "intake.connections_max",
            s.intake.connections_max,
            n.intake.connections_max,
        );
        self.keep(
            "intake.connections_per_source_max",
            s.intake.connections_per_source_max,
            n.intake.connections_per_source_max,
        );
        self.keep("egress.connect", Mode(s), Mode(n));
        self.keep("admin.listen", Addr(s.admin), Addr(n.admin));
        self.keep("admin.metrics", s.metrics, n.metrics);
        for r in &n.regions {
            match s.regions.iter().find(|o| o.name == r.name) {
                None => self.kept.push(format!("region {} added", r.name)),
                Some(o) => self.region_shape(o, r),
            }
        }
        let started = ids(&s.egress.sources);
        let added: Vec<&Source> = n
            .egress
            .sources
            .iter()
            .filter(|x| !started.contains(&x.id()))
            .collect();
        if let Some(first) = added.first() {
            self.kept.push(format!(
                "egress: {} source{} added (first {first})",
                added.len(),
                if added.len() == 1 { "" } else { "s" }
            ));
        }
        self.groups(&s.egress, &n.egress);
    }

    /// Egress groups added, removed, or holding other sources of this relay: the limiter's
    /// lanes and the threads' split were sized by the groups the relay started with. Which
    /// group a tenant names is the tenant table's, applied live.
    fn groups(&mut self, s: &super::model::Egress, n: &super::model::Egress) {
        let names = |e: &super::model::Egress, of: &super::model::Egress| -> Vec<String> {
            e.groups
                .iter()
                .filter(|g| !of.groups.contains(g))
                .cloned()
                .collect()
        };
        let (added, removed) = (names(n, s), names(s, n));
        if !added.is_empty() {
            self.kept
                .push(format!("egress groups: {} added", added.join(", ")));
        }
        if !removed.is_empty() {
            self.kept
                .push(format!("egress groups: {} removed", removed.join(", ")));
        }
        // One pass over each pool, not one per group.
        let members = |e: &super::model::Egress| -> Vec<HashSet<SourceId>> {
            let mut of = vec![HashSet::new(); e.groups.len() + 1];
            for (i, x) in e.sources.iter().enumerate() {
                of[usize::from(e.group_of(i))].insert(x.id());
            }
            of
        };
        let (was, now) = (members(s), members(n));
        for (j, name) in n.groups.iter().enumerate() {
            let Some(i) = s.groups.iter().position(|g| g == name) else {
                continue;
            };
            let (was, now) = (&was[i + 1], &now[j + 1]);
            if was != now {
                self.kept.push(format!(
                    "egress group {name}: membership changed ({} → {} sources)",
                    was.len(),
                    now.len()
                ));
            }
        }
    }

    /// Where a region's connections go and what they say: its pairs' sockets and TLS were set
    /// up from these.
    fn region_shape(&mut self, o: &Region, r: &Region) {
        let key = |k: &str| format!("region {}.{k}", r.name);
        self.keep(&key("host"), &o.host, &r.host);
        self.keep(&key("port"), o.port, r.port);
        if o.literal || r.literal {
            self.keep(&key("connect"), List(&o.addrs), List(&r.addrs));
        }
        self.keep(&key("tls"), o.tls, r.tls);
        self.keep(&key("sni"), Opt(&o.sni), Opt(&r.sni));
        self.keep(
            &key("ca_file"),
            Opt(&o.ca_file.as_ref().map(|p| p.display().to_string())),
            Opt(&r.ca_file.as_ref().map(|p| p.display().to_string())),
        );
        if let Some(path) = &r.ca_file
            && o.ca_file.as_ref() == Some(path)
            && o.ca_digest != r.ca_digest
        {
            self.kept.push(format!(
                "{}: the certificates in {} changed",
                key("ca_file"),
                path.display()
            ));
        }
        self.keep(&key("authority"), &o.authority, &r.authority);
        self.keep(
            &key("transactions_path"),
            &o.transactions_path,
            &r.transactions_path,
        );
        self.keep(&key("bundles_path"), &o.bundles_path, &r.bundles_path);
        self.keep(&key("pinned"), Addr(o.pinned), Addr(r.pinned));
    }

    fn live(&mut self, s: &Config, o: &Config, n: &Config) {
        self.apply(
            "bundle_max_age_ms",
            o.bundle_max_age_ms,
            n.bundle_max_age_ms,
        );
        self.apply(
            "upstream_timeout_ms",
            o.upstream_timeout_ms,
            n.upstream_timeout_ms,
        );
        self.apply("leader.poll_ms", o.leader.poll_ms, n.leader.poll_ms);
        self.apply("leader.wait_ms", o.leader.wait_ms, n.leader.wait_ms);
        let (oi, ni) = (&o.intake, &n.intake);
        self.apply(
            "intake.head_timeout_ms",
            oi.head_timeout_ms,
            ni.head_timeout_ms,
        );
        self.apply(
            "intake.idle_timeout_ms",
            oi.idle_timeout_ms,
            ni.idle_timeout_ms,
        );
        self.apply(
            "intake.send_timeout_ms",
            oi.send_timeout_ms,
            ni.send_timeout_ms,
        );
        self.apply("intake.unready_ms", oi.unready_ms, ni.unready_ms);
        self.apply(
            "intake.trusted_proxies",
            List(&oi.trusted_proxies),
            List(&ni.trusted_proxies),
        );
        let (oe, ne) = (&o.egress, &n.egress);
        self.apply(
            "egress.reconnect_min_ms",
            oe.reconnect_min_ms,
            ne.reconnect_min_ms,
        );
        self.apply(
            "egress.reconnect_max_ms",
            oe.reconnect_max_ms,
            ne.reconnect_max_ms,
        );
        self.apply(
            "egress.connect_timeout_ms",
            oe.connect_timeout_ms,
            ne.connect_timeout_ms,
        );
        self.apply(
            "egress.handshakes_max",
            oe.handshakes_max,
            ne.handshakes_max,
        );
        self.apply("egress.ping_idle_ms", oe.ping_idle_ms, ne.ping_idle_ms);
        self.apply(
            "egress.ping_timeout_ms",
            oe.ping_timeout_ms,
            ne.ping_timeout_ms,
        );
        self.apply(
            "egress.tcp_user_timeout_ms",
            oe.tcp_user_timeout_ms,
            ne.tcp_user_timeout_ms,
        );
        for r in &n.regions {
            let Some(p) = o.regions.iter().find(|p| p.name == r.name) else {
                continue;
            };
            self.apply(
                &format!("region {}.interval_ms", r.name),
                p.interval_ms,
                r.interval_ms,
            );
            self.apply(&format!("region {}.burst", r.name), p.burst, r.burst);
        }
        for p in &o.regions {
            if n.regions.iter().any(|r| r.name == p.name) {
                continue;
            }
            if s.regions.iter().any(|r| r.name == p.name) {
                self.applied.push(format!(
                    "region {} removed: no new bundles, its waiting ones still go, its \
                     connections close once idle",
                    p.name
                ));
            } else {
                // Added by a reload, so waiting for a restart: nothing of it ever ran.
                self.kept
                    .push(format!("region {}: no longer added (never ran)", p.name));
            }
        }
        for r in &n.regions {
            let ran = s.regions.iter().any(|p| p.name == r.name);
            if ran && !o.regions.iter().any(|p| p.name == r.name) {
                self.applied
                    .push(format!("region {} back: its pairs connect again", r.name));
            }
        }
        let next = ids(&ne.sources);
        let was: HashMap<SourceId, &Source> = oe.sources.iter().map(|x| (x.id(), x)).collect();
        let started = ids(&s.egress.sources);
        let removed = oe
            .sources
            .iter()
            .filter(|x| !next.contains(&x.id()) && started.contains(&x.id()))
            .count();
        let withdrawn = oe
            .sources
            .iter()
            .filter(|x| !next.contains(&x.id()) && !started.contains(&x.id()))
            .count();
        if withdrawn > 0 {
            self.kept.push(format!(
                "egress: {withdrawn} {} no longer added (never ran)",
                if withdrawn == 1 { "source" } else { "sources" }
            ));
        }
        let back = ne
            .sources
            .iter()
            .filter(|x| !was.contains_key(&x.id()) && started.contains(&x.id()))
            .count();
        // A running proxy's new password: the same source, whose pairs present it from their
        // next connect on. The connections open were let in with the old one and stay.
        let repassworded: Vec<&Source> = ne
            .sources
            .iter()
            .filter(|x| {
                let id = x.id();
                started.contains(&id) && was.get(&id).is_some_and(|o| *o != *x)
            })
            .collect();
        if removed > 0 {
            self.applied.push(format!(
                "egress: {removed} source{} removed: their calls in flight finish, then their \
                 connections close",
                if removed == 1 { "" } else { "s" }
            ));
        }
        if back > 0 {
            self.applied.push(format!(
                "egress: {back} source{} listed again: their pairs connect again",
                if back == 1 { "" } else { "s" }
            ));
        }
        match repassworded.as_slice() {
            [] => {}
            [one] => self.applied.push(format!(
                "egress: {one} password changed: new connections through it use the new one, \
                 those open stay open"
            )),
            [first, ..] => self.applied.push(format!(
                "egress: {} passwords changed (first {first}): new connections through their \
                 proxies use the new ones, those open stay open",
                repassworded.len()
            )),
        }
        self.tenants(
            (&o.tenants, &o.region_names()),
            (&n.tenants, &n.region_names()),
        );
        self.quota(o.quota.as_ref(), n.quota.as_ref());
        if o.tenants_from != n.tenants_from {
            self.applied.push(match &n.tenants_from {
                Some(f) => format!(
                    "tenants_from: {} every {} ms (timeout {} ms)",
                    f.url, f.every_ms, f.timeout_ms
                ),
                None => "tenants_from: none; the tenants are the file's".to_string(),
            });
        }
    }

    /// `[quota]`: the lease thread reads it every tick, so all of it applies live.
    fn quota(&mut self, o: Option<&super::quota::Quota>, n: Option<&super::quota::Quota>) {
        match (o, n) {
            (None, None) => {}
            (None, Some(q)) => self.applied.push(format!(
                "quota: tenants' global_rate leased from redis {}",
                q.redis
            )),
            (Some(_), None) => self
                .applied
                .push("quota: none; no store to lease global rates from".to_string()),
            (Some(o), Some(n)) => {
                self.apply("quota.redis", &o.redis, &n.redis);
                self.apply("quota.key_prefix", &o.key_prefix, &n.key_prefix);
                self.apply(
                    "quota.lease_chunk",
                    Opt(&o.lease_chunk.map(|c| c.to_string())),
                    Opt(&n.lease_chunk.map(|c| c.to_string())),
                );
                self.apply("quota.timeout_ms", o.timeout_ms, n.timeout_ms);
            }
        }
    }

    /// Tenants added, removed and changed (by name; their keys are never named). Each comes
    /// with its config's region names: a policy's regions are places in that list, compared
    /// by the names they stand for (regions listed in another order change no tenant).
    fn tenants(
        &mut self,
        (o, o_regions): (&super::tenants::Tenants, &[String]),
        (n, n_regions): (&super::tenants::Tenants, &[String]),
    ) {
        use super::tenants::{Policy, Tenant};
        let differs = |a: &Policy, b: &Policy| {
            let bare = |p: &Policy| Policy {
                regions: Vec::new(),
                ..p.clone()
            };
            let named = |p: &Policy, names: &[String]| -> Vec<String> {
                p.regions
                    .iter()
                    .map(|&r| names[usize::from(r)].clone())
                    .collect()
            };
            bare(a) != bare(b) || named(a, o_regions) != named(b, n_regions)
        };
        let (mut added, mut removed, mut changed) = (Vec::new(), Vec::new(), Vec::new());
        // By name: O(n) for a reload of n tenants.
        let before: std::collections::HashMap<&str, &super::tenants::Tenant> =
            o.list.iter().map(|t| (t.name.as_str(), t)).collect();
        let after: std::collections::HashSet<&str> =
            n.list.iter().map(|t| t.name.as_str()).collect();
        for t in &n.list {
            match before.get(t.name.as_str()) {
                None => added.push(t.name.clone()),
                // All but the policy as they were, and the policy by its regions' names.
                Some(p)
                    if Tenant {
                        policy: t.policy.clone(),
                        ..(*p).clone()
                    } != *t
                        || differs(&p.policy, &t.policy) =>
                {
                    let (a, b) = (&p.policy, &t.policy);
                    let keys: Vec<&str> = [
                        ("keys", p.keys != t.keys),
                        ("cidrs", p.cidrs != t.cidrs),
                        ("ports", p.ports != t.ports),
                        ("enabled", a.enabled != b.enabled),
                        (
                            "regions",
                            differs(&bare_but_regions(a), &bare_but_regions(b)),
                        ),
                        ("rotating", a.strategy != b.strategy),
                        ("fan_out", a.fan_out != b.fan_out),
                        ("in_flight_min", a.in_flight_min != b.in_flight_min),
                        ("in_flight_max", a.in_flight_max != b.in_flight_max),
                        ("rate", a.rate != b.rate),
                        ("global_rate", a.global_rate != b.global_rate),
                        (
                            "bundle_max_age_ms",
                            a.bundle_max_age_ms != b.bundle_max_age_ms,
                        ),
                        ("egress", a.egress != b.egress),
                    ]
                    .into_iter()
                    .filter_map(|(k, d)| d.then_some(k))
                    .collect();
                    changed.push(format!("{}: {}", t.name, keys.join(", ")));
                }
                Some(_) => {}
            }
        }
        for p in &o.list {
            if !after.contains(p.name.as_str()) {
                removed.push(p.name.clone());
            }
        }
        if !(added.is_empty() && removed.is_empty() && changed.is_empty()) {
            self.applied.push(format!(
                "tenants: {} added{}, {} removed{}, {} changed{}; {} listed",
                added.len(),
                names(&added, ""),
                removed.len(),
                names(&removed, "; their bundles in flight finish"),
                changed.len(),
                names(&changed, ""),
                n.list.len()
            ));
        }
        let default_changed = match (&o.default, &n.default) {
            (Some(a), Some(b)) => differs(a, b),
            (a, b) => a.is_some() != b.is_some(),
        };
        if default_changed {
            self.applied.push(match &n.default {
                Some(p) if n.list.is_empty() && *p == super::tenants::Policy::open() => {
                    "default_tenant: none and no tenant listed: every request is served, no \
                     tenant checks"
                        .to_string()
                }
                Some(_) => "default_tenant: its policy applied".to_string(),
                None => {
                    "default_tenant: none; requests no tenant matches are refused (401)".to_string()
                }
            });
        }
    }
}

struct Addr(Option<std::net::SocketAddr>);

impl Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("off"),
        }
    }
}

impl PartialEq for Addr {
    fn eq(&self, o: &Addr) -> bool {
        self.0 == o.0
    }
}

/// A list as `a,b,c` (`none` when empty).
struct List<'a, T>(&'a [T]);

impl<T: Display> Display for List<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

impl<T: PartialEq> PartialEq for List<'_, T> {
    fn eq(&self, o: &List<'_, T>) -> bool {
        self.0 == o.0
    }
}

struct Opt<'a>(&'a Option<String>);

impl Display for Opt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_deref().unwrap_or("(default)"))
    }
}

impl PartialEq for Opt<'_> {
    fn eq(&self, o: &Opt<'_>) -> bool {
        self.0 == o.0
    }
}

struct Mode<'a>(&'a Config);

impl Display for Mode<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0.egress.connect {
            super::model::ConnectMode::Eager => "eager",
            super::model::ConnectMode::Lazy => "lazy",
        })
    }
}

impl PartialEq for Mode<'_> {
    fn eq(&self, o: &Mode<'_>) -> bool {
        self.0.egress.connect == o.0.egress.connect
    }
}

/// `p` with only its regions kept, for [`Changes::tenants`] to say whether they changed.
fn bare_but_regions(p: &super::tenants::Policy) -> super::tenants::Policy {
    super::tenants::Policy {
        regions: p.regions.clone(),
        ..super::tenants::Policy::open()
    }
}

/// ` (a; b; c)`, the first [`TENANT_NAMES_MAX`] of `list` and how many more, then `tail`;
/// empty for none.
fn names(list: &[String], tail: &str) -> String {
    if list.is_empty() {
        return String::new();
    }
    let shown = &list[..list.len().min(TENANT_NAMES_MAX)];
    let more = match list.len() - shown.len() {
        0 => String::new(),
        n => format!("; and {n} more"),
    };
    format!(" ({}{more}{tail})", shown.join("; "))
}

/// Tenants named per kind of change in a reload's summary line: a large tenant list's edit
/// names the first few and counts the rest.
const TENANT_NAMES_MAX: usize = 8;
