//! The `cairn` command line as users run it: `openapi` prints the committed document, `migrate`
//! applies migrations and exits, and a bad setting is one clear message and a non-zero exit.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::process::Output;

async fn cairn(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .args(args)
        .env_remove("CAIRN_CONFIG")
        .env_remove("DATABASE_URL")
        .env_remove("CAIRN_DATABASE_URL");
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
