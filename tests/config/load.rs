//! The config schema as a decision table: what loads (and with which defaults and derived
//! numbers), and what is refused with which message; the example files; hot reload.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
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

/// Who watches an idle upstream connection, and what the user timeout must then cover:
/// (ping_idle_ms, tcp_user_timeout_ms) → loads?
#[test]
fn idle_connection_watch_table_pings_or_kernel_keepalive_with_a_user_timeout_that_covers_it() {
    let table: &[(u64, u64, bool)] = &[
        // PINGs on: HTTP/2 PINGs watch idle connections, any user timeout.
        (30_000, 100, true),
        (30_000, 5_000, true),
        // PINGs off: the kernel's keepalive (10 s, then 3 probes 1 s apart) must all fit in
        // the user timeout, or one lost probe ends a healthy connection.
        (0, 5_000, false),
        (0, 12_999, false),
        (0, 13_000, true),
        (0, 60_000, true),
    ];
    for &(ping, timeout, loads) in table {
        let text = format!(
            "{REGION}[egress]\naddresses = [\"127.1.0.0/30\"]\nping_idle_ms = {ping}\n\
             tcp_user_timeout_ms = {timeout}\n"
        );
        match parse(&text) {
            Ok(c) => {
                assert!(loads, "({ping}, {timeout}) loaded");
                assert_eq!(c.egress.tcp_user_timeout_ms, timeout);
            }
            Err(e) => {
                assert!(!loads, "({ping}, {timeout}) refused: {e}");
                assert!(
                    e.contains("egress.tcp_user_timeout_ms")
                        && e.contains(&format!("got {timeout}"))
                        && e.contains("at least 13000")
                        && e.contains("ping_idle_ms = 0")
                        && e.contains("one lost keepalive probe"),
                    "{e}"
                );
            }
        }
    }
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
        ("[intake]\nunready_ms = 9001\n", "intake.unready_ms", "9000"),
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
fn reactor_threads_sleep_unless_poll_is_chosen_and_napi_busy_polling_needs_poll_mode() {
    use bundle_relay::config::{Reactor, ReactorMode};
    assert_eq!(
        parse(&format!("{REGION}{EGRESS}")).unwrap().reactor,
        Reactor::default()
    );
    assert_eq!(Reactor::default().mode, ReactorMode::Sleep);
    let c = parse(&format!(
        "{REGION}{EGRESS}[reactor]\nmode = \"poll\"\nnapi_busy_poll_us = 50\n"
    ))
    .unwrap();
    assert_eq!(
        c.reactor,
        Reactor {
            mode: ReactorMode::Poll,
            napi_busy_poll_us: 50
        }
    );
    let e = refused(&format!("{REGION}{EGRESS}[reactor]\nmode = \"spin\"\n"));
    assert!(
        e.contains(r#"reactor.mode: must be "sleep" or "poll", got "spin""#),
        "{e}"
    );
    let e = refused(&format!(
        "{REGION}{EGRESS}[reactor]\nnapi_busy_poll_us = 50\n"
    ));
    assert!(
        e.contains("reactor.napi_busy_poll_us: applies in mode = \"poll\" only"),
        "{e}"
    );
    let e = refused(&format!(
        "{REGION}{EGRESS}[reactor]\nmode = \"poll\"\nnapi_busy_poll_us = 5000\n"
    ));
    assert!(
        e.contains("reactor.napi_busy_poll_us: must be at most 1000, got 5000"),
        "{e}"
    );
}

#[test]
fn leader_routing_is_a_rotating_strategy_whose_poll_and_wait_are_bounded_with_their_reason() {
    use bundle_relay::config::{Leader, Strategy};
    let c = parse(&format!(
        "{REGION}{EGRESS}[default_tenant]\nrotating = \"leader\"\n"
    ))
    .unwrap();
    assert_eq!(c.tenants.default.unwrap().strategy, Strategy::Leader);
    assert_eq!(
        c.leader,
        Leader {
            poll_ms: 400,
            wait_ms: 20
        }
    );
    let c = parse(&format!(
        "{REGION}{EGRESS}[leader]\npoll_ms = 100\nwait_ms = 0\n"
    ))
    .unwrap();
    assert_eq!((c.leader.poll_ms, c.leader.wait_ms), (100, 0));
    let e = refused(&format!("{REGION}{EGRESS}[leader]\npoll_ms = 10\n"));
    assert!(
        e.contains("leader.poll_ms: must be at least 50, got 10"),
        "{e}"
    );
    let e = refused(&format!(
        "bundle_max_age_ms = 500\n{REGION}{EGRESS}[leader]\nwait_ms = 500\n"
    ));
    assert!(
        e.contains("leader.wait_ms: must be below bundle_max_age_ms (500), got 500"),
        "{e}"
    );
    let e = refused(&format!(
        "{REGION}{EGRESS}[default_tenant]\nrotating = \"fastest\"\n"
    ));
    assert!(
        e.contains("fastest") && e.contains("leader") && e.contains("ordered"),
        "{e}"
    );
}

#[test]
fn fan_out_is_one_by_default_and_at_most_four_and_the_tenants_regions() {
    let two = format!(
        "{}{EGRESS}[default_tenant]\nregions = [\"r0\", \"r1\"]\n",
        regions(3)
    );
    assert_eq!(parse(&two).unwrap().tenants.default.unwrap().fan_out, 1);
    let c = parse(&format!("{two}fan_out = 2\n")).unwrap();
    assert_eq!(c.tenants.default.unwrap().fan_out, 2);
    let e = refused(&format!("{two}fan_out = 3\n"));
    assert!(
        e.contains("default_tenant.fan_out: must be 1 to 2 (at most 4, and no more than the 2 regions it may use), got 3"),
        "{e}"
    );
    let e = refused(&format!(
        "{}{EGRESS}[default_tenant]\nfan_out = 5\n",
        regions(8)
    ));
    assert!(e.contains("fan_out: must be 1 to 4"), "{e}");
    let e = refused(&format!("{REGION}{EGRESS}[default_tenant]\nfan_out = 0\n"));
    assert!(e.contains("fan_out: must be 1 to 1"), "{e}");
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
fn trusted_proxies_are_addresses_or_blocks_each_named_when_wrong() {
    let with = |list: &str| format!("{REGION}{EGRESS}[intake]\ntrusted_proxies = [{list}]\n");
    let c = parse(&with(
        r#""127.0.0.1", "10.8.0.0/16", "::ffff:192.0.2.0/120""#,
    ))
    .unwrap();
    let shown: Vec<String> = c
        .intake
        .trusted_proxies
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(shown, ["127.0.0.1/32", "10.8.0.0/16", "192.0.2.0/24"]);
    assert!(
        parse(&format!("{REGION}{EGRESS}"))
            .unwrap()
            .intake
            .trusted_proxies
            .is_empty()
    );
    for (list, want) in [
        (
            r#""127.0.0.1", "haproxy.local""#,
            "intake.trusted_proxies[1]: \"haproxy.local\" is not an address or CIDR block",
        ),
        (
            r#""10.8.0.1/16""#,
            "intake.trusted_proxies[0]: \"10.8.0.1/16\" has host bits set: the block is 10.8.0.0/16",
        ),
        (
            r#""10.8.0.0/16", "10.8.0.0/16""#,
            "intake.trusted_proxies[1]: \"10.8.0.0/16\" is listed already as intake.trusted_proxies[0]",
        ),
        (
            r#""10.0.0.0/33""#,
            "intake.trusted_proxies[0]: \"10.0.0.0/33\": the prefix length must be 0 to 32",
        ),
    ] {
        let e = refused(&with(list));
        assert!(e.contains(want), "{list}: {e}");
    }
    let many: Vec<String> = (0..65).map(|i| format!("\"10.0.{i}.0/24\"")).collect();
    let e = refused(&with(&many.join(",")));
    assert!(
        e.contains("intake.trusted_proxies: at most 64 entries are allowed, got 65"),
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
fn a_tenants_wrong_or_unknown_policy_key_is_named_with_its_own_line() {
    let tenant = "[[tenant]]\nname = \"bot\"\nkeys = [\"k\"]\n";
    let e = refused(&format!("{REGION}{EGRESS}{tenant}fan_out = \"x\"\n"));
    assert!(
        e.starts_with(
            "config.toml:10:11: tenant[0].fan_out: invalid type: string \"x\", expected u8"
        ),
        "{e}"
    );
    let e = refused(&format!("{REGION}{EGRESS}{tenant}rate = -1\n"));
    assert!(
        e.starts_with(
            "config.toml:10:8: tenant[0].rate: invalid value: integer `-1`, expected u32"
        ),
        "{e}"
    );
    let e = refused(&format!("{REGION}{EGRESS}{tenant}rotating = \"fastest\"\n"));
    assert!(
        e.starts_with("config.toml:10:12: tenant[0].rotating: unknown variant `fastest`"),
        "{e}"
    );
    let e = refused(&format!("{REGION}{EGRESS}{tenant}fanout = 2\n"));
    assert!(
        e.starts_with("config.toml:10:1: tenant[0].fanout: unknown field `fanout`"),
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
fn a_key_or_table_given_twice_is_named_with_where_it_was_given_again() {
    let e = refused("threads = 1\nthreads = 2\n");
    assert_eq!(
        e, "config.toml:2:1: duplicate key `threads`: a key is given once per table",
        "{e}"
    );
    let e = refused(&format!(
        "[intake]\nrotating = \"127.0.0.1:0\"\n{}[intake]\nconnections_max = 3\n",
        regions(1)
    ));
    assert!(
        e.contains(": table [intake] given twice: list its keys under one [intake]"),
        "{e}"
    );
    let e = refused(&format!(
        "{}[egress]\nslice = \"1/2\"\nslice = \"2/2\"\n",
        regions(1)
    ));
    assert!(
        e.contains(": duplicate key `slice` in [egress]: a key is given once per table"),
        "{e}"
    );
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

/// An address that must be an IP and port says which part is wrong: a host name (these are not
/// looked up), a URL's scheme, or no port at all.
#[test]
fn rejects_bad_listen_and_proxy_addresses_saying_what_is_wrong() {
    let e = refused(&format!(
        "[intake]\nrotating = \"localhost:8080\"\n{REGION}{EGRESS}"
    ));
    assert_eq!(
        e,
        "config.toml: intake.rotating: \"localhost:8080\" names a host: an IP address is needed \
         here, with its port (like \"127.0.0.1:8080\" or \"[::1]:8080\")"
    );
    let e = refused(&format!(
        "{REGION}[egress]\nsocks5 = [{{ proxy = \"socks5://127.0.0.1:1080\" }}]\n"
    ));
    assert_eq!(
        e,
        "config.toml: egress.socks5[0].proxy: \"socks5://127.0.0.1:1080\" is a URL: write the \
         address alone, \"127.0.0.1:1080\""
    );
    let e = refused(&format!(
        "{REGION}[egress]\nsocks5 = [{{ proxy = \"127.0.0.1\" }}]\n"
    ));
    assert_eq!(
        e,
        "config.toml: egress.socks5[0].proxy: \"127.0.0.1\" has no port (like \"127.0.0.1:8080\" \
         or \"[::1]:8080\")"
    );
    // An IPv6 address and port without brackets: the bracketed form is named, whether the
    // port makes it no address at all or reads as the address's last group.
    for (text, want) in [("::1:10000", "[::1]:10000"), ("::1:8081", "[::1]:8081")] {
        let e = refused(&format!(
            "{REGION}[egress]\nsocks5 = [{{ proxy = \"{text}\" }}]\n"
        ));
        assert_eq!(
            e,
            format!(
                "config.toml: egress.socks5[0].proxy: \"{text}\" is an IPv6 address and a port \
                 without brackets: write \"{want}\""
            ),
            "{text}"
        );
    }
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

/// A proxy + username is one source, so one pacing history: listed twice with two passwords
/// it would be paced as two sources sharing one pair's sends (half the capacity counted on).
#[test]
fn rejects_a_proxy_and_username_listed_twice_whatever_the_passwords() {
    let e = refused(&format!(
        "{REGION}[egress]\nsocks5 = [\
         {{ proxy = \"127.0.0.1:1080\", username = \"alice\", password = \"first-secret\" }}, \
         {{ proxy = \"127.0.0.1:1080\", username = \"bob\", password = \"first-secret\" }}, \
         {{ proxy = \"127.0.0.1:1080\", username = \"alice\", password = \"second-secret\" }}]\n"
    ));
    assert_eq!(
        e,
        "config.toml: egress.socks5[2]: Socks5(alice:<redacted>@127.0.0.1:1080) is already \
         listed as egress.socks5[0] with another password: a proxy and username are one source"
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
        "config.toml: region[0].ca_file: no/such/ca.pem cannot be read: No such file or directory (os error 2)"
    );
}

/// A host written with its port can never resolve: refused for what it is, naming where the
/// port goes, not taken for a name the network may resolve later (which a unit retries for
/// ever).
#[test]
fn a_region_host_with_its_port_is_refused_naming_the_port_key() {
    for host in [
        "ny.mainnet.block-engine.jito.wtf:443",
        "127.0.0.11:10000",
        "[::1]:10000",
        "[ny.example]",
    ] {
        let text = format!("[[region]]\nname = \"ny\"\nhost = \"{host}\"\nport = 10000\n{EGRESS}");
        let e = Config::parse(&text, "config.toml", Resolve::Now).unwrap_err();
        assert!(!e.transient, "{host}: {e}");
        assert_eq!(e.key, "region[0].host", "{host}: {e}");
        assert!(e.message.contains("region[0].port"), "{host}: {e}");
    }
    // An IPv6 address, bare or in brackets, is a host.
    for host in ["::1", "[::1]"] {
        let text = format!(
            "[[region]]\nname = \"ny\"\nhost = \"{host}\"\nport = 10000\n\
             [egress]\naddresses = [\"::1\"]\n"
        );
        assert!(parse(&text).is_ok(), "{host}: {:?}", parse(&text).err());
    }
}

/// Over TLS the engine is named by `sni`, else by its host: one rustls cannot take (no DNS
/// name, no IP address) would fail every handshake, so it is refused when the file is read.
/// A bracketed IPv6 host is named by its address.
#[test]
fn a_tls_server_name_no_handshake_could_use_is_refused_naming_the_key() {
    let e = refused(&format!(
        "[[region]]\nname = \"ny\"\nhost = \"127.0.0.11\"\nport = 10443\ntls = true\n\
         sni = \"bad..name_!\"\n{EGRESS}"
    ));
    assert!(
        e.starts_with("config.toml: region[0].sni: \"bad..name_!\""),
        "{e}"
    );
    let c = parse(
        "[[region]]\nname = \"ny\"\nhost = \"[::1]\"\nport = 10443\ntls = true\n\
         [egress]\naddresses = [\"::1\"]\n",
    )
    .unwrap();
    assert_eq!(c.regions[0].server_name(), "::1");
}

/// Two regions naming one engine would have each address send to it once an interval for
/// each region: twice the engine's rule. Refused, naming both.
#[test]
fn two_regions_naming_one_engine_are_refused() {
    let second = |host: &str, port: u16| {
        format!("{REGION}[[region]]\nname = \"ny2\"\nhost = \"{host}\"\nport = {port}\n{EGRESS}")
    };
    let e = refused(&second("127.0.0.15", 10000));
    assert!(
        e.starts_with("config.toml: region[1].host: 127.0.0.15:10000 is region[0]'s engine too"),
        "{e}"
    );
    assert!(parse(&second("127.0.0.15", 10001)).is_ok());
    assert!(parse(&second("127.0.0.16", 10000)).is_ok());
    let named = "[[region]]\nname = \"a\"\nhost = \"ny.example\"\nport = 443\n\
                 [[region]]\nname = \"b\"\nhost = \"NY.example\"\nport = 443\n";
    let e = Config::parse(
        &format!("{named}{EGRESS}"),
        "config.toml",
        Resolve::Deferred,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("region[1].host: ny.example:443 is region[0]'s engine too"),
        "{e}"
    );
    let connect = format!(
        "{REGION}[[region]]\nname = \"b\"\nhost = \"other.example\"\nconnect = [\"127.0.0.9:1\", \"127.0.0.15:10000\"]\n{EGRESS}"
    );
    let e = refused(&connect);
    assert!(
        e.starts_with("config.toml: region[1].connect: 127.0.0.15:10000 is region[0]'s engine too"),
        "{e}"
    );
    // One name, each region connecting where it says: two engines (the geo-routed name
    // pointed at two regions' addresses), not one.
    let by_connect = format!(
        "[[region]]\nname = \"a\"\nhost = \"mainnet.example\"\nport = 10000\nconnect = \"127.0.0.11:10000\"\n\
         [[region]]\nname = \"b\"\nhost = \"mainnet.example\"\nport = 10000\nconnect = \"127.0.0.12:10000\"\n{EGRESS}"
    );
    assert!(parse(&by_connect).is_ok(), "{:?}", parse(&by_connect).err());
}

/// A `ca_file` that holds no usable CA is refused when the config is read, at start and on a
/// reload alike, naming the key: a reload that took it would leave a relay that cannot start
/// again.
#[test]
fn rejects_a_ca_file_that_holds_no_certificate() {
    let dir = temp_dir("ca-not-pem");
    let junk = dir.join("junk.pem");
    std::fs::write(&junk, "threads = 2\n").unwrap();
    let e = refused(&format!(
        "{REGION}tls = true\nca_file = \"{}\"\n{EGRESS}",
        junk.display()
    ));
    assert_eq!(
        e,
        format!(
            "config.toml: region[0].ca_file: {} holds no CA: no PEM CERTIFICATE block found",
            junk.display()
        )
    );
    // A FIFO is refused, not read (a read would wait for a writer forever).
    let fifo = dir.join("fifo.pem");
    mkfifo(&fifo);
    let e = refused(&format!(
        "{REGION}tls = true\nca_file = \"{}\"\n{EGRESS}",
        fifo.display()
    ));
    assert!(e.ends_with("is not a plain file"), "{e}");
    let good = dir.join("ca.pem");
    std::fs::write(&good, crate::tls_support::pki(&[]).ca_pem).unwrap();
    assert!(
        parse(&format!(
            "{REGION}tls = true\nca_file = \"{}\"\n{EGRESS}",
            good.display()
        ))
        .is_ok()
    );
}

/// An address the relay dials must name a port something listens on: port 0 is refused
/// for `connect` and for a SOCKS5 proxy, naming the key.
#[test]
fn rejects_port_zero_where_the_relay_dials() {
    let e = refused(&format!("{REGION}connect = \"127.0.0.11:0\"\n{EGRESS}"));
    assert_eq!(
        e,
        "config.toml: region[0].connect[0]: \"127.0.0.11:0\": port 0 names nothing to dial"
    );
    let e = refused(&format!(
        "{REGION}[egress]\nsocks5 = [{{ proxy = \"127.0.0.1:0\" }}]\n"
    ));
    assert_eq!(
        e,
        "config.toml: egress.socks5[0].proxy: \"127.0.0.1:0\": port 0 names nothing to dial"
    );
}

/// `connect` is one "ip:port" or a list of them; anything else says so, not a type's name.
#[test]
fn a_connect_of_the_wrong_type_says_what_it_takes() {
    let e = refused(&format!("{REGION}connect = 5\n{EGRESS}"));
    assert!(
        e.contains("region[0].connect") && e.contains("an \"ip:port\" or a list of them"),
        "{e}"
    );
    assert!(!e.contains("OneOrMany"), "{e}");
}

/// On Linux `[::]` listens on IPv4 too (net.ipv6.bindv6only = 0): it clashes with an IPv4
/// listener on the same port.
#[test]
fn an_ipv6_wildcard_listener_clashes_with_an_ipv4_one_on_its_port() {
    let text = |admin: &str| {
        format!(
            "[intake]\nrotating = \"127.0.0.1:18080\"\n[admin]\nlisten = \"{admin}\"\n{REGION}{EGRESS}"
        )
    };
    let e = refused(&text("[::]:18080"));
    assert!(e.contains("duplicate listen address"), "{e}");
    assert!(parse(&text("[::]:18081")).is_ok());
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

/// A config file that is a FIFO or a device is refused, not waited on: opening a FIFO for
/// reading waits for a writer, which held a reload (and a stop behind it) for good.
#[test]
fn a_config_file_that_is_a_fifo_or_a_device_is_refused_not_waited_on() {
    let dir = temp_dir("config-fifo");
    let fifo = dir.join("relay.toml");
    mkfifo(&fifo);
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(Config::load(&path).map(|_| ()).map_err(|e| e.to_string()));
    });
    let e = rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("the load returns without a writer at the FIFO")
        .unwrap_err();
    assert_eq!(
        e,
        format!(
            "{}: cannot read the file: it is not a plain file",
            fifo.display()
        )
    );
    let e = Config::load(Path::new("/dev/zero"))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "/dev/zero: cannot read the file: it is not a plain file");
    // Unblock the waiting open on main, so the thread ends.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo);
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
    // A FIFO is refused, not opened for reading (that waits for a writer, forever).
    mkfifo(&dir.join("fifo.token"));
    let e = load("fifo.token", None);
    assert_eq!(e, format!("{} is not a plain file", at("fifo.token")));
    let e = load("/dev/zero", None);
    assert_eq!(
        e,
        format!(
            "{}: admin.token_file: /dev/zero is not a plain file",
            dir.join("relay.toml").display()
        )
    );
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
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
}

/// `run --unready-ms` is the value in force whatever the file says, at its first load and at
/// every reload: a reload that read the file's own `unready_ms` would report it applied while
/// the stop still used the flag's.
#[test]
fn the_unready_ms_flag_holds_over_every_reload_of_the_file() {
    let dir = temp_dir("unready-flag");
    let path = dir.join("relay.toml");
    std::fs::write(&path, format!("{REGION}{EGRESS}")).unwrap();
    let overrides = bundle_relay::config::Overrides {
        unready_ms: Some(0),
        ..Default::default()
    };
    let cfg = Config::load_overridden(&path, Resolve::Now, &overrides).unwrap();
    assert_eq!(cfg.intake.unready_ms, 0);
    assert!(
        cfg.warnings
            .iter()
            .any(|w| w == "override: intake.unready_ms = 0 (--unready-ms)"),
        "{:?}",
        cfg.warnings
    );
    let shared = Shared::new(cfg, Some(path.clone()), Resolve::Now).with_overrides(overrides);
    std::fs::write(
        &path,
        format!("bundle_max_age_ms = 900\n[intake]\nunready_ms = 3000\n{REGION}{EGRESS}"),
    )
    .unwrap();
    assert_eq!(shared.reload().unwrap(), 2);
    let now = shared.load();
    assert_eq!(
        now.config.bundle_max_age_ms, 900,
        "the rest of the edit applies"
    );
    assert_eq!(
        now.config.intake.unready_ms, 0,
        "the flag's, not the file's"
    );
}

// ---- the shared snapshot ----

/// A scratch folder of this test process, removed when dropped, a failing assertion included:
/// some hold a searcher's secret key.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("bundle-relay-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
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
}

/// A reload that drops `[tenants_from]` and a later one that adds it back: the second asks the
/// endpoint, as a reload that adds it always does, rather than applying the document the
/// relay held before the first, whose tenants the first removed (a tenant revoked since would
/// come back for as long as the endpoint is down).
#[test]
fn tenants_from_added_back_by_a_reload_asks_the_endpoint_not_the_document_held_before() {
    let dir = temp_dir("tenants-back");
    let path = dir.join("relay.toml");
    let from = format!("{REGION}{EGRESS}[tenants_from]\nurl = \"http://127.0.0.1:9300/t\"\n");
    let file = format!("{REGION}{EGRESS}[[tenant]]\nname = \"a\"\nkeys = [\"key-a\"]\n");
    std::fs::write(&path, &from).unwrap();
    let first = Config::load(&path).unwrap();
    let held =
        r#"{"tenant": [{"name": "a", "keys": ["key-a"]}, {"name": "revoked", "keys": ["key-r"]}]}"#;
    let first = first.with_tenants_json(held, "doc").unwrap();
    let shared = Shared::new(first, Some(path.clone()), Resolve::Deferred)
        .with_tenants_doc(held.to_string())
        .with_fetch(|_| Err("connection refused".to_string()));
    std::fs::write(&path, &file).unwrap();
    assert_eq!(shared.reload().unwrap(), 2);
    std::fs::write(&path, &from).unwrap();
    let e = shared.reload().unwrap_err().to_string();
    assert!(
        e.contains("tenants_from") && e.contains("connection refused"),
        "{e}"
    );
    let now = shared.load();
    assert_eq!(now.generation, 2, "the file's tenants stay");
    let names: Vec<&str> = now
        .config
        .tenants
        .list
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["a"]);
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
    let reads = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (shared, done) = (shared.clone(), done.clone());
            let reads = reads.clone();
            std::thread::spawn(move || {
                let mut last = 0;
                while !done.load(Ordering::Relaxed) {
                    let s = shared.load();
                    assert!(s.generation >= last);
                    assert_eq!(s.config.arena_slots as usize, s.config.threads * 100);
                    last = s.generation;
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(7);
    for i in 0..200u64 {
        // Each reload races reads: the readers have read since the last one.
        let (r0, until) = (
            reads.load(Ordering::Relaxed),
            std::time::Instant::now() + std::time::Duration::from_secs(10),
        );
        while reads.load(Ordering::Relaxed) == r0 {
            assert!(
                std::time::Instant::now() < until,
                "the readers stopped reading"
            );
            std::thread::yield_now();
        }
        let gen_ = shared
            .reload_from(&files[rng.random_range(0..files.len())])
            .unwrap();
        assert_eq!(gen_, i + 2);
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
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
    Config::load_overridden(&path, Resolve::Now, o).map_err(|e| e.to_string())
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
        (
            "ny.engine.invalid:443:127.0.0.1:0",
            "port 0 of \"127.0.0.1:0\" names nothing to connect to",
        ),
        (
            "ny.engine.invalid:0:127.0.0.1:1",
            "port 0 names no engine's port",
        ),
    ] {
        let e = Overrides::parse_resolve(text).unwrap_err();
        assert!(e.contains(want), "{text}: {e}");
    }
    assert_eq!(
        Overrides::parse_resolve("h:443:[::1]:10000").unwrap(),
        ("h".to_string(), 443, "[::1]:10000".parse().unwrap())
    );
}

/// A folder named for `test` (removed when dropped) holding a (stub) CA file, and overrides
/// that connect the TLS region's host to loopback and trust that file.
fn bench_ca(test: &str) -> (TempDir, PathBuf, Overrides) {
    let dir = temp_dir(test);
    let ca = dir.join("bench-ca.pem");
    std::fs::write(&ca, crate::tls_support::pki(&[]).ca_pem).unwrap();
    let o = Overrides {
        resolve: vec![Overrides::parse_resolve("ny.engine.invalid:443:127.0.0.15:10000").unwrap()],
        ca_file: Some(ca.clone()),
        ..Overrides::default()
    };
    (dir, ca, o)
}

#[test]
fn ca_file_and_egress_overrides_replace_trust_and_sources() {
    let (_dir, ca, o) = bench_ca("ca-override");
    let o = Overrides {
        egress: Some(vec!["127.1.0.0/31".into(), "127.1.0.9".into()]),
        ..o
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
}

#[test]
fn a_ca_file_override_reaches_the_tls_regions_and_leaves_plaintext_ones_alone() {
    let (_dir, ca, o) = bench_ca("ca-override-mixed");
    let plain = "[[region]]\nname = \"local\"\nhost = \"127.0.0.16\"\nport = 10000\n";
    let c = overridden(&format!("{TLS_REGION}{plain}{EGRESS}"), &o).unwrap();
    let by_name = |n: &str| c.regions.iter().find(|r| r.name == n).unwrap();
    assert_eq!(by_name("ny").ca_file.as_deref(), Some(ca.as_path()));
    assert!(!by_name("local").tls);
    assert_eq!(by_name("local").ca_file, None);
}

#[test]
fn a_relative_ca_file_override_is_read_from_the_working_directory_not_the_configs() {
    let (dir, ca, o) = bench_ca("ca-override-relative");
    // The same file named relative to the working directory (up to / and down again), which
    // is not the config's folder.
    let cwd = std::env::current_dir().unwrap();
    let up: std::path::PathBuf = cwd.components().skip(1).map(|_| "..").collect();
    let relative = up.join(ca.strip_prefix("/").unwrap());
    let o = Overrides {
        ca_file: Some(relative),
        ..o
    };
    // The config deeper than the working directory: from its folder the same relative path
    // names a file that is not there.
    let nested = dir.join("a/b/c/d");
    std::fs::create_dir_all(&nested).unwrap();
    let path = nested.join("relay.toml");
    std::fs::write(&path, format!("{TLS_REGION}{EGRESS}")).unwrap();
    let c = Config::load_overridden(&path, Resolve::Now, &o).unwrap();
    let got = c.regions[0].ca_file.as_deref().unwrap();
    assert_eq!(got.canonicalize().unwrap(), ca.canonicalize().unwrap());
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

// ---- egress groups: addresses dedicated to some tenants ----

/// Eight addresses 127.1.0.0-7 and a SOCKS5 proxy, `groups` (`[[egress.group]]` tables) and
/// `rest` (tenant tables) after them.
fn grouped(groups: &str, rest: &str) -> Result<Config, String> {
    parse(&grouped_text(groups, rest))
}

fn grouped_text(groups: &str, rest: &str) -> String {
    format!(
        "{REGION}[egress]\naddresses = [\"127.1.0.0/29\"]\n\
         socks5 = [{{ proxy = \"127.0.0.1:1080\" }}]\n{groups}{rest}"
    )
}

fn group(name: &str, addresses: &str) -> String {
    format!("[[egress.group]]\nname = \"{name}\"\naddresses = [{addresses}]\n")
}

fn tenant_on(name: &str, egress: Option<&str>) -> String {
    let egress = egress.map_or(String::new(), |g| format!("egress = \"{g}\"\n"));
    format!("[[tenant]]\nname = \"{name}\"\nkeys = [\"key-{name}\"]\n{egress}")
}

/// Two groups and a tenant on each, one on the shared addresses.
fn two_groups() -> String {
    grouped_text(
        &format!(
            "{}{}",
            group("alpha", "\"127.1.0.4/31\", \"127.1.0.1\""),
            group("beta", "\"127.1.0.6-127.1.0.7\"")
        ),
        &format!(
            "{}{}{}",
            tenant_on("alpha-bot", Some("alpha")),
            tenant_on("beta-bot", Some("beta")),
            tenant_on("anyone", None)
        ),
    )
}

#[test]
fn egress_groups_load_in_file_order_with_each_sources_group_and_proxies_shared() {
    let c = parse(&two_groups()).unwrap();
    assert_eq!(c.egress.groups, ["alpha", "beta"]);
    // 127.1.0.0-7, then the proxy: 0 shared, 1 alpha, 2-3 shared, 4-5 alpha, 6-7 beta, proxy.
    assert_eq!(c.egress.source_group, [0, 1, 0, 0, 1, 1, 2, 2, 0]);
    assert_eq!(c.egress.group_counts(), [4, 3, 2]);
    assert_eq!(
        (0..3).map(|g| c.egress.group_name(g)).collect::<Vec<_>>(),
        ["shared", "alpha", "beta"]
    );
    let policy = |i: usize| c.tenants.list[i].policy.egress.as_deref();
    assert_eq!(
        (policy(0), policy(1), policy(2)),
        (Some("alpha"), Some("beta"), None)
    );
    // One thread: everything, by group (shared, then alpha, then beta).
    assert_eq!(
        c.egress.thread_share(1, 0),
        (vec![0, 2, 3, 8, 1, 4, 5, 6, 7], vec![4, 3, 2])
    );
    // Two: each group split on its own, a group's larger part going to the thread after the
    // one the group before it gave its larger part to (alpha's to thread 0 after shared's
    // even split, beta's to thread 1 after alpha's), so the totals stay within one.
    assert_eq!(
        c.egress.thread_share(2, 0),
        (vec![0, 2, 1, 4, 7], vec![2, 2, 1])
    );
    assert_eq!(
        c.egress.thread_share(2, 1),
        (vec![3, 8, 5, 6], vec![2, 1, 1])
    );
}

#[test]
fn without_egress_groups_thread_share_is_even_share_of_the_sources() {
    let base = parse(&format!("{REGION}{EGRESS}")).unwrap();
    assert!(base.egress.groups.is_empty());
    assert_eq!(base.egress.source_group, [0, 0, 0, 0]);
    for sources in [1usize, 3, 4, 7, 64, 257] {
        let mut e = base.egress.clone();
        e.sources = (0..sources)
            .map(|i| local([127, 2, (i >> 8) as u8, i as u8]))
            .collect();
        // Left shorter than the sources, as a config put together in code may: read as shared.
        e.source_group.clear();
        for threads in 1..=9 {
            for t in 0..threads {
                let (mine, counts) = e.thread_share(threads, t);
                let run = bundle_relay::config::even_share(sources, threads, t);
                assert_eq!(
                    mine,
                    run.clone().collect::<Vec<_>>(),
                    "{sources}/{threads}/{t}"
                );
                assert_eq!(counts, [run.len() as u32]);
            }
        }
    }
}

#[test]
fn thread_share_gives_each_thread_its_part_of_every_group_shared_first() {
    // 4 shared (127.1.0.0-3) and a group of 4 (127.1.0.4-7), no proxy.
    let c = parse(&format!(
        "{REGION}[egress]\naddresses = [\"127.1.0.0/29\"]\n{}{}",
        group("alpha", "\"127.1.0.4/30\""),
        tenant_on("a", Some("alpha")) + &tenant_on("b", None)
    ))
    .unwrap();
    assert_eq!(c.egress.thread_share(2, 0), (vec![0, 1, 4, 5], vec![2, 2]));
    assert_eq!(c.egress.thread_share(2, 1), (vec![2, 3, 6, 7], vec![2, 2]));
    // Over any number of threads the shares cover every source once.
    let c = parse(&two_groups()).unwrap();
    for threads in 1..=9 {
        let mut seen: Vec<usize> = (0..threads)
            .flat_map(|t| c.egress.thread_share(threads, t).0)
            .collect();
        seen.sort();
        assert_eq!(seen, (0..9).collect::<Vec<_>>(), "{threads} threads");
    }
}

#[test]
fn every_thread_holds_a_source_whatever_the_groups_while_there_are_as_many_sources_as_threads() {
    // 9 sources: shared 4, alpha 3, beta 2; each group alone is smaller than 5 threads.
    let c = parse(&format!("threads = 5\n{}", two_groups())).unwrap();
    assert_eq!(c.threads, 5);
    for threads in 1..=9 {
        let totals: Vec<usize> = (0..threads)
            .map(|t| c.egress.thread_share(threads, t).0.len())
            .collect();
        let (lo, hi) = (totals.iter().min().unwrap(), totals.iter().max().unwrap());
        assert!(*lo >= 1 && hi - lo <= 1, "{threads} threads: {totals:?}");
    }
    let e = refused(&format!("threads = 10\n{}", two_groups()));
    assert!(e.contains("threads"), "{e}");
}

#[test]
fn egress_group_names_are_checked_naming_the_key() {
    let long = "g".repeat(65);
    for (name, why) in [
        ("", "an egress group name is 1 to 64 characters"),
        (long.as_str(), "an egress group name is 1 to 64 characters"),
        ("al pha", "an egress group name is 1 to 64 characters"),
        ("alpha/1", "an egress group name is 1 to 64 characters"),
        ("shared", "names the addresses in no group"),
    ] {
        let e = grouped(&group(name, "\"127.1.0.1\""), "").unwrap_err();
        assert!(
            e.contains("egress.group[0].name") && e.contains(why),
            "{name:?}: {e}"
        );
    }
    assert!(
        grouped(
            &group(&"g".repeat(64), "\"127.1.0.1\""),
            &tenant_on("a", None)
        )
        .is_ok()
    );
    assert!(grouped(&group("Al-pha_1.x", "\"127.1.0.1\""), &tenant_on("a", None)).is_ok());
    let e = grouped(
        &format!(
            "{}{}",
            group("alpha", "\"127.1.0.1\""),
            group("alpha", "\"127.1.0.2\"")
        ),
        "",
    )
    .unwrap_err();
    assert!(
        e.contains("egress.group[1].name: \"alpha\" is already the name of egress.group[0]"),
        "{e}"
    );
}

#[test]
fn egress_group_without_addresses_is_refused() {
    let e = grouped(&group("alpha", ""), "").unwrap_err();
    assert!(
        e.contains("egress.group[0].addresses: group \"alpha\" lists no address"),
        "{e}"
    );
    let e = grouped("[[egress.group]]\nname = \"alpha\"\n", "").unwrap_err();
    assert!(e.contains("egress.group[0].addresses"), "{e}");
}

#[test]
fn egress_group_address_outside_the_pool_is_refused_naming_the_address() {
    let e = grouped(&group("alpha", "\"127.1.0.1\", \"127.1.0.9\""), "").unwrap_err();
    assert!(
        e.contains("egress.group[0].addresses[1]: 127.1.0.9 is not in the pool"),
        "{e}"
    );
    // A block reaching past the pool names the first address outside it, and the block.
    let e = grouped(&group("alpha", "\"127.1.0.0/28\""), "").unwrap_err();
    assert!(
        e.contains(
            "egress.group[0].addresses[0]: 127.1.0.8 (of \"127.1.0.0/28\") is not in the pool"
        ),
        "{e}"
    );
    // A SOCKS5 proxy's address is not a local address of the pool.
    let e = grouped(&group("alpha", "\"127.0.0.1\""), "").unwrap_err();
    assert!(e.contains("127.0.0.1 is not in the pool"), "{e}");
    // Entries are parsed as egress.addresses are.
    let e = grouped(&group("alpha", "\"127.1.0.1/24\""), "").unwrap_err();
    assert!(
        e.contains("egress.group[0].addresses[0]") && e.contains("host bits set"),
        "{e}"
    );
    let e = grouped(&group("alpha", "\"127.1.0.1\", \"127.1.0.0/31\""), "").unwrap_err();
    assert!(
        e.contains("egress.group[0].addresses[1]: 127.1.0.1 is listed twice in group \"alpha\""),
        "{e}"
    );
}

#[test]
fn egress_groups_that_overlap_are_refused_naming_both_groups_and_the_address() {
    let e = grouped(
        &format!(
            "{}{}",
            group("alpha", "\"127.1.0.0/30\""),
            group("beta", "\"127.1.0.6\", \"127.1.0.2-127.1.0.5\"")
        ),
        "",
    )
    .unwrap_err();
    assert!(
        e.contains(
            "egress.group[1].addresses[1]: 127.1.0.2 is in group \"alpha\" (egress.group[0]) \
             and in group \"beta\""
        ),
        "{e}"
    );
}

#[test]
fn egress_groups_and_regions_past_the_limiters_lanes_are_refused_naming_both_counts() {
    // 16 regions: 15 groups and the shared addresses make 256 lanes, 16 groups 272.
    let text = |groups: usize| {
        let tables: String = (0..groups)
            .map(|g| group(&format!("g{g}"), &format!("\"127.1.0.{g}\"")))
            .collect();
        format!(
            "{}[egress]\naddresses = [\"127.1.0.0/27\"]\n{tables}{}",
            regions(16),
            tenant_on("a", None)
        )
    };
    assert_eq!(parse(&text(15)).unwrap().egress.groups.len(), 15);
    let e = refused(&text(16));
    assert!(
        e.contains("egress.group: 16 egress groups and 16 regions need 272 limiter lanes")
            && e.contains("at most 256"),
        "{e}"
    );
}

#[test]
fn egress_slice_keeps_each_groups_members_inside_the_slice() {
    // 10 sources in 2 slices of 5: alpha (127.1.0.1-2) lies in the first only, beta in both.
    let text = |k: u32| {
        format!(
            "{REGION}[egress]\naddresses = [\"127.1.0.0/29\", \"127.1.0.8/31\"]\nslice = \"{k}/2\"\n{}{}{}",
            group("alpha", "\"127.1.0.1-127.1.0.2\""),
            group("beta", "\"127.1.0.4\", \"127.1.0.9\""),
            tenant_on("b", Some("beta")) + &tenant_on("s", None)
        )
    };
    let first = parse(&text(1)).unwrap();
    assert_eq!(first.egress.source_group, [0, 1, 1, 0, 2]);
    assert_eq!(first.egress.group_counts(), [2, 2, 1]);
    let second = parse(&text(2)).unwrap();
    assert_eq!(addresses(&second)[0], "127.1.0.5");
    assert_eq!(second.egress.source_group, [0, 0, 0, 0, 2]);
    assert_eq!(second.egress.group_counts(), [4, 0, 1], "alpha: none here");
    assert_eq!(
        second.egress.groups,
        ["alpha", "beta"],
        "the groups are the file's"
    );
}

#[test]
fn a_tenant_naming_an_egress_group_that_does_not_exist_is_refused_listing_the_groups() {
    let e = grouped(
        &format!(
            "{}{}",
            group("alpha", "\"127.1.0.1\""),
            group("beta", "\"127.1.0.2\"")
        ),
        &tenant_on("bot", Some("gamma")),
    )
    .unwrap_err();
    assert!(
        e.contains(
            "tenant[0].egress: tenant \"bot\" names egress group \"gamma\", which does not exist"
        ) && e.contains("the groups are alpha, beta"),
        "{e}"
    );
    let e = grouped("", &tenant_on("bot", Some("alpha"))).unwrap_err();
    assert!(e.contains("there are no egress groups"), "{e}");
    // Disabled, the tenant sends nothing, but a group it names must still exist.
    let e = grouped("", &(tenant_on("bot", Some("alpha")) + "enabled = false\n")).unwrap_err();
    assert!(e.contains("tenant[0].egress"), "{e}");
    let e = grouped("", "[default_tenant]\negress = \"alpha\"\n").unwrap_err();
    assert!(
        e.contains("default_tenant.egress: the default tenant names egress group \"alpha\""),
        "{e}"
    );
}

#[test]
fn a_tenant_on_the_shared_addresses_when_every_source_is_grouped_is_refused() {
    // 127.1.0.0-7 all in groups, and no proxy: nothing is shared.
    let all = |rest: &str| {
        parse(&format!(
            "{REGION}[egress]\naddresses = [\"127.1.0.0/29\"]\n{}{}{rest}",
            group("alpha", "\"127.1.0.0/30\""),
            group("beta", "\"127.1.0.4/30\""),
        ))
    };
    let e = all(&(tenant_on("a", Some("alpha")) + &tenant_on("x", None))).unwrap_err();
    assert!(
        e.contains(
            "tenant[1]: tenant \"x\" uses the shared egress addresses (no `egress` key) but \
             every source is in a group"
        ) && e.contains("alpha, beta"),
        "{e}"
    );
    let e = all(&(tenant_on("a", Some("alpha")) + "[default_tenant]\n")).unwrap_err();
    assert!(
        e.contains("default_tenant: the default tenant uses the shared egress addresses"),
        "{e}"
    );
    // `egress = "shared"` is the same choice, said out loud.
    let e = all(&tenant_on("x", Some("shared"))).unwrap_err();
    assert!(
        e.contains("tenant[0].egress") && e.contains("egress = \"shared\""),
        "{e}"
    );
    // No tenant at all: everyone is on the shared addresses, and there are none.
    let e = all("").unwrap_err();
    assert!(
        e.contains("egress.group: every source is in an egress group and no tenant is listed"),
        "{e}"
    );
    // Disabled, it sends nothing; every tenant on a group, the config loads.
    let c = all(&(tenant_on("a", Some("alpha")) + &tenant_on("x", None) + "enabled = false\n"))
        .unwrap();
    assert_eq!(c.egress.group_counts(), [0, 4, 4]);
    // With some address shared, "shared" names it.
    let c = grouped(
        &group("alpha", "\"127.1.0.1\""),
        &tenant_on("x", Some("shared")),
    )
    .unwrap();
    assert_eq!(c.tenants.list[0].policy.egress, None);
}

#[test]
fn a_tenant_whose_egress_group_has_no_source_in_this_slice_is_refused_naming_the_slice() {
    let text = |k: u32, tenants: &str| {
        format!(
            "{REGION}[egress]\naddresses = [\"127.1.0.0/30\"]\nslice = \"{k}/2\"\n{}{tenants}",
            group("alpha", "\"127.1.0.0\""),
        )
    };
    let bot = tenant_on("bot", Some("alpha")) + &tenant_on("s", None);
    assert!(parse(&text(1, &bot)).is_ok());
    let e = refused(&text(2, &bot));
    assert!(
        e.contains(
            "tenant[0].egress: tenant \"bot\" uses egress group \"alpha\", which has no source \
             in this relay's slice 2/2 (egress.slice)"
        ),
        "{e}"
    );
    // Slice 2/2 shares 127.1.0.2-3; the first slice's only shared address is 127.1.0.1.
    let all = |k: u32| {
        format!(
            "{REGION}[egress]\naddresses = [\"127.1.0.0/30\"]\nslice = \"{k}/2\"\n{}{}",
            group("alpha", "\"127.1.0.0-127.1.0.1\""),
            tenant_on("s", None)
        )
    };
    let e = refused(&all(1));
    assert!(
        e.contains("every source is in a group (this relay's slice 1/2)"),
        "{e}"
    );
    assert!(parse(&all(2)).is_ok());
}

/// A document's wrong policy value is named by its key, as the file's is.
#[test]
fn a_tenants_documents_wrong_policy_value_is_named_by_its_key() {
    let cfg = grouped(
        &group("alpha", "\"127.1.0.1\""),
        "[tenants_from]\nurl = \"http://127.0.0.1:9300/t\"\n",
    )
    .unwrap();
    let doc = r#"{"tenant": [{"name": "b", "keys": ["k"], "fan_out": "x"}]}"#;
    let e = cfg.with_tenants_json(doc, "doc").unwrap_err().to_string();
    assert!(
        e.starts_with("doc:1:55: tenant[0].fan_out: invalid type: string \"x\", expected u8"),
        "{e}"
    );
}

/// A tenants document is one JSON value: anything after it (a second document, junk a proxy
/// appended) is refused naming where it starts, not ignored.
#[test]
fn a_tenants_document_with_anything_after_it_is_refused_naming_where() {
    let cfg = grouped(
        &group("alpha", "\"127.1.0.1\""),
        "[tenants_from]\nurl = \"http://127.0.0.1:9300/t\"\n",
    )
    .unwrap();
    let doc = r#"{"tenant": [{"name": "b", "keys": ["k"]}]}"#;
    assert!(cfg.with_tenants_json(doc, "doc").is_ok());
    assert!(cfg.with_tenants_json(&format!("{doc}\n  "), "doc").is_ok());
    for tail in [" junk", " {}", "]"] {
        let e = cfg
            .with_tenants_json(&format!("{doc}{tail}"), "doc")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("doc:1:"), "{tail:?}: {e}");
        assert!(e.contains("trailing characters"), "{tail:?}: {e}");
    }
}

#[test]
fn a_tenants_document_names_its_egress_group_and_is_checked_naming_the_tenant() {
    let cfg = grouped(
        &group("alpha", "\"127.1.0.1\""),
        "[tenants_from]\nurl = \"http://127.0.0.1:9300/t\"\n",
    )
    .unwrap();
    let ok = cfg
        .with_tenants_json(
            r#"{"tenant": [{"name": "a", "keys": ["k"], "egress": "alpha"}, {"name": "b", "keys": ["j"]}]}"#,
            "doc",
        )
        .unwrap();
    assert_eq!(ok.tenants.list[0].policy.egress.as_deref(), Some("alpha"));
    assert_eq!(ok.tenants.list[1].policy.egress, None);
    let e = cfg
        .with_tenants_json(
            r#"{"tenant": [{"name": "a", "keys": ["k"], "egress": "beta"}]}"#,
            "http://127.0.0.1:9300/t",
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "http://127.0.0.1:9300/t: tenant[0].egress: tenant \"a\" names egress group \"beta\""
        ) && e.contains("the groups are alpha"),
        "{e}"
    );
    let e = cfg
        .with_tenants_json(r#"{"default_tenant": {"egress": 7}}"#, "doc")
        .unwrap_err()
        .to_string();
    assert!(e.contains("default_tenant.egress"), "{e}");
}

#[test]
fn the_tenant_table_resolves_egress_groups_by_the_running_relays_names() {
    use bundle_relay::config::TenantTable;
    use bundle_relay::metrics::tenants::TenantStats;
    let c = parse(&two_groups()).unwrap();
    let stats = TenantStats::new(c.tenants.max);
    let names = c.region_names();
    let build = |groups: &[String]| {
        TenantTable::build(
            &c.tenants,
            &names,
            &names,
            groups,
            &[],
            c.arena_slots,
            None,
            &stats,
        )
    };
    let t = build(&c.egress.groups).unwrap();
    let by = |i: usize| (t.entries()[i].group, t.entries()[i].group_name.as_str());
    assert_eq!(
        (by(0), by(1), by(2)),
        ((1, "alpha"), (2, "beta"), (0, "shared"))
    );
    assert!(t.entries()[0].describe(&names).contains(", egress alpha"));
    assert!(t.entries()[2].describe(&names).contains(", egress shared"));
    // Ids are the running relay's: the same names in another order, other ids.
    let t = build(&["beta".to_string(), "alpha".to_string()]).unwrap();
    assert_eq!((t.entries()[0].group, t.entries()[1].group), (2, 1));
    let e = build(&["alpha".to_string()]).unwrap_err().why;
    assert_eq!(
        e,
        "tenant beta-bot: egress group beta is not one the relay started with (egress groups \
         change on restart)"
    );
    // Through the config: a relay started without groups cannot run a tenant naming one.
    let started = grouped(&group("alpha", "\"127.1.0.1\""), &tenant_on("s", None)).unwrap();
    let plain = parse(&format!(
        "{REGION}[egress]\naddresses = [\"127.1.0.0/29\"]\n"
    ))
    .unwrap();
    let e = c.tenant_table(&plain, None, &stats).unwrap_err();
    assert!(
        e.contains("tenant alpha-bot: egress group alpha is not one the relay started with"),
        "{e}"
    );
    assert!(started.tenant_table(&started, None, &stats).is_ok());
}

#[test]
fn a_reload_keeps_egress_group_changes_and_applies_a_tenants_new_group() {
    use bundle_relay::config::Changes;
    let base = parse(&two_groups()).unwrap();
    let next = |text: String| parse(&text).unwrap();
    assert_eq!(Changes::between(&base, &base, &base), Changes::default());
    let gamma = next(two_groups().replacen(
        "[[tenant]]",
        &format!("{}[[tenant]]", group("gamma", "\"127.1.0.0\"")),
        1,
    ));
    let c = Changes::between(&base, &base, &gamma);
    assert_eq!(c.kept, ["egress groups: gamma added"], "{c:?}");
    let no_beta = next(
        two_groups()
            .replace(&group("beta", "\"127.1.0.6-127.1.0.7\""), "")
            .replace("egress = \"beta\"", "egress = \"alpha\""),
    );
    let c = Changes::between(&base, &base, &no_beta);
    assert_eq!(c.kept, ["egress groups: beta removed"], "{c:?}");
    assert!(c.applied.iter().any(|l| l.contains("1 changed")), "{c:?}");
    let bigger = next(two_groups().replace(
        "\"127.1.0.4/31\", \"127.1.0.1\"",
        "\"127.1.0.0/30\", \"127.1.0.4/31\"",
    ));
    let c = Changes::between(&base, &base, &bigger);
    assert_eq!(
        c.kept,
        ["egress group alpha: membership changed (3 → 6 sources)"],
        "{c:?}"
    );
    // A tenant moving to another group is the tenant table's: applied, nothing kept.
    let moved = next(two_groups().replace("egress = \"beta\"", "egress = \"alpha\""));
    let c = Changes::between(&base, &base, &moved);
    assert!(c.kept.is_empty(), "{c:?}");
    assert_eq!(
        c.applied,
        ["tenants: 0 added, 0 removed, 1 changed (beta-bot: egress); 3 listed"]
    );
}

#[test]
fn without_handoffs_a_reload_is_checked_against_each_threads_grouped_sources() {
    // Two threads: thread 0 owns shared 127.1.0.0 and alpha 127.1.0.2, thread 1 shared
    // 127.1.0.1 and alpha 127.1.0.3.
    let text = |addresses: &str| {
        format!(
            "threads = 2\nhandoffs = false\n{REGION}[egress]\naddresses = [{addresses}]\n{}{}",
            group("alpha", "\"127.1.0.2\", \"127.1.0.3\""),
            tenant_on("s", None)
        )
    };
    let started = parse(&text("\"127.1.0.0/30\"")).unwrap();
    assert_eq!(started.egress.thread_share(2, 0).0, [0, 2]);
    // Every thread keeps its own (and the file would start): applied.
    let keep_thread_0 = parse(&text("\"127.1.0.0/30\", \"127.1.0.5\"")).unwrap();
    assert_eq!(
        bundle_relay::config::Changes::refusal(&started, &keep_thread_0),
        None
    );
    let dropped = parse(
        &format!(
            "threads = 2\nhandoffs = false\n{REGION}[egress]\naddresses = [\"127.1.0.0\", \"127.1.0.2\"]\n"
        ),
    )
    .unwrap();
    let (key, why) = bundle_relay::config::Changes::refusal(&started, &dropped).unwrap();
    assert_eq!(key, "egress");
    assert!(
        why.starts_with("thread 1 would keep none of its 2 sources (127.1.0.1 …)"),
        "{why}"
    );
}

/// Sources a relay did not start with take a restart, so a reload that replaces a group's
/// addresses leaves it none running: a tenant sending through it would have every bundle
/// answered and then expire. Refused, naming the group and what to do.
#[test]
fn a_reload_leaving_a_tenants_egress_group_none_of_its_running_sources_is_refused() {
    let text = |alpha: [&str; 2], tenant: bool| {
        let alpha = format!("\"127.1.0.{}\", \"127.1.0.{}\"", alpha[0], alpha[1]);
        format!(
            "threads = 2\n{REGION}[egress]\naddresses = [\"127.1.0.0\", \"127.1.0.1\", {alpha}]\n{}{}",
            group("alpha", &alpha),
            if tenant {
                tenant_on("a", Some("alpha"))
            } else {
                String::new()
            }
        )
    };
    let started = parse(&text(["2", "3"], true)).unwrap();
    // One of the two kept: it sends.
    let narrowed = parse(&text(["3", "6"], true)).unwrap();
    assert_eq!(
        bundle_relay::config::Changes::refusal(&started, &narrowed),
        None
    );
    let replaced = parse(&text(["5", "6"], true)).unwrap();
    let (key, why) = bundle_relay::config::Changes::refusal(&started, &replaced).unwrap();
    assert_eq!(key, "egress");
    assert!(
        why.starts_with(
            "egress group alpha would keep none of the 2 sources it runs (127.1.0.2 …), and \
             tenant a sends through it"
        ),
        "{why}"
    );
    // No enabled tenant sends through it: nothing is lost, the reload applies.
    let idle = parse(&text(["5", "6"], false)).unwrap();
    assert_eq!(
        bundle_relay::config::Changes::refusal(&started, &idle),
        None
    );
}

/// With handoffs off, a file that gives a group fewer sources than threads is refused when it
/// is read, naming the group's key (a reload, which reads it the same way, too): accepted at
/// a reload, the next restart or reboot would exit 2 and leave the relay down; at a start it
/// said so naming neither the file nor the key. With the thread count left to the host, the
/// message says so: the same file may do on a host with fewer cores.
#[test]
fn without_handoffs_a_group_with_fewer_sources_than_threads_is_refused_naming_its_key() {
    let text = |threads: &str, addresses: &str, alpha: &str| {
        format!(
            "{threads}handoffs = false\n{REGION}[egress]\naddresses = [{addresses}]\n{}{}",
            group("alpha", alpha),
            tenant_on("a", Some("alpha"))
        )
    };
    assert!(
        parse(&text(
            "threads = 2\n",
            "\"127.1.0.1-127.1.0.4\"",
            "\"127.1.0.3\", \"127.1.0.4\""
        ))
        .is_ok()
    );
    let e = refused(&text(
        "threads = 2\n",
        "\"127.1.0.1-127.1.0.3\"",
        "\"127.1.0.3\"",
    ));
    assert_eq!(
        e,
        "config.toml: egress.group[0].addresses: egress group alpha has 1 sources for 2 threads: \
         with handoffs off every thread needs one of each group's; list more, use fewer threads, \
         or turn handoffs on"
    );
    let e = refused(&text(
        "threads = 3\n",
        "\"127.1.0.1-127.1.0.4\"",
        "\"127.1.0.3\", \"127.1.0.4\"",
    ));
    assert!(
        e.starts_with(
            "config.toml: egress.addresses: egress group shared has 2 sources for 3 threads"
        ),
        "{e}"
    );
}

/// With handoffs off each thread sends only through its own sources: a reload that leaves a
/// thread none of its sources of a group (while it keeps others, and the group keeps some on
/// another thread) would have that thread answer the group's bundles and then expire them.
#[test]
fn without_handoffs_a_reload_leaving_a_thread_none_of_a_groups_sources_is_refused() {
    let text = |g: &str| {
        format!(
            "threads = 2\nhandoffs = false\n{REGION}[egress]\n\
             addresses = [\"127.1.0.1\", \"127.1.0.2\", {g}]\n{}{}",
            group("g", g),
            tenant_on("alpha", Some("g"))
        )
    };
    let started = parse(&text("\"127.1.1.1\", \"127.1.1.2\"")).unwrap();
    let (mine, _) = started.egress.thread_share(2, 1);
    let thread_1: Vec<String> = mine
        .iter()
        .map(|&i| started.egress.sources[i].to_string())
        .collect();
    assert_eq!(thread_1, ["127.1.0.2", "127.1.1.2"]);
    let replaced = parse(&text("\"127.1.1.1\", \"127.1.1.3\"")).unwrap();
    let (key, why) = bundle_relay::config::Changes::refusal(&started, &replaced).unwrap();
    assert_eq!(key, "egress");
    assert!(
        why.starts_with(
            "thread 1 would keep none of its 1 sources of egress group g (127.1.1.2 …)"
        ),
        "{why}"
    );
}

#[test]
fn the_mainnet_examples_commented_egress_group_loads_when_uncommented() {
    let text = std::fs::read_to_string(examples().join("mainnet.toml")).unwrap();
    let text = text
        .replace("# [[egress.group]]", "[[egress.group]]")
        .replace("# name = \"alpha\"", "name = \"alpha\"")
        .replace(
            "# addresses = [\"203.0.113.0/28\"]",
            "addresses = [\"203.0.113.0/28\"]",
        );
    let c = Config::parse(&text, "mainnet.toml", Resolve::Deferred).unwrap();
    assert_eq!(c.egress.groups, ["alpha"]);
    assert_eq!(c.egress.group_counts(), [48, 16]);
}

#[test]
fn a_searcher_keypair_file_is_read_for_auth_and_a_bad_one_is_refused_naming_file_and_key() {
    let dir = temp_dir("auth-keypair");
    let load = |file: &str, content: Option<&str>| {
        let path = dir.join("relay.toml");
        std::fs::write(
            &path,
            format!("[auth]\nkeypair_file = \"{file}\"\n{REGION}{EGRESS}"),
        )
        .unwrap();
        if let Some(content) = content {
            std::fs::write(dir.join(file), content).unwrap();
        }
        Config::load_with(&path, Resolve::Deferred)
    };
    let at = |name: &str| {
        format!(
            "{}: auth.keypair_file: {}",
            dir.join("relay.toml").display(),
            dir.join(name).display()
        )
    };
    // `solana-keygen new` of the secret [9; 32]: the secret, then its public key.
    let key = bundle_relay::config::SearcherKey::from_seed([9; 32]);
    let public = bs58::decode(key.pubkey_b58()).into_vec().unwrap();
    let pair: Vec<u8> = [vec![9u8; 32], public].concat();
    let cfg = load("id.json", Some(&serde_json::to_string(&pair).unwrap())).unwrap();
    assert_eq!(
        cfg.auth.as_ref().map(|k| k.pubkey_b58()),
        Some(key.pubkey_b58())
    );
    assert_eq!(
        format!("{:?}", cfg.auth.unwrap()),
        format!("SearcherKey({})", key.pubkey_b58()),
        "no secret in Debug"
    );
    let e = load("missing.json", None).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{} cannot be read: ", at("missing.json"))),
        "{e}"
    );
    let e = load("short.json", Some("[1,2,3]")).unwrap_err().to_string();
    assert!(
        e.starts_with(&at("short.json")) && e.contains("this file has 3"),
        "{e}"
    );
    let e = load("text.json", Some("hunter2")).unwrap_err().to_string();
    assert!(
        e.contains("not a Solana keypair file") && !e.contains("hunter2"),
        "{e}"
    );
    mkfifo(&dir.join("fifo.json"));
    let e = load("fifo.json", None).unwrap_err().to_string();
    assert_eq!(e, format!("{} is not a plain file", at("fifo.json")));
}

// ---- [quota]: tenants' global rates across relays ----

const QUOTA: &str = "[quota]\nredis = \"127.0.0.1:6379\"\n";

#[test]
fn a_global_rate_needs_the_quota_store_and_loads_with_its_defaults() {
    let tenant = "[[tenant]]\nname = \"g\"\nkeys = [\"k\"]\nglobal_rate = 500\n";
    let e = refused(&format!("{REGION}{EGRESS}{tenant}"));
    assert!(
        e.contains("tenant[0].global_rate: needs [quota] redis = \"host:port\""),
        "{e}"
    );
    let c = parse(&format!("{REGION}{EGRESS}{QUOTA}{tenant}")).unwrap();
    assert_eq!(c.tenants.list[0].policy.global_rate, Some(500));
    let q = c.quota.unwrap();
    assert_eq!(
        (q.redis.as_str(), q.key_prefix.as_str(), q.timeout_ms),
        ("127.0.0.1:6379", "bundle-relay:quota:", 100)
    );
    // A twentieth of the rate by default, never above the rate, at least one.
    assert_eq!(
        (q.chunk_for(500), q.chunk_for(10), q.chunk_for(1)),
        (25, 1, 1)
    );
    let e = refused(&format!(
        "{REGION}{EGRESS}{QUOTA}[default_tenant]\nglobal_rate = 0\n"
    ));
    assert!(
        e.contains("default_tenant.global_rate: must be 1 to 1000000 requests per second, got 0"),
        "{e}"
    );
}

#[test]
fn a_bad_quota_table_is_refused_naming_the_key() {
    let cases = [
        (
            "redis = \"localhost\"",
            "quota.redis: \"localhost\" is not host:port",
        ),
        ("redis = \"h:0\"", "quota.redis: \"h:0\" is not host:port"),
        (
            "redis = \"::1:6379\"",
            "quota.redis: \"::1:6379\": an IPv6 address goes in brackets, like \"[::1]:6379\"",
        ),
        (
            "redis = \":s3cret@10.0.0.1:6379\"",
            "quota.redis: host:port only, without a user or password",
        ),
        (
            "redis = \"[::1]\"",
            "quota.redis: \"[::1]\" is not host:port",
        ),
        (
            "redis = \"redis://10.0.0.5:6379\"",
            "quota.redis: \"redis://10.0.0.5:6379\" is a URL: give host:port, like \"10.0.0.5:6379\"",
        ),
        (
            "redis = \"redis://10.0.0.5:6379/2\"",
            "like \"10.0.0.5:6379\" (a database number is not taken)",
        ),
        (
            "redis = \"h:1\"\nlease_chunk = 0",
            "quota.lease_chunk: must be 1 to 1000000 requests, got 0",
        ),
        (
            "redis = \"h:1\"\ntimeout_ms = 0",
            "quota.timeout_ms: must be 1 to 5000 ms, got 0",
        ),
        (
            "redis = \"h:1\"\nkey_prefix = \"a b\"",
            "quota.key_prefix: \"a b\": at most 64 printable characters",
        ),
        ("redis = \"h:1\"\nchunk = 3", "quota.chunk"),
    ];
    for (table, want) in cases {
        let e = refused(&format!("{REGION}{EGRESS}[quota]\n{table}\n"));
        assert!(e.contains(want), "{table}: {e}");
    }
    assert_eq!(
        parse(&format!(
            "{REGION}{EGRESS}[quota]\nredis = \"r.internal:6380\"\nlease_chunk = 7\n"
        ))
        .unwrap()
        .quota
        .unwrap()
        .lease_chunk,
        Some(7)
    );
    for redis in ["[::1]:6379", "10.0.0.1:6379"] {
        let q = parse(&format!("{REGION}{EGRESS}[quota]\nredis = \"{redis}\"\n"));
        assert_eq!(q.unwrap().quota.unwrap().redis, redis);
    }
}

#[test]
fn a_tenants_document_gives_a_global_rate_checked_by_the_files_rules() {
    let with_quota = parse(&format!(
        "{REGION}{EGRESS}{QUOTA}[tenants_from]\nurl = \"http://127.0.0.1:9300/t\"\n"
    ))
    .unwrap();
    let doc = r#"{"tenant": [{"name": "a", "keys": ["k"], "global_rate": 300}]}"#;
    let c = with_quota.with_tenants_json(doc, "doc").unwrap();
    assert_eq!(c.tenants.list[0].policy.global_rate, Some(300));
    let without = parse(&format!(
        "{REGION}{EGRESS}[tenants_from]\nurl = \"http://127.0.0.1:9300/t\"\n"
    ))
    .unwrap();
    let e = without
        .with_tenants_json(doc, "doc")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("doc: tenant[0].global_rate: needs [quota]"),
        "{e}"
    );
}

#[test]
fn the_mainnet_examples_commented_quota_loads_when_uncommented() {
    let text = std::fs::read_to_string(examples().join("mainnet.toml")).unwrap();
    let at = text.find("# [quota]").unwrap();
    let (head, tail) = text.split_at(at);
    let tail: String = tail
        .lines()
        .map(|l| l.strip_prefix("# ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let c = Config::parse(
        &format!("{head}{tail}\n"),
        "mainnet.toml",
        Resolve::Deferred,
    )
    .unwrap();
    assert_eq!(c.quota.unwrap().redis, "10.0.0.5:6379");
    assert_eq!(c.tenants.list[0].policy.global_rate, Some(500));
}

/// A bad value a command-line flag gave is blamed on the flag, not on the file the operator
/// did not write it in.
#[test]
fn a_bad_value_from_a_flag_names_the_flag_not_the_file() {
    let (_dir, _ca, o) = bench_ca("flag-blame");
    let missing = Overrides {
        ca_file: Some(PathBuf::from("/nonexistent/bench-ca.pem")),
        ..o.clone()
    };
    let slice = Overrides {
        egress_slice: Some("5/4".into()),
        ..o.clone()
    };
    let egress = Overrides {
        egress: Some(vec!["127.1.0.0/8".into()]),
        ..o
    };
    for (overrides, flag) in [
        (&missing, "--ca-file: "),
        (&slice, "--egress-slice: "),
        (&egress, "--egress: "),
    ] {
        let e = overridden(&format!("{TLS_REGION}{EGRESS}"), overrides).unwrap_err();
        assert!(e.starts_with(flag), "{e}");
    }
    // The file's own mistake stays the file's, with --ca-file given beside it.
    let (_dir2, _ca2, o) = bench_ca("flag-blame-file");
    let plain = "[[region]]\nname = \"local\"\nhost = \"127.0.0.16\"\nport = 10000\n\
                 tls = false\nca_file = \"written.pem\"\n";
    let e = overridden(&format!("{TLS_REGION}{plain}{EGRESS}"), &o).unwrap_err();
    assert!(
        e.contains("relay.toml: region[1].ca_file: "),
        "the file's key, not the flag: {e}"
    );
}
