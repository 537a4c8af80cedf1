//! Approval requests: parking is fenced like a commit and releases the lease; a decision is
//! taken only on the pending request of a waiting task with its digest, and requeues it; an
//! expired request fails its task with a report; another tenant sees nothing.

use std::sync::Arc;

use cairn::clock::Clock;
use cairn::domain::approval::{ApprovalKind, ApprovalState, Decision};
use cairn::domain::event::kinds;
use cairn::domain::task::{DEFAULT_TENANT, TaskStatus};
use cairn::store::approvals::{Decide, DecideOutcome, Park, Parked};
use cairn::store::{ClaimParams, Store};
use serde_json::json;

use crate::support::*;

fn park(digest: &str, expires_at: Option<chrono::DateTime<chrono::Utc>>) -> Park {
    Park {
        kind: ApprovalKind::Steps,
        digest: digest.to_string(),
        request: json!({"calls": [{"tool": "write", "args": {}, "digest": "d1"}]}),
        expires_at,
    }
}

pub async fn a_parked_task_waits_without_a_lease_until_a_matching_decision(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "sign me off").await;
    let claimed = claim(&store, &clock, "w1").await;
    let parked = store
        .park(&claimed.lease, park("abc", None), clock.now())
        .await
        .expect("park");
    assert_eq!(parked, Parked::Waiting { approval: 1 });
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.status, TaskStatus::AwaitingApproval);
    // No lease: the old holder cannot park again, and nothing claims the waiting task.
    let again = store
        .park(&claimed.lease, park("abc", None), clock.now())
        .await
        .expect("park");
    assert_eq!(again, Parked::LeaseLost);
    let params = ClaimParams::new("w2", clock.now(), lease_ttl());
    assert!(store.claim(params).await.expect("claim").is_none());

    let decide = |digest: &'static str, approval: u32, tenant: &'static str| Decide {
        tenant_id: tenant,
        task_id: id,
        approval,
        decision: Decision::Approve,
        digest,
        comment: None,
        by: "key-1",
        now: clock.now(),
    };
    let outcome = store
        .decide_approval(decide("abc", 1, "other"))
        .await
        .expect("decide");
    assert_eq!(
        outcome,
        DecideOutcome::NotFound,
        "another tenant's task is not found"
    );
    let outcome = store
        .decide_approval(decide("abc", 2, DEFAULT_TENANT))
        .await
        .expect("decide");
    assert_eq!(outcome, DecideOutcome::NotFound);
    let outcome = store
        .decide_approval(decide("xyz", 1, DEFAULT_TENANT))
        .await
        .expect("decide");
    assert_eq!(outcome, DecideOutcome::Stale);
    let before = event_count(&store, id).await;
    let DecideOutcome::Decided(decided) = store
        .decide_approval(decide("abc", 1, DEFAULT_TENANT))
        .await
        .expect("decide")
    else {
        panic!("the matching digest decides");
    };
    assert_eq!(decided.state, ApprovalState::Approved);
    assert_eq!(decided.decided_by.as_deref(), Some("key-1"));
    assert_eq!(event_count(&store, id).await, before + 1);
    let outcome = store
        .decide_approval(decide("abc", 1, DEFAULT_TENANT))
        .await
        .expect("decide");
    assert_eq!(outcome, DecideOutcome::NotPending(ApprovalState::Approved));
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(
        task.status,
        TaskStatus::Queued,
        "a decision requeues the task"
    );
    let listed = store
        .list_approvals(DEFAULT_TENANT, id)
        .await
        .expect("list");
    assert_eq!(listed, vec![decided]);
    assert!(
        store
            .list_approvals("other", id)
            .await
            .expect("list")
            .is_empty()
    );
    let events = store
        .list_events(DEFAULT_TENANT, id, 0, 100)
        .await
        .expect("events");
    let kinds_seen: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert!(kinds_seen.ends_with(&[kinds::APPROVAL_REQUESTED, kinds::APPROVAL_DECIDED]));
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as i64).collect::<Vec<_>>(),
        "dense seqs"
    );
}

pub async fn an_expired_request_fails_its_task_with_a_report(store: Arc<dyn Store>) {
    let clock = clock();
    let id = create(&store, &clock, "nobody answers").await;
    let claimed = claim(&store, &clock, "w1").await;
    let expires = clock.now() + chrono::Duration::seconds(60);
    store
        .park(&claimed.lease, park("abc", Some(expires)), clock.now())
        .await
        .expect("park");
    assert!(
        store
            .expire_approvals(clock.now())
            .await
            .expect("expire")
            .is_empty()
    );
    clock.advance(chrono::Duration::seconds(61));
    assert_eq!(
        store.expire_approvals(clock.now()).await.expect("expire"),
        vec![id]
    );
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.result.expect("report")["reason"], "approval_expired");
    let listed = store
        .list_approvals(DEFAULT_TENANT, id)
        .await
        .expect("list");
    assert_eq!(listed[0].state, ApprovalState::Expired);
    let events = store
        .list_events(DEFAULT_TENANT, id, 0, 100)
        .await
        .expect("events");
    let last: Vec<&str> = events
        .iter()
        .rev()
        .take(2)
        .map(|e| e.kind.as_str())
        .collect();
    assert_eq!(last, [kinds::TASK_FAILED, kinds::APPROVAL_EXPIRED]);
    // Expired once: a second sweep finds nothing.
    assert!(
        store
            .expire_approvals(clock.now())
            .await
            .expect("expire")
            .is_empty()
    );
}
