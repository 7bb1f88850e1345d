//! The pacing ledger's memory ([`crate::limiter::ledger`]): an anonymous shared file
//! (`memfd_create`) this process maps at start and every pair books its sends in, and that a
//! successor started by SIGUSR2 inherits (`--ledger-fd`) and maps too, so while both send,
//! neither uses a (source, region) pair the other used within its interval. An operator's
//! `run --takeover PID` is handed nothing: it opens the file PID holds through `/proc/PID/fd`.
//!
//! With `egress.ledger` the memory is a file on tmpfs instead, which every relay of the host
//! maps: a relay restarted while the old one still drains, two relays whose slices overlap,
//! a takeover of the wrong relay all book in one ledger, so none of them sends early on a pair
//! another used. Each holds a shared `flock` on it while it runs; the one that finds no other
//! holder may size it anew (keeping every booking), the others take it as it is.
//!
//! What it is NOT: the ledger's rules (the limiter layer's), nor the handover's timing
//! (`upgrade`, `takeover`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
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

/// Why the ledger file cannot be this relay's, and whether a later start may pass (another
/// relay holds a file too small) or not (the config's place for it is wrong).
#[derive(Debug)]
pub struct Refused {
    pub why: String,
    pub for_now: bool,
}

impl From<String> for Refused {
    fn from(why: String) -> Refused {
        Refused {
            why,
            for_now: false,
        }
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
    /// reason). With `file` (`egress.ledger`, or the units' runtime folder), that file, sized
    /// for `pool` pairs (every relay's of a sliced pool).
    pub fn open(
        pairs: usize,
        pool: usize,
        inherited: Option<RawFd>,
        taking_over: Option<i32>,
        file: Option<&Path>,
    ) -> Result<(Pacing, Option<String>), Refused> {
        if inherited.is_none()
            && let Some(path) = file
        {
            if let Some(old) = taking_over
                && let Some(theirs) = held_elsewhere(old, path)
            {
                // The relay taken over books in another ledger (its memfd, another file): the
                // file would not see its sends. This one books where it does until it is
                // gone, as a successor it started would.
                return Ok((
                    theirs,
                    Some(format!(
                        "pid {old} paces in a ledger other than {}: this process books in \
                         pid {old}'s, so neither sends early on a pair the other used, and \
                         takes {} at its next start",
                        path.display(),
                        path.display()
                    )),
                ));
            }
            return match shared_file(path, pairs, pool) {
                Ok((ledger, fd)) => Ok((
                    Pacing {
                        ledger,
                        fd: Some(fd),
                    },
                    None,
                )),
                // Too small while others use it: this relay paces in its own ledger rather
                // than not at all, and says what that risks and how it mends.
                Err(Refused { why, for_now: true }) => {
                    // A relay taken over still shares its ledger with this one.
                    let (own, unread) = Pacing::open_own(pool.max(pairs), None, taking_over);
                    let place = if taking_over.is_some() && unread.is_none() {
                        "in the ledger of the relay it takes over"
                    } else {
                        "in a ledger of its own"
                    };
                    Ok((
                        own,
                        Some(format!(
                            "{why}; until then this relay paces {place}, and a pair another \
                             relay of the host also uses may send early"
                        )),
                    ))
                }
                Err(e) => Err(e),
            };
        }
        Ok(Pacing::open_own(pool.max(pairs), inherited, taking_over))
    }

    fn open_own(
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
/// file: its bookings are shared from the first send), with a shared lock as every holder of
/// a ledger file takes: its memfd, or the ledger file it maps (`egress.ledger`, the units'
/// runtime folder), told by its first bytes. Needs what reading that folder needs: the same
/// user, or root.
fn held_by(pid: i32) -> io::Result<OwnedFd> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let dir = format!("/proc/{pid}/fd");
    let name = MEMFD_NAME.to_string_lossy();
    let want = format!("/memfd:{name} ");
    let open = |path: &Path, write: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOATIME | libc::O_NOCTTY)
            .open(path)
    };
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        let Ok(target) = std::fs::read_link(&path) else {
            continue;
        };
        let memfd = target.to_string_lossy().starts_with(&want);
        // Else only a file a ledger could be: a regular file on tmpfs of a ledger's length
        // (never a FIFO, a device or a file of /proc, whose reading has effects), read (not
        // written) for its first bytes.
        let shaped = |m: &std::fs::Metadata| {
            let entries = m.len() / ENTRY_BYTES as u64;
            m.is_file()
                && m.len() % ENTRY_BYTES as u64 == 0
                && entries >= 2
                && (entries - 1).is_power_of_two()
        };
        let probed = if memfd {
            None
        } else {
            match std::fs::metadata(&path) {
                Ok(m) if shaped(&m) && check_place(&path).is_ok() => {
                    let mut head = [0u8; 8];
                    let ledger = open(&path, false).is_ok_and(|mut f| {
                        f.read_exact(&mut head).is_ok()
                            && u64::from_ne_bytes(head) == crate::limiter::ledger::MAGIC
                    });
                    ledger.then_some((m.dev(), m.ino()))
                }
                _ => None,
            }
        };
        if memfd || probed.is_some() {
            let file = open(&path, true)?;
            // The descriptor's number may name another file by now: the one probed, or none.
            let m = file.metadata()?;
            if probed.is_some_and(|id| id != (m.dev(), m.ino())) {
                continue;
            }
            let fd = OwnedFd::from(file);
            // SAFETY: flock on a descriptor we hold.
            if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_SH) } != 0 {
                return Err(io::Error::last_os_error());
            }
            return Ok(fd);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{dir} holds no {name} memfd or ledger file"),
    ))
}

/// The ledger process `pid` holds, mapped, when it is not the file at `path` (`None`: it is
/// that file, or `pid`'s cannot be read, and the file is what there is to share).
fn held_elsewhere(pid: i32, path: &Path) -> Option<Pacing> {
    use std::os::unix::fs::MetadataExt;
    let fd = held_by(pid).ok()?;
    let theirs = std::fs::File::from(fd.try_clone().ok()?).metadata().ok()?;
    if std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == (theirs.dev(), theirs.ino())) {
        return None;
    }
    let fd = Arc::new(fd);
    let ledger = map(&fd).ok()?;
    Some(Pacing {
        ledger,
        fd: Some(fd),
    })
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

/// The ledger file's name in the service's runtime folder.
pub const RUNTIME_LEDGER: &str = "pacing.ledger";

/// The ledger file this relay books in: `egress.ledger`, else, under a unit with
/// `RuntimeDirectory=` (which sets `RUNTIME_DIRECTORY`), [`RUNTIME_LEDGER`] in that folder;
/// else none (the process's own memory).
pub fn file_of(cfg: &crate::config::Config) -> Option<std::path::PathBuf> {
    cfg.egress.ledger.clone().or_else(|| {
        let dirs = std::env::var_os("RUNTIME_DIRECTORY")?;
        let first = dirs.to_str()?.split(':').next()?.to_string();
        (!first.is_empty()).then(|| std::path::Path::new(&first).join(RUNTIME_LEDGER))
    })
}

/// `statfs`'s magic of tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Whether a ledger file can be at `path`: on tmpfs (its bookings are this boot's clock
/// readings, which a file that outlived a reboot would make years ahead), in a folder that
/// exists. `run --check` asks this; the start asks it again when it opens the file.
pub fn check_place(path: &Path) -> Result<(), String> {
    let at = if path.exists() {
        path
    } else {
        path.parent().filter(|d| d.is_dir()).ok_or_else(|| {
            format!(
                "egress.ledger {}: its folder does not exist (the units' RuntimeDirectory= makes \
                 /run/bundle-relay)",
                path.display()
            )
        })?
    };
    let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("egress.ledger {}: not a path", path.display()))?;
    // SAFETY: statfs into a struct we own, of a NUL-terminated path.
    let fs = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut st) != 0 {
            return Err(format!(
                "egress.ledger {}: {}",
                path.display(),
                io::Error::last_os_error()
            ));
        }
        st.f_type as i64
    };
    if fs != TMPFS_MAGIC {
        return Err(format!(
            "egress.ledger {} is not on tmpfs: its bookings are times of this boot's clock, which \
             a file kept across a reboot would put far ahead; use /run or /dev/shm",
            path.display()
        ));
    }
    Ok(())
}

/// The ledger file at `path`, mapped, with a shared lock held on it for as long as the
/// descriptor lives (an inheriting successor shares it). Created, or sized anew keeping every
/// booking, only by a process that finds no other holder; a file others use is taken as it
/// is if it has room for `pairs` more.
fn shared_file(
    path: &Path,
    pairs: usize,
    pool: usize,
) -> Result<(Arc<Ledger>, Arc<OwnedFd>), Refused> {
    use std::os::unix::fs::OpenOptionsExt;
    check_place(path)?;
    let named = |e: io::Error| format!("egress.ledger {}: {e}", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(named)?;
    let fd = Arc::new(OwnedFd::from(file));
    let raw = fd.as_raw_fd();
    // Room for every relay of the pool, not this one's slice alone: the first to start
    // sizes it for the others.
    let want = entries_for(pool.max(pairs));
    // SAFETY: flock on a descriptor we hold.
    let alone = unsafe { libc::flock(raw, libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if alone {
        // No other relay maps it: built anew at this relay's size with the bookings still
        // ahead (those behind hold nothing back), so keys of pairs gone do not pile up.
        resize(&fd, want).map_err(named)?;
    }
    // SAFETY: as above; held until the descriptor closes (a holder that exits drops it).
    if unsafe { libc::flock(raw, libc::LOCK_SH) } != 0 {
        return Err(named(io::Error::last_os_error()).into());
    }
    let ledger = map(&fd).map_err(named)?;
    if ledger.free_entries() < pairs {
        return Err(Refused {
            why: format!(
                "egress.ledger {}: its {} entries have room for fewer than this relay's \
                 {pairs} pairs beside the other relays' bookings; it is sized anew (for the \
                 whole pool) by the first relay to start while no other runs (stop every relay \
                 of the host at once, or delete it while none runs)",
                path.display(),
                ledger.capacity()
            ),
            for_now: true,
        });
    }
    Ok((ledger, fd))
}

fn file_len(fd: RawFd) -> io::Result<u64> {
    // SAFETY: fstat into a struct we own.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st.st_size as u64)
    }
}

/// The file sized for `entries` (the ledger's [`entries_for`]), every booking it held that
/// is still ahead of now kept. Only while no other process holds the file.
fn resize(fd: &Arc<OwnedFd>, entries: usize) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    let now = crate::clock::Clock::raw_now();
    let kept: Vec<(u64, u64)> = if file_len(raw)? >= 2 * ENTRY_BYTES as u64 {
        match map(fd) {
            Ok(old) => old.bookings().filter(|&(_, next)| next > now.0).collect(),
            // Not a ledger (or one of another layout): nothing in it to keep.
            Err(_) => Vec::new(),
        }
    } else {
        Vec::new()
    };
    // SAFETY: ftruncate of a descriptor we hold: to 0 (every byte zero again), then the size.
    unsafe {
        if libc::ftruncate(raw, 0) != 0
            || libc::ftruncate(raw, (entries * ENTRY_BYTES) as libc::off_t) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    let ledger = map(fd)?;
    for (key, next) in kept {
        if let Some(slot) = ledger.slot(key) {
            ledger.book(slot, crate::clock::Instant(next));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Instant;
    use crate::limiter::ledger::pair_key;

    /// Held by every test here: a child spawned by one holds, until it execs, every
    /// descriptor open in the process, and with them their locks, so another test's "alone"
    /// would not be.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn scratch(name: &str) -> std::path::PathBuf {
        let p =
            std::path::PathBuf::from(format!("/dev/shm/br-pacing-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    /// A process holding `p`'s memory as the relay taken over would (its memfd, inherited).
    fn holder_of(p: &Pacing) -> std::process::Child {
        let fd = p.fd.as_ref().expect("a memfd");
        // SAFETY: dup of a descriptor we hold; the copy (without close-on-exec) goes to the
        // child and is closed here once it has.
        let copy = unsafe { libc::dup(fd.as_raw_fd()) };
        assert!(copy >= 0);
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        // SAFETY: the copy made above, ours alone.
        unsafe { libc::close(copy) };
        child
    }

    #[test]
    fn a_takeover_of_a_relay_pacing_in_its_own_memfd_books_in_that_one_not_in_the_file() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let path = scratch("takeover");
        let key = pair_key("127.1.0.1", "ny");
        let old = Pacing::fresh(4);
        let ahead = Instant(crate::clock::Clock::raw_now().0 + 1_000_000_000_000);
        old.ledger.book(old.ledger.slot(key).unwrap(), ahead);
        let mut holder = holder_of(&old);
        let pid = holder.id() as i32;
        let opened = Pacing::open(4, 4, None, Some(pid), Some(&path));
        let _ = holder.kill();
        let _ = holder.wait();
        let (new, why) = opened.unwrap();
        assert_eq!(
            new.ledger.next(new.ledger.slot(key).unwrap()),
            ahead,
            "the old relay's send is seen"
        );
        let why = why.expect("says why the file waits");
        assert_eq!(
            why,
            format!(
                "pid {pid} paces in a ledger other than {0}: this process books in pid {pid}'s, \
                 so neither sends early on a pair the other used, and takes {0} at its next start",
                path.display()
            )
        );
        assert!(
            !path.exists(),
            "the file is not taken while the old relay runs"
        );
    }

    #[test]
    fn a_takeover_of_a_relay_pacing_in_the_file_books_in_the_file() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let path = scratch("takeover-same");
        let key = pair_key("127.1.0.1", "ny");
        let (ledger, fd) = shared_file(&path, 4, 4).unwrap();
        let old = Pacing {
            ledger,
            fd: Some(fd),
        };
        let ahead = Instant(crate::clock::Clock::raw_now().0 + 1_000_000_000_000);
        old.ledger.book(old.ledger.slot(key).unwrap(), ahead);
        let mut holder = holder_of(&old);
        let opened = Pacing::open(4, 4, None, Some(holder.id() as i32), Some(&path));
        let _ = holder.kill();
        let _ = holder.wait();
        let (new, why) = opened.unwrap();
        assert_eq!(why, None);
        assert_eq!(new.ledger.next(new.ledger.slot(key).unwrap()), ahead);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_ledger_file_grown_by_a_relay_alone_keeps_every_booking_and_one_in_use_is_not_grown() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let path = scratch("grow");
        let key = pair_key("127.1.0.1", "amsterdam");
        let (small, fd) = shared_file(&path, 2, 2).unwrap();
        let slot = small.slot(key).unwrap();
        let ahead = Instant(crate::clock::Clock::raw_now().0 + 1_000_000_000_000);
        small.book(slot, ahead);
        let behind = small.slot(pair_key("127.1.0.2", "amsterdam")).unwrap();
        small.book(behind, Instant(12_345));
        // In use: a relay of many more pairs is refused rather than growing it under the other.
        let e = shared_file(&path, 100_000, 100_000).unwrap_err();
        assert!(
            e.why
                .contains("room for fewer than this relay's 100000 pairs")
                && e.for_now,
            "{e:?}"
        );
        let (_, also) = shared_file(&path, 2, 2).unwrap();
        drop((small, fd, also));
        // Alone now: grown, with the booking still ahead carried over and the one behind not.
        let (big, _fd) = shared_file(&path, 100_000, 100_000).unwrap();
        assert!(big.capacity() >= entries_for(100_000) - 1);
        assert_eq!(big.next(big.slot(key).unwrap()), ahead);
        assert_eq!(
            big.bookings().count(),
            1,
            "the booking behind is not carried"
        );
        let _ = std::fs::remove_file(&path);
    }
}
