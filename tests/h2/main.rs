//! The HTTP/2 and gRPC layer's tests in one binary: scripted connections, gRPC messages, HPACK's
//! RFC 7541 vectors, and the fuzz bodies as property tests. One module per subject.

mod fuzz_bodies;
mod grpc_messages;
mod hpack_rfc7541;
mod scripted;
