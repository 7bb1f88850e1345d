//! Send times shared between bench-load and bench-engine through one memory-mapped file.
//!
//! Slot `seq` holds the scheduled send time of bundle `seq` in `CLOCK_MONOTONIC` nanoseconds
//! (the instant answer latency is measured from, so delivery latency is corrected for
//! coordinated omission the same way), or 0 while unsent. Both processes read the host's one
//! monotonic clock, so `received_ns - slot[seq]` is a delivery latency with no clock sync.
//! Put the file on tmpfs (`/dev/shm`) so it costs no disk I/O.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;
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

pub struct SentLog {
    map: MmapMut,
    slots: usize,
}

impl SentLog {
    /// Creates (or truncates) the file with room for `slots` bundles, all unsent.
    pub fn create(path: &Path, slots: usize) -> io::Result<SentLog> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        file.set_len((slots.max(1) * 8) as u64)?;
        // SAFETY: the mapping is only accessed through atomics; other processes sharing the
        // file do the same.
        let map = unsafe { MmapMut::map_mut(&file)? };
        Ok(SentLog { map, slots })
    }

    /// Opens a file another process created.
    pub fn open(path: &Path) -> io::Result<SentLog> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let slots = (file.metadata()?.len() / 8) as usize;
        // SAFETY: as in `create`.
        let map = unsafe { MmapMut::map_mut(&file)? };
        Ok(SentLog { map, slots })
    }

    pub fn capacity(&self) -> usize {
        self.slots
    }

    fn slot(&self, seq: u64) -> Option<&AtomicU64> {
        if seq as usize >= self.slots {
            return None;
        }
        // SAFETY: the map is page-aligned and `slots * 8` bytes long, so every slot is an
        // aligned, in-bounds u64; AtomicU64 has u64's layout.
        Some(unsafe { &*(self.map.as_ptr() as *const AtomicU64).add(seq as usize) })
    }

    /// Records bundle `seq`'s send time; out-of-range sequence numbers are ignored.
    pub fn record(&self, seq: u64, sent_ns: u64) {
        if let Some(s) = self.slot(seq) {
            s.store(sent_ns, Ordering::Release);
        }
    }

    /// The send time of bundle `seq`, if it was recorded.
    pub fn get(&self, seq: u64) -> Option<u64> {
        self.slot(seq)
            .map(|s| s.load(Ordering::Acquire))
            .filter(|&t| t != 0)
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

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a > 0);
    }
}
