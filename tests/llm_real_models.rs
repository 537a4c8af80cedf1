//! What a small real model served by llama.cpp brings: answers cut off at the token limit
//! (retried once with a larger budget, then reported as truncated), endpoints that cannot be
//! reached at all (told apart from other failures), and `/readyz` probing the model endpoints.
//! Every model here is a small axum fake on 127.0.0.1:0.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use cairn::clock::SystemClock;
use cairn::config::{LlmEndpoint, Secret};
use cairn::llm::{
    ChatMessage, ChatRequest, EndpointProbe, Endpoints, FailureClass, LlmClient, LlmError, Purpose,
    RetryPolicy, TRUNCATED_RETRY_MAX_TOKENS,
};
use serde_json::{Value, json};

const KEY: &str = "sk-real-model-secret";

/// One scripted answer: content, finish_reason, HTTP status.
#[derive(Clone)]
struct Answer {
    content: &'static str,
    finish: &'static str,
    status: u16,
}

fn answer(content: &'static str, finish: &'static str) -> Answer {
    Answer {
        content,
        finish,
        status: 200,
    }
}

#[derive(Default)]
struct Script {
    answers: Vec<Answer>,
    /// The `max_tokens` of every request received.
    max_tokens: Vec<Option<u64>>,
}

type Shared = Arc<Mutex<Script>>;

async fn chat(State(script): State<Shared>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let mut script = script.lock().unwrap();
    script
        .max_tokens
        .push(body.get("max_tokens").and_then(Value::as_u64));
    let index = script.max_tokens.len() - 1;
    let answer = script.answers[index.min(script.answers.len() - 1)].clone();
    let status = StatusCode::from_u16(answer.status).unwrap();
    let body = json!({
        "model": "qwen2.5-coder-0.5b",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": answer.content},
            "finish_reason": answer.finish
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    });
    (status, Json(body))
}

/// A fake model answering `answers` in order (the last one repeats); `/v1/models` answers
/// `models_status`.
async fn fake(answers: Vec<Answer>, models_status: u16) -> (String, Shared) {
    let script: Shared = Arc::new(Mutex::new(Script {
        answers,
        max_tokens: Vec::new(),
    }));
    let status = StatusCode::from_u16(models_status).unwrap();
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route(
            "/v1/models",
            get(move || async move { (status, Json(json!({"data": []}))) }),
        )
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), script)
}

fn endpoint(base_url: &str) -> LlmEndpoint {
    LlmEndpoint {
        base_url: base_url.into(),
        api_key: Secret::new(KEY),
        model: "qwen2.5-coder-0.5b".into(),
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 2,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
        max_retry_after: Duration::from_secs(1),
        timeout: Duration::from_secs(2),
    }
}

fn client(base_url: &str) -> LlmClient {
    LlmClient::new(Endpoints::uniform(endpoint(base_url)), policy()).unwrap()
}

fn plan_request() -> ChatRequest {
    let schema = json!({"type": "object", "required": ["milestones"],
                        "properties": {"milestones": {"type": "array", "minItems": 1}}});
    ChatRequest::new(Purpose::Strategic, vec![ChatMessage::user("plan it")])
        .json_output("plan", schema)
}

const CUT: &str = r#"{"milestones": [{"id": "m1", "title": "Look it"#;
const WHOLE: &str = r#"{"milestones": [{"id": "m1"}]}"#;

#[tokio::test]
async fn a_truncated_answer_is_asked_again_with_twice_the_budget() {
    let (base, script) = fake(vec![answer(CUT, "length"), answer(WHOLE, "stop")], 200).await;
    let completion = client(&base)
        .complete(&plan_request().max_tokens(100))
        .await
        .expect("the second answer fits");
    assert_eq!(completion.json, Some(json!({"milestones": [{"id": "m1"}]})));
    assert!(!completion.truncated);
    assert_eq!(completion.attempts, 2);
    // Both answers were spent.
    assert_eq!(completion.usage.total_tokens, 30);
    assert_eq!(script.lock().unwrap().max_tokens, [Some(100), Some(200)]);
}

#[tokio::test]
async fn truncated_twice_is_invalid_output_that_says_so() {
    let (base, script) = fake(vec![answer(CUT, "length")], 200).await;
    let error = client(&base)
        .complete(&plan_request())
        .await
        .expect_err("cut both times");
    assert!(error.is_truncated(), "{error}");
    assert!(!error.is_unreachable());
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::InvalidOutput, 2)
    );
    let LlmError::InvalidOutput {
        truncated,
        messages,
        usage,
        ..
    } = &error
    else {
        panic!("expected invalid output, got {error}");
    };
    assert!(*truncated);
    assert!(
        messages[0].contains("cut off at the token limit"),
        "{messages:?}"
    );
    assert_eq!(usage.total_tokens, 30);
    assert!(error.to_string().contains("cut off at the token limit"));
    assert!(!error.to_string().contains(KEY));
    // No budget was set: the retry asks for the default ceiling.
    assert_eq!(
        script.lock().unwrap().max_tokens,
        [None, Some(u64::from(TRUNCATED_RETRY_MAX_TOKENS))]
    );
}

#[tokio::test]
async fn invalid_but_finished_answers_and_truncated_valid_ones_are_not_retried() {
    let (base, script) = fake(vec![answer(CUT, "stop")], 200).await;
    let error = client(&base)
        .complete(&plan_request().max_tokens(100))
        .await
        .expect_err("broken JSON");
    assert!(!error.is_truncated());
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::InvalidOutput, 1)
    );
    assert_eq!(script.lock().unwrap().max_tokens.len(), 1);

    let (base, script) = fake(vec![answer(WHOLE, "length")], 200).await;
    let completion = client(&base)
        .complete(&plan_request().max_tokens(100))
        .await
        .expect("it validates though cut");
    assert!(completion.truncated && completion.attempts == 1);
    assert_eq!(script.lock().unwrap().max_tokens.len(), 1);
}

/// A port nothing listens on.
fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

#[tokio::test]
async fn an_endpoint_that_cannot_be_reached_is_named_unreachable() {
    for base in [
        closed_port_url(),
        "http://cairn-nowhere.invalid".to_string(),
    ] {
        let error = client(&base)
            .complete(&plan_request())
            .await
            .expect_err("nobody there");
        assert!(error.is_unreachable(), "{base}: {error}");
        assert_eq!(
            (error.class(), error.attempts()),
            (FailureClass::Transient, 2),
            "{error}"
        );
        assert!(!error.to_string().contains(KEY));
    }
}

#[tokio::test]
async fn a_server_that_answers_badly_is_not_unreachable() {
    let failing = Answer {
        content: "",
        finish: "stop",
        status: 503,
    };
    let (base, _) = fake(vec![failing], 200).await;
    let error = client(&base)
        .complete(&plan_request())
        .await
        .expect_err("503");
    assert_eq!(error.class(), FailureClass::Transient);
    assert!(!error.is_unreachable(), "{error}");

    let refused = Answer {
        content: "",
        finish: "stop",
        status: 401,
    };
    let (base, _) = fake(vec![refused], 200).await;
    let error = client(&base)
        .complete(&plan_request())
        .await
        .expect_err("401");
    assert_eq!(error.class(), FailureClass::Permanent);
    assert!(!error.is_unreachable(), "{error}");

    // Accepts the connection, then never answers: a timeout, not unreachable.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let error = client(&format!("http://{addr}"))
        .complete(&plan_request())
        .await
        .expect_err("hangs");
    assert!(matches!(error, LlmError::Timeout { .. }), "{error}");
    assert!(!error.is_unreachable());
}

/// `/readyz` over a SQLite store with a probe of `endpoints` in the state.
async fn readyz_with(endpoints: Endpoints) -> (u16, Value) {
    let (_file, store) = common::sqlite_store().await;
    let probe = EndpointProbe {
        client: LlmClient::new(endpoints, policy()).unwrap(),
        timeout: Duration::from_secs(1),
    };
    let state = cairn::http::AppState::new(
        store,
        Arc::new(SystemClock),
        cairn::config::Config::default(),
    )
    .with_model_probe(Arc::new(probe));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let api = tokio::spawn(cairn::http::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let response = reqwest::get(format!("http://{addr}/readyz")).await.unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    let _ = stop.send(());
    let _ = api.await;
    (status, body)
}

fn split(gate: &str, rest: &str) -> Endpoints {
    let mut map = std::collections::BTreeMap::new();
    map.insert("default".to_string(), endpoint(rest));
    map.insert("gate".to_string(), endpoint(gate));
    Endpoints::from_config(&map).unwrap().unwrap()
}

#[tokio::test]
async fn readyz_probes_the_model_endpoints_when_asked() {
    // A 401 on /v1/models still means the server is there.
    let (up, _) = fake(vec![answer(WHOLE, "stop")], 401).await;
    let (status, body) = readyz_with(Endpoints::uniform(endpoint(&up))).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ready")));

    let down = closed_port_url();
    let (status, body) = readyz_with(split(&down, &up)).await;
    assert_eq!(status, 503);
    assert_eq!(body["type"], "/problems/unavailable");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("gate (could not connect)"), "{detail}");
    assert!(!detail.contains("strategic"), "{detail}");
    let text = body.to_string();
    assert!(!text.contains(KEY) && !text.contains(&down), "{text}");

    // llama.cpp answers 503 while it loads the model: not ready yet.
    let (loading, _) = fake(vec![answer(WHOLE, "stop")], 503).await;
    let (status, body) = readyz_with(split(&up, &loading)).await;
    assert_eq!(status, 503);
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("strategic, tactical, verifier (HTTP 503)"),
        "{detail}"
    );
}
