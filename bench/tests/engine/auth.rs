//! Jito's searcher auth on bench-engine: `auth.AuthService` sells tokens for a signed challenge,
//! and with `auth` set every SearcherService and JSON-RPC call needs a live one.

use crate::support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bundle_relay::jito::{TRANSACTIONS_PATH, code};
use bundle_relay::proto::auth::{
    GenerateAuthChallengeRequest, GenerateAuthChallengeResponse, GenerateAuthTokensRequest,
    GenerateAuthTokensResponse, RefreshAccessTokenRequest, RefreshAccessTokenResponse, Role,
};
use bundle_relay::proto::searcher::{GetRegionsRequest, GetRegionsResponse, SendBundleResponse};
use bundle_relay_bench::engine::{AuthConfig, EngineConfig};
use bytes::Bytes;
use ed25519_dalek::{Signer, SigningKey};
use prost::Message;
use serde_json::json;
use support::engine::*;

const UNAUTHENTICATED: u32 = 16;
const INFLIGHT_PATH: &str = "/api/v1/getInflightBundleStatuses";

fn searcher() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32])
}

fn auth_cfg(access_ttl_ms: u64) -> EngineConfig {
    EngineConfig {
        auth: Some(AuthConfig {
            access_ttl_ms,
            refresh_ttl_ms: 60_000,
        }),
        interval_ms: 10,
        ..EngineConfig::for_tests(&["ny", "tokyo"])
    }
}

type Conn = h2::client::SendRequest<Bytes>;

/// One unary gRPC call on `path`, with `authorization: Bearer <token>` when a token is given.
async fn call(send: &Conn, path: &str, token: Option<&str>, msg: &impl Message) -> RawReply {
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("http://engine{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let mut ready = send.clone().ready().await.unwrap();
    let (resp, mut stream) = ready.send_request(req.body(()).unwrap(), false).unwrap();
    stream.send_data(grpc_body(msg), true).unwrap();
    let resp = resp.await.unwrap();
    let header = |h: &http::HeaderMap, k: &str| h.get(k).map(|v| v.to_str().unwrap().to_string());
    if let Some(s) = header(resp.headers(), "grpc-status") {
        return RawReply {
            status: s.parse().unwrap(),
            message: header(resp.headers(), "grpc-message").unwrap_or_default(),
            body: Vec::new(),
        };
    }
    let mut recv = resp.into_body();
    let mut body = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.unwrap();
        let _ = recv.flow_control().release_capacity(chunk.len());
        body.extend_from_slice(&chunk);
    }
    let trailers = recv.trailers().await.unwrap().unwrap_or_default();
    RawReply {
        status: header(&trailers, "grpc-status").unwrap().parse().unwrap(),
        message: header(&trailers, "grpc-message").unwrap_or_default(),
        body: body[5..].to_vec(),
    }
}

/// The answer of a call that must succeed.
fn ok<M: Message + Default>(r: RawReply) -> M {
    assert_eq!((r.status, r.message.as_str()), (0, ""));
    M::decode(r.body.as_slice()).unwrap()
}

fn refused(r: RawReply) -> (u32, String) {
    (r.status, r.message)
}

async fn challenge(send: &Conn, key: &SigningKey) -> String {
    let req = GenerateAuthChallengeRequest {
        role: Role::Searcher as i32,
        pubkey: key.verifying_key().to_bytes().to_vec(),
    };
    let r = call(send, "/auth.AuthService/GenerateAuthChallenge", None, &req).await;
    ok::<GenerateAuthChallengeResponse>(r).challenge
}

/// Jito's request for tokens: `"<base58 pubkey>-<challenge>"`, signed by `signer`.
fn signed(key: &SigningKey, challenge: &str, signer: &SigningKey) -> GenerateAuthTokensRequest {
    let pubkey = key.verifying_key().to_bytes();
    let text = format!("{}-{challenge}", bs58::encode(pubkey).into_string());
    GenerateAuthTokensRequest {
        signed_challenge: signer.sign(text.as_bytes()).to_bytes().to_vec(),
        challenge: text,
        client_pubkey: pubkey.to_vec(),
    }
}

async fn tokens(send: &Conn, req: &GenerateAuthTokensRequest) -> RawReply {
    call(send, "/auth.AuthService/GenerateAuthTokens", None, req).await
}

/// Challenge, signature, tokens: the access and the refresh token.
async fn log_in(send: &Conn) -> (String, String) {
    let key = searcher();
    let c = challenge(send, &key).await;
    let r: GenerateAuthTokensResponse = ok(tokens(send, &signed(&key, &c, &key)).await);
    (
        r.access_token.unwrap().value,
        r.refresh_token.unwrap().value,
    )
}

/// RefreshAccessToken with `refresh_token`.
async fn refresh(send: &Conn, refresh_token: &str) -> RawReply {
    let path = "/auth.AuthService/RefreshAccessToken";
    let req = RefreshAccessTokenRequest {
        refresh_token: refresh_token.to_string(),
    };
    call(send, path, None, &req).await
}

async fn send_bundle(send: &Conn, token: Option<&str>, n: u64) -> RawReply {
    let path = "/searcher.SearcherService/SendBundle";
    call(send, path, token, &bundle(n)).await
}

#[tokio::test]
async fn the_whole_flow_buys_a_token_that_lets_bundles_through() {
    let h = start(EngineConfig {
        auth: Some(AuthConfig::default()),
        ..EngineConfig::for_tests(&["ny", "tokyo"])
    })
    .await;
    let (ny, _c1) = h2_connect(addr_of(&h, "ny"), src(1)).await;
    let (tokyo, _c2) = h2_connect(addr_of(&h, "tokyo"), src(1)).await;

    assert_eq!(
        refused(send_bundle(&ny, None, 1).await),
        (UNAUTHENTICATED, "missing access token".into())
    );
    assert_eq!(
        refused(send_bundle(&ny, Some("made-up"), 1).await),
        (UNAUTHENTICATED, "unknown access token".into())
    );
    // JSON-RPC is refused the same way, the request's id echoed.
    let tx = bs58::encode(&bundle_txs(9, 1)[0]).into_string();
    let send_tx = json!({"jsonrpc": "2.0", "id": 5, "method": "sendTransaction", "params": [tx]});
    let id = "00".repeat(32);
    let inflight =
        json!({"jsonrpc": "2.0", "id": 6, "method": "getInflightBundleStatuses", "params": [[id]]});
    for (path, body) in [(TRANSACTIONS_PATH, &send_tx), (INFLIGHT_PATH, &inflight)] {
        let (status, reply) = json_rpc(addr_of(&h, "ny"), src(2), path, body).await;
        assert_eq!(status, 401, "{reply}");
        assert_eq!(reply["error"]["code"], code::UNAUTHORIZED);
        assert_eq!(reply["error"]["message"], "missing access token");
        assert_eq!(reply["id"], body["id"]);
    }
    let s = h.stats();
    assert_eq!(s.unauthenticated_calls, 4);
    // Refused before the per-source rule: nothing booked, nothing else counted.
    assert_eq!(
        (
            s.send_bundle_calls,
            s.early_sends,
            s.send_transaction_calls,
            s.distinct_sources
        ),
        (0, 0, 0, 0)
    );

    // Challenge and tokens from the same source within the 1 s interval: auth calls are not
    // under the per-source rule.
    let before_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let key = searcher();
    let c = challenge(&ny, &key).await;
    assert_eq!(c.len(), 9);
    let r: GenerateAuthTokensResponse = ok(tokens(&ny, &signed(&key, &c, &key)).await);
    let access = r.access_token.unwrap();
    let expires_s = access.expires_at_utc.unwrap().seconds;
    assert!(
        (before_s + 1_800..=before_s + 1_802).contains(&expires_s),
        "access token expires at {expires_s}, 30 minutes after {before_s}"
    );
    let bearer = Some(access.value.as_str());
    let accepted: SendBundleResponse = ok(send_bundle(&ny, bearer, 1).await);
    assert_eq!(accepted.uuid.len(), 64);
    // Bought on ny, good on tokyo.
    let path = "/searcher.SearcherService/GetRegions";
    let regions: GetRegionsResponse = ok(call(&tokyo, path, bearer, &GetRegionsRequest {}).await);
    assert_eq!(regions.current_region, "tokyo");

    let s = h.shutdown().await;
    assert_eq!(
        (s.auth, s.auth_access_ttl_ms),
        (true, AuthConfig::default().access_ttl_ms)
    );
    assert_eq!(
        (s.auth_challenges, s.auth_tokens_issued, s.auth_refused),
        (1, 1, 0)
    );
    assert_eq!(
        (s.accepted, s.unauthenticated_calls, s.expired_token_calls),
        (1, 4, 0)
    );
}

#[tokio::test]
async fn a_wrong_signature_or_a_replayed_challenge_is_refused() {
    let h = start(auth_cfg(60_000)).await;
    let (ny, _c) = h2_connect(addr_of(&h, "ny"), src(1)).await;
    let key = searcher();

    let validator = GenerateAuthChallengeRequest {
        role: Role::Validator as i32,
        pubkey: key.verifying_key().to_bytes().to_vec(),
    };
    let path = "/auth.AuthService/GenerateAuthChallenge";
    assert_eq!(
        refused(call(&ny, path, None, &validator).await),
        (7, "only searchers may authenticate here".into())
    );
    let short = GenerateAuthChallengeRequest {
        role: Role::Searcher as i32,
        pubkey: vec![7; 31],
    };
    let r = call(&ny, path, None, &short).await;
    assert_eq!(r.status, 3);
    assert!(r.message.contains("31 bytes"), "{}", r.message);

    let c = challenge(&ny, &key).await;
    let other = SigningKey::from_bytes(&[8u8; 32]);
    assert_eq!(
        refused(tokens(&ny, &signed(&key, &c, &other)).await),
        (UNAUTHENTICATED, "signature does not verify".into())
    );
    // A wrong signature leaves the challenge to its key's holder.
    let good = signed(&key, &c, &key);
    let _: GenerateAuthTokensResponse = ok(tokens(&ny, &good).await);
    assert_eq!(
        refused(tokens(&ny, &good).await),
        (UNAUTHENTICATED, "unknown or expired challenge".into())
    );

    let s = h.shutdown().await;
    assert_eq!(
        (s.auth_challenges, s.auth_tokens_issued, s.auth_refused),
        (1, 1, 4)
    );
}

#[tokio::test]
async fn an_expired_access_token_is_refused_and_a_refresh_buys_a_new_one() {
    let h = start(auth_cfg(1_000)).await;
    let (ny, _c) = h2_connect(addr_of(&h, "ny"), src(1)).await;
    let (access, refresh_token) = log_in(&ny).await;
    let _: SendBundleResponse = ok(send_bundle(&ny, Some(&access), 1).await);

    tokio::time::sleep(Duration::from_millis(1_050)).await;
    assert_eq!(
        refused(send_bundle(&ny, Some(&access), 2).await),
        (UNAUTHENTICATED, "access token expired".into())
    );

    assert_eq!(
        refused(refresh(&ny, &access).await),
        (UNAUTHENTICATED, "unknown or expired refresh token".into())
    );
    let r: RefreshAccessTokenResponse = ok(refresh(&ny, &refresh_token).await);
    let fresh = r.access_token.unwrap().value;
    assert_ne!(fresh, access);
    let _: SendBundleResponse = ok(send_bundle(&ny, Some(&fresh), 2).await);

    let s = h.shutdown().await;
    assert_eq!(
        (s.auth_access_ttl_ms, s.auth_refreshes, s.auth_refused),
        (1_000, 1, 1)
    );
    assert_eq!(
        (s.accepted, s.expired_token_calls, s.unauthenticated_calls),
        (2, 1, 0)
    );
}

#[tokio::test]
async fn a_revoke_makes_every_access_token_unknown_and_a_refresh_buys_one_again() {
    let h = start(EngineConfig {
        faults: vec!["revoke@1s".parse().unwrap()],
        ..auth_cfg(60_000)
    })
    .await;
    let (ny, _c) = h2_connect(addr_of(&h, "ny"), src(1)).await;
    let (access, refresh_token) = log_in(&ny).await;
    let _: SendBundleResponse = ok(send_bundle(&ny, Some(&access), 1).await);
    assert_eq!(h.stats().faults["revoke"], 0, "not yet");

    // No call comes at the instant: the token is forgotten all the same.
    tokio::time::sleep(Duration::from_millis(1_050)).await;
    assert_eq!(h.stats().faults["revoke"], 1);
    assert_eq!(
        refused(send_bundle(&ny, Some(&access), 2).await),
        (UNAUTHENTICATED, "unknown access token".into())
    );

    let r: RefreshAccessTokenResponse = ok(refresh(&ny, &refresh_token).await);
    let fresh = r.access_token.unwrap().value;
    assert_ne!(fresh, access);
    let _: SendBundleResponse = ok(send_bundle(&ny, Some(&fresh), 2).await);

    let s = h.shutdown().await;
    assert_eq!(s.fault_rules[0].rule, "revoke@1s");
    assert_eq!(s.fault_rules[0].injected, 1);
    assert_eq!(
        (s.auth_tokens_issued, s.auth_refreshes, s.auth_refused),
        (1, 1, 0)
    );
    assert_eq!(
        (s.accepted, s.unauthenticated_calls, s.expired_token_calls),
        (2, 1, 0)
    );
}
