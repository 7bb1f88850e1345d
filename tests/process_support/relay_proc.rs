//! Processes a test starts: what they print, collected as it comes, and nothing left running
//! when the test ends, however it ends.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every line `child` prints on stdout, collected by a thread as they come.
pub fn collect_lines(child: &mut Child) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let out = child.stdout.take().expect("stdout piped");
    let l = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            l.lock().unwrap().push(line);
        }
    });
    lines
}

/// The first line of `lines` holding `pat`, waited for up to `limit` (failing the test with
/// every line so far).
pub fn wait_line(lines: &Mutex<Vec<String>>, pat: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(l) = lines.lock().unwrap().iter().find(|l| l.contains(pat)) {
            return l.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no line with {pat:?}:\n{}",
            lines.lock().unwrap().join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills a helper process when the test ends, however it ends.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `bundle-relay run --config CONFIG ARGS…` and every line it prints; killed when dropped.
pub struct RelayProc {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl RelayProc {
    /// Starts the relay and waits (20 s at most) for a line holding `ready`.
    pub fn start(config: &Path, args: &[&str], ready: &str) -> RelayProc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
            .args(["run", "--config"])
            .arg(config)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = collect_lines(&mut child);
        let r = RelayProc { child, lines };
        r.wait_line(ready, Duration::from_secs(20));
        r
    }

    pub fn wait_line(&self, pat: &str, limit: Duration) -> String {
        wait_line(&self.lines, pat, limit)
    }

    /// Lines so far holding `pat`.
    pub fn count_lines(&self, pat: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(pat))
            .count()
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Its exit code, waited for up to `limit` (`None`: killed by a signal).
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(Instant::now() < deadline, "the relay did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RelayProc {
    fn drop(&mut self) {
        // A failed assertion leaves nothing running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
