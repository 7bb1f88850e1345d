//! HdrHistogram interval logs (`.hlog`, the format HistogramLogAnalyzer, the Java
//! `HistogramLogProcessor` and `bundle-relay hist` read) of every histogram of a [`Metrics`]
//! registry.
//!
//! Each [`HlogWriter::tick`] whose interval has elapsed writes one interval per histogram,
//! tagged with [`Metrics::hist_tag`]: the counts recorded since the previous interval (the
//! live histograms are cumulative; the writer keeps the previous cumulative copy and writes the
//! difference), V2 deflate encoded. Interval timestamps are seconds since the writer started,
//! which every file gives as both `StartTime` and `BaseTime`, so the intervals of all the
//! rotated files of one run share one time axis. The max column is in nanoseconds.
//!
//! Rotation, by size: once the current file has reached [`HlogConfig::rotate_bytes`] after an
//! interval, the next interval opens a new file `{prefix}.{start unix secs}.{seq:05}.hlog`;
//! only the newest [`HlogConfig::keep_files`] files of that name in the folder are kept, older
//! ones are deleted, earlier runs' included: every restart and upgrade starts a run, and the
//! folder must not grow by a run's worth each time. Other files are never touched.
//!
//! The writer runs on the admin side (never the request path); it allocates freely.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};

use super::labels::HistId;
use super::registry::Metrics;

/// Default rotation size: a day of 11 histograms every 10 s stays in a few files of this size.
pub const ROTATE_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;
/// Default number of files kept.
pub const KEEP_FILES_DEFAULT: usize = 16;

/// Where and how often interval logs are written.
#[derive(Clone, Debug)]
pub struct HlogConfig {
    /// Directory for the `.hlog` files (created if missing).
    pub dir: PathBuf,
    /// File name prefix.
    pub prefix: String,
    /// Length of one interval.
    pub interval: Duration,
    /// Start a new file once the current one holds this many bytes.
    pub rotate_bytes: u64,
    /// Keep at most this many files (at least 1).
    pub keep_files: usize,
}

impl HlogConfig {
    pub fn new(dir: impl Into<PathBuf>, interval: Duration) -> HlogConfig {
        HlogConfig {
            dir: dir.into(),
            prefix: "bundle-relay".into(),
            interval,
            rotate_bytes: ROTATE_BYTES_DEFAULT,
            keep_files: KEEP_FILES_DEFAULT,
        }
    }
}

struct CountingFile {
    inner: BufWriter<File>,
    bytes: u64,
}

impl Write for CountingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes interval logs of a registry's histograms.
pub struct HlogWriter {
    metrics: Arc<Metrics>,
    cfg: HlogConfig,
    start: SystemTime,
    interval_start: SystemTime,
    ids: Vec<HistId>,
    tags: Vec<String>,
    previous: Vec<Histogram<u64>>,
    file: Option<CountingFile>,
    seq: u64,
    files: VecDeque<PathBuf>,
    serializer: V2DeflateSerializer,
}

fn secs_since(t: SystemTime, since: SystemTime) -> Duration {
    t.duration_since(since).unwrap_or(Duration::ZERO)
}

impl HlogWriter {
    /// A writer whose first interval starts at `now`; creates `cfg.dir`. Counts recorded before
    /// `now` are not logged.
    pub fn new(metrics: Arc<Metrics>, cfg: HlogConfig, now: SystemTime) -> io::Result<HlogWriter> {
        if cfg.interval.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "hlog interval must be > 0",
            ));
        }
        fs::create_dir_all(&cfg.dir)?;
        let files = earlier_runs(&cfg.dir, &cfg.prefix)?;
        // A run started in the same second as an earlier one (a restart loop) numbers its
        // files on from that one's, rather than truncate them.
        let start_secs = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        let seq = files
            .iter()
            .filter_map(|p| order_of(p, &cfg.prefix))
            .filter(|&(secs, _)| secs == start_secs)
            .map(|(_, seq)| seq + 1)
            .max()
            .unwrap_or(0);
        let ids = metrics.hist_ids();
        let tags: Vec<String> = ids.iter().map(|&id| metrics.hist_tag(id)).collect();
        let previous = ids.iter().map(|&id| metrics.histogram(id)).collect();
        Ok(HlogWriter {
            metrics,
            cfg,
            start: now,
            interval_start: now,
            ids,
            tags,
            previous,
            file: None,
            seq,
            files,
            serializer: V2DeflateSerializer::new(),
        })
    }

    /// Writes the interval ending at `now` if a whole interval has passed; returns whether it
    /// wrote.
    pub fn tick(&mut self, now: SystemTime) -> io::Result<bool> {
        if secs_since(now, self.interval_start) < self.cfg.interval {
            return Ok(false);
        }
        self.write_interval(now)?;
        Ok(true)
    }

    /// When the current interval is due, for a caller that sleeps until then.
    pub fn next_due(&self) -> SystemTime {
        self.interval_start + self.cfg.interval
    }

    /// Writes one interval (from the previous one's end to `now`) of every histogram, now.
    ///
    /// The interval is taken before anything is written: a write that fails (a full disk, the
    /// folder removed) loses that interval only. Retried, it would be due again at once, so
    /// the writer's thread would spin and print the error without end, and the next interval
    /// would overlap it. The failed file is cut back to its last whole line and left; the next
    /// interval opens a file of its own, with its own headers.
    pub fn write_interval(&mut self, now: SystemTime) -> io::Result<()> {
        let start_ts = secs_since(self.interval_start, self.start);
        let duration = secs_since(now, self.interval_start);
        let mut lines = Vec::new();
        for (i, &id) in self.ids.iter().enumerate() {
            let current = self.metrics.histogram(id);
            let mut delta = current.clone();
            delta
                .subtract(&self.previous[i])
                .map_err(|e| io::Error::other(format!("histogram {}: {e:?}", self.tags[i])))?;
            let tag = Tag::new(&self.tags[i]).expect("hist_tag strips forbidden characters");
            IntervalLogWriterBuilder::new()
                .begin_log_with(&mut lines, &mut self.serializer)?
                .write_histogram(&delta, start_ts, duration, Some(tag))
                .map_err(|e| io::Error::other(format!("writing {}: {e}", self.tags[i])))?;
            self.previous[i] = current;
        }
        self.interval_start = now;
        if self.file.is_none() {
            self.open_next()?;
        }
        let file = self.file.as_mut().expect("opened above");
        let whole = file.bytes;
        if let Err(e) = file.write_all(&lines).and_then(|()| file.flush()) {
            let file = self.file.take().expect("written above");
            // What the buffer still holds is dropped, not written on drop after the cut.
            let (f, _unwritten) = file.inner.into_parts();
            let _ = f.set_len(whole);
            return Err(e);
        }
        if file.bytes >= self.cfg.rotate_bytes {
            self.file = None;
        }
        Ok(())
    }

    /// The files kept, oldest first: earlier runs' still kept, then this writer's.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(PathBuf::as_path)
    }

    fn open_next(&mut self) -> io::Result<()> {
        let start_unix = self
            .start
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let path = self.cfg.dir.join(format!(
            "{}.{}.{:05}.hlog",
            self.cfg.prefix,
            start_unix.as_secs(),
            self.seq
        ));
        self.seq += 1;
        // The folder may have been removed since (a clean-up by hand): made again.
        fs::create_dir_all(&self.cfg.dir)?;
        let mut f = CountingFile {
            inner: BufWriter::new(File::create(&path)?),
            bytes: 0,
        };
        // A file whose headers did not make it (a full disk) is no log: removed, and not
        // counted among those kept, or a spell of failures would rotate the real ones away.
        if let Err(e) = self.write_headers(&mut f) {
            drop(f.inner.into_parts());
            let _ = fs::remove_file(&path);
            return Err(e);
        }
        self.files.push_back(path);
        while self.files.len() > self.cfg.keep_files.max(1) {
            let old = self.files.pop_front().expect("len > 1");
            match fs::remove_file(&old) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        self.file = Some(f);
        Ok(())
    }

    /// A new file's headers, on disk before any interval: a failed interval cuts the file
    /// back to what is there.
    fn write_headers(&mut self, f: &mut CountingFile) -> io::Result<()> {
        writeln!(f, "#[Histogram log format version 1.3]")?;
        IntervalLogWriterBuilder::new()
            .add_comment(
                "bundle-relay histograms: values in ns; tags relay_overhead, delivery_latency, \
                 limiter_wait, upstream_round_trip.<region>; max column in ns",
            )
            .with_start_time(self.start)
            .with_base_time(self.start)
            .begin_log_with(&mut *f, &mut self.serializer)?;
        writeln!(
            f,
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        )?;
        f.flush()
    }

    /// Runs the writer on its own thread, writing an interval whenever one is due, until
    /// [`HlogThread::stop`], which writes the last (partial) interval.
    ///
    /// Time passes by the monotonic clock from the writer's start on: the wall clock may be
    /// set while it runs (a host whose time is set after a relay started at boot), and
    /// followed, a step back would write no interval for its length and a step forward one
    /// interval spanning it. The files' `StartTime` is the wall clock at the start.
    pub fn spawn(mut self) -> io::Result<HlogThread> {
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let (wall, started) = (self.interval_start, std::time::Instant::now());
        let now = move || wall + started.elapsed();
        let join = thread::Builder::new().name("hlog".into()).spawn(move || {
            loop {
                let wait = secs_since(self.next_due(), now());
                match stop_rx.recv_timeout(wait) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if let Err(e) = self.tick(now()) {
                            // That interval is lost; a full disk must not stop the relay.
                            eprintln!("hlog: {e}");
                        }
                    }
                    _ => return self.write_interval(now()),
                }
            }
        })?;
        Ok(HlogThread { stop_tx, join })
    }
}

/// The files of earlier runs in `dir` named as this writer names its own
/// (`{prefix}.{start unix secs}.{seq}.hlog`), oldest first, so rotation counts them too.
fn earlier_runs(dir: &Path, prefix: &str) -> io::Result<VecDeque<PathBuf>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if let Some(order) = order_of(&path, prefix) {
            found.push((order, path));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// The start second and sequence number a file of this writer's naming carries.
fn order_of(path: &Path, prefix: &str) -> Option<(u64, u64)> {
    let (secs, seq) = path
        .file_name()?
        .to_str()?
        .strip_prefix(prefix)?
        .strip_prefix('.')?
        .strip_suffix(".hlog")?
        .split_once('.')?;
    Some((secs.parse().ok()?, seq.parse().ok()?))
}

/// The thread of [`HlogWriter::spawn`].
pub struct HlogThread {
    stop_tx: mpsc::Sender<()>,
    join: thread::JoinHandle<io::Result<()>>,
}

impl HlogThread {
    /// Writes the last interval and ends the thread.
    pub fn stop(self) -> io::Result<()> {
        let _ = self.stop_tx.send(());
        self.join
            .join()
            .map_err(|_| io::Error::other("hlog thread panicked"))?
    }
}
