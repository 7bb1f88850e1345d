fn main() {
    println!("bundle-relay {}", env!("CARGO_PKG_VERSION"));
}
