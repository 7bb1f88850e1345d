//! Where a [`Config`] comes from: a file, TOML text, or the embedded default (Jito mainnet).
//! Each path runs the whole of `schema`'s checks; nothing here is on the request path.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use super::error::ConfigError;
use super::host::host_addresses;
use super::model::{
    ADMIN_PORT, Config, ConnectMode, Egress, Intake, Overrides, PING_IDLE_MS_DEFAULT,
    PING_TIMEOUT_MS_DEFAULT, PINNED_PORT_FIRST, ROTATING_PORT, Region, Resolve, Source,
    TCP_USER_TIMEOUT_MS_DEFAULT,
};
use super::schema;
use crate::jito::{ENGINE_PORT, MAINNET_DOMAIN, MAINNET_REGIONS};

/// A config file larger than this is no config file (a thousand tenants take well under 1 MiB).
const CONFIG_FILE_BYTES_MAX: u64 = 64 << 20;

/// The config file's text. Read only if it is a plain file, opened without waiting: a FIFO
/// would hold a reload, and a stop behind it, until something wrote to it.
fn read_text(path: &Path, origin: &str) -> Result<String, ConfigError> {
    let cannot = |why: String| ConfigError::new(origin, "", format!("cannot read the file: {why}"));
    let bytes = schema::read_plain(path, CONFIG_FILE_BYTES_MAX).map_err(|e| {
        cannot(match e {
            schema::Unreadable::Io(e) => e.to_string(),
            schema::Unreadable::NotPlain => "it is not a plain file".to_string(),
            schema::Unreadable::Over(max) => {
                format!("it is over {max} bytes, more than a config file holds")
            }
        })
    })?;
    String::from_utf8(bytes).map_err(|e| {
        cannot(format!(
            "it is not UTF-8 text (byte {} is not)",
            e.utf8_error().valid_up_to()
        ))
    })
}

impl Config {
    /// Reads, validates and resolves a config file ([`Resolve::Now`]).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_with(path, Resolve::Now)
    }

    /// Reads and validates a config file, resolving hosts as `resolve` says. Relative `ca_file`
    /// and `token_file` paths are taken relative to the file's folder.
    pub fn load_with(path: &Path, resolve: Resolve) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = read_text(path, &origin)?;
        let base = path.parent().unwrap_or(Path::new(""));
        schema::from_toml(&text, &origin, base, resolve)
    }

    /// As [`Config::load_with`], with command-line [`Overrides`] applied before validation.
    pub fn load_overridden(
        path: &Path,
        resolve: Resolve,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = read_text(path, &origin)?;
        let base = path.parent().unwrap_or(Path::new(""));
        schema::from_toml_with(&text, &origin, base, resolve, overrides)
    }

    /// Validates TOML text; `origin` names it in errors, relative `ca_file` and `token_file`
    /// paths are taken relative to the current folder.
    pub fn parse(text: &str, origin: &str, resolve: Resolve) -> Result<Config, ConfigError> {
        schema::from_toml(text, origin, Path::new(""), resolve)
    }

    /// This config with its tenants from `text`, the document its `[tenants_from]` endpoint
    /// served (`origin` names it in errors), checked against this config's regions, listeners,
    /// arena and egress groups as the file's own tenants would be.
    pub fn with_tenants_json(&self, text: &str, origin: &str) -> Result<Config, ConfigError> {
        let (list, default) = super::tenants_doc::parse(text, origin)?;
        let names = self.region_names();
        let listeners: Vec<(String, u16, Option<usize>)> = self
            .intake
            .rotating
            .map(|a| ("intake.rotating".to_string(), a.port(), None))
            .into_iter()
            .chain(self.regions.iter().enumerate().filter_map(|(i, r)| {
                r.pinned
                    .map(|a| (format!("region[{i}].pinned"), a.port(), Some(i)))
            }))
            .collect();
        let group_sources = self.egress.group_counts();
        let tenants = super::tenants::build(
            &super::tenants::Frame {
                origin,
                quota: self.quota.is_some(),
                regions: &names,
                listeners: &listeners,
                arena_slots: self.arena_slots,
                bundle_max_age_ms_max: schema::BUNDLE_MAX_AGE_MS_MAX,
                groups: &self.egress.groups,
                group_sources: &group_sources,
                slice: self.egress.slice.map(|s| (s.k, s.n)),
            },
            Some(self.tenants.max),
            list,
            default,
        )?;
        Ok(Config {
            tenants,
            ..self.clone()
        })
    }

    /// Jito mainnet: the 8 regions of [`MAINNET_REGIONS`] over TLS on 443, hosts unresolved (no
    /// network needed to load), pinned intake ports 8081..8088 and rotating 8080 on 127.0.0.1,
    /// admin 127.0.0.1:9464, and egress = this host's own addresses on the interfaces a default
    /// route leaves through ([`host_addresses`]; the others are named in a warning). With no
    /// such address it falls back to 127.0.0.1, with a warning in [`Config::warnings`].
    pub fn embedded_default() -> Config {
        let mut warnings = Vec::new();
        let found = host_addresses();
        if let Ok(h) = &found
            && !h.no_default_route.is_empty()
        {
            let left: Vec<String> = h
                .no_default_route
                .iter()
                .map(|(iface, a)| format!("{a} ({iface})"))
                .collect();
            warnings.push(format!(
                "egress: left out {}: no default route leaves through {}; give [egress] \
                 addresses in a config file to send from {}",
                left.join(", "),
                if left.len() == 1 {
                    "its interface"
                } else {
                    "their interfaces"
                },
                if left.len() == 1 { "it" } else { "them" },
            ));
        }
        let sources = match found {
            Ok(h) if !h.usable.is_empty() => h.usable.into_iter().map(Source::Local).collect(),
            found => {
                let why = match found {
                    Err(e) => format!("listing interfaces failed: {e}"),
                    Ok(h) if !h.no_default_route.is_empty() => {
                        "no interface a default route leaves through has an address".to_string()
                    }
                    Ok(_) => "no interface has a non-loopback address".to_string(),
                };
                warnings.push(format!(
                    "egress: {why}; falling back to 127.0.0.1, which cannot reach Jito's block \
                     engines — give [egress] addresses in a config file"
                ));
                vec![Source::Local(IpAddr::V4(Ipv4Addr::LOCALHOST))]
            }
        };
        let regions: Vec<Region> = MAINNET_REGIONS
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let host = format!("{name}.{MAINNET_DOMAIN}");
                Region {
                    name: name.to_string(),
                    authority: Region::default_authority(&host, ENGINE_PORT),
                    host,
                    port: ENGINE_PORT,
                    addrs: Vec::new(),
                    literal: false,
                    tls: true,
                    sni: None,
                    ca_file: None,
                    ca_digest: 0,
                    interval_ms: crate::jito::INTERVAL_MS_DEFAULT,
                    burst: schema::BURST_DEFAULT,
                    pinned: Some(SocketAddr::new(
                        IpAddr::V4(Ipv4Addr::LOCALHOST),
                        PINNED_PORT_FIRST + i as u16,
                    )),
                    transactions_path: crate::jito::TRANSACTIONS_PATH.to_string(),
                    bundles_path: crate::jito::BUNDLES_PATH.to_string(),
                }
            })
            .collect();
        Config {
            tenants: super::tenants::Tenants::open(),
            tenants_from: None,
            quota: None,
            threads: schema::default_threads_for(sources.len()),
            pin_threads: true,
            reactor: super::model::Reactor::default(),
            handoffs: true,
            arena_slots: schema::ARENA_SLOTS_DEFAULT,
            bundle_max_age_ms: schema::BUNDLE_MAX_AGE_MS_DEFAULT,
            upstream_timeout_ms: schema::UPSTREAM_TIMEOUT_MS_DEFAULT,
            record_keep_s: crate::journal::KEEP_S_DEFAULT,
            record_bundles_max: crate::journal::RECORDS_MAX_DEFAULT,
            leader: super::model::Leader::default(),
            auth: None,
            intake: Intake {
                rotating: Some(SocketAddr::new(
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    ROTATING_PORT,
                )),
                head_bytes_max: schema::HEAD_BYTES_MAX_DEFAULT,
                body_bytes_max: schema::BODY_BYTES_MAX_DEFAULT,
                head_timeout_ms: schema::HEAD_TIMEOUT_MS_DEFAULT,
                idle_timeout_ms: schema::IDLE_TIMEOUT_MS_DEFAULT,
                send_timeout_ms: schema::SEND_TIMEOUT_MS_DEFAULT,
                connections_max: schema::CONNECTIONS_MAX_DEFAULT,
                connections_per_source_max: schema::CONNECTIONS_MAX_DEFAULT
                    / schema::CONNECTIONS_PER_SOURCE_SHARE_DEFAULT,
                unready_ms: 0,
                trusted_proxies: Vec::new(),
            },
            regions,
            egress: Egress {
                source_group: vec![0; sources.len()],
                sources,
                groups: Vec::new(),
                slice: None,
                ledger: None,
                connect: ConnectMode::Eager,
                reconnect_min_ms: schema::RECONNECT_MIN_MS_DEFAULT,
                reconnect_max_ms: schema::RECONNECT_MAX_MS_DEFAULT,
                connect_timeout_ms: schema::CONNECT_TIMEOUT_MS_DEFAULT,
                handshakes_max: schema::HANDSHAKES_MAX_DEFAULT,
                ping_idle_ms: PING_IDLE_MS_DEFAULT,
                ping_timeout_ms: PING_TIMEOUT_MS_DEFAULT,
                tcp_user_timeout_ms: TCP_USER_TIMEOUT_MS_DEFAULT,
            },
            admin: Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), ADMIN_PORT)),
            admin_token: None,
            admin_token_file: None,
            metrics: true,
            warnings,
        }
    }
}
