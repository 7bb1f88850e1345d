//! Egress address entries: single addresses, CIDR blocks and `first-last` ranges, IPv4 and IPv6,
//! expanded into sources with overlap and size checks done on the entries (never per address).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Largest number of egress sources one config may expand to: 65,536 sources × 16 regions is
/// already a million pair records and connections; a bigger count is a mistyped prefix (a /8).
pub const SOURCES_MAX: usize = 1 << 16;

/// One `egress.addresses` entry as an inclusive interval of addresses of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrRange {
    pub v6: bool,
    pub first: u128,
    pub last: u128,
}

impl AddrRange {
    /// Number of addresses in the range (entries are capped far below u128's range).
    pub fn count(&self) -> u128 {
        self.last - self.first + 1
    }

    pub fn addr(&self, value: u128) -> IpAddr {
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(value))
        } else {
            IpAddr::V4(Ipv4Addr::from(value as u32))
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        (self.first..=self.last).map(|v| self.addr(v))
    }
}

fn bits(addr: IpAddr) -> (bool, u128) {
    match addr {
        IpAddr::V4(a) => (false, u32::from(a) as u128),
        IpAddr::V6(a) => (true, u128::from(a)),
    }
}

fn parse_ip(text: &str) -> Result<IpAddr, String> {
    text.trim()
        .parse::<IpAddr>()
        .map_err(|_| format!("{:?} is not an IPv4 or IPv6 address", text.trim()))
}

/// An address that cannot be a connection's source: the wildcard, or a multicast group.
fn unusable_source(addr: IpAddr) -> Option<&'static str> {
    if addr.is_unspecified() {
        Some("the unspecified address cannot be a source")
    } else if addr.is_multicast() {
        Some("a multicast address cannot be a source")
    } else if addr == IpAddr::V4(Ipv4Addr::BROADCAST) {
        Some("the broadcast address cannot be a source")
    } else {
        None
    }
}

/// Parses one entry: `10.0.0.5`, `127.1.0.0/24`, `2001:db8::/120` or `127.1.1.1-127.1.1.9`.
///
/// A CIDR block lists every address in it, network and broadcast addresses included (on loopback
/// they are ordinary addresses); a block with host bits set is refused as a likely typo. Sizes are
/// checked against [`SOURCES_MAX`] before anything is expanded.
pub fn parse_entry(text: &str) -> Result<AddrRange, String> {
    let text = text.trim();
    let range = if let Some((addr, len)) = text.split_once('/') {
        let addr = parse_ip(addr)?;
        let (v6, value) = bits(addr);
        let width: u32 = if v6 { 128 } else { 32 };
        let len: u32 = len
            .trim()
            .parse()
            .ok()
            .filter(|l| *l <= width)
            .ok_or_else(|| format!("{text:?}: prefix length must be 0 to {width}"))?;
        let host_bits = width - len;
        if host_bits as usize > SOURCES_MAX.trailing_zeros() as usize {
            return Err(format!(
                "{text:?} holds 2^{host_bits} addresses; at most {SOURCES_MAX} sources are allowed \
                 (use a longer prefix)"
            ));
        }
        let host_mask = (1u128 << host_bits) - 1;
        if value & host_mask != 0 {
            let network = AddrRange {
                v6,
                first: 0,
                last: 0,
            }
            .addr(value & !host_mask);
            return Err(format!(
                "{text:?} has host bits set; did you mean \"{network}/{len}\"?"
            ));
        }
        AddrRange {
            v6,
            first: value,
            last: value | host_mask,
        }
    } else if let Some((first, last)) = text.split_once('-') {
        let (first, last) = (parse_ip(first)?, parse_ip(last)?);
        let ((v6_a, a), (v6_b, b)) = (bits(first), bits(last));
        if v6_a != v6_b {
            return Err(format!(
                "{text:?}: both ends of a range must be the same family"
            ));
        }
        if a > b {
            return Err(format!("{text:?}: the range ends before it starts"));
        }
        if b - a >= SOURCES_MAX as u128 {
            return Err(format!(
                "{text:?} holds {} addresses; at most {SOURCES_MAX} sources are allowed",
                (b - a).saturating_add(1)
            ));
        }
        AddrRange {
            v6: v6_a,
            first: a,
            last: b,
        }
    } else {
        let addr = parse_ip(text)?;
        let (v6, value) = bits(addr);
        AddrRange {
            v6,
            first: value,
            last: value,
        }
    };
    for end in [range.addr(range.first), range.addr(range.last)] {
        if let Some(why) = unusable_source(end) {
            return Err(format!("{text:?}: {end}: {why}"));
        }
    }
    Ok(range)
}

/// Finds two entries that share an address: returns (earlier index, later index, one shared
/// address). Sorting the intervals makes this O(n log n) in entries, whatever their sizes.
pub fn find_overlap(ranges: &[AddrRange]) -> Option<(usize, usize, IpAddr)> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].v6, ranges[i].first, i));
    let mut reach: Option<usize> = None; // entry whose interval reaches furthest so far
    for &i in &order {
        let r = ranges[i];
        if let Some(j) = reach {
            let p = ranges[j];
            if p.v6 == r.v6 && r.first <= p.last {
                let (a, b) = if j < i { (j, i) } else { (i, j) };
                return Some((a, b, r.addr(r.first)));
            }
            if p.v6 != r.v6 || r.last > p.last {
                reach = Some(i);
            }
        } else {
            reach = Some(i);
        }
    }
    None
}
