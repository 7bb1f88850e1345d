//! Whether a real tool a test drives is here (shared with the bench crate's tests).

/// Whether `command` (answering `version_arg`) is installed. CI installs it (`.ci/run`, from
/// Debian's `package`): missing there is a broken CI, not a reason to skip; elsewhere the test
/// says so and passes.
pub fn installed(command: &str, version_arg: &str, package: &str) -> bool {
    let found = std::process::Command::new(command)
        .arg(version_arg)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true but {command} is missing: .ci/run installs Debian's {package} package"
        );
        eprintln!("skipped: {command} is not installed (apt-get install {package})");
    }
    found
}
