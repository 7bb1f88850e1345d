//! Where a region's connections go: its addresses, resolved at startup and again when a
//! connection to it ends.
//!
//! Block engines sit behind load balancers whose addresses move, so a host name is looked up
//! again (with the system resolver, on a thread of its own, never in a reactor) once any pair's
//! connection to the region ends or fails, at most once per [`RESOLVE_INTERVAL_MIN_MS`]. The
//! reactors read the current list with one atomic load when they connect; a changed list is
//! logged. Regions given as literal addresses are never looked up.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

/// A host is looked up at most this often, however many connections end meanwhile: a region
/// that is down makes every pair reconnect, and the resolver must not be hammered for it.
pub const RESOLVE_INTERVAL_MIN_MS: u64 = 1_000;
/// How often the resolver thread looks for stale hosts and a stop request.
const POLL_MS: u64 = 100;

/// One region's current addresses.
pub struct HostAddrs {
    region: String,
    /// The name to look up again, or `None` when the addresses were given literally.
    host: Option<(String, u16)>,
    /// Every address, and how many at its head the last lookup gave (those after it are an
    /// earlier lookup's, kept for a family the last answer lacked).
    addrs: ArcSwap<(Vec<SocketAddr>, usize)>,
    stale: AtomicBool,
}

impl std::fmt::Debug for HostAddrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostAddrs")
            .field("region", &self.region)
            .field("host", &self.host)
            .field("addrs", &self.addrs.load().0)
            .finish()
    }
}

impl HostAddrs {
    /// Addresses that never change (literal `connect` addresses, IP hosts, tests).
    pub fn fixed(region: &str, addrs: Vec<SocketAddr>) -> Arc<HostAddrs> {
        assert!(!addrs.is_empty(), "a region needs an address");
        Arc::new(HostAddrs {
            region: region.to_string(),
            host: None,
            addrs: ArcSwap::from_pointee((addrs.clone(), addrs.len())),
            stale: AtomicBool::new(false),
        })
    }

    /// `host:port`, already resolved to `addrs` at startup, looked up again as connections end.
    pub fn named(region: &str, host: &str, port: u16, addrs: Vec<SocketAddr>) -> Arc<HostAddrs> {
        assert!(!addrs.is_empty(), "a region needs an address");
        Arc::new(HostAddrs {
            region: region.to_string(),
            host: Some((host.to_string(), port)),
            addrs: ArcSwap::from_pointee((addrs.clone(), addrs.len())),
            stale: AtomicBool::new(false),
        })
    }

    /// The address for the pair of the `i`-th source of its kind (local IPv4, local IPv6,
    /// proxy) after `failed` of its connections failed at the address they went to: pairs
    /// spread over every address the name has of the source's
    /// family (`Some(true)`: IPv4; `None`: any, for a proxy that dials it, which is given only
    /// what the last lookup found). `None` when the name has no address of that family.
    ///
    /// A pair starts at its own address, `i`-th of the `n`, and each failure moves it on: DNS
    /// may go on listing an address that is down, and a pair held to it would stay down. The
    /// next address is not simply the one after: each pair of a dead address starts its walk
    /// at another of the others (by `i / n`), so they spread over the rest instead of doubling
    /// one, and the walk goes through every other address once before it comes back.
    pub fn pick(&self, i: u32, failed: u32, v4: Option<bool>) -> Option<SocketAddr> {
        let a = self.addrs.load();
        let all = match v4 {
            Some(_) => &a.0[..],
            None => &a.0[..a.1],
        };
        let fits = |s: &&SocketAddr| v4.is_none_or(|v4| s.is_ipv4() == v4);
        let n = all.iter().filter(fits).count();
        if n == 0 {
            return None;
        }
        let (i, k) = (i as usize, failed as usize % n);
        let others = n - 1;
        let off = if k == 0 {
            0
        } else {
            1 + (i / n % others + k - 1) % others
        };
        all.iter().filter(fits).nth((i % n + off) % n).copied()
    }

    /// Every current address.
    pub fn current(&self) -> Vec<SocketAddr> {
        self.addrs.load().0.clone()
    }

    /// A connection to this region ended: look the name up again soon.
    pub fn mark_stale(&self) {
        if self.host.is_some() && !self.stale.load(Ordering::Relaxed) {
            self.stale.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a lookup of its name is asked for and not yet done.
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    pub fn is_named(&self) -> bool {
        self.host.is_some()
    }

    /// Looks the name up now and applies what it found (see [`HostAddrs::apply`]); a failed
    /// lookup keeps the old list. Returns a line for the log when something changed or failed.
    pub fn refresh(&self) -> Option<String> {
        let (host, port) = self.host.as_ref()?;
        match (host.as_str(), *port).to_socket_addrs() {
            Ok(found) => self.apply(host, *port, found.collect()),
            Err(e) => Some(format!(
                "region {}: {host} does not resolve ({e}); keeping {:?}",
                self.region,
                self.addrs.load().0
            )),
        }
    }

    /// What a lookup of `host:port` found replaces the list when it is another set: the same
    /// addresses in another order (DNS servers rotate them) change nothing, so pairs keep
    /// theirs. Better a stale address than none: an empty answer keeps the old list, and one
    /// with no address of a family the old list had (a lost A or AAAA reply) keeps the old
    /// addresses of that family after the new ones, since a source of that family has nowhere
    /// else to go and its failed connects ask for the next lookup.
    pub fn apply(&self, host: &str, port: u16, mut found: Vec<SocketAddr>) -> Option<String> {
        let held = self.addrs.load_full();
        let (old, old_fresh) = (&held.0, held.1);
        if found.is_empty() {
            return Some(format!(
                "region {}: {host} resolved to nothing; keeping {old:?}",
                self.region
            ));
        }
        let fresh = found.len();
        let mut kept = Vec::new();
        for (v4, family) in [(true, "IPv4"), (false, "IPv6")] {
            if !found.iter().any(|a| a.is_ipv4() == v4) && old.iter().any(|a| a.is_ipv4() == v4) {
                let stale: Vec<SocketAddr> =
                    old.iter().filter(|a| a.is_ipv4() == v4).copied().collect();
                kept.push(format!(
                    "no {family} address in the answer, keeping {stale:?}"
                ));
                found.extend(stale);
            }
        }
        let set = |l: &[SocketAddr]| {
            let mut l = l.to_vec();
            l.sort_unstable();
            l
        };
        if set(old) == set(&found) && set(&old[..old_fresh]) == set(&found[..fresh]) {
            return None;
        }
        let mut line = format!(
            "region {}: {host}:{port} now resolves to {found:?} (was {old:?})",
            self.region
        );
        if !kept.is_empty() {
            line = format!("{line}; {}", kept.join("; "));
        }
        self.addrs.store(Arc::new((found, fresh)));
        Some(line)
    }
}

/// The resolver thread: looks up stale names until `stop`, which it reads between lookups (a
/// stop does not wait for it: see `Relay::shutdown_by_thread`).
pub fn spawn(hosts: Vec<Arc<HostAddrs>>, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("resolver".into())
        .spawn(move || {
            let mut last = vec![None::<Instant>; hosts.len()];
            let min = Duration::from_millis(RESOLVE_INTERVAL_MIN_MS);
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(POLL_MS));
                for (h, at) in hosts.iter().zip(last.iter_mut()) {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if !h.stale.load(Ordering::Relaxed) || at.is_some_and(|t| t.elapsed() < min) {
                        continue;
                    }
                    h.stale.store(false, Ordering::Relaxed);
                    *at = Some(Instant::now());
                    if let Some(line) = h.refresh() {
                        eprintln!("{line}");
                    }
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_spread_over_every_address() {
        let a: SocketAddr = "127.0.0.11:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.12:1".parse().unwrap();
        let h = HostAddrs::fixed("x", vec![a, b]);
        let picks: Vec<_> = (0..3).map(|i| h.pick(i, 0, Some(true)).unwrap()).collect();
        assert_eq!(picks, [a, b, a]);
    }

    /// Four addresses (not a prime, where a fixed stride would skip some): each pair's walk
    /// visits every address once in four failures, and the pairs of one address move on to
    /// each of the other three alike.
    #[test]
    fn a_failing_pair_walks_every_address_and_the_pairs_of_one_address_spread_over_the_rest() {
        let all: Vec<SocketAddr> = (1..=4)
            .map(|i| format!("127.0.0.{i}:1").parse().unwrap())
            .collect();
        let h = HostAddrs::fixed("x", all.clone());
        for i in 0..64 {
            let mut walk: Vec<_> = (0..4).map(|f| h.pick(i, f, Some(true)).unwrap()).collect();
            assert_eq!(walk[0], all[i as usize % 4], "pair {i} starts at its own");
            assert_eq!(
                h.pick(i, 4, Some(true)),
                Some(walk[0]),
                "pair {i} comes back"
            );
            walk.sort();
            assert_eq!(walk, all, "pair {i} visits each once");
        }
        // The 16 pairs of the first address of 64, after its first failure.
        let mut moved = [0; 4];
        for i in (0..64).step_by(4) {
            let to = h.pick(i, 1, Some(true)).unwrap();
            moved[all.iter().position(|a| *a == to).unwrap()] += 1;
        }
        assert_eq!(moved, [0, 6, 5, 5]);
    }

    #[test]
    fn a_source_is_given_an_address_of_its_own_family_only() {
        let v4: SocketAddr = "127.0.0.11:1".parse().unwrap();
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        let h = HostAddrs::fixed("x", vec![v6, v4]);
        for i in 0..4 {
            assert_eq!(h.pick(i, 0, Some(true)), Some(v4));
            assert_eq!(h.pick(i, 0, Some(false)), Some(v6));
        }
        assert_eq!(
            (0..2)
                .map(|i| h.pick(i, 0, None).unwrap())
                .collect::<Vec<_>>(),
            [v6, v4],
            "a proxy dials any family"
        );
        let only4 = HostAddrs::fixed("y", vec![v4]);
        assert_eq!(only4.pick(0, 0, Some(false)), None);
    }

    #[test]
    fn a_literal_region_is_never_looked_up() {
        let h = HostAddrs::fixed("x", vec!["127.0.0.11:1".parse().unwrap()]);
        h.mark_stale();
        assert!(!h.stale.load(Ordering::Relaxed));
        assert_eq!(h.refresh(), None);
    }

    #[test]
    fn a_lookup_that_finds_new_addresses_replaces_and_reports_them() {
        // "localhost" resolves without a network; start from an address it never has.
        let h = HostAddrs::named("x", "localhost", 7, vec!["127.0.0.99:7".parse().unwrap()]);
        let line = h.refresh().expect("changed");
        assert!(line.contains("now resolves to"), "{line}");
        assert!(
            h.current()
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 7)
        );
        assert_eq!(h.refresh(), None, "unchanged the second time");
    }

    #[test]
    fn a_failed_lookup_keeps_the_old_addresses() {
        let old: SocketAddr = "127.0.0.11:443".parse().unwrap();
        let h = HostAddrs::named("x", "no-such-host.invalid", 443, vec![old]);
        let line = h.refresh().expect("reported");
        assert!(
            line.contains("does not resolve") || line.contains("nothing"),
            "{line}"
        );
        assert_eq!(h.current(), vec![old]);
    }

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn a_lookup_returning_the_same_addresses_in_another_order_changes_nothing() {
        // DNS servers rotate their answers: the same set is no move, and pairs keep their
        // addresses.
        let before = addrs(&["10.0.0.1:443", "10.0.0.2:443", "10.0.0.3:443"]);
        let h = HostAddrs::named("x", "engine.example", 443, before.clone());
        let rotated = addrs(&["10.0.0.2:443", "10.0.0.3:443", "10.0.0.1:443"]);
        assert_eq!(h.apply("engine.example", 443, rotated), None);
        assert_eq!(h.current(), before);
    }

    #[test]
    fn a_lookup_without_an_address_of_a_family_it_had_keeps_that_familys_old_addresses() {
        // IPv4 sources with an answer that only has AAAA (a lost A reply, a partial answer):
        // dropping the IPv4 address would leave every IPv4 pair with nowhere to connect, and
        // nothing would ask again.
        let h = HostAddrs::named(
            "x",
            "engine.example",
            443,
            addrs(&["10.0.0.1:443", "[2001:db8::1]:443"]),
        );
        let line = h
            .apply("engine.example", 443, addrs(&["[2001:db8::2]:443"]))
            .expect("a change is said");
        assert_eq!(h.current(), addrs(&["[2001:db8::2]:443", "10.0.0.1:443"]));
        assert!(
            line.contains("no IPv4 address") && line.contains("10.0.0.1"),
            "{line}"
        );
        assert_eq!(
            h.pick(0, 0, Some(true)),
            Some("10.0.0.1:443".parse().unwrap())
        );
        // A proxy, which dials any family, is given only what the answer had.
        for i in 0..3 {
            assert_eq!(
                h.pick(i, 0, None),
                Some("[2001:db8::2]:443".parse().unwrap())
            );
        }
        // Back with both families: the new list as it comes.
        h.apply(
            "engine.example",
            443,
            addrs(&["10.0.0.7:443", "[2001:db8::2]:443"]),
        )
        .expect("changed");
        assert_eq!(h.current(), addrs(&["10.0.0.7:443", "[2001:db8::2]:443"]));
    }
}
