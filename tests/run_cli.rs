//! `bundle-relay run`'s metrics switch on the command line: `--no-metrics` turns them off, and
//! asking for .hlog files of histograms that are off is refused before anything starts.

use std::process::Command;

#[test]
fn no_metrics_with_an_hlog_dir_is_refused_naming_both() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-bench.toml");
    let dir = std::env::temp_dir().join(format!("bundle-relay-no-hlog-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--config", config, "--no-metrics", "--hlog-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--hlog-dir writes the metrics' histograms, which are off"),
        "{err}"
    );
    assert!(!dir.exists(), "nothing was written");
}

#[test]
fn no_metrics_is_a_documented_run_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--no-metrics"), "{help}");
    assert!(help.contains("Record no metrics"), "{help}");
}
