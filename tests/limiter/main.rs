//! The limiter's tests in one binary: its decision table, seeded properties, the simulation and
//! the ledger. One module per subject.

mod ledger;
mod props;
mod rules;
mod sim;
