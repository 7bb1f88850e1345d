//! Searcher authentication to one region's engine (Jito's `auth.AuthService`), sans-IO and
//! clock-free: which call is due, its request, and what its answer means. Upstream runs the
//! calls on pairs like any other and sends `authorization: Bearer <access token>` on every call
//! to the region while a token is valid; the region takes no call but these until one is.
//!
//! The flow, as Jito's clients run it: GenerateAuthChallenge `{role: SEARCHER, pubkey}` →
//! sign `"<base58 pubkey>-<challenge>"` with the searcher's ed25519 key → GenerateAuthTokens →
//! an access token and a refresh token, each with its expiry. The access token is renewed with
//! RefreshAccessToken before it expires (when less than five minutes remain, Jito's rule, or
//! half its lifetime for a shorter-lived one), the whole flow again once the refresh token is
//! near its end. A failed step is tried again after a back-off (100 ms doubling to 10 s); an
//! engine that answers UNAUTHENTICATED to a call makes the access token it carried void: one
//! a bundle was taken with is renewed at once, one none was yet after the same back-off (and
//! the whole flow runs again after three such in a row), so an engine refusing every token
//! costs a call now and then, not a storm.
//!
//! Allocation: the tokens are strings the engine chooses, kept per region and renewed every few
//! minutes at most, so they are owned `String`s (off the request path).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prost::Message;

use crate::proto::auth::{
    GenerateAuthChallengeRequest, GenerateAuthChallengeResponse, GenerateAuthTokensRequest,
    GenerateAuthTokensResponse, RefreshAccessTokenRequest, RefreshAccessTokenResponse, Role, Token,
};

/// Renew an access token when less than this remains (Jito's clients do the same).
pub const REFRESH_MARGIN_MS: u64 = 5 * 60 * 1_000;
/// Back-off after a failed step: the first retry soon, doubling to the most.
pub const RETRY_MS_MIN: u64 = 100;
pub const RETRY_MS_MAX: u64 = 10_000;

/// The searcher's ed25519 key (`[auth] keypair_file`), ready to sign, shared by the threads;
/// and whether one of them is between a challenge and its tokens. An auth service keeps one
/// outstanding challenge per key (per engine, or across regions when they share a store), so
/// two flows at once would void each other's: a thread starts one only when it claims the
/// flow. Flows take two round trips and come every few minutes at most, so running them one
/// at a time costs only the first tokens' wait at start.
pub struct Signer {
    key: ed25519_dalek::SigningKey,
    pubkey_b58: String,
    flow: AtomicBool,
}

impl Signer {
    pub fn new(key: &crate::config::SearcherKey) -> Signer {
        Signer::from_seed(key.seed())
    }

    /// The key whose 32-byte secret is `seed`.
    pub fn from_seed(seed: [u8; 32]) -> Signer {
        let key = ed25519_dalek::SigningKey::from_bytes(&seed);
        let pubkey_b58 = bs58::encode(key.verifying_key().as_bytes()).into_string();
        Signer {
            key,
            pubkey_b58,
            flow: AtomicBool::new(false),
        }
    }

    /// Claims the challenge flow for the caller; false while another holds it.
    fn claim(&self) -> bool {
        self.flow
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn release(&self) {
        self.flow.store(false, Ordering::Release);
    }

    pub fn pubkey(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// The public key in base58, as Solana writes it.
    pub fn pubkey_b58(&self) -> &str {
        &self.pubkey_b58
    }

    fn sign(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer as _;
        self.key.sign(message).to_bytes()
    }
}

impl core::fmt::Debug for Signer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never the secret.
        write!(f, "Signer({})", self.pubkey_b58)
    }
}

/// The auth service's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Challenge,
    Tokens,
    Refresh,
}

impl Step {
    pub fn label(self) -> &'static str {
        match self {
            Step::Challenge => "GenerateAuthChallenge",
            Step::Tokens => "GenerateAuthTokens",
            Step::Refresh => "RefreshAccessToken",
        }
    }
}

/// A token and its life, in Unix milliseconds.
#[derive(Clone, Debug)]
struct Held {
    value: String,
    issued_ms: u64,
    expires_ms: u64,
}

impl Held {
    fn from(t: Option<Token>, now_ms: u64, prefix: &str) -> Result<Held, String> {
        let t = t.ok_or("the answer holds no token")?;
        if t.value.is_empty() {
            return Err("the token is empty".into());
        }
        let at = t.expires_at_utc.ok_or("the token has no expiry")?;
        let expires_ms = u64::try_from(at.seconds)
            .unwrap_or(0)
            .saturating_mul(1_000)
            .saturating_add(u64::try_from(at.nanos).unwrap_or(0) / 1_000_000);
        if expires_ms <= now_ms {
            return Err("the token expired before it arrived (is this host's clock right?)".into());
        }
        Ok(Held {
            value: format!("{prefix}{}", t.value),
            issued_ms: now_ms,
            expires_ms,
        })
    }

    /// Still usable at `now_ms` with `margin_ms` to spare.
    fn valid(&self, now_ms: u64, margin_ms: u64) -> bool {
        now_ms.saturating_add(margin_ms) < self.expires_ms
    }

    /// When it should be renewed: [`REFRESH_MARGIN_MS`] before its end, or half way through a
    /// shorter life.
    fn renew_at(&self) -> u64 {
        let life = self.expires_ms - self.issued_ms;
        self.expires_ms - REFRESH_MARGIN_MS.min(life / 2)
    }
}

/// One region's authentication (see the module docs).
#[derive(Debug)]
pub struct RegionAuth {
    signer: Arc<Signer>,
    /// This thread holds the key's challenge flow ([`Signer`]).
    claimed: bool,
    in_flight: Option<Step>,
    /// The signed string of the challenge being answered.
    challenge: Option<String>,
    /// `Bearer <access token>`.
    access: Option<Held>,
    refresh: Option<Held>,
    retry_at_ms: u64,
    retry_ms: u64,
    /// Counts the access tokens held (a call carries the one it was sent with, so a refusal
    /// of an older one does not void a newer).
    generation: u32,
    /// A bundle was taken with the access token held: the engine knows it.
    confirmed: bool,
    /// The wait before renewing a token voided before any bundle was taken with it (0: none
    /// since one was): an engine that refuses every token is not asked for one round after
    /// round.
    void_ms: u64,
    /// Tokens voided in a row with no bundle taken: at [`VOIDS_BEFORE_CHALLENGE`], the
    /// refresh token is dropped and the whole flow runs again.
    voids: u8,
}

/// Access tokens refreshed and voided in a row, no call taking one, before the refresh token
/// is no longer trusted to give a good one: the next is bought with a whole challenge flow.
pub const VOIDS_BEFORE_CHALLENGE: u8 = 3;

impl RegionAuth {
    pub fn new(signer: Arc<Signer>) -> RegionAuth {
        RegionAuth {
            signer,
            claimed: false,
            in_flight: None,
            challenge: None,
            access: None,
            refresh: None,
            retry_at_ms: 0,
            retry_ms: RETRY_MS_MIN,
            generation: 0,
            confirmed: false,
            void_ms: 0,
            voids: 0,
        }
    }

    /// The access token held now, as a number a call keeps ([`RegionAuth::invalidate`],
    /// [`RegionAuth::confirm`]).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// `authorization`'s value while the access token is valid at `now_ms`.
    pub fn bearer(&self, now_ms: u64) -> Option<&str> {
        self.access
            .as_ref()
            .filter(|a| a.valid(now_ms, 0))
            .map(|a| a.value.as_str())
    }

    /// The call due at `now_ms`, if any (none while one runs or a back-off lasts).
    pub fn due(&self, now_ms: u64) -> Option<Step> {
        if self.in_flight.is_some() || now_ms < self.retry_at_ms {
            return None;
        }
        if self.challenge.is_some() {
            return Some(Step::Tokens);
        }
        if self.access.as_ref().is_some_and(|a| now_ms < a.renew_at()) {
            return None;
        }
        // A refresh token good for a while yet buys a new access token; else start over.
        match &self.refresh {
            Some(r) if r.valid(now_ms, RETRY_MS_MAX) && now_ms < r.renew_at() => {
                Some(Step::Refresh)
            }
            _ => Some(Step::Challenge),
        }
    }

    /// When a call will next be due (Unix ms), for the loop's wake-up; `None` while one runs.
    pub fn next_due_ms(&self) -> Option<u64> {
        if self.in_flight.is_some() {
            return None;
        }
        let renew = match (&self.challenge, &self.access) {
            (None, Some(a)) => a.renew_at(),
            _ => 0,
        };
        Some(renew.max(self.retry_at_ms))
    }

    /// Makes `step` this region's to run: a challenge only with the key's flow claimed
    /// (false while another thread runs one; try again shortly). Give it back with
    /// [`RegionAuth::unclaim`] when no call starts after all.
    pub fn claim(&mut self, step: Step) -> bool {
        if step != Step::Challenge || self.claimed {
            return true;
        }
        self.claimed = self.signer.claim();
        self.claimed
    }

    /// The claim of [`RegionAuth::claim`] without a call: another thread may run the flow.
    pub fn unclaim(&mut self) {
        if self.claimed && self.challenge.is_none() {
            self.claimed = false;
            self.signer.release();
        }
    }

    /// The flow ended (tokens, or a failure): another thread may run one.
    fn flow_ended(&mut self) {
        if self.claimed {
            self.claimed = false;
            self.signer.release();
        }
    }

    /// `step`'s request message (protobuf), which the call now carries.
    pub fn start(&mut self, step: Step) -> Vec<u8> {
        self.in_flight = Some(step);
        match step {
            Step::Challenge => GenerateAuthChallengeRequest {
                role: Role::Searcher as i32,
                pubkey: self.signer.pubkey().to_vec(),
            }
            .encode_to_vec(),
            Step::Tokens => {
                let challenge = self.challenge.clone().unwrap_or_default();
                GenerateAuthTokensRequest {
                    signed_challenge: self.signer.sign(challenge.as_bytes()).to_vec(),
                    challenge,
                    client_pubkey: self.signer.pubkey().to_vec(),
                }
                .encode_to_vec()
            }
            Step::Refresh => RefreshAccessTokenRequest {
                refresh_token: self
                    .refresh
                    .as_ref()
                    .map(|r| r.value.clone())
                    .unwrap_or_default(),
            }
            .encode_to_vec(),
        }
    }

    /// The call in flight was answered with `msg` (an OK status) at `now_ms`: true when it
    /// gave a new access token. An answer that does not decode fails the step.
    pub fn answered(&mut self, msg: &[u8], now_ms: u64) -> Result<bool, String> {
        let Some(step) = self.in_flight.take() else {
            return Ok(false);
        };
        let outcome = match step {
            Step::Challenge => GenerateAuthChallengeResponse::decode(msg)
                .map_err(|e| format!("undecodable answer: {e}"))
                .and_then(|r| {
                    if r.challenge.is_empty() {
                        return Err("the challenge is empty".into());
                    }
                    self.challenge = Some(format!("{}-{}", self.signer.pubkey_b58(), r.challenge));
                    Ok(false)
                }),
            Step::Tokens => {
                self.challenge = None;
                self.flow_ended();
                GenerateAuthTokensResponse::decode(msg)
                    .map_err(|e| format!("undecodable answer: {e}"))
                    .and_then(|r| {
                        let access = Held::from(r.access_token, now_ms, "Bearer ")?;
                        let refresh = Held::from(r.refresh_token, now_ms, "")?;
                        self.access = Some(access);
                        self.refresh = Some(refresh);
                        Ok(true)
                    })
            }
            Step::Refresh => RefreshAccessTokenResponse::decode(msg)
                .map_err(|e| format!("undecodable answer: {e}"))
                .and_then(|r| {
                    self.access = Some(Held::from(r.access_token, now_ms, "Bearer ")?);
                    Ok(true)
                }),
        };
        match outcome {
            Ok(fresh) => {
                self.retry_ms = RETRY_MS_MIN;
                if fresh {
                    self.generation = self.generation.wrapping_add(1);
                    self.confirmed = false;
                }
                Ok(fresh)
            }
            Err(why) => {
                self.back_off(step, now_ms);
                Err(why)
            }
        }
    }

    /// The call in flight failed (an error status, or no answer): tried again after the
    /// back-off; a refused refresh token or challenge is not used again.
    pub fn failed(&mut self, now_ms: u64) {
        if let Some(step) = self.in_flight.take() {
            self.back_off(step, now_ms);
        }
    }

    fn back_off(&mut self, step: Step, now_ms: u64) {
        match step {
            Step::Tokens | Step::Challenge => {
                self.challenge = None;
                self.flow_ended();
            }
            Step::Refresh => self.refresh = None,
        }
        self.retry_at_ms = now_ms + self.retry_ms;
        self.retry_ms = (self.retry_ms * 2).min(RETRY_MS_MAX);
    }

    /// The engine refused a call that carried token `generation` as unauthenticated at
    /// `now_ms`: when that is the token held, it is void (true). One a bundle was taken with
    /// is renewed at once (the engine forgot it: a restart); one none was yet waits a back-off
    /// first, 100 ms doubling to 10 s until a bundle is, so an engine that refuses every token
    /// is not asked for a new one round after round.
    pub fn invalidate(&mut self, now_ms: u64, generation: u32) -> bool {
        if generation != self.generation || self.access.is_none() {
            return false;
        }
        self.access = None;
        if !std::mem::take(&mut self.confirmed) {
            self.void_ms = match self.void_ms {
                0 => RETRY_MS_MIN,
                ms => (ms * 2).min(RETRY_MS_MAX),
            };
            self.retry_at_ms = self.retry_at_ms.max(now_ms + self.void_ms);
            self.voids = self.voids.saturating_add(1);
            if self.voids >= VOIDS_BEFORE_CHALLENGE {
                // What the refresh token buys the engine refuses: start over.
                self.refresh = None;
                self.voids = 0;
            }
        }
        true
    }

    /// A bundle sent with token `generation` was taken: the engine takes the token, and a
    /// later void of it is renewed at once.
    pub fn confirm(&mut self, generation: u32) {
        if generation == self.generation && self.access.is_some() {
            self.confirmed = true;
            self.void_ms = 0;
            self.voids = 0;
        }
    }

    /// The step running, if any.
    pub fn in_flight(&self) -> Option<Step> {
        self.in_flight
    }

    /// Whose key signs.
    pub fn pubkey_b58(&self) -> &str {
        self.signer.pubkey_b58()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_types::Timestamp;

    const T0: u64 = 1_800_000_000_000;

    fn token(value: &str, expires_ms: u64) -> Option<Token> {
        Some(Token {
            value: value.into(),
            expires_at_utc: Some(Timestamp {
                seconds: (expires_ms / 1_000) as i64,
                nanos: ((expires_ms % 1_000) * 1_000_000) as i32,
            }),
        })
    }

    fn auth() -> RegionAuth {
        RegionAuth::new(Arc::new(Signer::from_seed([7; 32])))
    }

    /// Runs the whole flow at `T0` with the given lives.
    fn authenticated(access_ms: u64, refresh_ms: u64) -> RegionAuth {
        let mut a = auth();
        assert_eq!(a.due(T0), Some(Step::Challenge));
        assert!(a.claim(Step::Challenge));
        let req = GenerateAuthChallengeRequest::decode(&a.start(Step::Challenge)[..]).unwrap();
        assert_eq!((req.role, req.pubkey.len()), (Role::Searcher as i32, 32));
        let answer = GenerateAuthChallengeResponse {
            challenge: "abc".into(),
        };
        assert_eq!(a.answered(&answer.encode_to_vec(), T0), Ok(false));
        assert_eq!(a.due(T0), Some(Step::Tokens));
        let req = GenerateAuthTokensRequest::decode(&a.start(Step::Tokens)[..]).unwrap();
        assert_eq!(req.challenge, format!("{}-abc", a.signer.pubkey_b58()));
        let key = ed25519_dalek::VerifyingKey::from_bytes(&a.signer.pubkey()).unwrap();
        let sig = ed25519_dalek::Signature::from_slice(&req.signed_challenge).unwrap();
        key.verify_strict(req.challenge.as_bytes(), &sig)
            .expect("the signed string verifies with the searcher's public key");
        let answer = GenerateAuthTokensResponse {
            access_token: token("acc", T0 + access_ms),
            refresh_token: token("ref", T0 + refresh_ms),
        };
        assert_eq!(a.answered(&answer.encode_to_vec(), T0), Ok(true));
        a
    }

    #[test]
    fn the_flow_signs_jitos_string_and_yields_a_bearer_token() {
        let a = authenticated(1_800_000, 86_400_000);
        assert_eq!(a.bearer(T0), Some("Bearer acc"));
        assert_eq!(a.due(T0), None);
    }

    #[test]
    fn an_access_token_is_refreshed_five_minutes_before_it_ends_or_half_way_if_shorter() {
        let a = authenticated(1_800_000, 86_400_000);
        assert_eq!(a.due(T0 + 1_499_999), None);
        assert_eq!(a.due(T0 + 1_500_000), Some(Step::Refresh));
        let b = authenticated(2_000, 86_400_000);
        assert_eq!(b.due(T0 + 999), None);
        assert_eq!(b.due(T0 + 1_000), Some(Step::Refresh));
        assert_eq!(b.bearer(T0 + 1_999), Some("Bearer acc"));
        assert_eq!(b.bearer(T0 + 2_000), None, "expired");
    }

    #[test]
    fn a_refresh_renews_the_access_token_and_a_refused_one_starts_over() {
        let mut a = authenticated(2_000, 86_400_000);
        let req = RefreshAccessTokenRequest::decode(&a.start(Step::Refresh)[..]).unwrap();
        assert_eq!(req.refresh_token, "ref");
        let answer = RefreshAccessTokenResponse {
            access_token: token("acc2", T0 + 4_000),
        };
        assert_eq!(a.answered(&answer.encode_to_vec(), T0 + 1_000), Ok(true));
        assert_eq!(a.bearer(T0 + 3_000), Some("Bearer acc2"));
        a.start(Step::Refresh);
        a.failed(T0 + 3_000);
        assert_eq!(a.due(T0 + 3_050), None, "backing off");
        assert_eq!(
            a.due(T0 + 3_100),
            Some(Step::Challenge),
            "the refresh token is void"
        );
    }

    #[test]
    fn a_refresh_token_near_its_end_starts_over_and_an_unauthenticated_call_voids_the_access() {
        let mut a = authenticated(2_000, 3_000);
        assert_eq!(a.due(T0 + 1_000), Some(Step::Challenge));
        let token = a.generation();
        assert!(a.invalidate(T0, token));
        assert_eq!(a.bearer(T0), None);
    }

    /// Refreshes `a`'s access token at `now_ms`: the new one lives ten minutes.
    fn refreshed(a: &mut RegionAuth, now_ms: u64) {
        assert_eq!(a.due(now_ms), Some(Step::Refresh));
        a.start(Step::Refresh);
        let answer = RefreshAccessTokenResponse {
            access_token: token("again", now_ms + 600_000),
        };
        assert_eq!(a.answered(&answer.encode_to_vec(), now_ms), Ok(true));
    }

    /// An engine that refuses every call UNAUTHENTICATED whatever token it just gave: each
    /// token no call took is voided with a back-off before the next (100 ms, doubling to
    /// 10 s), not renewed at once round after round.
    #[test]
    fn tokens_voided_before_any_call_took_one_are_renewed_after_a_back_off_doubling() {
        let mut a = authenticated(1_800_000, 86_400_000);
        let mut now = T0;
        for wait in [100, 200] {
            let token = a.generation();
            assert!(a.invalidate(now, token));
            assert_eq!(a.due(now + wait - 1), None, "backing off {wait} ms");
            now += wait;
            refreshed(&mut a, now);
        }
        // A third refused in a row: what the refresh token buys is refused, so the whole flow
        // runs again, after a longer wait still.
        let token = a.generation();
        assert!(a.invalidate(now, token));
        assert_eq!(a.due(now + 399), None);
        assert_eq!(a.due(now + 400), Some(Step::Challenge));
    }

    /// The engine forgot a token calls had taken (a restart): renewed at once, and a call
    /// taking the new one starts the back-off over.
    #[test]
    fn a_token_a_bundle_was_taken_with_is_renewed_at_once_when_voided_and_a_taken_bundle_starts_over()
     {
        let mut a = authenticated(1_800_000, 86_400_000);
        let token = a.generation();
        a.confirm(token);
        assert!(a.invalidate(T0, token));
        refreshed(&mut a, T0);
        let token = a.generation();
        assert!(a.invalidate(T0, token));
        refreshed(&mut a, T0 + 100);
        a.confirm(a.generation());
        let token = a.generation();
        assert!(a.invalidate(T0 + 200, token));
        refreshed(&mut a, T0 + 200);
        let token = a.generation();
        assert!(a.invalidate(T0 + 200, token));
        assert_eq!(a.due(T0 + 299), None, "the shortest back-off again");
        refreshed(&mut a, T0 + 300);
    }

    /// A call that carried an older token and met UNAUTHENTICATED says nothing of the token
    /// held now: it stays.
    #[test]
    fn a_refusal_of_a_call_that_carried_an_older_token_leaves_the_new_one() {
        let mut a = authenticated(1_800_000, 86_400_000);
        let old = a.generation();
        assert!(a.invalidate(T0, old));
        refreshed(&mut a, T0 + 100);
        assert!(!a.invalidate(T0 + 101, old));
        assert_eq!(a.bearer(T0 + 101), Some("Bearer again"));
    }

    #[test]
    fn bad_answers_fail_the_step_and_back_off_doubling() {
        let mut a = auth();
        a.start(Step::Challenge);
        assert!(a.answered(b"\xff\xff", T0).is_err());
        assert_eq!(a.due(T0 + 99), None);
        a.start(Step::Challenge);
        let expired = GenerateAuthChallengeResponse {
            challenge: String::new(),
        };
        assert!(a.answered(&expired.encode_to_vec(), T0 + 100).is_err());
        assert_eq!(a.due(T0 + 299), None, "200 ms the second time");
        assert_eq!(a.due(T0 + 300), Some(Step::Challenge));
    }

    #[test]
    fn one_challenge_flow_at_a_time_runs_for_a_key() {
        let signer = Arc::new(Signer::from_seed([7; 32]));
        let (mut a, mut b) = (
            RegionAuth::new(signer.clone()),
            RegionAuth::new(signer.clone()),
        );
        assert!(a.claim(Step::Challenge));
        assert!(!b.claim(Step::Challenge), "a's flow is running");
        assert!(b.claim(Step::Refresh), "refreshes need no claim");
        a.start(Step::Challenge);
        a.failed(T0);
        assert!(b.claim(Step::Challenge), "a's flow ended");
        b.unclaim();
        assert!(a.claim(Step::Challenge));
    }
}
