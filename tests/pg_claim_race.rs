//! Postgres leases under contention: many claimers never double-claim, stale fences write
//! nothing, and concurrent identical idempotent creates yield one task.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cairn::domain::event::{NewEvent, kinds};
use cairn::domain::task::{DEFAULT_TENANT, Lease, TaskStatus};
use cairn::store::ClaimParams;
use cairn::store::postgres::PgStore;
use cairn::store::{
    CancelOutcome, Change, Commit, IdempotencyClaim, LeaseStatus, NewArtifact, NewPlanVersion,
    Store, StoreError,
};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use tokio::sync::Barrier;
use uuid::Uuid;

const TASKS: usize = 50;
const CLAIMERS: usize = 16;
/// Claimers spread over this many stores (pools), as if on several replicas.
const STORES: usize = 4;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0)
        .single()
        .expect("valid time")
}

/// One connection per claimer sharing the pool, and no more: tests of all engineers share the
/// server's connection limit.
async fn store(url: &str) -> PgStore {
    PgStore::connect(url, (CLAIMERS / STORES) as u32)
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_claim_each_task_exactly_once() {
    let db = common::TestPg::create().await;
    let mut stores = Vec::new();
    for _ in 0..STORES {
        stores.push(Arc::new(store(&db.url).await));
    }
    stores[0].migrate().await.expect("migrate");
    let mut created = HashSet::new();
    for n in 0..TASKS {
        let task = stores[0]
            .create_task(
                common::new_task(DEFAULT_TENANT, &format!("goal {n}")),
                None,
                t0(),
            )
            .await
            .expect("create");
        created.insert(task.task.id);
    }

    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let mut handles = Vec::new();
    for claimer in 0..CLAIMERS {
        let store = stores[claimer % STORES].clone();
        let barrier = barrier.clone();
        handles.push(tokio::spawn(async move {
            let worker = format!("worker-{claimer}");
            barrier.wait().await;
            let mut mine = Vec::new();
            while let Some(claimed) = store
                .claim(ClaimParams::new(&worker, t0(), Duration::seconds(30)))
                .await
                .expect("claim")
            {
                mine.push(claimed);
            }
            (worker, mine)
        }));
    }
    let mut owners: HashMap<Uuid, String> = HashMap::new();
    for handle in handles {
        let (worker, mine) = handle.await.expect("claimer task");
        for claimed in mine {
            assert_eq!(claimed.lease.worker_id, worker);
            assert_eq!(claimed.lease.task_id, claimed.task.id);
            assert_eq!(claimed.lease.fence, 1, "first claim bumps the fence 0 -> 1");
            assert_eq!(claimed.task.status, TaskStatus::Running);
            assert_eq!(claimed.task.attempts, 1);
            assert_eq!(claimed.task.last_seq, 2);
            assert_eq!(claimed.task.started_at, Some(t0()));
            let previous = owners.insert(claimed.task.id, worker.clone());
            assert!(previous.is_none(), "task {} claimed twice", claimed.task.id);
        }
    }
    assert_eq!(owners.len(), TASKS, "every task claimed");
    assert_eq!(owners.keys().copied().collect::<HashSet<_>>(), created);
    assert!(
        stores[1]
            .claim(ClaimParams::new("late", t0(), Duration::seconds(30)))
            .await
            .expect("claim")
            .is_none()
    );

    for (task_id, worker) in &owners {
        let events = stores[2]
            .list_events(DEFAULT_TENANT, *task_id, 0, 100)
            .await
            .expect("events");
        let seqs: Vec<i64> = events.iter().map(|event| event.seq).collect();
        assert_eq!(seqs, vec![1, 2], "dense seqs for {task_id}");
        assert_eq!(events[0].kind, kinds::TASK_CREATED);
        assert_eq!(events[1].kind, kinds::TASK_CLAIMED);
        assert_eq!(events[1].data["worker_id"], json!(worker));
        assert_eq!(events[1].data["fence"], json!(1));
    }
    drop(stores);
    db.drop_database().await;
}

#[tokio::test]
async fn stale_fence_is_lease_lost_and_writes_nothing() {
    let db = common::TestPg::create().await;
    let store = store(&db.url).await;
    store.migrate().await.expect("migrate");
    let ttl = Duration::seconds(30);
    let task = store
        .create_task(common::new_task(DEFAULT_TENANT, "fenced"), None, t0())
        .await
        .expect("create")
        .task;

    let first = store
        .claim(ClaimParams::new("worker-a", t0(), ttl))
        .await
        .expect("claim")
        .expect("a task");
    let applied = store
        .commit(&first.lease, common::step_change("a1"), t0())
        .await
        .expect("commit");
    assert_eq!(
        applied,
        Commit::Applied {
            first_seq: 3,
            last_seq: 4
        }
    );

    // The lease expires; the reaper requeues the task and the same worker id claims it again.
    let later = t0() + ttl + Duration::seconds(1);
    assert_eq!(
        store.reap_expired(later).await.expect("reap"),
        vec![task.id]
    );
    let second = store
        .claim(ClaimParams::new("worker-a", later, ttl))
        .await
        .expect("claim")
        .expect("requeued task");
    assert_eq!(second.lease.fence, first.lease.fence + 1);
    assert_eq!(second.task.attempts, 2);
    assert_eq!(second.state, Some(json!({ "note": "a1" })));

    let before = common::footprint(&store, task.id).await;
    let stale = store
        .commit(&first.lease, common::step_change("stale"), later)
        .await
        .expect("commit");
    assert_eq!(stale, Commit::LeaseLost);
    assert_eq!(common::footprint(&store, task.id).await, before);
    assert_eq!(
        store.heartbeat(&first.lease, later, ttl).await.expect("hb"),
        LeaseStatus::Lost
    );
    let forged = Lease {
        worker_id: "worker-b".to_string(),
        ..second.lease.clone()
    };
    assert_eq!(
        store
            .commit(&forged, common::step_change("forged"), later)
            .await
            .expect("commit"),
        Commit::LeaseLost
    );
    assert_eq!(common::footprint(&store, task.id).await, before);

    // The live lease still writes, and its seqs continue densely.
    assert_eq!(
        store
            .heartbeat(&second.lease, later, ttl)
            .await
            .expect("hb"),
        LeaseStatus::Held
    );
    let live = store
        .commit(&second.lease, common::step_change("b1"), later)
        .await
        .expect("commit");
    assert_eq!(
        live,
        Commit::Applied {
            first_seq: 7,
            last_seq: 8
        }
    );
    let kinds_seen: Vec<String> = store
        .list_events(DEFAULT_TENANT, task.id, 0, 100)
        .await
        .expect("events")
        .into_iter()
        .map(|event| event.kind)
        .collect();
    assert_eq!(
        kinds_seen,
        [
            kinds::TASK_CREATED,
            kinds::TASK_CLAIMED,
            kinds::ENGINE_STEP,
            kinds::ENGINE_STEP,
            kinds::TASK_LEASE_EXPIRED,
            kinds::TASK_CLAIMED,
            kinds::ENGINE_STEP,
            kinds::ENGINE_STEP,
        ]
    );

    // Cancelling revokes the lease: the worker's next write is refused.
    let cancelled = store
        .cancel_task(DEFAULT_TENANT, task.id, later)
        .await
        .expect("cancel");
    assert!(
        matches!(cancelled, CancelOutcome::Cancelled(ref t) if t.status == TaskStatus::Cancelled)
    );
    let before = common::footprint(&store, task.id).await;
    assert_eq!(
        store
            .commit(&second.lease, common::step_change("after cancel"), later)
            .await
            .expect("commit"),
        Commit::LeaseLost
    );
    assert_eq!(common::footprint(&store, task.id).await, before);
    db.drop_database().await;
}

#[tokio::test]
async fn terminal_commit_and_release_clear_the_lease() {
    let db = common::TestPg::create().await;
    let store = store(&db.url).await;
    store.migrate().await.expect("migrate");
    let ttl = Duration::seconds(30);
    let done = store
        .create_task(common::new_task(DEFAULT_TENANT, "finish"), None, t0())
        .await
        .expect("create")
        .task;
    let handed_back = store
        .create_task(common::new_task(DEFAULT_TENANT, "hand back"), None, t0())
        .await
        .expect("create")
        .task;

    let claimed = store
        .claim(ClaimParams::new("w", t0(), ttl))
        .await
        .expect("claim")
        .expect("task");
    assert_eq!(claimed.task.id, done.id, "oldest queued task first");
    let finish = Change {
        status: Some(TaskStatus::Succeeded),
        result: Some(json!({ "answer": 42 })),
        plan_version: Some(NewPlanVersion {
            version: 1,
            reason: "initial".to_string(),
            caused_by_seq: Some(2),
            plan: json!({ "milestones": [] }),
        }),
        artifacts: vec![NewArtifact {
            milestone_id: "m1".to_string(),
            name: "answer".to_string(),
            value: json!(42),
        }],
        events: vec![NewEvent::new(kinds::TASK_SUCCEEDED, json!({}))],
        ..Change::default()
    };
    let end = t0() + Duration::seconds(5);
    assert_eq!(
        store
            .commit(&claimed.lease, finish, end)
            .await
            .expect("commit"),
        Commit::Applied {
            first_seq: 3,
            last_seq: 3
        }
    );
    let task = store
        .get_task(DEFAULT_TENANT, done.id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.finished_at, Some(end));
    assert_eq!(task.result, Some(json!({ "answer": 42 })));
    assert_eq!(task.plan_version, Some(1));
    let plan = store
        .get_plan_version(DEFAULT_TENANT, done.id, 1)
        .await
        .expect("plan")
        .expect("version 1 stored");
    assert_eq!(
        (plan.reason.as_str(), plan.caused_by_seq),
        ("initial", Some(2))
    );
    assert_eq!(
        store
            .list_plan_versions(DEFAULT_TENANT, done.id)
            .await
            .expect("plans"),
        vec![plan]
    );
    let artifacts = store
        .list_artifacts(DEFAULT_TENANT, done.id)
        .await
        .expect("artifacts");
    assert_eq!(artifacts.len(), 1);
    assert_eq!(
        (artifacts[0].name.as_str(), &artifacts[0].value),
        ("answer", &json!(42))
    );
    // A finished task is never reaped, however late it gets.
    assert!(
        store
            .reap_expired(end + Duration::days(1))
            .await
            .expect("reap")
            .is_empty()
    );

    let claimed = store
        .claim(ClaimParams::new("w", t0(), ttl))
        .await
        .expect("claim")
        .expect("task");
    assert_eq!(claimed.task.id, handed_back.id);
    let release = Change {
        status: Some(TaskStatus::Queued),
        release: true,
        events: vec![NewEvent::new(kinds::TASK_RELEASED, json!({}))],
        ..Change::default()
    };
    assert!(matches!(
        store
            .commit(&claimed.lease, release, end)
            .await
            .expect("commit"),
        Commit::Applied { .. }
    ));
    let again = store
        .claim(ClaimParams::new("w2", end, ttl))
        .await
        .expect("claim")
        .expect("released task");
    assert_eq!(again.task.id, handed_back.id);
    assert_eq!(again.lease.fence, 2);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_identical_idempotent_creates_yield_one_task() {
    let db = common::TestPg::create().await;
    let store = Arc::new(store(&db.url).await);
    store.migrate().await.expect("migrate");
    let claim = IdempotencyClaim {
        key: "key-1".to_string(),
        request_hash: "hash-a".to_string(),
    };
    let barrier = Arc::new(Barrier::new(8));
    let mut handles = Vec::new();
    for _ in 0..8 {
        let (store, claim, barrier) = (store.clone(), claim.clone(), barrier.clone());
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            store
                .create_task(common::new_task(DEFAULT_TENANT, "same"), Some(claim), t0())
                .await
        }));
    }
    let mut ids = HashSet::new();
    let mut fresh = 0;
    for handle in handles {
        let created = handle.await.expect("join").expect("create");
        ids.insert(created.task.id);
        fresh += usize::from(created.created);
    }
    assert_eq!(ids.len(), 1, "one task for one key");
    assert_eq!(fresh, 1, "exactly one call created it");
    let existing = *ids.iter().next().expect("one id");

    let other_body = IdempotencyClaim {
        request_hash: "hash-b".to_string(),
        ..claim
    };
    match store
        .create_task(
            common::new_task(DEFAULT_TENANT, "different"),
            Some(other_body),
            t0(),
        )
        .await
    {
        Err(StoreError::IdempotencyConflict { existing_task }) => {
            assert_eq!(existing_task, existing)
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let all = store
        .list_tasks(
            DEFAULT_TENANT,
            &cairn::store::TaskQuery {
                limit: 100,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    assert_eq!(all.len(), 1, "the conflict wrote nothing");
    db.drop_database().await;
}
