//! What the `bundle-relay hist` tests share: a fresh folder, the command's arguments with
//! nothing selected, and its command line as clap reads it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use bundle_relay::hist::{HistArgs, Unit};

pub fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "bundle-relay-{name}-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `bundle-relay hist FILES…` with every option at its default.
pub fn args(files: Vec<PathBuf>) -> HistArgs {
    HistArgs {
        files,
        from: None,
        to: None,
        tag: None,
        unit: Unit::Us,
        plot: None,
        plot_over_time: None,
    }
}

#[derive(clap::Parser)]
pub struct Cli {
    #[command(flatten)]
    pub hist: HistArgs,
}
