//! The pacing ledger's memory ([`crate::limiter::ledger`]): an anonymous shared file
//! (`memfd_create`) this process maps at start and every pair books its sends in, and that a
//! successor started by SIGUSR2 inherits (`--ledger-fd`) and maps too, so while both send,
//! neither uses a (source, region) pair the other used within its interval. An operator's
//! `run --takeover PID` is handed nothing: it opens the file PID holds through `/proc/PID/fd`.
//!
//! What it is NOT: the ledger's rules (the limiter layer's), nor the handover's timing
//! (`upgrade`, `takeover`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::limiter::ledger::{ENTRY_BYTES, Entry, Ledger, entries_for};

/// A mapping of the ledger file, unmapped when the ledger is dropped.
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
    /// Kept open for a successor to inherit.
    _fd: Arc<OwnedFd>,
}

// SAFETY: the mapping is only read and written through the ledger's atomics.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped by `map` with this length; nothing reads it after the ledger is gone.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// The ledger this process books in, and its file (for a successor).
pub struct Pacing {
    pub ledger: Arc<Ledger>,
    /// `None` when the ledger is this process's alone (memfd refused).
    pub fd: Option<Arc<OwnedFd>>,
}

impl Pacing {
    /// A new ledger for `pairs` pairs, or the one a predecessor handed over as `inherited`, or
    /// (an operator's `run --takeover PID`, which is handed none) the one the process taken
    /// over holds open, found through /proc (when it can be read; otherwise a new one, and the
    /// reason).
    pub fn open(
        pairs: usize,
        inherited: Option<RawFd>,
        taking_over: Option<i32>,
    ) -> (Pacing, Option<String>) {
        if inherited.is_none()
            && let Some(old) = taking_over
        {
            let found = held_by(old).and_then(|fd| {
                let fd = Arc::new(fd);
                map(&fd).map(|ledger| (ledger, fd))
            });
            return match found {
                Ok((ledger, fd)) => (
                    Pacing {
                        ledger,
                        fd: Some(fd),
                    },
                    None,
                ),
                Err(e) => (
                    Pacing::fresh(pairs),
                    Some(format!(
                        "the pacing ledger of pid {old} cannot be opened ({e}): this process \
                         paces alone, and pairs the old one used may send early once (`kill \
                         -USR2 {old}` starts a successor that is handed it)"
                    )),
                ),
            };
        }
        if let Some(fd) = inherited {
            // SAFETY: the predecessor passed this descriptor for us alone (`--ledger-fd`).
            let fd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
            match map(&fd) {
                Ok(ledger) => {
                    return (
                        Pacing {
                            ledger,
                            fd: Some(fd),
                        },
                        None,
                    );
                }
                Err(e) => {
                    let why = format!(
                        "the pacing ledger handed over cannot be read ({e}): this process \
                         paces alone, and pairs the old one used may send early once"
                    );
                    return (Pacing::fresh(pairs), Some(why));
                }
            }
        }
        (Pacing::fresh(pairs), None)
    }

    /// A new ledger file, or (memfd refused) one only this process sees.
    fn fresh(pairs: usize) -> Pacing {
        let made = create(pairs).and_then(|fd| {
            let fd = Arc::new(fd);
            map(&fd).map(|l| (l, fd))
        });
        match made {
            Ok((ledger, fd)) => Pacing {
                ledger,
                fd: Some(fd),
            },
            Err(e) => {
                eprintln!(
                    "bundle-relay: warning: no shared pacing ledger ({e}): a takeover may send \
                     early on pairs this process used"
                );
                Pacing {
                    ledger: Arc::new(Ledger::private(pairs)),
                    fd: None,
                }
            }
        }
    }
}

/// The name the ledger's memfd carries (`/proc/PID/fd/N` links to `/memfd:NAME (deleted)`).
const MEMFD_NAME: &std::ffi::CStr = c"bundle-relay-pacing";

/// The pacing ledger process `pid` holds open, opened again through `/proc/PID/fd` (the same
/// file: its bookings are shared from the first send). Needs what reading that folder needs:
/// the same user, or root.
fn held_by(pid: i32) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = format!("/proc/{pid}/fd");
    let name = MEMFD_NAME.to_string_lossy();
    let want = format!("/memfd:{name} ");
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        let Ok(target) = std::fs::read_link(&path) else {
            continue;
        };
        if target.to_string_lossy().starts_with(&want) {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(&path)?;
            return Ok(OwnedFd::from(file));
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{dir} holds no {name} memfd"),
    ))
}

/// Whether process `pid` holds a pacing ledger open (as every relay does): what tells a
/// relay from another process when their commands differ.
pub fn holds_ledger(pid: i32) -> bool {
    held_by(pid).is_ok()
}

fn create(pairs: usize) -> io::Result<OwnedFd> {
    // SAFETY: plain syscalls on a name and a descriptor this function owns.
    unsafe {
        let fd = libc::memfd_create(MEMFD_NAME.as_ptr(), libc::MFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let len = entries_for(pairs) * ENTRY_BYTES;
        if libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}

fn map(fd: &Arc<OwnedFd>) -> io::Result<Arc<Ledger>> {
    // SAFETY: fstat and mmap of a descriptor we hold; the mapping is checked before use.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        let len = st.st_size as usize;
        if len < 2 * ENTRY_BYTES || len % ENTRY_BYTES != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{len} bytes is no ledger"),
            ));
        }
        let ptr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        );
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mapping = Mapping {
            ptr,
            len,
            _fd: fd.clone(),
        };
        Ledger::over(ptr as *const Entry, len / ENTRY_BYTES, Box::new(mapping))
            .map(Arc::new)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not a pacing ledger"))
    }
}
