//! The baseline alone: signed Solana transfers written by hand (ed25519-dalek), a tiny
//! keep-alive HTTP/1.1 client, and a rate-limiting `SearcherService` that records what it
//! received and counts early sends.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bundle_relay::jito::rate_limit_message;
use bundle_relay::proto::searcher::{
    GetRegionsRequest, GetRegionsResponse, GetTipAccountsRequest, GetTipAccountsResponse,
    NextScheduledLeaderRequest, NextScheduledLeaderResponse, SendBundleRequest, SendBundleResponse,
};
use bundle_relay_bench::searcher_grpc::searcher_service_server::{
    SearcherService, SearcherServiceServer,
};
use ed25519_dalek::{Signer, SigningKey};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::{Code, Request, Response, Status};

/// A signed legacy system-program transfer in Solana's wire format: compact-u16 signature
/// count, signature, header, account keys (payer, recipient, system program), recent blockhash,
/// one instruction (Transfer = 2u32, lamports u64).
pub fn transfer_tx(seed: u64, lamports: u64) -> Vec<u8> {
    let mut secret = [7u8; 32];
    secret[..8].copy_from_slice(&seed.to_le_bytes());
    let key = SigningKey::from_bytes(&secret);
    let mut to = [9u8; 32];
    to[..8].copy_from_slice(&seed.to_le_bytes());
    let mut blockhash = [3u8; 32];
    blockhash[..8].copy_from_slice(&seed.to_be_bytes());

    let mut msg = Vec::with_capacity(160);
    msg.extend_from_slice(&[1, 0, 1]); // 1 signer, 0 read-only signed, 1 read-only unsigned
    msg.push(3);
    msg.extend_from_slice(&key.verifying_key().to_bytes());
    msg.extend_from_slice(&to);
    msg.extend_from_slice(&[0u8; 32]); // system program id
    msg.extend_from_slice(&blockhash);
    msg.push(1); // one instruction
    msg.push(2); // program: account 2
    msg.extend_from_slice(&[2, 0, 1]); // accounts: from, to
    msg.push(12);
    msg.extend_from_slice(&2u32.to_le_bytes());
    msg.extend_from_slice(&lamports.to_le_bytes());

    let signature = key.sign(&msg).to_bytes();
    let mut tx = Vec::with_capacity(1 + 64 + msg.len());
    tx.push(1);
    tx.extend_from_slice(&signature);
    tx.extend_from_slice(&msg);
    tx
}

/// The base58 first signature of a wire transaction with one signature.
pub fn first_signature(tx: &[u8]) -> String {
    bs58::encode(&tx[1..65]).into_string()
}

/// A bundle of `n` transfers, distinct for every `(bundle, i)`.
pub fn bundle(bundle: u64, n: usize) -> Vec<Vec<u8>> {
    (0..n as u64)
        .map(|i| transfer_tx(bundle * 8 + i, 1000 + i))
        .collect()
}

pub fn send_bundle_body(id: u64, txs: &[Vec<u8>]) -> String {
    let encoded: Vec<String> = txs.iter().map(|t| bs58::encode(t).into_string()).collect();
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "sendBundle", "params": [encoded]})
        .to_string()
}

/// A response from the tiny HTTP client.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("response body is JSON")
    }
}

/// A keep-alive HTTP/1.1 client over one TCP connection; enough for Content-Length answers.
pub struct Http {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Http {
    pub async fn connect(addr: SocketAddr) -> Http {
        let stream = TcpStream::connect(addr).await.expect("connect to intake");
        stream.set_nodelay(true).expect("nodelay");
        Http {
            stream,
            buf: Vec::with_capacity(4096),
        }
    }

    pub async fn post(&mut self, path: &str, body: &str) -> HttpResponse {
        self.request("POST", path, body.as_bytes()).await
    }

    pub async fn get(&mut self, path: &str) -> HttpResponse {
        self.request("GET", path, b"").await
    }

    pub async fn request(&mut self, method: &str, path: &str, body: &[u8]) -> HttpResponse {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: relay\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let mut out = head.into_bytes();
        out.extend_from_slice(body);
        self.stream.write_all(&out).await.expect("write request");
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut parsed = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(head_len) =
                parsed.parse(&self.buf).expect("valid response head")
            {
                let status = parsed.code.expect("status code");
                let headers: Vec<(String, String)> = parsed
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_owned(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                let len: usize = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .map_or(0, |(_, v)| v.parse().expect("content-length"));
                while self.buf.len() < head_len + len {
                    self.fill().await;
                }
                let body = self.buf[head_len..head_len + len].to_vec();
                self.buf.drain(..head_len + len);
                return HttpResponse {
                    status,
                    headers,
                    body,
                };
            }
            self.fill().await;
        }
    }

    async fn fill(&mut self) {
        let mut chunk = [0u8; 4096];
        let n = self.stream.read(&mut chunk).await.expect("read response");
        assert!(n > 0, "connection closed mid-response");
        self.buf.extend_from_slice(&chunk[..n]);
    }
}

#[derive(Default)]
struct PairState {
    last_accept: Option<Instant>,
    cooldown_until: Option<Instant>,
    backoff_answered: Option<Instant>,
    requests: u64,
}

/// What one engine saw, shared by all its regions.
/// A delivered bundle as the engine saw it: region and packets (data, meta.size).
pub type Delivered = (usize, Vec<(Vec<u8>, u64)>);

#[derive(Default)]
pub struct EngineLog {
    pairs: HashMap<(IpAddr, usize), PairState>,
    /// Delivered bundles keyed by first signature: the region and the packets as received
    /// (data, meta.size).
    pub delivered: HashMap<String, Delivered>,
    /// Bundles delivered more than once.
    pub duplicates: u64,
    /// Requests that arrived before their pair's interval since its last accepted send passed:
    /// the relay booked that interval itself, so any such request is its fault.
    pub early: u64,
    /// Requests that arrived inside a cooldown, sent before the relay could have read the
    /// back-off (they crossed the answer on the wire); answered RESOURCE_EXHAUSTED.
    pub crossed_backoff: u64,
    /// Requests that arrived inside a cooldown long after the back-off was answered: the relay
    /// ignored a Retry-After it had.
    pub ignored_backoff: u64,
    /// Scheduled back-offs answered (RESOURCE_EXHAUSTED with a Retry-After).
    pub backoffs: u64,
    /// Every Retry-After answered, in ms, per region in answer order: what the relay's
    /// cooldowns must match.
    pub asked_ms: HashMap<usize, Vec<u64>>,
    /// Smallest gap seen between accepted sends of one pair.
    pub min_gap: Option<Duration>,
    /// Accepted sends per region.
    pub per_region: HashMap<usize, u64>,
    /// Bundles whose header was set (Jito's clients leave it empty).
    pub headers_set: u64,
    pub sources: std::collections::HashSet<IpAddr>,
}

/// How the test engine behaves.
#[derive(Clone, Copy)]
pub struct EngineRules {
    pub interval: Duration,
    /// Lateness forgiven when judging an early send: scheduling jitter between the relay's
    /// booking and the request's arrival on a loaded two-core machine.
    pub slack: Duration,
    /// A request arriving inside a cooldown later than this after the back-off was answered
    /// counts as ignoring it; earlier ones may have crossed the answer in flight.
    pub crossing: Duration,
    /// Every n-th request of a pair gets RESOURCE_EXHAUSTED with `backoff` (0: never).
    pub backoff_every: u64,
    pub backoff: Duration,
    /// Answer every request with this status instead (for rejection tests).
    pub reject_all: Option<Code>,
}

struct RegionEngine {
    region: usize,
    rules: EngineRules,
    log: Arc<Mutex<EngineLog>>,
}

#[tonic::async_trait]
impl SearcherService for RegionEngine {
    async fn send_bundle(
        &self,
        request: Request<SendBundleRequest>,
    ) -> Result<Response<SendBundleResponse>, Status> {
        let now = Instant::now();
        let source = request.remote_addr().expect("tcp connect info").ip();
        let bundle = request.into_inner().bundle.unwrap_or_default();
        if let Some(code) = self.rules.reject_all {
            return Err(Status::new(code, "bundle contains an expired blockhash"));
        }
        let mut log = self.log.lock().unwrap();
        log.sources.insert(source);
        let rules = self.rules;
        let pair = log.pairs.entry((source, self.region)).or_default();
        pair.requests += 1;
        if let Some(last) = pair.last_accept {
            if now + rules.slack < last + rules.interval {
                let retry_ms = (last + rules.interval - now).as_millis() as u64 + 1;
                log.early += 1;
                log.asked_ms.entry(self.region).or_default().push(retry_ms);
                return Err(Status::new(
                    Code::ResourceExhausted,
                    rate_limit_message(retry_ms),
                ));
            }
        }
        if let (Some(until), Some(answered)) = (pair.cooldown_until, pair.backoff_answered) {
            if now < until {
                let retry_ms = (until - now).as_millis() as u64 + 1;
                if now - answered > rules.crossing {
                    log.ignored_backoff += 1;
                } else {
                    log.crossed_backoff += 1;
                }
                log.asked_ms.entry(self.region).or_default().push(retry_ms);
                return Err(Status::new(
                    Code::ResourceExhausted,
                    rate_limit_message(retry_ms),
                ));
            }
        }
        if rules.backoff_every > 0 && pair.requests % rules.backoff_every == 0 {
            pair.cooldown_until = Some(now + rules.backoff);
            pair.backoff_answered = Some(now);
            log.backoffs += 1;
            let retry_ms = rules.backoff.as_millis() as u64;
            log.asked_ms.entry(self.region).or_default().push(retry_ms);
            return Err(Status::new(
                Code::ResourceExhausted,
                rate_limit_message(retry_ms),
            ));
        }
        let gap = pair.last_accept.map(|t| now - t);
        pair.last_accept = Some(now);
        if let Some(gap) = gap {
            log.min_gap = Some(log.min_gap.map_or(gap, |m| m.min(gap)));
        }
        *log.per_region.entry(self.region).or_default() += 1;
        if bundle.header.is_some() {
            log.headers_set += 1;
        }
        let packets: Vec<(Vec<u8>, u64)> = bundle
            .packets
            .into_iter()
            .map(|p| (p.data, p.meta.map_or(u64::MAX, |m| m.size)))
            .collect();
        let key = packets
            .first()
            .map_or(String::new(), |(d, _)| first_signature(d));
        if log.delivered.insert(key, (self.region, packets)).is_some() {
            log.duplicates += 1;
        }
        Ok(Response::new(SendBundleResponse { uuid: "ok".into() }))
    }

    async fn get_tip_accounts(
        &self,
        _: Request<GetTipAccountsRequest>,
    ) -> Result<Response<GetTipAccountsResponse>, Status> {
        Ok(Response::new(GetTipAccountsResponse::default()))
    }

    async fn get_next_scheduled_leader(
        &self,
        _: Request<NextScheduledLeaderRequest>,
    ) -> Result<Response<NextScheduledLeaderResponse>, Status> {
        Ok(Response::new(NextScheduledLeaderResponse::default()))
    }

    async fn get_regions(
        &self,
        _: Request<GetRegionsRequest>,
    ) -> Result<Response<GetRegionsResponse>, Status> {
        Ok(Response::new(GetRegionsResponse::default()))
    }
}

/// Starts one tonic server per region on 127.0.0.1 (any port); returns their addresses and the
/// shared log.
pub async fn start_engine(
    regions: usize,
    rules: EngineRules,
) -> (Vec<SocketAddr>, Arc<Mutex<EngineLog>>) {
    let log = Arc::new(Mutex::new(EngineLog::default()));
    let mut addrs = Vec::new();
    for region in 0..regions {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind engine");
        addrs.push(listener.local_addr().unwrap());
        let service = SearcherServiceServer::new(RegionEngine {
            region,
            rules,
            log: log.clone(),
        });
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await
                .expect("engine serves");
        });
    }
    (addrs, log)
}

/// Polls until `f` holds or the timeout passes; returns whether it held.
pub async fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    super::poll(timeout, Duration::from_millis(5), || f().then_some(()))
        .await
        .is_some()
}
