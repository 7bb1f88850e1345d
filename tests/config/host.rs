//! The embedded default's egress: this host's addresses on the interfaces a default route
//! leaves through. A decision table in test names, and the kernel's route tables as read from
//! /proc (known text).

use std::net::IpAddr;

use bundle_relay::config::{
    HostAddresses, choose_host_addresses as choose, default_route_interfaces_v4,
    default_route_interfaces_v6,
};

fn found(list: &[(&str, &str)]) -> Vec<(String, IpAddr)> {
    list.iter()
        .map(|(i, a)| (i.to_string(), a.parse().unwrap()))
        .collect()
}

fn ifaces(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

/// A colocated host: two public addresses on eth0, Docker's bridge, a split-tunnel VPN.
const HOST: &[(&str, &str)] = &[
    ("eth0", "203.0.113.10"),
    ("eth0", "203.0.113.11"),
    ("docker0", "172.17.0.1"),
    ("tun0", "10.8.0.2"),
    ("eth0", "2001:db8::10"),
];

#[test]
fn addresses_on_the_default_routes_interface_are_sources_and_a_bridges_and_a_split_vpns_are_left_out()
 {
    let h = choose(&found(HOST), Some(&ifaces(&["eth0"])), None);
    assert_eq!(h.usable, ips(&["203.0.113.10", "203.0.113.11"]));
    assert_eq!(
        h.no_default_route,
        found(&[("docker0", "172.17.0.1"), ("tun0", "10.8.0.2")])
    );
}

#[test]
fn a_full_tunnel_vpn_with_the_default_route_is_a_source() {
    let h = choose(&found(HOST), Some(&ifaces(&["tun0"])), None);
    assert_eq!(h.usable, ips(&["10.8.0.2"]));
}

#[test]
fn a_host_without_a_default_route_or_whose_table_cannot_be_read_takes_every_interface() {
    let every = ips(&["203.0.113.10", "203.0.113.11", "172.17.0.1", "10.8.0.2"]);
    for table in [Some(&[][..]), None] {
        let h = choose(&found(HOST), table, None);
        assert_eq!(h.usable, every, "{table:?}");
        assert!(h.no_default_route.is_empty());
    }
}

#[test]
fn ipv6_addresses_are_sources_only_when_no_ipv4_is_and_then_by_the_ipv6_default_route() {
    let v6_host = found(&[
        ("eth0", "2001:db8::10"),
        ("br0", "2001:db8:1::1"),
        ("eth0", "fe80::1"),
    ]);
    let h = choose(&v6_host, Some(&ifaces(&["eth0"])), Some(&ifaces(&["eth0"])));
    assert_eq!(h.usable, ips(&["2001:db8::10"]));
    assert_eq!(h.no_default_route, found(&[("br0", "2001:db8:1::1")]));
}

#[test]
fn loopback_link_local_unspecified_and_multicast_are_never_sources_nor_named() {
    let h = choose(
        &found(&[
            ("eth0", "169.254.1.1"),
            ("eth0", "0.0.0.0"),
            ("eth0", "224.0.0.1"),
            ("docker0", "127.0.0.2"),
        ]),
        Some(&ifaces(&["eth0"])),
        None,
    );
    assert_eq!(h, HostAddresses::default());
}

#[test]
fn the_ipv4_table_names_each_interface_with_an_up_default_route_once() {
    let table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
eth1\t00000000\t0101A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n\
eth0\t00000000\t010200C0\t0003\t0\t0\t300\t00000000\t0\t0\t0\n\
tun0\t00000000\t00000000\t0000\t0\t0\t0\t00000000\t0\t0\t0\n";
    assert_eq!(
        default_route_interfaces_v4(table),
        ifaces(&["eth0", "eth1"])
    );
    assert!(default_route_interfaces_v4("Iface\tDestination\n").is_empty());
}

#[test]
fn the_ipv6_table_skips_the_kernels_unreachable_default_on_lo() {
    let table = "\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
";
    assert_eq!(default_route_interfaces_v6(table), ifaces(&["eth0"]));
}

/// On this host, whatever its interfaces: every source is on an interface a default route
/// leaves through, none is loopback, and what is left out is not also a source.
#[test]
fn this_hosts_sources_and_left_out_addresses_do_not_overlap() {
    let h = bundle_relay::config::host_addresses().unwrap();
    for a in &h.usable {
        assert!(!a.is_loopback(), "{a}");
        assert!(!h.no_default_route.iter().any(|(_, b)| b == a), "{a}");
    }
}

#[test]
fn an_alias_labelled_eth0_colon_1_is_on_eth0_and_a_source() {
    let h = choose(
        &found(&[
            ("eth0", "203.0.113.10"),
            ("eth0:1", "203.0.113.11"),
            ("docker0", "172.17.0.1"),
        ]),
        Some(&ifaces(&["eth0"])),
        None,
    );
    assert_eq!(h.usable, ips(&["203.0.113.10", "203.0.113.11"]));
    assert_eq!(h.no_default_route, found(&[("docker0", "172.17.0.1")]));
}

#[test]
fn an_address_on_two_interfaces_one_with_the_default_route_is_a_source_and_not_named_left_out() {
    for order in [["br0", "eth0"], ["eth0", "br0"]] {
        let h = choose(
            &found(&[(order[0], "203.0.113.10"), (order[1], "203.0.113.10")]),
            Some(&ifaces(&["eth0"])),
            None,
        );
        assert_eq!(h.usable, ips(&["203.0.113.10"]), "{order:?}");
        assert!(h.no_default_route.is_empty(), "{order:?}: {h:?}");
    }
}
