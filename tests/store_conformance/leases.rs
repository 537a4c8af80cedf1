//! Claims, fenced commits, heartbeats, release and lease expiry (driven by a ManualClock).

use std::collections::HashSet;
use std::sync::Arc;

use cairn::clock::Clock;
use cairn::domain::event::{NewEvent, kinds};
use cairn::domain::task::{DEFAULT_TENANT, Lease, TaskStatus};
use cairn::store::ClaimParams;
use cairn::store::{Change, Commit, LeaseStatus, NewLedgerEntry, StateJson, Store};
use chrono::Duration;
use serde_json::json;

use crate::support::*;

pub async fn claim_takes_oldest_with_lease(store: Arc<dyn Store>) {
    let clock = clock();
    let first = create(&store, &clock, "first").await;
    clock.advance(Duration::milliseconds(3));
    let second = create(&store, &clock, "second").await;
    clock.advance(Duration::seconds(1));

    let claimed = claim(&store, &clock, "worker-1").await;
    assert_eq!(claimed.task.id, first, "oldest queued task first");
    assert_eq!(claimed.task.status, TaskStatus::Running);
    assert_eq!(claimed.task.attempts, 1);
    assert_eq!(claimed.task.started_at, Some(clock.now()));
    assert_eq!(claimed.task.updated_at, clock.now());
    assert_eq!(claimed.task.last_seq, 2);
    assert_eq!(claimed.state, None);
    assert_eq!(
        claimed.lease,
        Lease {
            task_id: first,
            worker_id: "worker-1".to_owned(),
            fence: 1
        },
        "a fresh task has fence 0; the claim bumps it"
    );
    let events = store
        .list_events(DEFAULT_TENANT, first, 0, 10)
        .await
        .expect("events");
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].kind, kinds::TASK_CLAIMED);
    assert_eq!(events[1].seq, 2);
    assert_eq!(events[1].created_at, clock.now());
    let stored = store
        .get_task(DEFAULT_TENANT, first)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(stored, claimed.task);

    let next = claim(&store, &clock, "worker-2").await;
    assert_eq!(next.task.id, second);
    assert!(
        store
            .claim(ClaimParams::new("worker-3", clock.now(), lease_ttl()))
            .await
            .expect("claim")
            .is_none(),
        "a running task is never claimed a second time"
    );
}

pub async fn claim_race_never_double_claims(store: Arc<dyn Store>) {
    let clock = clock();
    let mut created = HashSet::new();
    for i in 0..24 {
        created.insert(create(&store, &clock, &format!("race {i}")).await);
    }
    let now = clock.now();
    let claimers = (0..8).map(|n| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(claimed) = store
                .claim(ClaimParams::new(&format!("worker-{n}"), now, lease_ttl()))
                .await
                .expect("claim")
            {
                mine.push(claimed.task.id);
            }
            mine
        })
    });
    let mut claimed = Vec::new();
    for claimer in claimers.collect::<Vec<_>>() {
        claimed.extend(claimer.await.expect("claimer"));
    }
    let unique: HashSet<_> = claimed.iter().copied().collect();
    assert_eq!(claimed.len(), unique.len(), "no task claimed twice");
    assert_eq!(unique, created, "every task claimed exactly once");
    for id in created {
        let task = store
            .get_task(DEFAULT_TENANT, id)
            .await
            .expect("get")
            .expect("task");
        assert_eq!(
            (task.status, task.attempts, task.last_seq),
            (TaskStatus::Running, 1, 2)
        );
    }
}

pub async fn fenced_commit_refuses_stale_lease(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "contested").await;
    let old = claim(&store, &clock, "w1").await.lease;
    let applied = commit(&store, &clock, &old, events(&["engine.step"])).await;
    assert_eq!(
        applied,
        Commit::Applied {
            first_seq: 3,
            last_seq: 3
        }
    );

    // The lease expires, the reaper requeues, another worker claims: fence 2.
    clock.advance(lease_ttl() + Duration::seconds(1));
    assert_eq!(
        store.reap_expired(clock.now()).await.expect("reap"),
        vec![id]
    );
    let new = claim(&store, &clock, "w2").await.lease;
    assert_eq!(new.fence, 2);
    let seq_before = event_count(&store, id).await;

    let stale_change = Change {
        state: Some(StateJson::of(&json!({ "from": "w1" })).expect("JSON")),
        ledger: vec![NewLedgerEntry {
            milestone_id: None,
            kind: "charge".to_owned(),
            unit: "tokens".to_owned(),
            amount: 10,
        }],
        events: vec![NewEvent::new("engine.step", json!({}))],
        status: Some(TaskStatus::Succeeded),
        result: Some(json!({ "from": "w1" })),
        ..Change::default()
    };
    let forged = [
        old.clone(),
        Lease {
            fence: new.fence,
            ..old.clone()
        },
        Lease {
            fence: old.fence,
            ..new.clone()
        },
    ];
    for lease in &forged {
        let outcome = commit(&store, &clock, lease, stale_change.clone()).await;
        assert_eq!(outcome, Commit::LeaseLost, "stale lease {lease:?}");
    }
    assert_eq!(
        event_count(&store, id).await,
        seq_before,
        "no events from stale leases"
    );
    assert!(
        store
            .list_ledger_entries(DEFAULT_TENANT, id)
            .await
            .expect("ledger")
            .is_empty()
    );
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!((task.status, task.result), (TaskStatus::Running, None));

    let applied = commit(&store, &clock, &new, events(&["engine.step"])).await;
    assert_eq!(
        applied,
        Commit::Applied {
            first_seq: seq_before as i64 + 1,
            last_seq: seq_before as i64 + 1
        }
    );
}

pub async fn terminal_commit_finishes_and_releases(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "finish me").await;
    let lease = claim(&store, &clock, "w").await.lease;
    clock.advance(Duration::seconds(5));
    let report = json!({ "summary": "done", "passed": ["m1"] });
    let change = Change {
        status: Some(TaskStatus::Succeeded),
        result: Some(report.clone()),
        events: vec![NewEvent::new(kinds::TASK_SUCCEEDED, json!({}))],
        ..Change::default()
    };
    assert_eq!(
        commit(&store, &clock, &lease, change).await,
        Commit::Applied {
            first_seq: 3,
            last_seq: 3
        }
    );
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.finished_at, Some(clock.now()));
    assert_eq!(task.updated_at, clock.now());
    assert_eq!(task.result, Some(report));
    assert_eq!(task.last_seq, 3);

    let beat = store
        .heartbeat(&lease, clock.now(), lease_ttl())
        .await
        .expect("heartbeat");
    assert_eq!(
        beat,
        LeaseStatus::Lost,
        "a terminal commit releases the lease"
    );
    assert_eq!(
        commit(&store, &clock, &lease, events(&["engine.step"])).await,
        Commit::LeaseLost
    );
    assert!(
        store
            .claim(ClaimParams::new("w2", clock.now(), lease_ttl()))
            .await
            .expect("claim")
            .is_none()
    );
    clock.advance(lease_ttl() * 2);
    assert!(
        store
            .reap_expired(clock.now())
            .await
            .expect("reap")
            .is_empty()
    );
    let after = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(after, task, "a finished task never changes again");
}

pub async fn release_requeues_with_checkpoint(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "hand me back").await;
    let first = claim(&store, &clock, "w1").await;
    let started = first.task.started_at;
    let checkpoint = json!({ "milestone": "m2", "step": 3 });
    let change = Change {
        status: Some(TaskStatus::Queued),
        state: Some(StateJson::of(&checkpoint).expect("JSON")),
        release: true,
        events: vec![NewEvent::new(kinds::TASK_RELEASED, json!({}))],
        ..Change::default()
    };
    clock.advance(Duration::seconds(1));
    assert_eq!(
        commit(&store, &clock, &first.lease, change).await,
        Commit::Applied {
            first_seq: 3,
            last_seq: 3
        }
    );
    let queued = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(queued.status, TaskStatus::Queued);
    assert_eq!(queued.finished_at, None);
    let beat = store
        .heartbeat(&first.lease, clock.now(), lease_ttl())
        .await
        .expect("heartbeat");
    assert_eq!(beat, LeaseStatus::Lost);

    clock.advance(Duration::seconds(1));
    let second = claim(&store, &clock, "w2").await;
    assert_eq!(second.task.id, id);
    assert_eq!(
        second.state,
        Some(checkpoint),
        "the next claimer resumes from the checkpoint"
    );
    assert_eq!(second.task.attempts, 2);
    assert_eq!(
        second.task.started_at, started,
        "started_at is the first claim"
    );
    assert_eq!(second.lease.fence, first.lease.fence + 1);
    assert_eq!(second.task.last_seq, 4);
    assert_eq!(
        commit(&store, &clock, &first.lease, events(&["engine.step"])).await,
        Commit::LeaseLost
    );
}

pub async fn heartbeat_extends_until_lost(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "keep alive").await;
    let lease = claim(&store, &clock, "w").await.lease;

    // Heartbeat at 20s moves expiry from 30s to 50s.
    clock.advance(Duration::seconds(20));
    let beat = store
        .heartbeat(&lease, clock.now(), lease_ttl())
        .await
        .expect("heartbeat");
    assert_eq!(beat, LeaseStatus::Held);
    clock.advance(Duration::seconds(20));
    assert!(
        store
            .reap_expired(clock.now())
            .await
            .expect("reap")
            .is_empty(),
        "40s: the extended lease still holds"
    );
    assert!(
        commit(&store, &clock, &lease, events_change())
            .await
            .is_applied()
    );

    clock.advance(Duration::seconds(11));
    assert_eq!(
        store.reap_expired(clock.now()).await.expect("reap"),
        vec![id]
    );
    let beat = store
        .heartbeat(&lease, clock.now(), lease_ttl())
        .await
        .expect("heartbeat");
    assert_eq!(beat, LeaseStatus::Lost, "reaped");

    let other = claim(&store, &clock, "w").await.lease;
    let beat = store
        .heartbeat(&lease, clock.now(), lease_ttl())
        .await
        .expect("heartbeat");
    assert_eq!(
        beat,
        LeaseStatus::Lost,
        "reclaimed, even by the same worker id"
    );
    let beat = store
        .heartbeat(&other, clock.now(), lease_ttl())
        .await
        .expect("heartbeat");
    assert_eq!(beat, LeaseStatus::Held);
}

pub async fn lease_expiry_follows_the_clock(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "crashy").await;
    let idle = create(&store, &clock, "never claimed").await;
    let lease = claim(&store, &clock, "w").await.lease;
    assert_eq!(lease.task_id, id);

    clock.advance(lease_ttl() - Duration::milliseconds(1));
    assert!(
        store
            .reap_expired(clock.now())
            .await
            .expect("reap")
            .is_empty(),
        "not yet expired"
    );
    assert_eq!(event_count(&store, id).await, 2);

    clock.advance(Duration::milliseconds(2));
    assert_eq!(
        store.reap_expired(clock.now()).await.expect("reap"),
        vec![id]
    );
    assert!(
        store
            .reap_expired(clock.now())
            .await
            .expect("reap")
            .is_empty(),
        "reaped once"
    );
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.status, TaskStatus::Queued);
    assert_eq!(task.updated_at, clock.now());
    assert_eq!(task.finished_at, None);
    let events = store
        .list_events(DEFAULT_TENANT, id, 0, 10)
        .await
        .expect("events");
    assert_eq!(events.len(), 3);
    assert_eq!(events[2].kind, kinds::TASK_LEASE_EXPIRED);
    assert_eq!(events[2].seq, 3);
    let idle_task = store
        .get_task(DEFAULT_TENANT, idle)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(
        (idle_task.status, idle_task.last_seq),
        (TaskStatus::Queued, 1)
    );

    assert_eq!(
        commit(&store, &clock, &lease, events_change()).await,
        Commit::LeaseLost
    );
    let again = claim(&store, &clock, "w2").await;
    assert_eq!(
        again.task.id, id,
        "the requeued task is claimable again, oldest first"
    );
    assert_eq!(again.task.attempts, 2);
    assert_eq!(
        commit(&store, &clock, &lease, events_change()).await,
        Commit::LeaseLost
    );
    assert!(
        commit(&store, &clock, &again.lease, events_change())
            .await
            .is_applied()
    );
}

fn events_change() -> Change {
    events(&["engine.step"])
}

trait Applied {
    fn is_applied(&self) -> bool;
}

impl Applied for Commit {
    fn is_applied(&self) -> bool {
        matches!(self, Commit::Applied { .. })
    }
}
