//! Jito's searcher authentication (`auth.AuthService`), sans-IO: the outstanding challenges, the
//! tokens issued, their expiry, and the check every engine call passes when tokens are required.
//!
//! The flow, checked as Jito checks it:
//!
//! 1. `GenerateAuthChallenge {role: SEARCHER, pubkey}` answers a random challenge, remembered for
//!    that pubkey for [`CHALLENGE_TTL_MS`] (a new one replaces the old);
//! 2. the client signs `"<base58 pubkey>-<challenge>"` with its ed25519 key and sends that string
//!    with the pubkey and signature to `GenerateAuthTokens`, which answers an access token and a
//!    refresh token and forgets the challenge;
//! 3. `RefreshAccessToken {refresh_token}` answers a new access token while the refresh token
//!    lives.
//!
//! Expiry runs on the system clock in ms since the Unix epoch, the clock `expires_at_utc`
//! states: a token stops working exactly when the time it was issued with passes. The `revoke`
//! fault runs on the engine's own clock, as the whole fault schedule does ([`Now`] carries
//! both): at each revoke instant the store forgets every access token issued before it, as an
//! engine restart would, and keeps refresh tokens and outstanding challenges. The forgetting is
//! decided when a token is checked, so it holds from the instant on whether or not a call came
//! then.

use std::collections::HashMap;

use ed25519_dalek::{Signature, VerifyingKey};
use rand::Rng;
use rand::distr::Alphanumeric;

use super::grpc;
use bundle_relay::proto::auth::{
    GenerateAuthChallengeRequest, GenerateAuthChallengeResponse, GenerateAuthTokensRequest,
    GenerateAuthTokensResponse, RefreshAccessTokenRequest, RefreshAccessTokenResponse, Role, Token,
};

/// Jito's access token lifetime: 30 minutes.
pub const ACCESS_TTL_MS_DEFAULT: u64 = 1_800_000;
/// Refresh tokens live a day.
pub const REFRESH_TTL_MS_DEFAULT: u64 = 86_400_000;
/// A challenge must be answered within this long.
pub const CHALLENGE_TTL_MS: u64 = 60_000;
/// Characters in a challenge, as long as Jito's.
pub const CHALLENGE_LEN: usize = 9;
/// Characters in a token: ≈190 bits, beyond guessing.
pub const TOKEN_LEN: usize = 32;
/// A store is swept of long-dead entries when it has grown to this many at least (and then when
/// it doubles), so the sweep costs O(1) per insert.
const SWEEP_MIN: usize = 1024;

/// The instant of a call on both clocks the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// System clock, ms since the Unix epoch: token and challenge expiry.
    pub unix_ms: u64,
    /// Engine clock, ns since engine start: the `revoke` fault's schedule.
    pub engine_ns: u64,
}

/// Token lifetimes when the engine requires tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthConfig {
    pub access_ttl_ms: u64,
    pub refresh_ttl_ms: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            access_ttl_ms: ACCESS_TTL_MS_DEFAULT,
            refresh_ttl_ms: REFRESH_TTL_MS_DEFAULT,
        }
    }
}

/// An auth-service call refused: the gRPC status to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub code: u32,
    pub message: String,
}

impl Refused {
    fn new(code: u32, message: impl Into<String>) -> Refused {
        Refused {
            code,
            message: message.into(),
        }
    }
}

pub const ONLY_SEARCHERS: &str = "only searchers may authenticate here";
pub const UNKNOWN_CHALLENGE: &str = "unknown or expired challenge";
pub const BAD_SIGNATURE: &str = "signature does not verify";
pub const UNKNOWN_REFRESH_TOKEN: &str = "unknown or expired refresh token";

/// Why an engine call's access token does not let it through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRefusal {
    /// No `authorization: Bearer <token>` header.
    Missing,
    /// A token this engine never issued, forgot long after it expired, or forgot at a revoke.
    Unknown,
    Expired,
}

impl TokenRefusal {
    /// The words of the refusal, the same for gRPC and JSON-RPC.
    pub fn message(self) -> &'static str {
        match self {
            TokenRefusal::Missing => "missing access token",
            TokenRefusal::Unknown => "unknown access token",
            TokenRefusal::Expired => "access token expired",
        }
    }
}

/// Values with an expiry instant, swept once they are long dead.
struct Expiring<K, V> {
    map: HashMap<K, (V, u64)>,
    /// Dead entries are kept this long after they expire, so a late caller hears "expired"
    /// rather than "unknown".
    keep_ms: u64,
    sweep_at: usize,
}

impl<K: std::hash::Hash + Eq, V> Expiring<K, V> {
    fn new(keep_ms: u64) -> Self {
        Expiring {
            map: HashMap::new(),
            keep_ms,
            sweep_at: SWEEP_MIN,
        }
    }

    fn insert(&mut self, key: K, value: V, expires_ms: u64, now_ms: u64) {
        if self.map.len() >= self.sweep_at {
            let keep_ms = self.keep_ms;
            self.map
                .retain(|_, (_, exp)| exp.saturating_add(keep_ms) > now_ms);
            self.sweep_at = (self.map.len() * 2).max(SWEEP_MIN);
        }
        self.map.insert(key, (value, expires_ms));
    }

    /// The value and whether it is still live at `now_ms`.
    fn get<Q>(&self, key: &Q, now_ms: u64) -> Option<(&V, bool)>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.map.get(key).map(|(v, exp)| (v, now_ms < *exp))
    }

    fn remove<Q>(&mut self, key: &Q)
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.map.remove(key);
    }
}

/// Every outstanding challenge and issued token of one engine (all its regions share it).
pub struct AuthStore {
    cfg: AuthConfig,
    challenges: Expiring<[u8; 32], String>,
    /// Each access token with the engine instant (ns) it was issued at, for the revokes.
    access: Expiring<String, u64>,
    refresh: Expiring<String, ()>,
    /// Engine instants (ns since start) at which every access token issued before is forgotten.
    revokes: Vec<u64>,
}

impl AuthStore {
    pub fn new(cfg: AuthConfig) -> AuthStore {
        AuthStore {
            cfg,
            challenges: Expiring::new(0),
            access: Expiring::new(cfg.access_ttl_ms),
            refresh: Expiring::new(cfg.refresh_ttl_ms),
            revokes: Vec::new(),
        }
    }

    /// The store with the `revoke` fault's instants (ns since engine start).
    pub fn with_revokes(mut self, instants_ns: Vec<u64>) -> AuthStore {
        self.revokes = instants_ns;
        self
    }

    pub fn config(&self) -> AuthConfig {
        self.cfg
    }

    /// `GenerateAuthChallenge`: a fresh challenge for the pubkey, replacing any outstanding one.
    pub fn challenge(
        &mut self,
        req: &GenerateAuthChallengeRequest,
        now: Now,
    ) -> Result<GenerateAuthChallengeResponse, Refused> {
        let now_ms = now.unix_ms;
        if req.role != Role::Searcher as i32 {
            return Err(Refused::new(grpc::PERMISSION_DENIED, ONLY_SEARCHERS));
        }
        let pubkey = pubkey_of("pubkey", &req.pubkey)?;
        let challenge = random_string(CHALLENGE_LEN);
        self.challenges.insert(
            pubkey,
            challenge.clone(),
            now_ms.saturating_add(CHALLENGE_TTL_MS),
            now_ms,
        );
        Ok(GenerateAuthChallengeResponse { challenge })
    }

    /// `GenerateAuthTokens`: an access and a refresh token for a signed outstanding challenge,
    /// which is then forgotten. A wrong signature leaves the challenge outstanding: only the
    /// key's holder can use it anyway.
    pub fn tokens(
        &mut self,
        req: &GenerateAuthTokensRequest,
        now: Now,
    ) -> Result<GenerateAuthTokensResponse, Refused> {
        let now_ms = now.unix_ms;
        let pubkey = pubkey_of("client_pubkey", &req.client_pubkey)?;
        let signature: [u8; 64] = req.signed_challenge.as_slice().try_into().map_err(|_| {
            Refused::new(
                grpc::INVALID_ARGUMENT,
                format!(
                    "signed_challenge is {} bytes, not a 64-byte ed25519 signature",
                    req.signed_challenge.len()
                ),
            )
        })?;
        let unknown = || Refused::new(grpc::UNAUTHENTICATED, UNKNOWN_CHALLENGE);
        match self.challenges.get(&pubkey, now_ms) {
            Some((challenge, true)) if req.challenge == signed_text(&pubkey, challenge) => {}
            Some((_, false)) => {
                self.challenges.remove(&pubkey);
                return Err(unknown());
            }
            _ => return Err(unknown()),
        }
        let verifies = VerifyingKey::from_bytes(&pubkey).is_ok_and(|key| {
            key.verify_strict(req.challenge.as_bytes(), &Signature::from_bytes(&signature))
                .is_ok()
        });
        if !verifies {
            return Err(Refused::new(grpc::UNAUTHENTICATED, BAD_SIGNATURE));
        }
        self.challenges.remove(&pubkey);
        Ok(GenerateAuthTokensResponse {
            access_token: Some(self.issue_access(now)),
            refresh_token: Some(issue(
                &mut self.refresh,
                (),
                self.cfg.refresh_ttl_ms,
                now_ms,
            )),
        })
    }

    /// `RefreshAccessToken`: a new access token while the refresh token lives.
    pub fn refresh(
        &mut self,
        req: &RefreshAccessTokenRequest,
        now: Now,
    ) -> Result<RefreshAccessTokenResponse, Refused> {
        match self.refresh.get(req.refresh_token.as_str(), now.unix_ms) {
            Some((_, true)) => Ok(RefreshAccessTokenResponse {
                access_token: Some(self.issue_access(now)),
            }),
            _ => Err(Refused::new(grpc::UNAUTHENTICATED, UNKNOWN_REFRESH_TOKEN)),
        }
    }

    /// Whether an engine call with this `authorization` header value may pass at `now`.
    pub fn check(&self, authorization: Option<&[u8]>, now: Now) -> Result<(), TokenRefusal> {
        let token = authorization
            .and_then(bearer_token)
            .ok_or(TokenRefusal::Missing)?;
        match self.access.get(token, now.unix_ms) {
            None => Err(TokenRefusal::Unknown),
            // A forgotten token is unknown, expired or not: nothing is left to say it expired.
            Some((&issued_ns, _)) if self.revoked(issued_ns, now.engine_ns) => {
                Err(TokenRefusal::Unknown)
            }
            Some((_, false)) => Err(TokenRefusal::Expired),
            Some((_, true)) => Ok(()),
        }
    }

    /// Whether a revoke instant has come by `now_ns` that forgot a token issued at `issued_ns`.
    /// A token issued at the instant itself was issued after the forgetting.
    fn revoked(&self, issued_ns: u64, now_ns: u64) -> bool {
        self.revokes
            .iter()
            .any(|&at| issued_ns < at && at <= now_ns)
    }

    fn issue_access(&mut self, now: Now) -> Token {
        issue(
            &mut self.access,
            now.engine_ns,
            self.cfg.access_ttl_ms,
            now.unix_ms,
        )
    }
}

/// What a client signs for `challenge`: `"<base58 pubkey>-<challenge>"`.
pub fn signed_text(pubkey: &[u8; 32], challenge: &str) -> String {
    format!("{}-{challenge}", bs58::encode(pubkey).into_string())
}

/// The token of an `authorization` header value `Bearer <token>` (the scheme in any case).
pub fn bearer_token(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// `ms` since the Unix epoch as a protobuf timestamp.
pub fn timestamp(ms: u64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: (ms / 1_000) as i64,
        nanos: ((ms % 1_000) * 1_000_000) as i32,
    }
}

fn issue<V>(store: &mut Expiring<String, V>, meta: V, ttl_ms: u64, now_ms: u64) -> Token {
    let value = random_string(TOKEN_LEN);
    let expires_ms = now_ms.saturating_add(ttl_ms);
    store.insert(value.clone(), meta, expires_ms, now_ms);
    Token {
        value,
        expires_at_utc: Some(timestamp(expires_ms)),
    }
}

fn pubkey_of(field: &str, bytes: &[u8]) -> Result<[u8; 32], Refused> {
    bytes.try_into().map_err(|_| {
        Refused::new(
            grpc::INVALID_ARGUMENT,
            format!(
                "{field} is {} bytes, not a 32-byte ed25519 public key",
                bytes.len()
            ),
        )
    })
}

fn random_string(len: usize) -> String {
    rand::rng()
        .sample_iter(Alphanumeric)
        .take(len)
        .map(char::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};

    const T0: u64 = 1_700_000_000_000;

    /// `unix_ms` on the system clock, the engine having started at `T0`.
    fn at(unix_ms: u64) -> Now {
        Now {
            unix_ms,
            engine_ns: (unix_ms - T0) * 1_000_000,
        }
    }

    fn store() -> AuthStore {
        AuthStore::new(AuthConfig {
            access_ttl_ms: 1_000,
            refresh_ttl_ms: 5_000,
        })
    }

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32])
    }

    fn ask(s: &mut AuthStore, key: &SigningKey, now_ms: u64) -> String {
        let req = GenerateAuthChallengeRequest {
            role: Role::Searcher as i32,
            pubkey: key.verifying_key().to_bytes().to_vec(),
        };
        s.challenge(&req, at(now_ms)).unwrap().challenge
    }

    fn signed(key: &SigningKey, challenge: &str) -> GenerateAuthTokensRequest {
        let text = signed_text(&key.verifying_key().to_bytes(), challenge);
        GenerateAuthTokensRequest {
            signed_challenge: key.sign(text.as_bytes()).to_bytes().to_vec(),
            challenge: text,
            client_pubkey: key.verifying_key().to_bytes().to_vec(),
        }
    }

    fn bearer(t: &Token) -> Vec<u8> {
        format!("Bearer {}", t.value).into_bytes()
    }

    #[test]
    fn a_signed_challenge_buys_tokens_that_expire_when_they_say() {
        let mut s = store();
        let k = key();
        let challenge = ask(&mut s, &k, T0);
        assert_eq!(challenge.len(), CHALLENGE_LEN);
        assert!(challenge.chars().all(|c| c.is_ascii_alphanumeric()));
        let r = s.tokens(&signed(&k, &challenge), at(T0 + 10)).unwrap();
        let (access, refresh) = (r.access_token.unwrap(), r.refresh_token.unwrap());
        assert_eq!(access.value.len(), TOKEN_LEN);
        assert_ne!(access.value, refresh.value);
        assert_eq!(access.expires_at_utc, Some(timestamp(T0 + 10 + 1_000)));
        assert_eq!(refresh.expires_at_utc, Some(timestamp(T0 + 10 + 5_000)));
        assert_eq!(s.check(Some(&bearer(&access)), at(T0 + 1_009)), Ok(()));
        assert_eq!(
            s.check(Some(&bearer(&access)), at(T0 + 1_010)),
            Err(TokenRefusal::Expired)
        );
        // A refresh token is not an access token.
        assert_eq!(
            s.check(Some(&bearer(&refresh)), at(T0 + 20)),
            Err(TokenRefusal::Unknown)
        );

        let again = RefreshAccessTokenRequest {
            refresh_token: refresh.value.clone(),
        };
        let fresh = s
            .refresh(&again, at(T0 + 2_000))
            .unwrap()
            .access_token
            .unwrap();
        assert_eq!(fresh.expires_at_utc, Some(timestamp(T0 + 3_000)));
        assert_eq!(s.check(Some(&bearer(&fresh)), at(T0 + 2_500)), Ok(()));
        let late = s.refresh(&again, at(T0 + 5_010)).unwrap_err();
        assert_eq!(
            late,
            Refused::new(grpc::UNAUTHENTICATED, UNKNOWN_REFRESH_TOKEN)
        );
    }

    #[test]
    fn challenges_are_checked_one_use_and_replaced() {
        let mut s = store();
        let k = key();
        let first = ask(&mut s, &k, T0);
        let second = ask(&mut s, &k, T0);
        let refused = |code, msg: &str| Err(Refused::new(code, msg));
        // The new challenge replaced the old.
        assert_eq!(
            s.tokens(&signed(&k, &first), at(T0)),
            refused(grpc::UNAUTHENTICATED, UNKNOWN_CHALLENGE)
        );
        // Signed by another key: the text names k's pubkey, the signature is not k's.
        let mut forged = signed(&k, &second);
        forged.signed_challenge = SigningKey::from_bytes(&[8u8; 32])
            .sign(forged.challenge.as_bytes())
            .to_bytes()
            .to_vec();
        assert_eq!(
            s.tokens(&forged, at(T0)),
            refused(grpc::UNAUTHENTICATED, BAD_SIGNATURE)
        );
        // The text must name the pubkey as well as the challenge.
        let mut bare = signed(&k, &second);
        bare.challenge = second.clone();
        assert_eq!(
            s.tokens(&bare, at(T0)),
            refused(grpc::UNAUTHENTICATED, UNKNOWN_CHALLENGE)
        );
        assert!(s.tokens(&signed(&k, &second), at(T0)).is_ok());
        assert_eq!(
            s.tokens(&signed(&k, &second), at(T0)),
            refused(grpc::UNAUTHENTICATED, UNKNOWN_CHALLENGE),
            "one use"
        );
        let third = ask(&mut s, &k, T0);
        assert_eq!(
            s.tokens(&signed(&k, &third), at(T0 + CHALLENGE_TTL_MS)),
            refused(grpc::UNAUTHENTICATED, UNKNOWN_CHALLENGE),
            "expired"
        );
    }

    #[test]
    fn requests_of_the_wrong_shape_are_refused_by_name() {
        let mut s = store();
        let k = key();
        let validator = GenerateAuthChallengeRequest {
            role: Role::Validator as i32,
            pubkey: vec![1; 32],
        };
        assert_eq!(
            s.challenge(&validator, at(T0)),
            Err(Refused::new(grpc::PERMISSION_DENIED, ONLY_SEARCHERS))
        );
        let short = GenerateAuthChallengeRequest {
            role: Role::Searcher as i32,
            pubkey: vec![1; 31],
        };
        let e = s.challenge(&short, at(T0)).unwrap_err();
        assert_eq!(e.code, grpc::INVALID_ARGUMENT);
        assert!(e.message.contains("31 bytes"), "{e:?}");
        let challenge = ask(&mut s, &k, T0);
        let mut cut = signed(&k, &challenge);
        cut.signed_challenge.pop();
        let e = s.tokens(&cut, at(T0)).unwrap_err();
        assert_eq!(e.code, grpc::INVALID_ARGUMENT);
        assert!(e.message.contains("63 bytes"), "{e:?}");
    }

    #[test]
    fn the_header_must_be_a_bearer_token() {
        let s = store();
        assert_eq!(s.check(None, at(T0)), Err(TokenRefusal::Missing));
        for bad in ["", "Bearer", "Bearer  ", "Basic abc", "abc"] {
            assert_eq!(
                s.check(Some(bad.as_bytes()), at(T0)),
                Err(TokenRefusal::Missing),
                "{bad:?}"
            );
        }
        assert_eq!(
            s.check(Some(b"bearer nope"), at(T0)),
            Err(TokenRefusal::Unknown)
        );
        assert_eq!(bearer_token(b"Bearer abc "), Some("abc"));
    }

    #[test]
    fn a_revoke_forgets_the_access_tokens_issued_before_it_and_nothing_else() {
        let mut s = AuthStore::new(AuthConfig {
            access_ttl_ms: 10_000,
            refresh_ttl_ms: 50_000,
        })
        .with_revokes(vec![1_000_000_000, 3_000_000_000]);
        let k = key();
        let challenge = ask(&mut s, &k, T0 + 100);
        let r = s.tokens(&signed(&k, &challenge), at(T0 + 100)).unwrap();
        let (access, refresh) = (r.access_token.unwrap(), r.refresh_token.unwrap());
        let other = SigningKey::from_bytes(&[9u8; 32]);
        let pending = ask(&mut s, &other, T0 + 200);
        let check = |s: &AuthStore, t: &Token, ms| s.check(Some(&bearer(t)), at(T0 + ms));

        assert_eq!(check(&s, &access, 999), Ok(()));
        // From the instant on, with no call needed at the instant itself.
        assert_eq!(check(&s, &access, 1_000), Err(TokenRefusal::Unknown));
        assert_eq!(check(&s, &access, 2_000), Err(TokenRefusal::Unknown));
        // Past its expiry it is still unknown, not expired: nothing remembers it.
        assert_eq!(check(&s, &access, 10_200), Err(TokenRefusal::Unknown));

        // The refresh token and the outstanding challenge were kept.
        let again = RefreshAccessTokenRequest {
            refresh_token: refresh.value.clone(),
        };
        let at_instant = s.refresh(&again, at(T0 + 1_000)).unwrap();
        let at_instant = at_instant.access_token.unwrap();
        assert_eq!(
            check(&s, &at_instant, 1_000),
            Ok(()),
            "issued at the instant"
        );
        let later = s.tokens(&signed(&other, &pending), at(T0 + 1_500)).unwrap();
        let later = later.access_token.unwrap();
        assert_eq!(check(&s, &later, 2_999), Ok(()));
        // The second revoke forgets what was issued between the two.
        assert_eq!(check(&s, &later, 3_000), Err(TokenRefusal::Unknown));
        assert_eq!(check(&s, &at_instant, 3_000), Err(TokenRefusal::Unknown));
        let last = s.refresh(&again, at(T0 + 3_001)).unwrap();
        assert_eq!(check(&s, &last.access_token.unwrap(), 9_000), Ok(()));
    }

    #[test]
    fn long_dead_entries_are_swept() {
        let mut s = store();
        for i in 0..SWEEP_MIN as u64 {
            issue(&mut s.access, 0, 1_000, T0 + i);
        }
        let kept = issue(&mut s.access, 0, 1_000, T0 + 10_000);
        // Everything but the last token died over a TTL before the sweep.
        assert_eq!(s.access.map.len(), 1);
        assert_eq!(s.check(Some(&bearer(&kept)), at(T0 + 10_500)), Ok(()));
    }
}
