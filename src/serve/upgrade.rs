//! SIGUSR2: start this binary, as now on disk, with this process's command line,
//! `--takeover <this pid>` and `--ledger-fd <fd>` (the pacing ledger, inherited, so the two
//! never send on one pair within its interval), and serve on until it takes over (its SIGQUIT)
//! or exits.
//!
//! What it is NOT: the takeover itself (the new process's side, `takeover`), nor a wait: the
//! supervision loop polls the successor each tick and keeps serving meanwhile.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;

use super::systemd::Manager;

/// What it takes to start a successor, and the one started.
pub struct Upgrade {
    /// Read at startup: once a package upgrade replaced the binary, /proc/self/exe names the
    /// deleted old file, while this path names the new one.
    exe: Option<PathBuf>,
    /// This process's arguments, without the binary's name.
    args: Vec<OsString>,
    successor: Option<Child>,
    /// The pacing ledger's file, handed to the successor.
    ledger: Option<Arc<OwnedFd>>,
    /// SIGUSR2 came and no successor was started for it yet (this relay was not ready).
    asked: bool,
    /// SIGUSR2 came again while the successor was coming up: a newer binary than the one it
    /// runs may be on disk (a second package upgrade within its takeover), so it is asked in
    /// turn once it has taken over ([`Upgrade::taken_over`]), or this relay tries again if it
    /// fails.
    again: bool,
}

impl Upgrade {
    /// This process's binary path and arguments, read now: a package upgrade may replace the
    /// binary later.
    pub fn from_env() -> Upgrade {
        Upgrade {
            exe: exe_to_start(std::env::args_os().next(), std::env::current_exe().ok()),
            args: std::env::args_os().skip(1).collect(),
            successor: None,
            ledger: None,
            asked: false,
            again: false,
        }
    }

    /// The successor inherits `fd`, the pacing ledger this process books in.
    pub fn hand_over_ledger(&mut self, fd: Option<Arc<OwnedFd>>) {
        self.ledger = fd;
    }

    /// SIGUSR2: the successor is started now when this relay is `ready`, else once it is
    /// ([`Upgrade::start_if_asked`]): a package upgrade signals a unit still starting too,
    /// and a request dropped would leave it on the old binary.
    pub fn ask(&mut self, ready: bool) {
        if !ready && !self.asked {
            println!("upgrade: deferred until this relay is ready");
        }
        self.asked = true;
    }

    /// Starts the successor asked for, once this relay is `ready`.
    pub fn start_if_asked(&mut self, ready: bool, manager: &mut Manager) {
        if self.asked && ready {
            self.asked = false;
            self.start(manager);
        }
    }

    /// Starts the successor, unless one is already taking over.
    fn start(&mut self, manager: &mut Manager) {
        match (&self.successor, &self.exe) {
            (Some(c), _) => {
                if !self.again {
                    println!(
                        "upgrade: pid {} is already taking over; it is asked to upgrade in \
                         turn once it has",
                        c.id()
                    );
                }
                self.again = true;
            }
            (None, None) => eprintln!("bundle-relay: upgrade: this binary's path is unknown"),
            (None, Some(exe)) => {
                let mut cmd = Command::new(exe);
                cmd.args(without_takeover(&self.args))
                    .arg("--takeover")
                    .arg(std::process::id().to_string());
                if let Some(fd) = &self.ledger {
                    let fd = fd.as_raw_fd();
                    cmd.arg("--ledger-fd").arg(fd.to_string());
                    // SAFETY: fcntl is async-signal-safe; it clears close-on-exec in the child
                    // only, so this one descriptor survives its exec.
                    unsafe {
                        cmd.pre_exec(move || {
                            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                                return Err(std::io::Error::last_os_error());
                            }
                            Ok(())
                        });
                    }
                }
                match cmd.spawn() {
                    Ok(c) => {
                        let line = format!(
                            "upgrade: started {} as pid {}; serving until it is ready",
                            exe.display(),
                            c.id()
                        );
                        println!("{line}");
                        manager.status(&line);
                        self.successor = Some(c);
                    }
                    Err(e) => {
                        eprintln!("bundle-relay: upgrade: cannot start {}: {e}", exe.display())
                    }
                }
            }
        }
    }

    /// Stops a successor that has not taken over (this relay is being stopped): SIGTERM, on
    /// which it drains what it has (nothing: it does not listen yet) and exits; reaped if it
    /// does within a second.
    pub fn stop(&mut self) {
        let Some(mut c) = self.successor.take() else {
            return;
        };
        println!("upgrade: stopping pid {}, which has not taken over", c.id());
        // SAFETY: a signal to our own child, not yet reaped (its pid is still ours).
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while std::time::Instant::now() < until {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The successor took over (its SIGQUIT): where SIGUSR2 came again meanwhile, or comes
    /// now (`asked_now`: in the same tick as the SIGQUIT), it is passed on, so the process
    /// serving from now on starts the binary on disk now. Sent only now, since the successor
    /// installs its handlers before it takes over, and SIGUSR2's default would end it; one
    /// still becoming ready keeps it until it is ([`Upgrade::ask`]). Not in a stop
    /// (`stopping`): the unit is going, the successor with it.
    pub fn taken_over(&mut self, asked_now: bool, stopping: bool) {
        let Some(c) = self.successor.take() else {
            return;
        };
        let again = std::mem::take(&mut self.again) | std::mem::take(&mut self.asked) | asked_now;
        if again && !stopping {
            println!(
                "upgrade: asked again meanwhile: passing SIGUSR2 on to pid {}",
                c.id()
            );
            // SAFETY: a signal to our own child, not yet reaped (its pid is still ours).
            unsafe { libc::kill(c.id() as i32, libc::SIGUSR2) };
        }
    }

    /// Reaps a successor that exited before taking over, and says so: this relay serves on,
    /// and a later SIGUSR2 may try again; one that came while it was coming up tries again
    /// now.
    pub fn poll(&mut self, manager: &mut Manager) {
        if let Some(c) = &mut self.successor
            && let Ok(Some(status)) = c.try_wait()
        {
            let line = format!(
                "upgrade failed: pid {} exited ({status}); still serving",
                c.id()
            );
            eprintln!("bundle-relay: {line}");
            manager.stand(super::systemd::Standing::Upgrade, Some(&line));
            manager.status(&line);
            self.successor = None;
            self.asked |= std::mem::take(&mut self.again);
        }
    }
}

/// The binary a successor runs: the absolute path this process was started by (`argv[0]`),
/// as it was named, so a symlink repointed to a new release starts that release; else this
/// process's own (`current_exe`, which resolves links).
fn exe_to_start(argv0: Option<OsString>, current: Option<PathBuf>) -> Option<PathBuf> {
    argv0
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or(current)
}

/// The command line again without a `--takeover PID` or `--ledger-fd FD` of its own (a relay
/// that took over once and is upgraded again).
fn without_takeover(args: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut skip = false;
    for a in args {
        if std::mem::replace(&mut skip, false) {
            continue;
        }
        let text = a.to_string_lossy();
        if a == "--takeover" || a == "--ledger-fd" {
            skip = true;
        } else if !text.starts_with("--takeover=") && !text.starts_with("--ledger-fd=") {
            out.push(a.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    /// A relay started through `/usr/local/bin/bundle-relay -> /opt/bundle-relay/1.2/…`,
    /// the link then repointed at 1.3: SIGUSR2 starts what the link names now, not 1.2 (the
    /// link's target, which `current_exe` gives). Started by a bare name, from PATH, it is
    /// `current_exe`'s.
    #[test]
    fn the_successor_runs_the_path_the_relay_was_started_by_not_where_a_link_led() {
        let link = Some(OsString::from("/usr/local/bin/bundle-relay"));
        let target = Some(PathBuf::from("/opt/bundle-relay/1.2/bundle-relay"));
        assert_eq!(
            exe_to_start(link, target.clone()),
            Some(PathBuf::from("/usr/local/bin/bundle-relay"))
        );
        assert_eq!(
            exe_to_start(Some(OsString::from("bundle-relay")), target.clone()),
            target
        );
        assert_eq!(exe_to_start(None, target.clone()), target);
    }

    /// An upgrade whose successor is `sleep 10` (SIGUSR2 ends it, so what it got shows in how
    /// it ended), asked again (`again`) or not.
    fn taking_over(again: bool) -> Upgrade {
        let successor = Command::new("sleep").arg("10").spawn().unwrap();
        Upgrade {
            exe: None,
            args: Vec::new(),
            successor: Some(successor),
            ledger: None,
            asked: false,
            again,
        }
    }

    /// The signal that ended `u`'s successor, which `taken_over` let go of (`pid`).
    fn ended_by(pid: u32) -> Option<i32> {
        // SAFETY: waits on our own child, which `taken_over` did not reap.
        let mut status = 0;
        let got = unsafe { libc::waitpid(pid as i32, &mut status, 0) };
        assert_eq!(got, pid as i32);
        libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status))
    }

    /// | SIGUSR2 again while it took over | SIGUSR2 in the tick of its SIGQUIT | stopping | passed on |
    #[test]
    fn an_upgrade_asked_while_the_successor_came_up_or_as_it_took_over_is_passed_on_unless_stopping()
     {
        let rows = [
            (false, false, false, false),
            (true, false, false, true),
            (false, true, false, true),
            (true, true, true, false),
            (true, false, true, false),
        ];
        for (again, asked_now, stopping, passed) in rows {
            let mut u = taking_over(again);
            let pid = u.successor.as_ref().unwrap().id();
            u.taken_over(asked_now, stopping);
            assert!(
                u.successor.is_none(),
                "it is no longer this relay's successor"
            );
            if !passed {
                // SAFETY: our own child, not yet reaped.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
            let sig = ended_by(pid);
            let want = if passed { libc::SIGUSR2 } else { libc::SIGTERM };
            assert_eq!(sig, Some(want), "{again} {asked_now} {stopping}");
        }
    }

    #[test]
    fn a_successor_gets_the_command_line_without_the_takeover_it_was_started_with() {
        let got = without_takeover(&args(&[
            "run",
            "--config",
            "relay.toml",
            "--takeover",
            "41",
            "--drain-ms",
            "100",
            "--takeover=42",
            "--ledger-fd",
            "5",
            "--ledger-fd=6",
        ]));
        assert_eq!(
            got,
            args(&["run", "--config", "relay.toml", "--drain-ms", "100"])
        );
    }
}
