//! `cairn eval --live` as a user runs it: the model answers come from the configured
//! OpenAI-compatible endpoint (here the simulator in generic mode standing in for a real model;
//! tests/live_model.rs and the committed live report use the real local model), the tools and
//! acceptance checks stay the suite's world, and the report says so: `simulated: false`, the
//! model id, the prompt versions, and per strategy `claimed` beside `verified` with
//! `false_success`. Without a model configured, `--live` is one clear error.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

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
