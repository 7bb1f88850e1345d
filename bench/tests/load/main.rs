//! bench-load's side in one binary: the open-loop generator, bench-null's answers, and txgen's
//! bundles. One module per subject.

mod null_responder;
mod open_loop;
mod txgen_bundles;

/// The `Content-Length` of an HTTP/1.1 answer's head (bench-null always sends one).
fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a Content-Length header")
        .parse()
        .expect("a decimal length")
}
