//! The bench tools' shared code. Each tool is a module here with a thin binary in `src/bin/`,
//! so the integration tests can run engine, baseline and load in one process.

/// Generated tonic client and server for `searcher.SearcherService`.
pub mod searcher_grpc {
    #![allow(clippy::all, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/searcher.rs"));
}

/// The allocator every bench binary names with `bundle_relay_bench::allocator!();`: the
/// system's, or mimalloc with `--features mimalloc` (measured against it in the README: no
/// gain). Only binaries name one, so the tests' counting allocators stay theirs.
#[macro_export]
macro_rules! allocator {
    () => {
        #[cfg(feature = "mimalloc")]
        #[global_allocator]
        static ALLOCATOR: $crate::MiMalloc = $crate::MiMalloc;
    };
}

#[cfg(feature = "mimalloc")]
#[doc(hidden)]
pub use mimalloc::MiMalloc;

pub mod affinity;
pub mod baseline;
pub mod compare;
pub mod demo;
pub mod engine;
pub mod fds;
pub mod handoff;
pub mod haproxy;
pub mod idle_cost;
pub mod load;
pub mod matrix;
pub mod null;
pub mod report;
pub mod sentlog;
pub mod socks5;
pub mod switch_cost;
pub mod tag;
pub mod txgen;
