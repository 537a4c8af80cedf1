//! The `cairn` command line as users run it: `openapi` prints the committed document, `migrate`
//! applies migrations and exits, a bad setting is one clear message and a non-zero exit, and
//! `eval --live` takes its model from the configured endpoint.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::process::Output;

use cairn::sim::{Scenario, SimServer};
use serde_json::Value;

async fn cairn(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .args(args)
        .env_remove("CAIRN_CONFIG")
        .env_remove("DATABASE_URL")
        .env_remove("CAIRN_DATABASE_URL");
    for (key, _) in std::env::vars() {
        if key.starts_with("CAIRN_LLM_") {
            command.env_remove(key);
        }
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().await.expect("run cairn")
}

#[tokio::test]
async fn openapi_prints_the_committed_document() {
    let output = cairn(&["openapi"], &[]).await;
    assert!(output.status.success());
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json"))
            .expect("read openapi/openapi.json");
    assert!(
        String::from_utf8_lossy(&output.stdout) == committed,
        "`cairn openapi` differs from openapi/openapi.json; regenerate it with \
         `cargo run -- openapi > openapi/openapi.json`"
    );
}

#[tokio::test]
async fn a_bad_setting_exits_non_zero_naming_the_variable() {
    let output = cairn(&["serve"], &[("CAIRN_WORKERS", "many")]).await;
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("CAIRN_WORKERS"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test]
async fn a_missing_config_file_is_reported_not_panicked() {
    let output = cairn(&["serve", "--config", "/nonexistent/cairn.toml"], &[]).await;
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent/cairn.toml"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test]
async fn migrate_applies_migrations_on_postgres_and_exits() {
    let db = common::TestPg::create().await;
    let output = cairn(&["migrate"], &[("CAIRN_DATABASE_URL", &db.url)]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pool = sqlx::PgPool::connect(&db.url).await.expect("connect");
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('tasks', 'events')",
    )
    .fetch_one(&pool)
    .await
    .expect("count tables");
    assert_eq!(tables, 2);
    pool.close().await;
    db.drop_database().await;
}

/// A real model without a tool registry is refused at start, in one line naming the variable,
/// instead of quietly handing the model the simulator's tools.
#[tokio::test]
async fn a_configured_model_without_a_tools_file_refuses_to_start() {
    let db = common::TestSqlite::create();
    let sqlite = db.path.display().to_string();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .arg("serve")
        .env_remove("CAIRN_CONFIG")
        .env_remove("DATABASE_URL")
        .env_remove("CAIRN_DATABASE_URL")
        .env_remove("CAIRN_TOOLS_FILE")
        .env("CAIRN_SQLITE_PATH", &sqlite)
        .env("CAIRN_LISTEN_ADDR", "127.0.0.1:0")
        .env("CAIRN_LLM_DEFAULT_BASE_URL", "http://127.0.0.1:1")
        .env("CAIRN_LLM_DEFAULT_MODEL", "qwen2.5-coder-0.5b")
        .env("CAIRN_LLM_DEFAULT_API_KEY", "sk-cli-secret");
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), command.output())
        .await
        .expect("cairn exits on its own")
        .expect("run cairn");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|line| line.starts_with("cairn: ") && line.contains("CAIRN_TOOLS_FILE")),
        "no `cairn: ` line names CAIRN_TOOLS_FILE: {stderr}"
    );
    assert!(
        !stderr.contains("sk-cli-secret") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("listening"),
        "it never serves"
    );
}

// `cairn eval --live` as a user runs it: the model answers come from the configured
// OpenAI-compatible endpoint (here the simulator in generic mode standing in for a real model;
// tests/live_model.rs uses the real local model), the tools and acceptance checks stay the
// suite's world, and the report says so: `simulated: false`, the model id, the prompt versions,
// and per strategy `claimed` beside `verified` with `false_success`. Without a model
// configured, `--live` is one clear error.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_eval_takes_the_model_from_the_endpoint_and_reports_claims_beside_checks() {
    let sim = SimServer::start(Scenario::generic(), "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("simulator");
    let out = tempfile::tempdir().expect("tempdir");
    let out_dir = out.path().display().to_string();
    let output = cairn(
        &[
            "eval",
            "--live",
            "--suite",
            "suites/small",
            "--strategies",
            "reactive,v2",
            "--out",
            &out_dir,
            "--run-wall-s",
            "60",
        ],
        &[
            ("CAIRN_LLM_DEFAULT_BASE_URL", sim.base_url()),
            ("CAIRN_LLM_DEFAULT_MODEL", "stand-in-model"),
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("report.json")).expect("report.json"),
    )
    .expect("JSON");
    assert_eq!(report["simulated"], false);
    assert_eq!(report["model"], "stand-in-model");
    let prompts = report["prompts"].as_array().expect("prompts");
    assert!(
        prompts
            .iter()
            .any(|p| p.as_str().is_some_and(|p| p.starts_with("strategic@")))
    );
    // The model really was the endpoint: the simulator saw the engine's calls.
    assert!(
        sim.stats().llm.calls > 0,
        "no model call reached the endpoint"
    );
    let records = report["records"].as_array().expect("records");
    assert_eq!(records.len(), 5 * 2);
    for strategy in ["reactive", "v2"] {
        let aggregate = &report["aggregates"][strategy];
        let mine: Vec<&Value> = records
            .iter()
            .filter(|r| r["strategy"] == strategy)
            .collect();
        let claimed = mine.iter().filter(|r| r["status"] == "succeeded").count();
        let false_success = mine
            .iter()
            .filter(|r| r["claimed"] == true && r["verified"] == false)
            .count();
        assert_eq!(aggregate["claimed"], claimed as u64, "{strategy}");
        assert_eq!(
            aggregate["false_success"], false_success as u64,
            "{strategy}"
        );
    }
    let markdown = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    assert!(markdown.contains("(live)") && markdown.contains("stand-in-model"));
    assert!(markdown.contains("false success"));
    // Every real answer was judged against the ground truth, for calibrating the slips
    // (tests/eval_world.rs checks the verdicts).
    let trace = std::fs::read_to_string(out.path().join("trace.jsonl")).expect("trace.jsonl");
    for line in trace.lines().filter(|l| !l.is_empty()) {
        let j: Value = serde_json::from_str(line).expect("a JSON line");
        assert!(
            j["first"].is_string() && j["chars"].as_u64() > Some(0),
            "{j}"
        );
    }
    let slips = std::fs::read_to_string(out.path().join("slips.md")).expect("slips.md");
    assert!(
        slips.contains("Slip calibration") && slips.contains("Fitted"),
        "{slips}"
    );
    // And every call was stored whole, its verdict the trace's, and reads back by run.
    let calls = std::fs::read_to_string(out.path().join("calls.jsonl")).expect("calls.jsonl");
    let calls: Vec<Value> = calls
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(calls.len() as u64, sim.stats().llm.calls);
    let judged = calls.iter().filter(|c| !c["verdict"].is_null()).count();
    assert_eq!(judged, trace.lines().filter(|l| !l.is_empty()).count());
    let first = &calls[0];
    assert!(
        first["input"].is_object() && first["answer"].is_object(),
        "{first}"
    );
    let prompt = out.path().join(format!(
        "prompts/{}.md",
        first["prompt_sha8"].as_str().unwrap()
    ));
    assert!(prompt.exists());
    let (task, strategy) = (
        first["task"].as_str().unwrap(),
        first["strategy"].as_str().unwrap(),
    );
    let shown = cairn(
        &[
            "eval",
            "calls",
            &out_dir,
            "--task",
            task,
            "--strategy",
            strategy,
        ],
        &[],
    )
    .await;
    let stdout = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.status.success() && stdout.contains("#1 "), "{stdout}");
}

#[tokio::test]
async fn live_eval_without_a_model_is_one_clear_error() {
    let out = tempfile::tempdir().expect("tempdir");
    let out_dir = out.path().display().to_string();
    let output = cairn(
        &[
            "eval",
            "--live",
            "--suite",
            "suites/small",
            "--out",
            &out_dir,
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--live needs a model") && stderr.contains("CAIRN_LLM_DEFAULT_BASE_URL"),
        "{stderr}"
    );
    assert!(!out.path().join("report.json").exists());
}

// `cairn eval calls` reads one run of a live evaluation's stored calls back, call by call; a
// run that is not there is one clear error naming the runs that are, a bad argument a usage
// error, and `cairn eval` itself still wants --suite and --out.
#[tokio::test]
async fn eval_calls_prints_one_stored_run_call_by_call() {
    let out = tempfile::tempdir().expect("tempdir");
    let call = |strategy: &str, seq: u64, purpose: &str| {
        serde_json::json!({
            "task": "pipeline", "repeat": 0, "strategy": strategy,
            "task_id": "0190a000-0000-7000-8000-000000000001", "seq": seq,
            "purpose": purpose, "milestone": null, "attempt": 1, "sampling": "endpoint",
            "prompt_sha8": "0badf00d", "prompt_version": null,
            "input": {"goal": "load the March export", "tools": [{"name": "http_get"}]},
            "turns": [], "schema": null,
            "answer": {"value": {"milestones": [{"id": "m1", "title": "fetch it"}]}},
            "tokens": 321, "latency_ms": 1500, "verdict": null,
        })
        .to_string()
            + "\n"
    };
    let text =
        call("v2", 1, "strategic") + &call("v2", 2, "tactical") + &call("reactive", 1, "tactical");
    std::fs::write(out.path().join("calls.jsonl"), text).expect("write");
    let dir = out.path().display().to_string();

    let shown = cairn(
        &[
            "eval",
            "calls",
            &dir,
            "--task",
            "pipeline",
            "--strategy",
            "v2",
        ],
        &[],
    )
    .await;
    let stdout = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert!(
        stdout.starts_with("task pipeline, strategy v2, repeat 0: 2 calls"),
        "{stdout}"
    );
    assert!(
        stdout.contains("#1 strategic, attempt 1 | ?@0badf00d | 321 tokens | 1500 ms"),
        "{stdout}"
    );
    assert!(stdout.contains("#2 tactical"), "{stdout}");
    assert!(stdout.contains("goal: load the March export"), "{stdout}");
    assert!(stdout.contains("tools offered: http_get"), "{stdout}");
    assert!(stdout.contains("\"title\": \"fetch it\""), "{stdout}");

    let missing = cairn(
        &[
            "eval",
            "calls",
            &dir,
            "--task",
            "pipeline",
            "--strategy",
            "v1",
        ],
        &[],
    )
    .await;
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("no run of task \"pipeline\" with strategy v1")
            && stderr.contains("strategy reactive, repeat 0 (1 calls)")
            && stderr.contains("strategy v2, repeat 0 (2 calls)"),
        "{stderr}"
    );
    let bad = cairn(
        &[
            "eval",
            "calls",
            &dir,
            "--task",
            "pipeline",
            "--strategy",
            "v9",
        ],
        &[],
    )
    .await;
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("unknown strategy \"v9\""), "{stderr}");
    let no_task = cairn(&["eval", "calls", &dir], &[]).await;
    assert_eq!(no_task.status.code(), Some(2));
    let plain = cairn(&["eval", "--out", &dir], &[]).await;
    assert_eq!(plain.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert!(stderr.contains("--suite"), "{stderr}");
    for output in [&missing, &bad, &no_task, &plain] {
        assert!(!String::from_utf8_lossy(&output.stderr).contains("panicked"));
    }
}
