//! Property tests of the pure domain: random DAGs against plan validation, random operation
//! sequences against the ledger's conservation, replay and grant rules, and fingerprints
//! against cosmetic rewrites.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use cairn::domain::ledger::{Ledger, LedgerMovement, LedgerPolicy, MovementKind, PerUnit, Unit};
use cairn::domain::plan::check::Check;
use cairn::domain::plan::error::PlanError;
use cairn::domain::plan::fingerprint;
use cairn::domain::plan::known::KnownTools;
use cairn::domain::plan::validate::validate;
use cairn::domain::plan::{Milestone, MilestoneStatus, Plan, Step, StepStatus};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn milestone(i: usize, deps: Vec<usize>) -> Milestone {
    Milestone {
        id: format!("m{i}"),
        title: format!("milestone {i}"),
        depends_on: deps.into_iter().map(|d| format!("m{d}")).collect(),
        effort: 1 + (i as u32 % 3),
        tools: vec!["search".into()],
        outcome: None,
        accept: Check::Artifact {
            name: format!("a{i}"),
            non_empty: true,
        },
        status: MilestoneStatus::Pending,
        steps: vec![],
    }
}

/// A random DAG: milestone `i` may depend only on milestones before it.
fn dag() -> impl Strategy<Value = Plan> {
    (1usize..16).prop_flat_map(|n| {
        proptest::collection::vec(
            proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
            n,
        )
        .prop_map(move |picks| {
            let milestones = picks
                .into_iter()
                .enumerate()
                .map(|(i, idx)| {
                    let mut deps: Vec<usize> = if i == 0 {
                        vec![]
                    } else {
                        idx.iter().map(|x| x.index(i)).collect()
                    };
                    deps.sort();
                    deps.dedup();
                    milestone(i, deps)
                })
                .collect();
            Plan { milestones }
        })
    })
}

fn tools() -> KnownTools {
    KnownTools::new(["search"])
}

proptest! {
    #[test]
    fn random_dags_validate_and_order_topologically(plan in dag()) {
        prop_assert_eq!(validate(&plan, &tools()), Ok(()));
        let order = plan.topological_order().expect("a DAG has an order");
        prop_assert_eq!(order.len(), plan.milestones.len());
        let pos = |id: &str| order.iter().position(|o| *o == id).unwrap();
        for m in &plan.milestones {
            for d in &m.depends_on {
                prop_assert!(pos(d) < pos(&m.id));
            }
        }
        // Only dependency-free milestones are ready at the start.
        for m in plan.ready() {
            prop_assert!(m.depends_on.is_empty());
        }
    }

    #[test]
    fn a_back_edge_is_always_reported_as_a_cycle(plan in dag(), pick in any::<prop::sample::Index>()) {
        let edges: Vec<(usize, usize)> = plan.milestones.iter().enumerate()
            .flat_map(|(i, m)| m.depends_on.iter().map(move |d| (i, d[1..].parse::<usize>().unwrap())))
            .collect();
        prop_assume!(!edges.is_empty());
        let (from, to) = edges[pick.index(edges.len())];
        let mut cyclic = plan.clone();
        // `from` depends on `to`; making `to` depend on `from` closes a cycle.
        cyclic.milestones[to].depends_on.push(format!("m{from}"));
        let errors = validate(&cyclic, &tools()).unwrap_err();
        let cycle = errors.iter().find_map(|e| match e { PlanError::Cycle { path } => Some(path.clone()), _ => None });
        let path = cycle.expect("the cycle is reported");
        prop_assert_eq!(path.first(), path.last());
        // Each milestone on the path really depends on the next one.
        for pair in path.windows(2) {
            let m = cyclic.milestone(&pair[0]).unwrap();
            prop_assert!(m.depends_on.contains(&pair[1]));
        }
        prop_assert!(cyclic.topological_order().is_none());
    }
}

#[derive(Debug, Clone)]
enum Op {
    Charge {
        pick: prop::sample::Index,
        usage: PerUnit<u64>,
    },
    Overhead(PerUnit<u64>),
    Pass {
        pick: prop::sample::Index,
    },
    /// An L3 plan version: release some accounts, fund new milestones with these efforts.
    Rebalance {
        release: Vec<prop::sample::Index>,
        efforts: Vec<u32>,
    },
}

fn usage() -> impl Strategy<Value = PerUnit<u64>> {
    (0u64..30_000, 0u64..12, 0u64..40_000, 0u64..60_000).prop_map(
        |(tokens, tool_calls, wall_ms, cost)| PerUnit {
            tokens,
            tool_calls,
            wall_ms,
            cost,
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    let index = any::<prop::sample::Index>;
    prop_oneof![
        12 => (index(), usage()).prop_map(|(pick, usage)| Op::Charge { pick, usage }),
        2 => usage().prop_map(Op::Overhead),
        4 => index().prop_map(|pick| Op::Pass { pick }),
        1 => (proptest::collection::vec(index(), 0..4), proptest::collection::vec(1u32..10, 1..4))
            .prop_map(|(release, efforts)| Op::Rebalance { release, efforts }),
    ]
}

/// Money is capped or not (a total of 0: counted, never allocated or exhausted).
fn totals() -> impl Strategy<Value = PerUnit<u64>> {
    let cost = prop_oneof![Just(0u64), 1u64..2_000_000];
    (1u64..1_000_000, 1u64..200, 1u64..3_600_000, cost).prop_map(
        |(tokens, tool_calls, wall_ms, cost)| PerUnit {
            tokens,
            tool_calls,
            wall_ms,
            cost,
        },
    )
}

proptest! {
    #[test]
    fn ledgers_conserve_replay_and_never_overdraw_the_reserve(
        totals in totals(),
        efforts in proptest::collection::vec(1u32..10, 1..8),
        reserve_pct in 0u32..=50,
        pre_plan in proptest::collection::vec(usage(), 0..3),
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        let policy = LedgerPolicy { reserve: cairn::domain::ledger::Fraction::from_f64(f64::from(reserve_pct) / 100.0) };
        let shares: Vec<(String, u32)> = efforts.iter().enumerate().map(|(i, e)| (format!("m{i}"), *e)).collect();
        // Spend before the plan (gate, strategic calls), stored before the allocation.
        let mut log: Vec<LedgerMovement> = pre_plan.iter().flat_map(|usage| Unit::ALL.into_iter().map(|unit| LedgerMovement {
            milestone_id: None, kind: MovementKind::Charge, unit, amount: *usage.get(unit),
        })).filter(|m| m.amount > 0).collect();
        let (mut ledger, allocation) = Ledger::open(totals, &log, &shares, &policy).unwrap();
        let (plain, plain_allocation) = Ledger::allocate(totals, &shares, &policy).unwrap();
        // Whether some spend was reported as not covered (the engine then stops the task).
        let mut reported = PerUnit::<bool>::default();
        for unit in Unit::ALL {
            let book = ledger.book(unit);
            let share = *totals.get(unit) * u64::from(reserve_pct) / 100;
            prop_assert_eq!(plain.book(unit).reserve, share);
            // The rounding remainder is less than one unit per milestone.
            prop_assert!(plain.book(unit).unallocated < shares.len() as u64);
            let owed: u64 = log.iter().filter(|m| m.unit == unit).map(|m| m.amount).sum();
            if owed <= share {
                // Pre-plan spend within the reserve's share: the plain allocation, less it.
                prop_assert_eq!(book.reserve, share - owed);
                prop_assert_eq!(allocation.iter().filter(|m| m.unit == unit).collect::<Vec<_>>(), plain_allocation.iter().filter(|m| m.unit == unit).collect::<Vec<_>>());
            }
            *reported.get_mut(unit) = book.capped() && owed > book.total;
            let uncovered = if book.capped() { owed.saturating_sub(book.total) } else { 0 };
            prop_assert_eq!(book.uncovered(), uncovered);
        }
        log.extend(allocation);
        for (step, op) in ops.into_iter().enumerate() {
            let before = ledger.clone();
            let ids: Vec<String> = ledger.book(Unit::Tokens).accounts.keys().cloned().collect();
            let mut charged_milestone = None;
            let movements: Vec<LedgerMovement> = match op {
                Op::Charge { pick, usage } => {
                    let id = pick.get(&ids).clone();
                    let outcome = ledger.charge(&id, usage).unwrap();
                    let over = |u: Unit| ledger.book(u).capped() && ledger.account(&id, u).unwrap().overrun() > 0;
                    prop_assert_eq!(outcome.is_exhausted(), Unit::ALL.iter().any(|u| *usage.get(*u) > 0 && over(*u)));
                    for e in &outcome.exhausted {
                        *reported.get_mut(e.unit) = true;
                    }
                    charged_milestone = Some(id);
                    outcome.movements
                }
                Op::Overhead(usage) => {
                    let outcome = ledger.charge_overhead(usage).unwrap();
                    for e in &outcome.exhausted {
                        *reported.get_mut(e.unit) = true;
                    }
                    outcome.movements
                }
                Op::Pass { pick } => ledger.return_unspent(pick.get(&ids).as_str()).unwrap(),
                Op::Rebalance { release, efforts } => {
                    let mut release: Vec<String> = release.iter().map(|i| i.get(&ids).clone()).collect();
                    release.sort();
                    release.dedup();
                    let shares: Vec<(String, u32)> = efforts.iter().enumerate().map(|(j, e)| (format!("r{step}_{j}"), *e)).collect();
                    ledger.rebalance(&release, &shares, &policy).unwrap()
                }
            };
            for unit in Unit::ALL {
                let of = |kind| -> u64 { movements.iter().filter(|m| m.unit == unit && m.kind == kind).map(|m| m.amount).sum() };
                let (granted, returned, charged) = (of(MovementKind::Grant), of(MovementKind::Return), of(MovementKind::Charge));
                prop_assert!(granted <= before.book(unit).reserve + returned, "grants never exceed the reserve");
                prop_assert_eq!(ledger.book(unit).spent(), before.book(unit).spent() + charged);
                let book = ledger.book(unit);
                prop_assert!(book.conserved(), "total = reserve + allocations + unallocated + overhead drawn");
                prop_assert_eq!(book.total, *totals.get(unit));
                // A charge leaves its milestone over its allocation only when the reserve is dry.
                if let Some(id) = &charged_milestone
                    && charged > 0
                    && book.accounts[id].overrun() > 0
                {
                    prop_assert_eq!(book.reserve, 0);
                }
            }
            log.extend(movements);
            prop_assert_eq!(&Ledger::replay(totals, &log).unwrap(), &ledger);
            for unit in Unit::ALL {
                let book = ledger.book(unit);
                // The books never account more than the budget: whatever is spent beyond it
                // is uncovered, and uncovered spend was reported when it was charged.
                if !book.capped() {
                    // Uncapped money: counted, nothing held back, nothing ever uncovered.
                    prop_assert_eq!((book.reserve, book.uncovered()), (0, 0));
                    let charges: u64 = log.iter().filter(|m| m.unit == unit && m.kind == MovementKind::Charge).map(|m| m.amount).sum();
                    prop_assert_eq!(book.spent(), charges);
                    continue;
                }
                prop_assert!(book.spent() - book.uncovered() <= book.total);
                if book.uncovered() > 0 {
                    prop_assert!(*reported.get(unit), "uncovered spend was never reported");
                } else {
                    prop_assert!(book.spent() <= book.total);
                }
                // What a result reports as spend (every charge on the books) is the sum of the
                // charge entries.
                let charges: u64 = log.iter().filter(|m| m.unit == unit && m.kind == MovementKind::Charge).map(|m| m.amount).sum();
                prop_assert_eq!(*ledger.spent().get(unit), charges);
                prop_assert_eq!(book.spent(), charges);
            }
        }
    }
}

/// Rebuilds a JSON value with every object's keys in reverse order.
fn reorder(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            keys.reverse();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), reorder(&map[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(reorder).collect()),
        other => other.clone(),
    }
}

fn args() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z ]{0,8}".prop_map(|s| json!(s)),
        any::<bool>().prop_map(|b| json!(b)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .prop_map(|v| {
        if v.is_object() {
            v
        } else {
            json!({ "value": v })
        }
    })
}

proptest! {
    #[test]
    fn fingerprints_ignore_key_order_ids_and_formatting(list in proptest::collection::vec(("[a-z_]{1,8}", args()), 0..6)) {
        let steps = |ids: &str, reordered: bool| -> Vec<Step> {
            list.iter().enumerate().map(|(i, (tool, a))| {
                // Round trip through pretty-printed text to change formatting as well.
                let a = if reordered { serde_json::from_str(&serde_json::to_string_pretty(&reorder(a)).unwrap()).unwrap() } else { a.clone() };
                Step { id: format!("{ids}{i}"), tool: tool.clone(), args: a, expected_output: ids.into(), status: StepStatus::Pending, attempt: 0 }
            }).collect()
        };
        prop_assert_eq!(fingerprint::of_steps(&steps("s", false)), fingerprint::of_steps(&steps("x.", true)));
        if !list.is_empty() {
            let mut changed = steps("s", false);
            changed[0].tool.push('x');
            prop_assert_ne!(fingerprint::of_steps(&changed), fingerprint::of_steps(&steps("s", false)));
        }
    }
}

/// Any JSON value, biased towards plan-like objects.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "(m[0-9]|search|run|artifact|schema|command|verifier|all|[a-z]{0,6})"
            .prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        let keys = "(id|title|depends_on|effort|tools|accept|type|name|checks|prompt|tool|args|exit_code|schema|artifact|milestones|status|steps)";
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(keys, inner, 0..7)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    // Broad inputs are slow to generate; fewer cases keep the suite quick on a shared machine.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_planner_output_never_panics_and_errors_stay_bounded(
        milestones in proptest::collection::vec(any_json(), 0..6),
        raw in any_json(),
    ) {
        let tools = KnownTools::new(["search", "run"]);
        for value in [json!({ "milestones": milestones }), raw] {
            match Plan::from_value(&value, 5) {
                Ok(plan) => {
                    if let Err(errors) = validate(&plan, &tools) {
                        prop_assert!(!errors.is_empty() && errors.len() <= 10);
                        for e in &errors {
                            prop_assert!(e.to_string().len() < 2_000);
                        }
                    }
                    let _ = plan.topological_order();
                    let _ = fingerprint::of_plan(&plan);
                }
                Err(errors) => prop_assert!(!errors.is_empty() && errors.len() <= 5),
            }
        }
    }

    #[test]
    fn the_gate_heuristic_never_panics(goal in prop_oneof!["[a-zA-Z0-9 ,.&?/_-]{0,160}", "\\PC{0,40}"], tool in "[a-z_]{0,6}") {
        let f = cairn::domain::gate::heuristic_features(&goal, &[tool.as_str()]);
        prop_assert!(f.targets >= 1 && f.est_tool_calls <= 100);
        // Alone (no model estimate), the heuristic never claims a goal needs no tool call.
        let alone = cairn::domain::gate::combine(None, &f);
        prop_assert!(alone.est_tool_calls >= 1);
        prop_assert_eq!(cairn::domain::gate::route(alone, &Default::default()).route == cairn::domain::gate::Route::Direct && f.touches_writes, false);
        let d = cairn::domain::gate::route(f.clone(), &Default::default());
        prop_assert!(!d.reasons.is_empty());
        if f.touches_writes || f.targets > 1 {
            prop_assert_eq!(d.route, cairn::domain::gate::Route::Plan);
        }
    }

    #[test]
    fn a_finished_prefix_survives_a_replan_that_keeps_it_or_leaves_it_out(plan in dag(), cut in any::<prop::sample::Index>()) {
        // Milestones before `cut` are done; their dependencies are earlier, so also done.
        let cut = cut.index(plan.milestones.len() + 1);
        let mut old = plan.clone();
        for m in old.milestones.iter_mut().take(cut) {
            m.status = MilestoneStatus::Done;
        }
        let merged = cairn::domain::plan::validate::carry_over(&old, &plan).unwrap();
        prop_assert_eq!(&merged, &old);
        if cut > 0 {
            // A finished milestone left out is put back ahead of the rest, as it was.
            let mut dropped = plan.clone();
            dropped.milestones.remove(0);
            let merged = cairn::domain::plan::validate::carry_over(&old, &dropped).unwrap();
            prop_assert_eq!(&merged, &old);
        }
    }
}

proptest! {
    #[test]
    fn the_repair_ladder_always_terminates_within_its_limits(
        failures in proptest::collection::vec((0usize..7, 0usize..3, proptest::collection::vec(0u8..4, 1..5)), 1..40),
    ) {
        use cairn::domain::plan::fingerprint::Fingerprint;
        use cairn::domain::repair::*;
        let limits = RepairLimits::default();
        let mut history = RepairHistory::default();
        for (reason, milestone, proposals) in failures {
            let reason = ReplanReason::ALL[reason];
            let milestone = format!("m{milestone}");
            let RepairDecision::Attempt { mut level, .. } = history.decide(&milestone, reason, &limits) else {
                continue;
            };
            prop_assert!(level >= reason.lowest_level());
            // Proposals come from a tiny pool, so repeats are common.
            let mut escalations = 0;
            for p in proposals {
                let proposal = Fingerprint(format!("{p}"));
                match history.propose(&milestone, level, proposal.clone(), &limits) {
                    ProposalVerdict::Accept => {
                        // It ran and failed (a wrong result): proposing it again is thrash.
                        history.failed(&milestone, [proposal]);
                        break;
                    }
                    ProposalVerdict::Escalate { to } => {
                        prop_assert!(to > level);
                        level = to;
                        escalations += 1;
                    }
                    ProposalVerdict::GiveUp => break,
                }
            }
            prop_assert!(escalations <= 2);
            if level == RepairLevel::ReplanStrategy {
                history.begin_replan_strategy(None);
            }
            for level in RepairLevel::ALL {
                let limit = match level {
                    RepairLevel::RetryStep => limits.retry_step,
                    RepairLevel::ReplanMilestone => limits.replan_milestone,
                    RepairLevel::ReplanStrategy => limits.replan_strategy,
                };
                prop_assert!(history.attempts(&milestone, level) <= limit);
            }
        }
    }
}

proptest! {
    #[test]
    fn transient_retries_are_bounded_per_call_and_never_close_a_rung(
        calls in proptest::collection::vec((0usize..3, 0usize..3), 1..40),
        retries in 0u32..4,
    ) {
        use cairn::domain::repair::*;
        let limits = RepairLimits { transient_retries: retries, ..RepairLimits::default() };
        let mut history = RepairHistory::default();
        for (milestone, call) in calls {
            let milestone = format!("m{milestone}");
            let call = format!("s{call}@g0");
            match history.decide(&milestone, Fault::transient(call.as_str()), &limits) {
                RepairDecision::RetrySame { retry, backoff_ms } => {
                    prop_assert!(retry <= retries);
                    prop_assert_eq!(backoff_ms, limits.backoff_ms(retry));
                    prop_assert_eq!(history.retrying(&milestone, &call), retry);
                }
                RepairDecision::Attempt { level, reason } => {
                    prop_assert_eq!(history.transient_retries(&milestone, &call), retries);
                    prop_assert_eq!(reason, ReplanReason::ToolUnavailable);
                    prop_assert_eq!(level, RepairLevel::ReplanMilestone);
                }
                RepairDecision::GiveUp { .. } => prop_assert!(false, "nothing was spent"),
            }
            prop_assert!(history.attempts(&milestone, RepairLevel::RetryStep) == 0);
            prop_assert!(history.milestones.get(&milestone).is_none_or(|m| m.exhausted.is_empty()));
        }
    }
}
