//! Egress: the sockets upstream connections leave through, each bound to its own source
//! address so the block engine counts it as its own (source IP, region) pair.

pub mod socket;
