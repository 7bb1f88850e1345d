//! The I/O half: listeners, connections, streams. Everything it decides comes from the sans-IO
//! parts (`limiter`, `validate`, `fault`, `auth`); this file only moves bytes and waits.

use std::future::poll_fn;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use h2::{Reason, RecvStream};
use http::{HeaderMap, Request};
use prost::Message;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use bundle_relay::proto::searcher::{
    GetRegionsRequest, GetRegionsResponse, GetTipAccountsResponse, NextScheduledLeaderRequest,
    NextScheduledLeaderResponse, SendBundleRequest, SendBundleResponse,
};

use super::auth::{Now, TokenRefusal};
use super::fault::FaultKind;
use super::grpc;
use super::limiter::Verdict;
use super::stats::inc;
use super::validate::{self, Reject};
use super::{LEADER_SLOTS, RecordedBundle, Shared, TIP_ACCOUNTS};
use crate::fds::{FDS_PROCESS_MAX, nofile_limit};
use crate::sentlog;

/// Streams one client may have open on a connection: far above what any relay pair needs, low
/// enough that a stalled client cannot pin unbounded memory.
const MAX_CONCURRENT_STREAMS: u32 = 1024;
/// Largest request body accepted: 5 packets of PACKET_DATA_SIZE plus protobuf and gRPC overhead
/// fit with room to spare.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// How long the accept loop backs off when out of file descriptors.
const EMFILE_BACKOFF_MS: u64 = 20;
/// At most one EMFILE message per listener per this many ms, so the log stays readable.
const EMFILE_REPORT_EVERY_MS: u64 = 1_000;

const EMFILE_HELP: &str = "too many open files";

pub(super) async fn accept_loop(
    sh: Arc<Shared>,
    region: usize,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
) {
    let mut shutdown = sh.shutdown.subscribe();
    let mut last_report_ns = 0u64;
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((tcp, peer)) => {
                let _ = tcp.set_nodelay(true);
                inc(&sh.counters.connections_accepted);
                let sh = sh.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve_connection(sh, region, peer, tcp).await,
                        Some(acceptor) => match acceptor.accept(tcp).await {
                            Ok(io) => serve_connection(sh, region, peer, io).await,
                            Err(_) => inc(&sh.counters.tls_handshake_failures),
                        },
                    }
                });
            }
            Err(e) => {
                inc(&sh.counters.accept_errors);
                let emfile = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                if emfile {
                    inc(&sh.counters.accept_emfile);
                }
                let now = sentlog::monotonic_ns();
                if now - last_report_ns >= EMFILE_REPORT_EVERY_MS * 1_000_000 {
                    last_report_ns = now;
                    let region = &sh.regions[region];
                    if emfile {
                        eprintln!(
                            "bench-engine: accept on {} ({}) failed: {EMFILE_HELP}: this process may hold at most {} file descriptors (RLIMIT_NOFILE; the machine caps it at {FDS_PROCESS_MAX}); still serving, refusing new connections until some close",
                            region.addr,
                            region.name,
                            nofile_limit()
                        );
                    } else {
                        eprintln!(
                            "bench-engine: accept on {} ({}) failed: {e}; still serving",
                            region.addr, region.name
                        );
                    }
                }
                tokio::time::sleep(Duration::from_millis(EMFILE_BACKOFF_MS)).await;
            }
        }
    }
}

/// Keeps the region's open-connection gauges right however the task ends.
struct OpenGuard<'a>(&'a Shared, usize);

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0
            .counters
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
        self.0.regions[self.1].open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long a closing connection is driven so its accepted streams get their answers.
const GRACEFUL_DRAIN_MAX: std::time::Duration = std::time::Duration::from_secs(5);

async fn serve_connection<IO>(sh: Arc<Shared>, region: usize, peer: SocketAddr, io: IO)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    sh.counters.connections_open.fetch_add(1, Ordering::Relaxed);
    sh.regions[region].open.fetch_add(1, Ordering::Relaxed);
    let _guard = OpenGuard(&sh, region);
    let mut shutdown = sh.shutdown.subscribe();
    let mut events = sh.events.subscribe();
    if let Some(rule) = sh.faults.blackhole(region, sh.elapsed_ns()) {
        // Not even SETTINGS: the connection is held silent, then dropped unread.
        rule.injected.fetch_add(1, Ordering::Relaxed);
        silent_until(&sh, rule.end_ns(), &mut shutdown).await;
        return;
    }
    let mut conn = match h2::server::Builder::new()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .handshake::<IO, Bytes>(io)
        .await
    {
        Ok(c) => c,
        Err(_) => return,
    };
    let mut closing = false;
    if let Some(rule) = sh.faults.on_connect(region, sh.elapsed_ns()) {
        rule.injected.fetch_add(1, Ordering::Relaxed);
        match rule.spec.kind {
            FaultKind::Close => return,
            _ => {
                shut(&mut conn, rule.spec.abrupt);
                closing = true;
            }
        }
    }
    let mut events_open = true;
    loop {
        tokio::select! {
            r = conn.accept() => match r {
                Some(Ok((req, respond))) => {
                    tokio::spawn(serve_stream(sh.clone(), region, peer.ip(), req, respond));
                }
                Some(Err(_)) => return,
                None => {
                    // No new streams (GOAWAY done or the peer left): keep driving the
                    // connection until the streams already accepted have been answered, as a
                    // graceful shutdown promises; bounded, in case the peer stops reading.
                    let _ = tokio::time::timeout(
                        GRACEFUL_DRAIN_MAX,
                        std::future::poll_fn(|cx| conn.poll_closed(cx)),
                    )
                    .await;
                    return;
                }
            },
            ev = events.recv(), if events_open && !closing => match ev {
                Ok(i) => {
                    let rule = &sh.faults.rules[i];
                    if rule.applies_to_region(region) {
                        rule.injected.fetch_add(1, Ordering::Relaxed);
                        if rule.spec.kind == FaultKind::Close {
                            return; // dropping the connection closes the socket, no GOAWAY
                        }
                        if rule.spec.kind == FaultKind::Blackhole {
                            // Stop driving the connection: nothing read, nothing written
                            // (answers of streams in progress included), then dropped.
                            silent_until(&sh, rule.end_ns(), &mut shutdown).await;
                            return;
                        }
                        shut(&mut conn, rule.spec.abrupt);
                        closing = true;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => events_open = false,
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// Waits until `end_ns` (engine time; `u64::MAX`: until shutdown) without touching the
/// connection, the engine's side of a black hole.
async fn silent_until(sh: &Shared, end_ns: u64, shutdown: &mut watch::Receiver<bool>) {
    let until = async {
        if end_ns == u64::MAX {
            std::future::pending::<()>().await
        } else {
            tokio::time::sleep_until(sh.start_instant + Duration::from_nanos(end_ns)).await
        }
    };
    tokio::select! {
        _ = until => {}
        _ = shutdown.changed() => {}
    }
}

fn shut<IO: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut h2::server::Connection<IO, Bytes>,
    abrupt: bool,
) {
    if abrupt {
        conn.abrupt_shutdown(Reason::INTERNAL_ERROR);
    } else {
        conn.graceful_shutdown();
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    SendBundle,
    GetTipAccounts,
    GetNextScheduledLeader,
    GetRegions,
}

/// `auth.AuthService`'s methods.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AuthMethod {
    GenerateAuthChallenge,
    GenerateAuthTokens,
    RefreshAccessToken,
}

/// What a gRPC path calls: the searcher service, guarded by tokens when they are required, or
/// the auth service that issues them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    Searcher(Method),
    Auth(AuthMethod),
}

fn method_of(path: &str) -> Option<Call> {
    if let Some(name) = path.strip_prefix("/auth.AuthService/") {
        return Some(Call::Auth(match name {
            "GenerateAuthChallenge" => AuthMethod::GenerateAuthChallenge,
            "GenerateAuthTokens" => AuthMethod::GenerateAuthTokens,
            "RefreshAccessToken" => AuthMethod::RefreshAccessToken,
            _ => return None,
        }));
    }
    Some(Call::Searcher(
        match path.strip_prefix("/searcher.SearcherService/")? {
            "SendBundle" => Method::SendBundle,
            "GetTipAccounts" => Method::GetTipAccounts,
            "GetNextScheduledLeader" => Method::GetNextScheduledLeader,
            "GetRegions" => Method::GetRegions,
            _ => return None,
        },
    ))
}

async fn serve_stream(
    sh: Arc<Shared>,
    region: usize,
    peer: IpAddr,
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) {
    if let Some(endpoint) = super::jsonrpc::endpoint(req.uri().path()) {
        return super::jsonrpc::serve(&sh, region, peer, endpoint, req, respond).await;
    }
    let Some(call) = method_of(req.uri().path()) else {
        inc(&sh.counters.unknown_method);
        let msg = format!("unknown method {}", req.uri().path());
        grpc::send_status(&mut respond, grpc::UNIMPLEMENTED, &msg);
        return;
    };
    let method = match call {
        Call::Auth(m) => return serve_auth(&sh, m, req.into_body(), respond).await,
        Call::Searcher(m) => m,
    };
    if let Err(refusal) = authorize(&sh, req.headers()) {
        grpc::send_status(&mut respond, grpc::UNAUTHENTICATED, refusal.message());
        return;
    }
    let mut body = req.into_body();
    if method == Method::SendBundle {
        let elapsed = sh.elapsed_ns();
        if let Some(rule) = sh.faults.hit(FaultKind::Rst, region, elapsed, None) {
            respond.send_reset(Reason::from(rule.spec.code));
            return;
        }
        if let Some(rule) = sh.faults.hit(FaultKind::Stall, region, elapsed, None) {
            let end_ns = rule.end_ns();
            let mut shutdown = sh.shutdown.subscribe();
            let until_end = async {
                if end_ns == u64::MAX {
                    std::future::pending::<()>().await
                } else {
                    tokio::time::sleep_until(sh.start_instant + Duration::from_nanos(end_ns)).await
                }
            };
            tokio::select! {
                _ = until_end => {}
                _ = poll_fn(|cx| respond.poll_reset(cx)) => return,
                _ = shutdown.changed() => return,
            }
        }
    }
    let bytes = match read_body(&mut body).await {
        Ok(b) => b,
        Err(Some(msg)) => {
            inc(&sh.counters.body_too_large);
            grpc::send_status(&mut respond, grpc::RESOURCE_EXHAUSTED, &msg);
            return;
        }
        Err(None) => return,
    };
    match method {
        Method::SendBundle => send_bundle(&sh, region, peer, &bytes, respond).await,
        Method::GetTipAccounts => {
            inc(&sh.counters.other_calls);
            let msg = GetTipAccountsResponse {
                accounts: TIP_ACCOUNTS.iter().map(|s| s.to_string()).collect(),
            };
            grpc::send_ok(&mut respond, &msg);
        }
        Method::GetRegions => {
            inc(&sh.counters.other_calls);
            if decode_arg::<GetRegionsRequest>(&bytes, &mut respond).is_none() {
                return;
            }
            let msg = GetRegionsResponse {
                current_region: sh.regions[region].name.clone(),
                available_regions: sh.regions.iter().map(|r| r.name.clone()).collect(),
            };
            grpc::send_ok(&mut respond, &msg);
        }
        Method::GetNextScheduledLeader => {
            inc(&sh.counters.other_calls);
            let Some(req) = decode_arg::<NextScheduledLeaderRequest>(&bytes, &mut respond) else {
                return;
            };
            grpc::send_ok(&mut respond, &next_leader(&sh, &req));
        }
    }
}

/// Answers one `auth.AuthService` call: no token needed, not under the per-source rule.
async fn serve_auth(
    sh: &Shared,
    method: AuthMethod,
    mut body: RecvStream,
    mut respond: SendResponse<Bytes>,
) {
    let c = &sh.counters;
    let bytes = match read_body(&mut body).await {
        Ok(b) => b,
        Err(Some(msg)) => {
            inc(&c.body_too_large);
            inc(&c.auth_refused);
            grpc::send_status(&mut respond, grpc::RESOURCE_EXHAUSTED, &msg);
            return;
        }
        Err(None) => return,
    };
    let now = auth_now(sh);
    let answered = match method {
        AuthMethod::GenerateAuthChallenge => decode_arg(&bytes, &mut respond).map(|req| {
            let r = sh.auth.lock().expect("auth lock").challenge(&req, now);
            answer_auth(&mut respond, r, &c.auth_challenges)
        }),
        AuthMethod::GenerateAuthTokens => decode_arg(&bytes, &mut respond).map(|req| {
            let r = sh.auth.lock().expect("auth lock").tokens(&req, now);
            answer_auth(&mut respond, r, &c.auth_tokens_issued)
        }),
        AuthMethod::RefreshAccessToken => decode_arg(&bytes, &mut respond).map(|req| {
            let r = sh.auth.lock().expect("auth lock").refresh(&req, now);
            answer_auth(&mut respond, r, &c.auth_refreshes)
        }),
    };
    if answered != Some(true) {
        inc(&c.auth_refused);
    }
}

/// Sends an auth-service answer, counting a success on `ok`; whether it was one.
fn answer_auth<M: Message>(
    respond: &mut SendResponse<Bytes>,
    r: Result<M, super::auth::Refused>,
    ok: &std::sync::atomic::AtomicU64,
) -> bool {
    match r {
        Ok(msg) => {
            inc(ok);
            grpc::send_ok(respond, &msg);
            true
        }
        Err(e) => {
            grpc::send_status(respond, e.code, &e.message);
            false
        }
    }
}

/// Whether an engine call (gRPC or JSON-RPC) carrying `headers` may go on: always without
/// `auth`, else only with a live access token. Refusals are counted here; the caller answers
/// in its protocol's shape with [`TokenRefusal::message`].
pub(super) fn authorize(sh: &Shared, headers: &HeaderMap) -> Result<(), TokenRefusal> {
    if !sh.auth_required {
        return Ok(());
    }
    let header = headers
        .get(http::header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    let r = sh
        .auth
        .lock()
        .expect("auth lock")
        .check(header, auth_now(sh));
    match r {
        Ok(()) => {}
        Err(TokenRefusal::Expired) => inc(&sh.counters.expired_token_calls),
        Err(TokenRefusal::Missing | TokenRefusal::Unknown) => {
            inc(&sh.counters.unauthenticated_calls)
        }
    }
    r
}

/// Now on both of the auth store's clocks: the system clock token expiry is stated in, and the
/// engine's, which the `revoke` fault is scheduled on.
fn auth_now(sh: &Shared) -> Now {
    Now {
        unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        engine_ns: sh.elapsed_ns(),
    }
}

fn decode_arg<M: Message + Default>(body: &[u8], respond: &mut SendResponse<Bytes>) -> Option<M> {
    let msg = match grpc::unframe(body) {
        Ok(m) => m,
        Err(e) => {
            grpc::send_status(respond, grpc::INTERNAL, &e);
            return None;
        }
    };
    match M::decode(msg) {
        Ok(m) => Some(m),
        Err(e) => {
            grpc::send_status(
                respond,
                grpc::INVALID_ARGUMENT,
                &format!("bad request: {e}"),
            );
            None
        }
    }
}

/// A synthetic leader schedule: `slot_ms` slots from engine start, leaders every
/// [`LEADER_SLOTS`] slots, regions in turn (restricted to the asked ones when given).
fn next_leader(sh: &Shared, req: &NextScheduledLeaderRequest) -> NextScheduledLeaderResponse {
    let asked = |n: &str| req.regions.is_empty() || req.regions.iter().any(|r| r == n);
    let (current_slot, region, next) = next_leader_turn(sh, asked);
    NextScheduledLeaderResponse {
        current_slot,
        next_leader_slot: next,
        next_leader_identity: TIP_ACCOUNTS[(next / LEADER_SLOTS) as usize % TIP_ACCOUNTS.len()]
            .to_string(),
        next_leader_region: region.map_or(String::new(), |r| sh.regions[r].name.clone()),
    }
}

/// The current slot, and the region and first slot of the next leader whose region is
/// `asked` (none when no region is).
fn next_leader_turn(sh: &Shared, asked: impl Fn(&str) -> bool) -> (u64, Option<usize>, u64) {
    let current_slot = sh.slot_at(sh.elapsed_ns());
    let mut next = (current_slot / LEADER_SLOTS + 1) * LEADER_SLOTS;
    if !sh.regions.iter().any(|r| asked(&r.name)) {
        return (current_slot, None, next);
    }
    // Step to the next leader whose turn falls on an asked-for region.
    loop {
        let turn = (next / LEADER_SLOTS) as usize % sh.regions.len();
        if asked(&sh.regions[turn].name) {
            return (current_slot, Some(turn), next);
        }
        next += LEADER_SLOTS;
    }
}

/// Reads a whole request body, giving flow-control credit back as it goes. `Err(Some)`: too
/// large (message for the client); `Err(None)`: the stream broke.
pub(super) async fn read_body(body: &mut RecvStream) -> Result<Bytes, Option<String>> {
    let mut first: Option<Bytes> = None;
    let mut rest: Option<BytesMut> = None;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|_| None)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        let total = first.as_ref().map_or(0, |b| b.len())
            + rest.as_ref().map_or(0, |b| b.len())
            + chunk.len();
        if total > MAX_BODY_BYTES {
            return Err(Some(format!(
                "request body over {MAX_BODY_BYTES} bytes is larger than any valid SendBundle"
            )));
        }
        match (&mut first, &mut rest) {
            (None, _) => first = Some(chunk),
            (Some(f), None) => {
                let mut b = BytesMut::with_capacity(f.len() + chunk.len());
                b.extend_from_slice(f);
                b.extend_from_slice(&chunk);
                rest = Some(b);
            }
            (Some(_), Some(b)) => b.extend_from_slice(&chunk),
        }
    }
    Ok(match rest {
        Some(b) => b.freeze(),
        None => first.unwrap_or_default(),
    })
}

/// What the engine's front end says to one call before looking at it: Jito's per-source rule,
/// and the faults that answer in its place.
pub(super) enum Gate {
    /// The source is refused outright (the `deny` fault), with this gRPC code.
    Denied(u32),
    /// Inside its interval: an early send, counted.
    Early(u64),
    /// Everyone is throttled (the `throttle` fault).
    Throttled,
    /// The source is told to back off this many ms (the `storm` fault).
    Storm(u64),
    Pass,
}

/// Applies the per-(source, region) rule and the faults to a call from `peer` at `now_ns`,
/// counting what it refuses; a call that passes is booked.
pub(super) fn gate(sh: &Shared, region: usize, peer: IpAddr, now_ns: u64) -> Gate {
    let elapsed_ns = now_ns.saturating_sub(sh.start_ns);
    let c = &sh.counters;
    let reg = &sh.regions[region];
    // Refusing the caller comes before any rate rule, as an authenticating front end would.
    if let Some(rule) = sh
        .faults
        .hit(FaultKind::Deny, region, elapsed_ns, Some((sh.seed, peer)))
    {
        return Gate::Denied(rule.spec.code);
    }
    let mut lim = reg.limiter.lock().expect("limiter lock");
    match lim.check(peer, now_ns) {
        Verdict::Early { retry_ms } => {
            inc(&c.early_sends);
            inc(&reg.early);
            Gate::Early(retry_ms)
        }
        Verdict::OnTime => {
            if sh
                .faults
                .hit(FaultKind::Throttle, region, elapsed_ns, None)
                .is_some()
            {
                inc(&c.throttled);
                Gate::Throttled
            } else if let Some(rule) =
                sh.faults
                    .hit(FaultKind::Storm, region, elapsed_ns, Some((sh.seed, peer)))
            {
                lim.hold(peer, now_ns + rule.spec.retry_ms * 1_000_000);
                inc(&c.storm_told);
                Gate::Storm(rule.spec.retry_ms)
            } else {
                lim.book(peer, now_ns);
                Gate::Pass
            }
        }
    }
}

use bundle_relay::jito::{GLOBAL_THROTTLE_MESSAGE as THROTTLE_MESSAGE, rate_limit_message};

async fn send_bundle(
    sh: &Shared,
    region: usize,
    peer: IpAddr,
    body: &[u8],
    mut respond: SendResponse<Bytes>,
) {
    let now_ns = sentlog::monotonic_ns();
    let elapsed_ns = now_ns.saturating_sub(sh.start_ns);
    let c = &sh.counters;
    let reg = &sh.regions[region];
    inc(&c.send_bundle_calls);
    match gate(sh, region, peer, now_ns) {
        Gate::Denied(code) => {
            let msg = format!("source {peer} is not allowed to send bundles");
            return grpc::send_status(&mut respond, code, &msg);
        }
        Gate::Early(retry_ms) | Gate::Storm(retry_ms) => {
            let msg = rate_limit_message(retry_ms);
            return grpc::send_status(&mut respond, grpc::RESOURCE_EXHAUSTED, &msg);
        }
        Gate::Throttled => {
            return grpc::send_status(&mut respond, grpc::RESOURCE_EXHAUSTED, THROTTLE_MESSAGE);
        }
        Gate::Pass => {}
    }
    let refuse = |respond: &mut SendResponse<Bytes>, reason: Reject, code, msg: &str| {
        inc(&c.rejected[reason as usize]);
        if reason.is_decode_failure() {
            inc(&c.decode_failures);
        }
        grpc::send_status(respond, code, msg);
    };
    let msg = match grpc::unframe(body) {
        Ok(m) => m,
        Err(e) => return refuse(&mut respond, Reject::Framing, grpc::INTERNAL, &e),
    };
    let req = match SendBundleRequest::decode(msg) {
        Ok(r) => r,
        Err(e) => {
            let m = format!("not a SendBundleRequest: {e}");
            return refuse(&mut respond, Reject::Protobuf, grpc::INVALID_ARGUMENT, &m);
        }
    };
    let Some(bundle) = req.bundle else {
        let m = "SendBundleRequest has no bundle";
        return refuse(&mut respond, Reject::NoBundle, grpc::INVALID_ARGUMENT, m);
    };
    let checked = match validate::check_bundle(&bundle) {
        Ok(ch) => ch,
        Err(r) => {
            return refuse(&mut respond, r.reason, grpc::INVALID_ARGUMENT, &r.message);
        }
    };
    inc(&c.accepted);
    inc(&reg.accepted);
    if next_leader_turn(sh, |_| true).1 == Some(region) {
        inc(&c.at_leader);
    }
    if sh.dups.lock().expect("dup lock").seen(checked.id) {
        inc(&c.duplicates);
    }
    let signatures = bundle
        .packets
        .iter()
        .map(|p| *validate::first_signature(&p.data))
        .collect();
    {
        // The instant is taken under the lock so instants follow the order they are remembered in.
        let mut landing = sh.landing.lock().expect("landing lock");
        landing.accept(checked.id, signatures, sh.elapsed_ns());
    }
    match checked.tag {
        None => inc(&c.latency_untagged),
        Some(tag) if sh.run_id.is_some_and(|r| r != tag.run_id) => inc(&c.latency_other_run),
        Some(tag) => match sh.sent_log.as_ref().and_then(|l| l.get(tag.seq)) {
            Some(sent_ns) => sh
                .latency
                .lock()
                .expect("latency lock")
                .record(now_ns.saturating_sub(sent_ns)),
            None => inc(&c.latency_unsent),
        },
    }
    let uuid = validate::hex(&checked.id);
    if let Some(rec) = &sh.recorded {
        rec.lock().expect("recorder lock").push(RecordedBundle {
            id: uuid.clone(),
            region: reg.name.clone(),
            source: peer,
            packets: bundle.packets.into_iter().map(|p| p.data).collect(),
        });
    }
    if let Some(rule) = sh.faults.hit(FaultKind::Latency, region, elapsed_ns, None) {
        tokio::time::sleep(Duration::from_millis(rule.spec.latency_ms)).await;
    }
    grpc::send_ok(&mut respond, &SendBundleResponse { uuid });
}

/// Serves `GET /stats` as JSON; anything else is 404. One request per connection.
pub(super) async fn stats_loop(sh: Arc<Shared>, listener: TcpListener) {
    let mut shutdown: watch::Receiver<bool> = sh.shutdown.subscribe();
    loop {
        let (tcp, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(EMFILE_BACKOFF_MS)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            let _ = serve_stats(&sh, tcp).await;
        });
    }
}

/// Largest stats request head read; a GET needs a few hundred bytes.
const STATS_HEAD_MAX: usize = 8 * 1024;

async fn serve_stats(sh: &Shared, mut tcp: tokio::net::TcpStream) -> io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; STATS_HEAD_MAX];
    let mut n = 0;
    let path = loop {
        let r = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf[n..])).await;
        let got = match r {
            Ok(Ok(0)) | Err(_) => return Ok(()),
            Ok(r) => r?,
        };
        n += got;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..n]) {
            Ok(httparse::Status::Complete(_)) => {
                break (req.method == Some("GET")).then(|| req.path.unwrap_or("").to_string());
            }
            Ok(httparse::Status::Partial) if n < buf.len() => continue,
            _ => break None,
        }
    };
    let (status, body) = match path.as_deref() {
        Some("/stats") => (
            "200 OK",
            serde_json::to_string_pretty(&sh.snapshot()).expect("stats serialize"),
        ),
        _ => (
            "404 Not Found",
            "{\"error\":\"only GET /stats\"}".to_string(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await?;
    tcp.write_all(body.as_bytes()).await?;
    tcp.shutdown().await
}
