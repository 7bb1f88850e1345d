//! bench-load's side in one binary: the open-loop generator, bench-null's answers, and txgen's
//! bundles. One module per subject.

mod null_responder;
mod open_loop;
mod txgen_bundles;
