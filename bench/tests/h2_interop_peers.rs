//! The sans-IO HTTP/2 + gRPC client against real peers over loopback TCP: the `h2` crate's
//! server and a tonic SearcherService. Thousands of multiplexed calls with small windows on
//! both sides, so flow control is exercised in both directions.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bundle_relay::grpc::{self, CallConfig, Method, Outcome};
use bundle_relay::h2::conn::{Config, Connection, Event, StartError, StreamId};
use bundle_relay::proto::searcher;
use bundle_relay_bench::searcher_grpc::searcher_service_server::{
    SearcherService, SearcherServiceServer,
};
use prost::Message;
use rand::{Rng, SeedableRng, rngs::StdRng};
use tokio::io::Interest;
use tokio::net::{TcpListener, TcpStream};

/// Feeds a real socket to the sans-IO core.
struct Driver {
    conn: Connection,
    sock: TcpStream,
    start: Instant,
    buf: Vec<u8>,
}

impl Driver {
    async fn connect(addr: std::net::SocketAddr, cfg: Config) -> Driver {
        let sock = TcpStream::connect(addr).await.unwrap();
        sock.set_nodelay(true).unwrap();
        Driver {
            conn: Connection::new(cfg, 0),
            sock,
            start: Instant::now(),
            buf: vec![0; 64 * 1024],
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// One turn: write what is queued, read what arrived, fire timers.
    async fn turn(&mut self) {
        let want_write = !self.conn.poll_transmit().is_empty();
        let interest = if want_write {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        if let Ok(Ok(ready)) =
            tokio::time::timeout(Duration::from_millis(5), self.sock.ready(interest)).await
        {
            if want_write && ready.is_writable() {
                match self.sock.try_write(self.conn.poll_transmit()) {
                    Ok(n) => self.conn.advance_transmit(n),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => self.conn.handle_transport_closed(),
                }
            }
            if ready.is_readable() {
                match self.sock.try_read(&mut self.buf) {
                    Ok(0) => self.conn.handle_transport_closed(),
                    Ok(n) => {
                        let now = self.now();
                        self.conn.handle_bytes(now, &self.buf[..n]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => self.conn.handle_transport_closed(),
                }
            }
        }
        let now = self.now();
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
    }
}

fn call_cfg(addr: std::net::SocketAddr) -> CallConfig {
    CallConfig::new("http", addr.to_string())
}

fn random_txs(rng: &mut StdRng) -> Vec<Vec<u8>> {
    let n = rng.random_range(1..=5);
    (0..n)
        .map(|_| {
            let len = rng.random_range(100..=1232);
            (0..len).map(|_| rng.random()).collect()
        })
        .collect()
}

fn checksum(txs: &[Vec<u8>]) -> String {
    let sum: u32 = txs
        .iter()
        .flatten()
        .fold(0u32, |a, &b| a.wrapping_mul(31).wrapping_add(b as u32));
    format!(
        "{}:{}:{sum}",
        txs.len(),
        txs.iter().map(Vec::len).sum::<usize>()
    )
}

// ---- tonic ----

struct Engine;

const RATE_LIMIT_MARK: u8 = 0xee;
const INVALID_MARK: u8 = 0xdd;

#[tonic::async_trait]
impl SearcherService for Engine {
    async fn send_bundle(
        &self,
        request: tonic::Request<searcher::SendBundleRequest>,
    ) -> Result<tonic::Response<searcher::SendBundleResponse>, tonic::Status> {
        let bundle = request.into_inner().bundle.unwrap_or_default();
        let txs: Vec<Vec<u8>> = bundle.packets.iter().map(|p| p.data.clone()).collect();
        for (i, p) in bundle.packets.iter().enumerate() {
            if p.meta.as_ref().map(|m| m.size) != Some(p.data.len() as u64) {
                return Err(tonic::Status::invalid_argument(format!(
                    "packet {i}: meta.size differs from data"
                )));
            }
        }
        match txs[0][0] {
            RATE_LIMIT_MARK => Err(tonic::Status::resource_exhausted(
                bundle_relay::jito::rate_limit_message(1606),
            )),
            INVALID_MARK => Err(tonic::Status::invalid_argument(
                "bundle contains an expired blockhash",
            )),
            _ => Ok(tonic::Response::new(searcher::SendBundleResponse {
                uuid: checksum(&txs),
            })),
        }
    }

    async fn get_tip_accounts(
        &self,
        _: tonic::Request<searcher::GetTipAccountsRequest>,
    ) -> Result<tonic::Response<searcher::GetTipAccountsResponse>, tonic::Status> {
        let accounts = (0..8).map(|i| format!("tip-account-{i}")).collect();
        Ok(tonic::Response::new(searcher::GetTipAccountsResponse {
            accounts,
        }))
    }

    async fn get_next_scheduled_leader(
        &self,
        request: tonic::Request<searcher::NextScheduledLeaderRequest>,
    ) -> Result<tonic::Response<searcher::NextScheduledLeaderResponse>, tonic::Status> {
        let r = request.into_inner();
        Ok(tonic::Response::new(
            searcher::NextScheduledLeaderResponse {
                current_slot: 100,
                next_leader_slot: 104,
                next_leader_identity: "leader".into(),
                next_leader_region: r.regions.join(","),
            },
        ))
    }

    async fn get_regions(
        &self,
        _: tonic::Request<searcher::GetRegionsRequest>,
    ) -> Result<tonic::Response<searcher::GetRegionsResponse>, tonic::Status> {
        Ok(tonic::Response::new(searcher::GetRegionsResponse::default()))
    }
}

enum Expect {
    Bundle(String),
    RateLimited,
    Rejected,
    Tips,
    Leader,
}

/// Calls in total; each runs through a real tonic server.
const TONIC_CALLS: usize = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_multiplexed_calls_to_a_tonic_searcher_service() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            // Smaller than one SendBundle: our DATA must wait for WINDOW_UPDATEs.
            .initial_stream_window_size(1024)
            .initial_connection_window_size(4096)
            .max_concurrent_streams(8)
            .add_service(SearcherServiceServer::new(Engine))
            .serve_with_incoming(
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            ),
    );
    let cfg = Config {
        conn_window: 65_535,
        stream_window: 1024,
        ..Config::default()
    };
    let mut d = Driver::connect(addr, cfg).await;
    let call = call_cfg(addr);
    let mut rng = StdRng::seed_from_u64(42);
    let mut pending: HashMap<StreamId, Expect> = HashMap::new();
    let (mut started, mut done) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut max_in_flight = 0;
    while done < TONIC_CALLS {
        assert!(
            Instant::now() < deadline,
            "stalled at {done} of {TONIC_CALLS}"
        );
        while started < TONIC_CALLS && d.conn.is_ready() && d.conn.can_start() {
            let now = d.now();
            let kind = rng.random_range(0..10);
            let (result, expect) = match kind {
                0 => (
                    grpc::start_call(
                        &mut d.conn,
                        &call,
                        now,
                        Method::GetTipAccounts,
                        Some(10_000),
                        |_| Some(0),
                    ),
                    Expect::Tips,
                ),
                1 => {
                    let m = searcher::NextScheduledLeaderRequest {
                        regions: vec!["ny".into(), "tokyo".into()],
                    };
                    (
                        grpc::start_call(
                            &mut d.conn,
                            &call,
                            now,
                            Method::GetNextScheduledLeader,
                            Some(10_000),
                            |b| grpc::encode_prost(&m, b),
                        ),
                        Expect::Leader,
                    )
                }
                _ => {
                    let mut txs = random_txs(&mut rng);
                    let expect = match kind {
                        2 => {
                            txs[0][0] = RATE_LIMIT_MARK;
                            Expect::RateLimited
                        }
                        3 => {
                            txs[0][0] = INVALID_MARK;
                            Expect::Rejected
                        }
                        _ => {
                            txs[0][0] = 0;
                            Expect::Bundle(checksum(&txs))
                        }
                    };
                    (
                        grpc::start_call(
                            &mut d.conn,
                            &call,
                            now,
                            Method::SendBundle,
                            Some(10_000),
                            |b| grpc::encode_send_bundle(txs.iter().map(|t| t.as_slice()), b),
                        ),
                        expect,
                    )
                }
            };
            match result {
                Ok(id) => {
                    pending.insert(id, expect);
                    started += 1;
                }
                Err(StartError::TransmitFull) => break,
                Err(e) => panic!("start: {e:?}"),
            }
        }
        max_in_flight = max_in_flight.max(d.conn.active_streams());
        d.turn().await;
        while let Some(ev) = d.conn.poll_event() {
            match ev {
                Event::StreamEnded(id) => {
                    let resp = d.conn.response(id).unwrap();
                    let outcome = grpc::outcome(&resp, 1000);
                    match (pending.remove(&id).unwrap(), outcome) {
                        (Expect::Bundle(want), Outcome::Ok(msg)) => {
                            assert_eq!(grpc::send_bundle_uuid(msg), Some(want.as_str()))
                        }
                        (Expect::RateLimited, Outcome::RateLimited { retry_after_ms }) => {
                            assert_eq!(retry_after_ms, 1606)
                        }
                        (Expect::Rejected, Outcome::Rejected { code, message }) => {
                            assert_eq!(code, grpc::Code::INVALID_ARGUMENT);
                            assert_eq!(message.to_string(), "bundle contains an expired blockhash");
                        }
                        (Expect::Tips, Outcome::Ok(msg)) => {
                            assert_eq!(
                                searcher::GetTipAccountsResponse::decode(msg)
                                    .unwrap()
                                    .accounts
                                    .len(),
                                8
                            )
                        }
                        (Expect::Leader, Outcome::Ok(msg)) => assert_eq!(
                            searcher::NextScheduledLeaderResponse::decode(msg)
                                .unwrap()
                                .next_leader_region,
                            "ny,tokyo"
                        ),
                        (_, other) => panic!("stream {id:?}: unexpected {other:?}"),
                    }
                    d.conn.release(id);
                    done += 1;
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
    }
    // The server's MAX_CONCURRENT_STREAMS was honoured and used.
    assert!(
        (2..=8).contains(&max_in_flight),
        "in flight at most {max_in_flight}"
    );
    d.conn.close();
    server.abort();
}

// ---- h2 ----

/// Echo server: the reply's gRPC message is the request's, sent back through our small window.
async fn h2_echo_server(listener: TcpListener) {
    loop {
        let (sock, _) = listener.accept().await.unwrap();
        sock.set_nodelay(true).unwrap();
        tokio::spawn(async move {
            let mut conn = h2::server::Builder::new()
                .initial_window_size(100)
                .initial_connection_window_size(1000)
                .max_concurrent_streams(4)
                .handshake::<_, bytes::Bytes>(sock)
                .await
                .unwrap();
            while let Some(req) = conn.accept().await {
                let (req, mut respond) = req.unwrap();
                tokio::spawn(async move {
                    let mut body = req.into_body();
                    let mut all = Vec::new();
                    while let Some(chunk) = body.data().await {
                        let chunk = chunk.unwrap();
                        body.flow_control().release_capacity(chunk.len()).unwrap();
                        all.extend_from_slice(&chunk);
                    }
                    let head = http::Response::builder()
                        .status(200)
                        .header("content-type", "application/grpc")
                        .body(())
                        .unwrap();
                    let mut send = respond.send_response(head, false).unwrap();
                    send.send_data(bytes::Bytes::from(all), false).unwrap();
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                    send.send_trailers(trailers).unwrap();
                });
            }
        });
    }
}

const H2_CALLS: usize = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_echo_calls_to_an_h2_server_through_tiny_windows() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(h2_echo_server(listener));
    // Our stream window is smaller than most replies: the server must wait for our updates.
    let cfg = Config {
        conn_window: 65_535,
        stream_window: 512,
        ..Config::default()
    };
    let mut d = Driver::connect(addr, cfg).await;
    let call = call_cfg(addr);
    let mut rng = StdRng::seed_from_u64(7);
    let mut pending: HashMap<StreamId, Vec<u8>> = HashMap::new();
    let (mut started, mut done) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while done < H2_CALLS {
        assert!(Instant::now() < deadline, "stalled at {done} of {H2_CALLS}");
        while started < H2_CALLS && d.conn.is_ready() && d.conn.can_start() {
            let txs = random_txs(&mut rng);
            let mut msg = vec![0; 8192];
            let n = grpc::encode_send_bundle(txs.iter().map(|t| t.as_slice()), &mut msg).unwrap();
            msg.truncate(n);
            let now = d.now();
            match grpc::start_call(
                &mut d.conn,
                &call,
                now,
                Method::SendBundle,
                Some(10_000),
                |b| {
                    b[..n].copy_from_slice(&msg);
                    Some(n)
                },
            ) {
                Ok(id) => {
                    pending.insert(id, msg);
                    started += 1;
                }
                Err(StartError::TransmitFull) => break,
                Err(e) => panic!("start: {e:?}"),
            }
        }
        assert!(d.conn.active_streams() <= 4);
        d.turn().await;
        while let Some(ev) = d.conn.poll_event() {
            let Event::StreamEnded(id) = ev else {
                panic!("unexpected event {ev:?}")
            };
            let want = pending.remove(&id).unwrap();
            match grpc::outcome(&d.conn.response(id).unwrap(), 1000) {
                Outcome::Ok(msg) => assert_eq!(msg, want.as_slice()),
                other => panic!("stream {id:?}: {other:?}"),
            }
            d.conn.release(id);
            done += 1;
        }
    }
    d.conn.close();
    server.abort();
}
