//! The one-command demo end to end in-process: engine, baseline relay and open-loop load on
//! loopback with a mid-run storm, and the report's verdicts.

use bundle_relay_bench::demo::{self, DemoConfig};

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
fn a_small_run_answers_everything_delivers_every_admitted_bundle_and_never_sends_early() {
    let report = demo::run(&tiny(vec![300.0])).expect("the demo runs");
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
    assert!(s.storm_told > 0, "the mid-run storm was injected");
    assert!(
        s.relay_stats.cooldowns > 0,
        "the relay honoured the storm's back-off"
    );
    assert_eq!(
        s.engine.latency.count, 600,
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
