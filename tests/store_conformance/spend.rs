//! The tenants' spend per hour, kept by the commits that book the charges, and the claim
//! passing over a tenant at its spend cap or a task waiting for its period's end.

use std::sync::Arc;

use cairn::clock::Clock;
use cairn::domain::event::{NewEvent, kinds};
use cairn::domain::task::{DEFAULT_TENANT, TaskStatus};
use cairn::store::{Change, ClaimParams, Commit, NewLedgerEntry, Store};
use chrono::{DurationRound, TimeDelta};
use serde_json::json;

use crate::support::*;

fn charge(unit: &str, amount: i64) -> NewLedgerEntry {
    NewLedgerEntry {
        milestone_id: None,
        kind: "charge".into(),
        unit: unit.into(),
        amount,
    }
}

pub async fn spend_is_kept_per_tenant_and_hour(store: Arc<dyn Store>) {
    let clock = clock();
    create(&store, &clock, "spend").await;
    let claimed = claim(&store, &clock, "w1").await;
    // Two calls' charges, one estimated; tokens and the reserve's allocation are not money.
    let change = Change {
        ledger: vec![
            charge("tokens", 900),
            charge("cost", 700),
            charge("cost", 300),
            NewLedgerEntry {
                kind: "allocate".into(),
                ..charge("cost", 5_000)
            },
        ],
        events: vec![NewEvent::new(
            kinds::LEDGER_ESTIMATED,
            json!({"call": "gate", "tokens": 100, "cost": 300}),
        )],
        ..Change::default()
    };
    let applied = commit(&store, &clock, &claimed.lease, change).await;
    assert!(matches!(applied, Commit::Applied { .. }), "{applied:?}");
    clock.advance(TimeDelta::hours(1));
    let later = Change {
        ledger: vec![charge("cost", 50)],
        ..Change::default()
    };
    commit(&store, &clock, &claimed.lease, later).await;

    let since = start_time() - TimeDelta::days(1);
    let hours = store
        .spend(Some(DEFAULT_TENANT), since)
        .await
        .expect("spend");
    let figures: Vec<(u64, u64)> = hours.iter().map(|h| (h.cost, h.estimated_cost)).collect();
    assert_eq!(figures, vec![(1_000, 300), (50, 0)], "{hours:?}");
    let first_hour = start_time()
        .duration_trunc(TimeDelta::hours(1))
        .expect("an hour");
    assert_eq!(hours[0].hour, first_hour);
    assert_eq!(hours[1].hour, first_hour + TimeDelta::hours(1));
    // From the second hour on: only what it holds; another tenant's: nothing.
    let second = store
        .spend(None, first_hour + TimeDelta::minutes(90))
        .await
        .expect("spend");
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].tenant_id, DEFAULT_TENANT);
    assert!(
        store
            .spend(Some("globex"), since)
            .await
            .expect("spend")
            .is_empty()
    );
}

pub async fn claims_pass_over_capped_tenants_and_waiting_tasks(store: Arc<dyn Store>) {
    let clock = clock();
    let capped = create(&store, &clock, "capped tenant's").await;
    clock.advance(TimeDelta::milliseconds(5));
    let other = store
        .create_task(new_task("globex", "another tenant's"), None, clock.now())
        .await
        .expect("create")
        .task
        .id;
    let passed_over = vec![DEFAULT_TENANT.to_string()];
    let params = |now| ClaimParams::new("w1", now, lease_ttl()).passing_over(&passed_over);
    let first = store.claim(params(clock.now())).await.expect("claim");
    assert_eq!(
        first.expect("a task").task.id,
        other,
        "the capped tenant's is passed over"
    );
    assert!(
        store
            .claim(params(clock.now()))
            .await
            .expect("claim")
            .is_none()
    );

    // Released to wait until a time: not claimed before it, by anyone.
    let claimed = claim(&store, &clock, "w2").await;
    assert_eq!(claimed.task.id, capped);
    let until = clock.now() + TimeDelta::hours(2);
    let release = Change {
        status: Some(TaskStatus::Queued),
        release: true,
        not_before: Some(until),
        events: vec![NewEvent::new(
            kinds::TASK_RELEASED,
            json!({"reason": "spend_cap"}),
        )],
        ..Change::default()
    };
    commit(&store, &clock, &claimed.lease, release).await;
    let waits = store.spend_waits(None, clock.now()).await.expect("waits");
    assert_eq!(waits, vec![(DEFAULT_TENANT.to_string(), until)]);
    let now = ClaimParams::new("w3", clock.now(), lease_ttl());
    assert!(store.claim(now).await.expect("claim").is_none(), "waits");
    clock.set(until);
    assert!(
        store
            .spend_waits(None, clock.now())
            .await
            .expect("waits")
            .is_empty()
    );
    let resumed = claim(&store, &clock, "w3").await;
    assert_eq!(resumed.task.id, capped, "claimed once its time has come");
    assert_eq!(resumed.task.attempts, 2);
}
