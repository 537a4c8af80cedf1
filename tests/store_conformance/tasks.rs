//! Task creation, listing, idempotency, event order and cancellation.

use std::sync::Arc;

use cairn::clock::Clock;
use cairn::domain::event::kinds;
use cairn::domain::task::{DEFAULT_TENANT, TaskId, TaskStatus};
use cairn::store::ClaimParams;
use cairn::store::{
    CancelOutcome, Commit, IdempotencyClaim, LeaseStatus, Store, StoreError, TaskQuery,
};
use chrono::Duration;

use crate::support::*;

/// Pages through `list_tasks` with the keyset cursor until a short page.
async fn all_pages(store: &Arc<dyn Store>, status: Option<TaskStatus>, limit: i64) -> Vec<TaskId> {
    let mut ids = Vec::new();
    let mut before = None;
    for _ in 0..100 {
        let page = store
            .list_tasks(
                DEFAULT_TENANT,
                &TaskQuery {
                    status,
                    before,
                    limit,
                },
            )
            .await
            .expect("list tasks");
        assert!(
            page.len() as i64 <= limit,
            "a page holds at most `limit` tasks"
        );
        ids.extend(page.iter().map(|task| task.id));
        if (page.len() as i64) < limit {
            return ids;
        }
        before = page.last().map(|task| task.id);
    }
    panic!("pagination did not end");
}

pub async fn create_get_list_paginates(store: Arc<dyn Store>) {
    let clock = clock();
    let new = new_task(DEFAULT_TENANT, "write the report");
    let created = store
        .create_task(new.clone(), None, clock.now())
        .await
        .expect("create");
    assert!(created.created);
    let task = created.task;
    assert_eq!(task.id, new.id);
    assert_eq!(task.tenant_id, DEFAULT_TENANT);
    assert_eq!(task.goal, new.goal);
    assert_eq!(task.strategy, new.strategy);
    assert_eq!(task.budget, new.budget);
    assert_eq!(task.metadata, new.metadata);
    assert_eq!(task.status, TaskStatus::Queued);
    assert_eq!(task.created_at, clock.now());
    assert_eq!(task.updated_at, clock.now());
    assert_eq!((task.started_at, task.finished_at), (None, None));
    assert_eq!((task.plan_version, task.result.clone()), (None, None));
    assert_eq!((task.attempts, task.last_seq), (0, 1));
    let fetched = store.get_task(DEFAULT_TENANT, task.id).await.expect("get");
    assert_eq!(fetched.as_ref(), Some(&task));
    assert_eq!(
        store.get_task("other", task.id).await.expect("get"),
        None,
        "tenant isolation"
    );
    assert_eq!(
        store
            .get_task(DEFAULT_TENANT, uuid::Uuid::now_v7())
            .await
            .expect("get"),
        None
    );

    let mut all = vec![task.id];
    for i in 0..6 {
        clock.advance(Duration::milliseconds(5));
        all.push(create(&store, &clock, &format!("goal {i}")).await);
    }
    store
        .create_task(new_task("other", "not mine"), None, clock.now())
        .await
        .expect("create in another tenant");
    // Claiming takes the oldest first: the first three become running.
    let mut running = Vec::new();
    for worker in ["w1", "w2", "w3"] {
        running.push(claim(&store, &clock, worker).await.task.id);
    }
    all.sort_unstable_by(|a, b| b.cmp(a));
    let mut expected_running = all[all.len() - 3..].to_vec();
    expected_running.sort_unstable_by(|a, b| b.cmp(a));
    running.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(running, expected_running, "claims go oldest first");

    for limit in [1, 2, 3, 7, 50] {
        let ids = all_pages(&store, None, limit).await;
        assert_eq!(
            ids, all,
            "limit {limit}: newest first, no gaps, no duplicates"
        );
    }
    assert_eq!(
        all_pages(&store, Some(TaskStatus::Running), 2).await,
        expected_running
    );
    assert_eq!(
        all_pages(&store, Some(TaskStatus::Queued), 3).await,
        all[..4].to_vec()
    );
    assert!(
        all_pages(&store, Some(TaskStatus::Failed), 3)
            .await
            .is_empty()
    );
    let empty = store
        .list_tasks(
            DEFAULT_TENANT,
            &TaskQuery {
                status: None,
                before: None,
                limit: 0,
            },
        )
        .await
        .expect("list");
    assert!(empty.is_empty(), "limit 0 returns nothing");
}

pub async fn idempotent_create(store: Arc<dyn Store>) {
    let clock = clock();
    let key = |hash: &str| IdempotencyClaim {
        key: "key-1".to_owned(),
        request_hash: hash.to_owned(),
    };
    let first = store
        .create_task(
            new_task(DEFAULT_TENANT, "once"),
            Some(key("h1")),
            clock.now(),
        )
        .await
        .expect("create");
    assert!(first.created);

    clock.advance(Duration::seconds(1));
    let replay_new = new_task(DEFAULT_TENANT, "once");
    let replay = store
        .create_task(replay_new.clone(), Some(key("h1")), clock.now())
        .await
        .expect("replay");
    assert!(!replay.created, "same key and body replays");
    assert_eq!(
        replay.task, first.task,
        "the replay returns the original task unchanged"
    );
    assert_eq!(
        store
            .get_task(DEFAULT_TENANT, replay_new.id)
            .await
            .expect("get"),
        None
    );

    let conflicting = new_task(DEFAULT_TENANT, "something else");
    match store
        .create_task(conflicting.clone(), Some(key("h2")), clock.now())
        .await
    {
        Err(StoreError::IdempotencyConflict { existing_task }) => {
            assert_eq!(existing_task, first.task.id)
        }
        other => panic!("expected IdempotencyConflict, got {other:?}"),
    }
    assert_eq!(
        store
            .get_task(DEFAULT_TENANT, conflicting.id)
            .await
            .expect("get"),
        None
    );
    let listed = store
        .list_tasks(
            DEFAULT_TENANT,
            &TaskQuery {
                status: None,
                before: None,
                limit: 10,
            },
        )
        .await
        .expect("list");
    assert_eq!(
        listed.len(),
        1,
        "neither the replay nor the conflict wrote a task"
    );
    assert_eq!(event_count(&store, first.task.id).await, 1);

    // Keys are scoped per tenant.
    let elsewhere = store
        .create_task(new_task("other", "once"), Some(key("h2")), clock.now())
        .await
        .expect("same key in another tenant");
    assert!(elsewhere.created);
    assert_ne!(elsewhere.task.id, first.task.id);
}

pub async fn events_are_dense_and_ordered(store: Arc<dyn Store>) {
    let clock = clock();
    let a = create(&store, &clock, "a").await;
    let b = create(&store, &clock, "b").await;
    let lease_a = claim(&store, &clock, "w").await.lease;
    let lease_b = claim(&store, &clock, "w").await.lease;
    assert_eq!((lease_a.task_id, lease_b.task_id), (a, b));

    // Interleaved writes to two tasks keep each task's seqs dense.
    for round in 0..3 {
        clock.advance(Duration::milliseconds(1));
        let applied = commit(
            &store,
            &clock,
            &lease_a,
            events(&["engine.step", "engine.step"]),
        )
        .await;
        let first = 3 + 2 * round;
        assert_eq!(
            applied,
            Commit::Applied {
                first_seq: first,
                last_seq: first + 1
            }
        );
        let applied = commit(&store, &clock, &lease_b, events(&["engine.step"])).await;
        assert_eq!(
            applied,
            Commit::Applied {
                first_seq: 3 + round,
                last_seq: 3 + round
            }
        );
    }
    match commit(&store, &clock, &lease_a, events(&[])).await {
        Commit::Applied {
            first_seq,
            last_seq,
        } => {
            assert!((first_seq..=last_seq).is_empty(), "no events, no seqs")
        }
        Commit::LeaseLost => panic!("lease should hold"),
    }

    let all = store
        .list_events(DEFAULT_TENANT, a, 0, 100)
        .await
        .expect("events");
    let seqs: Vec<i64> = all.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
    assert_eq!(all[0].kind, kinds::TASK_CREATED);
    assert_eq!(all[1].kind, kinds::TASK_CLAIMED);
    assert!(all.iter().all(|event| event.task_id == a));
    assert_eq!(all[2].data, serde_json::json!({ "i": 0 }));
    assert_eq!(all[3].data, serde_json::json!({ "i": 1 }));
    assert!(all.windows(2).all(|w| w[0].created_at <= w[1].created_at));
    let task = store
        .get_task(DEFAULT_TENANT, a)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.last_seq, 8);

    let page = store
        .list_events(DEFAULT_TENANT, a, 3, 2)
        .await
        .expect("events");
    assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![4, 5]);
    assert!(
        store
            .list_events(DEFAULT_TENANT, a, 8, 10)
            .await
            .expect("events")
            .is_empty()
    );
    assert!(
        store
            .list_events(DEFAULT_TENANT, a, 0, 0)
            .await
            .expect("events")
            .is_empty()
    );
    let b_seqs: Vec<i64> = store
        .list_events(DEFAULT_TENANT, b, 0, 100)
        .await
        .expect("events")
        .iter()
        .map(|event| event.seq)
        .collect();
    assert_eq!(b_seqs, (1..=5).collect::<Vec<_>>());
}

pub async fn cancel_queued(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "cancel me").await;
    clock.advance(Duration::seconds(2));
    let task = match store
        .cancel_task(DEFAULT_TENANT, id, clock.now())
        .await
        .expect("cancel")
    {
        CancelOutcome::Cancelled(task) => task,
        other => panic!("expected Cancelled, got {other:?}"),
    };
    assert_eq!(task.status, TaskStatus::Cancelled);
    assert_eq!(task.finished_at, Some(clock.now()));
    assert_eq!(task.last_seq, 2);
    let events = store
        .list_events(DEFAULT_TENANT, id, 0, 10)
        .await
        .expect("events");
    assert_eq!(
        events.last().map(|e| e.kind.as_str()),
        Some(kinds::TASK_CANCELLED)
    );
    assert_eq!(events.len(), 2);
    assert!(
        store
            .claim(ClaimParams::new("w", clock.now(), lease_ttl()))
            .await
            .expect("claim")
            .is_none()
    );
}

pub async fn cancel_running_revokes_lease(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "cancel me").await;
    let lease = claim(&store, &clock, "w").await.lease;
    let task = match store
        .cancel_task(DEFAULT_TENANT, id, clock.now())
        .await
        .expect("cancel")
    {
        CancelOutcome::Cancelled(task) => task,
        other => panic!("expected Cancelled, got {other:?}"),
    };
    assert_eq!(task.status, TaskStatus::Cancelled);
    assert_eq!(task.finished_at, Some(clock.now()));
    let before = event_count(&store, id).await;
    assert_eq!(
        commit(&store, &clock, &lease, events(&["engine.step"])).await,
        Commit::LeaseLost
    );
    assert_eq!(
        event_count(&store, id).await,
        before,
        "the revoked worker wrote nothing"
    );
    let beat = store
        .heartbeat(&lease, clock.now(), lease_ttl())
        .await
        .expect("heartbeat");
    assert_eq!(beat, LeaseStatus::Lost);
    let after = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(after.status, TaskStatus::Cancelled);
}

pub async fn cancel_terminal_or_unknown(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "cancel me twice").await;
    let first = store
        .cancel_task(DEFAULT_TENANT, id, clock.now())
        .await
        .expect("cancel");
    let CancelOutcome::Cancelled(cancelled) = first else {
        panic!("expected Cancelled, got {first:?}");
    };
    clock.advance(Duration::seconds(1));
    match store
        .cancel_task(DEFAULT_TENANT, id, clock.now())
        .await
        .expect("cancel")
    {
        CancelOutcome::AlreadyTerminal(task) => assert_eq!(task, cancelled, "nothing changed"),
        other => panic!("expected AlreadyTerminal, got {other:?}"),
    }
    assert_eq!(event_count(&store, id).await, 2);
    let unknown = store
        .cancel_task(DEFAULT_TENANT, uuid::Uuid::now_v7(), clock.now())
        .await
        .expect("cancel");
    assert_eq!(unknown, CancelOutcome::NotFound);
    let other = create(&store, &clock, "someone else's").await;
    let wrong_tenant = store
        .cancel_task("other", other, clock.now())
        .await
        .expect("cancel");
    assert_eq!(wrong_tenant, CancelOutcome::NotFound);
    let untouched = store
        .get_task(DEFAULT_TENANT, other)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(untouched.status, TaskStatus::Queued);
}
