//! The machine's own network counters, read around a window: packets the kernel dropped on
//! its input backlog (`/proc/net/softnet_stat`, second column, every CPU; loopback traffic
//! passes through it, so a burst larger than `net.core.netdev_max_backlog` loses packets)
//! and TCP connections it aborted on a timeout (`TcpExt: TCPAbortOnTimeout`, which counts a
//! kernel keepalive that went unanswered past the socket's `TCP_USER_TIMEOUT`). Machine-wide:
//! other processes' traffic counts too.

use serde::Serialize;

/// The counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NetCounters {
    pub backlog_drops: u64,
    pub aborts_on_timeout: u64,
}

impl NetCounters {
    /// Reads both; a counter that cannot be read is 0.
    pub fn now() -> NetCounters {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        NetCounters {
            backlog_drops: parse_softnet_drops(&read("/proc/net/softnet_stat")),
            aborts_on_timeout: parse_tcp_ext(&read("/proc/net/netstat"), "TCPAbortOnTimeout")
                .unwrap_or(0),
        }
    }

    /// What grew from `earlier` to this.
    pub fn since(&self, earlier: &NetCounters) -> NetCounters {
        NetCounters {
            backlog_drops: self.backlog_drops.saturating_sub(earlier.backlog_drops),
            aborts_on_timeout: self
                .aborts_on_timeout
                .saturating_sub(earlier.aborts_on_timeout),
        }
    }
}

/// The dropped column (the second, hexadecimal) summed over every CPU's line.
pub fn parse_softnet_drops(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .sum()
}

/// One `TcpExt:` counter of /proc/net/netstat (a header line of names, then one of values).
pub fn parse_tcp_ext(text: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let names = lines.next()?.split_whitespace();
    let values = lines.next()?.split_whitespace();
    names
        .zip(values)
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softnet_drops_add_up_over_cpus() {
        let text = "01441edf 00006c41 00000002 00000000\n013622ad 00006b94 00000003 00000000\n";
        assert_eq!(parse_softnet_drops(text), 0x6c41 + 0x6b94);
    }

    #[test]
    fn a_tcp_ext_counter_is_found_by_name() {
        let text = "TcpExt: SyncookiesSent TCPAbortOnTimeout TCPKeepAlive\n\
                    TcpExt: 0 38901 549254\n\
                    IpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(parse_tcp_ext(text, "TCPAbortOnTimeout"), Some(38_901));
        assert_eq!(parse_tcp_ext(text, "TCPKeepAlive"), Some(549_254));
        assert_eq!(parse_tcp_ext(text, "InNoRoutes"), None);
    }
}
