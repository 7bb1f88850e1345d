//! Egress addresses on the host: the fewest CIDR blocks that hold a config's addresses, the
//! `ip` commands that make them local (whether each is bindable now is `probe::unbindable`).
//!
//! Thousands of addresses go on a host one of two ways. A local route (`ip route add local
//! 10.20.0.0/20 dev lo`, "AnyIP") makes every address of the block local with one line in the
//! kernel's local table, so the relay binds any of them without IP_FREEBIND, and one route
//! serves 4,096 addresses; the network must route the block to this host. Or each address on
//! an interface (`ip addr add 10.20.0.1/32 dev eth0`), one entry each, when the upstream
//! network expects ARP/NDP answers for every address. The relay does not care which.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How the addresses are made local.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// One `ip route add local BLOCK dev lo` per block.
    LocalRoute,
    /// One `ip addr add ADDRESS/32` (or `/128`) per address on the named interface.
    Interface,
}

/// The fewest aligned CIDR blocks that cover exactly `addrs` (any order, duplicates allowed),
/// IPv4 blocks first, each family in address order.
pub fn blocks(addrs: &[IpAddr]) -> Vec<(IpAddr, u8)> {
    let mut v4: Vec<u128> = Vec::new();
    let mut v6: Vec<u128> = Vec::new();
    for a in addrs {
        match a {
            IpAddr::V4(a) => v4.push(u32::from(*a) as u128),
            IpAddr::V6(a) => v6.push(u128::from(*a)),
        }
    }
    let mut out = Vec::new();
    for (values, bits) in [(v4, 32u32), (v6, 128u32)] {
        for (start, len) in runs(values) {
            for (base, prefix) in split_run(start, len, bits) {
                out.push((
                    if bits == 32 {
                        IpAddr::V4(Ipv4Addr::from(base as u32))
                    } else {
                        IpAddr::V6(Ipv6Addr::from(base))
                    },
                    prefix,
                ));
            }
        }
    }
    out
}

/// Consecutive runs `(first, count)` of sorted, deduplicated values.
fn runs(mut values: Vec<u128>) -> Vec<(u128, u128)> {
    values.sort_unstable();
    values.dedup();
    let mut out: Vec<(u128, u128)> = Vec::new();
    for v in values {
        match out.last_mut() {
            Some((start, len)) if *start + *len == v => *len += 1,
            _ => out.push((v, 1)),
        }
    }
    out
}

/// A run cut into aligned power-of-two blocks, largest first where alignment allows.
fn split_run(mut start: u128, mut len: u128, bits: u32) -> Vec<(u128, u8)> {
    let mut out = Vec::new();
    while len > 0 {
        let align = if start == 0 {
            bits
        } else {
            start.trailing_zeros().min(bits)
        };
        let fit = 127 - len.leading_zeros();
        let size_log = align.min(fit);
        out.push((start, (bits - size_log) as u8));
        let size = 1u128 << size_log;
        start += size;
        len -= size;
    }
    out
}

/// The commands that make `addrs` local, one per line, for `sh`.
pub fn commands(addrs: &[IpAddr], method: Method, dev: &str) -> Vec<String> {
    match method {
        Method::LocalRoute => blocks(addrs)
            .into_iter()
            .map(|(base, prefix)| {
                let family = if base.is_ipv4() { "-4" } else { "-6" };
                format!("ip {family} route replace local {base}/{prefix} dev lo")
            })
            .collect(),
        Method::Interface => {
            let mut sorted: Vec<IpAddr> = addrs.to_vec();
            sorted.sort();
            sorted.dedup();
            sorted
                .into_iter()
                .map(|a| {
                    let (family, prefix) = if a.is_ipv4() { ("-4", 32) } else { ("-6", 128) };
                    format!("ip {family} addr replace {a}/{prefix} dev {dev}")
                })
                .collect()
        }
    }
}
