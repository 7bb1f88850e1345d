//! The config file watched: a file changed on disk is reloaded as SIGHUP would, so an operator's
//! edit (or a deployment tool's rename into place) applies without a signal.
//!
//! What it is NOT: inotify. The supervision loop looks once a second at the file's identity
//! (device, inode, size, modification time): one `stat` a second on the main thread, no
//! thread, no descriptor, and it sees a file replaced by rename as well as one written in
//! place. A half-written file fails validation and is refused like any bad config (the last
//! good one keeps serving); the completed write changes the identity again and is reloaded.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How often the file is looked at.
pub const EVERY: Duration = Duration::from_secs(1);

/// What tells one version of the file from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

fn identity(path: &std::path::Path) -> Option<Identity> {
    let m = std::fs::metadata(path).ok()?;
    Some(Identity {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    })
}

/// See the module docs.
pub struct Watch {
    path: PathBuf,
    seen: Option<Identity>,
    next: Instant,
}

impl Watch {
    /// Watches `path` as it is now.
    pub fn new(path: PathBuf) -> Watch {
        Watch {
            seen: identity(&path),
            path,
            next: Instant::now() + EVERY,
        }
    }

    /// The file as it is now was just read (a SIGHUP's reload): not a change to reload again.
    pub fn read_now(&mut self) {
        self.seen = identity(&self.path);
    }

    /// Whether the file changed since the last look (at most one look per [`EVERY`]). A file
    /// that is missing is no change: it is being replaced, or an operator will hear of it on
    /// the next reload.
    pub fn changed(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now + EVERY;
        match identity(&self.path) {
            Some(id) if Some(id) != self.seen => {
                self.seen = Some(id);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_rewritten_or_replaced_is_a_change_and_a_missing_one_is_not() {
        let dir = std::env::temp_dir().join(format!("br-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("relay.toml");
        std::fs::write(&path, "a").unwrap();
        let mut w = Watch::new(path.clone());
        let t = Instant::now();
        assert!(!w.changed(t + EVERY), "unchanged");
        std::fs::write(&path, "ab").unwrap();
        assert!(!w.changed(t + EVERY), "looked at most once a second");
        assert!(w.changed(t + 2 * EVERY));
        let other = dir.join("next.toml");
        std::fs::write(&other, "ab").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(w.changed(t + 3 * EVERY), "replaced by rename: a new inode");
        std::fs::remove_file(&path).unwrap();
        assert!(!w.changed(t + 4 * EVERY));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
