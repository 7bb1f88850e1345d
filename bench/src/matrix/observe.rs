//! The relay process seen from outside while the matrix runs: its open files and memory (the
//! least of many samples), its counters settling after the load, and its `/metrics` per region.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::demo::{self, RelayProbe};

/// How long the relay may take to settle after the load: windows closed, pairs back up,
/// bundles ended, abusive clients gone.
const SETTLE_MAX: Duration = Duration::from_secs(30);
/// Open files and memory are sampled this many times (the minimum counts): pairs of the
/// bad-TLS region hold a socket for a moment on every retry.
const SAMPLES: usize = 20;
const SAMPLE_PERIOD: Duration = Duration::from_millis(50);
const SETTLE_POLL: Duration = Duration::from_millis(50);
/// How long a scrape of `/metrics` may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The fewest open files and the least memory of the relay process over a second.
pub(super) fn sample_process(pid: u32) -> (u64, u64) {
    let mut fds = u64::MAX;
    let mut rss = u64::MAX;
    for _ in 0..SAMPLES {
        if let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
            fds = fds.min(d.count() as u64);
        }
        if let Some((r, _)) = demo::read_mem_kb(pid) {
            rss = rss.min(r);
        }
        std::thread::sleep(SAMPLE_PERIOD);
    }
    (fds, rss)
}

/// Waits until every bundle ended, every good pair is back up and no intake connection is
/// left; says what it found, and how long that took.
pub(super) fn wait_settled(probe: &RelayProbe, good_pairs: u64) -> Result<String, String> {
    let start = Instant::now();
    let deadline = start + SETTLE_MAX;
    loop {
        let s = probe.stats()?;
        if s.in_flight == 0 && s.pairs_up >= good_pairs && s.intake_conns == 0 {
            return Ok(format!(
                "0 in flight, {} of {good_pairs} pairs up, 0 intake connections, {} ms after the \
                 load",
                s.pairs_up,
                start.elapsed().as_millis()
            ));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "after {} s: {} in flight, {} of {good_pairs} pairs up, {} intake connections",
                SETTLE_MAX.as_secs(),
                s.in_flight,
                s.pairs_up,
                s.intake_conns
            ));
        }
        std::thread::sleep(SETTLE_POLL);
    }
}

/// `(family, region) -> value` from the relay's /metrics (`region` empty for a sample without
/// labels).
pub(super) fn scrape(admin: SocketAddr) -> Result<BTreeMap<(String, String), f64>, String> {
    let mut c = TcpStream::connect(admin).map_err(|e| format!("admin: {e}"))?;
    c.set_read_timeout(Some(SCRAPE_TIMEOUT)).ok();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("admin: {e}"))?;
    let mut text = String::new();
    c.read_to_string(&mut text)
        .map_err(|e| format!("admin: {e}"))?;
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some((name, v)) = line.split_once(' ')
            && !name.contains('{')
            && let Ok(v) = v.trim().parse::<f64>()
        {
            out.insert((name.to_string(), String::new()), v);
            continue;
        }
        let Some((name, rest)) = line.split_once("{region=\"") else {
            continue;
        };
        let Some((region, rest)) = rest.split_once('"') else {
            continue;
        };
        if !rest.starts_with('}') {
            continue;
        }
        if let Ok(v) = rest[1..].trim().parse::<f64>() {
            out.insert((name.to_string(), region.to_string()), v);
        }
    }
    Ok(out)
}
