//! The plan a relay starts from: the config (a file with its command-line overrides, or the
//! embedded default), the relay's spec, the host checked against both, and the memory budget,
//! each printed. `run --check` stops here.
//!
//! What it is NOT: the start. Nothing is bound or spawned; every error is one the operator
//! fixes in the config, the flags or the host.

use std::path::Path;

use crate::budget::{Budget, BudgetInputs};
use crate::config::{Config, Overrides, Resolve};
use crate::probe;
use crate::relay::Spec;

/// The checked config and the spec derived from it.
pub struct Plan {
    pub cfg: Config,
    pub spec: Spec,
    /// The `[tenants_from]` document the tenants came from.
    pub tenants_doc: Option<String>,
}

/// Loads, checks and prints the plan. `no_metrics` turns the metrics off whatever the config
/// says; `hlog` is whether the histograms are to be written, which needs them on.
pub fn plan(
    path: Option<&Path>,
    overrides: &Overrides,
    no_metrics: bool,
    hlog: bool,
) -> Result<Plan, String> {
    let mut cfg = load_config(path, overrides)?;
    // Tenants from an endpoint: no valid document, no start (the relay would not know whom to
    // serve).
    let tenants_doc = match cfg.tenants_from.clone() {
        Some(from) => {
            let doc = super::fetch::get(&from)
                .map_err(|e| format!("tenants_from: {e}; no tenants, so not starting"))?;
            cfg = cfg
                .with_tenants_json(&doc, &from.url)
                .map_err(|e| e.to_string())?;
            println!(
                "tenants from {}: {} listed{}, polled every {} ms",
                from.url,
                cfg.tenants.list.len(),
                if cfg.tenants.default.is_some() {
                    " and a default"
                } else {
                    ""
                },
                from.every_ms
            );
            Some(doc)
        }
        None => None,
    };
    for w in &cfg.warnings {
        println!("warning: {w}");
    }
    let spec = Spec::from_config(&cfg).map_err(|e| e.to_string())?;
    let spec = Spec {
        metrics: spec.metrics && !no_metrics,
        ..spec
    };
    print_regions(&cfg);
    if !spec.metrics && hlog {
        return Err("--hlog-dir writes the metrics' histograms, which are off \
                    (--no-metrics or [admin] metrics = false)"
            .to_string());
    }
    let report = probe::check(&cfg).map_err(|e| e.to_string())?;
    println!("{report}");
    print_budget(&cfg, &spec);
    Ok(Plan {
        cfg,
        spec,
        tenants_doc,
    })
}

/// The config at `path` with `overrides`, or without a path the embedded default (which the
/// overrides, made to change a file, may not touch).
fn load_config(path: Option<&Path>, overrides: &Overrides) -> Result<Config, String> {
    let cfg = match path {
        Some(p) => Config::load_overridden(p, Resolve::Now, overrides),
        None if (
            overrides.resolve.len(),
            &overrides.ca_file,
            &overrides.egress,
        ) != (0, &None, &None) =>
        {
            return Err(
                "--resolve, --ca-file and --egress change a --config file; give one".to_string(),
            );
        }
        None => {
            println!("no --config: using the embedded default (Jito mainnet, 8 regions)");
            let mut cfg = Config::embedded_default();
            cfg.regions
                .iter_mut()
                .try_for_each(|r| r.resolve())
                .and_then(|()| match &overrides.tenants {
                    Some(doc) => cfg.with_tenants_json(doc, "--tenants"),
                    None => Ok(cfg),
                })
        }
    };
    cfg.map_err(|e| e.to_string())
}

fn print_regions(cfg: &Config) {
    if let Some(s) = cfg.egress.slice {
        println!(
            "egress slice {}/{}: sources {} to {} of the {} listed",
            s.k,
            s.n,
            s.first + 1,
            s.first + cfg.egress.sources.len(),
            s.pool
        );
    }
    for r in &cfg.regions {
        let how = if r.tls {
            format!("TLS, SNI {}", r.sni.as_deref().unwrap_or(&r.host))
        } else {
            "plaintext".to_string()
        };
        println!(
            "region {}: {}:{} -> {:?} ({how}, {} ms per pair)",
            r.name, r.host, r.port, r.addrs, r.interval_ms
        );
    }
}

fn print_budget(cfg: &Config, spec: &Spec) {
    let budget = Budget::new(BudgetInputs::of(spec));
    println!("{budget}");
    println!(
        "{} threads, {} sources x {} regions = {} pairs, {} open files needed",
        spec.threads,
        spec.sources.len(),
        spec.regions.len(),
        spec.sources.len() * spec.regions.len(),
        cfg.fds_needed()
    );
}
