//! The memory budget counts exactly what the arena and the limiter allocate.

use bundle_relay::arena::{Arena, SLOT_BYTES, TX_BYTES_PER_SLOT};
use bundle_relay::budget::{Budget, BudgetInputs};
use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::limiter::timers::PairTimers;
use bundle_relay::limiter::{Limiter, LimiterConfig};

#[test]
fn the_budget_terms_add_up_to_what_the_layers_allocate() {
    let inputs = BudgetInputs::with_default_intake(1_000, 64, 8, 1);
    let budget = Budget::new(inputs);
    let arena = Arena::new(1_000);
    let arena_terms: u64 = [
        "arena slot metadata",
        "arena frame bytes",
        "arena decode rooms",
    ]
    .iter()
    .map(|t| budget.term_bytes(t))
    .sum();
    assert_eq!(arena_terms, arena.allocated_bytes() as u64);
    // One thread: its slots, and one decode room whatever the slot count.
    assert_eq!(
        arena_terms,
        1_000 * SLOT_BYTES as u64 + TX_BYTES_PER_SLOT as u64
    );
    let limiter = Limiter::new(&LimiterConfig::uniform(TickRate::NANOS, 64, 8), Instant(0));
    let limiter_terms: u64 = [
        "limiter pair records",
        "limiter list heads",
        "limiter lane wheels",
    ]
    .iter()
    .map(|t| budget.term_bytes(t))
    .sum();
    assert_eq!(limiter_terms, limiter.allocated_bytes() as u64);
    assert!(budget.total_bytes() > arena_terms + limiter_terms);
    let timers = PairTimers::new(64 * 8, TickRate::NANOS, Instant(0));
    assert_eq!(
        budget.term_bytes("pair timers") + budget.term_bytes("pair timer lists"),
        timers.allocated_bytes() as u64
    );
}

#[test]
fn the_limiter_terms_count_a_lane_per_region_and_egress_group() {
    let inputs = BudgetInputs {
        egress_groups: 3,
        ..BudgetInputs::with_default_intake(1_000, 64, 8, 1)
    };
    let budget = Budget::new(inputs);
    let config = LimiterConfig {
        groups: vec![40, 16, 8],
        ..LimiterConfig::uniform(TickRate::NANOS, 64, 8)
    };
    let limiter = Limiter::new(&config, Instant(0));
    assert_eq!(limiter.lane_count(), 24);
    let limiter_terms: u64 = [
        "limiter pair records",
        "limiter list heads",
        "limiter lane wheels",
    ]
    .iter()
    .map(|t| budget.term_bytes(t))
    .sum();
    assert_eq!(limiter_terms, limiter.allocated_bytes() as u64);
    let one_group = Budget::new(BudgetInputs::with_default_intake(1_000, 64, 8, 1));
    assert_eq!(
        budget.term_bytes("lane FIFOs"),
        3 * one_group.term_bytes("lane FIFOs")
    );
}

/// With handoffs off no thread is handed bundles: the budget holds no handoff records for
/// it, and with them on, each thread's.
#[test]
fn handoff_records_are_budgeted_only_where_bundles_move_between_threads() {
    let on = Budget::new(BudgetInputs::with_default_intake(1_000, 64, 8, 2));
    let off = Budget::new(BudgetInputs {
        handoffs: false,
        ..BudgetInputs::with_default_intake(1_000, 64, 8, 2)
    });
    assert_eq!(
        on.term_bytes("handoff records"),
        2 * bundle_relay::relay::dispatch::handoff_allocation_bytes(2, 8) as u64
    );
    assert_eq!(off.term_bytes("handoff records"), 0);
}

/// Bytes allocated and not freed by this thread, to weigh what a constructor allocates.
mod weighing {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    struct Weighing;

    thread_local! {
        static LIVE: Cell<i64> = const { Cell::new(0) };
    }

    // SAFETY: every call goes to the system allocator unchanged; only a counter is added.
    unsafe impl GlobalAlloc for Weighing {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            LIVE.with(|n| n.set(n.get() + layout.size() as i64));
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            LIVE.with(|n| n.set(n.get() - layout.size() as i64));
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            LIVE.with(|n| n.set(n.get() + layout.size() as i64));
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            LIVE.with(|n| n.set(n.get() + new_size as i64 - layout.size() as i64));
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static GLOBAL: Weighing = Weighing;

    pub fn live() -> i64 {
        LIVE.with(Cell::get)
    }
}

#[test]
fn the_upstream_connection_term_is_what_a_relay_connection_allocates() {
    use bundle_relay::h2::conn::Connection;
    let cfg = bundle_relay::relay::upstream_h2_config();
    let before = weighing::live();
    let conn = Box::new(Connection::new(cfg.clone(), 0));
    let weighed = weighing::live() - before;
    drop(conn);
    assert_eq!(weighed as usize, Connection::allocation_bytes(&cfg));
    let budget = Budget::new(BudgetInputs::with_default_intake(1_000, 64, 8, 1));
    let pairs = 64 * 8;
    assert_eq!(
        budget.term_bytes("upstream h2 connections")
            + pairs * Connection::buffer_bytes(&cfg) as u64,
        pairs * weighed as u64,
        "a connection's record and its buffers"
    );
    assert_eq!(
        budget.term_bytes("upstream h2 buffers"),
        pairs * Connection::slab_bytes_per_connection(&cfg) as u64,
        "each pair's buffers in whole pages of its thread's slab"
    );
}

#[test]
fn a_thread_that_reserved_its_buffers_allocates_the_rest_of_each_connection() {
    use bundle_relay::h2::conn::Connection;
    let cfg = bundle_relay::relay::upstream_h2_config();
    let before = weighing::live();
    bundle_relay::h2::storage::reserve(2 * Connection::slab_bytes_per_connection(&cfg));
    let reserved = weighing::live() - before;
    let conns = [(); 2].map(|_| Box::new(Connection::new(cfg.clone(), 0)));
    let weighed = weighing::live() - before - reserved;
    drop(conns);
    bundle_relay::h2::storage::reserve(0);
    let budget = Budget::new(BudgetInputs::with_default_intake(1_000, 64, 8, 1));
    assert_eq!(
        reserved as u64,
        2 * budget.term_bytes("upstream h2 buffers") / (64 * 8)
            + budget.term_bytes("upstream h2 buffer slabs")
    );
    assert_eq!(
        weighed as u64,
        2 * budget.term_bytes("upstream h2 connections") / (64 * 8)
    );
}

#[test]
fn the_budget_prints_one_line_per_term_and_the_total() {
    let budget = Budget::new(BudgetInputs::with_default_intake(65_536, 4_096, 8, 16));
    let table = budget.to_string();
    println!("{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2 + budget.terms.len() + 1);
    for term in &budget.terms {
        assert!(table.contains(term.name));
        assert!(table.contains(&term.bytes().to_string()));
    }
    assert!(
        lines
            .last()
            .unwrap()
            .contains(&budget.total_bytes().to_string())
    );
}

/// `bundle-relay budget` for HARDWARE.md's example shape, as the command prints it:
/// (term, count, bytes each).
fn printed_budget() -> Vec<(String, u64, u64)> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bundle-relay"))
        .args(["budget", "--slots", "65536", "--addresses", "2048"])
        .args(["--regions", "8", "--threads", "16"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = f.len();
            let count = f.get(n.checked_sub(3)?)?.parse().ok()?;
            let each = f.get(n - 2)?.parse().ok()?;
            Some((f[..n - 3].join(" "), count, each))
        })
        .collect()
}

/// Digits grouped by thousands, as HARDWARE.md writes them.
fn grouped(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// HARDWARE.md's memory table quotes what `bundle-relay budget` prints for its example: the
/// bytes a pair, a TLS pair, an intake connection and a slot take, and the total.
#[test]
fn hardware_md_quotes_the_figures_the_budget_command_prints() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/HARDWARE.md")).unwrap();
    let terms = printed_budget();
    let pairs = 2048 * 8;
    let each = |name: &str| terms.iter().find(|t| t.0 == name).map(|t| t.2).unwrap();
    let total = |name: &str| {
        terms
            .iter()
            .find(|t| t.0 == name)
            .map(|t| t.1 * t.2)
            .unwrap()
    };
    // What each pair holds: every term counted per pair (not the TLS sessions, a term of their
    // own; not the intake's, which count connections), and its share of the pacing ledger.
    let per_pair: u64 = terms
        .iter()
        .filter(|t| t.1 == pairs && t.0 != "upstream TLS sessions" && !t.0.starts_with("intake"))
        .map(|t| t.2)
        .sum::<u64>()
        + total("pacing ledger") / pairs;
    let per_conn =
        each("intake records") + each("intake input buffers") + each("intake output buffers");
    let per_slot = each("arena slot metadata") + each("arena frame bytes");
    let all: u64 = terms.iter().map(|t| t.1 * t.2).sum();
    for quoted in [
        format!("{} B per pair |", grouped(per_pair)),
        format!("{} MiB |", grouped((per_pair * pairs) >> 20)),
        format!("{} B per pair |", grouped(each("upstream TLS sessions"))),
        format!("{} B per connection |", grouped(per_conn)),
        format!("{} B per slot |", grouped(per_slot)),
        format!("{} MiB |", grouped(all >> 20)),
        format!(
            "{} B / {} B (+{} B with TLS)",
            grouped(per_slot),
            grouped(per_pair),
            grouped(each("upstream TLS sessions"))
        ),
    ] {
        assert!(doc.contains(&quoted), "HARDWARE.md does not say {quoted:?}");
    }
}
