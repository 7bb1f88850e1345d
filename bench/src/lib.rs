//! The bench tools' shared code. Each tool is a module here with a thin binary in `src/bin/`,
//! so the integration tests can run engine, baseline and load in one process.

/// Generated tonic client and server for `searcher.SearcherService`.
pub mod searcher_grpc {
    #![allow(clippy::all, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/searcher.rs"));
}

pub mod baseline;
pub mod compare;
pub mod demo;
pub mod engine;
pub mod fds;
pub mod handoff;
pub mod load;
pub mod matrix;
pub mod null;
pub mod report;
pub mod sentlog;
pub mod socks5;
pub mod switch_cost;
pub mod tag;
pub mod txgen;
