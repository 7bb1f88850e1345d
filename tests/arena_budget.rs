//! The memory budget counts exactly what the arena and the limiter allocate.

use bundle_relay::arena::{Arena, SLOT_BYTES};
use bundle_relay::budget::{Budget, BudgetInputs};
use bundle_relay::clock::{Instant, TickRate};
use bundle_relay::limiter::{Limiter, LimiterConfig};

#[test]
fn the_budget_terms_add_up_to_what_the_layers_allocate() {
    let inputs = BudgetInputs {
        arena_slots: 1_000,
        addresses: 64,
        regions: 8,
        threads: 1,
    };
    let budget = Budget::new(inputs);
    let arena = Arena::new(1_000);
    let arena_terms: u64 = [
        "arena slot metadata",
        "arena transaction bytes",
        "arena frame bytes",
    ]
    .iter()
    .map(|t| budget.term_bytes(t))
    .sum();
    assert_eq!(arena_terms, arena.allocated_bytes() as u64);
    assert_eq!(arena_terms, 1_000 * SLOT_BYTES as u64);
    let limiter = Limiter::new(&LimiterConfig::uniform(TickRate::NANOS, 64, 8), Instant(0));
    let limiter_terms: u64 = [
        "limiter pair records",
        "limiter list heads",
        "limiter region wheels",
    ]
    .iter()
    .map(|t| budget.term_bytes(t))
    .sum();
    assert_eq!(limiter_terms, limiter.allocated_bytes() as u64);
    assert_eq!(budget.total_bytes(), arena_terms + limiter_terms);
}

#[test]
fn the_budget_prints_one_line_per_term_and_the_total() {
    let budget = Budget::new(BudgetInputs {
        arena_slots: 65_536,
        addresses: 4_096,
        regions: 8,
        threads: 16,
    });
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
