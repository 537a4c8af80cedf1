//! Postgres group commit: concurrent fenced writes share one statement (one transaction), and
//! fencing stays per task inside it: a member whose fence no longer matches gets `LeaseLost`
//! alone while the others commit; a member the database refuses fails alone; two changes of one
//! task keep their order.
//!
//! The tests run on tokio's single-threaded runtime and start every commit in one `join_all`:
//! each one is queued before the store's writers first run, so the batches are certain.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use cairn::domain::event::kinds;
use cairn::domain::task::{DEFAULT_TENANT, Lease};
use cairn::store::postgres::PgStore;
use cairn::store::{
    CancelOutcome, Change, ClaimParams, Commit, NewArtifact, NewPlanVersion, Store,
};
use chrono::{DateTime, Duration, TimeZone, Utc};
use futures_util::future::join_all;
use serde_json::json;

const TASKS: usize = 8;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0)
        .single()
        .expect("valid time")
}

/// A migrated store with `TASKS` tasks, all claimed by one worker (leases in creation order).
async fn claimed_tasks(url: &str) -> (PgStore, Vec<Lease>) {
    let store = PgStore::connect(url, 4).await.expect("connect");
    store.migrate().await.expect("migrate");
    for n in 0..TASKS {
        store
            .create_task(
                common::new_task(DEFAULT_TENANT, &format!("group commit {n}")),
                None,
                t0(),
            )
            .await
            .expect("create");
    }
    let mut leases = Vec::new();
    for _ in 0..TASKS {
        let claimed = store
            .claim(ClaimParams::new("worker-a", t0(), Duration::seconds(30)))
            .await
            .expect("claim")
            .expect("a queued task");
        leases.push(claimed.lease);
    }
    (store, leases)
}

/// The transactions that wrote the events of `kind` (each row's `xmin`).
async fn transactions_of(url: &str, kind: &str) -> i64 {
    let pool = sqlx::PgPool::connect(url).await.expect("connect");
    let count = sqlx::query_scalar("SELECT count(DISTINCT xmin::text) FROM events WHERE kind = $1")
        .bind(kind)
        .fetch_one(&pool)
        .await
        .expect("count transactions");
    pool.close().await;
    count
}

#[tokio::test]
async fn a_batch_with_a_fenced_out_member_commits_the_others_and_refuses_that_one() {
    let db = common::TestPg::create().await;
    let (store, leases) = claimed_tasks(&db.url).await;
    let fenced_out = leases[3].task_id;
    let cancelled = store
        .cancel_task(DEFAULT_TENANT, fenced_out, t0())
        .await
        .expect("cancel");
    assert!(matches!(cancelled, CancelOutcome::Cancelled(_)));
    let untouched = common::footprint(&store, fenced_out).await;
    let before = store.group_stats();

    let outcomes = join_all(
        leases
            .iter()
            .map(|lease| store.commit(lease, common::step_change("batched"), t0())),
    )
    .await;

    for (lease, outcome) in leases.iter().zip(&outcomes) {
        let outcome = outcome.as_ref().expect("no store error");
        if lease.task_id == fenced_out {
            assert_eq!(*outcome, Commit::LeaseLost, "the fenced-out member fails");
        } else {
            // task.created = 1, task.claimed = 2, then this change's two events.
            assert_eq!(
                *outcome,
                Commit::Applied {
                    first_seq: 3,
                    last_seq: 4
                },
                "the other members commit"
            );
            assert_eq!(common::footprint(&store, lease.task_id).await, (4, 4, 1));
        }
    }
    assert_eq!(
        common::footprint(&store, fenced_out).await,
        untouched,
        "the fenced-out member wrote nothing"
    );
    let after = store.group_stats();
    assert_eq!(after.commits - before.commits, TASKS as u64);
    let statements = after.statements - before.statements;
    assert!(
        statements < TASKS as u64,
        "{TASKS} commits went out in {statements} statements"
    );
    // The 7 applied changes share the batches' transactions (one per writer at most).
    let transactions = transactions_of(&db.url, kinds::ENGINE_STEP).await;
    assert!(
        transactions <= statements as i64,
        "{transactions} transactions"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn a_member_the_database_refuses_fails_alone() {
    let db = common::TestPg::create().await;
    let (store, leases) = claimed_tasks(&db.url).await;
    let bad = leases[5].task_id;
    // Plan version 0 breaks the table's CHECK (version >= 1): the batch statement fails, and
    // its members are committed one by one.
    let change_for = |lease: &Lease| {
        let mut change = common::step_change("maybe bad");
        if lease.task_id == bad {
            change.plan_version = Some(NewPlanVersion {
                version: 0,
                reason: "invalid".to_string(),
                caused_by_seq: None,
                plan: json!({}),
            });
        }
        change
    };
    let untouched = common::footprint(&store, bad).await;
    let outcomes = join_all(
        leases
            .iter()
            .map(|lease| store.commit(lease, change_for(lease), t0())),
    )
    .await;
    for (lease, outcome) in leases.iter().zip(outcomes) {
        if lease.task_id == bad {
            let error = outcome.expect_err("the refused member fails");
            assert!(!error.is_transient(), "a broken CHECK is not transient");
        } else {
            assert_eq!(
                outcome.expect("the others commit"),
                Commit::Applied {
                    first_seq: 3,
                    last_seq: 4
                }
            );
        }
    }
    assert_eq!(common::footprint(&store, bad).await, untouched);
    db.drop_database().await;
}

#[tokio::test]
async fn two_changes_of_one_task_commit_in_order() {
    let db = common::TestPg::create().await;
    let (store, leases) = claimed_tasks(&db.url).await;
    let lease = &leases[0];
    let outcomes = join_all(
        ["first", "second", "third"]
            .into_iter()
            .map(|note| store.commit(lease, common::step_change(note), t0())),
    )
    .await;
    let seqs: Vec<Commit> = outcomes.into_iter().map(|o| o.expect("commit")).collect();
    assert_eq!(
        seqs,
        [(3, 4), (5, 6), (7, 8)]
            .map(|(first_seq, last_seq)| Commit::Applied {
                first_seq,
                last_seq
            })
            .to_vec()
    );
    let notes: Vec<String> = store
        .list_events(DEFAULT_TENANT, lease.task_id, 2, 100)
        .await
        .expect("events")
        .into_iter()
        .map(|event| event.data["note"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        notes,
        ["first", "first", "second", "second", "third", "third"]
    );
    let task = store
        .get_task(DEFAULT_TENANT, lease.task_id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.last_seq, 8);
    db.drop_database().await;
}

/// The rows of `id` by table: (events, ledger entries, artifacts, plan versions).
async fn rows_of(url: &str, id: uuid::Uuid) -> (i64, i64, i64, i64) {
    let pool = sqlx::PgPool::connect(url).await.expect("connect");
    let counts = sqlx::query_as(
        "SELECT (SELECT count(*) FROM events WHERE task_id = $1), \
         (SELECT count(*) FROM ledger_entries WHERE task_id = $1), \
         (SELECT count(*) FROM artifacts WHERE task_id = $1), \
         (SELECT count(*) FROM plan_versions WHERE task_id = $1)",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .expect("count rows");
    pool.close().await;
    counts
}

#[tokio::test]
async fn members_of_one_batch_with_different_rows_each_write_their_own() {
    let db = common::TestPg::create().await;
    let (store, leases) = claimed_tasks(&db.url).await;
    let artifact = |name: &str| NewArtifact {
        milestone_id: "m1".to_string(),
        name: name.to_string(),
        value: json!({ "name": name }),
    };
    let plan = NewPlanVersion {
        version: 1,
        reason: "initial".to_string(),
        caused_by_seq: None,
        plan: json!({ "milestones": [] }),
    };
    // Three batches of two, their members carrying different rows: events only; a ledger
    // entry for one member, artifacts for the other; a plan version for one.
    let shapes: [Vec<Change>; 3] = [
        vec![events_only("a"), events_only("b")],
        vec![
            common::step_change("c"),
            Change {
                artifacts: vec![artifact("x"), artifact("y")],
                ..events_only("d")
            },
        ],
        vec![
            Change {
                plan_version: Some(plan),
                ..events_only("e")
            },
            common::step_change("f"),
        ],
    ];
    for (round, changes) in shapes.into_iter().enumerate() {
        let members = &leases[round * 2..round * 2 + 2];
        let before = store.group_stats();
        let outcomes = join_all(
            members
                .iter()
                .zip(changes)
                .map(|(lease, change)| store.commit(lease, change, t0())),
        )
        .await;
        for outcome in outcomes {
            assert_eq!(
                outcome.expect("commit"),
                Commit::Applied {
                    first_seq: 3,
                    last_seq: 4
                }
            );
        }
        let after = store.group_stats();
        assert_eq!(
            after.statements - before.statements,
            1,
            "round {round}: one statement"
        );
    }
    // task.created and task.claimed, then two events per change.
    let expected = [
        (4, 0, 0, 0),
        (4, 0, 0, 0),
        (4, 1, 0, 0),
        (4, 0, 2, 0),
        (4, 0, 0, 1),
        (4, 1, 0, 0),
    ];
    for (lease, expected) in leases.iter().zip(expected) {
        assert_eq!(rows_of(&db.url, lease.task_id).await, expected);
    }
    let written = store
        .list_artifacts(DEFAULT_TENANT, leases[3].task_id)
        .await
        .expect("artifacts");
    let names: Vec<&str> = written.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["x", "y"], "artifacts in the order made");
    db.drop_database().await;
}

/// Two events and a checkpoint, no ledger entry.
fn events_only(note: &str) -> Change {
    Change {
        ledger: Vec::new(),
        ..common::step_change(note)
    }
}

#[tokio::test]
async fn tasks_posted_at_once_are_created_by_one_statement_and_a_refused_one_fails_alone() {
    let db = common::TestPg::create().await;
    let store = PgStore::connect(&db.url, 4).await.expect("connect");
    store.migrate().await.expect("migrate");
    let taken = common::new_task(DEFAULT_TENANT, "created first");
    let taken_id = taken.id;
    store.create_task(taken, None, t0()).await.expect("create");
    let before = store.creation_stats();

    // Eight new tasks and one whose id is already taken, all posted at once.
    let mut batch: Vec<_> = (0..TASKS)
        .map(|n| common::new_task(DEFAULT_TENANT, &format!("posted at once {n}")))
        .collect();
    let mut again = common::new_task(DEFAULT_TENANT, "a second task with the first one's id");
    again.id = taken_id;
    batch.insert(3, again);
    let ids: Vec<_> = batch.iter().map(|new| new.id).collect();
    let outcomes = join_all(
        batch
            .into_iter()
            .map(|new| store.create_task(new, None, t0())),
    )
    .await;

    for (id, outcome) in ids.iter().zip(&outcomes) {
        if *id == taken_id {
            assert!(outcome.is_err(), "the duplicate id is refused: {outcome:?}");
            continue;
        }
        let created = outcome.as_ref().expect("the others are created");
        assert_eq!(created.task.id, *id, "each caller gets its own task back");
        let events = store
            .list_events(DEFAULT_TENANT, *id, 0, 10)
            .await
            .expect("events");
        assert_eq!(events.len(), 1, "one task.created event");
        assert_eq!(
            (events[0].seq, events[0].kind.as_str()),
            (1, kinds::TASK_CREATED)
        );
    }
    let first = store
        .get_task(DEFAULT_TENANT, taken_id)
        .await
        .expect("read")
        .expect("the first task stands");
    assert_eq!(
        first.goal, "created first",
        "the refused one changed nothing"
    );
    let after = store.creation_stats();
    assert_eq!(after.commits - before.commits, TASKS as u64 + 1);
    // One batch statement, then the refused batch retried member by member.
    assert_eq!(after.statements - before.statements, 1 + TASKS as u64 + 1);
    // Without the refused member, the batch is one transaction.
    let batch: Vec<_> = (0..TASKS)
        .map(|n| common::new_task(DEFAULT_TENANT, &format!("second batch {n}")))
        .collect();
    let before = store.creation_stats();
    let outcomes = join_all(
        batch
            .into_iter()
            .map(|new| store.create_task(new, None, t0())),
    )
    .await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(store.creation_stats().statements - before.statements, 1);
    db.drop_database().await;
}
