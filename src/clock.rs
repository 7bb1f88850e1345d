//! The relay's clock: raw TSC ticks (through `quanta`), calibrated once at startup.
//!
//! The event loop reads [`Clock::now`] once per iteration and passes the [`Instant`] down; the
//! limiter, the arena and every protocol core take `now` as a parameter and never read a clock
//! themselves, so tests drive them with simulated time (any [`TickRate`], any starting tick).
//!
//! Raw units are never assumed: [`Clock::calibrate`] measures ticks per second against the OS
//! monotonic clock, and every conversion goes through the resulting [`TickRate`]. When the CPU
//! has no invariant TSC, `quanta` falls back to the monotonic clock (1 tick = 1 ns), which
//! [`Clock::is_tsc`] reports so the startup log can say which one is in use.
//!
//! Cost: `Clock::now` is one `rdtsc` (about 7 ns on current x86); conversions are a 128-bit
//! multiply and divide and belong off the hot path (config load, metrics export).

use std::fmt;
use std::time::Duration;

/// How long calibration spins against the OS clock. Long enough that a 1 µs error in reading
/// the OS clock moves the rate by under 0.01 %, short enough not to delay startup noticeably.
pub const CALIBRATION_MS: u64 = 20;

/// A point in time, in clock ticks since an arbitrary origin (the TSC's, or a simulation's).
/// Plain data: copy it, compare it, add [`Ticks`] to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

/// A span of time in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticks(pub u64);

impl Instant {
    /// The instant `span` after this one, saturating at the end of time.
    #[inline]
    pub const fn after(self, span: Ticks) -> Instant {
        Instant(self.0.saturating_add(span.0))
    }

    /// Ticks from `earlier` to `self`; zero when `earlier` is not earlier.
    #[inline]
    pub const fn since(self, earlier: Instant) -> Ticks {
        Ticks(self.0.saturating_sub(earlier.0))
    }
}

/// Ticks per second of one clock, with conversions to and from wall units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickRate {
    ticks_per_s: u64,
}

impl TickRate {
    /// A rate of `ticks_per_s` (must be at least one tick per microsecond, as every real
    /// clock source is; the limiter's slot width is derived in ticks).
    pub const fn new(ticks_per_s: u64) -> TickRate {
        assert!(
            ticks_per_s >= 1_000_000,
            "a tick rate below 1 MHz cannot resolve microseconds"
        );
        TickRate { ticks_per_s }
    }

    /// One tick per nanosecond: the monotonic fallback and the usual simulated clock.
    pub const NANOS: TickRate = TickRate::new(1_000_000_000);

    pub const fn ticks_per_s(self) -> u64 {
        self.ticks_per_s
    }

    /// Ticks in one microsecond, rounded down (at least 1 by construction).
    pub const fn ticks_per_us(self) -> u64 {
        self.ticks_per_s / 1_000_000
    }

    pub const fn from_ns(self, ns: u64) -> Ticks {
        Ticks(((ns as u128 * self.ticks_per_s as u128) / 1_000_000_000) as u64)
    }

    pub const fn from_us(self, us: u64) -> Ticks {
        Ticks(((us as u128 * self.ticks_per_s as u128) / 1_000_000) as u64)
    }

    pub const fn from_ms(self, ms: u64) -> Ticks {
        Ticks(((ms as u128 * self.ticks_per_s as u128) / 1_000) as u64)
    }

    pub fn from_duration(self, d: Duration) -> Ticks {
        let ticks = d.as_nanos() * self.ticks_per_s as u128 / 1_000_000_000;
        Ticks(ticks.min(u64::MAX as u128) as u64)
    }

    /// Nanoseconds in `ticks`, rounded down.
    pub const fn to_ns(self, ticks: Ticks) -> u64 {
        ((ticks.0 as u128 * 1_000_000_000) / self.ticks_per_s as u128) as u64
    }

    pub const fn to_us(self, ticks: Ticks) -> u64 {
        ((ticks.0 as u128 * 1_000_000) / self.ticks_per_s as u128) as u64
    }

    pub fn to_duration(self, ticks: Ticks) -> Duration {
        Duration::from_nanos(self.to_ns(ticks))
    }
}

/// The process clock: `quanta`'s raw counter plus the measured [`TickRate`].
#[derive(Clone, Debug)]
pub struct Clock {
    source: quanta::Clock,
    rate: TickRate,
    is_tsc: bool,
}

impl Clock {
    /// Measures the raw counter against the OS monotonic clock for [`CALIBRATION_MS`]. Startup
    /// work: each reactor thread calibrates its own as it starts. Any error errs slow: the
    /// counter is read before the OS clock at the start and after it at the end, so a thread
    /// preempted between two readings counts more ticks per second than there are, and an
    /// interval in ticks lasts longer, never shorter, than it says.
    pub fn calibrate() -> Clock {
        let source = quanta::Clock::new();
        // quanta scales counter ticks to nanoseconds only when it uses the TSC; on the
        // monotonic fallback raw ticks already are nanoseconds and scaling is the identity.
        let probe = 1u64 << 40;
        let is_tsc = source.delta_as_nanos(0, probe) != probe;
        let os_start = std::time::Instant::now();
        let rate = measure_rate(
            || source.raw(),
            || os_start.elapsed(),
            Duration::from_millis(CALIBRATION_MS),
        );
        Clock {
            source,
            rate,
            is_tsc,
        }
    }

    /// The raw counter now, without a calibrated clock (what every process's [`Clock::now`]
    /// reads): startup work that compares readings another process wrote.
    pub fn raw_now() -> Instant {
        Instant(quanta::Clock::new().raw())
    }

    /// The current raw counter reading. Read once per loop iteration and pass it down.
    #[inline]
    pub fn now(&self) -> Instant {
        Instant(self.source.raw())
    }

    pub fn rate(&self) -> TickRate {
        self.rate
    }

    /// Whether the raw counter is the CPU's invariant TSC (else the OS monotonic clock).
    pub fn is_tsc(&self) -> bool {
        self.is_tsc
    }
}

impl fmt::Display for Clock {
    /// The startup log line: which source, and its measured rate.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = if self.is_tsc {
            "TSC"
        } else {
            "OS monotonic (no invariant TSC)"
        };
        write!(
            f,
            "clock: {source}, {} ticks/µs ({} ticks/s, calibrated over {CALIBRATION_MS} ms)",
            self.rate.ticks_per_us(),
            self.rate.ticks_per_s()
        )
    }
}

/// Ticks of `raw` per second of `os` (time since an instant just before the first call),
/// over `span`: the counter read first at the start and last at the end, so time lost
/// between two readings adds ticks, never seconds (see [`Clock::calibrate`]).
fn measure_rate(
    mut raw: impl FnMut() -> u64,
    mut os: impl FnMut() -> Duration,
    span: Duration,
) -> TickRate {
    let raw_start = raw();
    let os_start = os();
    let mut os_elapsed = os_start;
    let mut raw_end = raw();
    while os_elapsed.saturating_sub(os_start) < span {
        os_elapsed = os();
        raw_end = raw();
    }
    let ticks = raw_end.saturating_sub(raw_start) as u128;
    let secs_ns = os_elapsed.saturating_sub(os_start).as_nanos().max(1);
    TickRate::new(((ticks * 1_000_000_000 / secs_ns) as u64).max(1_000_000))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A counter of one tick a nanosecond and an OS clock in step with it, each reading taking
    /// 10 ns; the thread loses `lost_ns` right after reading number `at` (counted from 0,
    /// both clocks together).
    fn rate_with_a_preemption(at: u64, lost_ns: u64) -> TickRate {
        let now = Cell::new(1_000_000u64);
        let reads = Cell::new(0u64);
        let tick = || {
            now.set(now.get() + 10);
            let t = now.get();
            if reads.replace(reads.get() + 1) == at {
                now.set(now.get() + lost_ns);
            }
            t
        };
        let start = 1_000_000u64;
        measure_rate(
            tick,
            || Duration::from_nanos(tick() - start),
            Duration::from_millis(CALIBRATION_MS),
        )
    }

    /// A thread preempted for a millisecond while it calibrates (5% of the span), first
    /// between its first two readings, then between its last two: the rate it measures is
    /// never below the true one, so an interval in ticks never lasts less than it says.
    #[test]
    fn a_preempted_calibration_makes_intervals_longer_never_shorter() {
        let second = Ticks(1_000_000_000);
        for at in [0, 1] {
            let rate = rate_with_a_preemption(at, 1_000_000);
            assert!(
                rate.from_ms(1_000).0 >= second.0,
                "preempted after reading {at}: a second is {} ticks",
                rate.from_ms(1_000).0
            );
        }
        // The last two readings: the loop's final OS reading, then the counter's.
        let unpreempted = rate_with_a_preemption(u64::MAX, 0);
        let reads_to_the_end = 2 + 2 * (CALIBRATION_MS * 1_000_000 / 20);
        let rate = rate_with_a_preemption(reads_to_the_end, 1_000_000);
        assert!(rate.from_ms(1_000).0 >= second.0);
        assert!(
            unpreempted.from_ms(1_000).0.abs_diff(second.0) < 10_000,
            "the true rate"
        );
    }
}
