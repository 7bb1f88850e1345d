//! The one-command demo end to end: engine, relay (bundle-relay, the default, and the baseline)
//! and open-loop load on loopback with a mid-run storm, and the report's verdicts; the relay on
//! threads of the test process and as a process of its own (`bench-demo --serve-relay`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use bundle_relay_bench::demo::{self, DemoConfig, RelayKind, RelayLine};

fn tiny(rates: Vec<f64>) -> DemoConfig {
    DemoConfig {
        rates_per_s: rates,
        duration_s: 2.0,
        egress: demo::parse_egress("127.1.0.0/26").unwrap(),
        interval_ms: 10,
        storm: true,
        connections: 8,
        relay_threads: 1,
        progress: false,
        ..DemoConfig::default()
    }
}

#[test]
fn the_demo_runs_bundle_relay_by_default() {
    assert_eq!(DemoConfig::default().relay, RelayKind::BundleRelay);
    assert_eq!(
        "bundle-relay".parse::<RelayKind>(),
        Ok(RelayKind::BundleRelay)
    );
    assert_eq!("baseline".parse::<RelayKind>(), Ok(RelayKind::Baseline));
}

#[test]
fn a_small_baseline_run_answers_everything_delivers_every_admitted_bundle_and_never_sends_early() {
    let report = demo::run(&DemoConfig {
        relay: RelayKind::Baseline,
        ..tiny(vec![300.0])
    })
    .expect("the demo runs");
    assert_eq!(report.steps.len(), 1);
    let s = &report.steps[0];
    assert_eq!(s.load.scheduled, 600);
    assert_eq!(
        s.answered_ok, 600,
        "every request answered with its bundle id"
    );
    assert_eq!(s.errors, 0);
    assert_eq!(s.undelivered, 0);
    assert_eq!(s.relay_stats.admitted, 600);
    assert_eq!(s.relay_stats.delivered, s.relay_stats.admitted);
    assert!(s.accounting_holds);
    assert_eq!(s.engine.early_sends, 0);
    assert_eq!(s.engine.accepted, 600);
    assert_eq!(
        s.engine_connections_before_load, s.pairs as u64,
        "every pair connected before the load began, as bundle-relay's are"
    );
    assert!(s.storm_told > 0, "the mid-run storm was injected");
    assert!(
        s.relay_stats.cooldowns > 0,
        "the relay honoured the storm's back-off"
    );
    assert_eq!(
        s.engine.latency.percentiles.count, 600,
        "delivery latency joined for every bundle"
    );
    assert!(s.cpu.relay_us > 0 && s.cpu.engine_us > 0 && s.cpu.load_us > 0);
    assert!(s.cpu.relay_us_per_delivered > 0.0);
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(report.sustained_rate_per_s, Some(300.0));
    let text = demo::render(&report);
    assert!(
        text.contains("throughput at <0.1% errors: 300 req/s"),
        "{text}"
    );
    assert!(text.contains("holds"), "{text}");
}

#[test]
fn a_config_over_the_open_file_limit_is_refused_with_the_largest_egress_that_fits() {
    let cfg = DemoConfig {
        egress: demo::parse_egress("127.1.0.0/20").unwrap(),
        ..tiny(vec![100.0])
    };
    let e = demo::run(&cfg).unwrap_err();
    assert!(e.contains("4096 egress addresses x 8 regions need"), "{e}");
    assert!(e.contains("use at most"), "{e}");
}

#[test]
fn bad_fault_specs_and_rates_are_refused_before_anything_starts() {
    let cfg = DemoConfig {
        faults: vec!["hurricane@1s".into()],
        ..tiny(vec![100.0])
    };
    assert!(demo::run(&cfg).unwrap_err().contains("unknown kind"));
    assert!(
        demo::run(&tiny(vec![0.0]))
            .unwrap_err()
            .contains("rates must be positive")
    );
    assert!("nonesuch".parse::<demo::RelayKind>().is_err());
}

/// bundle-relay in a process of its own: every request answered with its id, every bundle
/// delivered, accounting holds, no early send through the storm, and the process's own CPU
/// and memory reported.
#[test]
fn bundle_relay_in_its_own_process_answers_and_delivers_everything_through_a_storm() {
    let report = demo::run(&DemoConfig {
        relay: RelayKind::BundleRelay,
        relay_exe: Some(env!("CARGO_BIN_EXE_bench-demo").into()),
        ..tiny(vec![300.0])
    })
    .expect("the demo runs");
    let s = &report.steps[0];
    assert_eq!(s.relay, RelayKind::BundleRelay);
    assert_eq!(s.answered_ok, 600, "{:?}", s.load);
    assert_eq!(s.errors, 0);
    assert_eq!(
        (s.relay_stats.admitted, s.relay_stats.delivered),
        (600, 600)
    );
    assert!(s.accounting_holds, "{:?}", s.relay_stats);
    assert_eq!(
        s.engine.early_sends, 0,
        "{:?}",
        s.engine.early_sends_by_source
    );
    assert_eq!(s.engine.accepted, 600);
    assert_eq!(s.engine.duplicates, 0);
    assert!(s.storm_told > 0, "the mid-run storm was injected");
    assert_eq!(
        s.relay_stats.cooldowns, s.storm_told,
        "one cooldown per storm answer"
    );
    assert!(s.cpu.relay_in_own_process);
    assert!(s.cpu.relay_us > 0 && s.cpu.relay_us_per_delivered > 0.0);
    let m = s
        .memory
        .as_ref()
        .expect("a relay process reports its memory");
    assert!(m.rss_kb_at_load_start > 0 && m.rss_kb_max >= m.rss_kb_at_load_start);
    assert!(m.hwm_kb >= m.rss_kb_max, "{m:?}");
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let text = demo::render(&report);
    assert!(text.contains("=== bundle-relay relay"), "{text}");
    assert!(text.contains("its own process"), "{text}");
}

/// The relay process's protocol: a ready line with its addresses, counters on `stats`, final
/// counters and exit 0 when its stdin closes.
#[test]
fn a_relay_process_reports_its_addresses_answers_stats_and_exits_cleanly_when_stdin_closes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine = rt
        .block_on(bundle_relay_bench::engine::Engine::start(
            bundle_relay_bench::engine::EngineConfig::for_tests(
                &bundle_relay_bench::engine::MAINNET_REGIONS,
            ),
        ))
        .unwrap();
    let setup = demo::RelaySetup::plain(
        engine.region_addrs(),
        demo::parse_egress("127.1.62.0/30").unwrap(),
        1,
        10,
        64,
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_bench-demo"))
        .args([demo::SERVE_RELAY_ARG, "bundle-relay", "--spec"])
        .arg(serde_json::to_string(&setup).unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut read = || {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        serde_json::from_str::<RelayLine>(&l).unwrap_or_else(|e| panic!("{l:?}: {e}"))
    };
    match read() {
        RelayLine::Ready {
            rotating, pinned, ..
        } => {
            assert!(rotating.ip().is_loopback() && rotating.port() != 0);
            assert_eq!(pinned.len(), 8, "one pinned port per region");
        }
        other => panic!("{other:?}"),
    }
    let mut stdin = child.stdin.take().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        writeln!(stdin, "stats").unwrap();
        match read() {
            RelayLine::Stats(s) if s.pairs_up == 4 * 8 => break,
            RelayLine::Stats(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            RelayLine::Stats(s) => panic!("pairs never all up: {s:?}"),
            other => panic!("{other:?}"),
        }
    }
    drop(stdin);
    match read() {
        RelayLine::Final(s) => {
            assert!(s.identity_holds());
            assert_eq!(s.admitted, 0);
        }
        other => panic!("{other:?}"),
    }
    assert!(child.wait().unwrap().success());
    rt.block_on(engine.shutdown());
}

#[test]
fn a_relay_process_given_a_bad_spec_says_what_was_wrong_and_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench-demo"))
        .args([demo::SERVE_RELAY_ARG, "bundle-relay", "--spec", "{not json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let line = String::from_utf8_lossy(&out.stdout);
    match serde_json::from_str::<RelayLine>(line.trim()).unwrap() {
        RelayLine::Error(e) => assert!(e.contains("--spec"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_demo_runs_with_tls_to_the_engines_and_part_of_the_pool_behind_socks5() {
    let report = demo::run(&DemoConfig {
        tls: true,
        socks5: 8,
        egress: demo::parse_egress("127.1.70.0/27").unwrap(),
        ..tiny(vec![200.0])
    })
    .expect("the demo runs");
    let s = &report.steps[0];
    assert_eq!(
        s.answered_ok, 400,
        "every request answered with its bundle id"
    );
    assert_eq!(s.relay_stats.delivered, 400);
    assert!(s.accounting_holds);
    assert_eq!(s.engine.early_sends, 0);
    assert_eq!(s.engine.accepted, 400);
    assert!(report.failures().is_empty(), "{:?}", report.failures());
}

#[test]
fn tls_and_socks5_are_refused_for_the_baseline_and_socks5_must_leave_direct_sources() {
    let e = DemoConfig {
        relay: RelayKind::Baseline,
        tls: true,
        ..tiny(vec![100.0])
    }
    .validate()
    .unwrap_err();
    assert!(e.contains("baseline speaks neither"), "{e}");
    let e = DemoConfig {
        socks5: 64,
        ..tiny(vec![100.0])
    }
    .validate()
    .unwrap_err();
    assert!(e.contains("leaves no egress address"), "{e}");
}

#[test]
fn the_tls_cost_run_alternates_plaintext_and_tls_and_reports_the_difference() {
    use bundle_relay_bench::switch_cost::{self, CostConfig, Switch};
    let cfg = CostConfig {
        rounds: 1,
        fixed_rate_per_s: 200.0,
        saturation_rate_per_s: 400.0,
        duration_s: 1.0,
        egress: demo::parse_egress("127.1.71.0/29").unwrap(),
        ..CostConfig::new(
            DemoConfig {
                relay_exe: Some(env!("CARGO_BIN_EXE_bench-demo").into()),
                ..tiny(vec![200.0])
            },
            Switch::Tls,
        )
    };
    let report = switch_cost::run(&cfg).expect("both modes run");
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    for runs in [&report.fixed, &report.saturation] {
        let p = &runs.pairs[0];
        assert_eq!(p.on.relay_stats.delivered, p.on.load.scheduled);
        assert_eq!(p.off.relay_stats.delivered, p.off.load.scheduled);
    }
    let text = switch_cost::render(&report);
    assert!(text.contains("TLS/plaintext"), "{text}");
    assert!(text.contains("relay CPU per delivered bundle"), "{text}");
    assert!(text.contains("TLS costs"), "{text}");
}

#[test]
fn pinning_the_relay_is_refused_where_the_relay_shares_this_process_or_the_mode_pins_its_own_way() {
    for args in [
        &["--pin-relay", "--in-process"][..],
        &["--pin-relay", "--poll-cost"],
        &["--pin-relay", "--idle-cost"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_bench-demo"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--pin-relay: with --compare or a plain run"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn running_the_relay_in_process_is_refused_where_the_mode_runs_it_in_a_process_of_its_own() {
    // Each of these would otherwise run for minutes with the flag dropped; refused, they end
    // at once.
    for mode in [
        "--compare",
        "--faults",
        "--handoffs",
        "--idle-cost",
        "--metrics-cost",
        "--poll-cost",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_bench-demo"))
            .args([mode, "--in-process"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{mode}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--in-process: a plain run only"),
            "{mode}: {err}"
        );
    }
}

#[test]
fn bench_null_given_cores_runs_on_those_only_and_a_bad_list_is_named() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_bench-null"))
        .args(["--listen", &listen, "--cores", "0", "--duration-s", "5"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Listening means it got past the confinement.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("listening on"), "{first}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(allowed, "0");

    let out = Command::new(env!("CARGO_BIN_EXE_bench-null"))
        .args(["--listen", &listen, "--cores", "0,one"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--cores 0,one: \"one\" is not a core number"),
        "{err}"
    );
}
