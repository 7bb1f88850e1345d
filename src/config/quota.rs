//! `[quota]`: the store that makes a tenant's `global_rate` hold across relays (Redis), and
//! how the relay leases from it. Checked here; the leasing is `quota` (arithmetic) and
//! `serve/lease.rs` (the thread that talks to the store).

use serde::Deserialize;

use super::error::ConfigError;

/// Keys are `PREFIX` + tenant name + `:` + the second; this prefix when the file names none.
pub const KEY_PREFIX_DEFAULT: &str = "bundle-relay:quota:";
/// A longer prefix is a typo (keys go out on every lease).
pub const KEY_PREFIX_BYTES_MAX: usize = 64;
/// One store round trip (connect, send, read) when the file names no `timeout_ms`: Redis on
/// the same network answers in well under a millisecond, so 100 ms is an outage.
pub const TIMEOUT_MS_DEFAULT: u64 = 100;
/// The lease thread waits this long at most per round trip; longer and the balances it keeps
/// topped up drain while it waits.
pub const TIMEOUT_MS_MAX: u64 = 5_000;

/// The quota store and the lease size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    /// `host:port` of the Redis server, as written.
    pub redis: String,
    pub key_prefix: String,
    /// Requests asked of the store per lease; `None`: a twentieth of each tenant's global rate
    /// (at least 1). Never more than the tenant's global rate.
    pub lease_chunk: Option<u32>,
    /// Connect, send and read of one round trip, each.
    pub timeout_ms: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileQuota {
    redis: String,
    key_prefix: Option<String>,
    lease_chunk: Option<u32>,
    timeout_ms: Option<u64>,
}

/// Checks `[quota]`.
pub(super) fn quota(origin: &str, f: FileQuota) -> Result<Quota, ConfigError> {
    let err = |k: &str, m: String| ConfigError::new(origin, format!("quota.{k}"), m);
    let redis = f.redis.trim().to_string();
    if redis.contains('@') {
        // Never echoed: what precedes the @ is a password.
        return Err(err(
            "redis",
            "host:port only, without a user or password (the value is not shown): the relay \
             does not log in to Redis, so give it a store reachable without one"
                .to_string(),
        ));
    }
    if redis.contains('/') {
        let after = redis.split_once("://").map_or(redis.as_str(), |(_, r)| r);
        let bare = after.split('/').next().unwrap_or_default();
        return Err(err(
            "redis",
            if bare.is_empty() {
                format!(
                    "{redis:?}: host:port of a Redis server over TCP (a socket path or a \
                     database number is not taken)"
                )
            } else {
                format!(
                    "{redis:?} is a URL: give host:port, like {bare:?} (a database number is \
                     not taken)"
                )
            },
        ));
    }
    let (host, port) = if redis.starts_with('[') {
        redis
            .split_once("]:")
            .map_or(("", ""), |(h, p)| (&redis[..h.len() + 1], p))
    } else {
        redis.rsplit_once(':').unwrap_or(("", ""))
    };
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(err(
            "redis",
            format!("{redis:?}: an IPv6 address goes in brackets, like \"[::1]:6379\""),
        ));
    }
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
        }
    };
    let port_ok = port.parse::<u16>().is_ok_and(|p| p != 0);
    if !host_ok || !port_ok {
        return Err(err(
            "redis",
            format!("{redis:?} is not host:port of a Redis server (like \"127.0.0.1:6379\")"),
        ));
    }
    let key_prefix = f
        .key_prefix
        .unwrap_or_else(|| KEY_PREFIX_DEFAULT.to_string());
    if key_prefix.len() > KEY_PREFIX_BYTES_MAX || !key_prefix.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(err(
            "key_prefix",
            format!(
                "{key_prefix:?}: at most {KEY_PREFIX_BYTES_MAX} printable characters without \
                 spaces"
            ),
        ));
    }
    if let Some(c) = f.lease_chunk
        && (c == 0 || c > super::tenants::RATE_MAX)
    {
        return Err(err(
            "lease_chunk",
            format!(
                "must be 1 to {} requests, got {c}",
                super::tenants::RATE_MAX
            ),
        ));
    }
    let timeout_ms = f.timeout_ms.unwrap_or(TIMEOUT_MS_DEFAULT);
    if timeout_ms == 0 || timeout_ms > TIMEOUT_MS_MAX {
        return Err(err(
            "timeout_ms",
            format!("must be 1 to {TIMEOUT_MS_MAX} ms, got {timeout_ms}"),
        ));
    }
    Ok(Quota {
        redis,
        key_prefix,
        lease_chunk: f.lease_chunk,
        timeout_ms,
    })
}

impl Quota {
    /// The chunk a tenant of global rate `rate` leases: the configured one, else a twentieth
    /// of the rate, never above the rate, at least 1.
    pub fn chunk_for(&self, rate: u32) -> u32 {
        self.lease_chunk.unwrap_or(rate / 20).clamp(1, rate.max(1))
    }
}
