//! Generates the Jito searcher (and searcher auth) schema's message types from `proto/` with a pure-Rust
//! protobuf compiler (protox), so a fresh machine needs no system `protoc`.

fn main() {
    let files = [
        "proto/shared.proto",
        "proto/packet.proto",
        "proto/bundle.proto",
        "proto/searcher.proto",
        "proto/auth.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"]).expect("proto/ must compile");
    prost_build::Config::new()
        .compile_fds(fds)
        .expect("prost code generation");
}
