//! `bundle-relay hist`'s tests in one binary: the command line and the plots.

#[path = "../hist_support/mod.rs"]
mod hist_support;

mod cli;
mod plot;
