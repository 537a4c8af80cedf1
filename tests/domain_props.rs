//! Property tests of the pure domain: random DAGs against plan validation, random operation
//! sequences against the ledger's conservation, replay and grant rules, and fingerprints
//! against cosmetic rewrites.

use cairn::domain::check::Check;
use cairn::domain::fingerprint;
use cairn::domain::ledger::{Ledger, LedgerMovement, LedgerPolicy, MovementKind, PerUnit, Unit};
use cairn::domain::plan::{Milestone, MilestoneStatus, Plan, Step, StepStatus};
use cairn::domain::validate::{KnownTools, PlanError, validate};
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
        milestone: usize,
        usage: PerUnit<u64>,
    },
    Overhead(PerUnit<u64>),
    Pass {
        milestone: usize,
    },
}

fn usage() -> impl Strategy<Value = PerUnit<u64>> {
    (0u64..30_000, 0u64..12, 0u64..40_000).prop_map(|(tokens, tool_calls, wall_ms)| PerUnit {
        tokens,
        tool_calls,
        wall_ms,
    })
}

fn op(milestones: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..milestones, usage()).prop_map(|(milestone, usage)| Op::Charge { milestone, usage }),
        1 => usage().prop_map(Op::Overhead),
        2 => (0..milestones).prop_map(|milestone| Op::Pass { milestone }),
    ]
}

fn ledger_case() -> impl Strategy<Value = (PerUnit<u64>, Vec<u32>, u32, Vec<Op>)> {
    (1usize..8).prop_flat_map(|n| {
        (
            (1u64..1_000_000, 1u64..200, 1u64..3_600_000).prop_map(
                |(tokens, tool_calls, wall_ms)| PerUnit {
                    tokens,
                    tool_calls,
                    wall_ms,
                },
            ),
            proptest::collection::vec(1u32..10, n),
            0u32..=50,
            proptest::collection::vec(op(n), 0..60),
        )
    })
}

proptest! {
    #[test]
    fn ledgers_conserve_replay_and_never_overdraw_the_reserve((totals, efforts, reserve_pct, ops) in ledger_case()) {
        let policy = LedgerPolicy { reserve: cairn::domain::ledger::Fraction::from_f64(f64::from(reserve_pct) / 100.0), ..LedgerPolicy::default() };
        let shares: Vec<(String, u32)> = efforts.iter().enumerate().map(|(i, e)| (format!("m{i}"), *e)).collect();
        let (mut ledger, mut log) = Ledger::allocate(totals, &shares, &policy).unwrap();
        for unit in Unit::ALL {
            let book = ledger.book(unit);
            prop_assert_eq!(book.reserve, *totals.get(unit) * u64::from(reserve_pct) / 100);
            // The rounding remainder is less than one unit per milestone.
            prop_assert!(book.unallocated < shares.len() as u64);
        }
        for op in ops {
            let before = ledger.clone();
            let mut charged_milestone = None;
            let movements: Vec<LedgerMovement> = match op {
                Op::Charge { milestone, usage } => {
                    charged_milestone = Some(format!("m{milestone}"));
                    ledger.charge(&format!("m{milestone}"), usage).unwrap().movements
                }
                Op::Overhead(usage) => ledger.charge_overhead(usage).unwrap().movements,
                Op::Pass { milestone } => ledger.return_unspent(&format!("m{milestone}")).unwrap(),
            };
            for unit in Unit::ALL {
                let granted: u64 = movements.iter().filter(|m| m.unit == unit && m.kind == MovementKind::Grant).map(|m| m.amount).sum();
                prop_assert!(granted <= before.book(unit).reserve, "grants never exceed the reserve");
                let charged: u64 = movements.iter().filter(|m| m.unit == unit && m.kind == MovementKind::Charge).map(|m| m.amount).sum();
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
