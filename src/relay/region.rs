//! One block-engine region as a reactor thread's upstream sees it: its calls' settings, where
//! its connections go, whether its engine went silent, and what of its errors was logged.
//! Plain state; the decisions about it are the upstream's. Its waiting bundles are the
//! dispatcher's.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use crate::clock::{Instant, TickRate, Ticks};
use crate::config::Source;
use crate::egress::resolve::HostAddrs;
use crate::egress::transport::{TlsTarget, TransportError};
use crate::grpc::CallConfig;

use super::RegionSpec;
use super::auth::{RegionAuth, Signer};

/// Probes of a silent region: the first soon, then doubling while unanswered.
pub const PROBE_BACKOFF_MS_MIN: u64 = 100;
pub const PROBE_BACKOFF_MS_MAX: u64 = 5_000;

/// A region whose engine throttles everyone gets no call for this long, doubling while it keeps
/// saying so, back to the least once a call is accepted again.
pub const THROTTLE_BACKOFF_MS_MIN: u64 = 100;
pub const THROTTLE_BACKOFF_MS_MAX: u64 = 5_000;

/// The same connection error of one region is logged again at most this often.
pub const ERROR_RELOG_MS: u64 = 10_000;

/// Kinds of error a region remembers logging. A dozen misbehaving proxies, each failing its own
/// way, fit; a kind beyond these while all are recent is counted with the other such kinds, and
/// they log one line between them per [`ERROR_RELOG_MS`], so a region's lines stay bounded
/// however many ways its pairs fail.
pub const ERROR_KINDS_KEPT: usize = 16;

/// Bytes of one region's record of logged errors (the budget counts one per thread and region).
pub const ERROR_LOG_BYTES: usize = std::mem::size_of::<ErrorLog>();

/// Which errors are one error, for the log and `/debug/pairs`: their texts with every run of
/// digits read as one digit, so an error naming the time or a count that moves (an expired
/// certificate's "verification time 1796543514 … (86421 seconds ago)") is one error however long
/// it lasts. Kept as a hash, so telling errors apart allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorKind(u64);

impl ErrorKind {
    /// The kind of an error reading `text`.
    pub fn of_text(text: impl fmt::Display) -> ErrorKind {
        let mut h = KindHasher::new();
        let _ = write!(h, "{text}");
        ErrorKind(h.hash)
    }

    /// The kind of the error of a pair leaving from `source`: through a proxy, the proxy and
    /// user count whole, whatever the error names itself (two users one gateway refuses, two
    /// proxies cutting TLS alike, are errors of their own).
    pub fn of_pair(error: &TransportError, source: &Source) -> ErrorKind {
        if let Source::Socks5 { .. } = source {
            let mut h = KindHasher::new();
            h.digits_whole = true;
            let _ = write!(h, "via {}: ", Via(source));
            h.digits_whole = false;
            let _ = write!(h, "{}", error.detail());
            return ErrorKind(h.hash);
        }
        ErrorKind::of(error)
    }

    /// The kind of a pair's error. The proxy it went through counts whole: two proxies refusing
    /// alike are two errors, or the operator could not tell which proxy is down.
    pub fn of(error: &TransportError) -> ErrorKind {
        let mut h = KindHasher::new();
        if let Some(proxy) = error.proxy() {
            h.digits_whole = true;
            let _ = write!(h, "via {proxy}: ");
            h.digits_whole = false;
        }
        let _ = write!(h, "{}", error.detail());
        ErrorKind(h.hash)
    }
}

/// The proxy (and user) a source reaches the engines through, as errors name it:
/// `user@host:port`, or `host:port` without a user. Never the password.
pub struct Via<'a>(pub &'a Source);

impl fmt::Display for Via<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Source::Local(ip) => write!(f, "{ip}"),
            Source::Socks5 { proxy, auth: None } => write!(f, "{proxy}"),
            Source::Socks5 {
                proxy,
                auth: Some((user, _)),
            } => write!(f, "{user}@{proxy}"),
        }
    }
}

/// FNV-1a over a text as it is formatted, a run of digits hashed as one `0` unless
/// `digits_whole`.
struct KindHasher {
    hash: u64,
    in_digits: bool,
    digits_whole: bool,
}

impl KindHasher {
    fn new() -> KindHasher {
        KindHasher {
            hash: 0xcbf2_9ce4_8422_2325,
            in_digits: false,
            digits_whole: false,
        }
    }
}

impl fmt::Write for KindHasher {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            let b = if b.is_ascii_digit() && !self.digits_whole {
                if std::mem::replace(&mut self.in_digits, true) {
                    continue;
                }
                b'0'
            } else {
                self.in_digits = false;
                b
            };
            self.hash = (self.hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(())
    }
}

/// What a line about an error says of the errors not logged since the last line like it:
/// nothing when there were none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unlogged {
    pub count: u32,
    /// Seconds since that line.
    pub secs: u64,
    /// They were of other kinds than this line's, beyond [`ERROR_KINDS_KEPT`].
    pub other_kinds: bool,
}

impl fmt::Display for Unlogged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.count, self.other_kinds) {
            (0, _) => Ok(()),
            (n, false) => write!(f, "[{n} more like this in {} s] ", self.secs),
            (n, true) => write!(
                f,
                "[{n} errors of other kinds not logged in {} s] ",
                self.secs
            ),
        }
    }
}

/// When a kind of error was last logged and how many came since.
#[derive(Clone, Copy, Debug)]
pub(super) struct Logged {
    at: Instant,
    unlogged: u32,
}

impl Logged {
    fn new(now: Instant) -> Logged {
        Logged {
            at: now,
            unlogged: 0,
        }
    }

    /// An error of the one kind `last` keeps (`None`: never logged): logged at once the first
    /// time, then as [`Logged::again`] every [`ERROR_RELOG_MS`].
    pub(super) fn note(
        last: &mut Option<Logged>,
        now: Instant,
        rate: TickRate,
    ) -> Option<Unlogged> {
        match last {
            Some(l) => l.again(now, rate.from_ms(ERROR_RELOG_MS), rate, false),
            None => {
                *last = Some(Logged::new(now));
                Some(Unlogged {
                    count: 0,
                    secs: 0,
                    other_kinds: false,
                })
            }
        }
    }

    /// Another error of this kind: logged (with the count of those between) when the last line
    /// is `relog` old, else counted.
    fn again(
        &mut self,
        now: Instant,
        relog: Ticks,
        rate: TickRate,
        other_kinds: bool,
    ) -> Option<Unlogged> {
        let since = now.since(self.at);
        if since.0 < relog.0 {
            self.unlogged = self.unlogged.saturating_add(1);
            return None;
        }
        let unlogged = Unlogged {
            count: self.unlogged,
            secs: rate.to_us(since) / 1_000_000,
            other_kinds,
        };
        *self = Logged::new(now);
        Some(unlogged)
    }
}

/// The error kinds a region logged lately: fixed room, so noting an error never allocates.
#[derive(Clone, Debug)]
struct ErrorLog {
    kinds: [Option<(ErrorKind, Logged)>; ERROR_KINDS_KEPT],
    /// Errors of kinds that found no room.
    others: Option<Logged>,
}

impl ErrorLog {
    fn new() -> ErrorLog {
        ErrorLog {
            kinds: [None; ERROR_KINDS_KEPT],
            others: None,
        }
    }

    fn note(&mut self, kind: ErrorKind, now: Instant, rate: TickRate) -> Option<Unlogged> {
        let relog = rate.from_ms(ERROR_RELOG_MS);
        if let Some((_, logged)) = self.kinds.iter_mut().flatten().find(|(k, _)| *k == kind) {
            return logged.again(now, relog, rate, false);
        }
        // A new kind takes a free place, else that of the kind logged longest ago once its line
        // is `relog` old (those it had not logged are forgotten with it).
        let place = self.kinds.iter().position(Option::is_none).or_else(|| {
            self.kinds
                .iter()
                .enumerate()
                .filter_map(|(i, e)| e.map(|(_, l)| (i, l.at)))
                .filter(|(_, at)| now.since(*at).0 >= relog.0)
                .min_by_key(|(_, at)| at.0)
                .map(|(i, _)| i)
        });
        let fresh = Unlogged {
            count: 0,
            secs: 0,
            other_kinds: false,
        };
        match (place, &mut self.others) {
            (Some(i), _) => {
                self.kinds[i] = Some((kind, Logged::new(now)));
                Some(fresh)
            }
            (None, Some(others)) => others.again(now, relog, rate, true),
            (None, others @ None) => {
                *others = Some(Logged::new(now));
                Some(fresh)
            }
        }
    }
}

/// A region whose engine stopped answering: calls went unanswered for the dispatcher's silence
/// threshold with no call of it answered meanwhile.
#[derive(Clone, Copy, Debug)]
pub struct Silence {
    pub since: Instant,
    /// When the next probe call may go.
    pub probe_at: Instant,
    /// Back-off between probes, doubling while they go unanswered.
    pub probe_backoff_ms: u64,
    /// When the probe out went (`None`: none out, or none this silence waits for: a probe
    /// that ends later says nothing of it).
    pub probe_sent: Option<Instant>,
    /// A call was answered (a probe's, or any other), or another thread heard a bundle
    /// answered: the engine answers, but whether it takes bundles from this thread is not
    /// known (a hang may be in the bundle path alone, or in this thread's path). Bundles go
    /// again one at a time until one is answered, which ends the silence.
    pub trial: bool,
    /// When the trial's bundle went (`None`: none out).
    pub trial_sent: Option<Instant>,
}

impl Silence {
    /// Silent since `since`, the first probe due at `now`.
    pub fn new(since: Instant, now: Instant) -> Silence {
        Silence {
            since,
            probe_at: now,
            probe_backoff_ms: PROBE_BACKOFF_MS_MIN,
            probe_sent: None,
            trial: false,
            trial_sent: None,
        }
    }

    /// Whether no bundle may go now: silent, or on trial with its one bundle out.
    pub fn holds_bundles(&self) -> bool {
        !self.trial || self.trial_sent.is_some()
    }

    /// Another thread heard the engine answer a bundle since this silence began: the probe
    /// is not waited for, but this thread's own path to the engine may still hang (another
    /// connection, perhaps another front end), so bundles go one at a time until one is
    /// answered here. Whether it changed anything (a trial already running is left alone).
    pub fn heard_elsewhere(&mut self) -> bool {
        if self.trial {
            return false;
        }
        self.trial = true;
        self.trial_sent = None;
        self.probe_sent = None;
        true
    }

    /// The trial's bundle got no answer: probes again, backing off as for an unanswered one.
    pub fn trial_unanswered(&mut self, now: Instant, rate: TickRate) {
        self.trial = false;
        self.trial_sent = None;
        self.probe_unanswered(now, rate);
    }

    /// A probe got no answer: the next waits twice as long.
    pub fn probe_unanswered(&mut self, now: Instant, rate: TickRate) {
        self.probe_sent = None;
        self.probe_at = now.after(rate.from_ms(self.probe_backoff_ms));
        self.probe_backoff_ms = (self.probe_backoff_ms * 2).min(PROBE_BACKOFF_MS_MAX);
    }
}

/// See the module docs.
pub struct Region {
    pub name: String,
    pub call: CallConfig,
    /// The engine's JSON-RPC path for a forwarded `sendTransaction`.
    pub transactions_path: String,
    /// The engine's JSON-RPC path for a forwarded bundle-status query.
    pub bundles_path: String,
    pub addrs: Arc<HostAddrs>,
    pub tls: Option<TlsTarget>,
    /// The errors logged for this region lately, so a thousand pairs failing alike log one
    /// line (again after [`ERROR_RELOG_MS`] if it persists, with how often it came meanwhile).
    errors_logged: ErrorLog,
    /// A line about this region's first TLS session was logged.
    pub tls_logged: bool,
    /// Its pairs were queued to connect (at start when eager, on its first bundle when lazy).
    pub connect_requested: bool,
    /// When a call to it was last answered (frames that answer no call do not count).
    pub last_rx: Instant,
    /// Set while its engine is silent: no bundle is sent until a call is answered (then one at
    /// a time until a bundle is).
    pub silence: Option<Silence>,
    /// HTTP/2 PING after this long without a frame (`None`: off); doubled, up to the gRPC
    /// policy, when the engine says ENHANCE_YOUR_CALM.
    pub keepalive_ms: Option<u64>,
    /// It left the config (a reload) and nothing of it waits any more: its pairs are drained
    /// and stay down until it is listed again.
    pub retired: bool,
    /// Its engine said it throttles everyone: no call goes to it before this.
    pub throttled_until: Instant,
    /// When the back-off in force began: calls sent before it were throttled in that spell.
    pub throttle_began: Instant,
    /// Bots' status queries take none of its pairs before this: one every
    /// [`QUERY_SHARE_DIV`](super::links::QUERY_SHARE_DIV)th of the region's pace at most.
    pub query_next: Instant,
    /// That back-off's length.
    pub throttle_spell_ms: u64,
    /// The next region-wide back-off (doubling while throttled).
    pub throttle_backoff_ms: u64,
    /// Searcher authentication to its engine, when configured: no call but the auth service's
    /// goes to it until a token is held.
    pub auth: Option<RegionAuth>,
}

impl Region {
    pub fn new(
        spec: &RegionSpec,
        connect_eagerly: bool,
        ping_idle_ms: u64,
        signer: Option<&Arc<Signer>>,
        now: Instant,
    ) -> Region {
        Region {
            name: spec.name.clone(),
            call: CallConfig::new(
                if spec.tls.is_some() { "https" } else { "http" },
                spec.authority.clone(),
            ),
            transactions_path: spec.transactions_path.clone(),
            bundles_path: spec.bundles_path.clone(),
            addrs: spec.addrs.clone(),
            tls: spec.tls.clone(),
            errors_logged: ErrorLog::new(),
            tls_logged: false,
            connect_requested: connect_eagerly,
            last_rx: now,
            silence: None,
            keepalive_ms: (ping_idle_ms > 0).then_some(ping_idle_ms),
            retired: false,
            throttled_until: Instant(0),
            throttle_began: Instant(0),
            query_next: Instant(0),
            throttle_spell_ms: 0,
            throttle_backoff_ms: THROTTLE_BACKOFF_MS_MIN,
            auth: signer.map(|s| RegionAuth::new(s.clone())),
        }
    }

    /// Its engine throttles everyone, says the answer at `now` to a call sent at `sent`: no
    /// call before `now` plus the wait the answer named (`said`), exactly, or where it named
    /// none, plus the back-off, which doubles. A call sent before the back-off in force began
    /// was throttled in the same spell: its answer neither doubles the back-off nor moves its
    /// end. Returns the spell's wait, and whether this answer began it.
    pub fn throttle(
        &mut self,
        sent: Instant,
        now: Instant,
        rate: TickRate,
        said: Option<u64>,
    ) -> (u64, bool) {
        if sent.0 < self.throttle_began.0 {
            return (self.throttle_spell_ms, false);
        }
        if let Some(ms) = said {
            let until = now.after(rate.from_ms(ms));
            if until.0 > self.throttled_until.0 {
                self.throttled_until = until;
            }
            self.throttle_began = now;
            self.throttle_spell_ms = ms;
            return (ms, true);
        }
        let ms = self.throttle_backoff_ms;
        let until = now.after(rate.from_ms(ms));
        if until.0 > self.throttled_until.0 {
            self.throttled_until = until;
        }
        self.throttle_began = now;
        self.throttle_spell_ms = ms;
        self.throttle_backoff_ms = (ms * 2).min(THROTTLE_BACKOFF_MS_MAX);
        (ms, true)
    }

    /// A call sent at `sent` was accepted: if it went after the last back-off ended, the
    /// engine takes calls again and the next throttle starts from the least back-off (one sent
    /// before says nothing of the engine since).
    pub fn accepted(&mut self, sent: Instant) {
        if sent.0 >= self.throttled_until.0 {
            self.throttle_backoff_ms = THROTTLE_BACKOFF_MS_MIN;
        }
    }

    /// Whether an error of `kind` should be logged now, and what its line says of those not
    /// logged before it (`None`: not now). Each kind is logged when first seen, then at most
    /// once per [`ERROR_RELOG_MS`]; kinds beyond [`ERROR_KINDS_KEPT`] recent ones share one line
    /// per [`ERROR_RELOG_MS`].
    pub fn error_worth_logging(
        &mut self,
        kind: ErrorKind,
        now: Instant,
        rate: TickRate,
    ) -> Option<Unlogged> {
        self.errors_logged.note(kind, now, rate)
    }
}
