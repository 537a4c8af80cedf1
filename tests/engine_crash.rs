//! A crash in the middle of m4 of the worked example: SIGKILL a child `cairn serve`, start
//! another, and the task finishes from its checkpoint. m4's check is re-run first (the world
//! may have changed), no side-effecting action gets a second identity (the simulator counts
//! distinct idempotency keys and argument sets), and no event is lost (seqs dense, each step
//! recorded once).
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use cairn::domain::event::Event;
use cairn::domain::task::TaskStatus;
use cairn::store::Store;
use cairn::store::postgres::PgStore;
use serde_json::{Value, json};
use serve_process::{Db, Serve, SimStack, wait_events};

fn data(event: &Event, key: &str) -> Value {
    event.data.get(key).cloned().unwrap_or(Value::Null)
}

fn is_step(event: &Event, milestone: &str, generation: u64, step: &str) -> bool {
    event.kind == "step.finished"
        && data(event, "milestone") == milestone
        && data(event, "generation") == generation
        && data(event, "step") == step
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_m4_resumes_without_repeating_side_effects() {
    let pg = common::TestPg::create().await;
    let store = PgStore::connect(&pg.url, 4).await.expect("connect");
    store.migrate().await.expect("migrate");

    // The worked example, with slow file edits (1 s) so the kill lands between m4's two L2
    // steps even on a loaded machine.
    let stack = SimStack::start("worked_example.json", &["edit_file"], 1_000).await;
    let sim = &stack.sim;
    let env = stack.env();

    let first = Serve::start(Db::Postgres(&pg.url), &env).await;
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/tasks", first.addr))
        .json(
            &json!({"goal": "Rename config key db.url to db.dsn in services A, B, C",
                      "budget": {"tokens": 200_000, "tool_calls": 100, "wall_ms": 600_000}}),
        )
        .send()
        .await
        .expect("POST /v1/tasks");
    assert_eq!(response.status().as_u16(), 202);
    let task: Value = response.json().await.expect("task");
    let id: uuid::Uuid = task["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("id");

    // m4's step lists: generation 1 first, 2 the L2 re-plan (the L1 retry repeated the failed
    // patch and was refused by fingerprint). Its first step done means the second is in flight.
    let before = wait_events(&store, id, "m4's first re-planned step", |events| {
        events.iter().any(|e| is_step(e, "m4", 2, "m4.s1"))
    })
    .await;
    first.kill().await;
    assert!(
        !before.iter().any(|e| is_step(e, "m4", 2, "m4.s2")),
        "the kill must land before m4's last step is recorded"
    );

    let second = Serve::start(Db::Postgres(&pg.url), &env).await;
    let events = wait_events(&store, id, "the task to finish", |events| {
        events
            .iter()
            .any(|e| cairn::domain::event::kinds::is_terminal(&e.kind))
    })
    .await;
    let task = store
        .get_task("default", id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(
        task.status,
        TaskStatus::Succeeded,
        "{:#}",
        task.result.unwrap_or_default()
    );
    assert_eq!(task.attempts, 2, "resumed by a second claim");

    // No event lost or duplicated: dense seqs, and every committed event of the first
    // process is still there, unchanged.
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    assert_eq!(&events[..before.len()], &before[..]);
    assert_eq!(
        events
            .iter()
            .filter(|e| is_step(e, "m4", 2, "m4.s1"))
            .count(),
        1
    );

    // After the restart m4's check ran first, before any other m4 work.
    let resumed_at = events
        .iter()
        .position(|e| e.kind == "task.claimed" && e.seq > before.last().map_or(0, |l| l.seq))
        .expect("second claim");
    let next_m4 = events[resumed_at..]
        .iter()
        .find(|e| data(e, "milestone") == "m4" && !e.kind.starts_with("ledger."))
        .expect("m4 work after the restart");
    assert_eq!(next_m4.kind, "monitor.decided");
    assert_eq!(data(next_m4, "cause"), "resume");

    // Side effects at most once by content: one edit_file identity per distinct action
    // (a/config.py, b/settings.py, c/config.py however often m4's lists repeat it, and
    // c/start.sh), whatever the crash cut short. A call in flight at the kill has no receipt,
    // so the resumed step sends it again under the same key.
    let stats = sim.stats();
    let edits = &stats.tools["edit_file"];
    assert_eq!(
        (edits.distinct_keys, edits.distinct_args),
        (4, 4),
        "{edits:?}"
    );
    assert_eq!(stats.tools["search"].calls, 1, "m1 was not redone");

    second.kill().await;
    drop(store);
    pg.drop_database().await;
}

/// The direct route commits a round's steps with the round, and each observation with the move
/// past its step: killed while the round's tool call is in flight, the resumed task runs that
/// step (it is not skipped) before it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_direct_call_resumes_at_the_interrupted_step() {
    let pg = common::TestPg::create().await;
    let store = PgStore::connect(&pg.url, 2).await.expect("connect");
    store.migrate().await.expect("migrate");
    let stack = SimStack::start("direct_question.toml", &["get_version"], 2000).await;
    let env = stack.env();
    let first = Serve::start(Db::Postgres(&pg.url), &env).await;
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/tasks", first.addr))
        .json(
            &json!({"goal": "What version of service A is deployed?", "strategy": "direct",
                     "budget": {"tokens": 20_000, "tool_calls": 10, "wall_ms": 600_000}}),
        )
        .send()
        .await
        .expect("POST /v1/tasks");
    assert_eq!(response.status().as_u16(), 202);
    let task: Value = response.json().await.expect("task");
    let id: uuid::Uuid = task["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("id");
    let before = wait_events(&store, id, "the first direct round", |events| {
        events.iter().any(|e| e.kind == "direct.round")
    })
    .await;
    first.kill().await;
    assert!(
        !before.iter().any(|e| e.kind == "step.finished"),
        "the kill must land while the round's tool call is in flight"
    );

    let second = Serve::start(Db::Postgres(&pg.url), &env).await;
    let events = wait_events(&store, id, "the task to finish", |events| {
        events
            .iter()
            .any(|e| cairn::domain::event::kinds::is_terminal(&e.kind))
    })
    .await;
    let task = store
        .get_task("default", id)
        .await
        .expect("get")
        .expect("task");
    let result = task.result.clone().unwrap_or_default();
    assert_eq!(task.status, TaskStatus::Succeeded, "{result:#}");
    assert_eq!(result["metrics"]["steps_completed"], 1, "{result:#}");
    let steps: Vec<&Event> = events
        .iter()
        .filter(|e| e.kind == "step.finished")
        .collect();
    assert_eq!(
        steps.len(),
        1,
        "the interrupted step ran once after the restart"
    );
    assert_eq!(data(steps[0], "ok"), true);
    // Round 1 asked for the step, round 2 answered: no round was asked twice or skipped.
    let rounds: Vec<Value> = events
        .iter()
        .filter(|e| e.kind == "direct.round")
        .map(|e| data(e, "round"))
        .collect();
    assert_eq!(rounds, vec![json!(1), json!(2)]);
    second.kill().await;
    drop(store);
    pg.drop_database().await;
}
