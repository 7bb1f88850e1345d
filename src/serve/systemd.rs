//! What the relay tells its service manager: READY=1, RELOADING=1, STOPPING=1, STATUS=,
//! WATCHDOG=1 and MAINPID=, over [`Notifier`].
//!
//! What it is: the one place a failed notification is reported (once: a manager that stopped
//! listening would otherwise fill the log every tick). What it is NOT: the protocol (that is
//! `notify`), nor the decision when to say what (readiness, the watchdog, takeover decide).

use crate::notify::Notifier;

/// The service manager as the supervision loop speaks to it.
pub struct Manager {
    notifier: Notifier,
    /// Set on the first failed send, after which failures are not reported again.
    failed: bool,
    /// Lines STATUS= keeps in front of whatever it says next, one per [`Standing`], until
    /// [`Manager::stand`] clears it: a refused reload or a failed upgrade leaves the relay
    /// serving on what it had, and the totals said every 10 s must not push that out of
    /// `systemctl status`.
    standing: [Option<String>; 3],
}

/// What a standing line is about: each is cleared only by what mends it, so a tenants
/// document applied does not hide that the config file was refused, nor any reload that the
/// relay still runs the binary an upgrade failed to replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The config file's last reload was refused.
    File = 0,
    /// The `[tenants_from]` document's last reload was refused.
    Tenants = 1,
    /// The last upgrade failed.
    Upgrade = 2,
}

impl Manager {
    /// The manager named by `$NOTIFY_SOCKET`; when it names a socket that cannot be used the
    /// unit is broken, and the error says so before anything starts rather than the relay
    /// being restarted for never reporting ready.
    pub fn from_env() -> Result<Manager, String> {
        let notifier = Notifier::from_env().map_err(|e| e.to_string())?;
        Ok(Manager {
            notifier,
            failed: false,
            standing: [None, None, None],
        })
    }

    /// Keeps `line` about `what` in front of every STATUS= from now on; `None` stops it.
    pub fn stand(&mut self, what: Standing, line: Option<&str>) {
        self.standing[what as usize] = line.map(str::to_string);
    }

    /// `status` with the standing lines in front, in [`Standing`] order (each once: not when
    /// it is `status`).
    fn said(&self, status: &str) -> String {
        let mut out = String::new();
        for s in self.standing.iter().flatten().filter(|s| *s != status) {
            out.push_str(s);
            out.push_str("; ");
        }
        out.push_str(status);
        out
    }

    /// While muted nothing is sent: a process taking over is not yet the unit's main process
    /// (a STOPPING=1 from it would stop the unit), and one taken over is no longer it.
    pub fn set_muted(&self, muted: bool) {
        self.notifier.set_muted(muted);
    }

    pub fn ready(&mut self, status: &str) {
        let sent = self.notifier.ready(&self.said(status));
        self.report("READY=1", sent);
    }

    pub fn status(&mut self, status: &str) {
        let sent = self.notifier.status(&self.said(status));
        self.report("STATUS=", sent);
    }

    pub fn reloading(&mut self) {
        let sent = self.notifier.reloading();
        self.report("RELOADING=1", sent);
    }

    /// STOPPING=1 and `status`, asking for `need` (and the exit's margin) before a kill.
    pub fn stopping(&mut self, status: &str, need: std::time::Duration) {
        let sent = self.notifier.stopping(status, need);
        self.report("STOPPING=1", sent);
    }

    pub fn watchdog(&mut self) {
        let sent = self.notifier.watchdog();
        self.report("WATCHDOG=1", sent);
    }

    /// MAINPID= this process, with READY=1 and `status`: this process is the unit now.
    pub fn main_pid_ready(&mut self, status: &str) {
        let sent = self.notifier.main_pid_ready(status);
        self.report("MAINPID=", sent);
    }

    fn report(&mut self, what: &str, sent: std::io::Result<()>) {
        if let Err(e) = sent
            && !std::mem::replace(&mut self.failed, true)
        {
            eprintln!("bundle-relay: telling the service manager {what} failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager() -> Manager {
        Manager {
            notifier: Notifier::none(),
            failed: false,
            standing: [None, None, None],
        }
    }

    #[test]
    fn a_tenants_document_applied_keeps_a_refused_config_file_and_a_failed_upgrade_in_the_status() {
        let mut m = manager();
        let file = "config reload refused, generation 2 kept: line 3: bad";
        let upgrade = "upgrade failed: pid 9 exited (exit status: 75); still serving";
        m.stand(Standing::Upgrade, Some(upgrade));
        m.stand(Standing::File, Some(file));
        // The tenants document reloads and applies.
        m.stand(Standing::Tenants, None);
        assert_eq!(
            m.said("config reloaded: generation 3"),
            format!("{file}; {upgrade}; config reloaded: generation 3")
        );
        // The file applies at last: only the upgrade still stands.
        m.stand(Standing::File, None);
        assert_eq!(m.said("serving"), format!("{upgrade}; serving"));
        assert_eq!(m.said(upgrade), upgrade, "said once");
    }
}
