//! Helpers shared by the conformance cases: a fixed clock, task and change builders, and a
//! bounded wait for wake-ups.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use cairn::clock::{Clock, ManualClock};
use cairn::domain::event::NewEvent;
use cairn::domain::task::{Budget, DEFAULT_TENANT, Lease, NewTask, Strategy, TaskId};
use cairn::store::ClaimParams;
use cairn::store::{Change, Claimed, Commit, Store, Wakeup};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use tokio::sync::broadcast;

pub const LEASE_TTL_SECS: i64 = 30;

pub fn lease_ttl() -> Duration {
    Duration::seconds(LEASE_TTL_SECS)
}

/// A whole-millisecond start time: both backends store it exactly, so equality checks hold.
pub fn start_time() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_790_000_000_123).expect("valid timestamp")
}

pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(start_time()))
}

pub fn new_task(tenant: &str, goal: &str) -> NewTask {
    NewTask {
        tools: None,
        id: uuid::Uuid::now_v7(),
        tenant_id: tenant.to_owned(),
        goal: goal.to_owned(),
        strategy: Strategy::V2,
        budget: Budget {
            tokens: 200_000,
            tool_calls: 40,
            wall_ms: 600_000,
            cost: None,
        },
        metadata: json!({ "goal_kind": "test", "tags": ["a", "b"] }),
        approval: Default::default(),
    }
}

/// Creates a task in the default tenant and returns its id.
pub async fn create(store: &Arc<dyn Store>, clock: &ManualClock, goal: &str) -> TaskId {
    store
        .create_task(new_task(DEFAULT_TENANT, goal), None, clock.now())
        .await
        .expect("create task")
        .task
        .id
}

pub async fn claim(store: &Arc<dyn Store>, clock: &ManualClock, worker: &str) -> Claimed {
    store
        .claim(ClaimParams::new(worker, clock.now(), lease_ttl()))
        .await
        .expect("claim")
        .expect("a queued task to claim")
}

/// A change carrying only events of the given kinds.
pub fn events(kinds: &[&str]) -> Change {
    Change {
        events: kinds
            .iter()
            .enumerate()
            .map(|(i, kind)| NewEvent::new(*kind, json!({ "i": i })))
            .collect(),
        ..Change::default()
    }
}

pub async fn commit(
    store: &Arc<dyn Store>,
    clock: &ManualClock,
    lease: &Lease,
    change: Change,
) -> Commit {
    store
        .commit(lease, change, clock.now())
        .await
        .expect("commit")
}

pub async fn event_count(store: &Arc<dyn Store>, task: TaskId) -> usize {
    store
        .list_events(DEFAULT_TENANT, task, 0, 1_000)
        .await
        .expect("list events")
        .len()
}

/// Waits (bounded) until every wake-up in `wanted` has arrived, in any order, skipping others
/// (hints may repeat or interleave); panics on timeout.
pub async fn expect_wakeups(rx: &mut broadcast::Receiver<Wakeup>, wanted: &[Wakeup], what: &str) {
    let mut missing = wanted.to_vec();
    let deadline = tokio::time::Instant::now() + StdDuration::from_secs(10);
    while !missing.is_empty() {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok(wakeup)) => missing.retain(|want| *want != wakeup),
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
            Ok(Err(broadcast::error::RecvError::Closed)) => panic!("wake-ups closed: {what}"),
            Err(_) => panic!("{what}: no {missing:?} within 10s"),
        }
    }
}
