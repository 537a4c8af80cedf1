//! The funnel and the repair yield over hand-written event lists.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::funnel::{Evidence, Funnel, RepairYield, dependent_steps};
use super::tally::FunnelCounts;
use super::{Record, Report};
use crate::suite::{Suite, SuiteTask};
use crate::world::TaskWorld;
use cairn::domain::event::Event;
use cairn::domain::event::kinds::{
    GATE_DECIDED, MONITOR_DECIDED, PLAN_ACCEPTED, PLAN_REFUSED, STEPS_PLANNED, STEPS_REFUSED,
    STRATEGY_ROUND, V1_LIST,
};
use cairn::domain::task::Strategy;
use cairn::store::PlanVersionRecord;

/// The small suite's dependent pipeline: `convert` uses the fact `fetch` reveals, `upload`
/// the one `convert` reveals.
fn pipeline() -> SuiteTask {
    serde_json::from_value(json!({
        "id": "pipeline", "category": "medium", "goal": "fetch, convert, upload",
        "steps": [
            {"id": "fetch", "tool": "http_get", "args": {"url": "u"}, "reveals": {"export": "e-1"}},
            {"id": "convert", "tool": "transform", "args": {"input": "{export}"},
             "reveals": {"artifact": "a-1"}},
            {"id": "upload", "tool": "upload", "args": {"file": "{artifact}"}, "writes": true},
        ],
    }))
    .unwrap()
}

fn knowledge() -> SuiteTask {
    serde_json::from_value(json!({
        "id": "capital", "category": "simple", "goal": "What is the capital of Australia?",
        "answer": "Canberra",
    }))
    .unwrap()
}

/// Events numbered from 1, in the order given.
fn events(list: &[(&str, Value)]) -> Vec<Event> {
    list.iter()
        .enumerate()
        .map(|(i, (kind, data))| Event {
            task_id: uuid::Uuid::nil(),
            seq: i as i64 + 1,
            kind: (*kind).to_string(),
            data: data.clone(),
            created_at: DateTime::<Utc>::default(),
        })
        .collect()
}

/// A plan version whose milestones grant `tools` (milestone id -> its tools).
fn plan(version: i32, reason: &str, milestones: &[(&str, &[&str])]) -> PlanVersionRecord {
    let milestones: Vec<Value> = milestones
        .iter()
        .map(|(id, tools)| json!({"id": id, "tools": tools}))
        .collect();
    PlanVersionRecord {
        task_id: uuid::Uuid::nil(),
        version,
        reason: reason.into(),
        caused_by_seq: None,
        plan: json!({"milestones": milestones}),
        created_at: DateTime::<Utc>::default(),
    }
}

fn world(performed: &[&str], first_call_right: Option<bool>) -> TaskWorld {
    TaskWorld {
        performed: performed.iter().map(|s| (s.to_string(), 1)).collect(),
        first_call_right,
        ..TaskWorld::default()
    }
}

fn verdict(milestone: &str, decision: &str) -> (&'static str, Value) {
    (
        MONITOR_DECIDED,
        json!({"milestone": milestone, "decision": decision}),
    )
}

#[test]
fn a_planned_run_whose_first_plan_misses_a_tool_is_lost_at_tools() {
    let task = pipeline();
    let events = events(&[
        (GATE_DECIDED, json!({"route": "plan"})),
        (
            PLAN_ACCEPTED,
            json!({"attempt": 1, "version": 1, "reason": "initial"}),
        ),
        (STEPS_PLANNED, json!({"milestone": "m1", "level": null})),
        verdict("m1", "passed"),
        (STEPS_PLANNED, json!({"milestone": "m2", "level": null})),
        verdict("m2", "failing"),
        verdict("m2", "failed"),
    ]);
    // `upload` is granted to no milestone.
    let plans = [plan(
        1,
        "initial",
        &[("m1", &["http_get"]), ("m2", &["transform"])],
    )];
    let state = world(&["fetch", "convert"], Some(true));
    let evidence = Evidence {
        task: &task,
        strategy: "v2",
        gate: Some("plan"),
        events: &events,
        plans: &plans,
        world: &state,
    };
    let funnel = Funnel::of(&evidence);
    assert_eq!(funnel.plan_accepted, Some(true));
    assert_eq!(funnel.tools_granted, Some(false));
    assert_eq!(funnel.first_call_right, Some(true));
    assert_eq!(
        funnel.value_carried,
        Some(true),
        "convert used fetch's fact"
    );
    assert_eq!(funnel.checks_passed, Some(false), "m2 failed");
    assert_eq!(RepairYield::of(&events, false), RepairYield::default());

    // The same run granting every tool reached the stage; with m2 passing, the checks too.
    let granted = [plan(
        1,
        "initial",
        &[("m1", &["http_get"]), ("m2", &["transform", "upload"])],
    )];
    let mut passing = events.clone();
    passing.pop();
    passing.pop();
    passing.extend(self::events(&[verdict("m2", "passed")]));
    let funnel = Funnel::of(&Evidence {
        plans: &granted,
        events: &passing,
        ..evidence
    });
    assert_eq!(funnel.tools_granted, Some(true));
    assert_eq!(funnel.checks_passed, Some(true));
}

#[test]
fn a_repeated_repair_is_proposed_but_not_different() {
    let events = events(&[
        (PLAN_ACCEPTED, json!({"version": 1, "reason": "initial"})),
        (
            STEPS_PLANNED,
            json!({"milestone": "m1", "level": null, "fingerprint": "a"}),
        ),
        verdict("m1", "failing"),
        // L1: a new list, which fails too.
        (
            STEPS_PLANNED,
            json!({"milestone": "m1", "level": "retry_step", "fingerprint": "b"}),
        ),
        verdict("m1", "failing"),
        // L2 repeats the failed list: refused.
        (
            STEPS_REFUSED,
            json!({"milestone": "m1", "repeated_fingerprint": "b", "level": "replan_milestone"}),
        ),
        // A malformed list is no proposal of a repair.
        (
            STEPS_REFUSED,
            json!({"milestone": "m1", "errors": "not a step list"}),
        ),
        // L2 again, a new list: m1 passes after it.
        (
            STEPS_PLANNED,
            json!({"milestone": "m1", "level": "replan_milestone", "fingerprint": "c"}),
        ),
        verdict("m1", "passed"),
        verdict("m2", "failed"),
        // L3: the same plan again, refused; a malformed plan is not counted either.
        (PLAN_REFUSED, json!({"errors": "repeats", "repeated": true})),
        (PLAN_REFUSED, json!({"errors": "bad", "repeated": false})),
    ]);
    assert_eq!(
        RepairYield::of(&events, false),
        RepairYield {
            repairs_proposed: 4,
            repairs_different: 2,
            repairs_then_passed: 1,
        }
    );
}

#[test]
fn an_l3_plan_is_credited_when_it_is_the_final_plan_and_its_checks_pass() {
    let events = events(&[
        (PLAN_ACCEPTED, json!({"version": 1, "reason": "initial"})),
        verdict("m1", "failed"),
        (
            PLAN_ACCEPTED,
            json!({"version": 2, "reason": "replan_strategy"}),
        ),
        verdict("m1b", "passed"),
    ]);
    let plans = [
        plan(1, "initial", &[("m1", &["lookup"])]),
        plan(2, "replan_strategy", &[("m1b", &["lookup"])]),
    ];
    let task = knowledge();
    let state = TaskWorld::default();
    let funnel = Funnel::of(&Evidence {
        task: &task,
        strategy: "auto",
        gate: Some("plan"),
        events: &events,
        plans: &plans,
        world: &state,
    });
    assert_eq!(funnel.plan_accepted, Some(true));
    assert_eq!(funnel.tools_granted, None, "no ground-truth step");
    assert_eq!(
        funnel.checks_passed,
        Some(true),
        "the final plan's m1b passed"
    );
    let y = RepairYield::of(&events, true);
    assert_eq!((y.repairs_proposed, y.repairs_then_passed), (1, 1));
    assert_eq!(RepairYield::of(&events, false).repairs_then_passed, 0);
}

#[test]
fn a_direct_run_and_the_baselines_have_no_plan_stages() {
    let task = pipeline();
    let state = world(&["fetch"], Some(true));
    let direct = events(&[(GATE_DECIDED, json!({"route": "direct"}))]);
    let of = |strategy, gate, events: &[Event]| {
        Funnel::of(&Evidence {
            task: &task,
            strategy,
            gate,
            events,
            plans: &[],
            world: &state,
        })
    };
    for funnel in [
        of("auto", Some("direct"), &direct),
        of("one_shot", None, &events(&[(STRATEGY_ROUND, json!({}))])),
        of("reactive", None, &[]),
    ] {
        assert_eq!(funnel.plan_accepted, None);
        assert_eq!(funnel.tools_granted, None);
        assert_eq!(funnel.checks_passed, None);
        assert_eq!(funnel.first_call_right, Some(true));
        assert_eq!(funnel.value_carried, Some(false), "convert never performed");
    }
    // A knowledge question: no stage applies but the verdict.
    let capital = knowledge();
    let none = Funnel::of(&Evidence {
        task: &capital,
        strategy: "auto",
        gate: Some("direct"),
        events: &direct,
        plans: &[],
        world: &TaskWorld::default(),
    });
    assert_eq!(none, Funnel::default());
    // v1: its first list with steps is its plan, and it calls only the first tool.
    let lists = events(&[
        (V1_LIST, json!({"list": 1, "steps": []})),
        (
            V1_LIST,
            json!({"list": 2, "steps": [{"tool": "http_get"}, {"tool": "transform"}]}),
        ),
    ]);
    let v1 = of("v1", None, &lists);
    assert_eq!(
        (v1.plan_accepted, v1.tools_granted, v1.checks_passed),
        (Some(true), Some(false), None)
    );
    assert_eq!(dependent_steps(&task), ["convert", "upload"]);
}

#[test]
fn the_report_counts_each_stage_where_it_applied() {
    let suite: Suite = serde_json::from_value(json!({"name": "t", "tasks": []})).unwrap();
    let record = |strategy: &str, funnel: Funnel, verified: bool| -> Record {
        let mut r: Record = serde_json::from_value(json!({
            "task": "pipeline", "category": "medium", "fault": null, "strategy": strategy,
            "repeat": 0, "status": "failed", "verified": verified, "tokens": 1,
            "tool_calls": 1, "model_calls": 1, "wall_ms": 1, "repairs": {}, "gate": null,
            "fault_fired": false, "recovered": null, "repeated_side_effects": 0,
        }))
        .unwrap();
        assert_eq!(r.funnel, Funnel::default(), "an old log line loads");
        r.funnel = funnel;
        r
    };
    let lost = Funnel {
        plan_accepted: Some(true),
        tools_granted: Some(false),
        first_call_right: Some(true),
        value_carried: Some(false),
        checks_passed: Some(false),
    };
    let done = Funnel {
        tools_granted: Some(true),
        value_carried: Some(true),
        checks_passed: Some(true),
        ..lost
    };
    let records = [
        record("v2", lost, false),
        record("v2", done, true),
        record("one_shot", Funnel::default(), false),
    ];
    let strategies = [Strategy::OneShot, Strategy::V2];
    let report = Report::build(&suite, &strategies, 2, &records);
    let v2 = &report.funnel.per_strategy["v2"];
    assert_eq!(*v2, FunnelCounts::of(&records[..2]));
    assert_eq!(
        (v2.tools_granted.reached, v2.tools_granted.applicable),
        (1, 2)
    );
    assert_eq!((v2.verified.reached, v2.verified.applicable), (1, 2));
    let one_shot = &report.funnel.per_task["pipeline"]["one_shot"];
    assert_eq!(one_shot.plan_accepted.applicable, 0);
    let md = report.markdown();
    assert!(md.contains("## Funnel"), "{md}");
    assert!(
        md.contains("| v2 | 2/2 | 1/2 | 2/2 | 1/2 | 1/2 | 1/2 |"),
        "{md}"
    );
    assert!(
        md.contains("| one_shot | - | - | - | - | - | 0/1 |"),
        "{md}"
    );
    assert!(
        md.contains("- v2: 0 proposed, 0 different, 0 then passed"),
        "{md}"
    );
}
