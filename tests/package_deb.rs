//! The Debian package, built by `packaging/build-deb` (Debian's dpkg-deb) from the binary under
//! test: lintian finds nothing but the overrides it ships with reasons; `dpkg --root` installs
//! it into a scratch root (maintainer scripts run chrootless, as `DPKG_ROOT` says), which then
//! holds the binary, both units, the sysctl file, the default config readable by the relay's
//! group only, and the bundle-relay system user; the installed units verify there.
//!
//! Needs dpkg-deb, dpkg and systemd-sysusers (Debian's dpkg and systemd packages), and lintian;
//! `.ci/run` installs them. Where one is absent the test says so and passes, except under CI
//! (`CI` set), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true but {tool} is missing: .ci/run installs it"
        );
        eprintln!("skipped: {tool} is not installed");
    }
    found
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

fn build(dir: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = run(Command::new(repo.join("packaging/build-deb"))
        .arg(env!("CARGO_BIN_EXE_bundle-relay"))
        .arg(dir)
        .current_dir(repo));
    PathBuf::from(out.lines().last().unwrap().trim())
}

#[test]
fn the_package_installs_the_relay_its_units_sysctl_config_and_user_into_a_scratch_root() {
    if !["dpkg-deb", "dpkg", "systemd-sysusers", "systemd-analyze"]
        .iter()
        .all(|t| have(t))
    {
        return;
    }
    let dir = std::env::temp_dir().join(format!("br-deb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let deb = build(&dir);
    let listing = run(Command::new("dpkg-deb").arg("-c").arg(&deb));
    for path in [
        "./usr/bin/bundle-relay",
        "./lib/systemd/system/bundle-relay.service",
        "./lib/systemd/system/bundle-relay@.service",
        "./usr/lib/sysctl.d/30-bundle-relay.conf",
        "./usr/lib/sysusers.d/bundle-relay.conf",
        "./etc/bundle-relay/bundle-relay.toml",
        "./usr/share/doc/bundle-relay/copyright",
    ] {
        assert!(
            listing.contains(path),
            "{path} not in the package:\n{listing}"
        );
    }

    let root = dir.join("root");
    for d in ["var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for f in [
        "var/lib/dpkg/status",
        "etc/passwd",
        "etc/group",
        "etc/shadow",
        "etc/gshadow",
    ] {
        std::fs::write(root.join(f), "").unwrap();
    }
    // The scratch root has no libc6 or systemd packages: their dependencies are forced.
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["--force-script-chrootless", "--force-depends", "-i"])
        .arg(&deb));
    let status = run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["-s", "bundle-relay"]));
    assert!(status.contains("Status: install ok installed"), "{status}");
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    let user = passwd
        .lines()
        .find(|l| l.starts_with("bundle-relay:"))
        .unwrap_or_else(|| panic!("no bundle-relay user: {passwd}"));
    assert!(user.ends_with(":/nonexistent:/usr/sbin/nologin"), "{user}");
    let uid: u32 = user.split(':').nth(2).unwrap().parse().unwrap();
    assert!(uid < 1000, "a system user: {user}");

    use std::os::unix::fs::MetadataExt;
    let config = std::fs::metadata(root.join("etc/bundle-relay/bundle-relay.toml")).unwrap();
    assert_eq!(config.mode() & 0o777, 0o640);
    let group = std::fs::read_to_string(root.join("etc/group")).unwrap();
    let gid: u32 = group
        .lines()
        .find(|l| l.starts_with("bundle-relay:"))
        .and_then(|l| l.split(':').nth(2)?.parse().ok())
        .unwrap();
    assert_eq!(
        config.gid(),
        gid,
        "the config is readable by the relay's group"
    );
    let installed = root.join("usr/bin/bundle-relay");
    let version = run(Command::new(&installed).arg("--version"));
    assert!(version.starts_with("bundle-relay "), "{version}");
    assert_eq!(
        std::fs::read_to_string(root.join("usr/lib/sysctl.d/30-bundle-relay.conf")).unwrap(),
        bundle_relay::check_host::sysctl::SHIPPED
    );

    // The installed units verify in that root (with the host's targets beside them).
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy("/bin/kill", root.join("bin/kill")).unwrap();
    for e in std::fs::read_dir("/lib/systemd/system").unwrap() {
        let e = e.unwrap();
        let to = root.join("lib/systemd/system").join(e.file_name());
        if e.file_type().unwrap().is_file() && !to.exists() {
            std::fs::copy(e.path(), to).unwrap();
        }
    }
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .args(["bundle-relay.service", "bundle-relay@a.service"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verify.stderr).into_owned();
    assert!(verify.status.success() && said.trim().is_empty(), "{said}");

    if have("lintian") {
        let out = Command::new("lintian")
            .args(["--tag-display-limit", "0"])
            .arg(&deb)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.trim().is_empty(),
            "lintian:\n{said}"
        );
    }

    // Enabled by the administrator (the package enables nothing), then purged: no link to a
    // unit file that is gone is left behind; one to another package's unit stays.
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    for (link, to) in [
        (
            "bundle-relay.service",
            "/lib/systemd/system/bundle-relay.service",
        ),
        (
            "bundle-relay@a.service",
            "/lib/systemd/system/bundle-relay@.service",
        ),
        ("other.service", "/lib/systemd/system/other.service"),
    ] {
        std::os::unix::fs::symlink(to, wants.join(link)).unwrap();
    }
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["--force-script-chrootless", "--purge", "bundle-relay"]));
    let left: Vec<String> = std::fs::read_dir(&wants)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["other.service"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The package asks for the C library the binary needs: at least the highest `GLIBC_2.N`
/// symbol version it links against (read from the binary itself), and the GCC runtime it
/// loads (`libgcc_s.so.1`, for unwinding). A lower bound would let it install where the
/// binary cannot start.
#[test]
fn the_package_depends_on_the_c_library_the_binary_links_against() {
    let binary = std::fs::read(env!("CARGO_BIN_EXE_bundle-relay")).unwrap();
    let needle = b"GLIBC_2.";
    let needed = binary
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .filter_map(|(i, _)| {
            let digits: String = binary[i + needle.len()..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .map(|&b| b as char)
                .collect();
            digits.parse::<u32>().ok()
        })
        .max()
        .expect("a binary linked against glibc");
    let control = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/debian/control"
    ))
    .unwrap();
    let depends = control
        .lines()
        .find_map(|l| l.strip_prefix("Depends: "))
        .unwrap();
    let asked: u32 = depends
        .split("libc6 (>= 2.")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no libc6 (>= 2.N) in {depends:?}"));
    assert!(
        asked >= needed,
        "libc6 (>= 2.{asked}) but the binary needs GLIBC_2.{needed}"
    );
    assert!(depends.contains("libgcc-s1"), "{depends}");
}
