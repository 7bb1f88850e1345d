//! The one error type of configuration loading: where (file, key path, line) and what.

use std::fmt;

/// A configuration that cannot be used, with the file, the key path and what was wrong.
///
/// Displays as `config.toml: region[2].interval_ms: must be at least 1, got 0`, or with the
/// parser's position when it knows one: `config.toml:12:1: region[2]: unknown field ...`.
/// Array indexes in key paths count from 0, as in the parser's own messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as it was named, or `<embedded default>`, `<resolve>`, or a caller's label.
    pub origin: String,
    /// Dotted key path (`egress.addresses[3]`); empty when the error concerns the whole file.
    pub key: String,
    /// What was wrong, with the offending value.
    pub message: String,
    /// 1-based line and column, when the TOML parser located the problem.
    pub location: Option<(usize, usize)>,
    /// What the network said at that moment (a host name that did not resolve), not what the
    /// file says: the same file may load later.
    pub transient: bool,
}

impl ConfigError {
    pub(crate) fn new(origin: &str, key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            origin: origin.to_string(),
            key: key.into(),
            message: message.into(),
            location: None,
            transient: false,
        }
    }

    /// The same error, marked [`ConfigError::transient`].
    pub(crate) fn transient(self) -> Self {
        ConfigError {
            transient: true,
            ..self
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some((line, column)) = self.location {
            write!(f, ":{line}:{column}")?;
        }
        f.write_str(": ")?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line and column of byte `offset` in `text` (columns count characters).
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}
