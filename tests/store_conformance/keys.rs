//! API keys, stream tokens, tenant-scoped reads and the audit trail (`by` in events).

use std::sync::Arc;

use cairn::clock::Clock;
use cairn::domain::task::DEFAULT_TENANT;
use cairn::store::keys::{NewStreamToken, Scope, generate_key, hash_secret, hashes_match};
use cairn::store::{CancelOutcome, Change, NewArtifact, NewLedgerEntry, NewPlanVersion, Store};
use chrono::Duration;
use serde_json::json;

use super::support::{claim, clock, commit, new_task};

pub async fn keys_round_trip(store: Arc<dyn Store>) {
    let clock = clock();
    assert!(!store.has_api_keys().await.expect("has keys"));
    assert!(store.list_api_keys().await.expect("list").is_empty());

    let generated = generate_key("acme", vec![Scope::Read, Scope::Submit], Some("ci".into()))
        .expect("generate");
    let id = generated.new.id.clone();
    let hash = generated.new.secret_hash.clone();
    let created = store
        .create_api_key(generated.new, clock.now())
        .await
        .expect("create");
    assert_eq!(created.tenant_id, "acme");
    assert_eq!(created.scopes, vec![Scope::Read, Scope::Submit]);
    assert_eq!(created.name.as_deref(), Some("ci"));
    assert_eq!(created.created_at, clock.now());
    assert_eq!(created.revoked_at, None);
    assert!(store.has_api_keys().await.expect("has keys"));

    let stored = store.get_api_key(&id).await.expect("get").expect("stored");
    assert_eq!(stored.key, created);
    assert!(hashes_match(&stored.secret_hash, &hash));
    // The token (and so the secret) is stored nowhere.
    let secret = generated.token.expose().rsplit('_').next().expect("secret");
    assert_ne!(stored.secret_hash, secret);
    assert_eq!(stored.secret_hash, hash_secret(secret));
    assert_eq!(
        store.get_api_key("0000000000000000").await.expect("get"),
        None
    );

    let other = generate_key("zeta", vec![Scope::Admin], None).expect("generate");
    let other_id = other.new.id.clone();
    clock.advance(Duration::seconds(1));
    store
        .create_api_key(other.new, clock.now())
        .await
        .expect("create");
    let listed = store.list_api_keys().await.expect("list");
    let ids: Vec<_> = listed.iter().map(|key| key.id.as_str()).collect();
    assert_eq!(ids, vec![id.as_str(), other_id.as_str()], "oldest first");

    clock.advance(Duration::seconds(1));
    let revoked_at = clock.now();
    let revoked = store
        .revoke_api_key(&id, revoked_at)
        .await
        .expect("revoke")
        .expect("known key");
    assert_eq!(revoked.revoked_at, Some(revoked_at));
    clock.advance(Duration::seconds(1));
    let again = store
        .revoke_api_key(&id, clock.now())
        .await
        .expect("revoke again")
        .expect("known key");
    assert_eq!(
        again.revoked_at,
        Some(revoked_at),
        "the first revoke time stays"
    );
    assert_eq!(
        store
            .revoke_api_key("nope", clock.now())
            .await
            .expect("revoke"),
        None
    );
    // Revoked keys still count: revoking every key must not turn authentication off.
    store
        .revoke_api_key(&other_id, clock.now())
        .await
        .expect("revoke");
    assert!(store.has_api_keys().await.expect("has keys"));
}

pub async fn stream_tokens_round_trip(store: Arc<dyn Store>) {
    let clock = clock();
    let task = store
        .create_task(new_task("acme", "watch me"), None, clock.now())
        .await
        .expect("create")
        .task;
    let token = |hash: &str, minutes: i64| NewStreamToken {
        token_hash: hash.into(),
        task_id: task.id,
        tenant_id: "acme".into(),
        key_id: "k1".into(),
        expires_at: clock.now() + Duration::minutes(minutes),
    };
    store
        .create_stream_token(token("h1", 5), clock.now())
        .await
        .expect("create");
    let stored = store
        .get_stream_token("h1")
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(stored.task_id, task.id);
    assert_eq!(stored.tenant_id, "acme");
    assert_eq!(stored.key_id, "k1");
    assert_eq!(stored.expires_at, clock.now() + Duration::minutes(5));
    assert_eq!(store.get_stream_token("h2").await.expect("get"), None);

    // Issuing a token later deletes the expired ones.
    clock.advance(Duration::minutes(6));
    store
        .create_stream_token(token("h2", 5), clock.now())
        .await
        .expect("create");
    assert_eq!(store.get_stream_token("h1").await.expect("get"), None);
    assert!(store.get_stream_token("h2").await.expect("get").is_some());
}

/// A task's history is invisible to every other tenant, on every read, and the events name
/// the key that created and cancelled it.
pub async fn reads_are_scoped_by_tenant(store: Arc<dyn Store>) {
    let clock = clock();
    let created = store
        .create_task_by(new_task("acme", "mine"), None, Some("k-acme"), clock.now())
        .await
        .expect("create")
        .task;
    let id = created.id;
    let lease = claim(&store, &clock, "w").await.lease;
    let change = Change {
        plan_version: Some(NewPlanVersion {
            version: 1,
            reason: "initial".into(),
            caused_by_seq: None,
            plan: json!({ "milestones": [] }),
        }),
        ledger: vec![NewLedgerEntry {
            milestone_id: None,
            kind: "reserve".into(),
            unit: "tokens".into(),
            amount: 10,
        }],
        artifacts: vec![NewArtifact {
            milestone_id: "m1".into(),
            name: "report".into(),
            value: json!("secret of acme"),
        }],
        ..Change::default()
    };
    commit(&store, &clock, &lease, change).await;

    for tenant in [DEFAULT_TENANT, "other"] {
        assert_eq!(store.get_task(tenant, id).await.expect("get"), None);
        let events = store.list_events(tenant, id, 0, 100).await.expect("events");
        assert!(events.is_empty(), "{tenant} sees {events:?}");
        let plans = store.list_plan_versions(tenant, id).await.expect("plans");
        assert!(plans.is_empty());
        assert_eq!(
            store.get_plan_version(tenant, id, 1).await.expect("plan"),
            None
        );
        let ledger = store.list_ledger_entries(tenant, id).await.expect("ledger");
        assert!(ledger.is_empty());
        let artifacts = store.list_artifacts(tenant, id).await.expect("artifacts");
        assert!(artifacts.is_empty());
        let cancel = store.cancel_task_by(tenant, id, Some("k-other"), clock.now());
        assert_eq!(cancel.await.expect("cancel"), CancelOutcome::NotFound);
    }
    assert_eq!(
        store
            .list_plan_versions("acme", id)
            .await
            .expect("plans")
            .len(),
        1
    );
    assert!(
        store
            .get_plan_version("acme", id, 1)
            .await
            .expect("plan")
            .is_some()
    );
    assert_eq!(
        store
            .list_ledger_entries("acme", id)
            .await
            .expect("ledger")
            .len(),
        1
    );
    assert_eq!(
        store
            .list_artifacts("acme", id)
            .await
            .expect("artifacts")
            .len(),
        1
    );

    let cancelled = store
        .cancel_task_by("acme", id, Some("k-acme-2"), clock.now())
        .await
        .expect("cancel");
    assert!(matches!(cancelled, CancelOutcome::Cancelled(_)));
    let events = store.list_events("acme", id, 0, 100).await.expect("events");
    let created_event = events.first().expect("task.created");
    assert_eq!(created_event.kind, "task.created");
    assert_eq!(created_event.data["by"], "k-acme");
    assert_eq!(created_event.data["goal"], "mine");
    let cancelled_event = events.last().expect("task.cancelled");
    assert_eq!(cancelled_event.kind, "task.cancelled");
    assert_eq!(cancelled_event.data["by"], "k-acme-2");
    // Without a caller the events carry no `by`.
    let anonymous = store
        .create_task(new_task("acme", "system"), None, clock.now())
        .await
        .expect("create")
        .task;
    let first = store
        .list_events("acme", anonymous.id, 0, 1)
        .await
        .expect("events");
    assert!(first[0].data.get("by").is_none(), "{:?}", first[0].data);
}
