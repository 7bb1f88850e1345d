//! The client a proxy in front of the relay forwards for: the last address of
//! `X-Forwarded-For`. Each proxy appends the address it accepted the connection from, so the
//! last one is what the proxy next to the relay saw, and the only one it vouches for; anything
//! before it the client may have written itself. Whether that proxy is trusted is not decided
//! here (see `relay::tenancy`).
//!
//! Forms taken, as proxies write them: `203.0.113.7`, `2001:db8::7`, with a port
//! (`203.0.113.7:51234`, `[2001:db8::7]:51234`) or an IPv6 address in brackets without one.
//! Not an address (`unknown`, RFC 7239's obfuscated names, an empty element) is an error.

use std::net::{IpAddr, SocketAddr};

/// What is wrong with an `X-Forwarded-For` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadForwarded {
    /// The value (or its last element) is empty.
    Empty,
    /// The last element is not an address.
    NotAnAddress,
}

/// The address the last proxy appended to `value` (a whole `X-Forwarded-For` field value),
/// IPv4-mapped IPv6 as its IPv4 address.
pub fn last_hop(value: &[u8]) -> Result<IpAddr, BadForwarded> {
    let last = match memchr::memrchr(b',', value) {
        Some(comma) => &value[comma + 1..],
        None => value,
    };
    let last = trim(last);
    if last.is_empty() {
        return Err(BadForwarded::Empty);
    }
    let text = core::str::from_utf8(last).map_err(|_| BadForwarded::NotAnAddress)?;
    let ip = if let Ok(ip) = text.parse::<IpAddr>() {
        ip
    } else if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        inner
            .parse::<std::net::Ipv6Addr>()
            .map(IpAddr::V6)
            .map_err(|_| BadForwarded::NotAnAddress)?
    } else {
        // `v4:port` or `[v6]:port`.
        text.parse::<SocketAddr>()
            .map(|s| s.ip())
            .map_err(|_| BadForwarded::NotAnAddress)?
    };
    Ok(ip.to_canonical())
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(v: &str) -> Result<String, BadForwarded> {
        last_hop(v.as_bytes()).map(|ip| ip.to_string())
    }

    #[test]
    fn the_last_address_is_the_one_the_nearest_proxy_appended() {
        let table: &[(&str, Result<&str, BadForwarded>)] = &[
            ("203.0.113.7", Ok("203.0.113.7")),
            ("  203.0.113.7\t", Ok("203.0.113.7")),
            ("10.9.9.9, 203.0.113.7", Ok("203.0.113.7")),
            ("spoofed,203.0.113.7", Ok("203.0.113.7")),
            ("2001:db8::7", Ok("2001:db8::7")),
            ("[2001:db8::7]", Ok("2001:db8::7")),
            ("[2001:db8::7]:51234", Ok("2001:db8::7")),
            ("203.0.113.7:51234", Ok("203.0.113.7")),
            ("::ffff:203.0.113.7", Ok("203.0.113.7")),
            ("", Err(BadForwarded::Empty)),
            ("203.0.113.7, ", Err(BadForwarded::Empty)),
            ("unknown", Err(BadForwarded::NotAnAddress)),
            ("203.0.113.7, _hidden", Err(BadForwarded::NotAnAddress)),
            ("203.0.113", Err(BadForwarded::NotAnAddress)),
            ("[203.0.113.7]", Err(BadForwarded::NotAnAddress)),
            ("203.0.113.7:port", Err(BadForwarded::NotAnAddress)),
        ];
        for (value, want) in table {
            assert_eq!(hop(value), want.map(str::to_string), "{value:?}");
        }
        assert_eq!(
            last_hop(b"203.0.113.7, \xff"),
            Err(BadForwarded::NotAnAddress)
        );
    }
}
