//! OpenTelemetry traces from the real `cairn serve`, through a real OTLP/HTTP receiver on
//! 127.0.0.1:0 (JSON encoding): the worked example, run against the scenario simulator, exports
//! one `invoke_workflow` span for the task attempt, a `plan` span around each planner call, a
//! `chat {model}` span per model call with the GenAI attributes (model, input and output tokens)
//! and an `execute_tool {tool}` span per tool call, all in one trace; the model requests carry a
//! W3C `traceparent` naming their `chat` span; and no secret reaches the exported spans.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use cairn::sim::SimServer;
use serde_json::{Value, json};
use serve_process::{Db, Serve};

const GOAL: &str = "Rename config key db.url to db.dsn in services A, B, C";
const API_KEY: &str = "sk-test-never-exported-4711";
const WAIT: Duration = Duration::from_secs(60);

type Received = Arc<Mutex<Vec<Value>>>;

/// An OTLP/HTTP receiver: every export request's JSON body, kept.
async fn receiver() -> (String, Received) {
    let received: Received = Arc::default();
    async fn export(State(into): State<Received>, body: Bytes) -> &'static str {
        let value: Value = serde_json::from_slice(&body).expect("OTLP JSON body");
        into.lock().unwrap().push(value);
        "{}"
    }
    let app = Router::new()
        .route("/v1/traces", post(export))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, received)
}

/// One exported span, its attributes flattened to JSON values.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace: String,
    id: String,
    parent: String,
    attributes: BTreeMap<String, Value>,
    status: i64,
}

fn spans(received: &Received) -> Vec<Span> {
    let bodies = received.lock().unwrap().clone();
    let mut out = Vec::new();
    for body in &bodies {
        for resource in body["resourceSpans"].as_array().into_iter().flatten() {
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    let attributes = span["attributes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|kv| {
                            let value = kv["value"].as_object().and_then(|v| v.values().next());
                            (
                                kv["key"].as_str().unwrap().to_string(),
                                value.cloned().unwrap(),
                            )
                        })
                        .collect();
                    out.push(Span {
                        name: span["name"].as_str().unwrap().to_string(),
                        trace: span["traceId"].as_str().unwrap().to_string(),
                        id: span["spanId"].as_str().unwrap().to_string(),
                        parent: span["parentSpanId"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        attributes,
                        status: match &span["status"]["code"] {
                            Value::String(code) if code.contains("ERROR") => 2,
                            code => code.as_i64().unwrap_or(0),
                        },
                    });
                }
            }
        }
    }
    out
}

/// An integer attribute (OTLP JSON writes 64-bit integers as strings).
fn int(span: &Span, key: &str) -> i64 {
    match &span.attributes[key] {
        Value::String(text) => text.parse().unwrap(),
        other => other.as_i64().unwrap(),
    }
}

async fn run_worked_example(serve: &Serve) -> String {
    let client = reqwest::Client::new();
    let base = format!("http://{}", serve.addr);
    let created: Value = client
        .post(format!("{base}/v1/tasks"))
        .json(&json!({"goal": GOAL, "strategy": "v2", "budget": {"tokens": 200_000}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("task id").to_string();
    let started = Instant::now();
    loop {
        let task: Value = client
            .get(format!("{base}/v1/tasks/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if task["status"] == "succeeded" {
            return id;
        }
        assert!(
            !["failed", "cancelled", "budget_exhausted"]
                .contains(&task["status"].as_str().unwrap()),
            "{task:#}"
        );
        assert!(started.elapsed() < WAIT, "the task did not end: {task:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What one traced run of the worked example left: the spans, the simulator, the task id and
/// everything the receiver got.
struct Traced {
    all: Vec<Span>,
    /// The task as `GET /v1/tasks/{id}` answered once it ended.
    task: Value,
    workflow: Span,
    sim: SimServer,
    id: String,
    received: Received,
}

/// Runs the worked example on a `cairn serve` exporting to a fresh receiver, with `env` added,
/// and waits until the attempt's span (the last to end) has been exported.
async fn traced_run(env: &[(&str, &str)]) -> Traced {
    let (otlp, received) = receiver().await;
    let sim = SimServer::start_file(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/worked_example.json"),
        0,
    )
    .await
    .expect("simulator");
    let registry = reqwest::get(format!("{}/sim/registry.json", sim.base_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let db = common::TestSqlite::create();
    let tools_file = db.path.with_extension("tools.json");
    std::fs::write(&tools_file, registry).unwrap();
    let mut all_env = vec![
        ("CAIRN_TEST_MINIMAL_ENGINE", "false"),
        ("CAIRN_LLM_DEFAULT_BASE_URL", sim.base_url()),
        ("CAIRN_LLM_DEFAULT_MODEL", "cairn-sim"),
        ("CAIRN_LLM_DEFAULT_API_KEY", API_KEY),
        ("CAIRN_TOOLS_FILE", tools_file.to_str().unwrap()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    all_env.extend_from_slice(env);
    let serve = Serve::start(Db::Sqlite(&db.path), &all_env).await;
    let id = run_worked_example(&serve).await;
    let started = Instant::now();
    let workflow = loop {
        let found = spans(&received)
            .into_iter()
            .find(|s| s.name == "invoke_workflow");
        if let Some(span) = found {
            break span;
        }
        assert!(
            started.elapsed() < WAIT,
            "no invoke_workflow span was exported"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let task: Value = reqwest::get(format!("http://{}/v1/tasks/{id}", serve.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    drop(serve);
    Traced {
        all: spans(&received),
        task,
        workflow,
        sim,
        id,
        received,
    }
}

#[tokio::test]
async fn a_task_attempt_is_one_trace_of_genai_spans_and_its_requests_carry_traceparent() {
    let Traced {
        all,
        task,
        workflow,
        sim,
        id,
        received,
    } = traced_run(&[]).await;
    assert_eq!(workflow.attributes["cairn.task.id"], json!(id));
    assert_eq!(workflow.attributes["cairn.outcome"], json!("succeeded"));
    assert_eq!(
        workflow.attributes["gen_ai.operation.name"],
        json!("invoke_workflow")
    );
    assert_eq!(int(&workflow, "cairn.budget.tokens"), 200_000);
    assert_eq!(
        int(&workflow, "cairn.plan.version"),
        task["plan_version"].as_i64().unwrap(),
        "the attempt's span names the plan version it wrote last"
    );
    assert!(
        workflow.parent.is_empty(),
        "the attempt is the trace's root"
    );
    let in_trace: Vec<&Span> = all.iter().filter(|s| s.trace == workflow.trace).collect();
    assert_eq!(
        in_trace.len(),
        all.len(),
        "every span is in the task's trace: {all:#?}"
    );

    let chats: Vec<&Span> = all.iter().filter(|s| s.name.starts_with("chat ")).collect();
    let model_calls = sim.stats().llm.requests.len();
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        chats.len(),
        model_calls,
        "one chat span per model call: {names:?}"
    );
    for chat in &chats {
        assert_eq!(chat.name, "chat cairn-sim");
        assert_eq!(chat.attributes["gen_ai.operation.name"], json!("chat"));
        assert_eq!(chat.attributes["gen_ai.request.model"], json!("cairn-sim"));
        assert!(int(chat, "gen_ai.usage.input_tokens") > 0, "{chat:#?}");
        assert!(int(chat, "gen_ai.usage.output_tokens") > 0, "{chat:#?}");
    }
    let by_id: BTreeMap<&str, &Span> = all.iter().map(|s| (s.id.as_str(), s)).collect();
    let planned = chats
        .iter()
        .filter(|c| {
            ["strategic", "tactical"].contains(&c.attributes["cairn.purpose"].as_str().unwrap())
        })
        .collect::<Vec<_>>();
    assert!(!planned.is_empty());
    for chat in planned {
        let plan = by_id[chat.parent.as_str()];
        assert_eq!(plan.name, "plan", "a planner's chat runs in a plan span");
    }
    let verdicts = chats
        .iter()
        .filter(|c| c.attributes.contains_key("cairn.verdict"))
        .count();
    assert!(verdicts > 0, "the verifier's verdict is on its span");

    let tools: Vec<&Span> = all
        .iter()
        .filter(|s| s.name.starts_with("execute_tool "))
        .collect();
    let tool_calls: u64 = sim.stats().tools.values().map(|t| t.calls).sum();
    assert!(
        tools.len() as u64 >= tool_calls && tool_calls > 0,
        "{} spans, {tool_calls} calls",
        tools.len()
    );
    for tool in &tools {
        let name = tool.attributes["gen_ai.tool.name"].as_str().unwrap();
        assert_eq!(tool.name, format!("execute_tool {name}"));
    }
    for tool in &tools {
        // A call that failed is an error span; one a receipt answered is not.
        let outcome = tool.attributes["cairn.tool.outcome"].as_str().unwrap();
        let failed = !["ok", "receipt"].contains(&outcome);
        assert_eq!(tool.status == 2, failed, "{tool:#?}");
    }
    let receipts = tools
        .iter()
        .filter(|t| t.attributes["cairn.tool.outcome"] == "receipt")
        .count();
    assert_eq!(
        receipts, 1,
        "the edit its receipt answered is traced, marked so"
    );

    // Every model request named its chat span in its traceparent.
    for request in sim.stats().llm.requests {
        let traceparent = request
            .traceparent
            .expect("a traceparent on every model request");
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts[1], workflow.trace, "{traceparent}");
        assert!(by_id[parts[2]].name.starts_with("chat "), "{traceparent}");
    }
    let exported = serde_json::to_string(&*received.lock().unwrap()).unwrap();
    assert!(!exported.contains(API_KEY), "a secret reached the traces");
    assert!(
        !exported.contains("gen_ai.input.messages") && !exported.contains(GOAL),
        "no message content unless the operator opts in"
    );
}

/// With the operator's opt-in, each chat span carries what was sent and what came back.
#[tokio::test]
async fn message_content_is_on_the_spans_only_when_the_operator_opts_in() {
    let traced =
        traced_run(&[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")]).await;
    let chats: Vec<&Span> = traced
        .all
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert!(!chats.is_empty());
    for chat in chats {
        let input = chat.attributes["gen_ai.input.messages"].as_str().unwrap();
        let messages: Value = serde_json::from_str(input).unwrap();
        assert_eq!(messages[0]["role"], "system", "{messages:#}");
        assert!(
            input.contains("db.url"),
            "the input names the goal: {input}"
        );
        let output = chat.attributes["gen_ai.output.messages"].as_str().unwrap();
        assert!(output.contains("assistant"), "{output}");
    }
    let exported = serde_json::to_string(&*traced.received.lock().unwrap()).unwrap();
    assert!(!exported.contains(API_KEY), "a secret reached the traces");
}
