//! Send times shared between bench-load and bench-engine through one memory-mapped file.
//!
//! Slot `seq` holds the scheduled send time of bundle `seq` in `CLOCK_MONOTONIC` nanoseconds
//! (the instant answer latency is measured from, so delivery latency is corrected for
//! coordinated omission the same way), or 0 while unsent. Both processes read the host's one
//! monotonic clock, so `received_ns - slot[seq]` is a delivery latency with no clock sync.
//! Put the file on tmpfs (`/dev/shm`) so it costs no disk I/O.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapMut;

/// `CLOCK_MONOTONIC` in nanoseconds: the clock every bench tool stamps with.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The writer's side (bench-load): the send times of one run.
pub struct SentLog {
    map: MmapMut,
    slots: usize,
}

impl SentLog {
    /// Makes the file at `path` a log of `slots` bundles, all unsent. A file that is already
    /// longer keeps its length (a reader that mapped it whole would die of SIGBUS past a
    /// shrunk end) and is cleared whole: no earlier run's send time is read as this one's.
    pub fn create(path: &Path, slots: usize) -> io::Result<SentLog> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let want = (slots.max(1) * 8) as u64;
        if file.metadata()?.len() < want {
            file.set_len(want)?;
        }
        // SAFETY: the mapping is only accessed through atomics; other processes sharing the
        // file do the same.
        let map = unsafe { MmapMut::map_mut(&file)? };
        let log = SentLog { map, slots };
        let whole = log.map.len() / 8;
        for seq in 0..whole {
            log.word(seq).store(0, Ordering::Release);
        }
        Ok(log)
    }

    /// Opens a file another process created, to read (bench-engine).
    pub fn open(path: &Path) -> io::Result<SentLogReader> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let mapping = Mapping::of(&file)?;
        Ok(SentLogReader {
            file,
            mapping: RwLock::new(mapping),
        })
    }

    pub fn capacity(&self) -> usize {
        self.slots
    }

    fn word(&self, seq: usize) -> &AtomicU64 {
        assert!(seq < self.map.len() / 8);
        // SAFETY: in bounds (above); the map is page-aligned, so every word is an aligned
        // u64; AtomicU64 has u64's layout.
        unsafe { &*(self.map.as_ptr() as *const AtomicU64).add(seq) }
    }

    /// Records bundle `seq`'s send time; out-of-range sequence numbers are ignored.
    pub fn record(&self, seq: u64, sent_ns: u64) {
        if (seq as usize) < self.slots {
            self.word(seq as usize).store(sent_ns, Ordering::Release);
        }
    }

    /// The send time of bundle `seq`, if it was recorded.
    pub fn get(&self, seq: u64) -> Option<u64> {
        ((seq as usize) < self.slots)
            .then(|| self.word(seq as usize).load(Ordering::Acquire))
            .filter(|&t| t != 0)
    }
}

/// One mapping of the whole file as it was.
struct Mapping {
    map: MmapMut,
    slots: usize,
}

impl Mapping {
    fn of(file: &File) -> io::Result<Mapping> {
        let slots = (file.metadata()?.len() / 8) as usize;
        // SAFETY: as in `SentLog::create`.
        let map = unsafe { MmapMut::map_mut(file)? };
        Ok(Mapping { map, slots })
    }

    fn get(&self, seq: u64) -> Option<u64> {
        if seq as usize >= self.slots {
            return None;
        }
        // SAFETY: `slots * 8` bytes are mapped and the file never shrinks (`SentLog::create`);
        // the map is page-aligned, so every slot is an aligned u64.
        let word = unsafe { &*(self.map.as_ptr() as *const AtomicU64).add(seq as usize) };
        Some(word.load(Ordering::Acquire)).filter(|&t| t != 0)
    }
}

/// The reader's side (bench-engine), open across runs: a later run's log may be longer than
/// the file was when it was opened, and is mapped again when a bundle is past the mapping.
pub struct SentLogReader {
    file: File,
    mapping: RwLock<Mapping>,
}

impl SentLogReader {
    /// Bundles the log holds now.
    pub fn capacity(&self) -> usize {
        self.mapping.read().expect("sent log lock").slots
    }

    /// The send time of bundle `seq`, if it was recorded.
    pub fn get(&self, seq: u64) -> Option<u64> {
        {
            let m = self.mapping.read().expect("sent log lock");
            if (seq as usize) < m.slots {
                return m.get(seq);
            }
        }
        let len = self.file.metadata().ok()?.len();
        if seq >= len / 8 {
            return None;
        }
        let mut m = self.mapping.write().expect("sent log lock");
        if (seq as usize) >= m.slots {
            *m = Mapping::of(&self.file).ok()?;
        }
        m.get(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_mapping_sees_recorded_send_times() {
        let path = std::env::temp_dir().join(format!("sentlog-test-{}", std::process::id()));
        let writer = SentLog::create(&path, 1000).unwrap();
        let reader = SentLog::open(&path).unwrap();
        assert_eq!(reader.capacity(), 1000);
        assert_eq!(reader.get(5), None);
        writer.record(5, 123_456);
        writer.record(5_000, 1); // out of range: ignored
        assert_eq!(reader.get(5), Some(123_456));
        assert_eq!(reader.get(5_000), None);
        std::fs::remove_file(path).unwrap();
    }

    /// bench-engine opens the log once, at its start; bench-load creates it again for each
    /// run. A later, larger run's send times are read, not counted as unsent.
    #[test]
    fn a_reader_opened_before_a_larger_run_reads_that_runs_send_times() {
        let path = std::env::temp_dir().join(format!("sentlog-grow-{}", std::process::id()));
        drop(SentLog::create(&path, 100).unwrap());
        let reader = SentLog::open(&path).unwrap();
        let writer = SentLog::create(&path, 100_000).unwrap();
        writer.record(99_999, 7);
        assert_eq!(reader.get(99_999), Some(7));
        std::fs::remove_file(path).unwrap();
    }

    /// A smaller run after a larger one keeps the file's length (a reader of the larger
    /// mapping past a shrunk file's end would die of SIGBUS), and holds none of the earlier
    /// run's send times.
    #[test]
    fn a_smaller_run_neither_shrinks_the_file_under_a_reader_nor_keeps_the_last_runs_times() {
        let path = std::env::temp_dir().join(format!("sentlog-shrink-{}", std::process::id()));
        let first = SentLog::create(&path, 100_000).unwrap();
        first.record(10, 5);
        first.record(99_999, 5);
        let reader = SentLog::open(&path).unwrap();
        let second = SentLog::create(&path, 100).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 800_000);
        assert_eq!(reader.get(99_999), None, "read, not SIGBUS; and unsent");
        assert_eq!(reader.get(10), None, "the last run's time is gone");
        second.record(10, 6);
        assert_eq!(reader.get(10), Some(6));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a > 0);
    }
}
