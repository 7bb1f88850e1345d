//! Which addresses this host's kernel takes as its own: the prefixes of its local routes
//! (`local 127.0.0.0/8 dev lo`, an interface's address, `ip route add local 10.1.0.0/20 dev lo`
//! for a block of egress addresses), read from `/proc/net/fib_trie` and `/proc/net/ipv6_route`.
//! A bind alone cannot tell: with `ip_nonlocal_bind = 1` any address binds, and a source no
//! local route holds sends into a network that answers it elsewhere. Sans-IO: the texts in,
//! a lookup out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `RTF_LOCAL` in `/proc/net/ipv6_route`'s flags column.
const RTF_LOCAL: u32 = 0x8000_0000;

/// The local prefixes of both families.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalRoutes {
    /// Prefixes as (address bits, length), IPv4's in the low 32 bits.
    v4: Vec<(u128, u8)>,
    v6: Vec<(u128, u8)>,
}

impl LocalRoutes {
    /// From the texts of `/proc/net/fib_trie` (its `Local:` and `Main:` tables, which the
    /// kernel asks whether an address is the host's: a leaf `|-- A.B.C.D` followed by its
    /// `/LEN SCOPE TYPE` lines, of which `LOCAL` ones count; a policy table's, such as a
    /// TPROXY `local 0.0.0.0/0 table 100`, make no address the host's) and
    /// `/proc/net/ipv6_route` (one route a line, destination and length in hex, `RTF_LOCAL` in
    /// the flags; it names no table, so every table's local routes count). Lines of another
    /// shape are skipped.
    pub fn parse(fib_trie: &str, ipv6_route: &str) -> LocalRoutes {
        let mut out = LocalRoutes::default();
        let mut leaf: Option<Ipv4Addr> = None;
        let mut table_counts = true;
        for line in fib_trie.lines() {
            if !line.starts_with(' ') && line.ends_with(':') {
                table_counts = line == "Local:" || line == "Main:";
                leaf = None;
                continue;
            }
            if !table_counts {
                continue;
            }
            let t = line.trim_start();
            if let Some(addr) = t.strip_prefix("|-- ") {
                leaf = addr.trim().parse().ok();
            } else if let (Some(rest), Some(addr)) = (t.strip_prefix('/'), leaf) {
                let mut fields = rest.split_whitespace();
                let len = fields.next().and_then(|l| l.parse::<u8>().ok());
                if let Some(len) = len.filter(|&l| l <= 32)
                    && fields.any(|f| f == "LOCAL")
                {
                    out.v4
                        .push((u128::from(u32::from(addr)) & mask(len, 32), len));
                }
            }
        }
        for line in ipv6_route.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(dst), Some(len), Some(flags)) = (f.first(), f.get(1), f.get(8)) else {
                continue;
            };
            let (Ok(dst), Ok(len), Ok(flags)) = (
                u128::from_str_radix(dst, 16),
                u8::from_str_radix(len, 16),
                u32::from_str_radix(flags, 16),
            ) else {
                continue;
            };
            if flags & RTF_LOCAL != 0 && len <= 128 {
                out.v6.push((dst & mask(len, 128), len));
            }
        }
        out
    }

    /// Whether a local route holds `ip` (an IPv4-mapped IPv6 address as its IPv4 one).
    pub fn holds(&self, ip: IpAddr) -> bool {
        let (prefixes, a, width) = match ip {
            IpAddr::V4(a) => (&self.v4, u128::from(u32::from(a)), 32),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => (&self.v4, u128::from(u32::from(v4)), 32),
                None => (&self.v6, u128::from(a), 128),
            },
        };
        prefixes.iter().any(|&(p, len)| a & mask(len, width) == p)
    }
}

/// The `local_routes` fuzz target's body (also run as a seeded proptest): arbitrary bytes as
/// the two files (split at the first NUL), and lookups of addresses drawn from them. Never
/// panics; a prefix parsed holds its own address.
pub fn fuzz_parse(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (v4, v6) = text.split_once('\0').unwrap_or((&text, ""));
    let r = LocalRoutes::parse(v4, v6);
    assert!(
        r.v4.iter()
            .all(|&(p, len)| len <= 32 && p & !mask(len, 32) == 0)
    );
    assert!(
        r.v6.iter()
            .all(|&(p, len)| len <= 128 && p & !mask(len, 128) == 0)
    );
    for chunk in data.chunks(16) {
        let mut b = [0u8; 16];
        b[..chunk.len()].copy_from_slice(chunk);
        r.holds(IpAddr::V6(Ipv6Addr::from(b)));
        r.holds(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])));
    }
}

/// The first `len` of an address's `width` bits (32 or 128), in the low bits of a `u128`.
fn mask(len: u8, width: u32) -> u128 {
    let all = u128::MAX >> (128 - width);
    all & all.checked_shl(width - u32::from(len)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This host's `/proc/net/fib_trie` and `/proc/net/ipv6_route`, trimmed: loopback's block,
    /// an interface's address (192.0.2.2/24: the address local, its network unicast), a block
    /// routed local for egress (10.1.0.0/20), and IPv6's ::1 and fd00::2.
    const FIB_TRIE: &str = "\
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.1.0.0/20 2 0 2
        |-- 10.1.0.0
           /20 host LOCAL
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.0.2.0/24 2 0 2
        +-- 192.0.2.0/30 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
";
    const IPV6_ROUTE: &str = "\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000003 00000000 80200001     eth0
";

    #[test]
    fn local_routes_hold_their_blocks_and_addresses_and_nothing_merely_routed() {
        let r = LocalRoutes::parse(FIB_TRIE, IPV6_ROUTE);
        for (ip, local) in [
            ("127.1.2.3", true),
            ("10.1.15.255", true),
            ("10.1.16.0", false),
            ("192.0.2.2", true),
            ("192.0.2.3", false),
            ("203.0.113.1", false),
            ("::1", true),
            ("fd00::2", true),
            ("fd00::3", false),
            ("::ffff:127.0.0.1", true),
        ] {
            assert_eq!(r.holds(ip.parse().unwrap()), local, "{ip}");
        }
    }

    /// A policy table's local route (TPROXY's `local 0.0.0.0/0 table 100`) makes no address
    /// the host's: only the local and main tables count.
    #[test]
    fn a_policy_tables_local_routes_do_not_count() {
        let with_table = format!(
            "Id 100:\n  +-- 0.0.0.0/0 2 0 2\n     |-- 0.0.0.0\n        /0 universe LOCAL\n{FIB_TRIE}"
        );
        let r = LocalRoutes::parse(&with_table, "");
        assert!(!r.holds("203.0.113.1".parse().unwrap()));
        assert!(r.holds("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn lines_of_another_shape_are_skipped() {
        let r = LocalRoutes::parse("|-- nonsense\n/99 host LOCAL\n/8 host\n", "zz 80 x");
        assert_eq!(r, LocalRoutes::default());
    }
}
