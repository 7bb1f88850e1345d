//! What a reactor thread's dispatcher shows of itself: the slowly changing gauges (pairs by
//! state, cooldowns) published on the reactor's sweep, and the `/debug/pairs` text. Reads only;
//! nothing here is on the request path.

use std::fmt::Write as _;

use crate::clock::{Instant, TickRate};
use crate::limiter::{LaneId, Limiter, RegionId};
use crate::metrics::ThreadMetrics;

use super::pairs::Pairs;
use super::region::{ErrorKind, Region, Via};
use crate::config::Source;
use crate::egress::transport::TransportError;

/// Pair states and cooldowns per region, into the metrics gauges.
pub fn publish_gauges(limiter: &Limiter, regions: usize, metrics: &ThreadMetrics) {
    if !metrics.enabled() {
        return;
    }
    for r in 0..regions {
        let c = limiter.counts(RegionId(r as u8));
        let up = c.ready + c.booked + c.cooling + c.deferred + c.held;
        metrics.set_conn_states(
            r,
            [
                c.down as u64,
                c.connecting as u64,
                up as u64,
                c.draining as u64,
            ],
        );
        metrics.set_cooldowns_active(r, c.cooling as u64);
    }
}

/// One line per region: pairs by limiter state, bundles waiting (`waiting[lane]`, summed over
/// the region's lanes) and when the region can send next; with egress groups, a line per
/// group under it (`groups` names them, "shared" first); then its failing pairs grouped by
/// what went wrong. `limiter` should have been advanced to `now`, so pairs whose booking
/// passed read as ready.
#[allow(clippy::too_many_arguments)]
pub fn render_pairs(
    limiter: &mut Limiter,
    regions: &[Region],
    groups: &[String],
    waiting: &[usize],
    pairs: &Pairs,
    sources: &[Source],
    rate: TickRate,
    now: Instant,
    out: &mut String,
) {
    let g_count = limiter.group_count();
    let when = |t: Option<Instant>| match t {
        Some(t) if t.0 <= now.0 => "now".to_string(),
        Some(t) => format!("in {} us", rate.to_us(t.since(now))),
        None => "never (no pair up)".to_string(),
    };
    for (r, region) in regions.iter().enumerate() {
        let c = limiter.counts(RegionId(r as u8));
        let lanes = r * g_count..(r + 1) * g_count;
        let next = lanes
            .clone()
            .filter_map(|l| limiter.next_ready_at(LaneId(l as u8)))
            .min_by_key(|t| t.0);
        let _ = writeln!(
            out,
            "region {r} ({}): ready {} booked {} cooling {} deferred {} held {} down {} connecting {} draining {}; waiting bundles {}; next send {}",
            region.name,
            c.ready,
            c.booked,
            c.cooling,
            c.deferred,
            c.held,
            c.down,
            c.connecting,
            c.draining,
            waiting[lanes.clone()].iter().sum::<usize>(),
            when(next)
        );
        if g_count > 1 {
            for (g, l) in lanes.enumerate() {
                let c = limiter.lane_counts(LaneId(l as u8));
                let next = limiter.next_ready_at(LaneId(l as u8));
                let _ = writeln!(
                    out,
                    "  region {r} ({}) egress {}: pairs {} ready {} booked {} cooling {} deferred {} held {}; waiting bundles {}; next send {}",
                    region.name,
                    groups.get(g).map_or("?", String::as_str),
                    limiter.group_addresses(g as u8).len(),
                    c.ready,
                    c.booked,
                    c.cooling,
                    c.deferred,
                    c.held,
                    waiting[l],
                    when(next)
                );
            }
        }
        // Grouped as the log tells errors apart: an expired certificate's error, naming the
        // time of each try, is one line, and each proxy's errors are lines of their own. The
        // line shows the first pair's text.
        let mut errors: Vec<(ErrorKind, String, u32)> = Vec::new();
        for (a, source) in sources.iter().enumerate() {
            let pair = limiter.pair(a as u32, RegionId(r as u8));
            if let Some(e) = &pairs.get(pair).last_error {
                let kind = ErrorKind::of_pair(e, source);
                match errors.iter_mut().find(|(k, ..)| *k == kind) {
                    Some((.., n)) => *n += 1,
                    None => errors.push((kind, error_text(e, source), 1)),
                }
            }
        }
        for (_, text, n) in errors {
            let _ = writeln!(
                out,
                "  region {r} ({}): {n} pairs failing: {text}",
                region.name
            );
        }
    }
}

/// A pair's error as `/debug/pairs` says it: through a proxy, naming the proxy and user the
/// pair goes through, whatever the error itself names (a TLS error knows no proxy).
fn error_text(error: &TransportError, source: &Source) -> String {
    match source {
        Source::Socks5 { .. } => format!("via {}: {}", Via(source), error.detail()),
        Source::Local(_) => error.to_string(),
    }
}
