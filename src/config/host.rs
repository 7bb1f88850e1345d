//! This host's own addresses, for the embedded default's egress pool.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Addresses of this host usable as egress sources, and those left out, from getifaddrs(3)
/// and the kernel's routing table: see [`choose`]. A host whose routes cannot be read is
/// taken as having a default route through every interface.
pub fn host_addresses() -> io::Result<HostAddresses> {
    let found = interface_addresses()?;
    let v4 = std::fs::read_to_string("/proc/net/route")
        .ok()
        .map(|t| default_route_interfaces_v4(&t));
    let v6 = std::fs::read_to_string("/proc/net/ipv6_route")
        .ok()
        .map(|t| default_route_interfaces_v6(&t));
    Ok(choose(&found, v4.as_deref(), v6.as_deref()))
}

/// What [`choose`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostAddresses {
    /// The egress sources, in interface order without duplicates.
    pub usable: Vec<IpAddr>,
    /// Addresses of interfaces no default route leaves through (a container bridge such as
    /// docker0, a split-tunnel VPN): a connection from one to a block engine on the internet
    /// would not leave the host, or would leave by the wrong way.
    pub no_default_route: Vec<(String, IpAddr)>,
}

/// The egress sources among `found` (interface name, address; interfaces that are up):
/// every address except loopback, link-local (169.254.0.0/16, fe80::/10), unspecified and
/// multicast ones, on an interface a default route of its family leaves through
/// (`default_v4`, `default_v6`: the interfaces; `None` when the table could not be read, or
/// when it has no default route, as on a host with none, where every interface counts). When
/// any IPv4 address is kept only the IPv4 ones are returned: Jito's block engines are reached
/// over IPv4, and an IPv6 source paired with an IPv4-only engine could never connect.
pub fn choose(
    found: &[(String, IpAddr)],
    default_v4: Option<&[String]>,
    default_v6: Option<&[String]>,
) -> HostAddresses {
    let mut out = HostAddresses::default();
    for (iface, addr) in found {
        if !usable(*addr) || out.usable.contains(addr) {
            continue;
        }
        let routes = match addr {
            IpAddr::V4(_) => default_v4,
            IpAddr::V6(_) => default_v6,
        };
        // An IPv4 address's label (`eth0:1`, an alias) names its interface before the colon;
        // routes name the interface itself.
        let device = iface.split(':').next().unwrap_or(iface);
        match routes {
            Some(r) if !r.is_empty() && !r.iter().any(|i| i == device) => {
                if !out.no_default_route.iter().any(|(_, a)| a == addr) {
                    out.no_default_route.push((iface.clone(), *addr));
                }
            }
            _ => {
                out.no_default_route.retain(|(_, a)| a != addr);
                out.usable.push(*addr);
            }
        }
    }
    if out.usable.iter().any(IpAddr::is_ipv4) {
        out.usable.retain(IpAddr::is_ipv4);
        out.no_default_route.retain(|(_, a)| a.is_ipv4());
    }
    out
}

/// Interfaces with an IPv4 default route (destination and mask 0, up), from the text of
/// `/proc/net/route` (the main table).
pub fn default_route_interfaces_v4(table: &str) -> Vec<String> {
    const RTF_UP: u32 = 0x1;
    let mut out: Vec<String> = Vec::new();
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [iface, dest, _gw, flags, _, _, _, mask, ..] = f[..] else {
            continue;
        };
        let up = u32::from_str_radix(flags, 16).is_ok_and(|f| f & RTF_UP != 0);
        if dest == "00000000" && mask == "00000000" && up && !out.iter().any(|i| i == iface) {
            out.push(iface.to_string());
        }
    }
    out
}

/// Interfaces with an IPv6 default route (`::/0`, up, not a reject route such as the kernel's
/// unreachable default on `lo`), from the text of `/proc/net/ipv6_route`.
pub fn default_route_interfaces_v6(table: &str) -> Vec<String> {
    const RTF_UP: u32 = 0x1;
    const RTF_REJECT: u32 = 0x200;
    let mut out: Vec<String> = Vec::new();
    for line in table.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [dest, plen, _, _, _, _, _, _, flags, iface] = f[..] else {
            continue;
        };
        let flags = u32::from_str_radix(flags, 16).unwrap_or(0);
        if dest.bytes().all(|b| b == b'0')
            && plen == "00"
            && flags & RTF_UP != 0
            && flags & RTF_REJECT == 0
            && iface != "lo"
            && !out.iter().any(|i| i == iface)
        {
            out.push(iface.to_string());
        }
    }
    out
}

/// Every address of an interface that is up and not loopback, with its interface's name.
fn interface_addresses() -> io::Result<Vec<(String, IpAddr)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = Vec::new();
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: cursor walks the list getifaddrs returned, which stays valid until freed.
        let ifa = unsafe { &*cursor };
        cursor = ifa.ifa_next;
        let flags = ifa.ifa_flags;
        if ifa.ifa_addr.is_null()
            || flags & libc::IFF_UP as u32 == 0
            || flags & libc::IFF_LOOPBACK as u32 != 0
        {
            continue;
        }
        // SAFETY: ifa_addr is non-null and its family says which sockaddr it points to.
        let addr = unsafe {
            match (*ifa.ifa_addr).sa_family as i32 {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))
                }
                _ => continue,
            }
        };
        // SAFETY: ifa_name is a NUL-terminated string getifaddrs gave, valid until freed.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        found.push((name, addr));
    }
    // SAFETY: head came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}

fn usable(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => {
            !(a.is_loopback() || a.is_link_local() || a.is_unspecified() || a.is_multicast())
        }
        IpAddr::V6(a) => {
            let link_local = a.segments()[0] & 0xffc0 == 0xfe80;
            !(a.is_loopback() || link_local || a.is_unspecified() || a.is_multicast())
        }
    }
}
