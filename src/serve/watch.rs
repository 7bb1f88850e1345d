//! The config file watched, and the files it names that a reload reads again (the admin token
//! file): one changed on disk is reloaded as SIGHUP would, so an operator's edit (or a
//! deployment tool's rename into place, or a secret rotated where it is mounted) applies
//! without a signal.
//!
//! What it is NOT: inotify. The supervision loop looks once a second at the file's identity
//! (device, inode, size, modification time, and owner, group and mode: a file the relay could
//! not read, made readable, is read again): one `stat` a second on the main thread, no
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
    /// Who may read it: a reload refused for want of permission (a package's new conffile,
    /// its group set just after it landed) is tried again when that changes.
    owner: (u32, u32, u32),
}

fn identity(path: &std::path::Path) -> Option<Identity> {
    let m = std::fs::metadata(path).ok()?;
    Some(Identity {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        owner: (m.uid(), m.gid(), m.mode()),
    })
}

/// See the module docs.
pub struct Watch {
    /// The config file first, then the files it names.
    files: Vec<(PathBuf, Option<Identity>)>,
    next: Instant,
}

impl Watch {
    /// Watches the config file at `path` as it is now.
    pub fn new(path: PathBuf) -> Watch {
        Watch {
            files: vec![(path.clone(), identity(&path))],
            next: Instant::now() + EVERY,
        }
    }

    /// Watches `also` beside the config file from now on (the files the config now names):
    /// a file watched already as it was last seen (a reload read it then, and an edit since
    /// is still a change), a new one as it is now.
    pub fn also(&mut self, also: impl IntoIterator<Item = PathBuf>) {
        let before: Vec<(PathBuf, Option<Identity>)> = self.files.drain(1..).collect();
        for p in also {
            let seen = match before.iter().find(|(q, _)| *q == p) {
                Some((_, seen)) => *seen,
                None => identity(&p),
            };
            self.files.push((p, seen));
        }
    }

    /// The files as they are now were just read (a SIGHUP's reload): not a change to reload
    /// again.
    pub fn read_now(&mut self) {
        for (path, seen) in &mut self.files {
            *seen = identity(path);
        }
    }

    /// The first file that changed since the last look (at most one look per [`EVERY`]). A
    /// file that is missing is no change: it is being replaced, or an operator will hear of
    /// it on the next reload.
    pub fn changed(&mut self, now: Instant) -> Option<&std::path::Path> {
        if now < self.next {
            return None;
        }
        self.next = now + EVERY;
        let mut first = None;
        for (i, (path, seen)) in self.files.iter_mut().enumerate() {
            match identity(path) {
                Some(id) if Some(id) != *seen => {
                    *seen = Some(id);
                    first.get_or_insert(i);
                }
                _ => {}
            }
        }
        first.map(|i| self.files[i].0.as_path())
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
        assert!(w.changed(t + EVERY).is_none(), "unchanged");
        std::fs::write(&path, "ab").unwrap();
        assert!(
            w.changed(t + EVERY).is_none(),
            "looked at most once a second"
        );
        assert_eq!(w.changed(t + 2 * EVERY), Some(path.as_path()));
        let other = dir.join("next.toml");
        std::fs::write(&other, "ab").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(
            w.changed(t + 3 * EVERY).is_some(),
            "replaced by rename: a new inode"
        );
        std::fs::remove_file(&path).unwrap();
        assert!(w.changed(t + 4 * EVERY).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// dpkg installs a new conffile as root:root 0640, and the package gives it the relay's
    /// group a moment later: the relay's read in between was refused, and the group change
    /// alone (no new content) has it read again.
    #[test]
    fn a_file_whose_group_or_mode_changes_is_a_change() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("br-watch-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("relay.toml");
        std::fs::write(&path, "a").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut w = Watch::new(path.clone());
        let t = Instant::now();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(w.changed(t + EVERY), Some(path.as_path()), "mode");
        // Giving a file another group takes root (or that group's membership).
        // SAFETY: a plain getter.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&path, None, Some(4242)).unwrap();
            assert_eq!(w.changed(t + 2 * EVERY), Some(path.as_path()), "group");
        }
        assert!(w.changed(t + 3 * EVERY).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_the_config_names_is_watched_beside_it() {
        let dir = std::env::temp_dir().join(format!("br-watch-also-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (config, token) = (dir.join("relay.toml"), dir.join("token"));
        std::fs::write(&config, "a").unwrap();
        std::fs::write(&token, "one").unwrap();
        let mut w = Watch::new(config.clone());
        w.also([token.clone()]);
        let t = Instant::now();
        assert!(w.changed(t + EVERY).is_none());
        std::fs::write(&token, "three").unwrap();
        assert_eq!(w.changed(t + 2 * EVERY), Some(token.as_path()));
        assert!(w.changed(t + 3 * EVERY).is_none(), "seen once");
        // Edited while a reload was built: naming it again keeps it as last seen, so the
        // edit is still a change.
        std::fs::write(&token, "three!").unwrap();
        w.also([token.clone()]);
        assert_eq!(w.changed(t + 4 * EVERY), Some(token.as_path()));
        w.also([]);
        std::fs::write(&token, "four!!").unwrap();
        assert!(w.changed(t + 5 * EVERY).is_none(), "no longer named");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
