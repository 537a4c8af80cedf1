//! The crash test: `cairn serve` is killed with SIGKILL in the middle of a task, a new process
//! starts on the same database (Postgres, and the embedded SQLite file) (the task was POSTed over HTTP to the first one), and the task finishes with every event kept exactly once.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use std::time::Instant;

use cairn::domain::event::kinds;
use cairn::domain::task::{DEFAULT_TENANT, TaskStatus};
use cairn::store::Store;
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;
use serve_process::{Db, FAST_LEASES, Serve, count, get_task, post_task, wait_events};

const STEPS: u64 = 12;

#[tokio::test]
async fn sigkill_mid_task_then_restart_finishes_without_losing_or_repeating_events_on_postgres() {
    let db = common::TestPg::create().await;
    let store = PgStore::connect(&db.url, 2).await.expect("connect");
    store.migrate().await.expect("migrate");
    crash_and_resume(Db::Postgres(&db.url), &store, FAST_LEASES).await;
    db.drop_database().await;
}

/// With the default settings (30 s leases, a reaper every 5 s) the restarted process does not
/// wait for the dead one's lease to expire: it has the same node id (same host, same data), takes
/// the node's lock, and requeues that node's leases at start-up.
#[tokio::test]
async fn a_restart_with_default_settings_reclaims_the_dead_process_leases_at_once_on_postgres() {
    let db = common::TestPg::create().await;
    let store = PgStore::connect(&db.url, 2).await.expect("connect");
    store.migrate().await.expect("migrate");
    crash_and_resume(Db::Postgres(&db.url), &store, &[]).await;
    db.drop_database().await;
}

#[tokio::test]
async fn a_restart_with_default_settings_reclaims_the_dead_process_leases_at_once_on_sqlite() {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open");
    store.migrate().await.expect("migrate");
    crash_and_resume(Db::Sqlite(&db.path), &store, &[]).await;
}

/// The embedded default survives a crash the same way (one process at a time on the file).
#[tokio::test]
async fn sigkill_mid_task_then_restart_finishes_without_losing_or_repeating_events_on_sqlite() {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open");
    store.migrate().await.expect("migrate");
    crash_and_resume(Db::Sqlite(&db.path), &store, FAST_LEASES).await;
}

/// `store` reads the same database as the child processes, which run with `env`.
async fn crash_and_resume(db: Db<'_>, store: &dyn Store, env: &[(&str, &str)]) {
    let first = Serve::start(db, env).await;
    let id = post_task(first.addr, STEPS, 300).await;
    wait_events(store, id, "two committed steps", |events| {
        count(events, kinds::ENGINE_STEP) >= 2
    })
    .await;
    first.kill().await;
    let before = store
        .list_events(DEFAULT_TENANT, id, 0, 10_000)
        .await
        .expect("events");
    let steps_before = count(&before, kinds::ENGINE_STEP);
    assert!(
        (steps_before as u64) < STEPS,
        "the task finished before the crash; make it slower"
    );
    assert!(!before.iter().any(|e| kinds::is_terminal(&e.kind)));

    let restarted = Instant::now();
    let second = Serve::start(db, env).await;
    let reclaimed = wait_events(store, id, "a second claim", |events| {
        count(events, kinds::TASK_CLAIMED) >= 2
    })
    .await;
    let recovery = restarted.elapsed();
    let events = wait_events(store, id, "task.succeeded", |events| {
        events.iter().any(|e| e.kind == kinds::TASK_SUCCEEDED)
    })
    .await;
    eprintln!(
        "recovery: {} ms from restart to re-claim (settings {env:?})",
        recovery.as_millis()
    );
    // Reclaimed at start-up by the restarted node, well before a 30 s lease could expire.
    assert!(
        recovery < std::time::Duration::from_secs(15),
        "re-claimed after {recovery:?}"
    );
    assert!(reclaimed.len() > before.len());

    // Nothing lost: what was committed before the crash is an unchanged prefix.
    assert_eq!(&events[..before.len()], &before[..]);
    // Nothing repeated or skipped: dense seqs, each step index exactly once, in order.
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as i64).collect::<Vec<i64>>());
    let steps: Vec<u64> = events
        .iter()
        .filter(|e| e.kind == kinds::ENGINE_STEP)
        .map(|e| e.data["index"].as_u64().expect("index"))
        .collect();
    assert_eq!(steps, (1..=STEPS).collect::<Vec<u64>>());
    // The resumed attempt continued after the crash point rather than starting over.
    let resumed_from = events
        .iter()
        .filter(|e| e.kind == kinds::ENGINE_STEP && e.data["attempt"] == 2)
        .filter_map(|e| e.data["index"].as_u64())
        .min();
    assert_eq!(resumed_from, Some(steps_before as u64 + 1));
    // The restarted process (same node: same host and data) took the node's lock and requeued
    // the dead process's lease at start-up; the lease never had to expire.
    let reclaimed = events
        .iter()
        .filter(|e| e.kind == kinds::TASK_RELEASED && e.data["reason"] == "owner_restarted")
        .count();
    assert_eq!(reclaimed, 1);
    assert_eq!(count(&events, kinds::TASK_LEASE_EXPIRED), 0);
    assert_eq!(count(&events, kinds::TASK_SUCCEEDED), 1);
    assert_eq!(
        events.last().map(|e| e.kind.as_str()),
        Some(kinds::TASK_SUCCEEDED)
    );

    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.attempts, 2);
    let shown = get_task(second.addr, id).await;
    assert_eq!(shown["status"], "succeeded");
    assert_eq!(shown["attempts"], 2);

    assert_eq!(second.terminate().await, Some(0));
}
