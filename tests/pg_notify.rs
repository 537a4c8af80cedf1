//! Wake-ups across replicas: two PgStores on one database stand in for two `cairn serve`
//! processes; what one commits reaches the other's subscription, also after its listening
//! connection was killed.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::time::Duration as StdDuration;

use cairn::domain::event::{NewEvent, kinds};
use cairn::domain::task::{Budget, DEFAULT_TENANT, NewTask, Strategy};
use cairn::store::ClaimParams;
use cairn::store::postgres::PgStore;
use cairn::store::{Change, Commit, Store, Wakeup};
use chrono::{Duration, Utc};
use serde_json::json;
use sqlx::Connection;
use tokio::sync::broadcast::{self, error::RecvError};
use uuid::Uuid;

/// Generous: a hint normally arrives in milliseconds; this only bounds a failing test.
const WAIT: StdDuration = StdDuration::from_secs(15);

fn new_task() -> NewTask {
    NewTask {
        tools: None,
        id: Uuid::now_v7(),
        tenant_id: DEFAULT_TENANT.to_string(),
        goal: "notify".to_string(),
        strategy: Strategy::Direct,
        budget: Budget {
            tokens: 100,
            tool_calls: 1,
            wall_ms: 1_000,
            cost: None,
        },
        metadata: json!({}),
        approval: Default::default(),
    }
}

/// Receives until a hint matches and returns it, or fails after [`WAIT`]. Lag only loses
/// hints, so it is skipped like any non-matching hint.
async fn wait_for(rx: &mut broadcast::Receiver<Wakeup>, want: impl Fn(&Wakeup) -> bool) -> Wakeup {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => panic!("no matching wake-up within {WAIT:?}"),
            Ok(Ok(wakeup)) if want(&wakeup) => return wakeup,
            Ok(Ok(_)) | Ok(Err(RecvError::Lagged(_))) => {}
            Ok(Err(RecvError::Closed)) => panic!("wake-up channel closed"),
        }
    }
}

#[tokio::test]
async fn events_committed_on_one_replica_wake_the_other() {
    let db = common::TestPg::create().await;
    let a = PgStore::connect(&db.url, 4).await.expect("connect a");
    let b = PgStore::connect(&db.url, 4).await.expect("connect b");
    a.migrate().await.expect("migrate");
    let mut on_b = b.subscribe();

    let task = a
        .create_task(new_task(), None, Utc::now())
        .await
        .expect("create")
        .task;
    wait_for(&mut on_b, |w| *w == Wakeup::TaskRunnable).await;

    let claimed = a
        .claim(ClaimParams::new(
            "worker-a",
            Utc::now(),
            Duration::seconds(30),
        ))
        .await
        .expect("claim")
        .expect("task");
    let change = Change {
        events: vec![NewEvent::new(kinds::ENGINE_STEP, json!({ "n": 1 }))],
        ..Change::default()
    };
    let Commit::Applied { last_seq, .. } = a
        .commit(&claimed.lease, change, Utc::now())
        .await
        .expect("commit")
    else {
        panic!("lease lost on a fresh claim");
    };
    assert_eq!(last_seq, 3);
    wait_for(&mut on_b, |w| {
        *w == Wakeup::Events {
            task_id: task.id,
            last_seq,
        }
    })
    .await;
    // The hint is only a pointer: B reads the rows itself.
    let events = b
        .list_events(DEFAULT_TENANT, task.id, 2, 10)
        .await
        .expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data, json!({ "n": 1 }));
    db.drop_database().await;
}

#[tokio::test]
async fn listener_reconnects_after_its_connection_is_killed() {
    let db = common::TestPg::create().await;
    let a = PgStore::connect(&db.url, 4).await.expect("connect a");
    let b = PgStore::connect(&db.url, 4).await.expect("connect b");
    a.migrate().await.expect("migrate");
    let mut on_b = b.subscribe();

    // Kill every listening session on this database (A's and B's).
    let mut admin = sqlx::PgConnection::connect(&db.url).await.expect("admin");
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN%') AS t",
    )
    .fetch_one(&mut admin)
    .await
    .expect("terminate listeners");
    assert_eq!(killed, 2, "one listening session per store");

    // B announces the gap so idle workers poll once ...
    wait_for(&mut on_b, |w| *w == Wakeup::TaskRunnable).await;
    // ... and hears new commits once it is listening again. The listener re-subscribes on its
    // own schedule, so keep committing until one hint gets through (bounded by WAIT).
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let task = a
            .create_task(new_task(), None, Utc::now())
            .await
            .expect("create")
            .task;
        let heard = tokio::time::timeout(StdDuration::from_millis(500), async {
            wait_for(
                &mut on_b,
                |w| matches!(w, Wakeup::Events { task_id, last_seq: 1 } if *task_id == task.id),
            )
            .await
        })
        .await;
        if heard.is_ok() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "B never heard a commit after reconnecting"
        );
    }
    drop(admin);
    db.drop_database().await;
}

#[tokio::test]
async fn a_reap_on_one_replica_wakes_idle_workers_on_the_other() {
    let db = common::TestPg::create().await;
    let a = PgStore::connect(&db.url, 4).await.expect("connect a");
    let b = PgStore::connect(&db.url, 4).await.expect("connect b");
    a.migrate().await.expect("migrate");
    let start = Utc::now();
    let ttl = Duration::seconds(30);
    let task = a
        .create_task(new_task(), None, start)
        .await
        .expect("create")
        .task;
    a.claim(ClaimParams::new("worker-a", start, ttl))
        .await
        .expect("claim")
        .expect("task");
    // Subscribe only now, so the TaskRunnable from the creation cannot satisfy the wait below.
    let mut on_b = b.subscribe();

    let reaped = a
        .reap_expired(start + ttl + Duration::seconds(1))
        .await
        .expect("reap");
    assert_eq!(reaped, vec![task.id]);
    // created (1), claimed (2), lease_expired (3); the two hints may come in either order.
    let expired = Wakeup::Events {
        task_id: task.id,
        last_seq: 3,
    };
    let mut pending = vec![Wakeup::TaskRunnable, expired];
    while !pending.is_empty() {
        let got = wait_for(&mut on_b, |w| pending.contains(w)).await;
        pending.retain(|w| *w != got);
    }
    let claimed = b
        .claim(ClaimParams::new(
            "worker-b",
            start + ttl + Duration::seconds(2),
            ttl,
        ))
        .await
        .expect("claim")
        .expect("the requeued task is claimable on B");
    assert_eq!(claimed.task.id, task.id);
    assert_eq!(claimed.lease.fence, 2);
    db.drop_database().await;
}

/// Waits until `store` finished `looks` looks for other replicas' listeners.
async fn looked(store: &PgStore, looks: u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while store.hint_stats().looks < looks {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no look for listeners within {WAIT:?}"
        );
        tokio::time::sleep(StdDuration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_store_alone_delivers_its_hints_in_process_and_sends_no_notify() {
    let db = common::TestPg::create().await;
    let a = PgStore::connect(&db.url, 4).await.expect("connect a");
    a.migrate().await.expect("migrate");
    // An outside listener is not a cairn replica: it does not make A send.
    let mut spy = sqlx::postgres::PgListener::connect(&db.url)
        .await
        .expect("spy");
    spy.listen_all(["cairn_events", "cairn_tasks"])
        .await
        .expect("listen");
    looked(&a, 1).await;
    let sent_before = a.hint_stats().notify_statements;
    let mut on_a = a.subscribe();
    let task = a
        .create_task(new_task(), None, Utc::now())
        .await
        .expect("create")
        .task;
    // Heard at once, from the commit path itself.
    assert_eq!(
        on_a.try_recv()
            .expect("the hint is there when create returns"),
        Wakeup::Events {
            task_id: task.id,
            last_seq: 1
        }
    );
    assert_eq!(on_a.try_recv().expect("runnable"), Wakeup::TaskRunnable);
    // Two more looks: whatever was pending has been dropped, nothing was sent.
    let looks = a.hint_stats().looks;
    looked(&a, looks + 2).await;
    assert_eq!(a.hint_stats().notify_statements, sent_before);
    let none = tokio::time::timeout(StdDuration::from_millis(200), spy.recv()).await;
    assert!(none.is_err(), "a NOTIFY was sent: {none:?}");
    // Its own hints are not delivered twice either (its listener would drop them anyway).
    assert!(matches!(
        on_a.try_recv(),
        Err(broadcast::error::TryRecvError::Empty)
    ));

    // A second replica appears: once A has looked again, A's hints reach it.
    let b = PgStore::connect(&db.url, 4).await.expect("connect b");
    let mut on_b = b.subscribe();
    let looks = a.hint_stats().looks;
    looked(&a, looks + 2).await;
    let task = a
        .create_task(new_task(), None, Utc::now())
        .await
        .expect("create")
        .task;
    wait_for(
        &mut on_b,
        |w| matches!(w, Wakeup::Events { task_id, last_seq: 1 } if *task_id == task.id),
    )
    .await;
    assert!(a.hint_stats().notify_statements > sent_before);
    // A hears its own hint once, in process, not a second time from its listener.
    let mut heard = 0;
    let until = tokio::time::Instant::now() + StdDuration::from_millis(300);
    while let Ok(Ok(wakeup)) = tokio::time::timeout_at(until, on_a.recv()).await {
        if matches!(wakeup, Wakeup::Events { task_id, .. } if task_id == task.id) {
            heard += 1;
        }
    }
    assert_eq!(heard, 1, "A heard its own hint {heard} times");
    drop(spy);
    db.drop_database().await;
}
