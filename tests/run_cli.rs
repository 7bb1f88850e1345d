//! `bundle-relay run`'s command-line switches: `--no-metrics` turns the metrics off, and
//! asking for .hlog files of histograms that are off is refused before anything starts;
//! `--tenants` is the static tenants provider; the switches that change a config file are
//! refused without one.

use std::os::unix::process::ExitStatusExt;
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

/// The static tenants provider: `--tenants` gives the tenants as a JSON document, checked by
/// the file's rules, and the plan says how many it took; a file with tenants of its own and
/// `--tenants` together are refused, naming both.
#[test]
fn tenants_on_the_command_line_are_the_relays_tenants_and_exclude_the_files() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-bench.toml");
    let doc = r#"{"tenant": [{"name": "alpha", "key_sha256": ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]}], "default_tenant": {"rate": 5}}"#;
    let out = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--check", "--config", config, "--tenants", doc])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("override: 1 tenants and a default from --tenants"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bad = r#"{"tenant": [{"name": "alpha", "keys": ["k"], "regions": ["mars"]}]}"#;
    let out = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--check", "--config", config, "--tenants", bad])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tenants") && err.contains("mars"), "{err}");

    let dir =
        std::env::temp_dir().join(format!("bundle-relay-two-providers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let with_own = dir.join("relay.toml");
    let text = std::fs::read_to_string(config).unwrap();
    std::fs::write(&with_own, format!("{text}\n[default_tenant]\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--check", "--config"])
        .arg(&with_own)
        .args(["--tenants", doc])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--tenants") && err.contains("one provider"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The plan names the trusted proxies, so an operator reads whose `X-Forwarded-For` the relay
/// believes; a relay trusting none says nothing of it.
#[test]
fn the_plan_names_the_proxies_whose_forwarded_address_is_believed() {
    let dir = std::env::temp_dir().join(format!("br-cli-proxies-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = "threads = 1\narena_slots = 64\n[intake]\nrotating = \"127.0.0.1:0\"\n\
                 [[region]]\nname = \"ny\"\nhost = \"127.0.0.42\"\nport = 9\ntls = false\n\
                 [egress]\naddresses = [\"127.1.0.0/30\"]\n[admin]\nlisten = \"off\"\n";
    let trusting = plain.replace(
        "rotating = \"127.0.0.1:0\"\n",
        "rotating = \"127.0.0.1:0\"\ntrusted_proxies = [\"127.0.0.1\", \"10.8.0.0/16\"]\n",
    );
    let plan = |text: &str, name: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
            .args(["run", "--check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = plan(&trusting, "trusting.toml");
    assert!(
        text.contains(
            "intake: trusted proxies 127.0.0.1/32, 10.8.0.0/16: a request from one is from the \
             address its last X-Forwarded-For ends in"
        ),
        "{text}"
    );
    assert!(!plan(plain, "plain.toml").contains("trusted proxies"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn switches_that_change_a_config_file_are_refused_without_one_naming_them() {
    for args in [
        &["--egress-slice", "1/2"][..],
        &["--egress", "127.1.0.0/30"],
        &["--ca-file", "/nonexistent.pem"],
        &["--resolve", "h:443:127.0.0.1:1"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
            .arg("run")
            .args(args)
            .arg("--check")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(args[0]) && err.contains("change a --config file; give one"),
            "{args:?}: {err}"
        );
    }
}

/// Runs the relay's binary with `args`; its exit status and standard error.
/// `--check` holds the .hlog folder to what the start needs, as a start does before it
/// listens: a path that is a file is refused naming it, and an interval of 0 s (which the
/// writer would have run as 1 s while saying 0) is refused by the flag.
#[test]
fn an_hlog_dir_that_is_a_file_or_an_interval_of_zero_is_refused_before_anything_listens() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-bench.toml");
    let file = std::env::temp_dir().join(format!("bundle-relay-hlog-file-{}", std::process::id()));
    std::fs::write(&file, "not a folder").unwrap();
    let path = file.to_str().unwrap();
    let (code, err) = run_args(&["run", "--config", config, "--check", "--hlog-dir", path]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--hlog-dir {path}: {path} is a file, not a folder"
        )),
        "{err}"
    );
    let inside = format!("{path}/under");
    let (code, err) = run_args(&["run", "--config", config, "--check", "--hlog-dir", &inside]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is a file, not a folder"), "{err}");
    std::fs::remove_file(&file).unwrap();
    // A link whose target is not there: no folder can be made at it.
    std::os::unix::fs::symlink(format!("{path}-gone"), &file).unwrap();
    let (code, err) = run_args(&["run", "--config", config, "--check", "--hlog-dir", path]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is a link to nothing"), "{err}");
    std::fs::remove_file(&file).unwrap();
    let dir = std::env::temp_dir().join(format!("bundle-relay-hlog-zero-{}", std::process::id()));
    let (code, err) = run_args(&[
        "run",
        "--config",
        config,
        "--check",
        "--hlog-dir",
        dir.to_str().unwrap(),
        "--hlog-interval-s",
        "0",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--hlog-interval-s"), "{err}");
    assert!(!dir.exists(), "nothing was written");
}

fn run_args(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `--takeover PID` sends PID SIGQUIT: 0 would signal the relay's whole process group and -1
/// every process it may signal, and 1 is init. Each is refused before anything starts.
#[test]
fn a_takeover_pid_that_is_no_single_other_process_is_refused() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-bench.toml");
    for pid in ["0", "-1", "1"] {
        let flag = format!("--takeover={pid}");
        let (code, err) = run_args(&["run", "--config", config, "--check", &flag]);
        assert_eq!(code, Some(2), "{pid}: {err}");
        assert!(err.contains("--takeover"), "{pid}: {err}");
    }
    // A process that is no relay (it would be sent SIGQUIT and dump core), and one that is
    // not there.
    let mut other = Command::new("sleep").arg("30").spawn().unwrap();
    let comm = format!("/proc/{}/comm", other.id());
    for _ in 0..200 {
        if std::fs::read_to_string(&comm).is_ok_and(|c| c.trim_end() == "sleep") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let flag = format!("--takeover={}", other.id());
    // --check: the pid is pinned and checked first, and a relay that took it would not serve.
    let (code, err) = run_args(&["run", "--config", config, "--check", &flag]);
    let _ = other.kill();
    let status = other.wait().unwrap();
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "bundle-relay: --takeover {}: that process is \"sleep\", not a bundle-relay (it holds \
             no pacing ledger either); it is not sent SIGQUIT",
            other.id()
        )
    );
    assert_eq!(status.signal(), Some(libc::SIGKILL), "it was not signalled");
    // A pid no process has (past the kernel's pid_max).
    let (code, err) = run_args(&[
        "run",
        "--config",
        config,
        "--check",
        "--takeover=2147483647",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no such process"), "{err}");
}

/// `egress-ip` prints commands meant for `| sh` as root: an interface that is no interface
/// name (a space, a `;`, empty, longer than the kernel's 15 bytes) is refused, not printed.
#[test]
fn egress_ip_refuses_an_interface_that_is_no_interface_name() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-bench.toml");
    for dev in ["lo; touch /tmp/x", "", "a b", "sixteen-bytes-xx", "../lo"] {
        let (code, err) = run_args(&["egress-ip", "--config", config, "--interface", dev]);
        assert_eq!(code, Some(2), "{dev:?}: {err}");
        assert!(err.contains("--interface"), "{dev:?}: {err}");
    }
    let (code, err) = run_args(&["egress-ip", "--config", config, "--interface", "eth0.10"]);
    assert_eq!(code, Some(0), "{err}");
}

/// `budget` takes what a config may say and names a count out of range; it never panics.
#[test]
fn budget_refuses_counts_no_config_may_have_naming_the_flag() {
    for (flag, value) in [
        ("--threads", "0"),
        ("--threads", "100000"),
        ("--regions", "0"),
        ("--regions", "17"),
        ("--slots", "0"),
        ("--slots", "18446744073709551615"),
        ("--addresses", "0"),
    ] {
        let (code, err) = run_args(&["budget", flag, value]);
        assert_eq!(code, Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// `check-host --root` reads proc/ and sys/ under a folder: one that is not there is refused,
/// not read as a host with nothing set.
#[test]
fn check_host_refuses_a_root_that_is_not_there() {
    let (code, err) = run_args(&["check-host", "--root", "/nonexistent-root-for-check-host"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--root"), "{err}");
}

/// The printing commands end quietly when what reads them stops early (`| head -1`).
#[test]
fn printing_commands_end_without_a_panic_when_their_reader_goes() {
    use std::io::Read;
    use std::process::Stdio;
    for args in [&["budget"][..], &["clock"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Closed before anything is read: every write fails with EPIPE.
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(status.code(), Some(101), "{args:?}: {err}");
    }
}

/// `run --check` holds the config to this host as `run` will: a listener on an address that
/// is not this host's, or egress addresses that are not local, fail the check naming the key
/// and the addresses (they would fail at start, or leave every such pair failing to connect),
/// with the status of a start the host may allow later (75).
#[test]
fn check_refuses_addresses_that_are_not_this_hosts_naming_them() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-bench.toml");
    let text = std::fs::read_to_string(config).unwrap().replace(
        "rotating = \"127.0.0.1:8080\"",
        "rotating = \"192.0.2.1:8080\"",
    );
    let dir = std::env::temp_dir().join(format!("bundle-relay-not-local-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("relay.toml");
    std::fs::write(&path, text).unwrap();
    let (code, err) = run_args(&["run", "--config", path.to_str().unwrap(), "--check"]);
    assert_eq!(code, Some(75), "{err}");
    assert!(
        err.contains("intake.rotating: 192.0.2.1 is not an address of this host"),
        "{err}"
    );
    let (code, err) = run_args(&[
        "run",
        "--config",
        config,
        "--check",
        "--egress",
        "192.0.2.7,192.0.2.8,127.1.0.1",
    ]);
    assert_eq!(code, Some(75), "{err}");
    assert!(
        err.contains("2 of 3 egress addresses are not local: 192.0.2.7"),
        "{err}"
    );
    assert!(err.contains("bundle-relay egress-ip"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `run --check` refuses what the start would: with handoffs off, an egress group with fewer
/// sources than threads (a thread could send none of that group's bundles).
#[test]
fn check_refuses_what_the_start_would_refuse() {
    let dir = std::env::temp_dir().join(format!("bundle-relay-check-spec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("relay.toml");
    std::fs::write(
        &path,
        "threads = 2\nhandoffs = false\n[intake]\nrotating = \"127.0.0.1:0\"\n[admin]\nlisten = \"off\"\n\
         [[region]]\nname = \"ny\"\nhost = \"127.0.0.15\"\nport = 10000\n\
         [egress]\naddresses = [\"127.1.0.0/30\"]\n[[egress.group]]\nname = \"a\"\naddresses = [\"127.1.0.1\"]\n",
    )
    .unwrap();
    let (code, err) = run_args(&["run", "--config", path.to_str().unwrap(), "--check"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("egress group a has 1 sources for 2 threads"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A start refused for what the config or a flag says exits 2 (the units do not restart: the
/// same start would fail again); one refused for what the host or the network says now exits
/// 75 (EX_TEMPFAIL: the units restart, and a start after DNS answers, the addresses are back
/// after a reboot or the port is free again passes).
#[test]
fn a_refused_start_exits_2_for_the_config_and_75_for_what_the_host_may_allow_later() {
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/configs/local-bench.toml"
    ))
    .unwrap();
    let dir = std::env::temp_dir().join(format!("bundle-relay-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let cases: [(&str, String, &[&str], i32, &str); 6] = [
        (
            "a key the schema does not have",
            base.replace("arena_slots = 8192", "arena_slot = 8192"),
            &["--check"],
            2,
            "unknown field `arena_slot`",
        ),
        (
            "a value out of range",
            base.replace("bundle_max_age_ms = 2000", "bundle_max_age_ms = 0"),
            &["--check"],
            2,
            "bundle_max_age_ms",
        ),
        (
            "a region host that does not resolve",
            base.replacen("host = \"127.0.0.11\"", "host = \"relay-test.invalid\"", 1),
            &["--check"],
            75,
            "host \"relay-test.invalid\" does not resolve",
        ),
        (
            "a listener address not on this host",
            base.replace(
                "rotating = \"127.0.0.1:8080\"",
                "rotating = \"192.0.2.1:8080\"",
            ),
            &["--check"],
            75,
            "192.0.2.1 is not an address of this host",
        ),
        (
            "egress addresses not local",
            base.clone(),
            &["--check", "--egress", "192.0.2.7"],
            75,
            "1 of 1 egress addresses are not local",
        ),
        (
            "an intake port another process holds",
            base.replace(
                "rotating = \"127.0.0.1:8080\"",
                &format!("rotating = \"127.0.0.1:{port}\""),
            )
            .replace("pinned = \"127.0.0.1:", "# pinned = \"127.0.0.1:")
            .replace("listen = \"127.0.0.1:9464\"", "listen = \"off\""),
            &[],
            75,
            "in use",
        ),
    ];
    for (i, (case, text, flags, code, says)) in cases.into_iter().enumerate() {
        let path = dir.join(format!("{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let mut args = vec!["run", "--config", path.to_str().unwrap()];
        args.extend_from_slice(flags);
        let (got, err) = run_args(&args);
        assert_eq!(got, Some(code), "{case}: {err}");
        assert!(err.contains(says), "{case}: {err}");
    }
    drop(taken);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A port another relay listens on (a socket sharing it with SO_REUSEPORT, as each relay's
/// threads share theirs) is refused as taken, not joined: two relays on one port would split
/// its connections between them, and a load balancer's health check of one would answer for
/// both.
#[test]
fn an_intake_port_another_relay_listens_on_is_refused_not_shared() {
    use socket2::{Domain, Socket, Type};
    let holder = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    holder.set_reuse_address(true).unwrap();
    holder.set_reuse_port(true).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    holder.bind(&any.into()).unwrap();
    holder.listen(16).unwrap();
    let port = holder.local_addr().unwrap().as_socket().unwrap().port();
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/configs/local-bench.toml"
    ))
    .unwrap();
    let text = base
        .replace(
            "rotating = \"127.0.0.1:8080\"",
            &format!("rotating = \"127.0.0.1:{port}\""),
        )
        .replace("pinned = \"127.0.0.1:", "# pinned = \"127.0.0.1:")
        .replace("listen = \"127.0.0.1:9464\"", "listen = \"off\"");
    let path = std::env::temp_dir().join(format!(
        "bundle-relay-shared-port-{}.toml",
        std::process::id()
    ));
    std::fs::write(&path, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["run", "--config", path.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(status, Some(75), "it ran beside the other: {err}");
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && err.contains("another process listens on this port"),
        "{err}"
    );
}

/// `egress.ledger` is a file on tmpfs: its bookings are readings of this boot's clock, so a
/// file that survived a reboot would hold every pair back for the old uptime.
#[test]
fn a_ledger_file_that_is_not_on_tmpfs_or_has_no_folder_is_refused_naming_it() {
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/configs/local-bench.toml"
    ))
    .unwrap();
    // The build's own folder: on disk where /tmp may be tmpfs.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bundle-relay-ledger-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let on_disk = dir.join("pacing.ledger");
    for (ledger, says) in [
        (on_disk.to_str().unwrap(), "is not on tmpfs"),
        (
            "/dev/shm/no-such-folder/pacing.ledger",
            "its folder does not exist",
        ),
        ("pacing.ledger", "is not an absolute file path"),
    ] {
        let path = dir.join("relay.toml");
        std::fs::write(
            &path,
            base.replace("[egress]\n", &format!("[egress]\nledger = \"{ledger}\"\n")),
        )
        .unwrap();
        let (code, err) = run_args(&["run", "--check", "--config", path.to_str().unwrap()]);
        if says == "is not on tmpfs" && code == Some(0) {
            eprintln!("skipped: {} is on tmpfs here", dir.display());
            continue;
        }
        assert_eq!(code, Some(2), "{ledger}: {err}");
        assert!(
            err.contains("egress.ledger") && err.contains(says),
            "{ledger}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Which failures of the relay's own start a later start may get past (exit 75, restarted)
/// and which it will not (exit 2), row by row.
#[test]
fn a_start_failure_is_for_now_only_when_waiting_can_mend_it() {
    use bundle_relay::runtime::StartError;
    use std::io::{Error, ErrorKind};
    let addr: std::net::SocketAddr = "127.0.0.1:80".parse().unwrap();
    let rows = [
        (
            "port held by a process on its way out",
            StartError::Bind(addr, Error::from(ErrorKind::AddrInUse)),
            true,
        ),
        (
            "address not yet on this host",
            StartError::Bind(addr, Error::from(ErrorKind::AddrNotAvailable)),
            true,
        ),
        (
            "port the relay may not bind",
            StartError::Bind(addr, Error::from(ErrorKind::PermissionDenied)),
            false,
        ),
        (
            "ring: kernel short of memory",
            StartError::Ring(Error::from_raw_os_error(libc::ENOMEM)),
            true,
        ),
        (
            "ring: io_uring refused",
            StartError::Ring(Error::from_raw_os_error(libc::EPERM)),
            false,
        ),
        (
            "ring: no io_uring in the kernel",
            StartError::Ring(Error::from_raw_os_error(libc::ENOSYS)),
            false,
        ),
        (
            "no thread",
            StartError::Thread(Error::from_raw_os_error(libc::EAGAIN)),
            true,
        ),
        (
            "the spec",
            StartError::Spec("a group without sources".into()),
            false,
        ),
    ];
    for (row, e, for_now) in rows {
        assert_eq!(e.transient(), for_now, "{row}: {e}");
    }
}

/// `bundle-relay run` as the unprivileged user the units run it as (no capabilities, so no
/// CAP_IPC_LOCK), its `RLIMIT_MEMLOCK` soft and hard at `memlock` bytes; killed after
/// `for_ms` if it is still running. Its exit status (`None`: it was still running) and
/// standard error.
fn run_unprivileged(args: &[&str], memlock: u64, for_ms: u64) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ])
    .arg(env!("CARGO_BIN_EXE_bundle-relay"))
    .args(args)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: memlock,
                rlim_max: memlock,
            };
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("setpriv (util-linux) runs");
    let until = std::time::Instant::now() + std::time::Duration::from_millis(for_ms);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if std::time::Instant::now() >= until {
            unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (code, err)
}

/// Where the kernel charges io_uring's ring memory to `RLIMIT_MEMLOCK` (this one does, for
/// a process without CAP_IPC_LOCK, as the units run it), every thread's ring counts: `run
/// --check` refuses a limit the start would fail under, naming `LimitMEMLOCK` and the bytes
/// (exit 2: the unit must change), and with the limit it names the relay starts. Where the
/// kernel does not charge rings, the check and the start agree the other way.
#[test]
fn the_check_refuses_a_locked_memory_limit_the_threads_rings_do_not_fit_and_the_limit_it_names_starts()
 {
    let dir = std::env::temp_dir().join(format!("bundle-relay-memlock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("relay.toml");
    std::fs::write(
        &path,
        "threads = 2\n[intake]\nrotating = \"127.0.0.1:0\"\n[admin]\nlisten = \"off\"\n\
         [[region]]\nname = \"ny\"\nhost = \"127.0.0.15\"\nport = 1\n\
         [egress]\naddresses = [\"127.1.83.0/30\"]\n",
    )
    .unwrap();
    let config = path.to_str().unwrap();
    // Two threads' provided-buffer rings fit; their submission and completion rings do not.
    let low = 64 << 10;
    let (check, check_err) = run_unprivileged(&["run", "--config", config, "--check"], low, 20_000);
    let (start, start_err) = run_unprivileged(&["run", "--config", config], low, 3_000);
    if check == Some(0) {
        assert_eq!(
            start, None,
            "the check passed, so the start must run:\n{start_err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    }
    assert_ne!(
        start, None,
        "the start ran where the check refused:\n{check_err}"
    );
    assert_eq!(check, Some(2), "{check_err}");
    let need: u64 = check_err
        .split("LimitMEMLOCK=")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("names LimitMEMLOCK=<bytes>: {check_err}"));
    assert!(
        check_err.contains("2 threads"),
        "says for how many threads: {check_err}"
    );
    let (check, check_err) =
        run_unprivileged(&["run", "--config", config, "--check"], need, 20_000);
    assert_eq!(check, Some(0), "the limit it named passes: {check_err}");
    let (start, start_err) = run_unprivileged(&["run", "--config", config], need, 3_000);
    assert_eq!(
        start, None,
        "the limit it named starts the relay:\n{start_err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// On a host with `net.ipv4.ip_nonlocal_bind = 1` (common beside keepalived or HAProxy's
/// virtual addresses) any address binds, local or not. An egress address no local route or
/// address holds is still not the host's: `run --check` and `check-host` say so (75: the host
/// may give it later), where they called it "local and bindable" and the start then never
/// got a pair up. Run in a network namespace of its own, so the host's setting is untouched;
/// needs root and `unshare`/`ip` (util-linux, iproute2), else it says so and passes, except
/// under CI.
#[test]
fn an_egress_address_that_binds_only_through_nonlocal_bind_is_not_local() {
    let probe = Command::new("unshare")
        .args(["-n", "true"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !probe {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with util-linux: unshare -n must work"
        );
        eprintln!("skipped: `unshare -n` is not allowed here");
        return;
    }
    let dir = std::env::temp_dir().join(format!("bundle-relay-nonlocal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("relay.toml");
    std::fs::write(
        &config,
        "[[region]]\nname = \"ny\"\nhost = \"127.0.0.1\"\nport = 9\n\
         [intake]\nrotating = \"127.0.0.1:18080\"\n[admin]\nlisten = \"off\"\n\
         [egress]\naddresses = [\"203.0.113.0/30\", \"127.1.0.1\"]\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_bundle-relay");
    let script = format!(
        "ip link set lo up && sysctl -qw net.ipv4.ip_nonlocal_bind=1 && \
         {bin} run --check --config {c}; echo \"run-check=$?\"; \
         {bin} check-host --config {c}; echo \"check-host=$?\"",
        c = config.display()
    );
    let out = Command::new("unshare")
        .args(["-n", "sh", "-c", &script])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("run-check=75"), "{text}");
    assert!(
        text.contains("4 of 5 egress addresses are not local: 203.0.113.0 ("),
        "{text}"
    );
    assert!(text.contains("check-host=1"), "{text}");
    assert!(text.contains("fail egress addresses"), "{text}");
}
