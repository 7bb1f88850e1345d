//! The `[tenants_from]` poller: a thread that fetches the tenants document every `every_ms`
//! (the URL as the current config names it) and hands each result to the supervision loop,
//! which applies a changed document as a reload.
//!
//! A thread of its own because a fetch may take its whole timeout: the supervision loop pings
//! the watchdog and must not wait on an endpoint. The loop applies; the thread only fetches.
//! For the same reason a poller no longer wanted is not joined: told to stop, its thread ends
//! when the fetch it is in ends, and what that fetch brings is dropped. Each result names the
//! URL it came from, and one from a URL the config no longer names is never applied (a reload
//! that moved away from a slow endpoint would otherwise get that endpoint's document back).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, TryRecvError, channel};
use std::time::{Duration, Instant};

use super::fetch;
use crate::config::Shared;

/// How often the thread looks whether it is to stop or the URL went away.
const NAP: Duration = Duration::from_millis(50);

/// See the module docs.
pub struct Poller {
    results: Receiver<Fetched>,
    stop: Arc<AtomicBool>,
}

/// One fetch's result and the URL it asked.
struct Fetched {
    url: String,
    result: Result<String, String>,
}

impl Poller {
    /// Polls for as long as the running config has `[tenants_from]`: the first poll one period
    /// from now when `wait` (startup fetched the first document), else at once (a reload added
    /// it). A reload that changes the URL or the period polls at once too, or as soon as a
    /// fetch still out ends (within its timeout): a period shortened from an hour does not
    /// wait out the hour.
    pub fn start(live: Arc<Shared>, wait: bool) -> std::io::Result<Poller> {
        let (tx, results) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::Builder::new()
            .name("tenants-poll".into())
            .spawn(move || {
                let mut next = Instant::now();
                let mut polled: Option<(String, u64)> = None;
                while !stopping.load(Relaxed) {
                    let from = live.load().config.tenants_from.clone();
                    let Some(from) = from else {
                        std::thread::sleep(NAP);
                        continue;
                    };
                    let asked = (from.url.clone(), from.every_ms);
                    match &polled {
                        None if wait => next = Instant::now() + Duration::from_millis(asked.1),
                        Some(p) if *p != asked => next = Instant::now(),
                        _ => {}
                    }
                    polled = Some(asked);
                    let now = Instant::now();
                    if now < next {
                        std::thread::sleep((next - now).min(NAP));
                        continue;
                    }
                    next = now + Duration::from_millis(from.every_ms);
                    let result = fetch::get(&from);
                    if tx
                        .send(Fetched {
                            url: from.url,
                            result,
                        })
                        .is_err()
                    {
                        return;
                    }
                }
            })?;
        Ok(Poller { results, stop })
    }

    /// The latest result since the last call of a fetch of `url` (the URL the config names
    /// now), if any: older ones are superseded, and those of another URL dropped.
    pub fn latest(&self, url: &str) -> Option<Result<String, String>> {
        let mut latest = None;
        loop {
            match self.results.try_recv() {
                Ok(f) if f.url == url => latest = Some(f.result),
                Ok(_) => {}
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return latest,
            }
        }
    }
}

impl Drop for Poller {
    /// Tells the thread to stop without waiting for it (see the module docs).
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}
