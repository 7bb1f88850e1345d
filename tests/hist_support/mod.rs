//! What the `bundle-relay hist` tests share: a fresh folder, the command's arguments with
//! nothing selected, and its command line as clap reads it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bundle_relay::hist::{HistArgs, Unit};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;

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

/// An untagged log with a StartTime and one one-second interval at 0 s holding `values_ns`.
pub fn one_interval_log(path: &Path, values_ns: &[u64]) {
    one_interval_log_at(path, values_ns, 3);
}

/// [`one_interval_log`] at `sigfig` significant figures; the histogram written.
pub fn one_interval_log_at(path: &Path, values_ns: &[u64], sigfig: u8) -> Histogram<u64> {
    let mut f = std::fs::File::create(path).unwrap();
    let mut ser = V2DeflateSerializer::new();
    let mut w = IntervalLogWriterBuilder::new()
        .with_start_time(UNIX_EPOCH + Duration::from_secs(1_764_460_800))
        .begin_log_with(&mut f, &mut ser)
        .unwrap();
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, sigfig).unwrap();
    for &v in values_ns {
        h.record(v).unwrap();
    }
    w.write_histogram(&h, Duration::ZERO, Duration::from_secs(1), None)
        .unwrap();
    h
}

/// `bundle-relay hist FILES…` with every option at its default.
pub fn args(files: Vec<PathBuf>) -> HistArgs {
    HistArgs {
        files,
        from: None,
        to: None,
        tag: None,
        unit: Unit::Us,
        log_unit: Unit::Ns,
        plot: None,
        plot_over_time: None,
    }
}

#[derive(clap::Parser)]
pub struct Cli {
    #[command(flatten)]
    pub hist: HistArgs,
}
