//! The fault matrix end to end (`bundle_relay_bench::matrix`): bundle-relay in a process of
//! its own, over TLS, through an engine with a different fault on every region, while abusive
//! clients hit its intake. Every verdict must hold: each bundle accounted for exactly, nothing
//! early, losses only where an engine went silent and no more than it held then, every
//! legitimate client answered, open files and memory back where they started.

use bundle_relay_bench::matrix::{self, MatrixConfig};

#[test]
fn the_relay_holds_under_every_fault_at_once() {
    let mut cfg = MatrixConfig::new(env!("CARGO_BIN_EXE_bench-demo").into());
    cfg.duration_s = 8.0;
    cfg.rate_per_s = 300.0;
    cfg.progress = false;
    let report = matrix::run(&cfg).unwrap_or_else(|e| panic!("the matrix could not run: {e}"));
    let text = matrix::render(&report);
    assert!(report.failures().is_empty(), "{text}");
    // Each fault did happen.
    for kind in [
        "blackhole",
        "stall",
        "rst",
        "goaway",
        "close",
        "throttle",
        "storm",
    ] {
        assert!(
            report.engine.faults.get(kind).copied().unwrap_or(0) > 0,
            "{kind} never fired: {:?}\n{text}",
            report.engine.faults
        );
    }
    assert!(report.relay.silences >= 1, "{text}");
    assert!(report.relay.cooldowns >= 1, "{text}");
    assert!(report.relay.retries >= 1, "{text}");
}
