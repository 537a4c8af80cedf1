//! The v2 engine end to end through the HTTP API against the in-process simulator: the worked
//! example (docs/scenarios.md) with its exact ledger figures, and the gate's direct route.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;

use cairn::domain::ledger::{Ledger, LedgerMovement, PerUnit, Unit};
use engine_stack::Stack;
use serde_json::Value;

const WORKED_GOAL: &str = "Rename config key db.url to db.dsn in services A, B, C";

fn of_kind<'a>(events: &'a [Value], kind: &str, milestone: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["kind"] == kind && e["data"]["milestone"] == milestone)
        .collect()
}

fn seq(event: &Value) -> i64 {
    event["seq"].as_i64().unwrap_or_default()
}

#[tokio::test]
async fn the_worked_example_runs_end_to_end_with_the_seed_figures() {
    worked_example(Stack::start("worked_example.json").await).await;
}

#[tokio::test]
async fn the_worked_example_runs_end_to_end_on_postgres() {
    worked_example(Stack::start_pg("worked_example.json").await).await;
}

async fn worked_example(stack: Stack) {
    let id = stack.submit(WORKED_GOAL, "auto", 200_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let result = &task["result"];
    assert_eq!(result["verified"], true);
    assert_eq!(result["gate"]["route"], "plan");

    let (status, ledger) = stack.get(&format!("/v1/tasks/{id}/ledger")).await;
    assert_eq!(status, 200);
    let tokens = &ledger["units"]["tokens"];
    assert_eq!(tokens["initial_reserve"], 40_000);
    assert_eq!(tokens["milestones"]["m1"]["spent"], 9_000);
    assert_eq!(tokens["milestones"]["m1"]["returned"], 22_857 - 9_000);
    // Allocations as made: what is allocated now plus what was returned, minus grants.
    let initial = |m: &str| {
        let f = &tokens["milestones"][m];
        f["allocated"].as_i64().unwrap_or(0) + f["returned"].as_i64().unwrap_or(0)
            - f["granted"].as_i64().unwrap_or(0)
    };
    assert_eq!(initial("m1"), 22_857);
    for m in ["m2", "m3", "m4"] {
        assert_eq!(initial(m), 45_714, "{m}");
    }
    // The reserve right after m1 passed, replayed from the entries in order.
    let mut reserve = 0;
    let mut after_m1 = None;
    for entry in ledger["entries"].as_array().expect("entries") {
        if entry["unit"] != "tokens" {
            continue;
        }
        let amount = entry["amount"].as_i64().unwrap_or(0);
        let task_level = entry["milestone_id"].is_null();
        match entry["kind"].as_str() {
            Some("allocate") if task_level => reserve += amount,
            Some("return") => reserve += amount,
            Some("grant") => reserve -= amount,
            Some("charge") if task_level && reserve > 0 => reserve -= amount.min(reserve),
            _ => {}
        }
        if entry["kind"] == "return" && entry["milestone_id"] == "m1" {
            after_m1 = Some(reserve);
        }
    }
    assert_eq!(after_m1, Some(53_857));
    // As the engine books it, the reserve also paid the pre-plan gate and strategic calls
    // (1,800): replayed through the domain ledger, 52,057 right after m1's return.
    let entries = ledger["entries"].as_array().expect("entries");
    let m1_return = entries
        .iter()
        .position(|e| e["kind"] == "return" && e["milestone_id"] == "m1" && e["unit"] == "tokens")
        .expect("m1 returns");
    let movements: Vec<LedgerMovement> = entries[..=m1_return]
        .iter()
        .map(|e| {
            LedgerMovement::from_parts(
                e["milestone_id"].as_str().map(str::to_string),
                e["kind"].as_str().unwrap(),
                e["unit"].as_str().unwrap(),
                e["amount"].as_i64().unwrap(),
            )
            .unwrap()
        })
        .collect();
    let totals = PerUnit {
        tokens: 200_000,
        tool_calls: 100,
        wall_ms: 600_000,
        cost: 0,
    };
    let books = Ledger::replay(totals, &movements).expect("replays");
    assert_eq!(books.book(Unit::Tokens).reserve, 52_057);
    assert_eq!(books.book(Unit::Tokens).owed(), 0);
    assert_eq!(tokens["milestones"]["m4"]["granted"], 6_286);
    assert_eq!(tokens["milestones"]["m4"]["spent"], 52_000);
    let milestones: i64 = ["m1", "m2", "m3", "m4"]
        .iter()
        .map(|m| tokens["milestones"][m]["spent"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(milestones, 150_000);
    let total = tokens["spent"].as_i64().unwrap_or(0);
    assert!(
        (150_000..=153_000).contains(&total),
        "about 150,000 in all, got {total}"
    );
    assert_eq!(
        result["spend"]["tokens"], total,
        "the result reports the same spend"
    );

    let events = stack.events(&id).await;
    let started = |m| seq(of_kind(&events, "milestone.started", m)[0]);
    let passed = |m| {
        of_kind(&events, "monitor.decided", m)
            .into_iter()
            .find(|e| e["data"]["decision"] == "passed")
            .map(seq)
            .expect("passed")
    };
    assert!(
        started("m3") < passed("m2") && started("m2") < passed("m3"),
        "m2 and m3 overlap"
    );
    let levels: Vec<&str> = of_kind(&events, "repair.started", "m4")
        .iter()
        .map(|e| e["data"]["level"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(levels, ["retry_step", "replan_milestone"], "L1 before L2");
    for m in ["m1", "m2", "m3"] {
        assert!(
            of_kind(&events, "repair.started", m).is_empty(),
            "{m} needed no repair"
        );
    }
    let stats = stack.sim.stats();
    assert_eq!(stats.tools["search"].calls, 1, "m1's search ran once");
    // Side effects at most once by content: a/config.py, b/settings.py, c/config.py (m4's
    // first patch; its L2 list repeats it and gets the receipt; the L1 retry repeated the
    // failed list and never ran) and c/start.sh, once each.
    let edits = &stats.tools["edit_file"];
    assert_eq!(
        (edits.calls, edits.distinct_args, edits.max_calls_per_args),
        (4, 4, 1),
        "{edits:?}"
    );
    let c_config = of_kind(&events, "step.finished", "m4")
        .into_iter()
        .filter(|e| {
            e["data"]["tool"] == "edit_file" && e["data"]["output"]["patched"] == "c/config.py"
        })
        .count();
    assert_eq!(
        c_config, 2,
        "two steps patch c/config.py; the tool saw one call"
    );
    let seqs: Vec<i64> = events.iter().map(seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as i64).collect::<Vec<_>>(),
        "events are dense"
    );
    assert_eq!(
        events.last().map(|e| e["kind"].clone()),
        Some("task.succeeded".into())
    );

    // Plan versions: initial, then the L2 repair of m4 (L1's proposal repeated the failed
    // patch, so it was refused by fingerprint and escalated without a new version).
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    let reasons: Vec<&str> = plans["items"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| v["reason"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(reasons.first(), Some(&"initial"));
    assert_eq!(reasons.last(), Some(&"replan_milestone"));
    let last = reasons.len();
    let (status, diff) = stack
        .get(&format!("/v1/tasks/{id}/plans/{last}/diff"))
        .await;
    assert_eq!(status, 200, "{diff}");
    let changed: Vec<&str> = diff["diff"]["changed"]
        .as_array()
        .expect("changed")
        .iter()
        .map(|c| c["id"].as_str().unwrap_or_default())
        .collect();
    assert!(changed.contains(&"m4"), "{diff:#}");
    assert!(diff["caused_by_seq"].as_i64().is_some());

    let (status, stats) = stack.get("/v1/stats").await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["tasks"], 1);
    assert_eq!(stats["planned_tasks"], 1);
    assert_eq!(stats["plan_validity_rate"], 1.0);
    assert_eq!(stats["average_plan_length"], 4.0);
    assert_eq!(stats["step_completion_rate"], 1.0);
    assert_eq!(stats["replan_frequency"], (reasons.len() - 1) as f64);
    assert_eq!(stats["drift_rate"], 0.0);
    assert_eq!(stats["verified_success"], 1.0);
    assert_eq!(stats["repairs"]["retry_step"], 1);
    assert_eq!(stats["repairs"]["replan_milestone"], 1);
    let (_, gate) = stack.get("/v1/stats/gate").await;
    assert_eq!(gate["by_route"]["plan"], 1, "{gate}");
    assert_eq!(gate["planned_one_step"], serde_json::json!([]));
    stack.stop().await;
}

#[tokio::test]
async fn the_gate_sends_a_one_tool_question_direct_once_its_kind_has_a_record() {
    let stack = Stack::start("direct_question.toml").await;
    const QUESTION: &str = "What version of service A is deployed?";
    // No direct history for `lookup` yet: the prior (0.5) is below 0.9, so the gate plans.
    let id = stack.submit(QUESTION, "auto", 50_000).await;
    let first = stack.finished(&id).await;
    assert_eq!(first["result"]["gate"]["route"], "plan", "{first:#}");
    let unreliable = &first["result"]["gate"]["reasons"][1];
    assert_eq!(unreliable["rule"], "direct_unreliable", "{first:#}");
    assert_eq!(unreliable["from_history"], false);
    // Eight direct runs of the kind (strategy direct) succeed: (8 + 1) / (8 + 2) = 0.9.
    for _ in 0..8 {
        let id = stack.submit(QUESTION, "direct", 50_000).await;
        assert_eq!(stack.finished(&id).await["status"], "succeeded");
    }
    stack.sim.reset();
    let id = stack.submit(QUESTION, "auto", 50_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["gate"]["route"], "direct");
    assert_eq!(
        task["result"]["gate"]["reasons"][1]["rule"],
        "direct_reliable"
    );
    let events = stack.events(&id).await;
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "gate.decided" && e["data"]["route"] == "direct")
    );
    assert!(
        !events.iter().any(|e| e["kind"] == "plan.accepted"),
        "no plan"
    );
    assert_eq!(stack.sim.stats().llm.by_purpose.get("strategic"), None);
    let (_, gate) = stack.get("/v1/stats/gate").await;
    assert_eq!(gate["decisions"], 10, "{gate}");
    assert_eq!(gate["by_route"]["direct"], 9);
    assert_eq!(gate["direct_success_by_kind"]["lookup"], 1.0);
    assert_eq!(gate["direct_failed"], serde_json::json!([]));
    stack.stop().await;
}

/// Tools that declare their artifacts: a plan whose check names an artifact none of its
/// milestone's tools produces is refused before anything runs, the refusal names what they do
/// produce, and the planner's next plan, checked by a declared artifact, runs to a verified end.
#[tokio::test]
async fn a_check_naming_an_artifact_its_tools_do_not_produce_is_refused_then_fixed() {
    let stack = Stack::start("declared_artifacts.json").await;
    let id = stack
        .submit(
            "Find the deployed version of billing and announce it",
            "v2",
            50_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["verified"], true, "{task:#}");
    let events = stack.events(&id).await;
    let refused: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "plan.refused")
        .collect();
    assert_eq!(refused.len(), 1, "{events:#?}");
    let reason = refused[0]["data"].to_string();
    assert!(
        reason.contains("names artifact \\\"note\\\", which none of its tools produces")
            && reason.contains("they produce: version"),
        "{reason}"
    );
    let accepted: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "plan.accepted")
        .collect();
    assert_eq!(accepted.len(), 1, "{events:#?}");
    // The refused proposal never became a plan version: the one version is the fixed plan.
    assert_eq!(task["plan_version"], 1, "{task:#}");
    assert_eq!(task["result"]["passed"], serde_json::json!(["m1", "m2"]));
}

/// A plan that grants a tool twice and lists a required property twice in a schema check (the
/// 1.5B planner wrote both live, and each was refused at every re-ask): the engine keeps each
/// name once, so the first plan is accepted, stored tidied, and the task runs to a verified end.
#[tokio::test]
async fn a_plan_repeating_a_tool_or_a_required_name_is_tidied_not_refused() {
    let stack = Stack::start("plan_repeated_names.json").await;
    let id = stack
        .submit("Which release of billing is deployed?", "v2", 50_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["verified"], true, "{task:#}");
    let events = stack.events(&id).await;
    assert!(
        events.iter().all(|e| e["kind"] != "plan.refused"),
        "{events:#?}"
    );
    let (_, plan) = stack.get(&format!("/v1/tasks/{id}/plans/1")).await;
    assert_eq!(
        plan["plan"]["milestones"][0]["tools"],
        serde_json::json!(["lookup"]),
        "{plan:#}"
    );
    assert_eq!(
        plan["plan"]["milestones"][0]["accept"]["schema"]["required"],
        serde_json::json!(["service", "version"]),
        "{plan:#}"
    );
    stack.stop().await;
}

/// A read's result is staged, not committed on its own: before an artifact check it commits in
/// one transaction with the check's decision (worked example m1, declared_artifacts m1). A side
/// effect's result is committed at once (declared_artifacts m2, `write_note`), and so is every
/// step's before a `command` check, which calls the runner tool (worked example m2-m4).
#[tokio::test]
async fn a_read_commits_with_its_artifact_check_a_write_or_a_command_check_does_not() {
    let worked = step_and_check_together("worked_example.json", WORKED_GOAL, "auto").await;
    let expected = [("m1", true), ("m2", false), ("m3", false), ("m4", false)];
    assert_eq!(worked, expected.map(|(m, t)| (m.to_string(), t)));
    let goal = "Find the deployed version of billing and announce it";
    let declared = step_and_check_together("declared_artifacts.json", goal, "v2").await;
    assert_eq!(
        declared,
        [("m1", true), ("m2", false)].map(|(m, t)| (m.to_string(), t))
    );
}

/// Runs `scenario` on Postgres; per milestone (by id), whether the last step before its
/// passing check shares that check decision's transaction (`xmin`).
async fn step_and_check_together(
    scenario: &str,
    goal: &str,
    strategy: &str,
) -> Vec<(String, bool)> {
    let stack = Stack::start_pg(scenario).await;
    let id = stack.submit(goal, strategy, 200_000).await;
    assert_eq!(stack.finished(&id).await["status"], "succeeded");
    let pool = sqlx::PgPool::connect(stack.pg_url().expect("postgres"))
        .await
        .expect("connect");
    // (kind, milestone, decision, transaction) of every event, in seq order.
    let rows: Vec<(String, Option<String>, Option<String>, String)> = sqlx::query_as(
        "SELECT kind, data::jsonb->>'milestone', data::jsonb->>'decision', xmin::text \
         FROM events WHERE task_id = $1::uuid ORDER BY seq",
    )
    .bind(&id)
    .fetch_all(&pool)
    .await
    .expect("events");
    pool.close().await;
    stack.stop().await;
    let mut found = Vec::new();
    for (passed, row) in rows.iter().enumerate() {
        let Some(m) = row.1.as_deref() else { continue };
        if row.0 != "monitor.decided" || row.2.as_deref() != Some("passed") {
            continue;
        }
        let step = rows[..passed]
            .iter()
            .rposition(|r| r.1.as_deref() == Some(m) && r.0 == "step.finished")
            .expect("a step before the check");
        found.push((m.to_string(), rows[step].3 == row.3));
    }
    found.sort();
    found
}
