//! The baseline's intake: axum routers on the rotating and pinned ports (JSON-RPC on Jito's
//! paths, `/ping`) and the admin port (`GET /stats`), each listener with its backlog and
//! TCP_NODELAY. A request is decoded only after the in-flight cap admits it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt as _;
use bundle_relay::proto::bundle::Bundle;
use bundle_relay::proto::searcher::SendBundleRequest;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::relay::{InFlight, Shared, deliver};
use super::rpc::{self, RpcError, error_body, result_body};

/// Listen backlog of every intake socket: bursts of new bot connections queue in the kernel
/// instead of being refused.
const LISTEN_BACKLOG: u32 = 4096;
/// Largest request body accepted: five base58 transactions at 1683 chars plus JSON framing and
/// an options object fit in 16 KiB with room to spare.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Seconds a client is told to wait when the in-flight cap is reached (`Retry-After`).
const CAP_RETRY_AFTER_S: &str = "1";

#[derive(Clone)]
struct PortState {
    shared: Arc<Shared>,
    /// `None` for the rotating port.
    region: Option<usize>,
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn rpc_error(shared: &Shared, id: &str, error: &RpcError) -> Response {
    shared.count(|t| t.bad_requests += 1);
    json_response(StatusCode::OK, error_body(id, error))
}

/// Paths that carry JSON-RPC, old style (`bundles`, `transactions`) and one per method.
fn known_path(path: &str) -> bool {
    matches!(
        path,
        "/api/v1/bundles"
            | "/api/v1/transactions"
            | "/api/v1/sendBundle"
            | "/api/v1/sendTransaction"
            | "/api/v1/getTipAccounts"
            | "/api/v1/getBundleStatuses"
            | "/api/v1/getInflightBundleStatuses"
    )
}

async fn rpc_handler(
    State(st): State<PortState>,
    uri: Uri,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    if !known_path(uri.path()) {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    }
    let shared = &st.shared;
    let request = match rpc::parse_request(&body) {
        Ok(r) => r,
        Err((id, e)) => return rpc_error(shared, id, &e),
    };
    let id = request.id;
    let is_transaction = match request.method.as_ref() {
        "sendBundle" => false,
        "sendTransaction" => true,
        "getTipAccounts" => {
            return json_response(StatusCode::OK, result_body(id, rpc::tip_accounts_json()));
        }
        other => {
            let e = RpcError::new(
                rpc::code::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            );
            return rpc_error(shared, id, &e);
        }
    };
    // The cap is checked first so an overloaded relay refuses before spending CPU on decoding.
    let Ok(permit) = shared.permits.clone().try_acquire_owned() else {
        shared.count(|t| t.refused_cap += 1);
        let e = RpcError::new(
            rpc::code::RATE_LIMITED,
            format!(
                "in-flight cap reached: {} bundles in flight; retry after 1s",
                shared.max_in_flight
            ),
        );
        let mut response = json_response(StatusCode::TOO_MANY_REQUESTS, error_body(id, &e));
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_static(CAP_RETRY_AFTER_S),
        );
        return response;
    };
    let decoded = if is_transaction {
        rpc::decode_send_transaction(request.params)
    } else {
        rpc::decode_send_bundle(request.params)
    };
    let bundle = match decoded {
        Ok(b) => b,
        Err(e) => return rpc_error(shared, id, &e),
    };
    let admitted_ns = shared.now_ns();
    let guard = InFlight::admit(shared, permit);
    let send = SendBundleRequest {
        bundle: Some(Bundle {
            header: None,
            packets: bundle.packets,
        }),
    };
    tokio::spawn(deliver(shared.clone(), st.region, send, admitted_ns, guard));

    if !is_transaction {
        let result = format!("\"{}\"", bundle.bundle_id);
        return json_response(StatusCode::OK, result_body(id, &result));
    }
    let result = format!("\"{}\"", bundle.first_signature);
    let mut response = json_response(StatusCode::OK, result_body(id, &result));
    let bundle_only = query
        .as_deref()
        .is_some_and(|q| q.split('&').any(|kv| kv == "bundleOnly=true"));
    if bundle_only {
        if let Ok(v) = HeaderValue::from_str(&bundle.bundle_id) {
            response.headers_mut().insert("x-bundle-id", v);
        }
    }
    response
}

async fn ping() -> &'static str {
    "ok"
}

pub(super) async fn stats_handler(State(shared): State<Arc<Shared>>) -> Response {
    let body = serde_json::to_string(&shared.stats()).unwrap_or_default();
    json_response(StatusCode::OK, body)
}

pub(super) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

pub(super) fn intake_router(shared: &Arc<Shared>, region: Option<usize>) -> Router {
    Router::new()
        .route("/ping", get(ping))
        .route("/api/v1/{*rest}", post(rpc_handler))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(PortState {
            shared: shared.clone(),
            region,
        })
}

pub(super) fn serve(
    listener: TcpListener,
    router: Router,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let listener = listener.tap_io(|tcp| {
        // Bots send one small request and wait for the answer: Nagle would only add delay.
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await;
    })
}
