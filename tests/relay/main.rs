//! The relay layer's tests in one binary, driven without sockets: intake, dispatch, engine
//! answers, pair states, handoffs between threads, rotating bundles rerouted between regions,
//! tenants, reloads, tips, leaders and the ledger.
//! One module per subject. The counting allocator is this binary's (per thread: the handoff
//! module's steady-state check reads its own thread's count).

#[path = "../counting_alloc/mod.rs"]
mod counting_alloc;
#[path = "../dispatcher_support/mod.rs"]
mod dispatcher_support;
#[path = "../h2_support/mod.rs"]
mod h2_support;
#[path = "../intake_support/mod.rs"]
mod intake_support;
#[path = "../tls_support/mod.rs"]
mod tls_support;
#[path = "../wire_support/mod.rs"]
mod wire_support;

mod backlog;
mod drain;
mod engine_answers;
mod failing_pairs;
mod handoff;
mod intake;
mod leader;
mod ledger;
mod pair_states;
mod queries;
mod reload;
mod reroute;
mod retries;
mod tenants;
mod tips;
mod validation;
