//! What a reader of a task sees, through the HTTP API against scenario files, on both
//! backends: a running task's progress (milestones done of the plan's, the ones under way,
//! spend so far), a finished task's artifacts in its result and at `/artifacts`, one ledger
//! shape in the result and at `/ledger`, events filtered by kind (JSON pages and SSE), and
//! timestamps with three fraction digits.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;

use std::time::Duration;

use engine_stack::Stack;
use serde_json::Value;

const GOAL: &str = "Rename db.url to db.dsn in services A and B, and deploy service A";

#[tokio::test]
async fn a_task_reads_well_on_sqlite() {
    reads_well(Stack::start("l3_sibling_in_flight.json").await).await;
}

#[tokio::test]
async fn a_task_reads_well_on_postgres() {
    reads_well(Stack::start_pg("l3_sibling_in_flight.json").await).await;
}

/// Polls the task until it is seen running with a plan, and returns that view (the scenario's
/// m2 edit takes 2.5 s, so the task runs long enough to be seen).
async fn seen_running(stack: &Stack, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, task) = stack.get(&format!("/v1/tasks/{id}")).await;
        let planned = task["progress"]["milestones_total"].as_u64().unwrap_or(0) > 0;
        if task["status"] == "running" && planned {
            return task;
        }
        assert_ne!(task["status"], "succeeded", "never seen running: {task:#}");
        assert!(tokio::time::Instant::now() < deadline, "{task:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn reads_well(stack: Stack) {
    let id = stack.submit(GOAL, "v2", 100_000).await;
    let running = seen_running(&stack, &id).await;
    let progress = &running["progress"];
    assert_eq!(progress["phase"], "execute", "{running:#}");
    let current = progress["current"].as_array().expect("current milestones");
    assert!(!current.is_empty(), "a milestone is under way: {running:#}");
    assert!(current.iter().all(|m| m["title"].as_str().is_some()));
    assert!(progress["milestones_done"].as_u64() < progress["milestones_total"].as_u64());
    assert!(
        progress["spent"]["tokens"].as_u64() > Some(0),
        "{running:#}"
    );

    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let result = &task["result"];
    let done = &task["progress"];
    assert_eq!(
        done["milestones_done"], done["milestones_total"],
        "{task:#}"
    );
    assert_eq!(done["current"], serde_json::json!([]));
    assert_eq!(
        done["spent"], result["spend"],
        "progress ends at the result's spend"
    );

    // The artifacts: in the result by milestone, and listed at /artifacts.
    let (status, listed) = stack.get(&format!("/v1/tasks/{id}/artifacts")).await;
    assert_eq!(status, 200, "{listed}");
    let items = listed["items"].as_array().expect("items");
    assert!(!items.is_empty(), "{listed:#}");
    for item in items {
        let (milestone, name) = (
            item["milestone_id"].as_str().unwrap(),
            item["name"].as_str(),
        );
        assert!(
            result["artifacts"][milestone].get(name.unwrap()).is_some(),
            "{item:#} is in the result: {:#}",
            result["artifacts"]
        );
    }

    // One ledger shape: the result's books are the books the entries replay to.
    let (_, ledger) = stack.get(&format!("/v1/tasks/{id}/ledger")).await;
    assert_eq!(result["ledger"], ledger["units"], "{:#}", result["ledger"]);
    assert!(ledger["units"]["tokens"]["initial_reserve"].as_i64() > Some(0));
    let (_, plan) = stack.get(&format!("/v1/tasks/{id}/plans/1")).await;
    assert!(
        plan["plan"]["ledger"]["tool_calls"]["milestones"].is_object(),
        "{plan:#}"
    );

    filtered_events(&stack, &id).await;
    three_digit_times(&task);
    let events = stack.events(&id).await;
    three_digit_times(&events[0]);
    stack.stop().await;
}

/// `?kinds=`: a family and an exact kind, in pages of one and over SSE; the terminal event
/// always comes; an unknown name is a 400 in plain words.
async fn filtered_events(stack: &Stack, id: &str) {
    let all = stack.events(id).await;
    let wanted = |e: &&Value| {
        let kind = e["kind"].as_str().unwrap_or_default();
        kind.starts_with("ledger.") || kind == "plan.accepted" || kind == "task.succeeded"
    };
    let expected: Vec<i64> = all
        .iter()
        .filter(wanted)
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert!(expected.len() > 3, "{all:#?}");

    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let path =
            format!("/v1/tasks/{id}/events?kinds=ledger,plan.accepted&limit=1&after={after}");
        let (status, page) = stack.get(&path).await;
        assert_eq!(status, 200, "{page}");
        let items = page["items"].as_array().expect("items");
        assert!(items.len() <= 1);
        seen.extend(items.iter().map(|e| e["seq"].as_i64().unwrap()));
        after = page["next_after"].as_i64().unwrap();
        if page["terminal"] == true {
            break;
        }
        assert!(
            !items.is_empty(),
            "a page is empty only at the end: {page:#}"
        );
    }
    assert_eq!(seen, expected);

    let response = stack
        .client
        .get(format!(
            "{}/v1/tasks/{id}/events?kinds=ledger,plan.accepted",
            stack.base
        ))
        .send()
        .await
        .expect("SSE");
    let text = response
        .text()
        .await
        .expect("the stream ends after the terminal event");
    let ids: Vec<i64> = text
        .lines()
        .filter_map(|line| line.strip_prefix("id: "))
        .map(|seq| seq.parse().unwrap())
        .collect();
    assert_eq!(ids, expected, "{text}");

    let (status, problem) = stack
        .get(&format!("/v1/tasks/{id}/events?kinds=ledger,stepz"))
        .await;
    assert_eq!(status, 400, "{problem}");
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("\"stepz\"") && detail.contains("milestone"),
        "{detail}"
    );
}

/// Every `*_at` field, at any depth, has exactly three fraction digits and a `Z`.
fn three_digit_times(value: &Value) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                if let (true, Some(text)) = (key.ends_with("_at"), item.as_str()) {
                    let fraction = text.rsplit('.').next().unwrap_or_default();
                    assert!(
                        fraction.len() == 4 && fraction.ends_with('Z'),
                        "{key} = {text}"
                    );
                }
                three_digit_times(item);
            }
        }
        Value::Array(items) => items.iter().for_each(three_digit_times),
        _ => {}
    }
}
