//! Unit tests of the ledger, starting with the worked example (docs/scenarios.md) to the token.

use super::*;

fn tokens(n: u64) -> PerUnit<u64> {
    PerUnit {
        tokens: n,
        ..PerUnit::default()
    }
}

fn shares(efforts: &[(&str, u32)]) -> Vec<(String, u32)> {
    efforts.iter().map(|(id, e)| (id.to_string(), *e)).collect()
}

fn seed_ledger() -> (Ledger, Vec<LedgerMovement>) {
    let totals = PerUnit {
        tokens: 200_000,
        tool_calls: 100,
        wall_ms: 600_000,
        cost: 0,
    };
    Ledger::allocate(
        totals,
        &shares(&[("m1", 1), ("m2", 2), ("m3", 2), ("m4", 2)]),
        &LedgerPolicy::default(),
    )
    .unwrap()
}

fn alloc(ledger: &Ledger, id: &str) -> u64 {
    ledger.account(id, Unit::Tokens).unwrap().allocated
}

fn reserve(ledger: &Ledger) -> u64 {
    ledger.book(Unit::Tokens).reserve
}

fn kinds(movements: &[LedgerMovement], unit: Unit) -> Vec<(MovementKind, u64)> {
    movements
        .iter()
        .filter(|m| m.unit == unit)
        .map(|m| (m.kind, m.amount))
        .collect()
}

#[test]
fn the_seed_worked_example_reproduces_exactly() {
    let (mut ledger, mut log) = seed_ledger();
    assert_eq!(reserve(&ledger), 40_000);
    assert_eq!(alloc(&ledger, "m1"), 22_857);
    for id in ["m2", "m3", "m4"] {
        assert_eq!(alloc(&ledger, id), 45_714);
    }
    assert_eq!(ledger.book(Unit::Tokens).unallocated, 1);
    assert_eq!(
        kinds(&log, Unit::Tokens),
        vec![
            (MovementKind::Allocate, 40_000),
            (MovementKind::Allocate, 22_857),
            (MovementKind::Allocate, 45_714),
            (MovementKind::Allocate, 45_714),
            (MovementKind::Allocate, 45_714)
        ]
    );

    // m1 spends 9,000 and passes: 13,857 back to the reserve.
    let c = ledger.charge("m1", tokens(9_000)).unwrap();
    assert!(!c.is_exhausted());
    assert!((c.used.tokens - 9_000.0 / 22_857.0).abs() < 1e-12);
    log.extend(c.movements);
    let r = ledger.return_unspent("m1").unwrap();
    assert_eq!(
        kinds(&r, Unit::Tokens),
        vec![(MovementKind::Return, 13_857)]
    );
    log.extend(r);
    assert_eq!(reserve(&ledger), 53_857);

    // m2 and m3 spend 44,500 each and pass; 1,214 each returns.
    for id in ["m2", "m3"] {
        log.extend(ledger.charge(id, tokens(44_500)).unwrap().movements);
        log.extend(ledger.return_unspent(id).unwrap());
    }
    assert_eq!(reserve(&ledger), 53_857 + 2 * 1_214);

    // m4 spends 52,000 over three charges; only the deficit is granted.
    let mut granted = 0;
    for spend in [30_000, 15_000, 7_000] {
        let c = ledger.charge("m4", tokens(spend)).unwrap();
        assert!(!c.is_exhausted());
        granted += c
            .movements
            .iter()
            .filter(|m| m.kind == MovementKind::Grant)
            .map(|m| m.amount)
            .sum::<u64>();
        log.extend(c.movements);
    }
    assert_eq!(granted, 6_286);
    assert_eq!(ledger.account("m4", Unit::Tokens).unwrap().granted, 6_286);
    let r = ledger.return_unspent("m4").unwrap();
    assert!(
        kinds(&r, Unit::Tokens).is_empty(),
        "m4 used its whole allocation"
    );
    log.extend(r);
    assert_eq!(reserve(&ledger), 53_857 + 2 * 1_214 - 6_286);

    let book = ledger.book(Unit::Tokens);
    assert_eq!(book.spent(), 150_000);
    assert!(book.conserved());
    assert_eq!(
        Ledger::replay(
            PerUnit {
                tokens: 200_000,
                tool_calls: 100,
                wall_ms: 600_000,
                cost: 0,
            },
            &log
        )
        .unwrap(),
        ledger
    );
}

#[test]
fn every_unit_is_booked_separately() {
    let (mut ledger, _) = seed_ledger();
    // 100 tool calls: reserve 20, m1 11, others 22 each (80*2/7 = 22.85), remainder 3.
    assert_eq!(ledger.account("m1", Unit::ToolCalls).unwrap().allocated, 11);
    assert_eq!(ledger.account("m2", Unit::ToolCalls).unwrap().allocated, 22);
    assert_eq!(ledger.book(Unit::ToolCalls).unallocated, 3);
    let c = ledger
        .charge(
            "m1",
            PerUnit {
                tokens: 100,
                tool_calls: 12,
                wall_ms: 5,
                cost: 0,
            },
        )
        .unwrap();
    // Tool calls went over by one and drew a grant of one; tokens and time did not.
    assert_eq!(
        kinds(&c.movements, Unit::ToolCalls),
        vec![(MovementKind::Grant, 1), (MovementKind::Charge, 12)]
    );
    assert_eq!(
        kinds(&c.movements, Unit::Tokens),
        vec![(MovementKind::Charge, 100)]
    );
    assert_eq!(c.used.tool_calls, 1.0);
    assert_eq!(ledger.book(Unit::ToolCalls).reserve, 19);
    assert_eq!(ledger.book(Unit::Tokens).reserve, 40_000);
}

#[test]
fn used_crosses_eighty_percent_exactly_where_the_seed_says() {
    // The runner compares `used` with `pressure_frac` (0.8): m1's 22,857 is pressured at
    // 18,286 spent, not at 18,285.
    let (mut ledger, _) = seed_ledger();
    ledger.charge("m1", tokens(18_285)).unwrap();
    assert!(ledger.used("m1").unwrap().tokens < 0.8);
    ledger.charge("m1", tokens(1)).unwrap();
    assert!(ledger.used("m1").unwrap().tokens >= 0.8);
}

#[test]
fn an_empty_reserve_ends_in_budget_exhausted() {
    let totals = PerUnit {
        tokens: 1_000,
        tool_calls: 10,
        wall_ms: 1_000,
        cost: 0,
    };
    let (mut ledger, _) = Ledger::allocate(
        totals,
        &shares(&[("a", 1), ("b", 1)]),
        &LedgerPolicy::default(),
    )
    .unwrap();
    assert_eq!(alloc(&ledger, "a"), 400);
    assert_eq!(reserve(&ledger), 200);
    let c = ledger.charge("a", tokens(550)).unwrap();
    assert_eq!(
        kinds(&c.movements, Unit::Tokens),
        vec![(MovementKind::Grant, 150), (MovementKind::Charge, 550)]
    );
    assert!(!c.is_exhausted());
    let c = ledger.charge("a", tokens(100)).unwrap();
    // Only 50 left in the reserve: granted, and 50 uncovered.
    assert_eq!(
        kinds(&c.movements, Unit::Tokens),
        vec![(MovementKind::Grant, 50), (MovementKind::Charge, 100)]
    );
    assert_eq!(
        c.exhausted,
        vec![BudgetExhausted {
            milestone_id: Some("a".into()),
            unit: Unit::Tokens,
            overrun: 50
        }]
    );
    assert_eq!(reserve(&ledger), 0);
    let c = ledger.charge("a", tokens(10)).unwrap();
    assert_eq!(
        kinds(&c.movements, Unit::Tokens),
        vec![(MovementKind::Charge, 10)]
    );
    assert_eq!(c.exhausted[0].overrun, 60);
    assert!(ledger.book(Unit::Tokens).conserved());
    // A return from another milestone refills the reserve, and the next charge can draw on it.
    ledger.charge("b", tokens(100)).unwrap();
    ledger.return_unspent("b").unwrap();
    assert_eq!(reserve(&ledger), 300);
    let c = ledger.charge("a", tokens(1)).unwrap();
    assert_eq!(
        kinds(&c.movements, Unit::Tokens),
        vec![(MovementKind::Grant, 61), (MovementKind::Charge, 1)]
    );
    assert!(!c.is_exhausted());
}

#[test]
fn overhead_draws_on_the_reserve() {
    let (mut ledger, _) = seed_ledger();
    let c = ledger.charge_overhead(tokens(1_500)).unwrap();
    assert_eq!(
        c.movements,
        vec![LedgerMovement {
            milestone_id: None,
            kind: MovementKind::Charge,
            unit: Unit::Tokens,
            amount: 1_500
        }]
    );
    assert_eq!(reserve(&ledger), 38_500);
    let c = ledger.charge_overhead(tokens(40_000)).unwrap();
    assert_eq!(
        c.exhausted,
        vec![BudgetExhausted {
            milestone_id: None,
            unit: Unit::Tokens,
            overrun: 1_500
        }]
    );
    let book = ledger.book(Unit::Tokens);
    assert_eq!(
        (book.reserve, book.overhead_spent, book.overhead_drawn),
        (0, 41_500, 40_000)
    );
    assert!(book.conserved());
}

#[test]
fn rebalance_refunds_a_new_plan_version() {
    let (mut ledger, mut log) = seed_ledger();
    log.extend(ledger.charge("m1", tokens(9_000)).unwrap().movements);
    log.extend(ledger.return_unspent("m1").unwrap());
    log.extend(ledger.charge("m4", tokens(1_000)).unwrap().movements);
    // L3: m2..m4 are replaced by m5 (effort 1) and m6 (effort 3).
    let moves = ledger
        .rebalance(
            &["m2".into(), "m3".into(), "m4".into()],
            &shares(&[("m5", 1), ("m6", 3)]),
            &LedgerPolicy::default(),
        )
        .unwrap();
    log.extend(moves);
    // Reserve before the split: 53,857 + 45,714 * 2 + 44,714 = 189,999; 37,999 (20%) stays,
    // 152,000 is split 1:3.
    assert_eq!(alloc(&ledger, "m5"), 38_000);
    assert_eq!(alloc(&ledger, "m6"), 114_000);
    assert_eq!(reserve(&ledger), 37_999);
    assert_eq!(alloc(&ledger, "m4"), 1_000);
    assert!(ledger.book(Unit::Tokens).conserved());
    let totals = PerUnit {
        tokens: 200_000,
        tool_calls: 100,
        wall_ms: 600_000,
        cost: 0,
    };
    assert_eq!(Ledger::replay(totals, &log).unwrap(), ledger);
}

#[test]
fn bad_input_is_refused() {
    let totals = tokens(100);
    let policy = LedgerPolicy::default();
    assert_eq!(
        Ledger::allocate(totals, &[], &policy),
        Err(LedgerError::NoMilestones)
    );
    assert_eq!(
        Ledger::allocate(totals, &shares(&[("a", 1), ("a", 1)]), &policy),
        Err(LedgerError::DuplicateMilestone("a".into()))
    );
    assert_eq!(
        Ledger::allocate(totals, &shares(&[("a", 0)]), &policy),
        Err(LedgerError::ZeroEffort("a".into()))
    );
}

#[test]
fn bad_movements_are_refused() {
    let totals = tokens(100);
    let policy = LedgerPolicy::default();
    let (mut ledger, _) = Ledger::allocate(totals, &shares(&[("a", 1)]), &policy).unwrap();
    assert_eq!(
        ledger.charge("zz", tokens(1)),
        Err(LedgerError::UnknownMilestone("zz".into()))
    );
    let before = ledger.clone();
    let grab = LedgerMovement {
        milestone_id: Some("a".into()),
        kind: MovementKind::Grant,
        unit: Unit::Tokens,
        amount: 21,
    };
    assert!(matches!(
        ledger.apply(&grab),
        Err(LedgerError::Inconsistent(_))
    ));
    let back = LedgerMovement {
        kind: MovementKind::Return,
        amount: 81,
        ..grab.clone()
    };
    assert!(ledger.apply(&back).is_err());
    let orphan = LedgerMovement {
        milestone_id: None,
        ..grab
    };
    assert!(ledger.apply(&orphan).is_err());
    assert_eq!(ledger, before);
    assert!(
        Ledger::replay(
            tokens(10),
            &[LedgerMovement {
                milestone_id: None,
                kind: MovementKind::Allocate,
                unit: Unit::Tokens,
                amount: 11
            }]
        )
        .is_err()
    );
}

#[test]
fn failed_operations_leave_the_books_unchanged() {
    let totals = tokens(100);
    let policy = LedgerPolicy::default();
    let (mut ledger, _) = Ledger::allocate(totals, &shares(&[("a", 1)]), &policy).unwrap();
    // An operation that fails halfway leaves nothing applied: tokens would fit, tool calls
    // overflow.
    ledger
        .charge(
            "a",
            PerUnit {
                tool_calls: 1,
                ..PerUnit::default()
            },
        )
        .unwrap();
    let before = ledger.clone();
    let huge = PerUnit {
        tokens: 5,
        tool_calls: u64::MAX,
        wall_ms: 0,
        cost: 0,
    };
    assert!(matches!(
        ledger.charge("a", huge),
        Err(LedgerError::Inconsistent(_))
    ));
    assert_eq!(ledger, before);
    assert_eq!(
        ledger.rebalance(&["a".into()], &shares(&[("n", 0)]), &policy),
        Err(LedgerError::ZeroEffort("n".into()))
    );
    assert_eq!(
        ledger.rebalance(&["ghost".into()], &shares(&[("n", 1)]), &policy),
        Err(LedgerError::UnknownMilestone("ghost".into()))
    );
    assert_eq!(ledger, before);
}
