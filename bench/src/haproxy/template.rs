//! The shipped `deploy/haproxy/haproxy.cfg` on other ports: its front address, its stats socket
//! and its relays replaced, the two `server` lines of each backend become one per relay (the
//! first line of each backend is the pattern). Nothing else changes, so what runs is what ships.
//! Std only: `tests/run_haproxy.rs` includes this file by path, bench-demo `--haproxy` uses it
//! as a module.

use std::net::SocketAddr;

/// Where the shipped config listens for bots.
pub const SHIPPED_FRONT: &str = "127.0.0.1:8080";
/// The shipped config's stats socket.
pub const SHIPPED_SOCKET: &str = "/run/haproxy/bundle-relay.sock";
/// The first relay's name and address in the shipped config, repeated in each backend.
const SHIPPED_RELAY: &str = "relay1";
const SHIPPED_RELAY_ADDR: &str = "127.0.0.1:8180";

/// `shipped` with bots served on `front`, the stats socket at `socket` and one `server` line
/// per relay in every backend (`relay1` at `relays[0]`, `relay2` at `relays[1]`, …). An error
/// names the line the shipped config no longer has.
pub fn haproxy_config(
    shipped: &str,
    front: SocketAddr,
    socket: &str,
    relays: &[SocketAddr],
) -> Result<String, String> {
    for anchor in [SHIPPED_FRONT, SHIPPED_SOCKET, SHIPPED_RELAY_ADDR] {
        if !shipped.contains(anchor) {
            return Err(format!("the shipped HAProxy config has no {anchor}"));
        }
    }
    if relays.is_empty() {
        return Err("no relay to put behind HAProxy".into());
    }
    let mut out = String::with_capacity(shipped.len() + 128 * relays.len());
    // A backend's first server line stands for all of its relays; the rest are dropped.
    let mut servers_written = false;
    for line in shipped.lines() {
        let trimmed = line.trim_start();
        if line.starts_with("backend ") || line.starts_with("frontend ") {
            servers_written = false;
        }
        if trimmed.starts_with("server ") {
            if servers_written {
                continue;
            }
            if !line.contains(SHIPPED_RELAY) || !line.contains(SHIPPED_RELAY_ADDR) {
                return Err(format!(
                    "the shipped HAProxy config's first server line is not relay1's: {line}"
                ));
            }
            for (i, addr) in relays.iter().enumerate() {
                let named = line
                    .replace(SHIPPED_RELAY_ADDR, &addr.to_string())
                    .replace(SHIPPED_RELAY, &format!("relay{}", i + 1));
                out.push_str(&named);
                out.push('\n');
            }
            servers_written = true;
            continue;
        }
        out.push_str(
            &line
                .replace(SHIPPED_FRONT, &front.to_string())
                .replace(SHIPPED_SOCKET, socket),
        );
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod template_tests {
    use super::*;

    const SHIPPED: &str = include_str!("../../../deploy/haproxy/haproxy.cfg");

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn every_backend_gets_one_server_line_per_relay_on_its_port() {
        let relays = [addr(7001), addr(7002), addr(7003)];
        let cfg = haproxy_config(SHIPPED, addr(7000), "/tmp/h.sock", &relays).unwrap();
        for (backend, tail) in [
            ("relays", " check"),
            ("by_key", " track relays/relay"),
            ("by_uuid", " track relays/relay"),
        ] {
            let block: Vec<&str> = cfg
                .split(&format!("\nbackend {backend}\n"))
                .nth(1)
                .unwrap()
                .split("\nbackend ")
                .next()
                .unwrap()
                .lines()
                .filter(|l| l.trim_start().starts_with("server "))
                .collect();
            assert_eq!(block.len(), 3, "{backend}:\n{cfg}");
            for (i, line) in block.iter().enumerate() {
                let (n, port) = (i + 1, 7001 + i);
                assert!(
                    line.contains(&format!("server relay{n} 127.0.0.1:{port}"))
                        && line.contains(tail),
                    "{backend}: {line}"
                );
                if tail.contains("track") {
                    assert!(line.ends_with(&format!("relays/relay{n}")), "{line}");
                }
            }
        }
        assert!(cfg.contains("bind 127.0.0.1:7000\n"), "{cfg}");
        assert!(cfg.contains("stats socket /tmp/h.sock "), "{cfg}");
        for gone in [
            SHIPPED_FRONT,
            SHIPPED_SOCKET,
            SHIPPED_RELAY_ADDR,
            "127.0.0.1:8181",
        ] {
            assert!(!cfg.contains(gone), "{gone} left in:\n{cfg}");
        }
    }

    #[test]
    fn two_relays_leave_everything_but_addresses_as_shipped() {
        let cfg = haproxy_config(
            SHIPPED,
            addr(8080),
            SHIPPED_SOCKET,
            &[addr(8180), addr(8181)],
        )
        .unwrap();
        assert_eq!(cfg, SHIPPED);
    }

    /// The proxy faces the network: it drops root for its own user in an empty root and logs;
    /// and the relays it fronts listen outside the source-port range the package's sysctl
    /// file gives the kernel, so a relay that restarts never finds its port taken.
    #[test]
    fn the_shipped_config_runs_unprivileged_logs_and_keeps_relays_off_the_source_ports() {
        for line in [
            "    user haproxy\n",
            "    group haproxy\n",
            "    chroot /var/lib/haproxy\n",
            "    log /dev/log local0\n",
            "    log global\n",
        ] {
            assert!(SHIPPED.contains(line), "{line:?}");
        }
        let sysctl = include_str!("../../../sysctl/30-bundle-relay.conf");
        let range: Vec<u16> = sysctl
            .lines()
            .find_map(|l| l.strip_prefix("net.ipv4.ip_local_port_range = "))
            .unwrap()
            .split(' ')
            .map(|p| p.parse().unwrap())
            .collect();
        let ports: Vec<u16> = SHIPPED
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("server "))
            .map(|l| {
                let addr = l.split_whitespace().nth(1).unwrap();
                addr.rsplit(':').next().unwrap().parse().unwrap()
            })
            .collect();
        assert!(!ports.is_empty());
        for p in ports {
            assert!(p < range[0] || p > range[1], "{p} in {range:?}");
        }
    }

    #[test]
    fn a_shipped_config_without_its_anchors_is_refused_by_name() {
        let e = haproxy_config("global\n", addr(1), "/s", &[addr(2)]).unwrap_err();
        assert!(e.contains(SHIPPED_FRONT), "{e}");
    }
}
