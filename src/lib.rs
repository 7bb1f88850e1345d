//! bundle-relay: accepts Jito's JSON-RPC, validates bundles, and relays them as gRPC
//! `SendBundle` to Jito's block engines through a paced pool of egress addresses.
//!
//! Modules follow the request path; see ARCHITECTURE.md.

pub mod admin;
pub mod arena;
pub mod budget;
pub mod bundle;
pub mod check_host;
pub mod clock;
pub mod config;
pub mod egress;
pub mod fuzz;
pub mod grpc;
pub mod h2;
pub mod hist;
pub mod http1;
pub mod jito;
pub mod journal;
pub mod jsonrpc;
pub mod limiter;
pub mod log;
pub mod mesh;
pub mod metrics;
pub mod notify;
pub mod probe;
pub mod proto;
pub mod quota;
pub mod reactor;
pub mod relay;
pub mod runtime;
pub mod serve;
pub mod tls;
pub mod wire;
