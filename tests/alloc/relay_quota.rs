//! A tenant's global rate on the request path: one compare-and-swap on what its relay holds on
//! lease, refused at zero, without allocating (a counting allocator watches), however many
//! threads take from one lease at once: never more admitted than leased.

use crate::counting_alloc;

use std::sync::Arc;

use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::config::{Config, Resolve, Shared};
use bundle_relay::relay::Port;
use bundle_relay::relay::tenancy::{Claim, Denied, Tenancy};
use counting_alloc::allocations;

const CONFIG: &str = r#"
threads = 1
arena_slots = 4096
[[region]]
name = "a"
host = "127.0.0.1"
port = 9
tls = false
[egress]
addresses = ["127.0.0.1"]
[admin]
listen = "off"
[quota]
redis = "127.0.0.1:6379"
[[tenant]]
name = "g"
keys = ["k"]
global_rate = 1000
"#;

fn shared() -> Shared {
    let cfg = Config::parse(CONFIG, "quota.toml", Resolve::Deferred).unwrap();
    Shared::new(cfg, None, Resolve::Deferred)
}

const CLAIM: Claim<'static> = Claim {
    key: Some(b"k"),
    ..Claim::LOOPBACK
};

#[test]
fn taking_from_a_lease_and_being_refused_at_zero_allocate_nothing() {
    let shared = shared();
    let snap = shared.load_full();
    let tenancy = Tenancy::new(
        snap.tenants.clone(),
        shared.tenant_stats().clone(),
        TickRate::NANOS,
    );
    let slot = snap.tenants.entries()[0].slot;
    let stats = shared.tenant_stats();
    stats.add_leased(slot, 300);
    let before = allocations();
    let (mut passed, mut refused) = (0, 0);
    for i in 0..1_000u64 {
        match tenancy.check(CLAIM, Port::Rotating, Instant(1_000 + i)) {
            Ok(pass) => {
                passed += 1;
                tenancy.release(&pass);
            }
            Err(Denied::Rate {
                limit: 1000,
                retry_after_ms,
                ..
            }) => {
                assert!((1..=1_000).contains(&retry_after_ms));
                refused += 1;
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(allocations() - before, 0);
    assert_eq!((passed, refused), (300, 700));
}

#[test]
fn threads_taking_from_one_lease_admit_exactly_what_was_leased() {
    let shared = Arc::new(shared());
    let snap = shared.load_full();
    let slot = snap.tenants.entries()[0].slot;
    shared.tenant_stats().add_leased(slot, 10_000);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (shared, table) = (shared.clone(), snap.tenants.clone());
            std::thread::spawn(move || {
                let t = Tenancy::new(table, shared.tenant_stats().clone(), TickRate::NANOS);
                let mut passed = 0u64;
                for i in 0..5_000u64 {
                    if let Ok(pass) = t.check(CLAIM, Port::Rotating, Instant(1_000 + i)) {
                        passed += 1;
                        t.release(&pass);
                    }
                }
                passed
            })
        })
        .collect();
    let passed: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(passed, 10_000);
    assert_eq!(shared.tenant_stats().leased(slot), 0);
}
