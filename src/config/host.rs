//! This host's own addresses, for the embedded default's egress pool.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Addresses of this host usable as egress sources, found with getifaddrs(3): every address of an
/// interface that is up, except loopback, link-local (169.254.0.0/16, fe80::/10), unspecified and
/// multicast ones, in interface order without duplicates. When any IPv4 address is found only the
/// IPv4 ones are returned: Jito's block engines are reached over IPv4, and an IPv6 source paired
/// with an IPv4-only engine could never connect.
pub fn host_addresses() -> io::Result<Vec<IpAddr>> {
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
        if usable(addr) && !found.contains(&addr) {
            found.push(addr);
        }
    }
    // SAFETY: head came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    if found.iter().any(IpAddr::is_ipv4) {
        found.retain(IpAddr::is_ipv4);
    }
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
