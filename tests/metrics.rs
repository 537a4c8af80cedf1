//! `GET /metrics` after a scripted run of known shape, through the HTTP API against the worked
//! example: the OpenMetrics text parses with a Prometheus text parser, and its counters equal
//! the run's (tasks, steps, model calls and tokens, tool calls, repairs, gate decisions,
//! requests), read from the task's events, its result and the simulator's own counts. No
//! task id appears anywhere in it.
// Test code: a failed set-up is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod engine_stack;

use engine_stack::Stack;
use prometheus_parse::{Sample, Scrape, Value};

const GOAL: &str = "Rename config key db.url to db.dsn in services A, B, C";

/// The sum of a counter's samples whose labels include every pair of `labels`.
fn total(samples: &[Sample], metric: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.metric == metric)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            Value::Counter(v) | Value::Untyped(v) | Value::Gauge(v) => v,
            _ => 0.0,
        })
        .sum()
}

async fn scrape(stack: &Stack) -> (String, Vec<Sample>) {
    let response = stack
        .client
        .get(format!("{}/metrics", stack.base))
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = response.text().await.expect("text");
    let lines = text.lines().map(|line| Ok(line.to_string()));
    let parsed = Scrape::parse(lines).expect("the Prometheus text parser reads it");
    (text, parsed.samples)
}

#[tokio::test]
async fn metrics_count_what_the_run_did() {
    let stack = Stack::start("worked_example.json").await;
    let id = stack.submit(GOAL, "auto", 200_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;
    let count = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count() as f64;
    let (text, samples) = scrape(&stack).await;
    assert!(!text.contains(&id), "no task id in the metrics");

    let auto = [("strategy", "auto")];
    assert_eq!(
        total(&samples, "cairn_tasks_submitted_total", &auto),
        1.0,
        "{text}"
    );
    let succeeded = [("status", "succeeded"), ("strategy", "auto")];
    assert_eq!(
        total(&samples, "cairn_tasks_finished_total", &succeeded),
        1.0
    );

    let steps = total(&samples, "cairn_steps_total", &[]);
    assert_eq!(steps, count("step.finished"), "{text}");
    assert!(steps >= 4.0, "the worked example takes several steps");
    let repairs = total(&samples, "cairn_repairs_total", &[]);
    assert_eq!(repairs, count("repair.started"));
    let metrics = &task["result"]["metrics"];
    let rungs = [
        "repairs_retry_step",
        "repairs_replan_milestone",
        "repairs_replan_strategy",
    ];
    let reported: f64 = rungs
        .iter()
        .map(|r| metrics[r].as_f64().unwrap_or(0.0))
        .sum();
    assert_eq!(repairs, reported, "{metrics:#}");
    assert_eq!(
        total(&samples, "cairn_gate_decisions_total", &[]),
        count("gate.decided")
    );

    let stats = stack.sim.stats();
    let model_calls = total(&samples, "cairn_model_calls_total", &[]);
    assert_eq!(model_calls, stats.llm.calls as f64, "{text}");
    let input = total(
        &samples,
        "cairn_model_tokens_total",
        &[("direction", "input")],
    );
    let output = total(
        &samples,
        "cairn_model_tokens_total",
        &[("direction", "output")],
    );
    assert!(input > 0.0 && output > 0.0, "{text}");
    assert_eq!(
        input + output,
        task["result"]["spend"]["tokens"].as_f64().unwrap()
    );
    let tool_calls: u64 = stats.tools.values().map(|t| t.calls).sum();
    // Every call that reached a tool, and the identical edit its receipt answered instead.
    let reached = total(&samples, "cairn_tool_calls_total", &[]);
    let receipts = total(
        &samples,
        "cairn_tool_calls_total",
        &[("outcome", "receipt")],
    );
    assert_eq!(reached - receipts, tool_calls as f64, "{text}");
    assert_eq!(receipts, 1.0, "{text}");
    let created = [
        ("method", "POST"),
        ("route", "/v1/tasks"),
        ("status", "202"),
    ];
    assert_eq!(total(&samples, "cairn_http_requests_total", &created), 1.0);
    // Route templates, never a concrete path (the parser does not read braces in a label).
    let polled =
        "cairn_http_requests_total{method=\"GET\",route=\"/v1/tasks/{id}\",status=\"200\"}";
    assert!(text.contains(polled), "{text}");
    assert!(
        text.contains("cairn_step_duration_seconds_bucket"),
        "{text}"
    );
    assert!(text.contains("cairn_db_pool_in_use "), "{text}");
    stack.stop().await;
}
