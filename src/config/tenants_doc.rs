//! `[tenants_from]`: the tenants served by an HTTP endpoint instead of listed in the file (an
//! operator's customer list lives in its own service), and the JSON document it serves.
//!
//! Exactly one provider holds the tenants: a file with `[tenants_from]` may not also list
//! `[[tenant]]` or `[default_tenant]`. The document has the file's keys in JSON:
//! `{"tenant": [{"name": "alpha", "keys": ["…"], "regions": ["frankfurt"]}], "default_tenant":
//! {…}}`, checked by the same rules. Unlike a file, a document that lists no tenant and no
//! default is refused: an endpoint answering `{}` by mistake must not open the relay to everyone.
//!
//! What it is NOT: the fetch (`serve/fetch.rs`, off the request path, with the timeout); this
//! file only parses and checks what came back.

use serde::Deserialize;

use super::error::ConfigError;
use super::tenants::{FilePolicy, FileTenant};

/// How often the endpoint is polled when the file names no `every_ms`.
pub const EVERY_MS_DEFAULT: u64 = 5_000;
/// How long one poll may take when the file names no `timeout_ms`.
pub const TIMEOUT_MS_DEFAULT: u64 = 1_000;
/// A poll that takes longer is an endpoint that is down; stopping the relay waits for one.
pub const TIMEOUT_MS_MAX: u64 = 60_000;

/// Where the tenants come from, and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantsFrom {
    /// As written (`http://host:port/path`).
    pub url: String,
    pub host: String,
    pub port: u16,
    /// Path and query, `/` when the URL has none.
    pub path: String,
    pub every_ms: u64,
    /// Connect, send and read together.
    pub timeout_ms: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTenantsFrom {
    url: String,
    every_ms: Option<u64>,
    timeout_ms: Option<u64>,
}

/// Checks `[tenants_from]`.
pub(super) fn tenants_from(origin: &str, f: FileTenantsFrom) -> Result<TenantsFrom, ConfigError> {
    let err = |k: &str, m: String| ConfigError::new(origin, format!("tenants_from.{k}"), m);
    let (host, port, path) = parse_http_url(&f.url).map_err(|m| err("url", m))?;
    let every_ms = f.every_ms.unwrap_or(EVERY_MS_DEFAULT);
    if !(100..=3_600_000).contains(&every_ms) {
        return Err(err(
            "every_ms",
            format!("must be 100 to 3600000 ms, got {every_ms}"),
        ));
    }
    let timeout_ms = f.timeout_ms.unwrap_or(TIMEOUT_MS_DEFAULT.min(every_ms));
    let most = every_ms.min(TIMEOUT_MS_MAX);
    if timeout_ms == 0 || timeout_ms > most {
        return Err(err(
            "timeout_ms",
            format!(
                "must be 1 to {most} ms (every_ms, and at most {TIMEOUT_MS_MAX}), got {timeout_ms}"
            ),
        ));
    }
    Ok(TenantsFrom {
        url: f.url,
        host,
        port,
        path,
        every_ms,
        timeout_ms,
    })
}

/// `http://host[:port][/path]` into its parts; `https` and anything else is refused with why.
fn parse_http_url(url: &str) -> Result<(String, u16, String), String> {
    // The host and path go into the request line and Host header as they are.
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{url:?}: a space or control character; percent-encode it in the path"
        ));
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(if url.starts_with("https://") {
            format!(
                "{url:?}: https is not supported here; serve the tenants over http on loopback \
                 or a private network (the document holds key digests, not keys, when it uses \
                 key_sha256)"
            )
        } else {
            format!("{url:?}: expected http://host[:port]/path")
        });
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((h, after)) = v6.split_once(']') else {
            return Err(format!("{url:?}: unclosed '[' in the host"));
        };
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{url:?}: no host"));
    }
    let port = match port {
        None => 80,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("{url:?}: port {p:?} is not 1 to 65535"))?,
    };
    Ok((host.to_string(), port, path.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    #[serde(default)]
    tenant: Vec<FileTenant>,
    default_tenant: Option<FilePolicy>,
}

/// The document's tenants and default, before they are checked (by the file's rules, in
/// `load.rs`); `origin` names the document in errors.
pub(super) fn parse(
    text: &str,
    origin: &str,
) -> Result<(Vec<FileTenant>, Option<FilePolicy>), ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let doc: Doc = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        let (line, column) = (inner.line(), inner.column());
        // The location is shown once, as the file's errors show it.
        let message = inner.to_string();
        let at = format!(" at line {line} column {column}");
        ConfigError {
            origin: origin.to_string(),
            key: if key == "." { String::new() } else { key },
            location: Some((line, column)),
            message: message.strip_suffix(&at).unwrap_or(&message).to_string(),
            transient: false,
        }
    })?;
    // One document: whatever follows it (but white space) is refused, not ignored.
    de.end().map_err(|e| ConfigError {
        origin: origin.to_string(),
        key: String::new(),
        location: Some((e.line(), e.column())),
        message: "trailing characters after the document".to_string(),
        transient: false,
    })?;
    if doc.tenant.is_empty() && doc.default_tenant.is_none() {
        return Err(ConfigError::new(
            origin,
            "",
            "the document lists no tenant and no default_tenant, which would let anyone \
             in: give a default_tenant to serve everyone",
        ));
    }
    Ok((doc.tenant, doc.default_tenant))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_url_splits_into_host_port_and_path() {
        let p = |u: &str| parse_http_url(u);
        assert_eq!(
            p("http://127.0.0.1:9300/tenants?v=1").unwrap(),
            ("127.0.0.1".into(), 9300, "/tenants?v=1".into())
        );
        assert_eq!(
            p("http://billing.internal").unwrap(),
            ("billing.internal".into(), 80, "/".into())
        );
        assert_eq!(
            p("http://[::1]:81/t").unwrap(),
            ("::1".into(), 81, "/t".into())
        );
        assert!(
            p("https://x/t")
                .unwrap_err()
                .contains("https is not supported")
        );
        assert!(p("ftp://x/t").unwrap_err().contains("expected http://"));
        assert!(p("http://x:0/").unwrap_err().contains("not 1 to 65535"));
        assert!(p("http://:80/").unwrap_err().contains("no host"));
    }

    #[test]
    fn an_http_url_with_a_space_or_control_character_is_refused_when_read() {
        for u in [
            "http://a b:80/t",
            "http://127.0.0.1:9300/a b",
            "http://x/t\r\nHost: y",
        ] {
            let e = parse_http_url(u).unwrap_err();
            assert!(e.contains("space or control character"), "{u:?}: {e}");
        }
    }
}
