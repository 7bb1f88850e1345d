//! Configuration's tests in one binary: loading and its errors, and what a reload changes.

mod load;
mod reload_changes;
