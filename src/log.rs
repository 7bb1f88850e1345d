//! Log lines from threads that must never block: each reactor thread writes into a bounded
//! queue of fixed-size lines of its own, and one logging thread writes them to stderr.
//!
//! A reactor that wrote to stderr itself would stop serving whenever stderr is a full pipe (a
//! stalled journald, a paused terminal, a log shipper that fell behind). Here a line costs a
//! format into a preallocated slot and one release store; when the queue is full the line is
//! dropped and counted (`bundle_relay_log_lines_dropped_total`), and the logging thread says how
//! many it lost the next time it writes. Nothing here allocates after startup.

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Lines a queue holds: a burst of a thousand pairs failing at once logs one line per region
/// and error (the dispatcher deduplicates), so a few hundred is deep enough.
pub const QUEUE_LINES: usize = 256;
/// Bytes of one line; longer lines are cut (and end with "..."). Room for the longest a pair's
/// error makes: its pair (a SOCKS5 source with a username and an IPv6 proxy), a count of the
/// repeats between, and an expired certificate's text with both its times.
pub const LINE_BYTES_MAX: usize = 320;
/// How often the logging thread looks for lines: an operator reads them, a tenth of a second
/// later is as good, and an idle relay wakes for it ten times a second, not fifty. A stop wakes
/// it at once.
const POLL_MS: u64 = 100;

struct Slot {
    len: usize,
    bytes: [u8; LINE_BYTES_MAX],
}

/// One writer's queue: single producer (its reactor thread), single consumer (the logging
/// thread).
pub struct LogQueue {
    prefix: String,
    slots: Box<[std::cell::UnsafeCell<Slot>]>,
    /// Next slot the producer writes (only the producer stores it).
    tail: AtomicUsize,
    /// Next slot the consumer reads (only the consumer stores it).
    head: AtomicUsize,
    dropped: AtomicU64,
}

// SAFETY: a slot is written only by the single producer while it is outside `head..tail`, and
// read only by the single consumer while it is inside; the release/acquire pairs on `tail` and
// `head` order those accesses.
unsafe impl Sync for LogQueue {}

impl LogQueue {
    /// A queue whose lines are written as `"{prefix}: {line}"`.
    pub fn new(prefix: &str) -> Arc<LogQueue> {
        Arc::new(LogQueue {
            prefix: prefix.to_string(),
            slots: (0..QUEUE_LINES)
                .map(|_| {
                    std::cell::UnsafeCell::new(Slot {
                        len: 0,
                        bytes: [0; LINE_BYTES_MAX],
                    })
                })
                .collect(),
            tail: AtomicUsize::new(0),
            head: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    /// Bytes one queue holds (the budget counts one per reactor thread).
    pub const fn allocation_bytes() -> usize {
        QUEUE_LINES * std::mem::size_of::<Slot>()
    }

    /// Queues one line; never blocks and never allocates. A full queue drops it (counted).
    /// Call from the queue's one producer thread only.
    pub fn line(&self, args: fmt::Arguments<'_>) {
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        if tail.wrapping_sub(head) >= self.slots.len() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // SAFETY: `tail` is outside `head..tail`, so the consumer does not read this slot.
        let slot = unsafe { &mut *self.slots[tail % self.slots.len()].get() };
        let mut w = SlotWriter {
            buf: &mut slot.bytes,
            len: 0,
            cut: false,
        };
        let _ = w.write_fmt(args);
        if w.cut {
            w.buf[w.len..w.len + 3].copy_from_slice(b"...");
            w.len += 3;
        }
        slot.len = w.len;
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
    }

    /// Lines dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Takes every queued line, oldest first. Call from the queue's one consumer only.
    pub fn drain(&self, mut f: impl FnMut(&str)) -> usize {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        let mut i = head;
        while i != tail {
            // SAFETY: inside `head..tail`: published by the producer, not rewritten until
            // `head` moves past it.
            let slot = unsafe { &*self.slots[i % self.slots.len()].get() };
            f(std::str::from_utf8(&slot.bytes[..slot.len]).unwrap_or("(log line not UTF-8)"));
            i = i.wrapping_add(1);
        }
        self.head.store(tail, Ordering::Release);
        tail.wrapping_sub(head)
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// Formats into a fixed slot, cutting at a character boundary when it is full.
struct SlotWriter<'a> {
    buf: &'a mut [u8; LINE_BYTES_MAX],
    len: usize,
    cut: bool,
}

impl fmt::Write for SlotWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.cut {
            return Ok(());
        }
        let room = self.buf.len() - self.len;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() {
            self.cut = true;
            // Room for the "..." marker `line` appends, cut on a character boundary.
            let mut keep = self.buf.len() - 3;
            while keep > 0 && (self.buf[keep] & 0xC0) == 0x80 {
                keep -= 1;
            }
            self.len = keep;
        }
        Ok(())
    }
}

/// The logging thread: writes every queue's lines to stderr until stopped, then once more.
pub struct Logger {
    stop: Arc<AtomicBool>,
    join: Option<JoinHandle<()>>,
}

impl Logger {
    pub fn spawn(queues: Vec<Arc<LogQueue>>) -> std::io::Result<Logger> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let join = std::thread::Builder::new()
            .name("log".into())
            .spawn(move || {
                let mut reported = vec![0u64; queues.len()];
                let mut text = String::with_capacity(QUEUE_LINES * (LINE_BYTES_MAX + 16));
                loop {
                    let last = stop2.load(Ordering::Acquire);
                    text.clear();
                    for (q, seen) in queues.iter().zip(reported.iter_mut()) {
                        q.drain(|line| {
                            let _ = writeln!(text, "{}: {line}", q.prefix);
                        });
                        let dropped = q.dropped();
                        if dropped > *seen {
                            let _ = writeln!(
                                text,
                                "{}: {} log lines dropped (the log queue was full)",
                                q.prefix,
                                dropped - *seen
                            );
                            *seen = dropped;
                        }
                    }
                    if !text.is_empty() {
                        let _ = std::io::stderr().lock().write_all(text.as_bytes());
                    }
                    if last {
                        return;
                    }
                    std::thread::park_timeout(Duration::from_millis(POLL_MS));
                }
            })?;
        Ok(Logger {
            stop,
            join: Some(join),
        })
    }

    /// Writes what is left and ends the thread.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(j) = self.join.take() {
            j.thread().unpark();
            let _ = j.join();
        }
    }
}

impl Drop for Logger {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_out_in_order_and_a_full_queue_drops_and_counts() {
        let q = LogQueue::new("t");
        for i in 0..QUEUE_LINES + 5 {
            q.line(format_args!("line {i}"));
        }
        assert_eq!(q.dropped(), 5);
        let mut got = Vec::new();
        q.drain(|l| got.push(l.to_string()));
        assert_eq!(got.len(), QUEUE_LINES);
        assert_eq!(got[0], "line 0");
        assert_eq!(got[QUEUE_LINES - 1], format!("line {}", QUEUE_LINES - 1));
        q.line(format_args!("again"));
        got.clear();
        q.drain(|l| got.push(l.to_string()));
        assert_eq!(got, vec!["again".to_string()]);
    }

    #[test]
    fn a_long_line_is_cut_on_a_character_boundary_with_a_marker() {
        let q = LogQueue::new("t");
        let long = "é".repeat(LINE_BYTES_MAX);
        q.line(format_args!("{long}"));
        let mut got = String::new();
        q.drain(|l| got = l.to_string());
        assert!(got.len() <= LINE_BYTES_MAX && got.ends_with("..."), "{got}");
        assert!(got.starts_with("éé"));
    }
}
