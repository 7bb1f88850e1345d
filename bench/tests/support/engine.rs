//! bench-engine alone: real loopback sockets from chosen source addresses, tonic and raw h2
//! clients, and the wait an engine's rate-limit answer names.

use std::net::{IpAddr, SocketAddr};

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use tonic::transport::Channel;

use bundle_relay::jito::{RETRY_AFTER_PREFIX, rate_limit_message};
use bundle_relay::proto::searcher::SendBundleRequest;
use bundle_relay_bench::engine::{Engine, EngineConfig, EngineHandle, testkit};
use bundle_relay_bench::searcher_grpc::searcher_service_client::SearcherServiceClient;

pub type Client = SearcherServiceClient<Channel>;

pub async fn start(cfg: EngineConfig) -> EngineHandle {
    Engine::start(cfg).await.expect("engine starts")
}

pub fn addr_of(h: &EngineHandle, region: &str) -> SocketAddr {
    h.region_addrs()
        .into_iter()
        .find(|(n, _)| n == region)
        .expect("region exists")
        .1
}

/// A loopback source address 127.0.1.`n`.
pub fn src(n: u8) -> IpAddr {
    IpAddr::from([127, 0, 1, n])
}

/// A tonic client connected from `source` to `addr`.
pub async fn client(addr: SocketAddr, source: IpAddr) -> Client {
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .local_address(Some(source))
        .connect()
        .await
        .expect("connects");
    SearcherServiceClient::new(ch)
}

/// The wait in an engine's per-source rate-limit answer, which must be Jito's text to the letter.
pub fn retry_ms_of(message: &str) -> u64 {
    let ms = message
        .rsplit_once(RETRY_AFTER_PREFIX)
        .and_then(|(_, rest)| rest.strip_suffix("ms"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected message {message:?}"));
    assert_eq!(message, rate_limit_message(ms));
    ms
}

/// A valid bundle of `txs` signed transactions, distinct for each `n`.
pub fn bundle_txs(n: u64, txs: u8) -> Vec<Vec<u8>> {
    testkit::bench_bundle(&testkit::key(n), 0, n, txs, 250)
}

pub fn bundle(n: u64) -> SendBundleRequest {
    testkit::send_bundle_request(&bundle_txs(n, 2))
}

/// A raw h2 connection from `source`: the request handle and the connection driver's task.
pub async fn h2_connect(
    addr: SocketAddr,
    source: IpAddr,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(source, 0)).unwrap();
    let tcp = sock.connect(addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    (send, tokio::spawn(conn))
}

/// The outcome of one raw gRPC call: grpc-status, grpc-message (still percent-encoded) and the
/// response message bytes.
#[derive(Debug)]
pub struct RawReply {
    pub status: u32,
    pub message: String,
    pub body: Vec<u8>,
}

pub fn grpc_body(msg: &impl Message) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u8(0);
    b.put_u32(msg.encoded_len() as u32);
    msg.encode(&mut b).unwrap();
    b.freeze()
}

/// Sends one unary call on a raw h2 connection.
pub async fn h2_call(
    send: &mut h2::client::SendRequest<Bytes>,
    method: &str,
    body: Bytes,
) -> Result<RawReply, h2::Error> {
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("http://engine/searcher.SearcherService/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut ready = send.clone().ready().await?;
    let (resp, mut stream) = ready.send_request(req, false)?;
    stream.send_data(body, true)?;
    let resp = resp.await?;
    let header = |h: &http::HeaderMap, k: &str| h.get(k).map(|v| v.to_str().unwrap().to_string());
    let head = resp.headers().clone();
    if let Some(s) = header(&head, "grpc-status") {
        return Ok(RawReply {
            status: s.parse().unwrap(),
            message: header(&head, "grpc-message").unwrap_or_default(),
            body: Vec::new(),
        });
    }
    let mut recv = resp.into_body();
    let mut body = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        body.extend_from_slice(&chunk);
    }
    let trailers = recv.trailers().await?.unwrap_or_default();
    Ok(RawReply {
        status: header(&trailers, "grpc-status").unwrap().parse().unwrap(),
        message: header(&trailers, "grpc-message").unwrap_or_default(),
        body: body.get(5..).unwrap_or_default().to_vec(),
    })
}

/// One JSON-RPC POST over a fresh h2 connection from `from` (no token): HTTP status and parsed body.
pub async fn json_rpc(
    addr: SocketAddr,
    from: IpAddr,
    path: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    let (send, conn) = h2_connect(addr, from).await;
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("http://engine{path}"))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let mut ready = send.ready().await.unwrap();
    let (resp, mut stream) = ready.send_request(req, false).unwrap();
    stream
        .send_data(Bytes::from(body.to_string()), true)
        .unwrap();
    let resp = resp.await.unwrap();
    let status = resp.status().as_u16();
    assert_eq!(resp.headers()["content-type"], "application/json");
    let mut recv = resp.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.unwrap();
        let _ = recv.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    conn.abort();
    (status, serde_json::from_slice(&bytes).unwrap())
}
