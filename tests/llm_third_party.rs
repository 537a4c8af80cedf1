//! The LLM client against a third-party OpenAI-compatible mock server, `fakellm` from PyPI, so
//! the client is proven on a wire format cairn did not write. `scripts/install-test-deps.sh`
//! installs it into `.deps/fakellm`; without it this test fails (it is never skipped).
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cairn::config::{LlmEndpoint, Secret};
use cairn::llm::{
    ChatMessage, ChatRequest, Endpoints, FailureClass, LlmClient, LlmError, Purpose, RetryPolicy,
};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use uuid::Uuid;

const CONFIG: &str = r#"
version: 1
defaults:
  fallback: deterministic_echo
rules:
  - name: rate_limited
    when:
      header.x-cairn-milestone: limited
    respond:
      status: 429
      error: "slow down (fakellm)"
  - name: refused
    when:
      header.x-cairn-milestone: refused
    respond:
      status: 401
      error: "bad credentials (fakellm)"
  - name: gate_json
    when:
      header.x-cairn-purpose: gate
    respond:
      content: '{"est_tool_calls": 1, "touches_writes": false, "targets": 1, "goal_kind": "lookup"}'
  - name: plan_in_prose
    when:
      header.x-cairn-purpose: strategic
    respond:
      content: "Sure. Here is the plan:\n```json\n{\"milestones\": [{\"id\": \"m1\", \"title\": \"Look it up\", \"depends_on\": [], \"effort\": 1, \"tools\": [\"lookup\"], \"accept\": {\"type\": \"artifact\", \"name\": \"findings\", \"non_empty\": true}}]}\n```\nGood luck."
  - name: always_500
    when:
      header.x-cairn-purpose: verifier
    respond:
      status: 500
      error: "mock outage (fakellm)"
"#;

const ATTEMPTS: u32 = 3;

fn fakellm_bin() -> PathBuf {
    std::env::var_os("CAIRN_FAKELLM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".deps/fakellm/bin/fakellm")
        })
}

/// The running mock; killed when dropped.
struct Mock {
    _child: Child,
    _dir: tempfile::TempDir,
    base_url: String,
}

async fn start_mock() -> Mock {
    let bin = fakellm_bin();
    assert!(
        bin.exists(),
        "the third-party mock `fakellm` is not installed at {}: run scripts/install-test-deps.sh \
         (or set CAIRN_FAKELLM_BIN)",
        bin.display()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("fakellm.yaml");
    std::fs::write(&config, CONFIG).expect("write config");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        probe.local_addr().expect("addr").port()
    };
    let mut child = Command::new(&bin)
        .args([
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--config",
        ])
        .arg(&config)
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", bin.display()));
    let base_url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("fakellm exited early with {status}");
        }
        let ready = http
            .get(format!("{base_url}/_fakellm/stats"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fakellm did not start within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Mock {
        _child: child,
        _dir: dir,
        base_url,
    }
}

async fn rule_hits(mock: &Mock, rule: &str) -> u64 {
    let stats: Value = reqwest::get(format!("{}/_fakellm/stats", mock.base_url))
        .await
        .expect("stats")
        .json()
        .await
        .expect("stats json");
    stats["by_rule"][rule].as_u64().unwrap_or(0)
}

fn client(mock: &Mock) -> LlmClient {
    let endpoint = LlmEndpoint {
        base_url: mock.base_url.clone(),
        api_key: Secret::new("sk-fakellm-not-used"),
        model: "gpt-4o-mini".into(),
    };
    let policy = RetryPolicy {
        max_attempts: ATTEMPTS,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        max_retry_after: Duration::from_secs(5),
        timeout: Duration::from_secs(10),
    };
    LlmClient::new(Endpoints::uniform(endpoint), policy).expect("client")
}

fn ask(purpose: Purpose, schema: Value) -> ChatRequest {
    ChatRequest::new(
        purpose,
        vec![
            ChatMessage::system("Answer with JSON only."),
            ChatMessage::user("What version of service A is deployed?"),
        ],
    )
    .task(Uuid::now_v7())
    .json_output(purpose.as_str(), schema)
}

#[tokio::test]
#[ignore = "needs fakellm (scripts/install-test-deps.sh); scripts/test.sh runs it"]
async fn the_client_speaks_a_third_party_wire_format() {
    let mock = start_mock().await;
    let client = client(&mock);

    // Structured output and reported usage, from a server that is not ours.
    let gate = client
        .complete(&ask(
            Purpose::Gate,
            json!({"type": "object", "required": ["est_tool_calls", "goal_kind"]}),
        ))
        .await
        .expect("gate answers");
    assert_eq!(gate.json.as_ref().expect("json")["goal_kind"], "lookup");
    assert!(
        !gate.usage.estimated && gate.usage.total_tokens > 0,
        "{:?}",
        gate.usage
    );
    assert_eq!(
        gate.usage.total_tokens,
        gate.usage.prompt_tokens + gate.usage.completion_tokens
    );
    assert!(
        !gate.simulated,
        "a third-party server is not cairn's simulator"
    );
    assert_eq!(gate.model, "gpt-4o-mini");

    // JSON inside prose and a fence, as servers that ignore response_format answer.
    let plan = client
        .complete(&ask(
            Purpose::Strategic,
            json!({"type": "object", "required": ["milestones"]}),
        ))
        .await
        .expect("plan extracted from prose");
    assert_eq!(plan.json.expect("json")["milestones"][0]["id"], "m1");

    // fakellm's deterministic echo is not JSON: invalid output, one request, not retried.
    let before = rule_hits(&mock, "<fallthrough>").await;
    let error = client
        .complete(&ask(Purpose::Tactical, json!({"type": "object"})))
        .await
        .expect_err("echo is not JSON");
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::InvalidOutput, 1)
    );
    assert_eq!(rule_hits(&mock, "<fallthrough>").await, before + 1);

    // HTTP 500 every time: retried up to the bound, then transient.
    let error = client
        .complete(&ask(Purpose::Verifier, json!({"type": "object"})))
        .await
        .expect_err("always 500");
    assert!(
        matches!(&error, LlmError::Server { status: 500, message, .. } if message.contains("mock outage")),
        "{error}"
    );
    assert_eq!(
        (error.class(), error.attempts()),
        (FailureClass::Transient, ATTEMPTS)
    );
    assert_eq!(rule_hits(&mock, "always_500").await, u64::from(ATTEMPTS));

    // 429 (fakellm sends no Retry-After): retried with backoff, then rate_limited.
    let error = client
        .complete(&ask(Purpose::Tactical, json!({"type": "object"})).milestone("limited", 1))
        .await
        .expect_err("always 429");
    assert!(
        matches!(
            error,
            LlmError::RateLimited {
                retry_after: None,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(rule_hits(&mock, "rate_limited").await, u64::from(ATTEMPTS));

    // 401: permanent, not retried.
    let error = client
        .complete(&ask(Purpose::Tactical, json!({"type": "object"})).milestone("refused", 1))
        .await
        .expect_err("401");
    assert!(
        matches!(error, LlmError::Refused { status: 401, .. }),
        "{error}"
    );
    assert_eq!(error.class(), FailureClass::Permanent);
    assert_eq!(rule_hits(&mock, "refused").await, 1);
}
