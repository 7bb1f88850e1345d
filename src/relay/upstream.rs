//! One reactor thread's upstream calls: which pair a call goes on, what each answer means,
//! whether a region's engine went silent, the tip-account refreshes, the next-leader polls and
//! the bots' bundle-status queries ([`Queries`]). Sans-IO and clock-free; built on [`Links`], which keeps the connections those calls run on.
//!
//! Pacing is the limiter's: a pair is handed out by [`Upstream::acquire`], held while its call
//! runs, and booked again from the answer (or from the answer plus the engine's Retry-After).
//! It is NOT the bundles: which bundle goes next and how it is counted are the dispatcher's; a
//! bundle call's end is reported as an [`Ended`] for the dispatcher to settle.
//!
//! A silent engine costs only what was already sent into it: when a call has waited a quarter
//! of its deadline with no call of its region answered meanwhile, the region is paused
//! (no bundle is sent to it), its connections are PINGed, and one probe call at a time asks
//! whether its engine answers again.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::arena::SlotHandle;
use crate::clock::{Instant, Ticks};
use crate::egress::transport::TransportError;
use crate::grpc::{self, Code, Outcome};
use crate::h2::conn::{Event, StreamEnd, StreamId};
use crate::journal::{Egress, Text, Verdict};
use crate::limiter::{Acquire, LaneId, Limiter, PairId, REGIONS_MAX, RegionCounts, RegionId};
use crate::log::LogQueue;
use crate::metrics::ThreadMetrics;
use crate::metrics::accounting::Stats;

use super::ThreadSpec;
use super::auth::Step;
use super::leader::{self, Board, VALID_POLLS};
use super::links::{ConnectOrder, DENIED_FIRST_RETRY_MS, DENIED_RETRY_MS, EnginePath, Links};
use super::observe;
use super::pairs::{Call, InFlight, Link};
use super::queries::{Asked, Full, QUERIES_MAX, QUERY_PAIR_WAIT_MS, Queries, Query, Unanswered};
use super::region::{ErrorKind, Silence};
use super::tips::{TIP_ACCOUNTS_MAX, TIP_REFRESH_MS, TIP_RETRY_MS, TipCache};

/// A region goes silent when a call has waited this share of the call deadline with nothing
/// at all received from the region meanwhile: well past any engine's normal answer, and early
/// enough that few bundles follow it into the silence. Pausing a region loses no bundle (they
/// wait, or expire counted), so an early verdict costs latency only.
const SILENCE_SHARE_OF_TIMEOUT: u64 = 4;

/// A region that finds another running the key's challenge flow looks again this much later.
const AUTH_FLOW_WAIT_MS: u64 = 10;

/// What became of a bundle's call, for the dispatcher to settle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// The engine accepted it.
    Delivered,
    /// The engine told this pair to wait (the cooldown is applied): the bundle goes to another.
    Cooldown,
    /// Not processed, by the engine's word or because its request never left whole: send it
    /// again (it counts as an attempt).
    Retry,
    /// Refused for good.
    Rejected,
    /// Lost after being fully sent: it may have been processed, so it is not sent again.
    Failed,
    /// The engine refused the source, not the bundle: it goes to another pair.
    Denied,
}

/// A bundle call that ended.
#[derive(Clone, Copy, Debug)]
pub struct Ended {
    pub slot: SlotHandle,
    pub fate: Fate,
    /// When the request's last byte went to the kernel, if it did.
    pub written: Option<Instant>,
    /// What the engine said, for the bundle's record.
    pub answer: Answer,
    /// The region the call went to.
    pub region: u8,
}

/// An engine's answer to one bundle call, as the record keeps it.
#[derive(Clone, Copy, Debug)]
pub struct Answer {
    pub verdict: Verdict,
    /// The gRPC status, when the engine gave one.
    pub grpc_code: Option<u8>,
    pub retry_after_ms: u32,
    /// The engine's uuid (accepted), its message (refused), or why the call was lost.
    pub text: Text,
}

impl Answer {
    /// A call that ended without an answer from the engine, `why` (never sent whole: sent
    /// again).
    fn unanswered(why: &str) -> Answer {
        Answer {
            verdict: Verdict::Unprocessed,
            grpc_code: None,
            retry_after_ms: 0,
            text: Text::new(why.as_bytes()),
        }
    }
}

/// Room each pair has in the queue of ended bundle calls (the budget counts it).
pub const ENDED_BYTES_PER_PAIR: usize = std::mem::size_of::<Ended>();

/// See the module docs.
pub struct Upstream {
    links: Links,
    upstream_timeout_ms: u64,
    /// A call outstanding this long with nothing received from its region meanwhile makes
    /// the region silent (see [`Silence`]).
    silence_after: Ticks,
    /// Regions (a bit each) whose silence a bundle answered here ended, not yet told to the
    /// other threads, and when.
    silences_ended: u32,
    silence_ended_at: [Instant; REGIONS_MAX],
    ping_timeout_ms: u64,
    tips: TipCache,
    tip_refresh: Ticks,
    tip_retry: Ticks,
    tip_region: usize,
    /// The next leader, shared by the threads; this thread's claim on it; how often it is
    /// asked; the region asked last.
    leader: Arc<Board>,
    /// This thread's claim on the poll it has in flight (its poll is in flight while it holds
    /// one: a claim that finds no pair is given back at once).
    leader_claim: Option<leader::Claim>,
    leader_poll: Ticks,
    leader_region: usize,
    /// Unix time (ms) at `unix_at`, for tokens' expiries (the only wall-clock times the
    /// upstream reads).
    unix_base_ms: u64,
    unix_at: Instant,
    /// Bots' bundle-status queries waiting on an engine; the region asked last when any will do.
    queries: Queries,
    query_region: usize,
    /// Earliest instant call work (a silent region's probe, a pair coming free) needs the
    /// dispatcher again.
    wake: Option<Instant>,
    /// Bundle calls that ended, for the dispatcher (at most one per pair between drains).
    ended: VecDeque<Ended>,
    /// When the earliest pair timer falls due, as of the last [`Upstream::file_timers`].
    timer_due: Option<Instant>,
    stats: Arc<Stats>,
    metrics: Arc<ThreadMetrics>,
}

impl Upstream {
    /// Everything a thread's upstream needs, allocated now.
    pub fn new(
        spec: &ThreadSpec,
        rate: crate::clock::TickRate,
        now: Instant,
        stats: Arc<Stats>,
        metrics: Arc<ThreadMetrics>,
    ) -> Upstream {
        let links = Links::new(spec, rate, now, stats.clone(), metrics.clone());
        let pair_count = links.pair_count();
        let poll = rate.from_ms(spec.leader.poll_ms);
        spec.leader_board
            .set_period(now, poll, Ticks(poll.0.saturating_mul(VALID_POLLS)));
        Upstream {
            links,
            upstream_timeout_ms: spec.upstream_timeout_ms,
            silence_after: rate
                .from_ms((spec.upstream_timeout_ms / SILENCE_SHARE_OF_TIMEOUT).max(1)),
            silences_ended: 0,
            silence_ended_at: [Instant(0); REGIONS_MAX],
            ping_timeout_ms: spec.ping_timeout_ms,
            tips: TipCache::new(now),
            tip_refresh: rate.from_ms(TIP_REFRESH_MS),
            tip_retry: rate.from_ms(TIP_RETRY_MS),
            tip_region: spec.thread,
            leader: spec.leader_board.clone(),
            leader_claim: None,
            leader_poll: rate.from_ms(spec.leader.poll_ms),
            leader_region: spec.thread,
            unix_base_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            unix_at: now,
            queries: Queries::new(),
            query_region: spec.thread,
            wake: None,
            ended: VecDeque::with_capacity(pair_count),
            timer_due: None,
            stats,
            metrics,
        }
    }

    pub fn pair_count(&self) -> usize {
        self.links.pair_count()
    }

    pub fn limiter(&self) -> &Limiter {
        self.links.limiter()
    }

    /// Lane `lane`'s pairs by limiter state at `now` (a booking that has fallen due counts as
    /// ready, not booked).
    pub fn lane_counts_at(&mut self, lane: usize, now: Instant) -> RegionCounts {
        self.links.limiter_mut().advance(now);
        self.links.limiter().lane_counts(LaneId(lane as u8))
    }

    pub fn link(&self, pair: PairId) -> Link {
        self.links.link(pair)
    }

    /// This thread's log queue (the reactor writes its own lines there too).
    pub fn log(&self) -> &Arc<LogQueue> {
        self.links.log()
    }

    /// Why the pair's last connection failed, until one succeeds.
    pub fn last_error(&self, pair: PairId) -> Option<&TransportError> {
        self.links.last_error(pair)
    }

    /// Handshake slots in use: pairs connecting or handshaking.
    pub fn handshakes_in_progress(&self) -> u32 {
        self.links.handshakes_in_progress()
    }

    fn wake_at(&mut self, at: Instant) {
        self.wake = Some(self.wake.map_or(at, |w| if at.0 < w.0 { at } else { w }));
    }

    /// When upstream work needs the dispatcher again at the latest: a connect due, a probe, a
    /// pair coming free for a waiting bundle. Cleared by [`Upstream::begin_dispatch`].
    pub fn next_deadline(&self) -> Option<Instant> {
        [self.wake, self.links.next_connect_at(), self.timer_due]
            .into_iter()
            .flatten()
            .min_by_key(|t| t.0)
    }

    /// A new dispatching pass starts: the deadlines it needs are set again as it runs.
    pub fn begin_dispatch(&mut self) {
        self.wake = None;
    }

    // ---- reloads ----

    /// A reload's call deadline (and the silence threshold derived from it), PING timeout,
    /// and everything the pairs take ([`Links::retune`]).
    pub fn retune(&mut self, t: &super::tuning::Tuning, now: Instant) {
        let rate = self.links.rate();
        self.upstream_timeout_ms = t.upstream_timeout_ms;
        self.silence_after =
            rate.from_ms((t.upstream_timeout_ms / SILENCE_SHARE_OF_TIMEOUT).max(1));
        self.ping_timeout_ms = t.ping_timeout_ms;
        let poll = rate.from_ms(t.leader.poll_ms);
        self.leader
            .set_period(now, poll, Ticks(poll.0.saturating_mul(VALID_POLLS)));
        self.leader_poll = poll;
        // Silence checks move with the threshold; the setup deadlines with the connect timeout.
        self.links.retune(t, now);
    }

    /// Region `r`'s pairs take no more calls and close once idle (`retired`), or connect again.
    pub fn retire_region(&mut self, r: usize, retired: bool, now: Instant) {
        self.links.retire_region(r, retired, now);
    }

    /// Region `r`'s name.
    pub fn region_name(&self, r: usize) -> &str {
        &self.links.region(r).name
    }

    /// Sources of this thread the config lists.
    pub fn sources_listed(&self) -> usize {
        self.links.sources_listed()
    }

    // ---- pairs for calls ----

    /// Region `r`'s engine went silent: nothing may be sent to it but probes (and, once one
    /// is answered, one bundle at a time until a bundle is answered).
    pub fn is_silent(&self, r: usize) -> bool {
        self.links
            .region(r)
            .silence
            .is_some_and(|s| s.holds_bundles())
    }

    /// Region `r` is on trial after a silence here: its one bundle out may end the silence in a
    /// round trip.
    pub fn on_trial(&self, r: usize) -> bool {
        self.links.region(r).silence.is_some_and(|s| s.trial)
    }

    /// Region `r` went silent and has not answered a bundle since (it may be on trial).
    pub fn has_silence(&self, r: usize) -> bool {
        self.links.region(r).silence.is_some()
    }

    /// How long a call waits unanswered before its region goes silent: well past an engine's
    /// normal answer.
    pub fn silence_after(&self) -> Ticks {
        self.silence_after
    }

    /// Region `r` requires searcher authentication and holds no valid access token: nothing
    /// may be sent to it but the auth service's calls.
    pub fn is_unauthenticated(&self, r: usize) -> bool {
        let region = self.links.region(r);
        region.auth.is_some() && region.call.authorization.is_none()
    }

    /// Region `r` takes calls now: neither silent nor waiting for a token.
    pub fn may_call(&self, r: usize) -> bool {
        !self.is_silent(r) && !self.is_unauthenticated(r)
    }

    fn unix_ms(&self, now: Instant) -> u64 {
        self.unix_base_ms + self.links.rate().to_us(now.since(self.unix_at)) / 1_000
    }

    /// The instant of Unix time `ms` on this thread's clock.
    fn instant_of_unix_ms(&self, ms: u64) -> Instant {
        let ahead = ms.saturating_sub(self.unix_base_ms);
        self.unix_at.after(self.links.rate().from_ms(ahead))
    }

    // ---- searcher authentication ----

    /// Each region that authenticates: its access token (or none) set on its calls, and the
    /// auth service's call that is due started on a pair the limiter hands out (the token first:
    /// the dispatcher calls this before sending anything).
    pub fn run_auth(&mut self, now: Instant) {
        let unix = self.unix_ms(now);
        for r in 0..self.links.regions().len() {
            let Some(auth) = self.links.region(r).auth.as_ref() else {
                continue;
            };
            let bearer = auth.bearer(unix);
            if bearer != self.links.region(r).call.authorization.as_deref() {
                let bearer = bearer.map(str::to_string);
                self.links.region_mut(r).call.authorization = bearer;
            }
            let auth = self.links.region(r).auth.as_ref().expect("checked");
            let Some(step) = auth.due(unix) else {
                if let Some(at) = auth.next_due_ms() {
                    self.wake_at(self.instant_of_unix_ms(at));
                }
                continue;
            };
            if self.is_silent(r) || self.links.region(r).throttled_until.0 > now.0 {
                continue;
            }
            let auth = self.links.region_mut(r).auth.as_mut().expect("checked");
            if !auth.claim(step) {
                // Another region or thread runs the key's challenge flow: look again shortly.
                self.wake_at(now.after(self.links.rate().from_ms(AUTH_FLOW_WAIT_MS)));
                continue;
            }
            let pair = match self.acquire_any(r, now) {
                Acquire::Pair(pair) => pair,
                got => {
                    if let Some(a) = self.links.region_mut(r).auth.as_mut() {
                        a.unclaim();
                    }
                    match got {
                        Acquire::WaitUntil(at) => self.wake_at(at),
                        _ if !self.links.region(r).connect_requested => {
                            self.links.connect_region(r, now)
                        }
                        _ => {}
                    }
                    continue;
                }
            };
            let method = match step {
                Step::Challenge => grpc::Method::GenerateAuthChallenge,
                Step::Tokens => grpc::Method::GenerateAuthTokens,
                Step::Refresh => grpc::Method::RefreshAccessToken,
            };
            let request = self
                .links
                .region_mut(r)
                .auth
                .as_mut()
                .expect("checked")
                .start(step);
            let timeout_ms = self.upstream_timeout_ms;
            let started = self.links.start_call(pair, method, timeout_ms, now, |buf| {
                buf.get_mut(..request.len())?.copy_from_slice(&request);
                Some(request.len())
            });
            self.stats.auth_calls.inc();
            match started {
                Some(stream) => self.call_started(pair, Call::Auth, stream, now),
                None => {
                    self.give_back_unused(pair, now);
                    self.auth_failed(r, now, "the connection could not take the call");
                }
            }
        }
    }

    /// Region `r`'s auth call in flight failed (`why`): counted, logged at most every
    /// [`super::region::ERROR_RELOG_MS`] per region, tried again after its back-off.
    fn auth_failed(&mut self, r: usize, now: Instant, why: &str) {
        let unix = self.unix_ms(now);
        let rate = self.links.rate();
        self.stats.auth_failures.inc();
        let region = self.links.region_mut(r);
        let step = region.auth.as_ref().and_then(|a| a.in_flight());
        if let Some(a) = region.auth.as_mut() {
            a.failed(unix);
        }
        let step = step.map_or("authentication", Step::label);
        if let Some(unlogged) = region.error_worth_logging(ErrorKind::of_text(step), now, rate) {
            self.links.log().line(format_args!(
                "region {}: {unlogged}searcher authentication failed at {step}: {why}; no call to it until it succeeds (tried again after a back-off)",
                self.links.region(r).name
            ));
        }
    }

    /// Region `r`'s auth call in flight was answered `msg` (OK).
    fn auth_answered(&mut self, r: usize, msg: &[u8], now: Instant) {
        let unix = self.unix_ms(now);
        let Some(auth) = self.links.region_mut(r).auth.as_mut() else {
            return;
        };
        let first = auth.bearer(unix).is_none();
        match auth.answered(msg, unix) {
            Ok(true) => {
                self.stats.auth_tokens.inc();
                let bearer = auth.bearer(unix).map(str::to_string);
                self.links.region_mut(r).call.authorization = bearer;
                if first {
                    self.links.log().line(format_args!(
                        "region {}: authenticated as searcher {}",
                        self.links.region(r).name,
                        self.links
                            .region(r)
                            .auth
                            .as_ref()
                            .map_or("", |a| a.pubkey_b58())
                    ));
                }
            }
            Ok(false) => {}
            Err(why) => {
                // The step already backed off; counted and logged here.
                self.stats.auth_failures.inc();
                let rate = self.links.rate();
                if let Some(unlogged) = self.links.region_mut(r).error_worth_logging(
                    ErrorKind::of_text("auth answer"),
                    now,
                    rate,
                ) {
                    self.links.log().line(format_args!(
                        "region {}: {unlogged}searcher authentication: the engine's answer is unusable: {why}",
                        self.links.region(r).name
                    ));
                }
            }
        }
    }

    /// When lane `lane`'s pool can next send (`None`: no pair up): its next ready pair, or the
    /// end of its region's back-off when its engine throttles everyone.
    pub fn next_ready_at(&mut self, lane: usize) -> Option<Instant> {
        let until = self
            .links
            .region(lane / self.links.groups())
            .throttled_until;
        let at = self.links.limiter_mut().next_ready_at(LaneId(lane as u8))?;
        Some(if until.0 > at.0 { until } else { at })
    }

    /// Sources of egress group `g` this thread still lists: none, and a bundle waiting in one
    /// of the group's lanes here can only leave through another thread.
    pub fn group_listed(&self, g: usize) -> u32 {
        self.links.group_listed(g)
    }

    /// A pair of region `r` for a call of no tenant's (tip accounts, a leader poll, a status
    /// query, a probe; [`Links::acquire_any`]), unless its engine throttles everyone: then when
    /// that ends, as for a bundle ([`Upstream::acquire`]).
    fn acquire_any(&mut self, r: usize, now: Instant) -> Acquire {
        let until = self.links.region(r).throttled_until;
        if until.0 > now.0 {
            return Acquire::WaitUntil(until);
        }
        self.links.acquire_any(r, now)
    }

    /// A pair of region `r` for a call of no tenant's now ([`Upstream::acquire_any`]; for a
    /// bot's status query, one bundles can spare, [`Links::acquire_spare`]), or none, noting
    /// in `soonest` when one of its pairs will be ready.
    fn call_pair(
        &mut self,
        r: usize,
        now: Instant,
        soonest: &mut Option<Instant>,
        query: bool,
    ) -> Option<PairId> {
        let got = if query && self.links.region(r).throttled_until.0 <= now.0 {
            self.links.acquire_spare(r, now)
        } else {
            self.acquire_any(r, now)
        };
        match got {
            Acquire::Pair(pair) => Some(pair),
            Acquire::WaitUntil(at) => {
                *soonest = Some(sooner(*soonest, at));
                None
            }
            Acquire::NoPairUp => None,
        }
    }

    /// A pair of lane `lane` (a region's pairs of one egress group) to send on now, held until
    /// its call ends; or when one will be ready (the wake-up is noted); or none up (a lazily
    /// connecting region then connects).
    pub fn acquire(&mut self, lane: usize, now: Instant) -> Acquire {
        let r = lane / self.links.groups();
        let until = self.links.region(r).throttled_until;
        if until.0 > now.0 {
            // Its engine throttles everyone: another address would be throttled too.
            self.wake_at(until);
            return Acquire::WaitUntil(until);
        }
        let got = self.links.acquire(lane, now);
        match got {
            Acquire::WaitUntil(at) => self.wake_at(at),
            Acquire::NoPairUp if !self.links.region(r).connect_requested => {
                self.links.connect_region(r, now)
            }
            _ => {}
        }
        got
    }

    /// A bundle's call on held `pair`, its request the encoded `frame` (a SendBundle message,
    /// or with `json` a forwarded `sendTransaction` body); false when the connection cannot
    /// take a call (closing, out of stream ids): the pair is given back and leaves rotation,
    /// and the bundle should wait for another.
    pub fn start_bundle(
        &mut self,
        pair: PairId,
        slot: SlotHandle,
        frame: &[u8],
        json: bool,
        send_by: Instant,
        now: Instant,
    ) -> bool {
        let timeout_ms = self.upstream_timeout_ms;
        let started = if json {
            self.links
                .start_forward(pair, timeout_ms, now, frame, EnginePath::Transactions)
        } else {
            self.links
                .start_call(pair, grpc::Method::SendBundle, timeout_ms, now, |buf| {
                    let out = buf.get_mut(..frame.len())?;
                    out.copy_from_slice(frame);
                    Some(frame.len())
                })
        };
        let Some(stream) = started else {
            self.give_back_unused(pair, now);
            return false;
        };
        // Past its max age the bundle must not reach the engine: a body the engine's flow
        // control holds until then is given up (and the bundle, too old to go again, expires).
        self.links.send_by(pair, stream, send_by);
        self.call_started_as(pair, Call::Bundle(slot), json, stream, now);
        let r = self.links.region_of(pair);
        if let Some(sil) = self.links.region_mut(r).silence.as_mut() {
            sil.trial_sent = Some(now);
        }
        true
    }

    fn call_started(&mut self, pair: PairId, call: Call, stream: StreamId, now: Instant) {
        self.call_started_as(pair, call, false, stream, now);
    }

    fn call_started_as(
        &mut self,
        pair: PairId,
        call: Call,
        json: bool,
        stream: StreamId,
        now: Instant,
    ) {
        let token = self
            .links
            .region(self.links.region_of(pair))
            .auth
            .as_ref()
            .map_or(0, |a| a.generation());
        let st = self.links.pair_mut(pair);
        st.in_flight = Some(InFlight {
            call,
            json,
            stream,
            started: now,
            written: None,
            silence_checked: false,
            token,
        });
        st.stack.track(stream);
        self.links.mark_dirty(pair);
    }

    /// A held pair whose connection could not take the call: back to the limiter (its next
    /// slot counts from now), out of rotation.
    fn give_back_unused(&mut self, pair: PairId, now: Instant) {
        self.links.finish(pair, now);
        self.links.request_close(pair, now);
    }

    // ---- bundle-status queries ----

    /// Opens a bot's status query; it waits up to [`QUERY_PAIR_WAIT_MS`] for a pair.
    pub fn ask(&mut self, a: &Asked<'_>, now: Instant) -> Result<u16, Full> {
        let deadline = now.after(self.links.rate().from_ms(QUERY_PAIR_WAIT_MS));
        let q = self.queries.open(a, deadline)?;
        self.stats.status_queries.inc();
        Ok(q)
    }

    /// Query `q`.
    pub fn query(&self, q: u16) -> &Query {
        self.queries.get(q)
    }

    /// A query whose bot can be answered now ([`Upstream::query`]); free it after.
    pub fn poll_query_done(&mut self) -> Option<u16> {
        self.queries.poll_done()
    }

    pub fn free_query(&mut self, q: u16) {
        self.queries.free(q);
    }

    /// Starts every waiting query that gets a pair (after the bundles: the dispatcher calls
    /// this once they had theirs); one past its wait is answered without the engine.
    pub fn run_queries(&mut self, now: Instant) {
        let mut again = [0u16; QUERIES_MAX];
        let mut n_again = 0;
        for _ in 0..self.queries.waiting_len() {
            let Some(q) = self.queries.next_waiting() else {
                break;
            };
            let deadline = self.queries.get(q).deadline;
            if now.0 > deadline.0 {
                self.queries.give_up(q, Unanswered::NoPair);
                self.stats.status_queries_unanswered.inc();
                continue;
            }
            if let Err(at) = self.start_query(q, now) {
                self.wake_at(match at {
                    Some(at) if at.0 < deadline.0 => at,
                    _ => deadline.after(Ticks(1)),
                });
                again[n_again] = q;
                n_again += 1;
            }
        }
        for &q in &again[..n_again] {
            self.queries.wait_again(q);
        }
    }

    /// Starts query `q` on a free pair: of its region first, else of any region (every
    /// engine answers for every bundle). `Err`: none free, with when one will be.
    fn start_query(&mut self, q: u16, now: Instant) -> Result<(), Option<Instant>> {
        let n = self.links.regions().len();
        let e = self.queries.get(q);
        let first = e.region.map_or(self.query_region, usize::from) % n;
        let mut ids = [[0u8; 32]; crate::jsonrpc::STATUS_IDS_MAX];
        let n_ids = e.forwarded_ids(&mut ids);
        let mut body = [0u8; crate::jsonrpc::STATUS_QUERY_LEN_MAX];
        let len = crate::jsonrpc::write_status_query(e.ask.method(), &ids[..n_ids], &mut body)
            .expect("five ids fit");
        let mut soonest: Option<Instant> = None;
        for k in 0..n {
            let r = (first + k) % n;
            if !self.may_call(r) {
                continue;
            }
            let Some(pair) = self.call_pair(r, now, &mut soonest, true) else {
                continue;
            };
            let timeout_ms = self.upstream_timeout_ms;
            let body = &body[..len];
            match self
                .links
                .start_forward(pair, timeout_ms, now, body, EnginePath::Bundles)
            {
                Some(stream) => {
                    self.query_region = r + 1;
                    self.queries.started(q);
                    self.call_started_as(pair, Call::Query(q), true, stream, now);
                    return Ok(());
                }
                None => self.give_back_unused(pair, now),
            }
        }
        Err(soonest)
    }

    // ---- tips and probes ----

    /// The tip accounts as a JSON array: the engines' latest answer, Jito's published list
    /// until one arrives.
    pub fn tip_accounts_json(&self) -> &[u8] {
        self.tips.json()
    }

    /// Whether the tip refresh has waited a whole refresh period past its due time: the
    /// dispatcher then runs it before the bundles ([`Upstream::refresh_tips`] with no region
    /// busy), so a pool that bots keep busy still refreshes once a period, a period late at
    /// most, for one pair's turn.
    pub fn tips_starved(&self, now: Instant) -> bool {
        self.tips.starved(now, self.tip_refresh)
    }

    /// A starved refresh ([`Upstream::tips_starved`]) goes before the bundles; once it is on a
    /// pair, the next may jump ahead only a refresh period later (a refresh the engine keeps
    /// failing retries behind the bundles meanwhile).
    pub fn refresh_starved_tips(&mut self, now: Instant) {
        if !self.tips_starved(now) {
            return;
        }
        if self.refresh_tips(0, now) {
            // A pair was taken (its call started, or its connection could not take one): the
            // next jump is a period away either way.
            self.tips.wanted_since = now;
        }
    }

    /// Asks one engine for the tip accounts when a refresh is due, on a pair the limiter hands
    /// out like any other (a GetTipAccounts call counts against the pair's rate too). Regions
    /// take turns; a region with bundles waiting (`busy`, bit per region) sends those first (for
    /// a refresh period past the due time at most: [`Upstream::tips_starved`]), a silent one
    /// gets probes instead.
    ///
    /// Without a pair to ask on, the refresh waits for one rather than a retry: when every
    /// candidate region's pairs are paced, until the soonest is ready; when none has a pair in
    /// rotation (a relay that just started, or engines all down), it stays due, so the first
    /// iteration after a pair joins asks (a bot's first getTipAccounts gets the engines' list
    /// within a connect, not [`TIP_RETRY_MS`] later). Pairs all held by calls are not that
    /// case: bundles take them first, so asking again every iteration would only cost the
    /// iterations; it retries. True when it took a pair.
    pub fn refresh_tips(&mut self, busy: u32, now: Instant) -> bool {
        if now.0 < self.tips.due.0 || self.tips.in_flight {
            return false;
        }
        let n = self.links.regions().len();
        let mut soonest: Option<Instant> = None;
        let mut retry_later = false;
        for k in 0..n {
            let r = (self.tip_region + k) % n;
            if busy & (1 << r) != 0 || !self.may_call(r) {
                retry_later = true;
                continue;
            }
            let pair = match self.acquire_any(r, now) {
                Acquire::Pair(pair) => pair,
                Acquire::WaitUntil(at) => {
                    soonest = Some(sooner(soonest, at));
                    continue;
                }
                Acquire::NoPairUp => {
                    retry_later |= self.links.limiter().counts(RegionId(r as u8)).held > 0;
                    continue;
                }
            };
            self.tip_region = r + 1;
            if self.start_tip_call(pair, Call::Tips, now) {
                self.tips.call_started();
                self.stats.tip_calls.inc();
            } else {
                // The connection cannot take a call: out of rotation, as for a bundle.
                self.give_back_unused(pair, now);
                self.tips.due = now.after(self.tip_retry);
            }
            return true;
        }
        let retry = now.after(self.tip_retry);
        self.tips.due = match soonest {
            Some(at) if at.0 < retry.0 => at,
            // A region busy, silent or with every pair held (its bundles and probes come
            // first), or pairs paced past the retry.
            _ if retry_later || soonest.is_some() => retry,
            // No pair in rotation anywhere: still due.
            _ => self.tips.due,
        };
        false
    }

    /// An engine's GetTipAccounts answer of `len` bytes was kept, or refused (counted, and
    /// logged once per refresh: bots keep the list they had).
    fn tips_answered(&mut self, region: usize, kept: bool, len: usize) {
        if kept {
            self.stats.tip_answers.inc();
            return;
        }
        self.stats.tip_answers_refused.inc();
        self.links.log().line(format_args!(
            "region {}: its GetTipAccounts answer is not a list of 1 to {TIP_ACCOUNTS_MAX} public keys ({len} bytes); getTipAccounts keeps answering the list it had",
            self.links.region(region).name,
        ));
    }

    /// The next leader's region, while an engine's answer is trusted.
    pub fn leader_region(&self, now: Instant) -> Option<u8> {
        self.leader.region(now)
    }

    /// Asks an engine for the next leader when a poll is due and this thread claims it (one
    /// thread polls for all, see [`Board`]), on a pair the limiter hands out like any other.
    /// Regions take turns; one with no bundle waiting (`busy`, bit per region) is asked first,
    /// so a poll rarely delays a bundle, but a busy one is asked rather than none.
    pub fn poll_leader(&mut self, busy: u32, now: Instant) {
        if self.leader_claim.is_some() {
            return;
        }
        let hold = self.links.rate().from_ms(self.upstream_timeout_ms);
        match self.leader.claim(now, hold) {
            Ok(claim) => self.leader_claim = Some(claim),
            Err(due) => {
                self.wake_at(due);
                return;
            }
        }
        let n = self.links.regions().len();
        let mut soonest: Option<Instant> = None;
        for idle_only in [true, false] {
            for k in 0..n {
                let r = (self.leader_region + k) % n;
                if (idle_only && busy & (1 << r) != 0) || !self.may_call(r) {
                    continue;
                }
                let Some(pair) = self.call_pair(r, now, &mut soonest, false) else {
                    continue;
                };
                self.leader_region = r + 1;
                let timeout_ms = self.upstream_timeout_ms;
                match self.links.start_leader_call(pair, timeout_ms, now) {
                    Some(stream) => {
                        self.stats.leader_polls.inc();
                        self.call_started(pair, Call::Leader, stream, now);
                    }
                    None => {
                        self.give_back_unused(pair, now);
                        self.leader_unanswered(now);
                    }
                }
                return;
            }
        }
        // No pair of any region free now: the poll is due again when the soonest is ready (a
        // poll period at most), for whichever thread claims it then.
        let retry = now.after(self.leader_poll);
        let at = sooner(soonest, retry);
        if let Some(claim) = self.leader_claim.take() {
            self.leader.unanswered(claim, at);
        }
        self.wake_at(at);
    }

    /// A leader poll that got no usable answer (or could not start): the next one is due a
    /// period from now; the last answer stays trusted until it ages out.
    fn leader_unanswered(&mut self, now: Instant) {
        if let Some(claim) = self.leader_claim.take() {
            self.leader.unanswered(claim, now.after(self.leader_poll));
        }
    }

    /// A silent region gets one probe call at a time (GetTipAccounts, through the limiter like
    /// any call), backing off while they go unanswered; an answer puts it on trial (one
    /// bundle at a time until a bundle is answered).
    pub fn probe_silent(&mut self, r: usize, now: Instant) {
        let Some(sil) = self.links.region(r).silence else {
            return;
        };
        if let Some(sent) = sil.trial_sent {
            // Its call ends by its deadline; one that ended unseen (its connection gone) is
            // given up a second after.
            let due = sent.after(self.links.rate().from_ms(self.upstream_timeout_ms + 1_000));
            if now.0 < due.0 {
                self.wake_at(due);
                return;
            }
            let rate = self.links.rate();
            if let Some(sil) = self.links.region_mut(r).silence.as_mut() {
                sil.trial_unanswered(now, rate);
            }
            return;
        }
        if sil.trial || sil.probe_sent.is_some() || self.is_unauthenticated(r) {
            return;
        }
        if now.0 < sil.probe_at.0 {
            self.wake_at(sil.probe_at);
            return;
        }
        let pair = match self.acquire_any(r, now) {
            Acquire::Pair(pair) => pair,
            Acquire::WaitUntil(at) => {
                self.wake_at(at);
                return;
            }
            Acquire::NoPairUp => return,
        };
        if self.start_tip_call(pair, Call::Probe, now) {
            if let Some(sil) = self.links.region_mut(r).silence.as_mut() {
                sil.probe_sent = Some(now);
            }
        } else {
            self.give_back_unused(pair, now);
        }
    }

    /// Starts a GetTipAccounts call (a cache refresh or a silent region's probe) on held
    /// `pair`; false when its connection cannot take a call.
    fn start_tip_call(&mut self, pair: PairId, call: Call, now: Instant) -> bool {
        let timeout_ms = self.upstream_timeout_ms;
        let started =
            self.links
                .start_call(pair, grpc::Method::GetTipAccounts, timeout_ms, now, |_| {
                    Some(0)
                });
        let Some(stream) = started else {
            return false;
        };
        self.call_started(pair, call, stream, now);
        true
    }

    /// A call outstanding past `silence_after` with nothing received from its region
    /// meanwhile: the region goes silent (one log line), its connections are PINGed (a dead
    /// one closes when its PING goes unanswered), and no bundle is sent to it until a probe
    /// call is answered. Each call is looked at once, when its pair's timer for it fires:
    /// whatever the region sends later is later than the call's request, so the answer would
    /// not change.
    fn check_silence(&mut self, pair: PairId, now: Instant) {
        let rate = self.links.rate();
        let Some(f) = self.links.pair(pair).in_flight else {
            return;
        };
        // Bytes stuck unsent that long are as telling as an answer that does not come.
        let written = f.written.unwrap_or(f.started);
        if f.silence_checked || now.since(written).0 <= self.silence_after.0 {
            return;
        }
        if let Some(f) = self.links.pair_mut(pair).in_flight.as_mut() {
            f.silence_checked = true;
        }
        let r = self.links.region_of(pair);
        let region = self.links.region(r);
        if region.silence.is_some() || region.last_rx.0 >= written.0 {
            return;
        }
        self.links.region_mut(r).silence = Some(Silence::new(written, now));
        self.stats.silences.inc();
        let outstanding = (0..self.links.sources() as u32)
            .filter(|&a| {
                let q = self.links.limiter().pair(a, RegionId(r as u8));
                self.links.pair(q).in_flight.is_some()
            })
            .count();
        self.links.log().line(format_args!(
            "region {}: no call answered by its engine for {} ms with {outstanding} calls outstanding: no new bundles for it until it answers a probe",
            self.links.region(r).name,
            rate.to_us(now.since(written)) / 1_000
        ));
        self.links.ping_region(r, self.ping_timeout_ms, now);
    }

    /// A call to region `r` was answered (`bundle`: a bundle's): its engine works. Only an
    /// answer counts: a front end that keeps connections alive (SETTINGS, PINGs, a
    /// reconnect's handshake) while the engine behind it hangs must still read as silent. A
    /// silent region's probe answered puts it on trial; a bundle answered ends the silence.
    fn heard_from(&mut self, r: usize, now: Instant, bundle: bool) {
        self.links.region_mut(r).last_rx = now;
        if !bundle {
            let rate = self.links.rate();
            if let Some(sil) = self.links.region_mut(r).silence.as_mut()
                && !sil.trial
            {
                sil.trial = true;
                sil.probe_sent = None;
                let ms = rate.to_us(now.since(sil.since)) / 1_000;
                self.links.log().line(format_args!(
                    "region {}: its engine answers a probe after {ms} ms of silence: bundles go again one at a time until one is answered",
                    self.links.region(r).name,
                ));
            }
            return;
        }
        if let Some(sil) = self.links.region_mut(r).silence.take() {
            self.silences_ended |= 1 << r;
            self.silence_ended_at[r] = now;
            self.links.log().line(format_args!(
                "region {}: its engine answers again after {} ms of silence",
                self.links.region(r).name,
                self.links.rate().to_us(now.since(sil.since)) / 1_000
            ));
        }
    }

    /// Regions (a bit each) whose silence a bundle answered here ended since the last call,
    /// news for the other threads; and when each was answered.
    pub fn take_silences_ended(&mut self) -> (u32, &[Instant; REGIONS_MAX]) {
        (
            std::mem::take(&mut self.silences_ended),
            &self.silence_ended_at,
        )
    }

    /// Another thread heard region `r`'s engine answer a bundle at `heard`: a silence here
    /// whose unanswered call was written before it goes on trial now (one bundle at a time
    /// until one is answered here), without waiting for this thread's own probe, which may
    /// be seconds off after probes went unanswered. One written since stays: the engine
    /// went quiet on this thread after it answered there.
    pub fn heard_elsewhere(&mut self, r: usize, heard: Instant, now: Instant) {
        let rate = self.links.rate();
        let Some(sil) = self.links.region_mut(r).silence.as_mut() else {
            return;
        };
        if heard.0 <= sil.since.0 || !sil.heard_elsewhere() {
            return;
        }
        let ms = rate.to_us(now.since(sil.since)) / 1_000;
        self.links.log().line(format_args!(
            "region {}: its engine answers a bundle through another thread after {ms} ms of silence: bundles go again one at a time until one is answered",
            self.links.region(r).name,
        ));
    }

    /// A probe started at `started` got no answer: the silence waiting for it backs off. One
    /// no silence waits for (it went on trial meanwhile, or a later silence began) changes
    /// nothing.
    fn probe_unanswered(&mut self, r: usize, started: Instant, now: Instant) {
        let rate = self.links.rate();
        if let Some(sil) = self.links.region_mut(r).silence.as_mut()
            && sil.probe_sent == Some(started)
        {
            sil.probe_unanswered(now, rate);
        }
    }

    // ---- the reactor's events ----

    /// A pair whose (re)connect is due, if the handshake budget allows one more.
    pub fn poll_connect(&mut self, now: Instant) -> Option<ConnectOrder> {
        self.links.poll_connect(now)
    }

    /// The pair's socket connected.
    pub fn connected(&mut self, pair: PairId, now: Instant) {
        self.links.connected(pair, now);
    }

    /// The pair's socket could not even be set up to connect (`errno`).
    pub fn connect_failed(&mut self, pair: PairId, now: Instant, errno: i32) {
        self.links.connect_failed(pair, now, errno);
    }

    /// A pair whose socket the reactor should shut down and close.
    pub fn poll_close(&mut self) -> Option<PairId> {
        self.links.poll_close()
    }

    /// The reactor released the pair's socket (its connect failed, the peer closed it, an
    /// error, or our close). `errno` says why a connect failed, or why the kernel ended a
    /// connection (0: the peer closed it, or we did). A connect that never completed
    /// is a failed connect; anything later ends the connection: calls still running end as its
    /// loss decides, and the pair backs off and reconnects.
    pub fn socket_released(&mut self, pair: PairId, now: Instant, errno: i32) {
        if self.links.link(pair) == Link::Connecting {
            self.links.connect_failed(pair, now, errno);
            return;
        }
        let r = self.links.region_of(pair);
        let we_closed = self.links.link(pair) == Link::Closing;
        // Engines behind load balancers move: look the name up again before reconnecting. A
        // connection that ended at its SOCKS5 proxy before the CONNECT never asked for the
        // engine's address; one whose CONNECT failed had the proxy dial it. One that ended
        // before it was ever up, other than by a close of ours with no error (a reload
        // retiring it, a stop), failed at that address: the pair tries the next one.
        let st = self.links.pair_mut(pair);
        if st.stack.asked_for_engine() {
            if st.rotated || (we_closed && !st.error_this_try) {
                self.links.region(r).addrs.mark_stale();
            } else {
                self.links.failed_at_engine(pair);
            }
        }
        self.links.pair_mut(pair).stack.h2_closed();
        self.drain_events(pair, now);
        if let Some(f) = self.links.pair_mut(pair).in_flight.take() {
            // The connection ended the stream without an event we could map: not sent for sure.
            self.links.finish(pair, now);
            self.call_aborted(f, r, now);
        }
        self.links.connection_ended(pair, we_closed, errno, now);
    }

    /// A call that will get no answer and whose request never left: a bundle goes back to its
    /// dispatcher to be sent again, a tips refresh or a probe is tried again later.
    fn call_aborted(&mut self, f: InFlight, r: usize, now: Instant) {
        if let Some(sil) = self.links.region_mut(r).silence.as_mut()
            && sil.trial_sent == Some(f.started)
        {
            // The trial's bundle never reached the engine: it goes again, as the trial's.
            sil.trial_sent = None;
        }
        match f.call {
            Call::Bundle(slot) => self.ended.push_back(Ended {
                slot,
                fate: Fate::Retry,
                written: f.written,
                answer: Answer::unanswered("the connection ended before the request was sent"),
                region: r as u8,
            }),
            Call::Tips => self.tips.call_ended(now, self.tip_refresh, self.tip_retry),
            Call::Probe => self.probe_unanswered(r, f.started, now),
            Call::Leader => self.leader_unanswered(now),
            Call::Query(q) => self.query_again(q, now, Unanswered::Failed),
            Call::Auth => self.auth_failed(r, now, "the connection ended before the call was sent"),
        }
    }

    /// A pair with bytes to send; the reactor calls [`Upstream::transmit`] for it.
    pub fn poll_dirty(&mut self) -> Option<PairId> {
        self.links.poll_dirty()
    }

    /// The bytes to send on `pair` now, pinned until [`Upstream::transmitted`].
    pub fn transmit(&mut self, pair: PairId, now: Instant) -> &[u8] {
        self.links.transmit(pair, now)
    }

    /// Whether the pinned transmit is all `pair` has to send until something arrives.
    pub fn transmit_is_whole(&self, pair: PairId) -> bool {
        self.links.transmit_is_whole(pair)
    }

    /// `n` bytes of the pinned transmit went out.
    pub fn transmitted(&mut self, pair: PairId, n: usize, now: Instant) {
        self.links.transmitted(pair, n, now);
    }

    /// Bytes arrived on `pair`: through its layers into HTTP/2, then whatever that ended.
    pub fn received(&mut self, pair: PairId, bytes: &[u8], now: Instant) {
        if !self.links.receive(pair, bytes, now) {
            return;
        }
        let ready = self
            .links
            .pair(pair)
            .stack
            .conn()
            .is_some_and(|c| c.is_ready() && !c.is_closed());
        self.drain_events(pair, now);
        self.links.join_rotation_if_answered(pair, ready, now);
    }

    /// Publishes the pair-state gauges (the reactor's coarse period: they are for people).
    pub fn publish_gauges(&self) {
        observe::publish_gauges(
            self.links.limiter(),
            self.links.regions().len(),
            &self.metrics,
        );
    }

    /// The earliest of a pair's deadlines: its setup's, its HTTP/2 connection's next timer
    /// (SETTINGS ack, call deadlines, keepalive or PING deadline), and the silence check of
    /// its call in flight.
    fn deadline_of(&self, pair: PairId) -> Option<Instant> {
        let rate = self.links.rate();
        let st = self.links.pair(pair);
        let h2 = st
            .stack
            .conn()
            .and_then(|c| c.poll_timeout())
            // The connection's clock is nanoseconds from the same origin; one tick later so
            // that rounding never fires it before its time.
            .map(|ns| Instant(rate.from_ns(ns).0 + 1));
        let silence = st.in_flight.filter(|f| !f.silence_checked).map(|f| {
            f.written
                .unwrap_or(f.started)
                .after(Ticks(self.silence_after.0 + 1))
        });
        [self.links.setup_deadline(pair), h2, silence]
            .into_iter()
            .flatten()
            .min_by_key(|t| t.0)
    }

    /// Files again every pair whose deadlines may have moved since the last time (the pair
    /// table queued each pair it handed out for change), and caches when the first falls due.
    /// Costs nothing for pairs nobody touched: an idle pool is not walked.
    pub fn file_timers(&mut self) {
        while let Some(pair) = self.links.poll_retime() {
            let at = self.deadline_of(pair);
            self.links.timers_mut().arm(pair.0, at);
        }
        self.timer_due = self.links.timers_mut().next_due();
    }

    /// Files what is queued, then checks that every pair is filed at its earliest deadline:
    /// the first pair that is not, with both.
    pub fn check_timers(&mut self) -> Result<(), String> {
        self.file_timers();
        for p in 0..self.links.pair_count() as u32 {
            let at = self.deadline_of(PairId(p));
            if !self.links.timers_mut().is_filed_at(p, at) {
                return Err(format!(
                    "pair {p}: deadline {at:?} ({:?}) is not what its timer holds",
                    self.links.link(PairId(p))
                ));
            }
        }
        Ok(())
    }

    /// Runs the timers of every pair with a deadline by `now`: a setup past the connect
    /// timeout fails, HTTP/2's timers run (SETTINGS ack, call deadlines, keepalive PINGs and
    /// their deadlines), a call outstanding past the silence threshold is looked at. One
    /// compare when nothing is due.
    pub fn run_timers(&mut self, now: Instant) {
        if self.timer_due.is_none_or(|t| t.0 > now.0) {
            return;
        }
        let now_ns = self.links.now_ns(now);
        self.links.timers_mut().advance(now);
        while let Some(p) = self.links.timers_mut().pop_due() {
            let pair = PairId(p);
            // Filed again below whatever happens (a timer due a little later stays armed).
            self.links.retime(pair);
            if self.links.setup_overdue(pair, now) {
                continue;
            }
            if let Some(conn) = self.links.pair_mut(pair).stack.conn_mut()
                && conn.poll_timeout().is_some_and(|t| t <= now_ns)
            {
                conn.handle_timeout(now_ns);
                if !conn.poll_transmit().is_empty() {
                    self.links.mark_dirty(pair);
                }
                self.drain_events(pair, now);
            }
            self.check_silence(pair, now);
        }
        self.file_timers();
    }

    /// One line per region (pairs by limiter state, `waiting[r]` bundles, when the region can
    /// send next) and its failing pairs, for `/debug/pairs`.
    pub fn render_pairs(&mut self, waiting: &[usize], now: Instant, out: &mut String) {
        self.links.render_pairs(waiting, now, out);
    }

    fn drain_events(&mut self, pair: PairId, now: Instant) {
        loop {
            let Some(conn) = self.links.pair_mut(pair).stack.conn_mut() else {
                return;
            };
            let Some(ev) = conn.poll_event() else { break };
            let in_flight = self.links.pair(pair).in_flight.is_some();
            match ev {
                Event::StreamEnded(id) => self.stream_ended(pair, id, now),
                Event::GoAway { reason, .. } => self.links.goaway(pair, reason, in_flight, now),
                Event::Closed(e) => self.links.h2_closed(pair, e, now),
                Event::PingAcked => self.links.pair_mut(pair).answered_ping = true,
                // A new connection's admitting PING: it closes, naming why. Otherwise closing
                // now would lose a call still running for certain; it has its own deadline.
                // Without one, the connection is closed and reconnects.
                Event::PingTimedOut { after_ms } if self.links.admitting(pair) => {
                    self.links.ping_unanswered(pair, after_ms, now)
                }
                Event::PingTimedOut { .. } => self.links.stop_calls(pair, in_flight, now),
            }
        }
        self.links.close_if_drained(pair, now);
    }

    fn stream_ended(&mut self, pair: PairId, id: StreamId, now: Instant) {
        let region = self.links.region_of(pair);
        let f = self.links.pair(pair).in_flight.filter(|f| f.stream == id);
        let st = self.links.pair(pair);
        let conn = st.stack.conn().expect("events come from a connection");
        let mut answered = false;
        let mut timed_out = false;
        let mut denied: Option<(Code, [u8; 128], usize)> = None;
        let mut cooldown_ms = None;
        let mut throttled = false;
        let mut leader_answer = false;
        let mut tips_kept: Option<(bool, usize)> = None;
        let mut auth_answer: Option<Vec<u8>> = None;
        let is_auth = f.is_some_and(|f| f.call == Call::Auth);
        let authenticates = self.links.region(region).auth.is_some();
        let mut reauth = false;
        let mut text = Text::default();
        let mut throttle_said = None;
        let mut query_kept = false;
        let (fate, code) = match conn.response(id) {
            Some(resp) => {
                answered = resp.end == StreamEnd::Complete;
                timed_out = matches!(resp.end, StreamEnd::TimedOut { .. });
                let request_end = resp.request_end;
                // A forwarded call's answer is JSON-RPC: its text is the engine's words.
                let (outcome, words) = match f {
                    Some(f) if f.json => {
                        let (o, t) = super::forward::outcome(&resp);
                        (o, Some(t))
                    }
                    _ => (grpc::outcome(&resp, grpc::RETRY_AFTER_MS_DEFAULT), None),
                };
                // A status query keeps the engine's answer, its refusals and failures
                // included (the bot gets the engine's own error, its code and words, as from
                // Jito itself); a cooled or denied pair's answer is not one, nor is a body
                // that is no JSON-RPC error (a front end's page).
                if let Some(Call::Query(q)) = f.map(|f| f.call) {
                    query_kept = match outcome {
                        Outcome::Ok(_) => true,
                        Outcome::Rejected { code, .. } => {
                            code != Code::PERMISSION_DENIED && code != Code::UNAUTHENTICATED
                        }
                        // A whole JSON-RPC error, not one refusing the source (401, 403).
                        Outcome::Unknown { .. } => {
                            answered
                                && !matches!(
                                    resp.headers.get(b":status"),
                                    Some(b"401") | Some(b"403")
                                )
                                && matches!(
                                    crate::jsonrpc::parse_status_reply(resp.body),
                                    Some(crate::jsonrpc::StatusReply::Error { .. })
                                )
                        }
                        _ => false,
                    };
                    if query_kept {
                        self.queries.answered(q, resp.body);
                    }
                }
                match outcome {
                    Outcome::Ok(_) if words.is_some() => {
                        text = words.unwrap_or_default();
                        (Fate::Delivered, Some(Code::OK))
                    }
                    Outcome::Ok(msg) => {
                        match f.map(|f| f.call) {
                            Some(Call::Tips) => {
                                tips_kept = Some((self.tips.refresh(msg), msg.len()))
                            }
                            // Copied: the answer's bytes live in the connection.
                            Some(Call::Auth) => auth_answer = Some(msg.to_vec()),
                            Some(Call::Leader) => {
                                leader_answer = self.leader_claim.take().is_some_and(|c| {
                                    keep_leader(
                                        &self.leader,
                                        c,
                                        self.links.regions(),
                                        msg,
                                        now,
                                        self.leader_poll,
                                    )
                                });
                            }
                            _ => {
                                text =
                                    Text::new(grpc::send_bundle_uuid(msg).unwrap_or("").as_bytes())
                            }
                        }
                        (Fate::Delivered, Some(Code::OK))
                    }
                    Outcome::RateLimited { retry_after_ms } => {
                        text = words.unwrap_or_else(|| status_text(&resp));
                        // Everyone is throttled, not this source: the region backs off, and
                        // the address keeps its place (the engine booked nothing for it).
                        throttled = is_global_throttle(text.as_str());
                        if throttled {
                            // The region waits what the engine named, exactly; its own
                            // doubling back-off only where it named nothing.
                            throttle_said = match f {
                                Some(f) if f.json => super::forward::retry_after_said(&resp),
                                _ => grpc::retry_after_said(&resp),
                            };
                        } else {
                            cooldown_ms = Some(retry_after_ms);
                        }
                        (Fate::Cooldown, Some(Code::RESOURCE_EXHAUSTED))
                    }
                    Outcome::Retryable { why } => {
                        text = Text::new(why.as_bytes());
                        (Fate::Retry, grpc::reply_code(&resp))
                    }
                    Outcome::Rejected { code, message } => {
                        let mut buf = [0u8; 128];
                        let len = match &words {
                            Some(w) => {
                                let w = w.as_str().as_bytes();
                                buf[..w.len()].copy_from_slice(w);
                                w.len()
                            }
                            None => message.decode_into(&mut buf).len(),
                        };
                        text = Text::new(&buf[..len]);
                        if code == Code::UNAUTHENTICATED && authenticates && !is_auth {
                            // The token, not the source: a new one, and the call goes again.
                            reauth = true;
                            (Fate::Retry, Some(code))
                        } else if is_auth {
                            (Fate::Rejected, Some(code))
                        } else if code == Code::PERMISSION_DENIED || code == Code::UNAUTHENTICATED {
                            denied = Some((code, buf, len));
                            (Fate::Denied, Some(code))
                        } else {
                            (Fate::Rejected, Some(code))
                        }
                    }
                    Outcome::Unknown { why } => {
                        text = words
                            .filter(|w| !w.as_str().is_empty())
                            .unwrap_or_else(|| Text::new(why.as_bytes()));
                        let code = grpc::reply_code(&resp);
                        match f {
                            Some(f) if !st.stack.left_whole(f.stream, request_end) => {
                                (Fate::Retry, code)
                            }
                            _ => (Fate::Failed, code),
                        }
                    }
                }
            }
            None => {
                text = Text::new(b"the stream ended without a response");
                (Fate::Retry, None)
            }
        };
        match code {
            Some(c) => self.metrics.upstream_status(region, c),
            None => self.metrics.upstream_transport_error(region),
        }
        if let Some((code, buf, len)) = denied {
            self.source_denied(pair, code, &buf[..len], now);
        }
        if let Some(f) = f
            && !is_auth
            && authenticates
        {
            let unix = self.unix_ms(now);
            let a = self
                .links
                .region_mut(region)
                .auth
                .as_mut()
                .expect("the region authenticates");
            if reauth {
                if a.invalidate(unix, f.token) {
                    self.links.region_mut(region).call.authorization = None;
                }
            } else if fate == Fate::Delivered && !f.json && matches!(f.call, Call::Bundle(_)) {
                // A bundle the engine took with this token: it takes the token.
                a.confirm(f.token);
            }
        }
        let conn = self
            .links
            .pair_mut(pair)
            .stack
            .conn_mut()
            .expect("events come from a connection");
        conn.release(id);
        if !conn.poll_transmit().is_empty() {
            self.links.mark_dirty(pair);
        }
        let bundle = f.is_some_and(|f| matches!(f.call, Call::Bundle(_)));
        let rate = self.links.rate();
        if !answered
            && let Some(f) = f
            && let Some(sil) = self.links.region_mut(region).silence.as_mut()
            && sil.trial_sent == Some(f.started)
            && bundle
        {
            // The trial's own bundle went unanswered (not a call sent before the silence):
            // the hang is in the bundle path.
            sil.trial_unanswered(now, rate);
        }
        if answered {
            // The engine processes calls: a silent region is back, the back-off starts over.
            self.heard_from(region, now, bundle);
            let st = self.links.pair_mut(pair);
            st.backoff_ms = 0;
            if fate == Fate::Delivered {
                // A bundle taken from this source: the next refusal waits the shortest again.
                st.denied_ms = 0;
            }
            st.timed_out = false;
        }
        let Some(f) = f else {
            return;
        };
        self.links.pair_mut(pair).in_flight = None;
        let rate = self.links.rate();
        // From the request's last byte to the engine: a call that never left whole made no
        // round trip.
        if let Some(written) = f.written {
            self.metrics
                .record_upstream_rtt_ns(region, rate.to_ns(now.since(written)));
        }
        if let Some(ms) = cooldown_ms {
            // The engine's wait, exactly, on this pair (still held: the cooldown is booked
            // before the pair is given back).
            self.links
                .limiter_mut()
                .cooldown(pair, rate.from_ms(ms), now);
            self.stats.region(region).cooldowns.inc();
        }
        let mut throttle_ms = 0;
        if throttled {
            let (ms, began) =
                self.links
                    .region_mut(region)
                    .throttle(f.started, now, rate, throttle_said);
            throttle_ms = ms;
            self.stats.region(region).throttles.inc();
            self.wake_at(self.links.region(region).throttled_until);
            if began
                && let Some(unlogged) = self.links.region_mut(region).error_worth_logging(
                    ErrorKind::of_text(crate::jito::GLOBAL_THROTTLE_MESSAGE),
                    now,
                    rate,
                )
            {
                let how = if throttle_said.is_some() {
                    "as it asked"
                } else {
                    "doubling while it says so"
                };
                self.links.log().line(format_args!(
                    "region {}: {unlogged}its engine throttles everyone (\"{}\"): no call to it for {throttle_ms} ms, {how}",
                    self.links.region(region).name,
                    crate::jito::GLOBAL_THROTTLE_MESSAGE
                ));
            }
        } else if fate == Fate::Delivered {
            self.links.region_mut(region).accepted(f.started);
        }
        self.links.finish(pair, now);
        if timed_out {
            // No answer in time: the pair leaves rotation and reconnects, backing off further
            // until a call is answered again, instead of losing a bundle per interval.
            self.links.pair_mut(pair).timed_out = true;
            self.links.request_close(pair, now);
        }
        match f.call {
            Call::Bundle(slot) => self.ended.push_back(Ended {
                slot,
                fate,
                written: f.written,
                answer: Answer {
                    verdict: match fate {
                        Fate::Delivered => Verdict::Accepted,
                        Fate::Cooldown if throttled => Verdict::RegionThrottled,
                        Fate::Cooldown => Verdict::RateLimited,
                        Fate::Retry => Verdict::Unprocessed,
                        Fate::Rejected => Verdict::Rejected,
                        Fate::Failed => Verdict::Lost,
                        Fate::Denied => Verdict::SourceDenied,
                    },
                    // A forwarded call's answer had no gRPC status: the verdict and text say it.
                    grpc_code: code.filter(|_| !f.json).map(|c| c.0.min(255) as u8),
                    retry_after_ms: cooldown_ms.unwrap_or(throttle_ms) as u32,
                    text,
                },
                region: region as u8,
            }),
            // Its answer refreshed the cache; failures retry later.
            Call::Tips => {
                if let Some((kept, len)) = tips_kept {
                    self.tips_answered(region, kept, len);
                }
                self.tips.call_ended(now, self.tip_refresh, self.tip_retry);
            }
            Call::Probe => {
                if !answered {
                    self.probe_unanswered(region, f.started, now);
                }
            }
            Call::Leader => {
                if leader_answer {
                    self.stats.leader_answers.inc();
                } else {
                    self.leader_unanswered(now);
                }
            }
            Call::Auth => match auth_answer {
                Some(msg) => self.auth_answered(region, &msg, now),
                None => self.auth_failed(region, now, text.as_str()),
            },
            Call::Query(q) => match fate {
                // The answer was kept above (or found too large: counted unanswered).
                _ if query_kept || matches!(fate, Fate::Delivered | Fate::Rejected) => {
                    match self.queries.get(q).answer() {
                        Ok(_) => self.stats.status_queries_answered.inc(),
                        Err(_) => self.stats.status_queries_unanswered.inc(),
                    }
                }
                // The pair was cooled or the call never left whole: another pair, in time.
                // The engine's pace (rate limited): out of time, the bot is told to wait.
                Fate::Cooldown => self.query_again(q, now, Unanswered::NoPair),
                Fate::Retry | Fate::Denied => self.query_again(q, now, Unanswered::Failed),
                Fate::Failed | Fate::Delivered | Fate::Rejected => {
                    self.queries.give_up(q, Unanswered::Failed);
                    self.stats.status_queries_unanswered.inc();
                }
            },
        }
    }

    /// Query `q`'s call ended unanswered but may go again: it waits for another pair until its
    /// deadline; past it, it is answered without the engine, `out_of_time` saying why.
    fn query_again(&mut self, q: u16, now: Instant, out_of_time: Unanswered) {
        let deadline = self.queries.get(q).deadline;
        if now.0 > deadline.0 {
            self.queries.give_up(q, out_of_time);
            self.stats.status_queries_unanswered.inc();
        } else {
            self.queries.wait_again(q);
            self.wake_at(now);
        }
    }

    /// The engine refused this source itself (PERMISSION_DENIED, UNAUTHENTICATED): the pair
    /// leaves rotation and comes back within [`DENIED_FIRST_RETRY_MS`], twice that if refused
    /// again, and so on up to [`DENIED_RETRY_MS`], with one log line per region and code; the
    /// bundle goes to another pair.
    fn source_denied(&mut self, pair: PairId, code: Code, why: &[u8], now: Instant) {
        let st = self.links.pair_mut(pair);
        st.denied = true;
        st.denied_ms = match st.denied_ms {
            0 => DENIED_FIRST_RETRY_MS,
            d => d.saturating_mul(2).min(DENIED_RETRY_MS),
        };
        let error = TransportError::Refused {
            code: code.0,
            message: String::from_utf8_lossy(&why[..why.len().min(96)]).into_owned(),
            retry_ms: st.denied_ms,
        };
        self.links.fail(pair, error, now);
    }

    /// The address `pair` leaves from, as the bundle's record shows it.
    pub fn egress_of(&self, pair: PairId) -> Egress {
        match self.links.source_of(pair) {
            crate::config::Source::Local(ip) => Egress::Local(*ip),
            crate::config::Source::Socks5 { proxy, .. } => Egress::Socks5(*proxy),
        }
    }

    /// A bundle call that ended, for the dispatcher to settle.
    pub fn poll_ended(&mut self) -> Option<Ended> {
        self.ended.pop_front()
    }

    // ---- shutdown ----

    /// Shutdown's drain deadline passed: every call still running is given up; the bundles
    /// they carried are returned for the dispatcher to count failed.
    pub fn abandon_calls(&mut self, now: Instant, mut bundle: impl FnMut(SlotHandle)) {
        for p in 0..self.links.pair_count() as u32 {
            let pair = PairId(p);
            let st = self.links.pair_mut(pair);
            if let Some(f) = st.in_flight.take() {
                if let Some(c) = st.stack.conn_mut() {
                    c.release(f.stream);
                }
                self.links.abandon(pair, now);
                if let Some(slot) = f.slot() {
                    bundle(slot);
                }
                if let Call::Query(q) = f.call
                    && self.queries.give_up(q, Unanswered::Stopping)
                {
                    self.stats.status_queries_unanswered.inc();
                }
            }
        }
        let waiting = self.queries.give_up_waiting(Unanswered::Stopping);
        self.stats.status_queries_unanswered.add(waiting);
    }

    /// Leaks every pair's connection buffers (see the reactor's teardown).
    pub fn forget_connections(&mut self) {
        self.links.forget_connections();
    }

    /// Every pair whose connection is up, for a graceful close at shutdown.
    pub fn close_all(&mut self, now: Instant) {
        self.links.close_all(now);
    }
}

/// An engine's answer to a leader poll, published on `board` when it decodes (its region
/// matched among `regions` by name): trusted for [`VALID_POLLS`] periods, the next poll due in
/// one. False when it does not decode, or `claim` lapsed and another poll holds the board.
fn keep_leader(
    board: &Board,
    claim: leader::Claim,
    regions: &[super::region::Region],
    msg: &[u8],
    now: Instant,
    poll: Ticks,
) -> bool {
    let found = leader::decode_next_leader(msg, |name| {
        regions.iter().position(|g| g.name == name).map(|r| r as u8)
    });
    let Some(l) = found else {
        // Given back: due again a poll period on.
        board.unanswered(claim, now.after(poll));
        return false;
    };
    board.answered(
        claim,
        l,
        now,
        poll,
        Ticks(poll.0.saturating_mul(VALID_POLLS)),
    )
}

/// The sooner of `at` and `soonest` (if any): the first of several pairs to be ready.
fn sooner(soonest: Option<Instant>, at: Instant) -> Instant {
    soonest.map_or(at, |s| s.min(at))
}

/// A call's grpc-message (trailers, else a Trailers-Only reply's headers), decoded.
fn status_text(resp: &crate::h2::Response<'_>) -> Text {
    let raw = resp
        .trailers
        .get(b"grpc-message")
        .or_else(|| resp.headers.get(b"grpc-message"))
        .unwrap_or(b"");
    let mut buf = [0u8; 128];
    let len = grpc::StatusMessage(raw).decode_into(&mut buf).len();
    Text::new(&buf[..len])
}

/// The engine's answer when it throttles everyone, whatever the source (Jito's wording).
fn is_global_throttle(message: &str) -> bool {
    const KEY: &str = "globally rate limited";
    message
        .as_bytes()
        .windows(KEY.len())
        .any(|w| w.eq_ignore_ascii_case(KEY.as_bytes()))
}
