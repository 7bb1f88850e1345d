//! `bundle-relay hist`'s tests in one binary: the command line, the plots and reading damaged
//! logs.

#[path = "../hist_support/mod.rs"]
mod hist_support;

mod cli;
mod plot;
mod read;
