//! The Jito searcher schema (packages `searcher`, `bundle`, `packet`, `shared`, and `auth` for
//! searcher authentication), generated at
//! build time from `proto/` by prost. The relay encodes `SendBundleRequest` by hand on the hot
//! path (see `grpc`); these types serve tests, the bench tools and the cold paths.

#![allow(clippy::all, missing_docs)]

pub mod shared {
    include!(concat!(env!("OUT_DIR"), "/shared.rs"));
}
pub mod packet {
    include!(concat!(env!("OUT_DIR"), "/packet.rs"));
}
pub mod bundle {
    include!(concat!(env!("OUT_DIR"), "/bundle.rs"));
}
pub mod searcher {
    include!(concat!(env!("OUT_DIR"), "/searcher.rs"));
}
pub mod auth {
    include!(concat!(env!("OUT_DIR"), "/auth.rs"));
}
