//! Startup checks: can this host run the relay as configured? Each failure names its cause and
//! its fix, and every fact found is printed at startup ([`ProbeReport`]'s Display, one line each).
//!
//! Checked, in order: the `kernel.io_uring_disabled` sysctl; creating an io_uring with
//! `SINGLE_ISSUER | DEFER_TASKRUN` (falling back to a plain ring, reported); registering a
//! provided-buffer ring; `RLIMIT_MEMLOCK` against what the threads pin ([`memlock_needed`]:
//! whether this kernel charges ring memory to it is itself probed, [`rings_charged`]); and
//! `RLIMIT_NOFILE` against [`Config::fds_needed`]; each soft limit raised to the hard one when
//! that is enough. Every problem is collected, so one run lists all.
//!
//! [`ring_facts`] and [`limits`] report the same facts without refusing, for `check-host`.
//!
//! Cost: a few syscalls and at most three 8-entry rings, once at startup.

use std::fmt;
use std::io;
use std::path::Path;

use io_uring::IoUring;

use crate::config::{Config, FdBudget};

/// Where the kernel says whether io_uring may be used (Linux 6.6+; absent before).
pub const IO_URING_DISABLED_PATH: &str = "/proc/sys/kernel/io_uring_disabled";
/// Entries of the probe's rings: enough to exercise setup, small enough to cost nothing.
pub const PROBE_RING_ENTRIES: u32 = 8;
/// Entries of the probe's provided-buffer ring (a power of two, as the kernel requires).
pub const PROBE_BUF_RING_ENTRIES: u16 = 8;
/// Buffer group id used by the probe; the probe's ring is its own, so any id works.
const PROBE_BGID: u16 = 0;
/// Size of one provided-buffer ring entry (`struct io_uring_buf`).
const BUF_RING_ENTRY_BYTES: usize = 16;

/// How the probe's io_uring came up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingSetup {
    /// `IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN` (Linux 6.1+): completions run
    /// only when the owning thread enters the kernel, with no cross-thread wakeups.
    SingleIssuerDeferTaskrun,
    /// A plain ring; `why` is what refused the flags (usually an older kernel).
    Plain { why: String },
}

/// Everything the probe found, printed at startup one fact per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// `uname -r`.
    pub kernel: String,
    /// `kernel.io_uring_disabled` (0, 1 or 2); `None` when the kernel has no such sysctl.
    pub io_uring_disabled: Option<u8>,
    pub ring: RingSetup,
    /// `IORING_FEAT_*` flags the kernel reported, lowercase without the prefix.
    pub ring_features: Vec<&'static str>,
    /// A provided-buffer ring registered and unregistered.
    pub buf_ring: bool,
    /// `RLIMIT_NOFILE` soft limit before and after the probe, and the hard limit.
    pub nofile_soft_before: u64,
    pub nofile_soft: u64,
    pub nofile_hard: u64,
    /// What the config needs.
    pub fds: FdBudget,
    /// `RLIMIT_MEMLOCK` soft (raised to the hard one when the threads needed it) and hard, in
    /// bytes (`u64::MAX` = unlimited).
    pub memlock_soft: u64,
    pub memlock_hard: u64,
    /// What the config's threads pin ([`memlock_needed`]), and whether ring memory counts.
    pub threads: usize,
    pub memlock_needed: u64,
    pub rings_charged: bool,
}

/// One thing that stops the relay from running here, with its cause and fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// `kernel.io_uring_disabled` is 2: io_uring is off for every process.
    IoUringDisabled,
    /// Creating a ring failed with EPERM: a seccomp filter, or `kernel.io_uring_disabled = 1`
    /// for a process outside `kernel.io_uring_group`.
    RingBlocked { io_uring_disabled: Option<u8> },
    /// ENOMEM creating a ring: ring memory is charged to `RLIMIT_MEMLOCK` on this kernel.
    RingMemlock { soft: u64, hard: u64 },
    /// The soft `RLIMIT_MEMLOCK` is below what the threads pin ([`memlock_needed`]), and the
    /// hard one too.
    LockedMemory {
        threads: usize,
        rings_charged: bool,
        needed: u64,
        soft: u64,
        hard: u64,
    },
    /// ENOSYS: the kernel was built without io_uring.
    RingUnsupported,
    /// Any other failure creating a ring.
    RingFailed { error: String },
    /// Registering a provided-buffer ring failed (needs Linux 5.19+).
    BufRing { error: String },
    /// The hard `RLIMIT_NOFILE` is below what the config needs.
    OpenFiles {
        needed: u64,
        soft: u64,
        hard: u64,
        budget: FdBudget,
    },
}

/// The probe found at least one problem; Display lists each on its own line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeError {
    pub problems: Vec<Problem>,
}

impl ProbeError {
    /// Every problem is one a later start may not meet: memory for a ring, which the kernel
    /// counts for all of the user's processes (one that just ended frees its rings a moment
    /// after) or lacks for now. What a limit, a sysctl or the kernel refuses is not.
    pub fn for_now(&self) -> bool {
        self.problems
            .iter()
            .all(|p| matches!(p, Problem::RingMemlock { .. }))
    }
}

/// Runs every check against `cfg`. On success the soft `RLIMIT_NOFILE` is at least
/// `cfg.fds_needed()` (raised to the hard limit if it was lower).
pub fn check(cfg: &Config) -> Result<ProbeReport, ProbeError> {
    let mut problems = Vec::new();
    let io_uring_disabled = read_io_uring_disabled(Path::new(IO_URING_DISABLED_PATH));
    if io_uring_disabled == Some(2) {
        problems.push(Problem::IoUringDisabled);
    }
    let (memlock_soft, memlock_hard) = rlimit(libc::RLIMIT_MEMLOCK).unwrap_or((0, 0));

    // Before any ring of this process: finding whether rings are charged lowers the soft
    // limit for a moment, and the probe's ring below then meets the limit the start will.
    let rings_charged = rings_charged();
    let memlock_needed = memlock_needed(cfg.threads, rings_charged);
    // The kernel holds every process of this user to this process's soft limit: during an
    // upgrade two relays' rings count, so the soft limit is raised toward twice the need.
    let mut memlock_soft = memlock_soft;
    let upgrade_need = memlock_needed.saturating_mul(2);
    if memlock_soft < upgrade_need && memlock_hard > memlock_soft {
        let raised = memlock_hard.min(upgrade_need);
        if set_soft_rlimit(libc::RLIMIT_MEMLOCK, raised).is_ok() {
            memlock_soft = raised;
        }
    }
    if memlock_soft < memlock_needed {
        problems.push(Problem::LockedMemory {
            threads: cfg.threads,
            rings_charged,
            needed: memlock_needed,
            soft: memlock_soft,
            hard: memlock_hard,
        });
    }

    let mut ring = RingSetup::Plain {
        why: "not created".into(),
    };
    let mut ring_features = Vec::new();
    let mut buf_ring = false;
    match create_ring() {
        Ok((r, setup)) => {
            ring = setup;
            ring_features = features(&r);
            match register_buf_ring(&r) {
                Ok(()) => buf_ring = true,
                Err(e) => problems.push(Problem::BufRing {
                    error: describe(&e),
                }),
            }
        }
        Err(e) => {
            if io_uring_disabled != Some(2) {
                problems.push(classify_ring_error(
                    &e,
                    io_uring_disabled,
                    (memlock_soft, memlock_hard),
                ));
            }
        }
    }

    let fds = cfg.fd_budget();
    let needed = fds.total();
    let (nofile_soft_before, nofile_hard) = rlimit(libc::RLIMIT_NOFILE).unwrap_or((0, 0));
    let mut nofile_soft = nofile_soft_before;
    if needed > nofile_hard {
        problems.push(Problem::OpenFiles {
            needed,
            soft: nofile_soft,
            hard: nofile_hard,
            budget: fds,
        });
    } else if needed > nofile_soft {
        match set_soft_rlimit(libc::RLIMIT_NOFILE, nofile_hard) {
            Ok(()) => nofile_soft = nofile_hard,
            Err(_) => problems.push(Problem::OpenFiles {
                needed,
                soft: nofile_soft,
                hard: nofile_hard,
                budget: fds,
            }),
        }
    }

    if !problems.is_empty() {
        return Err(ProbeError { problems });
    }
    Ok(ProbeReport {
        kernel: kernel_release(),
        io_uring_disabled,
        ring,
        ring_features,
        buf_ring,
        nofile_soft_before,
        nofile_soft,
        nofile_hard,
        fds,
        memlock_soft,
        memlock_hard,
        threads: cfg.threads,
        memlock_needed,
        rings_charged,
    })
}

/// Each address that cannot be bound now, or binds only because the host binds any address
/// (`ip_nonlocal_bind`) while no local route holds it, with why (a bind to port 0 and nothing
/// more, so nothing is left behind): whether the relay could send from it.
pub fn unbindable(addrs: &[std::net::IpAddr]) -> Vec<(std::net::IpAddr, io::Error)> {
    let sockets: Vec<std::net::SocketAddr> = addrs
        .iter()
        .map(|&a| std::net::SocketAddr::new(a, 0))
        .collect();
    let mut bad: Vec<(std::net::IpAddr, io::Error)> = unbindable_sockets(&sockets)
        .into_iter()
        .map(|(s, e)| (s.ip(), e))
        .collect();
    if let Some(routes) = local_routes() {
        let failed: std::collections::HashSet<std::net::IpAddr> =
            bad.iter().map(|(a, _)| *a).collect();
        for &a in addrs {
            if !failed.contains(&a) && !routes.holds(a) {
                let sysctl = if a.is_ipv4() { "ipv4" } else { "ipv6" };
                bad.push((
                    a,
                    io::Error::new(
                        io::ErrorKind::AddrNotAvailable,
                        format!(
                            "no local route or address holds it; it binds only through \
                             net.{sysctl}.ip_nonlocal_bind"
                        ),
                    ),
                ));
            }
        }
        // In the order given, as the binds reported them.
        let order: std::collections::HashMap<std::net::IpAddr, usize> =
            addrs.iter().enumerate().map(|(i, &a)| (a, i)).collect();
        bad.sort_by_key(|(a, _)| order.get(a).copied().unwrap_or(usize::MAX));
    }
    bad
}

/// This host's local routes (`egress::local`), or `None` where `/proc/net/fib_trie` cannot be
/// read (a kernel or sandbox without it): the bind alone judges then.
fn local_routes() -> Option<crate::egress::local::LocalRoutes> {
    let v4 = std::fs::read_to_string("/proc/net/fib_trie").ok()?;
    // No IPv6 on the host: no IPv6 address is local.
    let v6 = std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default();
    Some(crate::egress::local::LocalRoutes::parse(&v4, &v6))
}

/// As [`unbindable`] for socket addresses, whose IPv6 scope (a link-local listener's
/// interface) the bind keeps; their ports are not bound (port 0 is).
pub fn unbindable_sockets(
    addrs: &[std::net::SocketAddr],
) -> Vec<(std::net::SocketAddr, io::Error)> {
    addrs
        .iter()
        .filter_map(|&a| {
            let mut any_port = a;
            any_port.set_port(0);
            std::net::TcpListener::bind(any_port).err().map(|e| (a, e))
        })
        .collect()
}

/// What the kernel's io_uring offers this process, found by creating a ring (and registering a
/// provided-buffer ring on it) as the relay will: for `check-host`, which reports rather than
/// refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingFacts {
    pub kernel: String,
    pub ring: RingSetup,
    pub features: Vec<&'static str>,
    /// `Err` with why when a provided-buffer ring does not register.
    pub buf_ring: Result<(), String>,
    /// `Err` with why when a socket option cannot be set through the ring (a socket command,
    /// Linux 6.7+), which a reload uses to change open connections' TCP options in place.
    pub socket_options: Result<(), String>,
}

/// Creates a probe ring and reports what it has, or the problem (with its fix) that stops it.
pub fn ring_facts() -> Result<RingFacts, Problem> {
    let io_uring_disabled = read_io_uring_disabled(Path::new(IO_URING_DISABLED_PATH));
    if io_uring_disabled == Some(2) {
        return Err(Problem::IoUringDisabled);
    }
    let memlock = rlimit(libc::RLIMIT_MEMLOCK).unwrap_or((0, 0));
    let (mut r, ring) =
        create_ring().map_err(|e| classify_ring_error(&e, io_uring_disabled, memlock))?;
    Ok(RingFacts {
        kernel: kernel_release(),
        ring,
        features: features(&r),
        buf_ring: register_buf_ring(&r).map_err(|e| describe(&e)),
        socket_options: set_socket_option(&mut r).map_err(|e| describe(&e)),
    })
}

/// `RLIMIT_NOFILE` and `RLIMIT_MEMLOCK` as `(soft, hard)` each (`u64::MAX`: unlimited).
pub fn limits() -> ((u64, u64), (u64, u64)) {
    (
        rlimit(libc::RLIMIT_NOFILE).unwrap_or((0, 0)),
        rlimit(libc::RLIMIT_MEMLOCK).unwrap_or((0, 0)),
    )
}

/// Whether this kernel charges an io_uring's ring memory to `RLIMIT_MEMLOCK` for this process:
/// recent kernels do for a process without CAP_IPC_LOCK (the units give the relay none), older
/// ones charge only the cgroup. Found by creating a small ring with the soft limit at 0 for a
/// moment, then putting it back: call it before any thread of this process creates a ring.
pub fn rings_charged() -> bool {
    let Ok((soft, _)) = rlimit(libc::RLIMIT_MEMLOCK) else {
        return true;
    };
    if set_soft_rlimit(libc::RLIMIT_MEMLOCK, 0).is_err() {
        return true;
    }
    let charged = matches!(
        IoUring::new(PROBE_RING_ENTRIES),
        Err(e) if e.raw_os_error() == Some(libc::ENOMEM)
    );
    let _ = set_soft_rlimit(libc::RLIMIT_MEMLOCK, soft);
    charged
}

/// Locked memory (`RLIMIT_MEMLOCK`) `threads` reactor threads pin: each one's two
/// provided-buffer rings, whole pages each, and where the kernel charges ring memory to this
/// limit ([`rings_charged`]), each one's ring ([`crate::reactor::ring_memory_bytes`]). One
/// process's: during an upgrade the old and the new process hold theirs at once, and the
/// kernel counts both against the one user's limit.
pub fn memlock_needed(threads: usize, rings_charged: bool) -> u64 {
    let page = crate::reactor::page_bytes();
    let entry = std::mem::size_of::<io_uring::types::BufRingEntry>() as u64;
    let buf_ring = |count: u16| (u64::from(count) * entry).div_ceil(page) * page;
    let ring = if rings_charged {
        crate::reactor::ring_memory_bytes()
    } else {
        0
    };
    threads as u64
        * (ring
            + buf_ring(crate::reactor::INTAKE_RECV_BUFFERS)
            + buf_ring(crate::reactor::UPSTREAM_RECV_BUFFERS))
}

/// What [`memlock_needed`] counts, in words.
pub fn memlock_terms(threads: usize, rings_charged: bool) -> String {
    if rings_charged {
        format!(
            "{threads} threads x (an io_uring of {} KiB, which this kernel charges here, and two \
             provided-buffer rings)",
            crate::reactor::ring_memory_bytes() / 1024
        )
    } else if has_ipc_lock() {
        format!(
            "{threads} threads x two provided-buffer rings; this process has CAP_IPC_LOCK, so \
             nothing it locks counts here, where the units' user, which has none, is charged \
             its rings too on kernels that do: check as the unit runs the relay"
        )
    } else {
        format!(
            "{threads} threads x two provided-buffer rings; this kernel charges io_uring rings \
             to the cgroup, not here"
        )
    }
}

/// Whether this process holds CAP_IPC_LOCK in its effective set (root does): then nothing it
/// locks counts against `RLIMIT_MEMLOCK`, rings or buffers.
pub fn has_ipc_lock() -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// Reads the `kernel.io_uring_disabled` sysctl at `path`: `None` when the file is absent or holds
/// no number (kernels before 6.6, where io_uring is always allowed).
pub fn read_io_uring_disabled(path: &Path) -> Option<u8> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// What a failed ring setup means here: the errno, read together with the sysctl and the memlock
/// limit, becomes one problem with its fix.
pub fn classify_ring_error(
    error: &io::Error,
    io_uring_disabled: Option<u8>,
    memlock: (u64, u64),
) -> Problem {
    match error.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => Problem::RingBlocked { io_uring_disabled },
        Some(libc::ENOMEM) => Problem::RingMemlock {
            soft: memlock.0,
            hard: memlock.1,
        },
        Some(libc::ENOSYS) => Problem::RingUnsupported,
        _ => Problem::RingFailed {
            error: describe(error),
        },
    }
}

fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => format!("{e} ({})", errno_name(code)),
        None => e.to_string(),
    }
}

fn errno_name(code: i32) -> &'static str {
    match code {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ENOMEM => "ENOMEM",
        libc::EINVAL => "EINVAL",
        libc::ENOSYS => "ENOSYS",
        libc::EFAULT => "EFAULT",
        libc::EEXIST => "EEXIST",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => "errno",
    }
}

/// The ring the relay wants, else a plain one (and why the flags were refused).
fn create_ring() -> io::Result<(IoUring, RingSetup)> {
    match IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(PROBE_RING_ENTRIES)
    {
        Ok(ring) => Ok((ring, RingSetup::SingleIssuerDeferTaskrun)),
        Err(flags_error) => {
            let ring = IoUring::new(PROBE_RING_ENTRIES)?;
            Ok((
                ring,
                RingSetup::Plain {
                    why: describe(&flags_error),
                },
            ))
        }
    }
}

fn features(ring: &IoUring) -> Vec<&'static str> {
    let p = ring.params();
    [
        ("single_mmap", p.is_feature_single_mmap()),
        ("nodrop", p.is_feature_nodrop()),
        ("submit_stable", p.is_feature_submit_stable()),
        ("fast_poll", p.is_feature_fast_poll()),
        ("ext_arg", p.is_feature_ext_arg()),
        ("native_workers", p.is_feature_native_workers()),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect()
}

/// Registers and unregisters a provided-buffer ring on a page-aligned anonymous mapping.
fn register_buf_ring(ring: &IoUring) -> io::Result<()> {
    let bytes = BUF_RING_ENTRY_BYTES * PROBE_BUF_RING_ENTRIES as usize;
    // SAFETY: a fresh private anonymous mapping; page-aligned by construction, unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let submitter = ring.submitter();
    // SAFETY: the mapping holds PROBE_BUF_RING_ENTRIES entries and outlives the registration,
    // which is removed before the mapping is.
    let registered = unsafe {
        submitter.register_buf_ring_with_flags(addr as u64, PROBE_BUF_RING_ENTRIES, PROBE_BGID, 0)
    };
    let result = registered.and_then(|()| submitter.unregister_buf_ring(PROBE_BGID));
    // SAFETY: unmapping the mapping made above, no longer registered.
    unsafe { libc::munmap(addr, bytes) };
    result
}

/// Turns SO_KEEPALIVE on for a fresh TCP socket with the ring's socket command, as a reload
/// does for the relay's open connections.
fn set_socket_option(ring: &mut IoUring) -> io::Result<()> {
    // SAFETY: plain socket(2); the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let on: libc::c_int = 1;
    let entry = io_uring::opcode::SetSockOpt::new(
        io_uring::types::Fd(fd),
        libc::SOL_SOCKET as u32,
        libc::SO_KEEPALIVE as u32,
        (&on as *const libc::c_int).cast(),
        std::mem::size_of::<libc::c_int>() as u32,
    )
    .build();
    // SAFETY: `on` and `fd` outlive the wait for this entry's completion below.
    let pushed = unsafe { ring.submission().push(&entry) }.is_ok();
    let result = if pushed {
        ring.submit_and_wait(1).and_then(|_| {
            let res = ring.completion().next().map_or(-libc::EIO, |c| c.result());
            if res < 0 {
                Err(io::Error::from_raw_os_error(-res))
            } else {
                Ok(())
            }
        })
    } else {
        Err(io::Error::from_raw_os_error(libc::EBUSY))
    };
    // SAFETY: closing the socket opened above; no operation refers to it any more.
    unsafe { libc::close(fd) };
    result
}

fn rlimit(resource: libc::__rlimit_resource_t) -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(resource, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((lim.rlim_cur, lim.rlim_max))
}

fn set_soft_rlimit(resource: libc::__rlimit_resource_t, soft: u64) -> io::Result<()> {
    let (_, hard) = rlimit(resource)?;
    let lim = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(resource, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn kernel_release() -> String {
    // SAFETY: uname fills the struct we own; release is NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "unknown".into();
        }
        std::ffi::CStr::from_ptr(u.release.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

/// `1234567` as `1,234,567`; `u64::MAX` (an unlimited rlimit) as `unlimited`.
fn count(n: u64) -> String {
    if n == u64::MAX {
        return "unlimited".into();
    }
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kernel: {}", self.kernel)?;
        match self.io_uring_disabled {
            Some(v) => writeln!(f, "io_uring: allowed (kernel.io_uring_disabled = {v})")?,
            None => writeln!(f, "io_uring: allowed (no kernel.io_uring_disabled sysctl)")?,
        }
        match &self.ring {
            RingSetup::SingleIssuerDeferTaskrun => {
                writeln!(f, "io_uring ring: single issuer + deferred task running")?
            }
            RingSetup::Plain { why } => writeln!(
                f,
                "io_uring ring: plain (single issuer + deferred task running refused: {why})"
            )?,
        }
        writeln!(f, "io_uring features: {}", self.ring_features.join(", "))?;
        writeln!(
            f,
            "provided-buffer ring: {}",
            if self.buf_ring {
                "registers"
            } else {
                "not checked"
            }
        )?;
        write!(
            f,
            "open files: need {} ({}); soft limit {}",
            count(self.fds.total()),
            self.fds,
            count(self.nofile_soft)
        )?;
        if self.nofile_soft != self.nofile_soft_before {
            write!(f, " (raised from {})", count(self.nofile_soft_before))?;
        }
        writeln!(f, ", hard limit {}", count(self.nofile_hard))?;
        write!(
            f,
            "locked memory: need {} bytes ({}), twice during an upgrade; soft limit {}, hard \
             limit {} bytes",
            count(self.memlock_needed),
            memlock_terms(self.threads, self.rings_charged),
            count(self.memlock_soft),
            count(self.memlock_hard)
        )
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::IoUringDisabled => write!(
                f,
                "io_uring is disabled for every process (kernel.io_uring_disabled = 2); fix: \
                 `sysctl -w kernel.io_uring_disabled=0` (or 1 and add the relay's group to \
                 kernel.io_uring_group), persisted in /etc/sysctl.d/"
            ),
            Problem::RingBlocked {
                io_uring_disabled: Some(1),
            } => write!(
                f,
                "io_uring blocked: kernel.io_uring_disabled = 1 allows it only to processes with \
                 CAP_SYS_ADMIN or in the group kernel.io_uring_group; fix: `sysctl -w \
                 kernel.io_uring_disabled=0`, or set kernel.io_uring_group to the relay's group \
                 (a seccomp profile may also be refusing io_uring_setup)"
            ),
            Problem::RingBlocked { .. } => write!(
                f,
                "io_uring blocked (seccomp profile of a container?): io_uring_setup returned \
                 EPERM; fix: run with a seccomp profile that allows io_uring_setup, \
                 io_uring_enter and io_uring_register (docker/podman: --security-opt \
                 seccomp=<profile>; Kubernetes: a Localhost seccompProfile), or outside the sandbox"
            ),
            Problem::RingMemlock { soft, hard } => write!(
                f,
                "io_uring could not get memory for a ring (ENOMEM): RLIMIT_MEMLOCK is {} bytes \
                 (hard {}), counted against what every process of this user locks (a relay that \
                 just ended frees its rings a moment later), or the kernel is short of memory; \
                 fix: a later start may pass; else raise it, LimitMEMLOCK in the unit or `ulimit \
                 -l` in the shell (the startup line `locked memory` says what one relay needs, \
                 twice it covers an upgrade)",
                count(*soft),
                count(*hard)
            ),
            Problem::LockedMemory {
                threads,
                rings_charged,
                needed,
                soft,
                hard,
            } => write!(
                f,
                "locked memory: the {threads} threads pin {} bytes ({}), over RLIMIT_MEMLOCK \
                 (soft {}, hard {} bytes); fix: LimitMEMLOCK={} in the systemd unit (twice the \
                 need: during an upgrade the old and the new process hold theirs at once, under \
                 one user), or `ulimit -l {}` in the starting shell",
                count(*needed),
                memlock_terms(*threads, *rings_charged),
                count(*soft),
                count(*hard),
                2 * needed,
                (2 * needed).div_ceil(1024)
            ),
            Problem::RingUnsupported => write!(
                f,
                "this kernel has no io_uring (io_uring_setup returned ENOSYS); fix: run on Linux \
                 6.1 or later built with CONFIG_IO_URING=y"
            ),
            Problem::RingFailed { error } => write!(
                f,
                "io_uring setup failed: {error}; fix: run on Linux 6.1 or later"
            ),
            Problem::BufRing { error } => write!(
                f,
                "provided-buffer ring registration failed: {error}; fix: run on Linux 5.19 or \
                 later (6.1+ recommended)"
            ),
            Problem::OpenFiles {
                needed,
                soft,
                hard,
                budget,
            } => write!(
                f,
                "too few open files allowed: the config needs {} file descriptors ({budget}) but \
                 the hard limit RLIMIT_NOFILE is {} (soft {}); fix: LimitNOFILE={} (or more) in \
                 the systemd unit, `ulimit -Hn {}` before starting, or fewer egress sources, \
                 regions or intake connections",
                count(*needed),
                count(*hard),
                count(*soft),
                needed,
                needed
            ),
        }
    }
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ProbeError {}
