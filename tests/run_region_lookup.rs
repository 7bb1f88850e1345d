//! A region given by host name, looked up again while the name server does not answer: the
//! relay in a mount namespace of its own (`unshare -m`) whose /etc/hosts and /etc/resolv.conf
//! are files of this test, the name server a UDP socket of this test that reads queries and
//! never answers. A stop must not wait for that lookup: systemd's stop timeout would kill the
//! relay before it drained and said its last counts.

use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

/// The silent name server's address (root may bind port 53 on loopback).
const NAME_SERVER: &str = "127.0.0.77:53";

#[test]
fn a_stop_does_not_wait_for_a_region_lookup_the_name_server_never_answers() {
    let dir = std::env::temp_dir().join(format!("br-lookup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // What the test needs of the host: root (port 53, a mount namespace) and unshare.
    let Ok(dns) = UdpSocket::bind(NAME_SERVER) else {
        eprintln!("skipped: cannot bind {NAME_SERVER} (not root, or taken)");
        return;
    };
    let namespace = Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !namespace {
        eprintln!("skipped: unshare -m is not available here");
        return;
    }
    dns.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let hosts = dir.join("hosts");
    // Nothing listens at the engine's address: every connect fails and asks for a lookup.
    std::fs::write(&hosts, "127.0.0.1 localhost\n127.0.0.78 engine.test\n").unwrap();
    let resolv = dir.join("resolv.conf");
    std::fs::write(
        &resolv,
        format!(
            "nameserver {}\noptions timeout:5 attempts:2\n",
            NAME_SERVER.trim_end_matches(":53")
        ),
    )
    .unwrap();
    // Names from these two files only, whatever the host's own name service is.
    let nsswitch = dir.join("nsswitch.conf");
    std::fs::write(&nsswitch, "hosts: files dns\n").unwrap();
    let config = dir.join("relay.toml");
    std::fs::write(
        &config,
        "threads = 1\npin_threads = false\narena_slots = 64\n\
         [intake]\nrotating = \"127.0.0.1:0\"\nconnections_max = 16\n\
         [[region]]\nname = \"local\"\nhost = \"engine.test\"\nport = 1\ntls = false\n\
         [egress]\naddresses = [\"127.1.94.0/31\"]\n[admin]\nlisten = \"off\"\n",
    )
    .unwrap();
    let script = format!(
        "mount --bind {} /etc/hosts && mount --bind {} /etc/resolv.conf && \
         mount --bind {} /etc/nsswitch.conf && exec {} run --config {}",
        hosts.display(),
        resolv.display(),
        nsswitch.display(),
        env!("CARGO_BIN_EXE_bundle-relay"),
        config.display()
    );
    let mut child = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare");
    let (tx, rx) = channel();
    for out in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    let mut seen = Vec::new();
    let started = Instant::now();
    while !seen
        .iter()
        .any(|l: &String| l.contains("intake (rotating)"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "not serving: {seen:?}"
        );
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.push(l);
        }
    }
    // The name leaves /etc/hosts (rewritten in place: the bind mount follows the inode), so the
    // next lookup asks the name server, which holds it.
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&hosts)
        .unwrap()
        .write_all(b"127.0.0.1 localhost\n")
        .unwrap();
    let mut query = [0u8; 512];
    dns.recv_from(&mut query)
        .expect("the relay asked the name server for the region's host");
    let asked = Instant::now();
    // SAFETY: signalling our own child (sh exec'd into the relay).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if asked.elapsed() > Duration::from_secs(4) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "still running 4 s after SIGTERM, waiting on a lookup: {:?}",
                rx.try_iter().collect::<Vec<_>>()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{status:?}");
}
