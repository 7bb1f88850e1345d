//! A tenant's global rate across relays: the arithmetic of leasing it from a shared store in
//! chunks. Sans-IO: [`Lease`] takes the second, the balance the reactors left and whether the
//! store answers, and says what to ask for; `serve/lease.rs` asks the store and publishes the
//! grant where the reactors take from it (`metrics::tenants::TenantStats::take_leased`).
//!
//! What it is NOT: the store's protocol (`serve/quota_store.rs`) nor the check on the request
//! path (`relay::tenancy`).

mod lease;

pub use lease::{LEASE_BYTES, Lease, Step, Terms, WINDOW_MS};
