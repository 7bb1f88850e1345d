//! How the plots write numbers: latencies in the unit that suits each one, counts with thousands
//! separators, spans of time, dates in UTC. Not where they are written (`plot`).

/// `ns` in ns, µs, ms or s with three significant digits: "82.8 µs", "21.8 ms", "1.00 s".
/// `trim` drops trailing zeros ("10 ms", "2.5 µs"), as tick labels want.
pub fn latency(ns: f64, trim: bool) -> String {
    const UNITS: [(&str, f64); 4] = [("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)];
    let ns = ns.max(0.0);
    let mut u = UNITS
        .iter()
        .rposition(|&(_, scale)| ns >= scale)
        .unwrap_or(0);
    let mut v = ns / UNITS[u].1;
    if v > 0.0 {
        let step = 10f64.powf(v.log10().floor() - 2.0);
        v = (v / step).round() * step;
    }
    // Rounding can carry into the next unit: 999.6 µs is 1.00 ms.
    if v >= 1000.0 && u + 1 < UNITS.len() {
        u += 1;
        v /= 1000.0;
    }
    let decimals = if u == 0 || v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let mut s = format!("{v:.decimals$}");
    if trim && s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    format!("{s} {}", UNITS[u].0)
}

/// `n` with commas between thousands: "6,000".
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// `n` things: "1 interval", "6,000 values".
pub fn counted(n: u64, thing: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{} {thing}{s}", count(n))
}

/// A length of time for prose: "0.5 s", "4 s", "2 min 5 s", "3 h 20 min".
pub fn span(s: f64) -> String {
    if s < 10.0 {
        let t = format!("{s:.1}");
        return format!("{} s", t.trim_end_matches('0').trim_end_matches('.'));
    }
    let whole = s.round() as u64;
    match whole {
        0..120 => format!("{whole} s"),
        120..7200 if whole % 60 == 0 => format!("{} min", whole / 60),
        120..7200 => format!("{} min {} s", whole / 60, whole % 60),
        _ if whole % 3600 / 60 == 0 => format!("{} h", whole / 3600),
        _ => format!("{} h {} min", whole / 3600, whole % 3600 / 60),
    }
}

/// Seconds on a time axis whose ticks are `step_s` apart: "45 s", "0.15 s", "2:30" (min:s),
/// "1:05:00" (h:min:s).
pub fn clock_offset(s: f64, span_s: f64, step_s: f64) -> String {
    // An interval may begin before the log's start time: its ticks read "-10 s", "-1:00";
    // zero never reads "-0".
    let s = s + 0.0;
    if span_s <= 180.0 {
        // As many decimals as the step has, so no two ticks read alike (0.05 s steps: 0.15 s,
        // not 0.1 s twice).
        let decimals = (-step_s.log10() - 1e-9).ceil().clamp(0.0, 9.0) as usize;
        let t = format!("{s:.decimals$}");
        // Trailing zeros of the decimals only: "10 s" keeps its zero.
        let t = if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.')
        } else {
            &t
        };
        return format!("{t} s");
    }
    let whole = s.abs().round() as u64;
    let sign = if s < 0.0 && whole > 0 { "-" } else { "" };
    if span_s < 3600.0 {
        format!("{sign}{}:{:02}", whole / 60, whole % 60)
    } else {
        format!(
            "{sign}{}:{:02}:{:02}",
            whole / 3600,
            whole % 3600 / 60,
            whole % 60
        )
    }
}

/// The calendar date and time of `epoch_s` (seconds since 1970 UTC): "2025-11-30 12:00:00".
pub fn utc(epoch_s: f64) -> String {
    let secs = epoch_s.floor() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_take_the_unit_that_suits_them() {
        assert_eq!(latency(82_800.0, false), "82.8 µs");
        assert_eq!(latency(21_774_300.0, false), "21.8 ms");
        assert_eq!(latency(999_600.0, false), "1.00 ms");
        assert_eq!(latency(99_960.0, false), "100 µs");
        assert_eq!(latency(860e6, false), "860 ms");
        assert_eq!(latency(10e6, true), "10 ms");
        assert_eq!(latency(500.0, true), "500 ns");
        assert_eq!(latency(2.5e9, true), "2.5 s");
    }

    #[test]
    fn counts_spans_and_dates_read_as_prose() {
        assert_eq!(count(6_000), "6,000");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(counted(1, "tag"), "1 tag");
        assert_eq!(counted(6_000, "value"), "6,000 values");
        assert_eq!(span(4.0), "4 s");
        assert_eq!(span(125.0), "2 min 5 s");
        assert_eq!(span(7_200.0), "2 h");
        assert_eq!(clock_offset(150.0, 600.0, 60.0), "2:30");
    }

    #[test]
    fn time_ticks_under_three_minutes_keep_their_whole_seconds_and_only_needed_decimals() {
        for (s, step, label) in [
            (0.0, 10.0, "0 s"),
            (10.0, 10.0, "10 s"),
            (50.0, 10.0, "50 s"),
            (100.0, 20.0, "100 s"),
            (2.0, 1.0, "2 s"),
            (0.15, 0.05, "0.15 s"),
            (0.5, 0.1, "0.5 s"),
            (1.0, 0.5, "1 s"),
            (1.5, 0.5, "1.5 s"),
            (0.0, 0.05, "0 s"),
            (-0.0, 10.0, "0 s"),
            (-10.0, 10.0, "-10 s"),
            (-0.5, 0.5, "-0.5 s"),
        ] {
            assert_eq!(clock_offset(s, 60.0, step), label, "{s} s, step {step}");
        }
        // An interval that began before the log's start time, on a long axis.
        assert_eq!(clock_offset(-60.0, 600.0, 60.0), "-1:00");
        assert_eq!(clock_offset(-3_600.0, 7_200.0, 600.0), "-1:00:00");
        assert_eq!(clock_offset(-0.0, 600.0, 60.0), "0:00");
        assert_eq!(utc(1_764_460_800.0), "2025-11-30 00:00:00");
        assert_eq!(utc(1_796_023_938.034), "2026-11-30 07:32:18");
    }
}
