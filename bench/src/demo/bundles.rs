//! The really signed bundles a run sends, generated once before its first step and reused by
//! every step (and by every run of `--compare` and the switch-cost modes), with the generation
//! rate shown while it runs.

use std::time::Instant;

use super::DemoConfig;
use crate::txgen::{self, GeneratedBundle, TxGenConfig};

/// Bundles generated per progress line; generation runs on every core within a chunk.
const CHUNK_BUNDLES: u64 = 2_000;

/// Pre-generated, really signed bundles, reusable by any number of runs.
pub struct PreparedLoad {
    pub bundles: Vec<GeneratedBundle>,
    pub transactions: u64,
    pub seconds: f64,
}

/// Generates `count` bundles with `cfg`'s seed and mixes.
pub fn generate(cfg: &DemoConfig, count: u64) -> Result<PreparedLoad, String> {
    let gen_cfg = TxGenConfig {
        seed: cfg.seed,
        run_id: 1,
        txs_mix: cfg.txs_mix.clone(),
        encoding_mix: cfg.encoding_mix.clone(),
        host: "127.0.0.1".into(),
        auth: (cfg.tenants > 0).then(|| super::relay::DEMO_TENANT_KEY.to_string()),
        ..TxGenConfig::default()
    };
    if cfg.progress {
        eprintln!("bench-demo: generating {count} signed bundles ...");
    }
    let load = generate_in_chunks(gen_cfg, count, cfg.progress)?;
    if cfg.progress {
        eprintln!(
            "bench-demo: generated {} bundles ({} transactions) in {:.2} s: {:.0} bundles/s",
            load.bundles.len(),
            load.transactions,
            load.seconds,
            load.bundles.len() as f64 / load.seconds.max(1e-9)
        );
    }
    Ok(load)
}

/// Generates in chunks so the rate can be shown while it runs.
fn generate_in_chunks(
    cfg: TxGenConfig,
    count: u64,
    progress: bool,
) -> Result<PreparedLoad, String> {
    let start = Instant::now();
    let mut bundles = Vec::with_capacity(count as usize);
    let mut transactions = 0;
    let mut first = 0;
    while first < count {
        let n = CHUNK_BUNDLES.min(count - first);
        let (part, stats) = txgen::generate(cfg.clone(), first, n).map_err(|e| e.to_string())?;
        transactions += stats.transactions;
        bundles.extend(part);
        first += n;
        if progress {
            let s = start.elapsed().as_secs_f64();
            eprintln!(
                "bench-demo: generated {first}/{count} bundles, {:.0} bundles/s",
                first as f64 / s.max(1e-9)
            );
        }
    }
    Ok(PreparedLoad {
        bundles,
        transactions,
        seconds: start.elapsed().as_secs_f64(),
    })
}
