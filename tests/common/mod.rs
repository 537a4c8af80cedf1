//! Helpers shared by the integration tests: a fresh Postgres database per test and a temp-file
//! SQLite, so tests never see each other's rows.
#![allow(dead_code)]

use sqlx::Connection;
use std::path::PathBuf;

/// The server tests create their databases on. Override with `CAIRN_TEST_PG_URL`.
pub fn pg_admin_url() -> String {
    std::env::var("CAIRN_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

/// A database created for one test; `drop_database` removes it (stale ones are named
/// `cairn_test_*` and are swept by `.ci/run`).
pub struct TestPg {
    pub name: String,
    pub url: String,
}

impl TestPg {
    pub async fn create() -> TestPg {
        let name = format!("cairn_test_{}", uuid::Uuid::now_v7().simple());
        let admin = pg_admin_url();
        let mut conn = sqlx::PgConnection::connect(&admin)
            .await
            .expect("connect to the test Postgres (is it running at 127.0.0.1:5432?)");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create test database");
        let base = admin
            .rsplit_once('/')
            .map(|(base, _)| base)
            .unwrap_or(&admin);
        TestPg {
            url: format!("{base}/{name}"),
            name,
        }
    }

    pub async fn drop_database(self) {
        if let Ok(mut conn) = sqlx::PgConnection::connect(&pg_admin_url()).await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .execute(&mut conn)
            .await;
        }
    }
}

/// A SQLite file in a temp dir that lives as long as the returned guard.
pub struct TestSqlite {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl TestSqlite {
    pub fn create() -> TestSqlite {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cairn-test.db");
        TestSqlite { dir, path }
    }
}

/// A migrated SQLite store on a fresh temp file; keep the guard alive as long as the store.
pub async fn sqlite_store() -> (TestSqlite, std::sync::Arc<dyn cairn::store::Store>) {
    let file = TestSqlite::create();
    let store = cairn::store::sqlite::SqliteStore::open(&file.path)
        .await
        .expect("open sqlite");
    cairn::store::Store::migrate(&store).await.expect("migrate");
    (file, std::sync::Arc::new(store))
}

/// (last_seq, event rows, ledger rows) of a task of the default tenant: what a refused write
/// must leave untouched.
pub async fn footprint(
    store: &dyn cairn::store::Store,
    task_id: uuid::Uuid,
) -> (i64, usize, usize) {
    let tenant = cairn::domain::task::DEFAULT_TENANT;
    let task = store
        .get_task(tenant, task_id)
        .await
        .expect("get")
        .expect("task exists");
    let events = store
        .list_events(tenant, task_id, 0, 1000)
        .await
        .expect("events");
    let ledger = store
        .list_ledger_entries(tenant, task_id)
        .await
        .expect("ledger");
    (task.last_seq, events.len(), ledger.len())
}

/// A task of `tenant` with a small budget, for store-level tests.
pub fn new_task(tenant: &str, goal: &str) -> cairn::domain::task::NewTask {
    use cairn::domain::task::{Budget, NewTask, Strategy};
    NewTask {
        tools: None,
        id: uuid::Uuid::now_v7(),
        tenant_id: tenant.to_string(),
        goal: goal.to_string(),
        strategy: Strategy::Auto,
        budget: Budget {
            tokens: 10_000,
            tool_calls: 10,
            wall_ms: 60_000,
            cost: None,
        },
        metadata: serde_json::json!({}),
        approval: Default::default(),
    }
}

/// A worker step's change: state, two events and a 5-token charge.
pub fn step_change(note: &str) -> cairn::store::Change {
    use cairn::domain::event::{NewEvent, kinds};
    use serde_json::json;
    cairn::store::Change {
        state: Some(cairn::store::StateJson::of(&json!({ "note": note })).expect("JSON")),
        events: vec![
            NewEvent::new(kinds::ENGINE_STEP, json!({ "note": note })),
            NewEvent::new(kinds::ENGINE_STEP, json!({ "note": note, "part": 2 })),
        ],
        ledger: vec![cairn::store::NewLedgerEntry {
            milestone_id: None,
            kind: "charge".to_string(),
            unit: "tokens".to_string(),
            amount: 5,
        }],
        ..cairn::store::Change::default()
    }
}
