//! Jito's facts: the regions, the tip accounts, the pacing rule and the error codes and texts
//! bots and engines exchange (`../shared/jito-facts.md`). One home, read by the config, the
//! relay and the bench; nothing else spells them out.

/// Writes the tip-account list once, as an array and as the JSON text `getTipAccounts`
/// answers, so the two cannot disagree.
macro_rules! tip_accounts {
    ($($key:literal),+ $(,)?) => {
        /// Jito's mainnet tip accounts (base58), in Jito's order.
        pub const TIP_ACCOUNTS: [&str; 8] = [$($key),+];
        /// [`TIP_ACCOUNTS`] as the JSON array `getTipAccounts` answers until an engine's own
        /// answer replaces it.
        pub const TIP_ACCOUNTS_JSON: &[u8] = tip_accounts!(@json $($key),+).as_bytes();
    };
    (@json $first:literal $(, $key:literal)*) => {
        concat!("[\"", $first, "\"", $(",\"", $key, "\"",)* "]")
    };
}

tip_accounts!(
    "96gYZGLnJYVFmbjzopPSU6QiEV5fGqZNyN9nmNhvrZU5",
    "HFqU5x63VTqvQss8hp11i4wVV8bD44PvwucfZ2bU7gRe",
    "Cw8CFyM9FkoMi7K7Crf6HNQqf4uEMzpKw6QNghXLvLkY",
    "ADaUMid9yfUytqMBgopwjb2DTLSokTSzL1zt6iGPaS49",
    "DfXygSm4jCyNCybVYYK6DwvWqjKee8pbDmJGcLWNDXjh",
    "ADuUkR4vqLUMWXxW9gh6D6L8pMSawimctcNZ5pGwDcEt",
    "DttWaMuVvTiduZRnguLF7jNxTgiMBZ1hyAumKUiL2KRL",
    "3AVi9Tg9Uo68tJfuvoKvqKNWKkC5wPdSSdeBnizKZ6jT",
);

/// The engine drops bundles tipping less than this (lamports).
pub const TIP_LAMPORTS_MIN: u64 = 1_000;

/// Jito's mainnet regions, in Jito's alphabetical order: the embedded default, the bench and
/// the baseline number regions by this list.
pub const MAINNET_REGIONS: [&str; 8] = [
    "amsterdam",
    "dublin",
    "frankfurt",
    "london",
    "ny",
    "slc",
    "singapore",
    "tokyo",
];

/// Domain under which each mainnet region's block engine lives
/// (`<region>.mainnet.block-engine.jito.wtf`).
pub const MAINNET_DOMAIN: &str = "mainnet.block-engine.jito.wtf";

/// Port of Jito's block engines (TLS, ALPN h2).
pub const ENGINE_PORT: u16 = 443;

/// Where a block engine serves JSON-RPC `sendTransaction`, on the same host as its gRPC.
pub const TRANSACTIONS_PATH: &str = "/api/v1/transactions";

/// Where a block engine serves JSON-RPC `sendBundle` and the bundle-status calls
/// (`getBundleStatuses`, `getInflightBundleStatuses`), on the same host as its gRPC.
pub const BUNDLES_PATH: &str = "/api/v1/bundles";

/// How far back `getInflightBundleStatuses` answers: a bundle received longer ago is
/// `Invalid` ("not in our system", five-minute look-back in Jito's docs).
pub const INFLIGHT_LOOKBACK_MS: u64 = 300_000;

/// Jito's default rule: one request per second per (source IP, region).
pub const INTERVAL_MS_DEFAULT: u64 = 1_000;

/// JSON-RPC 2.0's codes, as Jito answers them.
pub mod code {
    /// Invalid JSON.
    pub const PARSE_ERROR: i32 = -32700;
    /// Valid JSON that is not a valid request object.
    pub const INVALID_REQUEST: i32 = -32600;
    /// The method does not exist.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// The params do not fit the method; Jito also uses it for rejected bundles.
    pub const INVALID_PARAMS: i32 = -32602;
    /// Internal error.
    pub const INTERNAL: i32 = -32603;
    /// Rate limited or congested (answered with HTTP 429).
    pub const RATE_LIMITED: i32 = -32097;
    /// The relay's own, in JSON-RPC's server range: no tenant matched and one is required
    /// (answered with HTTP 401).
    pub const UNAUTHORIZED: i32 = -32001;
    /// The relay's own: the tenant may not do this (disabled, or a region not its own; HTTP 403).
    pub const FORBIDDEN: i32 = -32003;
}

/// The text of a per-source rate limit before its wait (`… Retry after 1606ms`): clients and
/// the relay's own parser read the wait from it.
pub const RETRY_AFTER_PREFIX: &str = "Retry after ";

/// The engine's answer when it throttles everyone, whatever the source: more addresses do not
/// help, other regions do.
pub const GLOBAL_THROTTLE_MESSAGE: &str = "Network congested. Endpoint is globally rate limited.";

/// The engine's per-source rate-limit message for a wait of `retry_ms`, worded as Jito words it.
pub fn rate_limit_message(retry_ms: u64) -> String {
    format!(
        "Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: {RETRY_AFTER_PREFIX}{retry_ms}ms"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tip_accounts_json_lists_the_tip_accounts_in_order() {
        let json = std::str::from_utf8(TIP_ACCOUNTS_JSON).unwrap();
        let listed: Vec<&str> = json
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(|k| k.trim_matches('"'))
            .collect();
        assert_eq!(listed, TIP_ACCOUNTS);
    }

    #[test]
    fn the_rate_limit_text_carries_its_wait_after_the_prefix() {
        let text = rate_limit_message(1606);
        assert!(text.ends_with("Retry after 1606ms"), "{text}");
    }
}
