//! One line of the `check-host` report: how a check came out, what was found and wanted, the fix.

use std::fmt;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

impl Level {
    fn label(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "fail",
        }
    }
}

/// One line of the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub level: Level,
    pub name: String,
    pub found: String,
    pub wanted: String,
    /// The command (or change) that fixes it; empty when there is nothing to fix.
    pub fix: String,
}

impl Check {
    pub fn new(
        level: Level,
        name: impl Into<String>,
        found: impl Into<String>,
        wanted: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            level,
            name: name.into(),
            found: found.into(),
            wanted: wanted.into(),
            fix: fix.into(),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<4} {}: found {}; wanted {}",
            self.level.label(),
            self.name,
            self.found,
            self.wanted
        )?;
        if self.level != Level::Ok && !self.fix.is_empty() {
            write!(f, "; fix: {}", self.fix)?;
        }
        Ok(())
    }
}
