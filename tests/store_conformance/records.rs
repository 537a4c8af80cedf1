//! Plan versions, ledger entries, artifacts, tool receipts, atomicity of a commit, wake-ups.

use std::sync::Arc;

use cairn::clock::Clock;
use cairn::domain::event::{NewEvent, kinds};
use cairn::domain::task::DEFAULT_TENANT;
use cairn::store::{
    Change, Commit, NewArtifact, NewLedgerEntry, NewPlanVersion, NewToolReceipt, Store, Wakeup,
};
use chrono::Duration;
use serde_json::json;

use crate::support::*;

fn plan(version: i32, reason: &str, caused_by_seq: Option<i64>) -> Change {
    Change {
        plan_version: Some(NewPlanVersion {
            version,
            reason: reason.to_owned(),
            caused_by_seq,
            plan: json!({ "milestones": [{ "id": "m1", "status": "pending" }], "v": version }),
        }),
        events: vec![NewEvent::new(
            kinds::PLAN_VERSIONED,
            json!({ "version": version }),
        )],
        ..Change::default()
    }
}

pub async fn plan_versions_round_trip(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "plan me").await;
    let lease = claim(&store, &clock, "w").await.lease;
    let v1_at = clock.now();
    assert!(matches!(
        commit(&store, &clock, &lease, plan(1, "initial", None)).await,
        Commit::Applied { .. }
    ));
    assert_eq!(
        store
            .get_task(DEFAULT_TENANT, id)
            .await
            .expect("get")
            .expect("t")
            .plan_version,
        Some(1)
    );
    clock.advance(Duration::seconds(3));
    commit(&store, &clock, &lease, plan(2, "check_failed", Some(3))).await;
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.plan_version, Some(2));

    let versions = store
        .list_plan_versions(DEFAULT_TENANT, id)
        .await
        .expect("list plans");
    assert_eq!(versions.len(), 2);
    let (v1, v2) = (&versions[0], &versions[1]);
    assert_eq!(
        (v1.task_id, v1.version, v1.reason.as_str()),
        (id, 1, "initial")
    );
    assert_eq!((v1.caused_by_seq, v1.created_at), (None, v1_at));
    assert_eq!(v1.plan["v"], json!(1));
    assert_eq!(
        (v2.version, v2.reason.as_str(), v2.caused_by_seq),
        (2, "check_failed", Some(3))
    );
    assert_eq!(v2.created_at, clock.now());
    assert_eq!(
        store
            .get_plan_version(DEFAULT_TENANT, id, 1)
            .await
            .expect("get plan")
            .as_ref(),
        Some(v1)
    );
    assert_eq!(
        store
            .get_plan_version(DEFAULT_TENANT, id, 2)
            .await
            .expect("get plan")
            .as_ref(),
        Some(v2)
    );
    assert_eq!(
        store
            .get_plan_version(DEFAULT_TENANT, id, 3)
            .await
            .expect("get plan"),
        None
    );
    let other = create(&store, &clock, "unplanned").await;
    assert!(
        store
            .list_plan_versions(DEFAULT_TENANT, other)
            .await
            .expect("list plans")
            .is_empty()
    );
}

/// A commit that fails part-way (a plan version that already exists is never overwritten)
/// writes none of its parts.
pub async fn failed_commit_writes_nothing(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "atomic").await;
    let lease = claim(&store, &clock, "w").await.lease;
    commit(&store, &clock, &lease, plan(1, "initial", None)).await;
    let before = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");

    clock.advance(Duration::seconds(1));
    let mut duplicate = plan(1, "rewrite history", None);
    duplicate.ledger.push(NewLedgerEntry {
        milestone_id: Some("m1".to_owned()),
        kind: "charge".to_owned(),
        unit: "tokens".to_owned(),
        amount: 5,
    });
    duplicate.state = Some(cairn::store::StateJson::of(&json!({ "lost": true })).expect("JSON"));
    let outcome = store.commit(&lease, duplicate, clock.now()).await;
    assert!(
        outcome.is_err(),
        "plan versions are immutable: got {outcome:?}"
    );

    let after = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(after, before, "the task row is untouched");
    assert_eq!(event_count(&store, id).await as i64, before.last_seq);
    assert!(
        store
            .list_ledger_entries(DEFAULT_TENANT, id)
            .await
            .expect("ledger")
            .is_empty()
    );
    let versions = store
        .list_plan_versions(DEFAULT_TENANT, id)
        .await
        .expect("plans");
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0].reason, "initial");
    // The lease survives a failed write: the worker can carry on.
    assert!(matches!(
        commit(&store, &clock, &lease, events(&["engine.step"])).await,
        Commit::Applied { .. }
    ));
}

pub async fn ledger_and_artifacts_round_trip(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "spend").await;
    let lease = claim(&store, &clock, "w").await.lease;
    let entry = |milestone: Option<&str>, kind: &str, unit: &str, amount: i64| NewLedgerEntry {
        milestone_id: milestone.map(str::to_owned),
        kind: kind.to_owned(),
        unit: unit.to_owned(),
        amount,
    };
    let entries = vec![
        entry(None, "reserve", "tokens", 40_000),
        entry(Some("m1"), "allocate", "tokens", 22_857),
        entry(Some("m1"), "charge", "tool_calls", 3),
        entry(Some("m1"), "return", "wall_ms", -1),
    ];
    let change = Change {
        ledger: entries.clone(),
        artifacts: vec![
            NewArtifact {
                milestone_id: "m1".to_owned(),
                name: "report".to_owned(),
                value: json!({ "text": "hello", "n": 1 }),
            },
            NewArtifact {
                milestone_id: "m1".to_owned(),
                name: "urls".to_owned(),
                value: json!(["a", "b"]),
            },
        ],
        ..Change::default()
    };
    commit(&store, &clock, &lease, change).await;
    clock.advance(Duration::seconds(1));
    // A retried step writes its artifact again: both writes are kept, in write order.
    let later = Change {
        ledger: vec![entry(Some("m2"), "grant", "tokens", 6_286)],
        artifacts: vec![NewArtifact {
            milestone_id: "m1".to_owned(),
            name: "report".to_owned(),
            value: json!({ "text": "hello again", "n": 2 }),
        }],
        ..Change::default()
    };
    commit(&store, &clock, &lease, later).await;

    let stored = store
        .list_ledger_entries(DEFAULT_TENANT, id)
        .await
        .expect("ledger");
    assert_eq!(stored.len(), 5);
    assert!(
        stored.windows(2).all(|w| w[0].id < w[1].id),
        "insertion order, rising ids"
    );
    for (got, want) in stored.iter().zip(&entries) {
        assert_eq!(got.task_id, id);
        assert_eq!(
            (&got.milestone_id, &got.kind, &got.unit, got.amount),
            (&want.milestone_id, &want.kind, &want.unit, want.amount)
        );
        assert_eq!(got.created_at, clock.now() - Duration::seconds(1));
    }
    assert_eq!(stored[4].kind, "grant");
    assert_eq!(stored[4].created_at, clock.now());

    let artifacts = store
        .list_artifacts(DEFAULT_TENANT, id)
        .await
        .expect("artifacts");
    let seen: Vec<(&str, &str, &serde_json::Value)> = artifacts
        .iter()
        .map(|a| (a.milestone_id.as_str(), a.name.as_str(), &a.value))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("m1", "report", &json!({ "text": "hello", "n": 1 })),
            ("m1", "urls", &json!(["a", "b"])),
            ("m1", "report", &json!({ "text": "hello again", "n": 2 })),
        ]
    );
    assert!(artifacts.iter().all(|a| a.task_id == id));
    assert_eq!(artifacts[1].created_at, clock.now() - Duration::seconds(1));
    assert_eq!(artifacts[2].created_at, clock.now());
    let other = create(&store, &clock, "empty").await;
    assert!(
        store
            .list_ledger_entries(DEFAULT_TENANT, other)
            .await
            .expect("ledger")
            .is_empty()
    );
    assert!(
        store
            .list_artifacts(DEFAULT_TENANT, other)
            .await
            .expect("artifacts")
            .is_empty()
    );
}

pub async fn receipts_keep_the_first(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "call tools").await;
    let receipt = |response: serde_json::Value| NewToolReceipt {
        idempotency_key: "task/m1/s1/0".to_owned(),
        task_id: id,
        tool: "deploy".to_owned(),
        response,
    };
    assert_eq!(
        store.get_receipt(id, "task/m1/s1/0").await.expect("get"),
        None
    );
    let first = store
        .put_receipt(receipt(json!({ "ok": 1 })), clock.now())
        .await
        .expect("put");
    assert_eq!(first.response, json!({ "ok": 1 }));
    assert_eq!((first.task_id, first.tool.as_str()), (id, "deploy"));
    assert_eq!(first.created_at, clock.now());

    clock.advance(Duration::seconds(1));
    let second = store
        .put_receipt(receipt(json!({ "ok": 2 })), clock.now())
        .await
        .expect("put again");
    assert_eq!(second, first, "the first receipt wins");
    assert_eq!(
        store.get_receipt(id, "task/m1/s1/0").await.expect("get"),
        Some(first)
    );
    assert_eq!(
        store.get_receipt(id, "task/m1/s1/1").await.expect("get"),
        None
    );
    // Receipts are scoped by task: another task (of any tenant) never sees this one's.
    let other = create(&store, &clock, "another task").await;
    assert_eq!(
        store.get_receipt(other, "task/m1/s1/0").await.expect("get"),
        None
    );
    let stolen = NewToolReceipt {
        task_id: other,
        ..receipt(json!({ "ok": 3 }))
    };
    assert!(
        store.put_receipt(stolen, clock.now()).await.is_err(),
        "a key held by another task is a collision, not a receipt"
    );
}

pub async fn subscribe_receives_wakeups(store: Arc<dyn Store>) {
    let clock = clock();
    let mut rx = store.subscribe();
    let events_up_to = |task_id, last_seq| Wakeup::Events { task_id, last_seq };
    let id = create(&store, &clock, "wake me").await;
    expect_wakeups(
        &mut rx,
        &[events_up_to(id, 1), Wakeup::TaskRunnable],
        "create",
    )
    .await;
    let lease = claim(&store, &clock, "w").await.lease;
    expect_wakeups(&mut rx, &[events_up_to(id, 2)], "claim").await;
    commit(
        &store,
        &clock,
        &lease,
        events(&["engine.step", "engine.step"]),
    )
    .await;
    expect_wakeups(&mut rx, &[events_up_to(id, 4)], "commit with events").await;

    let release = Change {
        release: true,
        ..events(&[kinds::TASK_RELEASED])
    };
    commit(&store, &clock, &lease, release).await;
    expect_wakeups(
        &mut rx,
        &[events_up_to(id, 5), Wakeup::TaskRunnable],
        "release",
    )
    .await;

    claim(&store, &clock, "w").await;
    clock.advance(lease_ttl() + Duration::seconds(1));
    assert_eq!(
        store.reap_expired(clock.now()).await.expect("reap"),
        vec![id]
    );
    expect_wakeups(
        &mut rx,
        &[events_up_to(id, 7), Wakeup::TaskRunnable],
        "reap",
    )
    .await;

    store
        .cancel_task(DEFAULT_TENANT, id, clock.now())
        .await
        .expect("cancel");
    expect_wakeups(&mut rx, &[events_up_to(id, 8)], "cancel").await;
}
