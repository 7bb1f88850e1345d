//! Fault rules: what the engine does wrong, when, and to whom.
//!
//! Syntax of one rule (the `--fault` flag, repeatable):
//!
//! ```text
//! KIND@START[+DURATION][:key=value[,key=value...]]
//! ```
//!
//! Times are offsets from engine start with a unit: `250ms`, `5s`, `1.5s`, `2m`. Without
//! `+DURATION` a per-request fault stays on until the engine stops.
//!
//! | kind | effect on each SendBundle it hits | options |
//! |---|---|---|
//! | `storm` | sources picked by `fraction` (deterministic from `seed`) get RESOURCE_EXHAUSTED `Retry after {retry_ms}ms` and are then held to it: a send before the cooldown ends is an early send | `fraction` (0..1, default 0.5), `retry_ms` (default 30000), `seed` |
//! | `throttle` | RESOURCE_EXHAUSTED `Network congested. Endpoint is globally rate limited.` (no retry hint, source not booked) | `every` |
//! | `rst` | RST_STREAM, nothing processed | `every`, `code` (HTTP/2 error code, default 2 INTERNAL_ERROR) |
//! | `stall` | no response and no WINDOW_UPDATE until the window ends, then served normally | `every` |
//! | `latency` | the answer waits `ms` more | `ms` (required), `every` |
//! | `goaway` | at START every open connection gets GOAWAY; during `+DURATION` new connections get it at once | `mode` (`graceful` default, or `abrupt`) |
//! | `close` | at START every open connection is closed (TCP FIN, no GOAWAY); during `+DURATION` new connections are closed at once | |
//! | `blackhole` | at START every open connection goes silent: nothing more is read or written (no answers, no PING ACKs, no GOAWAY); connections accepted during `+DURATION` get nothing either, not even SETTINGS; when the window ends they are all dropped unread, as if the packets had never arrived | |
//! | `deny` | sources picked by `fraction` (deterministic from `seed`) get `code` (PERMISSION_DENIED, or 16 UNAUTHENTICATED) for every SendBundle: the engine refuses the source, not the bundle | `fraction` (default 0.5), `seed`, `code` (7 or 16, default 7) |
//! | `revoke` | at START the engine forgets every access token issued before then, as a restart would: a call presenting one is refused as an unknown token (UNAUTHENTICATED `unknown access token`, JSON-RPC 401 with -32001); refresh tokens and outstanding challenges are kept, so RefreshAccessToken buys a working token again, and tokens issued after START work. Only an engine with `auth` checks tokens at all. Counted once, at START | none; no `+DURATION` (it is an instant) and no `region` (a token is good on every region, so it is forgotten on all) |
//!
//! Every kind but `revoke` takes `region=NAME` to hit one region only. `every=N` hits the Nth,
//! 2Nth, ... request that reaches the rule (default 1: all).
//!
//! Stream faults (`rst`, `stall`) act before the rate limiter: a reset or stalled request was
//! never processed, so it books nothing. `throttle` and `storm` act after the early-send check, so
//! an early send is still counted as one while they are on.

use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

/// Default share of sources a storm hits.
const STORM_FRACTION_DEFAULT: f64 = 0.5;
/// The cooldown users report being told during storms.
const STORM_RETRY_MS_DEFAULT: u64 = 30_000;
/// HTTP/2 INTERNAL_ERROR: what a proxy in front of a failing engine resets with.
const RST_CODE_DEFAULT: u32 = 2;
/// gRPC PERMISSION_DENIED: what an engine says to a source it does not accept.
const DENY_CODE_DEFAULT: u32 = 7;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    Storm,
    Throttle,
    Rst,
    Stall,
    Latency,
    GoAway,
    Close,
    Blackhole,
    Deny,
    Revoke,
}

impl FaultKind {
    pub const ALL: [FaultKind; 10] = [
        FaultKind::Storm,
        FaultKind::Throttle,
        FaultKind::Rst,
        FaultKind::Stall,
        FaultKind::Latency,
        FaultKind::GoAway,
        FaultKind::Close,
        FaultKind::Blackhole,
        FaultKind::Deny,
        FaultKind::Revoke,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Storm => "storm",
            FaultKind::Throttle => "throttle",
            FaultKind::Rst => "rst",
            FaultKind::Stall => "stall",
            FaultKind::Latency => "latency",
            FaultKind::GoAway => "goaway",
            FaultKind::Close => "close",
            FaultKind::Blackhole => "blackhole",
            FaultKind::Deny => "deny",
            FaultKind::Revoke => "revoke",
        }
    }

    fn parse(s: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Connection faults fire at an instant on open connections; the rest act per request.
    pub fn is_connection_event(self) -> bool {
        matches!(
            self,
            FaultKind::GoAway | FaultKind::Close | FaultKind::Blackhole
        )
    }

    /// Kinds that act on the requests reaching them, the ones `every=N` counts.
    fn acts_per_request(self) -> bool {
        !self.is_connection_event() && self != FaultKind::Revoke
    }
}

/// One parsed `--fault` rule.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    pub start_ms: u64,
    /// `None`: until the engine stops (per-request kinds) or only the instant (connection kinds,
    /// `revoke`).
    pub duration_ms: Option<u64>,
    pub region: Option<String>,
    pub every: u64,
    pub fraction: f64,
    pub retry_ms: u64,
    pub seed: Option<u64>,
    pub code: u32,
    pub latency_ms: u64,
    pub abrupt: bool,
    /// The text it was parsed from, for the stats.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultParseError(pub String);

impl fmt::Display for FaultParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FaultParseError {}

fn parse_time_ms(s: &str, what: &str, rule: &str) -> Result<u64, FaultParseError> {
    let err = || {
        FaultParseError(format!(
            "fault `{rule}`: {what} `{s}` is not a time like 250ms, 5s, 1.5s or 2m"
        ))
    };
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1_000.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60_000.0)
    } else {
        return Err(err());
    };
    let v: f64 = num.parse().map_err(|_| err())?;
    if !v.is_finite() || v < 0.0 {
        return Err(err());
    }
    Ok((v * scale).round() as u64)
}

impl std::str::FromStr for FaultSpec {
    type Err = FaultParseError;

    fn from_str(text: &str) -> Result<FaultSpec, FaultParseError> {
        let e = |m: String| FaultParseError(format!("fault `{text}`: {m}"));
        let (head, opts) = match text.split_once(':') {
            Some((h, o)) => (h, Some(o)),
            None => (text, None),
        };
        let (kind_s, when) = head
            .split_once('@')
            .ok_or_else(|| e("expected KIND@START, e.g. rst@1s+2s".into()))?;
        let kind = FaultKind::parse(kind_s).ok_or_else(|| {
            let kinds: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
            e(format!("unknown kind `{kind_s}` ({})", kinds.join(", ")))
        })?;
        let (start_s, dur_s) = match when.split_once('+') {
            Some((a, b)) => (a, Some(b)),
            None => (when, None),
        };
        if kind == FaultKind::Revoke && dur_s.is_some() {
            return Err(e(
                "revoke happens at an instant: no +DURATION (tokens issued after it work)".into(),
            ));
        }
        let mut spec = FaultSpec {
            kind,
            start_ms: parse_time_ms(start_s, "start", text)?,
            duration_ms: dur_s
                .map(|d| parse_time_ms(d, "duration", text))
                .transpose()?,
            region: None,
            every: 1,
            fraction: STORM_FRACTION_DEFAULT,
            retry_ms: STORM_RETRY_MS_DEFAULT,
            seed: None,
            code: if kind == FaultKind::Deny {
                DENY_CODE_DEFAULT
            } else {
                RST_CODE_DEFAULT
            },
            latency_ms: 0,
            abrupt: false,
            text: text.to_string(),
        };
        let mut saw_ms = false;
        for kv in opts.into_iter().flat_map(|o| o.split(',')) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| e(format!("option `{kv}` is not key=value")))?;
            let num = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| e(format!("option {k}=`{v}` is not a whole number")))
            };
            let allowed = match (k, kind) {
                ("region", FaultKind::Revoke) => {
                    return Err(e(
                        "revoke forgets tokens on every region (a token is good on all): no region="
                            .into(),
                    ));
                }
                ("region", _) => {
                    spec.region = Some(v.to_string());
                    true
                }
                ("every", k) if k.acts_per_request() => {
                    spec.every = num(v)?;
                    if spec.every == 0 {
                        return Err(e("every must be at least 1".into()));
                    }
                    true
                }
                ("fraction", FaultKind::Storm | FaultKind::Deny) => {
                    spec.fraction = v
                        .parse::<f64>()
                        .ok()
                        .filter(|f| (0.0..=1.0).contains(f))
                        .ok_or_else(|| e(format!("fraction `{v}` is not between 0 and 1")))?;
                    true
                }
                ("retry_ms", FaultKind::Storm) => {
                    spec.retry_ms = num(v)?.max(1);
                    true
                }
                ("seed", FaultKind::Storm | FaultKind::Deny) => {
                    spec.seed = Some(num(v)?);
                    true
                }
                ("code", FaultKind::Rst) => {
                    spec.code = num(v)? as u32;
                    true
                }
                ("code", FaultKind::Deny) => {
                    spec.code = num(v)? as u32;
                    if spec.code != 7 && spec.code != 16 {
                        return Err(e(format!(
                            "deny code `{v}` is not 7 (PERMISSION_DENIED) or 16 (UNAUTHENTICATED)"
                        )));
                    }
                    true
                }
                ("ms", FaultKind::Latency) => {
                    spec.latency_ms = num(v)?;
                    saw_ms = true;
                    true
                }
                ("mode", FaultKind::GoAway) => {
                    spec.abrupt = match v {
                        "graceful" => false,
                        "abrupt" => true,
                        _ => return Err(e(format!("mode `{v}` is not graceful or abrupt"))),
                    };
                    true
                }
                _ => false,
            };
            if !allowed {
                return Err(e(format!(
                    "option `{k}` does not apply to {} faults",
                    kind.name()
                )));
            }
        }
        if kind == FaultKind::Latency && !saw_ms {
            return Err(e("latency needs ms=N".into()));
        }
        Ok(spec)
    }
}

/// A rule at run time: the spec, resolved region, and its counters.
#[derive(Debug)]
pub struct FaultRule {
    pub spec: FaultSpec,
    /// Index into the engine's regions, or `None` for all.
    pub region: Option<usize>,
    start_ns: u64,
    end_ns: u64,
    seen: AtomicU64,
    pub injected: AtomicU64,
}

impl FaultRule {
    pub fn new(spec: FaultSpec, regions: &[String]) -> Result<FaultRule, FaultParseError> {
        let region = match &spec.region {
            None => None,
            Some(r) => Some(regions.iter().position(|n| n == r).ok_or_else(|| {
                FaultParseError(format!(
                    "fault `{}`: region `{r}` is not one of {}",
                    spec.text,
                    regions.join(", ")
                ))
            })?),
        };
        let start_ns = spec.start_ms * 1_000_000;
        let end_ns = match spec.duration_ms {
            Some(d) => start_ns + d * 1_000_000,
            None if !spec.kind.acts_per_request() => start_ns,
            None => u64::MAX,
        };
        Ok(FaultRule {
            spec,
            region,
            start_ns,
            end_ns,
            seen: AtomicU64::new(0),
            injected: AtomicU64::new(0),
        })
    }

    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// End of the window, in ns since engine start (`u64::MAX`: never).
    pub fn end_ns(&self) -> u64 {
        self.end_ns
    }

    fn covers(&self, region: usize, elapsed_ns: u64) -> bool {
        self.region.is_none_or(|r| r == region)
            && elapsed_ns >= self.start_ns
            && elapsed_ns < self.end_ns
    }

    pub fn applies_to_region(&self, region: usize) -> bool {
        self.region.is_none_or(|r| r == region)
    }

    /// Times the rule has acted by `elapsed_ns`. A revoke acts once, at its instant, whether or
    /// not a call comes then: the tokens are forgotten by the clock, not by a call (see
    /// [`Faults::revoke_instants`]).
    pub fn injected_by(&self, elapsed_ns: u64) -> u64 {
        match self.spec.kind {
            FaultKind::Revoke => u64::from(elapsed_ns >= self.start_ns),
            _ => self.injected.load(Ordering::Relaxed),
        }
    }

    /// Whether a storm rule picks this source: a fixed hash of (seed, address) below `fraction`.
    pub fn storm_picks(&self, seed: u64, ip: IpAddr) -> bool {
        storm_picks(self.spec.seed.unwrap_or(seed), self.spec.fraction, ip)
    }
}

/// Deterministic choice of storm sources: the same seed and address always give the same answer,
/// so a run can be repeated and its victims known in advance.
pub fn storm_picks(seed: u64, fraction: f64, ip: IpAddr) -> bool {
    let bits: u128 = match ip {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    };
    let h = splitmix64(seed ^ splitmix64(bits as u64 ^ (bits >> 64) as u64));
    ((h >> 11) as f64 / (1u64 << 53) as f64) < fraction
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// All rules, grouped for the per-request lookups.
#[derive(Debug, Default)]
pub struct Faults {
    pub rules: Vec<FaultRule>,
}

impl Faults {
    /// The first rule of `kind` that is on now for this region and whose `every` counter fires
    /// (and, for storms, that picks `ip`). Counts the hit.
    pub fn hit(
        &self,
        kind: FaultKind,
        region: usize,
        elapsed_ns: u64,
        storm: Option<(u64, IpAddr)>,
    ) -> Option<&FaultRule> {
        for r in &self.rules {
            if r.spec.kind != kind || !r.covers(region, elapsed_ns) {
                continue;
            }
            if let Some((seed, ip)) = storm
                && !r.storm_picks(seed, ip)
            {
                continue;
            }
            let n = r.seen.fetch_add(1, Ordering::Relaxed) + 1;
            if n % r.spec.every == 0 {
                r.injected.fetch_add(1, Ordering::Relaxed);
                return Some(r);
            }
        }
        None
    }

    /// A connection fault whose window is open now, for a connection just accepted.
    pub fn on_connect(&self, region: usize, elapsed_ns: u64) -> Option<&FaultRule> {
        self.rules.iter().find(|r| {
            r.spec.kind.is_connection_event()
                && r.spec.kind != FaultKind::Blackhole
                && r.covers(region, elapsed_ns)
        })
    }

    /// The instants (ns since engine start) of the revoke rules, in order: the auth store forgets
    /// every access token issued before one once the engine's clock has passed it.
    pub fn revoke_instants(&self) -> Vec<u64> {
        let mut at: Vec<u64> = self
            .rules
            .iter()
            .filter(|r| r.spec.kind == FaultKind::Revoke)
            .map(|r| r.start_ns)
            .collect();
        at.sort_unstable();
        at
    }

    /// A black hole whose window is open now for this region.
    pub fn blackhole(&self, region: usize, elapsed_ns: u64) -> Option<&FaultRule> {
        self.rules
            .iter()
            .find(|r| r.spec.kind == FaultKind::Blackhole && r.covers(region, elapsed_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_examples() {
        let s: FaultSpec = "storm@5s:fraction=0.25,retry_ms=30000".parse().unwrap();
        assert_eq!(
            (s.kind, s.start_ms, s.duration_ms),
            (FaultKind::Storm, 5000, None)
        );
        assert_eq!((s.fraction, s.retry_ms), (0.25, 30_000));
        let s: FaultSpec = "rst@1s+2s:every=10,region=ny".parse().unwrap();
        assert_eq!((s.start_ms, s.duration_ms, s.every), (1000, Some(2000), 10));
        assert_eq!(s.region.as_deref(), Some("ny"));
        let s: FaultSpec = "latency@0s:ms=5".parse().unwrap();
        assert_eq!(s.latency_ms, 5);
        let s: FaultSpec = "goaway@1.5s:mode=abrupt".parse().unwrap();
        assert!(s.abrupt && s.start_ms == 1500);
        let s: FaultSpec = "stall@250ms+2m".parse().unwrap();
        assert_eq!((s.start_ms, s.duration_ms), (250, Some(120_000)));
        let s: FaultSpec = "blackhole@1s+3s:region=ny".parse().unwrap();
        assert!(s.kind.is_connection_event() && s.duration_ms == Some(3_000));
        let s: FaultSpec = "deny@0s:fraction=0.25,code=16".parse().unwrap();
        assert_eq!((s.kind, s.fraction, s.code), (FaultKind::Deny, 0.25, 16));
        let s: FaultSpec = "deny@0s".parse().unwrap();
        assert_eq!(s.code, 7);
    }

    #[test]
    fn bad_rules_name_what_is_wrong() {
        let err = |t: &str| t.parse::<FaultSpec>().unwrap_err().0;
        assert!(err("boom@1s").contains("unknown kind `boom`"));
        assert!(err("rst").contains("KIND@START"));
        assert!(err("rst@1").contains("start `1`"));
        assert!(err("rst@1s+x").contains("duration `x`"));
        assert!(err("rst@1s:fraction=0.5").contains("`fraction` does not apply to rst"));
        assert!(err("latency@1s").contains("ms=N"));
        assert!(err("storm@1s:fraction=2").contains("between 0 and 1"));
        assert!(err("throttle@1s:every=0").contains("at least 1"));
        assert!(err("deny@1s:code=3").contains("not 7 (PERMISSION_DENIED) or 16"));
        assert!(err("revoke@1s+1s").contains("no +DURATION"));
        assert!(err("revoke@1s:region=ny").contains("no region="));
        assert!(err("revoke@1s:every=2").contains("`every` does not apply to revoke"));
        assert!(err("boom@1s").contains("deny, revoke)"));
    }

    #[test]
    fn a_revoke_is_an_instant_counted_once_by_the_clock() {
        let regions = vec!["ny".to_string()];
        let rules = ["revoke@2s", "throttle@0s", "revoke@500ms"]
            .map(|t| FaultRule::new(t.parse().unwrap(), &regions).unwrap());
        let f = Faults {
            rules: rules.into(),
        };
        assert_eq!(f.revoke_instants(), [500_000_000, 2_000_000_000]);
        let revoke = &f.rules[0];
        assert_eq!(
            (revoke.spec.start_ms, revoke.spec.duration_ms),
            (2_000, None)
        );
        assert_eq!(revoke.end_ns(), revoke.start_ns());
        let count = |ms: u64| revoke.injected_by(ms * 1_000_000);
        assert_eq!((count(1_999), count(2_000), count(60_000)), (0, 1, 1));
        // Not a per-request kind: no request ever hits it.
        assert!(f.hit(FaultKind::Revoke, 0, 3_000_000_000, None).is_none());
    }

    #[test]
    fn every_n_hits_the_nth_request() {
        let regions = vec!["ny".to_string()];
        let f = Faults {
            rules: vec![FaultRule::new("rst@0s:every=3".parse().unwrap(), &regions).unwrap()],
        };
        let hits: Vec<bool> = (0..6)
            .map(|_| f.hit(FaultKind::Rst, 0, 1, None).is_some())
            .collect();
        assert_eq!(hits, [false, false, true, false, false, true]);
    }

    #[test]
    fn windows_open_at_start_and_close_at_end() {
        let regions = vec!["ny".to_string()];
        let f = Faults {
            rules: vec![FaultRule::new("throttle@1s+1s".parse().unwrap(), &regions).unwrap()],
        };
        let on = |ms: u64| {
            f.hit(FaultKind::Throttle, 0, ms * 1_000_000, None)
                .is_some()
        };
        assert!(!on(999) && on(1000) && on(1999) && !on(2000));
    }

    #[test]
    fn storm_choice_is_seeded_and_close_to_the_fraction() {
        let ips: Vec<IpAddr> = (0..4096u32)
            .map(|i| IpAddr::from(std::net::Ipv4Addr::from(0x7f01_0000 + i)))
            .collect();
        let picked = ips.iter().filter(|&&ip| storm_picks(7, 0.25, ip)).count();
        assert!((900..1150).contains(&picked), "{picked}");
        let again = ips.iter().filter(|&&ip| storm_picks(7, 0.25, ip)).count();
        assert_eq!(picked, again);
        let other = ips
            .iter()
            .filter(|&&ip| storm_picks(8, 0.25, ip) != storm_picks(7, 0.25, ip));
        assert!(other.count() > 0);
    }
}
