//! gRPC service stubs for the bench tools (tonic), generated without a system `protoc`.
//! Message types are reused from `bundle_relay::proto`, so relay and bench share one schema.

fn main() {
    let files = [
        "../proto/shared.proto",
        "../proto/packet.proto",
        "../proto/bundle.proto",
        "../proto/searcher.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["../proto"]).expect("proto/ must compile");
    tonic_prost_build::configure()
        .extern_path(".shared", "::bundle_relay::proto::shared")
        .extern_path(".packet", "::bundle_relay::proto::packet")
        .extern_path(".bundle", "::bundle_relay::proto::bundle")
        .extern_path(".searcher", "::bundle_relay::proto::searcher")
        .compile_fds(fds)
        .expect("tonic code generation");
}
