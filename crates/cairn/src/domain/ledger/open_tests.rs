//! Unit tests of opening the books after pre-plan spend, and of uncovered spend.

use super::*;

fn tokens(n: u64) -> PerUnit<u64> {
    PerUnit {
        tokens: n,
        ..PerUnit::default()
    }
}

fn example_totals() -> PerUnit<u64> {
    PerUnit {
        tokens: 200_000,
        tool_calls: 100,
        wall_ms: 600_000,
        cost: 0,
    }
}

fn example_shares() -> Vec<(String, u32)> {
    [("m1", 1), ("m2", 2), ("m3", 2), ("m4", 2)]
        .iter()
        .map(|(id, e)| (id.to_string(), *e))
        .collect()
}

fn pre_plan(amount: u64) -> Vec<LedgerMovement> {
    vec![LedgerMovement {
        milestone_id: None,
        kind: MovementKind::Charge,
        unit: Unit::Tokens,
        amount,
    }]
}

#[test]
fn pre_plan_spend_is_drawn_from_the_reserve_after_the_example_allocation() {
    // The worked example's gate (300) and strategic call (1,500) come before the plan.
    let history = pre_plan(1_800);
    let (ledger, allocation) = Ledger::open(
        example_totals(),
        &history,
        &example_shares(),
        &LedgerPolicy::default(),
    )
    .unwrap();
    let (example, example_allocation) = Ledger::allocate(
        example_totals(),
        &example_shares(),
        &LedgerPolicy::default(),
    )
    .unwrap();
    assert_eq!(
        allocation, example_allocation,
        "the worked example's allocation, to the token"
    );
    let book = ledger.book(Unit::Tokens);
    assert_eq!(book.reserve, 40_000 - 1_800);
    assert_eq!((book.overhead_spent, book.overhead_drawn), (1_800, 1_800));
    assert_eq!(book.uncovered(), 0);
    assert!(book.conserved());
    for m in ["m1", "m2", "m3", "m4"] {
        assert_eq!(
            ledger.account(m, Unit::Tokens),
            example.account(m, Unit::Tokens)
        );
    }
    // Replaying the stored entries in their order (pre-plan charges first) gives the same books.
    let mut entries = history.clone();
    entries.extend(allocation);
    assert_eq!(Ledger::replay(example_totals(), &entries).unwrap(), ledger);
    // m1 spends 9,000 and returns 13,857: the reserve is 52,057 (53,857 less the 1,800).
    let mut ledger = ledger;
    ledger.charge("m1", tokens(9_000)).unwrap();
    ledger.return_unspent("m1").unwrap();
    assert_eq!(ledger.book(Unit::Tokens).reserve, 52_057);
}

#[test]
fn pre_plan_spend_beyond_the_reserve_share_is_allocated_before_the_split() {
    let (ledger, allocation) = Ledger::open(
        example_totals(),
        &pre_plan(50_000),
        &example_shares(),
        &LedgerPolicy::default(),
    )
    .unwrap();
    let reserve_allocated: u64 = allocation
        .iter()
        .filter(|m| m.unit == Unit::Tokens && m.milestone_id.is_none())
        .map(|m| m.amount)
        .sum();
    assert_eq!(reserve_allocated, 50_000);
    let book = ledger.book(Unit::Tokens);
    assert_eq!((book.reserve, book.uncovered()), (0, 0));
    // The rest, 150,000, split 1:2:2:2.
    assert_eq!(
        ledger.account("m1", Unit::Tokens).unwrap().allocated,
        21_428
    );
    assert!(book.conserved());
    assert!(book.spent() <= book.total);
}

#[test]
fn pre_plan_spend_beyond_the_budget_is_uncovered() {
    let (ledger, _) = Ledger::open(
        example_totals(),
        &pre_plan(250_000),
        &example_shares(),
        &LedgerPolicy::default(),
    )
    .unwrap();
    assert_eq!(ledger.uncovered(), Some(Unit::Tokens));
    assert_eq!(ledger.book(Unit::Tokens).uncovered(), 50_000);
    assert!(ledger.book(Unit::Tokens).conserved());
    let grant = LedgerMovement {
        milestone_id: Some("m1".into()),
        kind: MovementKind::Grant,
        unit: Unit::Tokens,
        amount: 1,
    };
    assert!(
        Ledger::open(
            example_totals(),
            &[grant],
            &example_shares(),
            &LedgerPolicy::default()
        )
        .is_err()
    );
}

#[test]
fn spend_is_everything_charged_dropped_milestones_included() {
    let (mut ledger, _) = Ledger::open(
        example_totals(),
        &pre_plan(1_800),
        &example_shares(),
        &LedgerPolicy::default(),
    )
    .unwrap();
    ledger.charge("m1", tokens(9_000)).unwrap();
    ledger.return_unspent("m1").unwrap();
    ledger.charge("m4", tokens(3_000)).unwrap();
    // L3 drops m2..m4 for m5.
    ledger
        .rebalance(
            &["m2".into(), "m3".into(), "m4".into()],
            &[("m5".into(), 1)],
            &LedgerPolicy::default(),
        )
        .unwrap();
    ledger.charge("m5", tokens(4_000)).unwrap();
    ledger.charge_overhead(tokens(400)).unwrap();
    assert_eq!(ledger.spent().tokens, 1_800 + 9_000 + 3_000 + 4_000 + 400);
    assert_eq!(ledger.spent_by("m4").unwrap().tokens, 3_000);
    assert_eq!(
        ledger.milestones().collect::<Vec<_>>(),
        ["m1", "m2", "m3", "m4", "m5"]
    );
    assert_eq!(ledger.uncovered(), None);
}

#[test]
fn fractions_are_exact() {
    let f = Fraction::from_f64(0.2);
    assert_eq!(f.of(200_000), 40_000);
    assert_eq!(f.of(7), 1);
    assert_eq!(Fraction::from_f64(f64::NAN).of(100), 0);
    assert_eq!(Fraction::from_f64(3.0).of(100), 100);
}

#[test]
fn stored_columns_parse_back() {
    let m = LedgerMovement::from_parts(Some("m1".into()), "grant", "wall_ms", 7).unwrap();
    assert_eq!(
        (m.kind, m.unit, m.amount),
        (MovementKind::Grant, Unit::WallMs, 7)
    );
    assert!(LedgerMovement::from_parts(None, "spend", "tokens", 1).is_err());
    assert!(LedgerMovement::from_parts(None, "charge", "gold", 1).is_err());
    assert!(LedgerMovement::from_parts(None, "charge", "tokens", -1).is_err());
    assert_eq!(
        serde_json::to_value(MovementKind::Return).unwrap(),
        "return"
    );
}

#[test]
fn money_without_a_cap_is_counted_but_never_allocated_or_exhausted() {
    let policy = LedgerPolicy::default();
    let (mut ledger, allocation) =
        Ledger::allocate(example_totals(), &example_shares(), &policy).unwrap();
    assert!(allocation.iter().all(|m| m.unit != Unit::Cost));
    let spend = PerUnit {
        tokens: 10,
        cost: 5_000_000,
        ..PerUnit::default()
    };
    let outcome = ledger.charge("m1", spend).unwrap();
    assert!(!outcome.is_exhausted());
    assert_eq!(*outcome.used.get(Unit::Cost), 0.0);
    ledger.charge_overhead(spend).unwrap();
    assert_eq!(ledger.book(Unit::Cost).spent(), 10_000_000);
    assert_eq!(ledger.spent_by("m1").unwrap().cost, 5_000_000);
    assert_eq!(ledger.uncovered(), None);
    assert_eq!(ledger.room(Some("m1")).cost, None);
    assert_eq!(
        ledger.return_unspent("m2").unwrap().len(),
        3,
        "three capped units"
    );

    // Capped, money is a unit like the others: 20% held back, the rest split by effort.
    let capped = PerUnit {
        cost: 1_000,
        ..example_totals()
    };
    let (mut ledger, _) = Ledger::allocate(capped, &example_shares(), &policy).unwrap();
    assert_eq!(ledger.book(Unit::Cost).reserve, 200);
    assert_eq!(ledger.room(Some("m1")).cost, Some(114 + 200));
    assert_eq!(ledger.room(None).cost, Some(200));
    let dear = PerUnit {
        cost: 400,
        ..PerUnit::default()
    };
    let outcome = ledger.charge("m1", dear).unwrap();
    assert_eq!(outcome.exhausted.first().map(|e| e.unit), Some(Unit::Cost));
    assert_eq!(ledger.uncovered(), Some(Unit::Cost));
}
