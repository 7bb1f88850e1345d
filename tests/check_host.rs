//! `bundle-relay check-host` against fake `/proc` and `/sys` trees: each check reads what a
//! tuned host and an untuned one would show, and says ok, warn or fail with the value found,
//! the value wanted and the fix; the command's exit status is non-zero only on a fail. The
//! egress address helper prints the fewest local routes for a config's addresses.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use bundle_relay::check_host::{self, Check, Inputs, Level, egress, sysctl};
use bundle_relay::config::{Config, Resolve};
use bundle_relay::probe::{Problem, RingFacts, RingSetup};

struct Tree(PathBuf);

impl Tree {
    fn new(name: &str) -> Tree {
        let root = std::env::temp_dir().join(format!("br-host-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        Tree(root)
    }

    fn put(&self, rel: &str, text: &str) -> &Tree {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{text}\n")).unwrap();
        self
    }

    /// Every sysctl of the shipped file at its wanted value (or `over`'s).
    fn sysctls(&self, over: &[(&str, &str)]) -> &Tree {
        for (k, v) in sysctl::parse(sysctl::SHIPPED).unwrap() {
            let v = over
                .iter()
                .find(|(ok, _)| *ok == k)
                .map_or(v, |(_, ov)| ov.to_string());
            self.put(&format!("proc/sys/{}", k.replace('.', "/")), &v);
        }
        self
    }

    /// A tuned host: tsc, invariant, performance, THP madvise, cores 2-3 isolated, the NIC's
    /// interrupt on core 0.
    fn tuned(&self) -> &Tree {
        self.sysctls(&[])
            .put(
                "sys/devices/system/clocksource/clocksource0/current_clocksource",
                "tsc",
            )
            .put(
                "proc/cpuinfo",
                "processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp",
            )
            .put(
                "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "performance",
            )
            .put(
                "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
                "performance",
            )
            .put(
                "sys/kernel/mm/transparent_hugepage/enabled",
                "always [madvise] never",
            )
            .put(
                "sys/kernel/mm/transparent_hugepage/defrag",
                "always defer defer+madvise [madvise] never",
            )
            .put("sys/devices/system/cpu/isolated", "2-3")
            .put("proc/irq/40/smp_affinity_list", "0")
            .put("proc/irq/40/eth0-rx-0/.keep", "")
            // No device behind irq 41: its affinity does not matter.
            .put("proc/irq/41/smp_affinity_list", "0-3")
            // What systemd raises it to at boot.
            .put("proc/sys/fs/nr_open", "1073741816")
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(threads: usize, egress: &str) -> Config {
    Config::parse(
        &format!(
            "threads = {threads}\n[[region]]\nname = \"r\"\nhost = \"127.0.0.1\"\nport = 9\n\
             [egress]\naddresses = [{egress}]\n"
        ),
        "test.toml",
        Resolve::Deferred,
    )
    .unwrap()
}

fn inputs(root: &Path, cfg: Option<Config>) -> Inputs {
    Inputs {
        root: root.to_path_buf(),
        config: cfg,
        sysctl: sysctl::SHIPPED.to_string(),
        ring: Ok(RingFacts {
            kernel: "6.8.0".into(),
            ring: RingSetup::SingleIssuerDeferTaskrun,
            features: vec!["nodrop", "fast_poll", "ext_arg"],
            buf_ring: Ok(()),
            socket_options: Ok(()),
        }),
        nofile: (1 << 20, 1 << 20),
        memlock: (8 << 20, 8 << 20),
        rings_charged: false,
        cpus: vec![2, 3, 0, 1],
    }
}

fn find<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name}: {checks:#?}"))
}

#[test]
fn a_tuned_host_passes_every_check() {
    let t = Tree::new("tuned");
    t.tuned();
    let checks = check_host::run(&inputs(&t.0, Some(config(2, "\"127.1.90.0/30\""))));
    let not_ok: Vec<String> = checks
        .iter()
        .filter(|c| c.level != Level::Ok)
        .map(|c| c.to_string())
        .collect();
    assert!(not_ok.is_empty(), "{not_ok:#?}");
    assert!(check_host::passed(&checks));
    assert_eq!(
        find(&checks, "egress addresses").found,
        "4 of 4 local and bindable"
    );
    assert_eq!(find(&checks, "isolated cores").found, "2-3");
    // One line per sysctl of the shipped file, each ok.
    let keys = sysctl::parse(sysctl::SHIPPED).unwrap();
    for (k, _) in &keys {
        assert_eq!(find(&checks, k).level, Level::Ok, "{k}");
    }
}

#[test]
fn each_sysctl_is_held_to_its_rule_and_a_miss_names_the_fix() {
    let t = Tree::new("sysctl");
    t.tuned();
    t.sysctls(&[
        ("net.core.somaxconn", "8192"),                 // more is fine
        ("net.ipv4.tcp_max_syn_backlog", "1024"),       // less is not
        ("net.ipv4.tcp_rmem", "4096 131072 33554432"),  // a maximum over the cap
        ("net.ipv4.tcp_wmem", "4096 65536 1048576"),    // a lower cap is fine
        ("net.core.wmem_max", "16777216"),              // setsockopt's ceiling: more is fine
        ("net.ipv4.ip_local_port_range", "1024 65535"), // wider covers
        ("net.ipv4.tcp_migrate_req", "0"),              // exactly 1
        ("vm.swappiness", "0"),                         // at most 1
        ("kernel.io_uring_disabled", "2"),              // the relay cannot run
    ]);
    let checks = check_host::run(&inputs(&t.0, None));
    let level = |k| find(&checks, k).level;
    assert_eq!(level("net.core.somaxconn"), Level::Ok);
    assert_eq!(level("net.ipv4.tcp_max_syn_backlog"), Level::Warn);
    assert_eq!(level("net.ipv4.tcp_rmem"), Level::Warn);
    assert_eq!(level("net.ipv4.tcp_wmem"), Level::Ok);
    assert_eq!(level("net.core.wmem_max"), Level::Ok);
    assert_eq!(level("net.ipv4.ip_local_port_range"), Level::Ok);
    assert_eq!(level("net.ipv4.tcp_migrate_req"), Level::Warn);
    assert_eq!(level("vm.swappiness"), Level::Ok);
    assert_eq!(level("kernel.io_uring_disabled"), Level::Fail);
    assert!(!check_host::passed(&checks));
    assert_eq!(
        find(&checks, "net.ipv4.tcp_migrate_req").to_string(),
        "warn net.ipv4.tcp_migrate_req: found 0; wanted 1; fix: sysctl -w \
         net.ipv4.tcp_migrate_req=\"1\" (for good: install /usr/lib/sysctl.d/30-bundle-relay.conf, \
         as the package does, then sysctl --system)"
    );
    assert_eq!(
        find(&checks, "net.ipv4.tcp_rmem").wanted,
        "at least 4096 131072, a maximum of at most 4194304"
    );
}

/// A sysctl file to compare with whose value is no number where its key's rule compares
/// numbers (or has the wrong count of them for a range or a triple) fails, naming the line,
/// the key, the value and what the rule wants: not "wanted at least lots" with a fix that
/// would write it.
#[test]
fn a_compared_sysctl_value_that_is_no_number_fails_naming_its_line_and_what_is_wanted() {
    let t = Tree::new("sysctl-words");
    t.tuned();
    for (text, says) in [
        (
            "# ours\nnet.core.somaxconn = lots\n",
            "line 2: net.core.somaxconn = \"lots\": at least wants numbers",
        ),
        (
            "net.ipv4.ip_local_port_range = 1024\n",
            "line 1: net.ipv4.ip_local_port_range = \"1024\": covering wants two numbers, low high",
        ),
        (
            "net.ipv4.tcp_rmem = 4096 131072\n",
            "line 1: net.ipv4.tcp_rmem = \"4096 131072\": a capped triple wants three numbers, min default max",
        ),
        (
            "vm.swappiness = 1 x\n",
            "line 1: vm.swappiness = \"1 x\": at most wants numbers",
        ),
    ] {
        let mut i = inputs(&t.0, None);
        i.sysctl = text.to_string();
        let checks = check_host::run(&i);
        let c = find(&checks, "sysctl file");
        assert_eq!(c.level, Level::Fail, "{text}");
        assert_eq!(c.found, says, "{text}");
        assert!(!check_host::passed(&checks));
    }
    // A value compared exactly may be anything.
    let mut i = inputs(&t.0, None);
    i.sysctl = "net.ipv4.tcp_congestion_control = bbr\n".to_string();
    let checks = check_host::run(&i);
    assert!(
        checks.iter().all(|c| c.name != "sysctl file"),
        "{checks:#?}"
    );
}

#[test]
fn an_untuned_host_gets_a_warning_per_latency_cost_with_its_fix() {
    let t = Tree::new("untuned");
    t.sysctls(&[])
        .put(
            "sys/devices/system/clocksource/clocksource0/current_clocksource",
            "hpet",
        )
        .put(
            "proc/cpuinfo",
            "processor\t: 0\nflags\t\t: fpu tsc constant_tsc",
        )
        .put(
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "powersave",
        )
        .put(
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
            "performance",
        )
        .put(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "[always] madvise never",
        )
        .put(
            "sys/kernel/mm/transparent_hugepage/defrag",
            "[always] defer defer+madvise madvise never",
        )
        .put("proc/irq/40/smp_affinity_list", "0-3")
        .put("proc/irq/40/eth0-rx-0/.keep", "");
    let mut i = inputs(&t.0, None);
    i.cpus = vec![0, 1, 2, 3];
    let checks = check_host::run(&i);
    let c = find(&checks, "clocksource");
    assert_eq!((c.level, c.found.as_str()), (Level::Warn, "hpet"));
    assert!(c.fix.contains("current_clocksource"), "{c}");
    let c = find(&checks, "invariant TSC");
    assert_eq!(
        (c.level, c.found.as_str()),
        (Level::Warn, "constant_tsc, no nonstop_tsc")
    );
    let c = find(&checks, "cpu frequency governor");
    assert_eq!(
        (c.level, c.found.as_str()),
        (Level::Warn, "powersave on cpus 0")
    );
    assert!(
        c.fix.starts_with("cpupower frequency-set -g performance"),
        "{c}"
    );
    assert_eq!(find(&checks, "transparent hugepages").level, Level::Warn);
    assert_eq!(
        find(&checks, "transparent hugepage defrag").level,
        Level::Warn
    );
    let c = find(&checks, "irq affinity");
    assert_eq!(c.level, Level::Warn);
    assert_eq!(
        c.found,
        "1 interrupts may run on the reactor cores (40 on 0-3)"
    );
    // Warnings cost latency, not correctness: the host still passes.
    assert!(check_host::passed(&checks));
}

#[test]
fn reactor_cores_outside_the_isolated_ones_are_named_with_the_cpu_affinity_to_set() {
    let t = Tree::new("isolated");
    t.tuned()
        .put("proc/irq/42/smp_affinity_list", "3")
        .put("proc/irq/42/nvme0q1/.keep", "");
    let mut i = inputs(&t.0, Some(config(2, "\"127.1.91.0/30\"")));
    i.cpus = vec![0, 1, 2, 3];
    let checks = check_host::run(&i);
    let c = find(&checks, "isolated cores");
    assert_eq!(c.level, Level::Warn);
    assert_eq!(c.wanted, "reactor cores 0-1 among them");
    assert!(c.fix.starts_with("CPUAffinity=2-3 in the unit"), "{c}");
    let c = find(&checks, "irq affinity");
    assert_eq!(
        c.found,
        "1 interrupts may run on the isolated cores (42 on 3)"
    );
}

/// The interrupt fix is a command to run: the first interrupt's affinity set to the cores
/// kept for housekeeping (here the ones not isolated); when every online core runs a reactor, it says none is left for interrupts
/// rather than ask to echo cores there are not.
#[test]
fn the_irq_fix_is_a_whole_command_or_says_no_core_is_left_for_interrupts() {
    let t = Tree::new("irq-fix");
    t.tuned()
        .put("sys/devices/system/cpu/online", "0-3")
        .put("proc/irq/42/smp_affinity_list", "0-3")
        .put("proc/irq/42/eth0-rx-0/.keep", "");
    let mut i = inputs(&t.0, Some(config(2, "\"127.1.91.0/30\"")));
    i.cpus = vec![0, 1, 2, 3];
    let checks = check_host::run(&i);
    let c = find(&checks, "irq affinity");
    assert!(
        c.fix
            .ends_with("e.g. echo 0-1 > /proc/irq/42/smp_affinity_list"),
        "{c}"
    );
    // No isolated cores, and only the two the reactors run on.
    t.put("sys/devices/system/cpu/online", "0-1")
        .put("sys/devices/system/cpu/isolated", "");
    i.cpus = vec![0, 1];
    let checks = check_host::run(&i);
    let c = find(&checks, "irq affinity");
    assert!(
        c.fix
            .starts_with("every online core (0-1) runs a reactor thread"),
        "{c}"
    );
}

/// A config that needs more open files than the kernel's default `fs.nr_open` (65,536
/// sources × 16 regions) fails, and the fix names what the config needs; the same config
/// passes on a host whose ceiling holds it (systemd's boot value).
#[test]
fn an_nr_open_below_a_large_configs_need_is_fixed_with_that_need() {
    let roomy = Tree::new("nr-open-roomy");
    roomy.tuned();
    let t = Tree::new("nr-open");
    t.tuned().put("proc/sys/fs/nr_open", "1048576");
    let mut text = String::from("threads = 2\n");
    for r in 0..16 {
        text.push_str(&format!(
            "[[region]]\nname = \"r{r}\"\nhost = \"127.0.0.{}\"\nport = 9\n",
            r + 1
        ));
    }
    text.push_str("[egress]\naddresses = [\"127.1.0.0/16\"]\n");
    let cfg = Config::parse(&text, "test.toml", Resolve::Deferred).unwrap();
    let needed = cfg.fds_needed();
    assert!(needed > 1 << 20, "{needed}");
    let checks = check_host::run(&inputs(&roomy.0, Some(cfg.clone())));
    assert_eq!(find(&checks, "fs.nr_open").level, Level::Ok);
    let checks = check_host::run(&inputs(&t.0, Some(cfg)));
    let c = find(&checks, "fs.nr_open");
    assert_eq!(c.level, Level::Fail, "{c}");
    assert!(
        c.fix
            .starts_with(&format!("sysctl -w fs.nr_open=\"{needed}\"")),
        "{c}"
    );
}

/// The way to keep listening ports out of a wide source-port range is to reserve them
/// (`net.ipv4.ip_local_reserved_ports`): the warning says so, naming them, and once they are
/// reserved the range passes.
#[test]
fn listening_ports_inside_the_source_port_range_pass_once_reserved_and_the_warning_says_how() {
    let t = Tree::new("reserved-ports");
    t.tuned();
    t.sysctls(&[("net.ipv4.ip_local_port_range", "1024 65535")]);
    let c = find(
        &check_host::run(&inputs(&t.0, Some(config(2, "\"127.1.92.0/30\"")))),
        "net.ipv4.ip_local_port_range",
    )
    .clone();
    assert_eq!(c.level, Level::Warn, "{c}");
    assert!(
        c.fix.contains("net.ipv4.ip_local_reserved_ports = ")
            && c.fix.contains("8080")
            && c.fix.contains("9464"),
        "{c}"
    );
    t.put(
        "proc/sys/net/ipv4/ip_local_reserved_ports",
        "8080-8089,9464\n",
    );
    let c = find(
        &check_host::run(&inputs(&t.0, Some(config(2, "\"127.1.92.0/30\"")))),
        "net.ipv4.ip_local_port_range",
    )
    .clone();
    assert_eq!(c.level, Level::Ok, "{c}");
    // Reserving some of them is not enough: the rest are named.
    t.put("proc/sys/net/ipv4/ip_local_reserved_ports", "9464\n");
    let c = find(
        &check_host::run(&inputs(&t.0, Some(config(2, "\"127.1.92.0/30\"")))),
        "net.ipv4.ip_local_port_range",
    )
    .clone();
    assert_eq!(c.level, Level::Warn, "{c}");
    assert!(c.found.contains("8080") && !c.found.contains("9464"), "{c}");
}

/// A source-port range that takes in the relay's listening ports (intake 8080.., admin 9464
/// by default) passes the range rule but lets the kernel hand one of them to an upstream
/// connection, and a restart then fails to listen: a warning naming them. The shipped range
/// leaves them out.
#[test]
fn a_source_port_range_that_takes_in_the_relays_listening_ports_warns_naming_them() {
    let t = Tree::new("port-range");
    t.tuned();
    let shipped = check_host::run(&inputs(&t.0, Some(config(2, "\"127.1.92.0/30\""))));
    assert_eq!(
        find(&shipped, "net.ipv4.ip_local_port_range").level,
        Level::Ok
    );
    t.sysctls(&[("net.ipv4.ip_local_port_range", "1024 65535")]);
    let checks = check_host::run(&inputs(&t.0, Some(config(2, "\"127.1.92.0/30\""))));
    let c = find(&checks, "net.ipv4.ip_local_port_range");
    assert_eq!(c.level, Level::Warn, "{c}");
    assert!(c.found.contains("8080") && c.found.contains("9464"), "{c}");
    // Without a config there are no ports to judge by: the range rule alone.
    let checks = check_host::run(&inputs(&t.0, None));
    assert_eq!(
        find(&checks, "net.ipv4.ip_local_port_range").level,
        Level::Ok
    );
}

/// `kernel.io_uring_disabled = 1` allows io_uring to the members of `kernel.io_uring_group`:
/// a hardened host where the relay's group is one runs it, so that is a warning naming the
/// group, not a failure; 2 refuses io_uring to everyone and fails.
#[test]
fn io_uring_disabled_for_all_but_a_group_warns_and_for_everyone_fails() {
    for (value, level) in [("0", Level::Ok), ("1", Level::Warn), ("2", Level::Fail)] {
        let t = Tree::new(&format!("io-uring-{value}"));
        t.tuned();
        t.sysctls(&[("kernel.io_uring_disabled", value)]);
        let checks = check_host::run(&inputs(&t.0, None));
        let c = find(&checks, "kernel.io_uring_disabled");
        assert_eq!(c.level, level, "{value}: {c}");
        if value == "1" {
            assert!(c.wanted.contains("kernel.io_uring_group"), "{c}");
        }
    }
}

#[test]
fn limits_below_the_config_and_addresses_not_on_the_host_fail() {
    let t = Tree::new("limits");
    t.tuned();
    // 198.51.100.0/30 is documentation space: no host has it.
    let cfg = config(2, "\"127.1.92.0/30\", \"198.51.100.0/30\"");
    let needed = cfg.fds_needed();
    let mut i = inputs(&t.0, Some(cfg));
    i.nofile = (1024, needed - 1);
    i.memlock = (4_096, 4_096);
    let checks = check_host::run(&i);
    let c = find(&checks, "open files");
    assert_eq!(c.level, Level::Fail);
    assert!(
        c.fix
            .starts_with(&format!("LimitNOFILE={needed} (or more) in the unit")),
        "{c}"
    );
    let c = find(&checks, "locked memory");
    assert_eq!(
        c.level,
        Level::Fail,
        "2 threads pin 16 KiB (two rings each): {c}"
    );
    assert!(
        c.fix.starts_with("LimitMEMLOCK=32768"),
        "twice, for an upgrade: {c}"
    );
    let c = find(&checks, "egress addresses");
    assert_eq!(c.level, Level::Fail);
    assert!(
        c.found
            .starts_with("4 of 8 not local and bindable: 198.51.100.0 ("),
        "{c}"
    );
    assert!(
        c.fix
            .starts_with("bundle-relay egress-ip --config FILE | sh"),
        "{c}"
    );
    // The route egress-ip would print for them: one block, not one address of it.
    assert!(
        c.fix
            .contains("ip -4 route replace local 198.51.100.0/30 dev lo)"),
        "{c}"
    );
}

#[test]
fn io_uring_refused_is_a_fail_with_the_probe_s_cause_and_fix() {
    let t = Tree::new("ring");
    t.tuned();
    let mut i = inputs(&t.0, None);
    i.ring = Err(Problem::IoUringDisabled);
    let checks = check_host::run(&i);
    let c = find(&checks, "io_uring");
    assert_eq!(c.level, Level::Fail);
    assert!(
        c.fix.contains("sysctl -w kernel.io_uring_disabled=0"),
        "{c}"
    );
}

#[test]
fn a_kernel_without_socket_commands_in_io_uring_warns_that_a_reload_reconnects_pairs() {
    let t = Tree::new("sockopt");
    t.tuned();
    let mut i = inputs(&t.0, None);
    let Ok(facts) = &mut i.ring else {
        unreachable!()
    };
    facts.socket_options = Err("Invalid argument (os error 22) (EINVAL)".into());
    let checks = check_host::run(&i);
    let c = find(&checks, "io_uring socket options");
    assert_eq!(c.level, Level::Warn, "{c}");
    assert!(c.found.contains("EINVAL"), "{c}");
    assert!(
        c.fix.contains("Linux 6.7") && c.fix.contains("reconnects every pair"),
        "{c}"
    );
    assert!(check_host::passed(&checks), "a warning, not a fail");
}

/// The running kernel's (major, minor).
fn kernel_version() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release.trim().split(['.', '-']);
    let mut next = || parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (next(), next())
}

#[test]
fn this_hosts_ring_sets_socket_options_from_linux_6_7_on() {
    let facts = bundle_relay::probe::ring_facts().expect("io_uring on the test host");
    if kernel_version() >= (6, 7) {
        assert_eq!(facts.socket_options, Ok(()));
    } else {
        assert!(facts.socket_options.is_err(), "{facts:?}");
    }
}

#[test]
fn egress_addresses_become_the_fewest_aligned_local_routes() {
    let ips = |s: &[&str]| -> Vec<IpAddr> { s.iter().map(|a| a.parse().unwrap()).collect() };
    let mut many: Vec<IpAddr> = (0..4096u32)
        .map(|i| IpAddr::V4((0x0a14_0000 + i).into()))
        .collect();
    many.reverse();
    assert_eq!(
        egress::commands(&many, egress::Method::LocalRoute, "lo"),
        ["ip -4 route replace local 10.20.0.0/20 dev lo"]
    );
    assert_eq!(
        egress::commands(
            &ips(&[
                "198.51.100.10",
                "198.51.100.11",
                "198.51.100.12",
                "2001:db8::1"
            ]),
            egress::Method::LocalRoute,
            "lo"
        ),
        [
            "ip -4 route replace local 198.51.100.10/31 dev lo",
            "ip -4 route replace local 198.51.100.12/32 dev lo",
            "ip -6 route replace local 2001:db8::1/128 dev lo",
        ]
    );
    assert_eq!(
        egress::commands(
            &ips(&["10.0.0.2", "10.0.0.1"]),
            egress::Method::Interface,
            "eth0"
        ),
        [
            "ip -4 addr replace 10.0.0.1/32 dev eth0",
            "ip -4 addr replace 10.0.0.2/32 dev eth0",
        ]
    );
}

#[test]
fn the_command_exits_non_zero_on_a_fail_and_zero_on_warnings() {
    let t = Tree::new("cli");
    t.tuned();
    let dir = &t.0;
    let cfg = dir.join("relay.toml");
    let write = |egress: &str| {
        std::fs::write(
            &cfg,
            format!(
                "threads = 1\n[[region]]\nname = \"r\"\nhost = \"127.0.0.1\"\nport = 9\n\
                 [egress]\naddresses = [{egress}]\n"
            ),
        )
        .unwrap()
    };
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
            .args(["check-host", "--root"])
            .arg(dir)
            .arg("--config")
            .arg(&cfg)
            .output()
            .unwrap()
    };
    // The warn count from the closing "N ok, N warn, N fail" line.
    let warns = |text: &str| -> usize {
        let last = text.lines().last().unwrap_or("");
        let field = last.split(", ").find(|f| f.ends_with(" warn"));
        field
            .and_then(|f| f.trim_end_matches(" warn").parse().ok())
            .unwrap_or_else(|| panic!("no warn count in {last:?}"))
    };
    write("\"127.1.93.0/30\"");
    let out = run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.lines().last().unwrap().ends_with(" 0 fail"), "{text}");
    // A clocksource other than tsc is a warning and nothing worse: still exit 0.
    t.put(
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        "hpet",
    );
    let out = run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("warn clocksource: found hpet; wanted tsc")),
        "{text}"
    );
    assert!(warns(&text) > 0, "{text}");
    assert!(text.lines().last().unwrap().ends_with(" 0 fail"), "{text}");
    assert_eq!(out.status.code(), Some(0), "{text}");
    t.put(
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        "tsc",
    );
    write("\"192.0.2.1\"");
    let out = run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.lines().any(|l| l
            .starts_with("fail egress addresses: found 1 of 1 not local and bindable: 192.0.2.1")),
        "{text}"
    );
    let routes = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["egress-ip", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&routes.stdout).lines().nth(1),
        Some("ip -4 route replace local 192.0.2.1/32 dev lo")
    );
}

/// What the package applies at install and every boot sets nothing a kernel complains of and
/// lowers nothing a host already has: the source-port range's ends differ in parity (the
/// kernel logs an error for every apply otherwise), `fs.file-max` is left to systemd (which
/// raises it to the maximum at boot; any number here would lower it for every service), and
/// a key older kernels lack (`kernel.io_uring_disabled`, Linux 6.6) is applied only where it
/// exists (`-`), so a 6.1 host's install prints no error; check-host reads it all the same.
#[test]
fn the_shipped_sysctl_file_sets_nothing_a_kernel_complains_of_or_that_lowers_a_host_default() {
    let wanted = sysctl::parse(sysctl::SHIPPED).unwrap();
    let value = |key: &str| {
        wanted
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let range: Vec<u32> = value("net.ipv4.ip_local_port_range")
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_ne!(range[0] % 2, range[1] % 2, "{range:?}");
    // systemd raises both to the maximum at boot: a number here would lower them.
    assert_eq!(value("fs.file-max"), None);
    assert_eq!(value("fs.nr_open"), None);
    // Read before an administrator's files (60-*.conf, /etc/sysctl.d/99-sysctl.conf) and
    // the distribution's (50-*.conf), so a value tuned beyond the shipped one there stands.
    let name = std::path::Path::new(sysctl::INSTALLED_PATH)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    assert!(name < "50-", "{name}");
    assert!(
        sysctl::SHIPPED
            .lines()
            .any(|l| l.starts_with("-kernel.io_uring_disabled = 0")),
        "{}",
        sysctl::SHIPPED
    );
    assert_eq!(value("kernel.io_uring_disabled").as_deref(), Some("0"));
}

/// The relay raises its soft locked-memory limit toward twice its need as far as the hard
/// limit allows (`LimitMEMLOCK=64K:infinity`, or `ulimit -l` soft 64 KiB, hard unlimited), so
/// check-host judges what it will have: ok with that said where the hard limit holds twice the
/// need, a warning where it holds one process's need only, a failure below that.
#[test]
fn locked_memory_is_judged_by_what_the_relay_raises_its_soft_limit_to() {
    let t = Tree::new("memlock-hard");
    t.tuned();
    let need = 2 * 2 * bundle_relay::reactor::page_bytes();
    let rows: [(u64, u64, Level); 4] = [
        (0, u64::MAX, Level::Ok),
        (0, 2 * need, Level::Ok),
        (0, need, Level::Warn),
        (0, need - 1, Level::Fail),
    ];
    for (soft, hard, level) in rows {
        let mut i = inputs(&t.0, Some(config(2, "\"127.1.92.0/30\"")));
        i.rings_charged = false;
        i.memlock = (soft, hard);
        let checks = check_host::run(&i);
        let c = find(&checks, "locked memory");
        assert_eq!(c.level, level, "soft {soft}, hard {hard}: {c}");
        if hard >= need {
            assert!(
                c.found.contains("the relay raises the soft limit"),
                "hard {hard}: {c}"
            );
        }
    }
}

/// Locked memory, row by row: what two threads pin (two provided-buffer rings of a page
/// each, and their io_uring where the kernel charges rings to the limit) fails below one
/// process's need, warns below an upgrade's two processes, and is ok at twice the need.
#[test]
fn locked_memory_fails_below_a_processs_need_warns_below_an_upgrades_and_counts_rings_where_charged()
 {
    let t = Tree::new("memlock");
    t.tuned();
    let bufs = 2 * 2 * bundle_relay::reactor::page_bytes();
    let rings = 2 * bundle_relay::reactor::ring_memory_bytes();
    let rows: [(bool, u64, Level); 6] = [
        (false, bufs - 1, Level::Fail),
        (false, bufs, Level::Warn),
        (false, 2 * bufs, Level::Ok),
        (true, bufs + rings - 1, Level::Fail),
        (true, bufs + rings, Level::Warn),
        (true, 2 * (bufs + rings), Level::Ok),
    ];
    for (charged, soft, level) in rows {
        let mut i = inputs(&t.0, Some(config(2, "\"127.1.92.0/30\"")));
        i.rings_charged = charged;
        // The hard limit where the soft one is: the relay cannot raise it.
        i.memlock = (soft, soft);
        let checks = check_host::run(&i);
        let c = find(&checks, "locked memory");
        assert_eq!(c.level, level, "charged {charged}, soft {soft}: {c}");
        if level != Level::Ok {
            let need = if charged { bufs + rings } else { bufs };
            assert!(
                c.fix.starts_with(&format!("LimitMEMLOCK={} ", 2 * need)),
                "charged {charged}: {c}"
            );
        }
    }
}
