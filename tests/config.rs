//! The config schema as a decision table: what loads (and with which defaults and derived
//! numbers), and what is refused with which message; the example files; hot reload.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bundle_relay::config::{Config, ConnectMode, FD_SLACK, Overrides, Resolve, Shared, Source};
use bundle_relay::jito::MAINNET_REGIONS;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REGION: &str = "[[region]]\nname = \"ny\"\nhost = \"127.0.0.15\"\nport = 10000\n";
const EGRESS: &str = "[egress]\naddresses = [\"127.1.0.0/30\"]\n";

fn parse(text: &str) -> Result<Config, String> {
    Config::parse(text, "config.toml", Resolve::Deferred).map_err(|e| e.to_string())
}

fn refused(text: &str) -> String {
    match parse(text) {
        Ok(c) => panic!("config was accepted: {c:?}"),
        Err(e) => e,
    }
}

fn regions(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "[[region]]\nname = \"r{i}\"\nhost = \"127.0.0.{}\"\nport = 10000\n",
                11 + i
            )
        })
        .collect()
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("configs")
}

fn local(ip: [u8; 4]) -> Source {
    Source::Local(IpAddr::V4(Ipv4Addr::from(ip)))
}

// ---- what loads ----

#[test]
fn bundles_move_between_threads_unless_handoffs_are_turned_off() {
    assert!(
        parse(&format!("threads = 2\n{REGION}{EGRESS}"))
            .unwrap()
            .handoffs
    );
    let off = parse(&format!("threads = 2\nhandoffs = false\n{REGION}{EGRESS}")).unwrap();
    assert!(!off.handoffs);
    let e = refused(&format!("handoffs = 1\n{REGION}{EGRESS}"));
    assert!(e.contains("handoffs"), "{e}");
}

#[test]
fn minimal_file_gets_the_documented_defaults() {
    let c = parse(&format!("threads = 2\n{REGION}{EGRESS}")).unwrap();
    assert_eq!(c.threads, 2);
    assert!(c.pin_threads);
    assert_eq!(c.arena_slots, 65_536);
    assert_eq!(c.bundle_max_age_ms, 2_000);
    assert_eq!(c.upstream_timeout_ms, 1_000);
    assert_eq!(c.intake.rotating, Some("127.0.0.1:8080".parse().unwrap()));
    assert_eq!(
        (c.intake.head_bytes_max, c.intake.body_bytes_max),
        (8 * 1024, 64 * 1024)
    );
    assert_eq!(
        (c.intake.head_timeout_ms, c.intake.idle_timeout_ms),
        (5_000, 60_000)
    );
    assert_eq!(c.intake.connections_max, 1_024);
    assert_eq!(c.admin, Some("127.0.0.1:9464".parse().unwrap()));
    let r = &c.regions[0];
    assert_eq!((r.interval_ms, r.burst, r.pinned), (1_000, 1, None));
    assert!(!r.tls, "tls defaults to on only for port 443");
    assert_eq!(r.authority, "127.0.0.15:10000");
    assert_eq!(
        r.addrs,
        vec!["127.0.0.15:10000".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(c.egress.connect, ConnectMode::Eager);
    assert_eq!(
        (c.egress.reconnect_min_ms, c.egress.reconnect_max_ms),
        (100, 30_000)
    );
    assert_eq!(
        (c.egress.connect_timeout_ms, c.egress.handshakes_max),
        (5_000, 256)
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn threads_default_to_available_cores() {
    let c = parse(&format!(
        "{REGION}[egress]\naddresses = [\"127.1.0.0/24\"]\n"
    ))
    .unwrap();
    assert_eq!(
        c.threads,
        std::thread::available_parallelism().unwrap().get().min(256)
    );
}

#[test]
fn region_on_443_defaults_to_tls_with_bare_host_authority_and_stays_unresolved_when_deferred() {
    let c = parse(&format!(
        "[[region]]\nname = \"frankfurt\"\nhost = \"frankfurt.mainnet.block-engine.jito.wtf\"\n{EGRESS}"
    ))
    .unwrap();
    let r = &c.regions[0];
    assert_eq!(r.port, 443);
    assert!(r.tls);
    assert_eq!(r.authority, "frankfurt.mainnet.block-engine.jito.wtf");
    assert!(!r.is_resolved() && !c.is_resolved());
    assert_eq!(r.sni, None);
}

#[test]
fn connect_key_overrides_resolution_with_literal_addresses() {
    let c = parse(&format!(
        "[[region]]\nname = \"ny\"\nhost = \"ny.example\"\nconnect = \"127.0.0.11:10000\"\n\
         [[region]]\nname = \"slc\"\nhost = \"slc.example\"\nconnect = [\"127.0.0.12:1\", \"[::1]:2\"]\n{EGRESS}"
    ))
    .unwrap();
    assert_eq!(
        c.regions[0].addrs,
        vec!["127.0.0.11:10000".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(c.regions[1].addrs.len(), 2);
    assert_eq!(
        c.regions[0].authority, "ny.example",
        "authority stays the host"
    );
}

#[test]
fn resolve_now_fills_addresses_from_the_system_resolver() {
    let text = format!("[[region]]\nname = \"ny\"\nhost = \"localhost\"\nport = 10000\n{EGRESS}");
    let c = Config::parse(&text, "config.toml", Resolve::Now).unwrap();
    assert!(
        c.regions[0]
            .addrs
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 10000)
    );
    assert!(c.is_resolved());
    let mut deferred = Config::parse(&text, "config.toml", Resolve::Deferred).unwrap();
    assert!(!deferred.is_resolved());
    deferred.resolve().unwrap();
    assert_eq!(deferred, c);
}

#[test]
fn egress_entries_expand_in_order_cidr_single_range_and_ipv6() {
    let c = parse(&format!(
        "{REGION}connect = [\"127.0.0.15:10000\", \"[::1]:10000\"]\n[egress]\naddresses = [\"127.1.0.0/30\", \"10.0.0.5\", \"127.1.1.1-127.1.1.3\", \"2001:db8::/127\"]\n"
    ))
    .unwrap();
    let expected = vec![
        local([127, 1, 0, 0]),
        local([127, 1, 0, 1]),
        local([127, 1, 0, 2]),
        local([127, 1, 0, 3]),
        local([10, 0, 0, 5]),
        local([127, 1, 1, 1]),
        local([127, 1, 1, 2]),
        local([127, 1, 1, 3]),
        Source::Local("2001:db8::".parse().unwrap()),
        Source::Local("2001:db8::1".parse().unwrap()),
    ];
    assert_eq!(c.egress.sources, expected);
}

#[test]
fn socks5_proxies_follow_addresses_and_their_password_is_never_printed() {
    let c = parse(&format!(
        "{REGION}[egress]\naddresses = [\"10.0.0.5\"]\nsocks5 = [{{ proxy = \"127.0.0.1:1080\", username = \"u\", password = \"hunter2\" }}, {{ proxy = \"127.0.0.1:1080\" }}]\nconnect = \"lazy\"\n"
    ))
    .unwrap();
    let proxy: SocketAddr = "127.0.0.1:1080".parse().unwrap();
    assert_eq!(
        c.egress.sources,
        vec![
            local([10, 0, 0, 5]),
            Source::Socks5 {
                proxy,
                auth: Some(("u".into(), "hunter2".into()))
            },
            Source::Socks5 { proxy, auth: None },
        ]
    );
    assert_eq!(c.egress.connect, ConnectMode::Lazy);
    let shown = format!("{:?} {}", c, c.egress.sources[1]);
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("u:<redacted>@127.0.0.1:1080"), "{shown}");
    assert_eq!(c.egress.sources[1].to_string(), "socks5://u@127.0.0.1:1080");
    assert_eq!(c.egress.sources[2].to_string(), "socks5://127.0.0.1:1080");
}

#[test]
fn off_turns_a_listener_off() {
    let c = parse(&format!(
        "[intake]\nrotating = \"off\"\n[admin]\nlisten = \"off\"\n{REGION}pinned = \"127.0.0.1:8085\"\n{EGRESS}"
    ))
    .unwrap();
    assert_eq!((c.intake.rotating, c.admin), (None, None));
    assert_eq!(
        c.intake_listeners().collect::<Vec<_>>(),
        vec!["127.0.0.1:8085".parse().unwrap()]
    );
}

#[test]
fn admin_metrics_is_on_by_default_and_false_turns_it_off_in_the_config_and_the_spec() {
    let on = parse(&format!("{REGION}{EGRESS}")).unwrap();
    assert!(on.metrics);
    assert!(Config::embedded_default().metrics);
    assert!(bundle_relay::relay::Spec::from_config(&on).unwrap().metrics);
    let off = parse(&format!("[admin]\nmetrics = false\n{REGION}{EGRESS}")).unwrap();
    assert!(!off.metrics);
    assert_eq!(off.admin, Some("127.0.0.1:9464".parse().unwrap()));
    assert!(
        !bundle_relay::relay::Spec::from_config(&off)
            .unwrap()
            .metrics
    );
    let e = refused(&format!("[admin]\nmetrics = \"no\"\n{REGION}{EGRESS}"));
    assert!(
        e.contains("admin.metrics: invalid type: string \"no\", expected a boolean"),
        "{e}"
    );
}

#[test]
fn fewer_sources_than_threads_is_refused_with_the_numbers() {
    let e = refused(&format!("threads = 8\n{REGION}{EGRESS}"));
    assert!(
        e.contains("threads: 8 threads but 4 egress sources")
            && e.contains("4 threads would own none")
            && e.contains("set threads = 4"),
        "{e}"
    );
}

#[test]
fn threads_default_to_no_more_than_the_sources() {
    let c = parse(&format!("{REGION}[egress]\naddresses = [\"127.1.0.1\"]\n")).unwrap();
    assert_eq!(c.threads, 1, "one source: one thread, whatever the cores");
}

#[test]
fn sources_of_a_family_a_region_lacks_are_refused_naming_both() {
    let e = refused(&format!(
        "threads = 1\n{REGION}[egress]\naddresses = [\"10.0.0.1\", \"2001:db8::1-2001:db8::2\"]\n"
    ));
    assert!(
        e.contains("region[0]: ny (127.0.0.15) has only IPv4 addresses")
            && e.contains("2 egress sources are IPv6"),
        "{e}"
    );
    // A SOCKS5 source reaches any family through its proxy.
    parse(&format!(
        "threads = 1\n{REGION}[egress]\nsocks5 = [{{ proxy = \"[::1]:1080\" }}]\n"
    ))
    .unwrap();
}

#[test]
fn millisecond_settings_are_bounded_with_their_reason() {
    for (text, key, max) in [
        (
            "[intake]\nhead_timeout_ms = 18446744073709551615\n",
            "intake.head_timeout_ms",
            "60000",
        ),
        (
            "[intake]\nidle_timeout_ms = 3600001\n",
            "intake.idle_timeout_ms",
            "3600000",
        ),
        (
            "[intake]\nsend_timeout_ms = 60001\n",
            "intake.send_timeout_ms",
            "60000",
        ),
        (
            "[egress]\naddresses = [\"127.1.0.0/30\"]\nreconnect_max_ms = 18446744073709551615\n",
            "egress.reconnect_max_ms",
            "600000",
        ),
        (
            "[egress]\naddresses = [\"127.1.0.0/30\"]\nreconnect_min_ms = 600001\n",
            "egress.reconnect_min_ms",
            "600000",
        ),
        (
            "[egress]\naddresses = [\"127.1.0.0/30\"]\nconnect_timeout_ms = 60001\n",
            "egress.connect_timeout_ms",
            "60000",
        ),
    ] {
        let egress = if text.contains("[egress]") {
            ""
        } else {
            EGRESS
        };
        let e = refused(&format!("{REGION}{egress}{text}"));
        assert!(
            e.contains(key) && e.contains(&format!("must be at most {max}")),
            "{text}: {e}"
        );
    }
    let e = refused(&format!(
        "{REGION}interval_ms = 18446744073709551615\n{EGRESS}"
    ));
    assert!(
        e.contains("region[0].interval_ms: must be at most 3600000"),
        "{e}"
    );
}

#[test]
fn connections_per_source_default_to_a_quarter_of_the_table_and_fit_in_it() {
    let c = parse(&format!(
        "{REGION}{EGRESS}[intake]\nconnections_max = 100\n"
    ))
    .unwrap();
    assert_eq!(c.intake.connections_per_source_max, 25);
    let e = refused(&format!(
        "{REGION}{EGRESS}[intake]\nconnections_max = 100\nconnections_per_source_max = 101\n"
    ));
    assert!(
        e.contains("intake.connections_per_source_max: must be at most 100"),
        "{e}"
    );
}

#[test]
fn admin_beyond_loopback_loads_with_a_warning_stronger_without_a_token() {
    let with = |admin: &str| parse(&format!("threads = 1\n[admin]\n{admin}\n{REGION}{EGRESS}"));
    for loopback in ["127.0.0.1:9464", "127.0.0.2:9464", "[::1]:9464", "off"] {
        let c = with(&format!("listen = \"{loopback}\"")).unwrap();
        assert_eq!(c.warnings, Vec::<String>::new(), "{loopback}");
    }
    for open in ["0.0.0.0:9464", "10.1.2.3:9464", "[::]:9464"] {
        let c = with(&format!("listen = \"{open}\"")).unwrap();
        assert_eq!(c.warnings.len(), 1, "{open}: {:?}", c.warnings);
        let w = &c.warnings[0];
        assert!(
            w.contains(&format!("admin.listen {}", c.admin.unwrap())),
            "{w}"
        );
        assert!(w.contains("is not a loopback address"), "{w}");
        assert!(
            w.contains("anyone who can reach it can read metrics and /debug"),
            "{w}"
        );
        assert!(w.contains("admin.token_file is not set"), "{w}");
    }
    let dir = temp_dir("token-warning");
    let token = dir.join("admin.token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let c = with(&format!(
        "listen = \"0.0.0.0:9464\"\ntoken_file = \"{}\"",
        token.display()
    ))
    .unwrap();
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(
        c.warnings[0].contains("is not a loopback address"),
        "{:?}",
        c.warnings
    );
    assert!(c.warnings[0].contains("bearer token"), "{:?}", c.warnings);
    assert!(!c.warnings[0].contains("anyone"), "{:?}", c.warnings);
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- what is refused, and how it is said ----

#[test]
fn rejects_zero_interval_naming_file_key_and_value() {
    let text = format!(
        "{}{EGRESS}",
        regions(3).replace(
            "port = 10000\n[[region]]\nname = \"r2\"",
            "port = 10000\n[[region]]\nname = \"r2\"\ninterval_ms = 0"
        )
    );
    assert_eq!(
        refused(&text),
        "config.toml: region[2].interval_ms: must be at least 1, got 0"
    );
}

#[test]
fn rejects_unknown_top_level_key_with_line_and_column() {
    let e = refused(&format!("thread = 4\n{REGION}{EGRESS}"));
    assert!(
        e.starts_with("config.toml:1:1: thread: unknown field `thread`, expected one of `threads`"),
        "{e}"
    );
}

#[test]
fn rejects_unknown_region_key_naming_the_region() {
    let e = refused(&format!("{}intervall_ms = 5\n{EGRESS}", regions(2)));
    assert!(
        e.starts_with("config.toml:9:1: region[1].intervall_ms: unknown field `intervall_ms`"),
        "{e}"
    );
}

#[test]
fn rejects_unknown_egress_and_socks5_keys() {
    let e = refused(&format!("{REGION}{EGRESS}adresses = []\n"));
    assert!(
        e.starts_with("config.toml:7:1: egress.adresses: unknown field `adresses`"),
        "{e}"
    );
    let e = refused(&format!(
        "{REGION}{EGRESS}socks5 = [{{ proxy = \"127.0.0.1:1\", user = \"u\" }}]\n"
    ));
    assert!(
        e.contains("egress.socks5[0].user: unknown field `user`"),
        "{e}"
    );
}

#[test]
fn rejects_wrong_types_and_out_of_range_integers_by_key() {
    let e = refused(&format!("{REGION}{EGRESS}").replace("port = 10000", "port = \"x\""));
    assert!(
        e.contains("region[0].port: invalid type: string \"x\", expected u16"),
        "{e}"
    );
    let e = refused(&format!("{REGION}{EGRESS}").replace("port = 10000", "port = 70000"));
    assert!(
        e.contains("region[0].port: invalid value: integer `70000`, expected u16"),
        "{e}"
    );
    let e = refused(&format!("{REGION}{EGRESS}connect = \"sometimes\"\n"));
    assert!(
        e.contains("egress.connect: unknown variant `sometimes`, expected `eager` or `lazy`"),
        "{e}"
    );
}

#[test]
fn rejects_missing_required_region_keys() {
    let e = refused(&format!("[[region]]\nname = \"ny\"\n{EGRESS}"));
    assert!(e.contains("region[0]: missing field `host`"), "{e}");
}

#[test]
fn rejects_toml_syntax_errors_with_position() {
    let e = refused("threads = \n");
    assert!(e.starts_with("config.toml:1:"), "{e}");
}

#[test]
fn rejects_duplicate_region_names() {
    let text = format!("{}{EGRESS}", regions(2).replace("\"r1\"", "\"r0\""));
    assert_eq!(
        refused(&text),
        "config.toml: region[1].name: \"r0\" is already the name of region[0]"
    );
}

#[test]
fn rejects_bad_region_names() {
    let e = refused(&format!("{REGION}{EGRESS}").replace("\"ny\"", "\"New York\""));
    assert!(
        e.starts_with("config.toml: region[0].name: \"New York\": a region name is"),
        "{e}"
    );
}

#[test]
fn rejects_no_regions_and_more_than_16() {
    assert_eq!(
        refused(EGRESS),
        "config.toml: region: at least one [[region]] table is required"
    );
    assert_eq!(
        refused(&format!("{}{EGRESS}", regions(17))),
        "config.toml: region: at most 16 regions are allowed, got 17"
    );
    parse(&format!("{}{EGRESS}", regions(16))).unwrap();
}

#[test]
fn rejects_duplicate_listen_addresses() {
    let e = refused(&format!("{REGION}pinned = \"127.0.0.1:8080\"\n{EGRESS}"));
    assert_eq!(
        e,
        "config.toml: region[0].pinned: 127.0.0.1:8080 clashes with intake.rotating \
         (127.0.0.1:8080): duplicate listen address"
    );
    let e = refused(&format!(
        "[admin]\nlisten = \"0.0.0.0:8081\"\n{REGION}pinned = \"127.0.0.1:8081\"\n{EGRESS}"
    ));
    assert!(
        e.starts_with("config.toml: admin.listen: 0.0.0.0:8081 clashes with region[0].pinned"),
        "{e}"
    );
}

#[test]
fn accepts_port_zero_listeners_the_kernel_picks() {
    let c = parse(&format!(
        "[intake]\nrotating = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n{REGION}pinned = \"127.0.0.1:0\"\n{EGRESS}"
    ))
    .unwrap();
    assert_eq!(c.intake_listeners().count(), 2);
}

#[test]
fn rejects_no_intake_listener() {
    let e = refused(&format!("[intake]\nrotating = \"off\"\n{REGION}{EGRESS}"));
    assert!(
        e.starts_with("config.toml: intake: no intake listener"),
        "{e}"
    );
}

#[test]
fn rejects_bad_listen_address() {
    let e = refused(&format!(
        "[intake]\nrotating = \"localhost:8080\"\n{REGION}{EGRESS}"
    ));
    assert!(
        e.starts_with(
            "config.toml: intake.rotating: \"localhost:8080\" is not an address with a port"
        ),
        "{e}"
    );
}

#[test]
fn rejects_empty_egress() {
    let want = "config.toml: egress: no egress sources: list addresses (egress.addresses) or proxies (egress.socks5)";
    assert_eq!(refused(REGION), want);
    assert_eq!(
        refused(&format!("{REGION}[egress]\naddresses = []\n")),
        want
    );
}

#[test]
fn rejects_a_source_listed_twice() {
    let e = refused(&format!(
        "{REGION}[egress]\naddresses = [\"127.1.0.0/24\", \"10.0.0.1\", \"127.1.0.200-127.1.1.4\"]\n"
    ));
    assert_eq!(
        e,
        "config.toml: egress.addresses[2]: \"127.1.0.200-127.1.1.4\" overlaps egress.addresses[0] \
         (\"127.1.0.0/24\") at 127.1.0.200: a source may be listed once"
    );
    let e = refused(&format!(
        "{REGION}[egress]\naddresses = [\"10.0.0.1\", \"10.0.0.1\"]\n"
    ));
    assert!(
        e.contains("egress.addresses[1]: \"10.0.0.1\" overlaps egress.addresses[0]"),
        "{e}"
    );
    let e = refused(&format!(
        "{REGION}[egress]\nsocks5 = [{{ proxy = \"127.0.0.1:1080\" }}, {{ proxy = \"127.0.0.1:1080\" }}]\n"
    ));
    assert!(
        e.contains(
            "egress.socks5[1]: Socks5(127.0.0.1:1080) is already listed as egress.socks5[0]"
        ),
        "{e}"
    );
}

#[test]
fn rejects_too_large_blocks_and_pools() {
    let e = refused(&format!(
        "{REGION}[egress]\naddresses = [\"10.0.0.0/15\"]\n"
    ));
    assert!(
        e.starts_with(
            "config.toml: egress.addresses[0]: \"10.0.0.0/15\" holds 2^17 addresses; at most 65536"
        ),
        "{e}"
    );
    let e = refused(&format!(
        "{REGION}[egress]\naddresses = [\"2001:db8::/64\"]\n"
    ));
    assert!(e.contains("holds 2^64 addresses"), "{e}");
    let e = refused(&format!(
        "{REGION}[egress]\naddresses = [\"10.0.0.0/16\", \"10.1.0.0/31\"]\n"
    ));
    assert!(
        e.starts_with(
            "config.toml: egress.addresses[1]: \"10.1.0.0/31\" brings the pool to 65538 sources"
        ),
        "{e}"
    );
    let c = parse(&format!(
        "{REGION}[egress]\naddresses = [\"10.0.0.0/16\"]\n"
    ))
    .unwrap();
    assert_eq!(c.egress.sources.len(), 65_536);
}

#[test]
fn rejects_malformed_egress_entries() {
    for (entry, want) in [
        (
            "10.0.0.5/24",
            "\"10.0.0.5/24\" has host bits set; did you mean \"10.0.0.0/24\"?",
        ),
        (
            "10.0.0.0/33",
            "\"10.0.0.0/33\": prefix length must be 0 to 32",
        ),
        (
            "10.0.0.9-10.0.0.1",
            "\"10.0.0.9-10.0.0.1\": the range ends before it starts",
        ),
        (
            "10.0.0.1-::1",
            "\"10.0.0.1-::1\": both ends of a range must be the same family",
        ),
        ("10.0.0", "\"10.0.0\" is not an IPv4 or IPv6 address"),
        (
            "0.0.0.0",
            "\"0.0.0.0\": 0.0.0.0: the unspecified address cannot be a source",
        ),
        (
            "224.0.0.1",
            "\"224.0.0.1\": 224.0.0.1: a multicast address cannot be a source",
        ),
    ] {
        let e = refused(&format!(
            "{REGION}[egress]\naddresses = [\"10.9.9.9\", \"{entry}\"]\n"
        ));
        assert_eq!(
            e,
            format!("config.toml: egress.addresses[1]: {want}"),
            "entry {entry}"
        );
    }
}

#[test]
fn rejects_half_given_socks5_credentials() {
    let e = refused(&format!(
        "{REGION}[egress]\nsocks5 = [{{ proxy = \"127.0.0.1:1080\", username = \"u\" }}]\n"
    ));
    assert_eq!(
        e,
        "config.toml: egress.socks5[0].password: username is set without it"
    );
    let e = refused(&format!(
        "{REGION}[egress]\nsocks5 = [{{ proxy = \"127.0.0.1:1080\", username = \"\", password = \"p\" }}]\n"
    ));
    assert_eq!(
        e,
        "config.toml: egress.socks5[0].username: must be 1 to 255 bytes (RFC 1929), got 0"
    );
}

#[test]
fn rejects_tls_settings_on_a_plaintext_region() {
    let e = refused(&format!("{REGION}sni = \"x\"\n{EGRESS}"));
    assert_eq!(e, "config.toml: region[0].sni: is set but tls is false");
    let e = refused(&format!(
        "{REGION}tls = true\nca_file = \"no/such/ca.pem\"\n{EGRESS}"
    ));
    assert_eq!(
        e,
        "config.toml: region[0].ca_file: no/such/ca.pem is not a readable file"
    );
}

#[test]
fn rejects_a_host_that_does_not_resolve_naming_it() {
    let text = format!("[[region]]\nname = \"ny\"\nhost = \"no-such-host.invalid\"\n{EGRESS}");
    let e = Config::parse(&text, "config.toml", Resolve::Now)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "config.toml: region[0].host: host \"no-such-host.invalid\" does not resolve"
        ),
        "{e}"
    );
    let mut deferred = Config::parse(&text, "config.toml", Resolve::Deferred).unwrap();
    let e = deferred.resolve().unwrap_err().to_string();
    assert!(
        e.contains("region[0].host: host \"no-such-host.invalid\" does not resolve"),
        "{e}"
    );
}

#[test]
fn rejects_out_of_range_limits_by_key() {
    for (line, want) in [
        ("threads = 0", "threads: must be at least 1, got 0"),
        (
            "threads = 4\narena_slots = 3",
            "arena_slots: must be at least threads (4) so each thread has a slot, got 3",
        ),
        (
            "bundle_max_age_ms = 0",
            "bundle_max_age_ms: must be at least 1, got 0",
        ),
        (
            "bundle_max_age_ms = 60001",
            "bundle_max_age_ms: must be at most 60000, got 60001",
        ),
        (
            "upstream_timeout_ms = 0",
            "upstream_timeout_ms: must be at least 1, got 0",
        ),
        (
            "[intake]\nbody_bytes_max = 4096",
            "intake.body_bytes_max: must be at least 8686, got 4096",
        ),
        (
            "[intake]\nhead_bytes_max = 100",
            "intake.head_bytes_max: must be at least 256, got 100",
        ),
        (
            "[intake]\nconnections_max = 0",
            "intake.connections_max: must be at least 1, got 0",
        ),
        (
            "[intake]\nidle_timeout_ms = 0",
            "intake.idle_timeout_ms: must be at least 1, got 0",
        ),
    ] {
        let e = refused(&format!("{line}\n{REGION}{EGRESS}"));
        assert_eq!(e, format!("config.toml: {want}"), "{line}");
    }
    let e = refused(&format!("{REGION}burst = 0\n{EGRESS}"));
    assert_eq!(e, "config.toml: region[0].burst: must be at least 1, got 0");
    let e = refused(&format!(
        "{REGION}{EGRESS}reconnect_min_ms = 500\nreconnect_max_ms = 100\n"
    ));
    assert_eq!(
        e,
        "config.toml: egress.reconnect_max_ms: must be at least egress.reconnect_min_ms (500), got 100"
    );
}

/// Overlap detection works on entries (sorted intervals), never per address; a brute-force set
/// over the expanded addresses is the oracle. Seeded, so a failure reproduces.
#[test]
fn overlap_detection_agrees_with_brute_force_on_random_entries() {
    let mut rng = StdRng::seed_from_u64(0x0c0f_1a57);
    let mut refusals = 0;
    for _ in 0..400 {
        let n = rng.random_range(1..6);
        let mut entries = Vec::new();
        let mut seen = HashSet::new();
        let mut overlap = false;
        for _ in 0..n {
            let (text, addrs): (String, Vec<u8>) = match rng.random_range(0..3) {
                0 => {
                    let a: u8 = rng.random_range(1..64);
                    (format!("10.0.0.{a}"), vec![a])
                }
                1 => {
                    let a: u8 = rng.random_range(1..64);
                    let b: u8 = rng.random_range(a..64);
                    (format!("10.0.0.{a}-10.0.0.{b}"), (a..=b).collect())
                }
                _ => {
                    let len: u8 = rng.random_range(29..=32);
                    let size = 1u8 << (32 - len);
                    let base = rng.random_range(0..64 / size) * size;
                    (
                        format!("10.0.0.{base}/{len}"),
                        (base..base + size).collect(),
                    )
                }
            };
            for a in addrs {
                overlap |= !seen.insert(a);
            }
            entries.push(format!("\"{text}\""));
        }
        // 10.0.0.0 is a fine source (only 0.0.0.0 is refused), so every entry is valid alone.
        let text = format!("{REGION}[egress]\naddresses = [{}]\n", entries.join(", "));
        match parse(&text) {
            Ok(c) => {
                assert!(!overlap, "overlap not found in {entries:?}");
                assert_eq!(c.egress.sources.len(), seen.len());
            }
            Err(e) => {
                assert!(overlap, "{entries:?} refused: {e}");
                assert!(e.contains("a source may be listed once"), "{e}");
                refusals += 1;
            }
        }
    }
    assert!(
        refusals > 50,
        "the generator must produce overlaps: {refusals}"
    );
}

// ---- derived numbers ----

#[test]
fn pairs_and_fds_needed_count_every_term() {
    let c = Config::load_with(&examples().join("local-bench.toml"), Resolve::Deferred).unwrap();
    let c = Config { threads: 2, ..c };
    assert_eq!(c.pairs(), 256 * 8);
    let b = c.fd_budget();
    assert_eq!(
        (b.pairs, b.intake, b.listeners, b.admin, b.rings, b.slack),
        (2048, 2 * 256, 2 * 9, 1, 2, FD_SLACK)
    );
    assert_eq!(c.fds_needed(), 2048 + 512 + 18 + 1 + 2 + 64);
}

#[test]
fn per_thread_sources_split_evenly_and_cover_each_source_once() {
    let base = parse(&format!("{REGION}{EGRESS}")).unwrap();
    for sources in [0usize, 1, 3, 4, 7, 64, 257] {
        for threads in 1..=9 {
            let mut c = base.clone();
            c.threads = threads;
            c.egress.sources = (0..sources)
                .map(|i| local([127, 2, (i >> 8) as u8, i as u8]))
                .collect();
            let mut next = 0;
            for t in 0..threads {
                let r = c.per_thread_sources(t);
                assert_eq!(
                    r.start, next,
                    "{sources} sources, {threads} threads, thread {t}"
                );
                let len = r.len();
                assert!(len == sources / threads || len == sources / threads + 1);
                next = r.end;
            }
            assert_eq!(next, sources);
        }
    }
    let c = Config {
        threads: 3,
        arena_slots: 10,
        ..base
    };
    assert_eq!(
        (0..3)
            .map(|t| c.per_thread_arena_slots(t))
            .collect::<Vec<_>>(),
        vec![4, 3, 3]
    );
}

// ---- the embedded default and the example files ----

#[test]
fn embedded_default_is_jito_mainnet_with_pinned_ports_8081_to_8088() {
    let c = Config::embedded_default();
    assert_eq!(c.regions.len(), 8);
    for (i, (r, name)) in c.regions.iter().zip(MAINNET_REGIONS).enumerate() {
        assert_eq!(r.name, name);
        assert_eq!(r.host, format!("{name}.mainnet.block-engine.jito.wtf"));
        assert_eq!(r.authority, r.host);
        assert!(r.tls && r.port == 443 && !r.is_resolved());
        assert_eq!((r.interval_ms, r.burst), (1000, 1));
        assert_eq!(
            r.pinned,
            Some(SocketAddr::from(([127, 0, 0, 1], 8081 + i as u16)))
        );
    }
    assert_eq!(c.intake.rotating, Some("127.0.0.1:8080".parse().unwrap()));
    assert_eq!(c.admin, Some("127.0.0.1:9464".parse().unwrap()));
    assert!(!c.egress.sources.is_empty());
    let loopback_fallback = c.egress.sources == vec![local([127, 0, 0, 1])];
    assert_eq!(
        loopback_fallback,
        !c.warnings.is_empty(),
        "the fallback, and only it, warns"
    );
    for s in &c.egress.sources {
        if let Source::Local(ip) = s {
            assert!(loopback_fallback || !ip.is_loopback(), "{ip}");
        }
    }
}

#[test]
fn local_bench_example_matches_bench_engine_defaults() {
    let c = Config::load(&examples().join("local-bench.toml")).unwrap();
    assert_eq!(c.regions.len(), 8);
    for (i, (r, name)) in c.regions.iter().zip(MAINNET_REGIONS).enumerate() {
        assert_eq!(r.name, name);
        assert_eq!(
            r.addrs,
            vec![SocketAddr::from(([127, 0, 0, 11 + i as u8], 10000))]
        );
        assert!(!r.tls);
        assert_eq!(
            r.pinned,
            Some(SocketAddr::from(([127, 0, 0, 1], 8081 + i as u16)))
        );
    }
    assert_eq!(c.intake.rotating, Some("127.0.0.1:8080".parse().unwrap()));
    assert_eq!(c.egress.sources.len(), 256);
    assert_eq!(c.egress.sources[0], local([127, 1, 0, 0]));
    assert_eq!(c.egress.sources[255], local([127, 1, 0, 255]));
    assert_eq!(c.pairs(), 2048);
}

#[test]
fn mainnet_example_loads_without_network_with_hosts_deferred() {
    let c = Config::load_with(&examples().join("mainnet.toml"), Resolve::Deferred).unwrap();
    let default = Config::embedded_default();
    assert_eq!(
        c.regions, default.regions,
        "the example spells out the embedded default's regions"
    );
    assert!(!c.is_resolved());
    assert_eq!(c.egress.sources.len(), 32 + 31 + 1);
    assert_eq!(c.pairs(), 64 * 8);
}

#[test]
fn a_missing_file_is_named() {
    let e = Config::load(Path::new("/nonexistent/relay.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/nonexistent/relay.toml: cannot read the file:"),
        "{e}"
    );
}

#[test]
fn rejects_a_missing_empty_or_unusable_token_file_naming_file_and_key() {
    let dir = temp_dir("token-refused");
    let load = |token_file: &str, content: Option<&[u8]>| {
        let path = dir.join("relay.toml");
        std::fs::write(
            &path,
            format!("[admin]\ntoken_file = \"{token_file}\"\n{REGION}{EGRESS}"),
        )
        .unwrap();
        if let Some(content) = content {
            std::fs::write(dir.join(token_file), content).unwrap();
        }
        Config::load_with(&path, Resolve::Deferred)
            .unwrap_err()
            .to_string()
    };
    let at = |name: &str| {
        format!(
            "{}: admin.token_file: {}",
            dir.join("relay.toml").display(),
            dir.join(name).display()
        )
    };
    let e = load("missing.token", None);
    assert!(
        e.starts_with(&format!("{} cannot be read: ", at("missing.token"))),
        "{e}"
    );
    for empty in [&b""[..], b"\n", b"  \t\r\n  \n"] {
        let e = load("empty.token", Some(empty));
        assert_eq!(
            e,
            format!(
                "{} is empty: it must hold the bearer token",
                at("empty.token")
            )
        );
    }
    let e = load("spaced.token", Some(b"two words\n"));
    assert!(e.starts_with(&at("spaced.token")), "{e}");
    assert!(e.contains("space"), "{e}");
    assert!(!e.contains("two words"), "the token is never repeated: {e}");
    let e = load("binary.token", Some(&[0xff, 0xfe, b'a']));
    assert_eq!(
        e,
        format!(
            "{} is not text: it must hold the bearer token",
            at("binary.token")
        )
    );
    let e = load("huge.token", Some(&[b'a'; 64 * 1024]));
    assert!(e.starts_with(&at("huge.token")), "{e}");
    assert!(e.contains("not a token file"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn token_file_is_read_relative_to_the_config_trimmed_never_printed_and_reread_on_reload() {
    let dir = temp_dir("token-reload");
    let path = dir.join("relay.toml");
    std::fs::write(
        &path,
        format!("[admin]\ntoken_file = \"admin.token\"\n{REGION}{EGRESS}"),
    )
    .unwrap();
    std::fs::write(dir.join("admin.token"), "  first-s3cret\n").unwrap();
    let shared = Shared::from_file(&path, Resolve::Now).unwrap();
    let first = shared.load_full();
    let token = first.config.admin_token.as_ref().expect("a token");
    assert!(token.matches(b"first-s3cret"));
    assert!(!token.matches(b"  first-s3cret\n"));
    let shown = format!("{:?}", first.config);
    assert!(!shown.contains("first-s3cret"), "{shown}");
    assert!(
        shown.contains("admin_token: Some(Token(<redacted>))"),
        "{shown}"
    );
    assert_eq!(first.config.clone(), first.config);

    std::fs::write(dir.join("admin.token"), "\n").unwrap();
    assert!(shared.reload().is_err());
    assert_eq!(
        shared.load().generation,
        1,
        "an emptied token file is refused"
    );
    std::fs::write(dir.join("admin.token"), "second-s3cret").unwrap();
    assert_eq!(shared.reload().unwrap(), 2);
    let now = shared.load();
    assert!(
        now.config
            .admin_token
            .as_ref()
            .unwrap()
            .matches(b"second-s3cret")
    );
    assert_ne!(now.config, first.config);
    assert_eq!(
        parse(&format!("{REGION}{EGRESS}")).unwrap().admin_token,
        None
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- the shared snapshot ----

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bundle-relay-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn bad_reload_keeps_the_old_generation_and_config_and_a_good_one_bumps_it() {
    let dir = temp_dir("reload");
    let path = dir.join("relay.toml");
    std::fs::write(&path, format!("threads = 2\n{REGION}{EGRESS}")).unwrap();
    let shared = Shared::from_file(&path, Resolve::Now).unwrap();
    let first = shared.load_full();
    assert_eq!((first.generation, first.config.threads), (1, 2));
    assert_eq!(first.source.as_deref(), Some(path.as_path()));

    for bad in [
        format!("threads = 3\n{REGION}interval_ms = 0\n{EGRESS}"),
        "threads = [".to_string(),
        format!("threads = 3\n{REGION}"),
    ] {
        std::fs::write(&path, bad).unwrap();
        let e = shared.reload().unwrap_err();
        assert_eq!(e.origin, path.display().to_string());
        let now = shared.load();
        assert_eq!(now.generation, 1);
        assert_eq!(now.config, first.config);
    }
    let e = shared.reload_from(&dir.join("missing.toml")).unwrap_err();
    assert!(e.message.starts_with("cannot read the file"), "{e}");
    assert_eq!(shared.load().generation, 1);

    std::fs::write(&path, format!("threads = 3\n{REGION}{EGRESS}")).unwrap();
    assert_eq!(shared.reload().unwrap(), 2);
    let now = shared.load();
    assert_eq!((now.generation, now.config.threads), (2, 3));
    assert_eq!(first.config.threads, 2, "a held snapshot never changes");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn embedded_default_snapshot_has_nothing_to_reload() {
    let shared = Shared::new(Config::embedded_default(), None, Resolve::Deferred);
    assert_eq!(shared.load().generation, 1);
    assert!(shared.reload().is_err());
    assert_eq!(shared.load().generation, 1);
}

/// Readers racing reloads only ever see whole snapshots whose generation never goes back.
#[test]
fn readers_see_whole_snapshots_while_reloads_race() {
    let dir = temp_dir("race");
    let files: Vec<PathBuf> = (1..=4)
        .map(|t| {
            let p = dir.join(format!("{t}.toml"));
            std::fs::write(
                &p,
                format!("threads = {t}\narena_slots = {}\n{REGION}{EGRESS}", t * 100),
            )
            .unwrap();
            p
        })
        .collect();
    let shared = Arc::new(Shared::from_file(&files[0], Resolve::Deferred).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (shared, done) = (shared.clone(), done.clone());
            std::thread::spawn(move || {
                let mut last = 0;
                while !done.load(Ordering::Relaxed) {
                    let s = shared.load();
                    assert!(s.generation >= last);
                    assert_eq!(s.config.arena_slots as usize, s.config.threads * 100);
                    last = s.generation;
                }
            })
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(7);
    for i in 0..200u64 {
        let gen_ = shared
            .reload_from(&files[rng.random_range(0..files.len())])
            .unwrap();
        assert_eq!(gen_, i + 2);
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- command-line overrides ----

const TLS_REGION: &str = "[[region]]\nname = \"ny\"\nhost = \"ny.engine.invalid\"\n";
const SOCKS_EGRESS: &str =
    "[egress]\naddresses = [\"10.9.0.0/30\"]\nsocks5 = [{ proxy = \"127.0.0.1:1080\" }]\n";

fn overridden(text: &str, o: &Overrides) -> Result<Config, String> {
    // A folder per call: tests run in parallel, and one removing a shared folder would pull
    // the file out from under another.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = temp_dir(&format!(
        "overrides-{}",
        CALLS.fetch_add(1, Ordering::Relaxed)
    ));
    let path = dir.join("relay.toml");
    std::fs::write(&path, text).unwrap();
    let r = Config::load_overridden(&path, Resolve::Now, o).map_err(|e| e.to_string());
    std::fs::remove_dir_all(&dir).unwrap();
    r
}

#[test]
fn resolve_override_connects_a_named_host_to_an_address_and_keeps_tls_sni_and_authority() {
    let o = Overrides {
        resolve: vec![Overrides::parse_resolve("ny.engine.invalid:443:127.0.0.15:10000").unwrap()],
        ..Overrides::default()
    };
    let c = overridden(&format!("{TLS_REGION}{EGRESS}"), &o).unwrap();
    let r = &c.regions[0];
    assert_eq!(
        r.addrs,
        vec!["127.0.0.15:10000".parse::<SocketAddr>().unwrap()]
    );
    assert!(r.literal, "an override is never looked up again");
    assert!(r.tls);
    assert_eq!((r.host.as_str(), r.port), ("ny.engine.invalid", 443));
    assert_eq!(r.authority, "ny.engine.invalid");
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("connects to 127.0.0.15:10000")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn resolve_override_for_no_region_is_refused_naming_it() {
    let o = Overrides {
        resolve: vec![Overrides::parse_resolve("tokyo.engine.invalid:443:127.0.0.18:1").unwrap()],
        ..Overrides::default()
    };
    let e = overridden(&format!("{TLS_REGION}{EGRESS}"), &o).unwrap_err();
    assert!(
        e.contains("tokyo.engine.invalid:443 is not the host and port of any region"),
        "{e}"
    );
}

#[test]
fn resolve_override_text_names_what_is_wrong() {
    for (text, want) in [
        ("ny.engine.invalid:443", "expected HOST:PORT:ADDRESS"),
        ("ny.engine.invalid:https:127.0.0.1:1", "is not a port"),
        (
            "ny.engine.invalid:443:localhost:1",
            "is not an IP:PORT address",
        ),
        (":443:127.0.0.1:1", "the host is empty"),
    ] {
        let e = Overrides::parse_resolve(text).unwrap_err();
        assert!(e.contains(want), "{text}: {e}");
    }
    assert_eq!(
        Overrides::parse_resolve("h:443:[::1]:10000").unwrap(),
        ("h".to_string(), 443, "[::1]:10000".parse().unwrap())
    );
}

#[test]
fn ca_file_and_egress_overrides_replace_trust_and_sources() {
    let dir = temp_dir("ca-override");
    let ca = dir.join("bench-ca.pem");
    std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\n").unwrap();
    let o = Overrides {
        resolve: vec![Overrides::parse_resolve("ny.engine.invalid:443:127.0.0.15:10000").unwrap()],
        ca_file: Some(ca.clone()),
        egress: Some(vec!["127.1.0.0/31".into(), "127.1.0.9".into()]),
        egress_slice: None,
        tenants: None,
    };
    let c = overridden(&format!("{TLS_REGION}{SOCKS_EGRESS}"), &o).unwrap();
    assert_eq!(c.regions[0].ca_file.as_deref(), Some(ca.as_path()));
    assert_eq!(
        c.egress.sources,
        vec![
            local([127, 1, 0, 0]),
            local([127, 1, 0, 1]),
            local([127, 1, 0, 9])
        ],
        "addresses replaced, SOCKS5 proxies dropped"
    );
    let bad = Overrides {
        egress: Some(vec!["127.1.0.0/8".into()]),
        ..o
    };
    let e = overridden(&format!("{TLS_REGION}{SOCKS_EGRESS}"), &bad).unwrap_err();
    assert!(
        e.contains("egress"),
        "an overridden entry is checked like a written one: {e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reload_applies_the_command_lines_overrides_again() {
    let dir = temp_dir("reload-overrides");
    let path = dir.join("relay.toml");
    std::fs::write(&path, format!("threads = 2\n{TLS_REGION}{EGRESS}")).unwrap();
    let o = Overrides {
        resolve: vec![Overrides::parse_resolve("ny.engine.invalid:443:127.0.0.15:10000").unwrap()],
        ..Overrides::default()
    };
    let first = Config::load_overridden(&path, Resolve::Now, &o).unwrap();
    let shared = Shared::new(first, Some(path.clone()), Resolve::Now).with_overrides(o);
    std::fs::write(&path, format!("threads = 3\n{TLS_REGION}{EGRESS}")).unwrap();
    assert_eq!(
        shared.reload().unwrap(),
        2,
        "the unresolvable host is still overridden"
    );
    assert_eq!(shared.load().config.threads, 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- egress slices: N relays, one pool listed alike, disjoint parts ----

fn sliced(slice: &str) -> Result<Config, String> {
    parse(&format!(
        "{REGION}[egress]\naddresses = [\"127.1.0.0/29\", \"127.1.0.8/31\"]\nslice = \"{slice}\"\n"
    ))
}

fn addresses(c: &Config) -> Vec<String> {
    c.egress
        .sources
        .iter()
        .map(|s| match s {
            Source::Local(ip) => ip.to_string(),
            Source::Socks5 { proxy, .. } => proxy.to_string(),
        })
        .collect()
}

#[test]
fn egress_slice_k_of_n_takes_the_kth_contiguous_part_and_the_parts_cover_the_pool_once() {
    // 10 sources in 3 slices: 4, 3, 3.
    let parts: Vec<Vec<String>> = (1..=3)
        .map(|k| addresses(&sliced(&format!("{k}/3")).unwrap()))
        .collect();
    assert_eq!(
        parts[0],
        ["127.1.0.0", "127.1.0.1", "127.1.0.2", "127.1.0.3"]
    );
    assert_eq!(parts[1], ["127.1.0.4", "127.1.0.5", "127.1.0.6"]);
    assert_eq!(parts[2], ["127.1.0.7", "127.1.0.8", "127.1.0.9"]);
    let all: HashSet<&String> = parts.iter().flatten().collect();
    assert_eq!(all.len(), 10, "no source in two slices, none left out");
    let s = sliced("2/3").unwrap().egress.slice.unwrap();
    assert_eq!((s.k, s.n, s.first, s.pool), (2, 3, 4, 10));
    assert_eq!(
        addresses(&sliced("1/1").unwrap()).len(),
        10,
        "1/1 is the whole pool"
    );
}

#[test]
fn egress_slice_out_of_range_or_malformed_is_refused_naming_the_key() {
    for (slice, why) in [
        ("0/3", "K must be 1 to N"),
        ("4/3", "K must be 1 to N"),
        ("1/0", "K must be 1 to N"),
        (
            "1/11",
            "11 slices of 10 sources would leave some relay none",
        ),
        ("2-4", "expected K/N"),
        ("a/4", "expected K/N"),
    ] {
        let e = sliced(slice).unwrap_err();
        assert!(
            e.contains("egress.slice") && e.contains(why),
            "{slice}: {e}"
        );
    }
}

#[test]
fn egress_slice_from_the_command_line_slices_the_files_pool() {
    let o = Overrides {
        egress_slice: Some("2/2".into()),
        ..Overrides::default()
    };
    let c = overridden(
        &format!("{REGION}[egress]\naddresses = [\"127.1.0.0/30\"]\n"),
        &o,
    )
    .unwrap();
    assert_eq!(addresses(&c), ["127.1.0.2", "127.1.0.3"]);
}
