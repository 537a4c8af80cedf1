//! What only the embedded backend has to show: the file itself. It is created with its
//! directories, runs in WAL mode, keeps everything across a reopen, is shared safely by two
//! stores (two processes on one file), and a damaged row surfaces as `Corrupt`, not a panic.

use std::collections::HashSet;
use std::sync::Arc;

use cairn::clock::Clock;
use cairn::domain::task::DEFAULT_TENANT;
use cairn::store::ClaimParams;
use cairn::store::sqlite::SqliteStore;
use cairn::store::{Store, StoreError, TaskQuery};
use serde_json::json;
use sqlx::ConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;

use crate::common::TestSqlite;
use crate::support::*;

async fn open(path: &std::path::Path) -> Arc<dyn Store> {
    let store = SqliteStore::open(path).await.expect("open sqlite");
    store.migrate().await.expect("migrate");
    Arc::new(store)
}

/// A connection that bypasses the store, to inspect or damage the file.
async fn raw(path: &std::path::Path) -> sqlx::SqliteConnection {
    SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .expect("raw connection")
}

#[tokio::test]
async fn open_creates_the_file_in_wal_mode() {
    let db = TestSqlite::create();
    let path = db.dir.path().join("nested/dirs/cairn.db");
    assert!(!path.exists());
    let store = open(&path).await;
    assert!(path.exists(), "the file and its directories are created");
    let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
        .fetch_one(&mut raw(&path).await)
        .await
        .expect("pragma");
    assert_eq!(mode, "wal");
    store.ping().await.expect("ping");
}

#[tokio::test]
async fn everything_survives_a_reopen() {
    let db = TestSqlite::create();
    let clock = clock();
    let store = open(&db.path).await;
    let id = create(&store, &clock, "durable").await;
    let lease = claim(&store, &clock, "w").await.lease;
    let mut change = events(&["engine.step"]);
    change.state = Some(cairn::store::StateJson::of(&json!({ "checkpoint": 1 })).expect("JSON"));
    commit(&store, &clock, &lease, change).await;
    let task = store.get_task(DEFAULT_TENANT, id).await.expect("get");
    let history = store
        .list_events(DEFAULT_TENANT, id, 0, 100)
        .await
        .expect("events");
    drop(store);

    let reopened = open(&db.path).await;
    assert_eq!(
        reopened.get_task(DEFAULT_TENANT, id).await.expect("get"),
        task
    );
    assert_eq!(
        reopened
            .list_events(DEFAULT_TENANT, id, 0, 100)
            .await
            .expect("events"),
        history
    );
    assert_eq!(
        reopened
            .heartbeat(&lease, clock.now(), lease_ttl())
            .await
            .expect("heartbeat"),
        cairn::store::LeaseStatus::Held,
        "a lease outlives a reopen of the file (a restart); only expiry ends it"
    );
}

#[tokio::test]
async fn two_stores_on_one_file_never_double_claim() {
    let db = TestSqlite::create();
    let clock = clock();
    let first = open(&db.path).await;
    let second = open(&db.path).await;
    let mut created = HashSet::new();
    for i in 0..30 {
        created.insert(create(&first, &clock, &format!("shared {i}")).await);
    }
    let now = clock.now();
    let mut claimers = Vec::new();
    for (n, store) in [first.clone(), second.clone()]
        .into_iter()
        .cycle()
        .take(8)
        .enumerate()
    {
        claimers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(claimed) = store
                .claim(ClaimParams::new(&format!("worker-{n}"), now, lease_ttl()))
                .await
                .expect("claim")
            {
                mine.push(claimed.task.id);
            }
            mine
        }));
    }
    let mut claimed = Vec::new();
    for claimer in claimers {
        claimed.extend(claimer.await.expect("claimer"));
    }
    let unique: HashSet<_> = claimed.iter().copied().collect();
    assert_eq!(claimed.len(), unique.len(), "no task claimed twice");
    assert_eq!(unique, created);
    let seen_by_second = second
        .list_tasks(
            DEFAULT_TENANT,
            &TaskQuery {
                status: None,
                before: None,
                limit: 100,
            },
        )
        .await
        .expect("list");
    assert_eq!(seen_by_second.len(), created.len());
}

#[tokio::test]
async fn a_damaged_row_is_corrupt_not_a_panic() {
    let db = TestSqlite::create();
    let clock = clock();
    let store = open(&db.path).await;
    let id = create(&store, &clock, "to be damaged").await;
    sqlx::query("UPDATE tasks SET metadata = 'not json'")
        .execute(&mut raw(&db.path).await)
        .await
        .expect("damage the row");
    match store.get_task(DEFAULT_TENANT, id).await {
        Err(StoreError::Corrupt(message)) => assert!(message.contains("metadata"), "{message}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let listed = store
        .list_tasks(
            DEFAULT_TENANT,
            &TaskQuery {
                status: None,
                before: None,
                limit: 10,
            },
        )
        .await;
    assert!(matches!(listed, Err(StoreError::Corrupt(_))), "{listed:?}");
}
