//! Startup probe: passes here on a small config, refuses a config that needs more open files
//! than the hard limit (naming both numbers), and maps each setup failure to its cause and fix.

use std::io;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use bundle_relay::config::{Config, Resolve};
use bundle_relay::probe::{self, ProbeError, Problem, RingSetup};

const REGIONS: &str = "[[region]]\nname = \"ny\"\nhost = \"127.0.0.15\"\nport = 10000\n\
                       [[region]]\nname = \"slc\"\nhost = \"127.0.0.16\"\nport = 10000\n";

fn config(threads: usize, egress: &str) -> Config {
    let text = format!("threads = {threads}\n{REGIONS}[egress]\naddresses = [\"{egress}\"]\n");
    Config::parse(&text, "probe.toml", Resolve::Deferred).unwrap()
}

/// The open-files limit is the process's, and the probe raises it: a test that sets it low
/// holds this so no other probe in the same binary raises it between the set and the check.
static NOFILE: Mutex<()> = Mutex::new(());

fn nofile_held() -> MutexGuard<'static, ()> {
    NOFILE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn hard_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim.rlim_max
}

fn commas(n: u64) -> String {
    let d = n.to_string();
    d.chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let sep = (i > 0 && (d.len() - i) % 3 == 0).then_some(',');
            sep.into_iter().chain([c])
        })
        .collect()
}

#[test]
fn probe_passes_on_this_machine_with_a_small_config() {
    let _held = nofile_held();
    let cfg = config(2, "127.1.0.0/28");
    let report = probe::check(&cfg).unwrap_or_else(|e| panic!("probe failed here:\n{e}"));
    assert!(report.buf_ring);
    assert!(report.nofile_soft >= cfg.fds_needed());
    assert_eq!(report.fds, cfg.fd_budget());
    let shown = report.to_string();
    println!("{shown}");
    assert_eq!(shown.lines().count(), 7, "one line per fact:\n{shown}");
    assert!(
        shown.contains(&format!("open files: need {}", commas(cfg.fds_needed()))),
        "{shown}"
    );
    match &report.ring {
        RingSetup::SingleIssuerDeferTaskrun => assert!(shown.contains("single issuer + deferred")),
        RingSetup::Plain { why } => assert!(shown.contains(why.as_str())),
    }
}

#[test]
fn probe_refuses_a_config_needing_more_fds_than_the_hard_limit_naming_both() {
    let _held = nofile_held();
    // 4,096 sources × 2 regions = 8,192 pairs, plus 16 threads × 1,024 intake connections.
    let cfg = config(16, "127.1.0.0/20");
    let needed = cfg.fds_needed();
    let hard = hard_nofile();
    assert!(
        needed > hard,
        "this test needs a config past the hard limit {hard}: {needed}"
    );
    let ProbeError { problems } = probe::check(&cfg).unwrap_err();
    let open_files: Vec<_> = problems
        .iter()
        .filter(|p| matches!(p, Problem::OpenFiles { .. }))
        .collect();
    assert_eq!(open_files.len(), 1, "{problems:?}");
    let shown = open_files[0].to_string();
    assert!(
        shown.contains(&format!("needs {} file descriptors", commas(needed))),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("hard limit RLIMIT_NOFILE is {}", commas(hard))),
        "{shown}"
    );
    assert!(shown.contains(&format!("LimitNOFILE={needed}")), "{shown}");
    assert!(shown.contains("fewer egress sources"), "{shown}");
    // A user whose locked-memory limit is under 16 threads' rings (where they are charged)
    // sees that too; the open files are what this test is about.
    let others: Vec<_> = problems
        .iter()
        .filter(|p| !matches!(p, Problem::OpenFiles { .. } | Problem::LockedMemory { .. }))
        .collect();
    assert!(
        others.is_empty(),
        "nothing else is wrong here: {problems:?}"
    );
}

#[test]
fn probe_raises_a_low_soft_open_files_limit_to_the_hard_one() {
    let _held = nofile_held();
    let hard = hard_nofile();
    let low = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: hard,
    };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
    // 512 sources × 2 regions = 1,024 pairs: past the soft 1,024 with the rest, under the hard.
    let cfg = config(1, "127.1.0.0/23");
    assert!(cfg.fds_needed() > 1024 && cfg.fds_needed() <= hard);
    let report = probe::check(&cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (report.nofile_soft_before, report.nofile_soft),
        (1024, hard)
    );
    assert!(
        report
            .to_string()
            .contains(&format!("soft limit {} (raised from 1,024)", commas(hard)))
    );
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) }, 0);
    assert_eq!(now.rlim_cur, hard, "the process limit itself was raised");
}

#[test]
fn io_uring_disabled_sysctl_is_read_as_written_and_absent_means_allowed() {
    let dir = std::env::temp_dir().join(format!("bundle-relay-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (text, want) in [
        ("0\n", Some(0)),
        ("1\n", Some(1)),
        ("2\n", Some(2)),
        ("junk", None),
    ] {
        let path = dir.join("io_uring_disabled");
        std::fs::write(&path, text).unwrap();
        assert_eq!(probe::read_io_uring_disabled(&path), want, "{text:?}");
    }
    assert_eq!(probe::read_io_uring_disabled(&dir.join("absent")), None);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        probe::read_io_uring_disabled(Path::new(probe::IO_URING_DISABLED_PATH)).is_some(),
        Path::new(probe::IO_URING_DISABLED_PATH).exists()
    );
}

/// errno from io_uring_setup → the problem reported, and the fix its message names.
#[test]
fn ring_setup_errors_map_to_cause_and_fix() {
    let memlock = (65_536, 65_536);
    let table: [(i32, Option<u8>, &str); 5] = [
        (
            libc::EPERM,
            Some(0),
            "io_uring blocked (seccomp profile of a container?)",
        ),
        (libc::EPERM, Some(1), "kernel.io_uring_disabled = 1"),
        (libc::ENOMEM, Some(0), "RLIMIT_MEMLOCK is 65,536 bytes"),
        (libc::ENOSYS, None, "this kernel has no io_uring"),
        (libc::EINVAL, Some(0), "io_uring setup failed"),
    ];
    for (errno, sysctl, cause) in table {
        let problem =
            probe::classify_ring_error(&io::Error::from_raw_os_error(errno), sysctl, memlock);
        let shown = problem.to_string();
        assert!(
            shown.contains(cause),
            "errno {errno}, sysctl {sysctl:?}: {shown}"
        );
        assert!(shown.contains("fix:"), "{shown}");
    }
    let memlock_fix =
        probe::classify_ring_error(&io::Error::from_raw_os_error(libc::ENOMEM), None, memlock);
    assert!(
        memlock_fix.to_string().contains("ulimit -l")
            && memlock_fix.to_string().contains("LimitMEMLOCK")
    );
    let seccomp =
        probe::classify_ring_error(&io::Error::from_raw_os_error(libc::EPERM), Some(0), memlock);
    assert!(
        seccomp
            .to_string()
            .contains("io_uring_setup, io_uring_enter and io_uring_register")
    );
    assert_eq!(
        Problem::IoUringDisabled
            .to_string()
            .split(';')
            .next()
            .unwrap(),
        "io_uring is disabled for every process (kernel.io_uring_disabled = 2)"
    );
}

/// A ring refused for memory is a refusal for now (exit 75, restarted): the kernel counts the
/// user's every process, and one that just ended frees its rings a moment later. A limit below
/// what the threads need is not: the unit must change.
#[test]
fn a_ring_refused_for_memory_is_for_now_and_a_limit_below_the_need_is_not() {
    let memlock = probe::classify_ring_error(
        &io::Error::from_raw_os_error(libc::ENOMEM),
        Some(0),
        (65_536, 65_536),
    );
    assert!(matches!(memlock, Problem::RingMemlock { .. }));
    let below = Problem::LockedMemory {
        threads: 2,
        rings_charged: true,
        needed: 1 << 20,
        soft: 65_536,
        hard: 65_536,
    };
    let of = |problems: Vec<Problem>| probe::ProbeError { problems }.for_now();
    assert!(of(vec![memlock.clone()]));
    assert!(!of(vec![below.clone()]));
    assert!(!of(vec![memlock, below]));
}
