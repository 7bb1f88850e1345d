//! `run --takeover PID`: this process replaces the relay running as PID without a refused
//! connection. It binds the same listeners (SO_REUSEPORT) but listens only once its pool is up;
//! then it tells the service manager it is the main process (MAINPID=, READY=1), sends PID
//! SIGQUIT, on which that one closes its listeners and drains, and takes the admin port the
//! old one frees.
//!
//! What it is NOT: the old process's side (`upgrade` starts this one on SIGUSR2; SIGQUIT's
//! drain is the supervision loop's). Pacing is not handed over here either: both processes
//! book every send in one shared ledger from the start (`pacing`), so whichever sends next on
//! a pair honours the other's last send.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::admin::AdminHandle;
use crate::config::Token;
use crate::runtime::Relay;

use super::start;
use super::systemd::Manager;

/// How long a process taking over waits for its pool before giving up (the old one serves on).
const TAKEOVER_READY_WAIT: Duration = Duration::from_secs(60);

/// How long a process that took over retries the admin port the old one is freeing.
const ADMIN_TAKEOVER_WAIT: Duration = Duration::from_secs(5);

/// The relay to take over, held from this process's start: a pidfd (Linux 5.3+) says when it
/// ended and carries its SIGQUIT, so neither can reach a process that took its number since.
pub struct Pinned {
    pub pid: i32,
    fd: Option<OwnedFd>,
}

impl Pinned {
    /// Pins `pid`, refusing a process that is not there or is no relay (it would be sent
    /// SIGQUIT, whose default is to dump core): one whose command is not this binary's and
    /// that holds no pacing ledger.
    pub fn open(pid: i32) -> Result<Pinned, String> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor we own.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            return Err(format!("--takeover {pid}: no such process"));
        }
        let command = |p: &str| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .map(|c| c.trim_end().to_string())
                .unwrap_or_default()
        };
        let pinned = Pinned {
            pid,
            // SAFETY: a descriptor pidfd_open just returned, owned by nothing else.
            fd: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        };
        // A relay holds a pacing ledger; one that could not make one is still this binary
        // running `run` (not `hist` or `check-host`, which SIGQUIT would also dump).
        let theirs = command(&pid.to_string());
        let runs = std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(&b"run"[..]));
        // This binary running `run` first: only another process's files are looked through.
        let relay = (theirs == command("self") && runs) || super::pacing::holds_ledger(pid);
        // Read by number: true of the pinned process only if it has not ended meanwhile.
        if pinned.ended() {
            return Err(format!("--takeover {pid}: no such process"));
        }
        if !relay {
            return Err(format!(
                "--takeover {pid}: that process is {theirs:?}, not a bundle-relay (it holds no \
                 pacing ledger either); it is not sent SIGQUIT"
            ));
        }
        Ok(pinned)
    }

    /// Refuses taking over, from outside any service manager, a relay one supervises (its
    /// environment names `NOTIFY_SOCKET`, this process's does not): this process would serve
    /// outside the unit (no watchdog, no restart, not stopped with it) while the unit, its
    /// main process gone, ends. SIGUSR2 through the manager starts the successor inside it. A
    /// process whose environment cannot be read (another user's) is not refused for it.
    pub fn check_supervisor(&self) -> Result<(), String> {
        let key = crate::notify::NOTIFY_SOCKET_ENV;
        if std::env::var_os(key).is_some() {
            return Ok(());
        }
        let Ok(environ) = std::fs::read(format!("/proc/{}/environ", self.pid)) else {
            return Ok(());
        };
        let prefix = format!("{key}=");
        if !environ
            .split(|b| *b == 0)
            .any(|v| v.starts_with(prefix.as_bytes()))
        {
            return Ok(());
        }
        // The unit, from the process's cgroup (`0::/system.slice/NAME.service`).
        let unit = std::fs::read_to_string(format!("/proc/{}/cgroup", self.pid))
            .ok()
            .and_then(|c| {
                c.lines()
                    .filter_map(|l| l.rsplit('/').next())
                    .find(|n| n.ends_with(".service"))
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "UNIT".to_string());
        Err(format!(
            "--takeover {}: that relay runs under a service manager ({key}) and this process \
             does not: it would serve outside the unit, which ends with its main process; \
             upgrade it in place with `systemctl kill --signal=SIGUSR2 --kill-whom=main {unit}`",
            self.pid
        ))
    }

    /// Refuses a relay that listens on none of `ports` (this config's intake ports, those not
    /// 0): it runs another config (another slice's relay, named by mistake), and taking it
    /// over would leave its ports and its part of the pool unserved. A process whose
    /// listeners cannot be read (another user's) or that listens on nothing is not refused
    /// for it.
    pub fn check_listens(&self, ports: &[u16]) -> Result<(), String> {
        let ports: Vec<u16> = ports.iter().copied().filter(|&p| p != 0).collect();
        let theirs = listening_ports(self.pid);
        if ports.is_empty() || theirs.is_empty() || theirs.iter().any(|p| ports.contains(p)) {
            return Ok(());
        }
        let list = |v: &[u16]| v.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
        Err(format!(
            "--takeover {}: that relay listens on port {}, this config on {}: it runs another \
             config (another relay of the host?), and taking it over would leave its ports \
             unserved; name the relay that serves this config's ports",
            self.pid,
            list(&theirs),
            list(&ports)
        ))
    }

    /// Refuses an address of this config the old relay does not listen on while another
    /// process does: a takeover joins its ports with `SO_REUSEPORT`, which on a port
    /// of another process (another relay's, named by an edited config) would split that
    /// process's connections between the two. Such a port is held to a plain start's rule. A
    /// relay whose listeners cannot be read is taken to listen on them all.
    pub fn check_new_ports(&self, addrs: &[SocketAddr]) -> Result<(), String> {
        let theirs = listening_addrs(self.pid);
        if theirs.is_empty() {
            return Ok(());
        }
        // Theirs: the same address and port, or the port on every address of the family.
        let served = |a: &SocketAddr| {
            theirs.iter().any(|t| {
                t.port() == a.port()
                    && (t.ip() == a.ip() || (t.ip().is_unspecified() && t.is_ipv4() == a.is_ipv4()))
            })
        };
        for a in addrs.iter().filter(|a| !served(a)) {
            crate::reactor::socket::no_other_listener(*a).map_err(|e| {
                format!(
                    "--takeover {}: listen {a}, a port it does not serve: {e}",
                    self.pid
                )
            })?;
        }
        Ok(())
    }

    /// Whether the process ended (without a pidfd: whether its number is free).
    pub fn ended(&self) -> bool {
        match &self.fd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one pollfd we own, no wait; a pidfd is readable once its process
                // ended.
                unsafe { libc::poll(&mut p, 1, 0) > 0 }
            }
            // SAFETY: signal 0 only asks whether the process exists.
            None => unsafe {
                libc::kill(self.pid, 0) != 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            },
        }
    }

    /// Sends it SIGQUIT (through the pidfd when there is one).
    fn quit(&self) -> std::io::Result<()> {
        let r = match &self.fd {
            // SAFETY: a signal through a pidfd we hold.
            Some(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGQUIT,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                ) as i32
            },
            // SAFETY: a signal to the process we take over from.
            None => unsafe { libc::kill(self.pid, libc::SIGQUIT) },
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// The TCP addresses process `pid` listens on (its descriptors' sockets found among the
/// listening ones of its /proc/PID/net/tcp and tcp6), sorted; empty when they cannot be read.
fn listening_addrs(pid: i32) -> Vec<SocketAddr> {
    let mut listening = std::collections::HashMap::new();
    // Its own network namespace's tables: the sockets its descriptors name are there.
    for table in [
        format!("/proc/{pid}/net/tcp"),
        format!("/proc/{pid}/net/tcp6"),
    ] {
        let Ok(text) = std::fs::read_to_string(&table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if f.len() > 9
                && f[3] == "0A"
                && let (Some(addr), Ok(inode)) = (proc_net_addr(f[1]), f[9].parse::<u64>())
            {
                listening.insert(inode, addr);
            }
        }
    }
    let mut addrs: Vec<SocketAddr> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|t| {
            let t = t.to_string_lossy();
            let inode = t
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse::<u64>()
                .ok()?;
            listening.get(&inode).copied()
        })
        .collect();
    addrs.sort_unstable();
    addrs.dedup();
    addrs
}

/// The ports of [`listening_addrs`].
fn listening_ports(pid: i32) -> Vec<u16> {
    let mut ports: Vec<u16> = listening_addrs(pid).iter().map(SocketAddr::port).collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// A /proc/net/tcp{,6} address, `0100007F:1F90`: the address as the kernel holds it (each
/// 32-bit word in host order, here little-endian), then the port.
fn proc_net_addr(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_le_bytes())
    };
    let ip = match ip.len() {
        8 => std::net::IpAddr::from(word(0)?),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            std::net::IpAddr::from(b)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// A takeover in progress from the relay running as `old`.
pub struct Takeover {
    pub old: i32,
    deadline: Instant,
    pinned: Pinned,
}

impl Takeover {
    /// Starts the wait for the pool now.
    pub fn new(pinned: Pinned) -> Takeover {
        Takeover {
            old: pinned.pid,
            deadline: Instant::now() + TAKEOVER_READY_WAIT,
            pinned,
        }
    }

    /// Why the takeover is given up because the old process ended before this one was ready
    /// (killed, or stopped by its operator, who then wants no relay serving in its place).
    pub fn old_ended(&self) -> Option<String> {
        self.pinned.ended().then(|| {
            format!(
                "takeover: pid {} ended before this process was ready; not serving in its place",
                self.old
            )
        })
    }

    /// Why the takeover is given up, once the pool took too long: `up` of `pairs_total` pairs
    /// are up, `ready_at` wanted.
    pub fn timed_out(&self, up: u64, pairs_total: u64, ready_at: u64) -> Option<String> {
        (Instant::now() >= self.deadline).then(|| {
            format!(
                "takeover: {up} of {pairs_total} pairs up after {} s, {ready_at} wanted; \
                 pid {} keeps serving",
                TAKEOVER_READY_WAIT.as_secs(),
                self.old
            )
        })
    }

    /// The pool is up (`line` says how far): listen first, so someone always listens; then
    /// become the main process and let the old one close its listeners and drain. Returns the
    /// admin listener (`admin`: its address and the token in force), when the config has one
    /// and its port came free; an error when this process cannot listen, and the old one keeps
    /// serving.
    pub fn complete(
        &self,
        line: &str,
        relay: &Relay,
        admin: Option<(SocketAddr, Option<Token>)>,
        manager: &mut Manager,
    ) -> Result<Option<AdminHandle>, String> {
        let old = self.old;
        if let Err(e) = relay.listen() {
            eprintln!("bundle-relay: takeover: {e}; pid {old} keeps serving");
            return Err(e.to_string());
        }
        println!("{line}; taking over from pid {old}");
        manager.set_muted(false);
        manager.main_pid_ready(line);
        match self.pinned.quit() {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                println!("takeover: pid {old} has ended already");
            }
            Err(e) => eprintln!(
                "bundle-relay: takeover: pid {old} could not be told to drain ({e}): it serves \
                 on beside this process until stopped"
            ),
        }
        let Some((addr, token)) = admin else {
            return Ok(None);
        };
        match start::admin(addr, token, relay, ADMIN_TAKEOVER_WAIT) {
            Ok(a) => Ok(Some(a)),
            Err(e) => {
                eprintln!("bundle-relay: {e}; serving without it");
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_addresses_read_as_the_kernel_writes_them() {
        assert_eq!(
            proc_net_addr("0100007F:1F90"),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            proc_net_addr("00000000:0035"),
            Some("0.0.0.0:53".parse().unwrap())
        );
        assert_eq!(
            proc_net_addr("00000000000000000000000001000000:01BB"),
            Some("[::1]:443".parse().unwrap())
        );
        assert_eq!(
            proc_net_addr("B80D0120000000000000000001000000:0050"),
            Some("[2001:db8::1]:80".parse().unwrap())
        );
        assert_eq!(proc_net_addr("0100007F"), None);
        assert_eq!(proc_net_addr("01007F:1F90"), None);
    }
}
