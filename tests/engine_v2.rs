//! The v2 engine against scripted ports on a real (SQLite file) store: the worked example's
//! exact ledger figures, each repair level, fingerprint escalation, budget exhaustion, invalid
//! plans re-asked, executor drift, a stale plan when a tool is gone, and the gate's two routes.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_fakes;

use std::sync::Arc;

use cairn::domain::settings::EngineSettings;
use cairn::domain::task::{Strategy, TaskStatus};
use cairn::engine::planner::V2Engine;
use cairn::engine::runtime::ports::{Purpose, Sampling, Speaker};
use cairn::store::Store;
use engine_fakes::*;
use serde_json::{Value, json};

const WORKED_GOAL: &str = "Rename config key db.url to db.dsn in services A, B, C";

async fn store() -> (common::TestSqlite, Arc<dyn Store>) {
    common::sqlite_store().await
}

fn engine(model: &Arc<FakeModel>, tools: &Arc<FakeTools>) -> V2Engine {
    V2Engine::new(model.clone(), tools.clone(), EngineSettings::default())
}

/// Sum of token entries of `kind` for `milestone` (None: task level).
fn sum(entries: &[cairn::store::LedgerEntry], kind: &str, milestone: Option<&str>) -> i64 {
    entries
        .iter()
        .filter(|e| e.unit == "tokens" && e.kind == kind && e.milestone_id.as_deref() == milestone)
        .map(|e| e.amount)
        .sum()
}

fn seq_of(
    events: &[(i64, String, Value)],
    kind: &str,
    milestone: &str,
    extra: Option<(&str, &str)>,
) -> Vec<i64> {
    events
        .iter()
        .filter(|(_, k, d)| k == kind && d["milestone"] == milestone)
        .filter(|(_, _, d)| extra.is_none_or(|(key, value)| d[key] == value))
        .map(|(seq, _, _)| *seq)
        .collect()
}

#[tokio::test]
async fn worked_example_reproduces_the_seed_ledger() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    script_worked_example(&model);
    let task = run_task(
        store.clone(),
        &engine(&model, &tools),
        WORKED_GOAL,
        Strategy::Auto,
        budget(200_000),
    )
    .await;
    if task.status != TaskStatus::Succeeded {
        for e in event_kinds(&store, &task)
            .await
            .iter()
            .filter(|(_, _, d)| d["milestone"] == "m4")
        {
            eprintln!("{e:?}");
        }
    }
    assert_eq!(
        task.status,
        TaskStatus::Succeeded,
        "{:#}",
        task.result.clone().unwrap_or_default()
    );
    let result = task.result.clone().expect("result");
    assert_eq!(result["verified"], true);
    assert_eq!(result["gate"]["route"], "plan");

    let entries = store
        .list_ledger_entries(cairn::domain::task::DEFAULT_TENANT, task.id)
        .await
        .expect("ledger");
    assert_eq!(sum(&entries, "allocate", None), 40_000, "the reserve");
    assert_eq!(sum(&entries, "allocate", Some("m1")), 22_857);
    for m in ["m2", "m3", "m4"] {
        assert_eq!(sum(&entries, "allocate", Some(m)), 45_714, "{m}");
    }
    assert_eq!(sum(&entries, "charge", Some("m1")), 9_000);
    assert_eq!(sum(&entries, "return", Some("m1")), 13_857);
    // The reserve after m1 passed: 40,000 + its unspent 13,857 (m1 passes before any other
    // milestone starts, so no other movement touches the reserve in between).
    assert_eq!(40_000 + sum(&entries, "return", Some("m1")), 53_857);
    assert_eq!(sum(&entries, "grant", Some("m4")), 6_286);
    assert_eq!(sum(&entries, "charge", Some("m4")), 52_000);
    let milestone_spend: i64 = ["m1", "m2", "m3", "m4"]
        .iter()
        .map(|m| sum(&entries, "charge", Some(m)))
        .sum();
    assert_eq!(milestone_spend, 150_000);
    let total = result["spend"]["tokens"].as_i64().expect("total tokens");
    assert!(
        (150_000..=153_000).contains(&total),
        "about 150,000 spent, got {total}"
    );
    for m in result["milestones"].as_array().expect("milestones") {
        assert!(
            m["spend"]["tokens"].as_u64().is_some() && m["spend"]["tool_calls"].as_u64().is_some()
        );
    }

    let events = event_kinds(&store, &task).await;
    // m2 and m3 ran at the same time: each started before the other passed.
    let started = |m| seq_of(&events, "milestone.started", m, None)[0];
    let passed = |m| seq_of(&events, "monitor.decided", m, Some(("decision", "passed")))[0];
    assert!(
        started("m3") < passed("m2") && started("m2") < passed("m3"),
        "{events:#?}"
    );
    // m1's search ran once; L1 came before L2 on m4.
    assert_eq!(tools.calls("search").len(), 1);
    let levels: Vec<String> = events
        .iter()
        .filter(|(_, k, d)| k == "repair.started" && d["milestone"] == "m4")
        .map(|(_, _, d)| d["level"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(levels, ["retry_step", "replan_milestone"]);
    let versions = store
        .list_plan_versions(cairn::domain::task::DEFAULT_TENANT, task.id)
        .await
        .expect("versions");
    let reasons: Vec<&str> = versions.iter().map(|v| v.reason.as_str()).collect();
    assert_eq!(reasons, ["initial", "retry_step", "replan_milestone"]);
    for v in &versions[1..] {
        let cause = v.caused_by_seq.expect("a repair names its cause");
        assert!(
            events.iter().any(|(seq, k, d)| *seq == cause
                && k == "monitor.decided"
                && d["decision"] == "failing"),
            "version {} points at the failing check that caused it",
            v.version
        );
    }
    assert_eq!(
        events.last().map(|(_, k, _)| k.as_str()),
        Some("task.succeeded")
    );
}

#[tokio::test]
async fn gate_goes_direct_for_a_one_tool_question_of_a_trusted_kind() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    model.reply(
        "gate",
        "",
        0,
        json!({"est_tool_calls": 1, "touches_writes": false, "targets": 1, "goal_kind": "lookup"}),
        100,
    );
    model.reply(
        "tactical",
        "direct",
        1,
        steps(vec![
            json!({"id": "s1", "tool": "search", "args": {"query": "db.url"}}),
        ]),
        400,
    );
    model.reply(
        "tactical",
        "direct",
        2,
        json!({"done": true, "answer": "3 files read db.url"}),
        200,
    );
    model.reply(
        "verifier",
        "direct",
        0,
        json!({"verdict": "pass", "reason": "answered"}),
        100,
    );
    // An operator who trusts the direct path for kinds with no history yet (the default prior,
    // 0.5, plans them: tests/engine_http.rs).
    let trusting = EngineSettings {
        direct_success_prior: 0.95,
        direct_prior_weight: 0.0,
        ..EngineSettings::default()
    };
    let task = run_task(
        store.clone(),
        &V2Engine::new(model.clone(), tools.clone(), trusting),
        "Which files read db.url?",
        Strategy::Auto,
        budget(50_000),
    )
    .await;
    assert_eq!(task.status, TaskStatus::Succeeded);
    let result = task.result.clone().expect("result");
    assert_eq!(result["gate"]["route"], "direct");
    assert_eq!(result["extra"]["answer"], "3 files read db.url");
    assert!(
        model.calls(Purpose::Strategic, None).is_empty(),
        "no plan on the direct path"
    );
    assert_eq!(tools.calls("search").len(), 1);
    let events = event_kinds(&store, &task).await;
    assert!(events.iter().any(|(_, k, d)| k == "gate.decided"
        && d["route"] == "direct"
        && d["features"]["est_tool_calls"] == 1));
    assert!(events.iter().any(|(_, k, d)| k == "gate.outcome"
        && d["route"] == "direct"
        && d["status"] == "succeeded"));
}

fn one_milestone_plan() -> Value {
    json!({"milestones": [{"id": "m1", "title": "Find usages", "depends_on": [], "effort": 1,
        "tools": ["search"], "accept": {"type": "artifact", "name": "usage_list", "non_empty": true}}]})
}

#[tokio::test]
async fn invalid_plans_are_refused_and_re_asked_with_the_errors() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    let cyclic = json!({"milestones": [
        {"id": "a", "title": "A", "depends_on": ["b"], "effort": 1, "tools": ["search"],
         "accept": {"type": "artifact", "name": "x"}},
        {"id": "b", "title": "B", "depends_on": ["a"], "effort": 1, "tools": ["nope"],
         "accept": {"type": "artifact", "name": "y"}}]});
    model.reply("strategic", "", 1, cyclic, 500);
    model.reply("strategic", "", 2, one_milestone_plan(), 500);
    model.reply(
        "tactical",
        "m1",
        0,
        steps(vec![
            json!({"id": "s1", "tool": "search", "args": {"query": "db.url"}}),
        ]),
        1_000,
    );
    model.reply(
        "verifier",
        "",
        0,
        json!({"verdict": "pass", "reason": "ok"}),
        100,
    );
    let task = run_task(
        store.clone(),
        &engine(&model, &tools),
        "find usages",
        Strategy::V2,
        budget(50_000),
    )
    .await;
    assert_eq!(task.status, TaskStatus::Succeeded);
    let asks = model.calls(Purpose::Strategic, None);
    assert_eq!(asks.len(), 2);
    let errors = asks[1].input["validation_errors"]
        .as_str()
        .expect("errors sent back");
    assert!(
        errors.contains("cycle") && errors.contains("nope"),
        "{errors}"
    );
    let events = event_kinds(&store, &task).await;
    let refused = events
        .iter()
        .position(|(_, k, _)| k == "plan.refused")
        .expect("refused");
    let accepted = events
        .iter()
        .position(|(_, k, _)| k == "plan.accepted")
        .expect("accepted");
    assert!(refused < accepted);
    // Nothing ran before the valid plan.
    let first_step = events
        .iter()
        .position(|(_, k, _)| k == "step.finished")
        .expect("a step");
    assert!(first_step > accepted);
    let metrics = &task.result.expect("result")["metrics"];
    assert_eq!(
        (
            metrics["plans_proposed"].as_u64(),
            metrics["plans_invalid"].as_u64()
        ),
        (Some(2), Some(1))
    );
    assert_eq!(
        store
            .list_plan_versions(cairn::domain::task::DEFAULT_TENANT, task.id)
            .await
            .expect("versions")
            .len(),
        1
    );
}

#[tokio::test]
async fn a_planner_that_never_validates_fails_the_task_without_executing() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    model.reply(
        "strategic",
        "",
        0,
        json!({"milestones": [{"id": "m1", "title": "usages"}]}),
        100,
    );
    let task = run_task(
        store.clone(),
        &engine(&model, &tools),
        "find usages",
        Strategy::V2,
        budget(50_000),
    )
    .await;
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(
        model.calls(Purpose::Strategic, None).len(),
        3,
        "first ask + 2 re-asks"
    );
    assert!(tools.log.lock().unwrap().is_empty());
    assert!(
        store
            .list_plan_versions(cairn::domain::task::DEFAULT_TENANT, task.id)
            .await
            .expect("versions")
            .is_empty()
    );
}

#[tokio::test]
async fn executor_drift_is_refused_and_recorded() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    model.reply("strategic", "", 0, one_milestone_plan(), 500);
    // m1 allows only `search`: an edit is drift, and so are arguments failing the schema.
    model.reply(
        "tactical",
        "m1",
        1,
        steps(vec![edit("s1", "a/config.py")]),
        1_000,
    );
    model.reply(
        "tactical",
        "m1",
        2,
        steps(vec![
            json!({"id": "s1", "tool": "search", "args": {"q": 1}}),
        ]),
        1_000,
    );
    model.reply(
        "tactical",
        "m1",
        3,
        steps(vec![
            json!({"id": "s1", "tool": "search", "args": {"query": "db.url"}}),
        ]),
        1_000,
    );
    model.reply(
        "verifier",
        "",
        0,
        json!({"verdict": "pass", "reason": "ok"}),
        100,
    );
    let task = run_task(
        store.clone(),
        &engine(&model, &tools),
        "find usages",
        Strategy::V2,
        budget(50_000),
    )
    .await;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert!(
        tools.calls("edit_file").is_empty(),
        "a refused step is never called"
    );
    assert_eq!(tools.calls("search").len(), 1, "only the valid search ran");
    let events = event_kinds(&store, &task).await;
    let drift: Vec<&Value> = events
        .iter()
        .filter(|(_, k, _)| k == "executor.drift")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(drift.len(), 2);
    assert!(
        drift[0]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("not allowed")
    );
    assert!(
        drift[1]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("schema")
    );
    let metrics = &task.result.expect("result")["metrics"];
    assert_eq!(metrics["drift"], 2);
    assert_eq!(metrics["executor_failures"], 2);
}

#[tokio::test]
async fn budget_exhaustion_stops_with_a_report() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    let plan = json!({"milestones": [
        {"id": "m1", "title": "Find usages", "depends_on": [], "effort": 1, "tools": ["search"],
         "accept": {"type": "artifact", "name": "usage_list"}},
        {"id": "m2", "title": "Patch C", "depends_on": ["m1"], "effort": 1, "tools": ["edit_file"],
         "accept": {"type": "command", "tool": "run", "args": {"cmd": "make test", "cwd": "c"}, "exit_code": 0}}]});
    model.reply("strategic", "", 0, plan, 100);
    model.reply(
        "tactical",
        "m1",
        0,
        steps(vec![
            json!({"id": "s1", "tool": "search", "args": {"query": "db.url"}}),
        ]),
        1_000,
    );
    // 10,000 tokens: reserve 2,000 (1,900 once it paid the 100-token strategic call made
    // before the plan), 4,000 each. m2's repairs never fix start.sh and cost 3,000 each: the
    // reserve (1,900 + m1's unspent 3,000) runs dry on the third one.
    for attempt in 1..=6 {
        let args =
            json!({"path": "c/config.py", "find": "db.url", "replace": "db.dsn", "n": attempt});
        model.reply(
            "tactical",
            "m2",
            attempt,
            steps(vec![json!({"id": "s1", "tool": "edit_file", "args": args})]),
            3_000,
        );
    }
    let task = run_task(
        store.clone(),
        &engine(&model, &tools),
        "patch",
        Strategy::V2,
        budget(10_000),
    )
    .await;
    assert_eq!(task.status, TaskStatus::BudgetExhausted);
    let result = task.result.clone().expect("report");
    assert_eq!(result["passed"], json!(["m1"]));
    let m2 = &result["milestones"][1];
    assert_eq!(m2["outcome"], "over_budget");
    assert!(
        m2["failure"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("exited with 1"),
        "{m2:#}"
    );
    assert!(
        result["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("reserve")
    );
    let entries = store
        .list_ledger_entries(cairn::domain::task::DEFAULT_TENANT, task.id)
        .await
        .expect("ledger");
    // The second repair drew 2,000 from the reserve. The third is reserved before it is sent:
    // its worst case (the prompt at a token per byte, and its answer) cannot fit the 2,900 left,
    // so it is refused and the reserve is never overdrawn (before reservations it was sent, the
    // whole 4,900 granted and its last 100 tokens left uncovered).
    assert_eq!(sum(&entries, "grant", Some("m2")), 2_000);
    let refused = event_kinds(&store, &task)
        .await
        .into_iter()
        .filter(|(_, k, d)| k == "ledger.limited" && d["refused"] == "tokens")
        .count();
    assert_eq!(refused, 1, "one call refused, then the task stopped");
    let events = event_kinds(&store, &task).await;
    assert!(
        events
            .iter()
            .any(|(_, k, d)| k == "monitor.decided" && d["decision"] == "over_budget")
    );
    assert_eq!(
        events.last().map(|(_, k, _)| k.as_str()),
        Some("task.budget_exhausted")
    );
}

#[tokio::test]
async fn every_repair_level_is_reached_and_a_repeated_fingerprint_escalates() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    let plan = json!({"milestones": [
        {"id": "m1", "title": "Find usages", "depends_on": [], "effort": 1, "tools": ["search"],
         "accept": {"type": "artifact", "name": "usage_list"}},
        {"id": "m2", "title": "Patch C", "depends_on": ["m1"], "effort": 2, "tools": ["edit_file"],
         "accept": {"type": "command", "tool": "run", "args": {"cmd": "make test", "cwd": "c"}, "exit_code": 0}}]});
    model.reply("strategic", "", 1, plan, 100);
    model.reply(
        "tactical",
        "m1",
        0,
        steps(vec![
            json!({"id": "s1", "tool": "search", "args": {"query": "db.url"}}),
        ]),
        1_000,
    );
    let config_edit = |n: u32| {
        json!({"id": "s1", "tool": "edit_file",
        "args": {"path": "c/config.py", "find": "db.url", "replace": "db.dsn", "n": n}})
    };
    model.reply("tactical", "m2", 1, steps(vec![config_edit(1)]), 1_000);
    // L1 with the error in context tries another fix; proposing that failed fix again (other
    // id, same tool and args) repeats a failed fingerprint: refused and asked once more
    // (sampled warmer); repeated once more, it escalates to L2 without running.
    let mut same = config_edit(2);
    same["id"] = json!("retry");
    model.reply("tactical", "m2", 2, steps(vec![config_edit(2)]), 1_000);
    model.reply("tactical", "m2", 3, steps(vec![same.clone()]), 1_000);
    model.reply("tactical", "m2", 4, steps(vec![same]), 1_000);
    model.reply("tactical", "m2", 5, steps(vec![config_edit(4)]), 1_000);
    model.reply("tactical", "m2", 6, steps(vec![config_edit(5)]), 1_000);
    // L3: a plan that leaves the finished m1 out is accepted with m1 put back, as it was.
    model.reply("strategic", "", 2, json!({"milestones": [
        {"id": "m2b", "title": "Patch C and its script", "depends_on": [], "effort": 2, "tools": ["edit_file"],
         "accept": {"type": "command", "tool": "run", "args": {"cmd": "make test", "cwd": "c"}, "exit_code": 0}}]}), 100);
    model.reply(
        "tactical",
        "m2b",
        0,
        steps(vec![edit("s1", "c/config.py"), edit("s2", "c/start.sh")]),
        1_000,
    );
    model.reply(
        "verifier",
        "",
        0,
        json!({"verdict": "pass", "reason": "ok"}),
        100,
    );
    let settings = EngineSettings {
        explore_repeats: true,
        ..EngineSettings::default()
    };
    let task = run_task(
        store.clone(),
        &V2Engine::new(model.clone(), tools.clone(), settings),
        "patch C",
        Strategy::V2,
        budget(200_000),
    )
    .await;
    assert_eq!(
        task.status,
        TaskStatus::Succeeded,
        "{:#}",
        task.result.clone().unwrap_or_default()
    );
    let events = event_kinds(&store, &task).await;
    let repairs: Vec<(String, Value)> = events
        .iter()
        .filter(|(_, k, d)| k == "repair.started" && d["milestone"] == "m2")
        .map(|(_, _, d)| {
            (
                d["level"].as_str().unwrap_or_default().to_string(),
                d["escalated_from"].clone(),
            )
        })
        .collect();
    let levels: Vec<&str> = repairs.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        levels,
        [
            "retry_step",
            "retry_step",
            "replan_milestone",
            "replan_milestone",
            "replan_strategy"
        ]
    );
    assert_eq!(
        repairs[2].1, "retry_step",
        "the repeated fingerprint escalated"
    );
    let repeats: Vec<&Value> = events
        .iter()
        .filter(|(_, k, d)| k == "milestone.steps_refused" && d["repeated_fingerprint"].is_string())
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(repeats.len(), 2, "{repeats:?}");
    assert_eq!(repeats[0]["reask"], true, "the first repeat is asked again");
    assert_eq!(
        repeats[1]["escalate_to"], "replan_milestone",
        "the second escalates"
    );
    let sampled: Vec<(u32, Sampling)> = model
        .calls(Purpose::Tactical, Some("m2"))
        .iter()
        .map(|a| (a.attempt, a.sampling))
        .collect();
    assert_eq!(
        sampled[2..4],
        [(3, Sampling::Endpoint), (4, Sampling::Explore)],
        "the re-ask after a repeat is sampled warmer: {sampled:?}"
    );
    let refused: Vec<&Value> = events
        .iter()
        .filter(|(_, k, _)| k == "plan.refused")
        .map(|(_, _, d)| d)
        .collect();
    assert!(
        refused.is_empty(),
        "leaving finished work out is not refused: {refused:?}"
    );
    let versions = store
        .list_plan_versions(cairn::domain::task::DEFAULT_TENANT, task.id)
        .await
        .expect("versions");
    let reasons: Vec<&str> = versions.iter().map(|v| v.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "initial",
            "retry_step",
            "replan_milestone",
            "replan_milestone",
            "replan_strategy"
        ]
    );
    let last = &versions.last().expect("a version").plan;
    assert_eq!(last["milestones"][0]["id"], "m1", "finished work put back");
    assert_eq!(
        last["milestones"][0]["status"], "done",
        "finished work kept"
    );
    assert_eq!(tools.calls("search").len(), 1, "m1 was not redone");
    assert_eq!(
        tools.calls("edit_file").len(),
        6,
        "the repeated proposal never ran"
    );
    // A repair ask shows the list that failed as the model's own answer, then the error.
    let asked = model.calls(Purpose::Tactical, Some("m2"));
    assert!(asked[0].turns.is_empty(), "a first list has no history");
    let repair = &asked[1].turns;
    assert_eq!(repair.len(), 2, "{repair:?}");
    assert_eq!(repair[0].speaker, Speaker::Model);
    assert_eq!(repair[0].content["steps"][0]["tool"], "edit_file");
    assert_eq!(repair[1].speaker, Speaker::Engine);
    assert!(repair[1].content["error"].is_string(), "{:?}", repair[1]);
}

#[tokio::test]
async fn a_tool_that_is_gone_marks_the_plan_stale_and_replans_the_strategy() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    tools.gone.lock().unwrap().insert("search".into());
    model.reply("strategic", "", 1, one_milestone_plan(), 500);
    let mut with_grep = one_milestone_plan();
    with_grep["milestones"][0]["tools"] = json!(["grep"]);
    model.reply("strategic", "", 2, with_grep, 500);
    let query = json!({"query": "db.url"});
    model.reply(
        "tactical",
        "m1",
        1,
        steps(vec![json!({"id": "s1", "tool": "search", "args": query})]),
        1_000,
    );
    model.reply(
        "tactical",
        "m1",
        2,
        steps(vec![json!({"id": "s1", "tool": "grep", "args": query})]),
        1_000,
    );
    model.reply(
        "verifier",
        "",
        0,
        json!({"verdict": "pass", "reason": "ok"}),
        100,
    );
    let task = run_task(
        store.clone(),
        &engine(&model, &tools),
        "find usages",
        Strategy::V2,
        budget(50_000),
    )
    .await;
    assert_eq!(
        task.status,
        TaskStatus::Succeeded,
        "{:#}",
        task.result.clone().unwrap_or_default()
    );
    let events = event_kinds(&store, &task).await;
    let stale = events
        .iter()
        .find(|(_, k, _)| k == "plan.stale")
        .expect("plan marked stale");
    assert_eq!(stale.2["tool"], "search");
    let levels: Vec<&str> = events
        .iter()
        .filter(|(_, k, _)| k == "repair.started")
        .map(|(_, _, d)| d["level"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        levels,
        ["replan_strategy"],
        "no step retry or milestone replan for a gone tool"
    );
    let versions = store
        .list_plan_versions(cairn::domain::task::DEFAULT_TENANT, task.id)
        .await
        .expect("versions");
    let reasons: Vec<&str> = versions.iter().map(|v| v.reason.as_str()).collect();
    assert_eq!(reasons, ["initial", "replan_strategy"]);
    assert_eq!(
        (tools.calls("search").len(), tools.calls("grep").len()),
        (1, 1)
    );
}
