//! The LLM client against the in-process simulator: structured output, usage, headers, and
//! every injected fault (retries happen and stop at the bound, classification is right,
//! `Retry-After` is respected). Elapsed time is only ever checked as a lower bound.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::config::{LlmEndpoint, Secret};
use cairn::llm::{
    ChatMessage, ChatRequest, Endpoints, FailureClass, LlmClient, LlmError, Purpose, RetryPolicy,
};
use cairn::sim::scenario::{Reply, Scenario, ScriptedUsage};
use cairn::sim::{SimServer, SimStats};
use serde_json::{Value, json};
use uuid::Uuid;

const ATTEMPTS: u32 = 3;

fn scenario_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

fn local() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

async fn sim(name: &str) -> SimServer {
    let scenario = Scenario::load(&scenario_file(name)).expect("scenario loads");
    SimServer::start(scenario, local())
        .await
        .expect("sim starts")
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: ATTEMPTS,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        max_retry_after: Duration::from_secs(5),
        // Generous for a loaded machine; only the hang fault ever waits it out.
        timeout: Duration::from_secs(1),
    }
}

fn client(server: &SimServer) -> LlmClient {
    LlmClient::new(Endpoints::uniform(server.llm_endpoint()), policy()).expect("client")
}

fn gate_schema() -> Value {
    json!({
        "type": "object",
        "required": ["est_tool_calls", "touches_writes", "targets", "goal_kind"],
        "properties": {
            "est_tool_calls": {"type": "integer", "minimum": 0},
            "touches_writes": {"type": "boolean"},
            "targets": {"type": "integer", "minimum": 0},
            "goal_kind": {"type": "string"}
        }
    })
}

fn plan_schema() -> Value {
    json!({"type": "object", "required": ["milestones"],
           "properties": {"milestones": {"type": "array", "minItems": 1}}})
}

fn request(purpose: Purpose, task: Uuid) -> ChatRequest {
    let schema = match purpose {
        Purpose::Gate => gate_schema(),
        Purpose::Strategic => plan_schema(),
        Purpose::Tactical => json!({"type": "object"}),
        Purpose::Verifier => json!({"type": "object", "required": ["verdict"],
                                    "properties": {"verdict": {"enum": ["pass", "fail"]}}}),
    };
    ChatRequest::new(
        purpose,
        vec![
            ChatMessage::system("You are a test."),
            ChatMessage::user("Rename db.url to db.dsn in services A, B and C"),
        ],
    )
    .task(task)
    .json_output(purpose.as_str(), schema)
}

fn calls(stats: &SimStats, purpose: &str) -> u64 {
    stats.llm.by_purpose.get(purpose).copied().unwrap_or(0)
}

#[tokio::test]
async fn structured_output_usage_and_headers_reach_the_simulator() {
    let server = sim("worked_example.json").await;
    let client = client(&server);
    let task = Uuid::now_v7();

    let gate = client
        .complete(&request(Purpose::Gate, task))
        .await
        .expect("gate answers");
    assert_eq!(gate.json.as_ref().expect("json")["targets"], 3);
    assert_eq!(gate.usage.total_tokens, 300);
    assert!(!gate.usage.estimated);
    assert_eq!(
        (gate.model.as_str(), gate.simulated, gate.attempts),
        ("cairn-sim", true, 1)
    );

    // Matched on milestone and attempt: m4's L1 retry (attempt 2) and L2 re-plan (attempt 3).
    for (attempt, tokens, steps) in [(2u32, 17_000, 1usize), (3, 15_000, 2)] {
        let tactical = client
            .complete(&request(Purpose::Tactical, task).milestone("m4", attempt))
            .await
            .expect("tactical answers");
        assert_eq!(tactical.usage.total_tokens, tokens);
        let json = tactical.json.expect("json");
        assert_eq!(json["steps"].as_array().map(Vec::len), Some(steps));
    }

    let stats = server.stats();
    let seen = &stats.llm.requests;
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].purpose.as_deref(), Some("gate"));
    assert_eq!(seen[0].task, Some(task.to_string()));
    assert!(seen[0].response_format, "response_format is sent");
    assert_eq!(
        (seen[2].milestone.as_deref(), seen[2].attempt),
        (Some("m4"), Some(3))
    );
    assert_eq!(stats.llm.tokens, 300 + 17_000 + 15_000);
}

#[tokio::test]
async fn http_5xx_is_retried_and_stops_at_the_bound() {
    let server = sim("fault_http_500.json").await;
    let client = client(&server);
    let task = Uuid::now_v7();

    // Two 500s, then an answer: the third request succeeds.
    let gate = client
        .complete(&request(Purpose::Gate, task))
        .await
        .expect("recovers after two 500s");
    assert_eq!(gate.attempts, 3);
    assert_eq!(calls(&server.stats(), "gate"), 3);

    // 503 on every request: exactly ATTEMPTS requests, then a transient error.
    let error = client
        .complete(&request(Purpose::Verifier, task))
        .await
        .expect_err("always 503");
    assert!(
        matches!(error, LlmError::Server { status: 503, .. }),
        "{error}"
    );
    assert_eq!(error.class(), FailureClass::Transient);
    assert_eq!(error.attempts(), ATTEMPTS);
    assert_eq!(calls(&server.stats(), "verifier"), u64::from(ATTEMPTS));
}

#[tokio::test]
async fn rate_limits_honour_retry_after() {
    let server = sim("fault_rate_limit.json").await;
    let client = client(&server);
    let task = Uuid::now_v7();

    // 429 with Retry-After: 1 once: the retry waits at least a second (backoff alone is <=100ms).
    let started = Instant::now();
    let gate = client
        .complete(&request(Purpose::Gate, task))
        .await
        .expect("recovers after one 429");
    assert_eq!(gate.attempts, 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    // 429 every time: ATTEMPTS requests, each retry after >= 1s, then rate_limited.
    let started = Instant::now();
    let error = client
        .complete(&request(Purpose::Verifier, task))
        .await
        .expect_err("always 429");
    assert!(
        matches!(error, LlmError::RateLimited { retry_after: Some(after), .. } if after == Duration::from_secs(1)),
        "{error}"
    );
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::Transient, ATTEMPTS)
    );
    assert!(started.elapsed() >= Duration::from_secs(u64::from(ATTEMPTS - 1)));
    assert_eq!(calls(&server.stats(), "verifier"), u64::from(ATTEMPTS));

    // Retry-After: 3600 is beyond max_retry_after: give up at once, without waiting.
    let error = client
        .complete(&request(Purpose::Strategic, task))
        .await
        .expect_err("asks for an hour");
    assert!(matches!(error, LlmError::RateLimited { .. }), "{error}");
    assert_eq!(error.attempts(), 1);
    assert_eq!(calls(&server.stats(), "strategic"), 1);
}

#[tokio::test]
async fn hangs_time_out_and_are_retried_up_to_the_bound() {
    let server = sim("fault_hang.json").await;
    let client = client(&server);
    let task = Uuid::now_v7();

    let gate = client
        .complete(&request(Purpose::Gate, task))
        .await
        .expect("second request answers");
    assert_eq!(gate.attempts, 2);

    let started = Instant::now();
    let error = client
        .complete(&request(Purpose::Verifier, task))
        .await
        .expect_err("always hangs");
    assert!(matches!(error, LlmError::Timeout { .. }), "{error}");
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::Transient, ATTEMPTS)
    );
    // Each attempt waited for the whole per-request timeout.
    assert!(started.elapsed() >= policy().timeout * ATTEMPTS);
    assert_eq!(calls(&server.stats(), "verifier"), u64::from(ATTEMPTS));
}

#[tokio::test]
async fn malformed_json_is_invalid_output_and_not_retried() {
    let server = sim("fault_malformed_json.json").await;
    let client = client(&server);
    let task = Uuid::now_v7();

    let error = client
        .complete(&request(Purpose::Strategic, task))
        .await
        .expect_err("broken JSON");
    let LlmError::InvalidOutput {
        messages, usage, ..
    } = &error
    else {
        panic!("expected invalid output, got {error}");
    };
    assert!(!messages.is_empty());
    // The tokens of the bad answer were spent and are reported for the ledger.
    assert_eq!(usage.total_tokens, 1_300);
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::InvalidOutput, 1)
    );
    assert_eq!(calls(&server.stats(), "strategic"), 1);

    // The fault applies once per task: the planner's next try gets a valid plan.
    let plan = client
        .complete(&request(Purpose::Strategic, task))
        .await
        .expect("valid the second time");
    assert!(plan.json.expect("json")["milestones"].is_array());
}

#[tokio::test]
async fn truncated_bodies_are_transient_and_retried() {
    let server = sim("fault_truncated_body.json").await;
    let client = client(&server);
    let task = Uuid::now_v7();

    let gate = client
        .complete(&request(Purpose::Gate, task))
        .await
        .expect("whole the second time");
    assert_eq!(gate.attempts, 2);

    let error = client
        .complete(&request(Purpose::Verifier, task))
        .await
        .expect_err("always cut");
    assert!(matches!(error, LlmError::BadResponse { .. }), "{error}");
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::Transient, ATTEMPTS)
    );
    assert_eq!(calls(&server.stats(), "verifier"), u64::from(ATTEMPTS));
}

fn inline_scenario(replies: Vec<Reply>, generic_fallback: bool) -> Scenario {
    Scenario {
        generic_fallback,
        replies,
        ..Scenario::generic()
    }
}

fn text_reply(purpose: Purpose, content: &str, usage: Option<ScriptedUsage>) -> Reply {
    Reply {
        purpose,
        milestone: None,
        attempt: None,
        input_contains: None,
        json: None,
        content: Some(content.to_string()),
        usage,
        latency_ms: None,
        fault: None,
        note: None,
    }
}

#[tokio::test]
async fn prose_around_json_is_accepted_and_missing_usage_is_estimated() {
    let scenario = inline_scenario(
        vec![
            text_reply(
                Purpose::Verifier,
                "Let me check.\n```json\n{\"verdict\": \"pass\", \"reason\": \"ok\"}\n```\n",
                None,
            ),
            text_reply(Purpose::Gate, "I would say it needs a plan.", None),
        ],
        true,
    );
    let server = SimServer::start(scenario, local()).await.expect("sim");
    let client = client(&server);
    let task = Uuid::now_v7();

    let verdict = client
        .complete(&request(Purpose::Verifier, task))
        .await
        .expect("fenced JSON is extracted");
    assert_eq!(verdict.json.expect("json")["verdict"], "pass");
    assert!(verdict.usage.estimated && verdict.usage.total_tokens > 0);

    let error = client
        .complete(&request(Purpose::Gate, task))
        .await
        .expect_err("prose only");
    assert_eq!(error.class(), FailureClass::InvalidOutput);
    let LlmError::InvalidOutput { usage, .. } = error else {
        unreachable!()
    };
    assert!(usage.estimated);

    // Without an output schema the text is returned as is.
    let plain = client
        .complete(&ChatRequest::new(
            Purpose::Gate,
            vec![ChatMessage::user("hi")],
        ))
        .await
        .expect("text");
    assert_eq!(
        (plain.text.as_str(), plain.json),
        ("I would say it needs a plan.", None)
    );
}

#[tokio::test]
async fn refusals_and_missing_endpoints_are_permanent() {
    let server = SimServer::start(inline_scenario(Vec::new(), false), local())
        .await
        .expect("sim");
    let error = client(&server)
        .complete(&request(Purpose::Gate, Uuid::now_v7()))
        .await
        .expect_err("nothing scripted, no generic fallback: 404");
    assert!(
        matches!(error, LlmError::Refused { status: 404, .. }),
        "{error}"
    );
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::Permanent, 1)
    );
    assert_eq!(server.stats().llm.calls, 1);

    let only_gate = [(
        "gate".to_string(),
        LlmEndpoint {
            base_url: server.base_url().to_string(),
            api_key: Secret::default(),
            model: "m".into(),
        },
    )]
    .into_iter()
    .collect();
    let error = Endpoints::from_config(&only_gate).expect_err("strategic has no endpoint");
    assert!(error.contains("llm.strategic"), "{error}");
    assert_eq!(Endpoints::from_config(&Default::default()), Ok(None));

    // Nothing listens on a closed port: a connect error, retried, transient.
    let closed = std::net::TcpListener::bind(local()).expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let nowhere = LlmClient::new(
        Endpoints::uniform(LlmEndpoint {
            base_url: format!("http://127.0.0.1:{port}"),
            api_key: Secret::default(),
            model: "m".into(),
        }),
        policy(),
    )
    .expect("client");
    let error = nowhere
        .complete(&request(Purpose::Gate, Uuid::now_v7()))
        .await
        .expect_err("nothing listens");
    assert!(matches!(error, LlmError::Connect { .. }), "{error}");
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::Transient, ATTEMPTS)
    );
}

/// Collects log output for the key-leak test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_api_key_is_sent_but_never_logged_or_shown() {
    const KEY: &str = "sk-cairn-test-do-not-leak-4f9a";
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // Global, not scoped: a scoped subscriber misses callsites that other test threads hit
    // first. Other tests' lines land here too; none of them ever holds the key.
    tracing::subscriber::set_global_default(subscriber).expect("only this test sets it");

    let server = sim("fault_http_500.json").await;
    let endpoint = LlmEndpoint {
        api_key: Secret::new(KEY),
        ..server.llm_endpoint()
    };
    let client = LlmClient::new(Endpoints::uniform(endpoint), policy()).expect("client");
    let task = Uuid::now_v7();
    let ok = client
        .complete(&request(Purpose::Gate, task))
        .await
        .expect("gate recovers");
    let error = client
        .complete(&request(Purpose::Verifier, task))
        .await
        .expect_err("verifier fails");

    let stats = server.stats();
    assert!(
        stats.llm.requests.iter().all(|r| r.authorized),
        "the key is sent as a bearer token"
    );
    let logged =
        String::from_utf8_lossy(&logs.0.lock().unwrap_or_else(|p| p.into_inner())).to_string();
    assert!(logged.contains("retrying"), "retries were logged: {logged}");
    let shown = [
        logged,
        error.to_string(),
        format!("{error:?}"),
        format!("{client:?}"),
        format!("{ok:?}"),
        serde_json::to_string(&stats).expect("stats"),
    ];
    for text in shown {
        assert!(!text.contains(KEY), "the key leaked into: {text}");
    }
}

/// A client of the one local endpoint at `base_url`, without an API key.
fn local_client(base_url: String) -> LlmClient {
    LlmClient::new(
        Endpoints::uniform(LlmEndpoint {
            base_url,
            api_key: Secret::default(),
            model: "local".into(),
        }),
        policy(),
    )
    .expect("client")
}

/// Serves `app` on a free loopback port; returns its base URL.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind(local()).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

/// A server that refuses `response_format` with HTTP 400, as some OpenAI-compatible servers
/// do, and answers plain requests with prose around JSON.
async fn format_refusing_server() -> (String, Arc<Mutex<Vec<bool>>>) {
    use axum::http::StatusCode;
    let seen: Arc<Mutex<Vec<bool>>> = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let log = log.clone();
            async move {
                let with_format = body.get("response_format").is_some();
                log.lock().unwrap_or_else(|p| p.into_inner()).push(with_format);
                if with_format {
                    return (
                        StatusCode::BAD_REQUEST,
                        axum::Json(json!({"error": {"message": "unsupported parameter: response_format"}})),
                    );
                }
                (
                    StatusCode::OK,
                    axum::Json(json!({
                        "choices": [{"message": {"role": "assistant",
                            "content": "Verdict follows. {\"verdict\": \"fail\", \"reason\": \"tests red\"}"}}],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 5}
                    })),
                )
            }
        }),
    );
    (serve(app).await, seen)
}

#[tokio::test]
async fn a_refused_response_format_is_dropped_and_the_answer_still_validated() {
    let (base_url, seen) = format_refusing_server().await;
    let client = local_client(base_url);
    let verdict = client
        .complete(&request(Purpose::Verifier, Uuid::now_v7()))
        .await
        .expect("answers without response_format");
    assert_eq!(verdict.json.expect("json")["verdict"], "fail");
    assert_eq!((verdict.usage.total_tokens, verdict.attempts), (12, 2));
    assert!(!verdict.simulated);
    assert_eq!(
        *seen.lock().unwrap_or_else(|p| p.into_inner()),
        vec![true, false]
    );
}

/// A server that records each request body and answers one verdict.
async fn recording_server() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let log = log.clone();
            async move {
                log.lock().unwrap_or_else(|p| p.into_inner()).push(body);
                axum::Json(json!({
                    "choices": [{"message": {"role": "assistant",
                        "content": "{\"verdict\": \"pass\", \"reason\": \"ok\"}"}}],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 5}
                }))
            }
        }),
    );
    (serve(app).await, seen)
}

#[tokio::test]
async fn an_exploring_re_ask_is_sent_warmer_and_other_calls_keep_the_endpoint_temperature() {
    use cairn::engine::runtime::adapters::{EXPLORE_TEMPERATURE, LlmModels};
    use cairn::engine::runtime::ports::{ModelCall, ModelPort, Purpose as Asked, Sampling};
    let (base_url, seen) = recording_server().await;
    let client = local_client(base_url);
    let models = LlmModels::new(client);
    for sampling in [Sampling::Endpoint, Sampling::Explore] {
        models
            .complete(ModelCall {
                purpose: Asked::Verifier,
                task_id: Uuid::now_v7(),
                milestone: None,
                attempt: 1,
                prompt: "judge".into(),
                input: json!({"goal": "g"}),
                turns: Vec::new(),
                schema: Some(json!({"type": "object"})),
                sampling,
                max_tokens: 1024,
                retry_max_tokens: 2048,
            })
            .await
            .expect("answer");
    }
    let bodies = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[0].get("temperature").is_none(), "{}", bodies[0]);
    let sent = bodies[1]["temperature"].as_f64().expect("temperature sent");
    assert!(
        (sent - f64::from(EXPLORE_TEMPERATURE)).abs() < 1e-6,
        "{sent}"
    );
}
