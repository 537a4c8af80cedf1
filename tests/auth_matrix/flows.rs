//! The flows after the route walk: listings and statistics across tenants, idempotency keys
//! per tenant, the audit trail, revocation, and stream tokens.

use cairn::clock::Clock;
use serde_json::Value;

use super::support::{ACME_MARK, Fixture, call, task_body};

pub async fn cross_tenant_lists_and_stats(f: &Fixture) {
    let (status, text, _) =
        call(f, "GET", "/v1/tasks?limit=50", Some(&f.keys.beta_all), None).await;
    assert_eq!(status, 200);
    assert!(
        !text.contains(ACME_MARK) && !text.contains(&f.task.to_string()),
        "{text}"
    );
    let (status, text, _) = call(
        f,
        "GET",
        "/v1/tasks?limit=50",
        Some(&f.keys.acme_read),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        text.contains(&f.task.to_string()),
        "the owner lists its task"
    );
    // Another tenant's statistics need admin.
    let (status, _, _) = call(
        f,
        "GET",
        "/v1/stats?tenant=beta",
        Some(&f.keys.acme_read),
        None,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _, _) = call(
        f,
        "GET",
        "/v1/stats/gate?tenant=acme",
        Some(&f.keys.acme_read),
        None,
    )
    .await;
    assert_eq!(status, 200, "naming one's own tenant is fine");
    let (status, _, _) = call(
        f,
        "GET",
        "/v1/stats?tenant=acme",
        Some(&f.keys.beta_all),
        None,
    )
    .await;
    assert_eq!(status, 200, "admin reads any tenant's statistics");
    // The same Idempotency-Key in two tenants names two tasks.
    let mut ids = Vec::new();
    for key in [&f.keys.acme_all, &f.keys.beta_all] {
        let response = f
            .client
            .post(format!("{}/v1/tasks", f.base))
            .bearer_auth(key)
            .header("idempotency-key", "same-key")
            .json(&task_body("g"))
            .send()
            .await
            .expect("post");
        assert_eq!(response.status(), 202, "a first use in each tenant");
        let task: Value = response.json().await.expect("task");
        ids.push((task["id"].clone(), task["tenant_id"].clone()));
    }
    assert_ne!(ids[0].0, ids[1].0);
    assert_eq!(
        (ids[0].1.as_str(), ids[1].1.as_str()),
        (Some("acme"), Some("beta"))
    );
}

pub async fn audit_and_revocation(f: &Fixture) {
    let task = f.new_acme_task().await;
    let cancel = format!("/v1/tasks/{task}/cancel");
    let (status, _, _) = call(f, "POST", &cancel, Some(&f.keys.acme_all), None).await;
    assert_eq!(status, 200);
    let events = f
        .store
        .list_events("acme", task, 0, 100)
        .await
        .expect("events");
    let by = |kind: &str| {
        events
            .iter()
            .find(|e| e.kind == kind)
            .map(|e| e.data["by"].clone())
    };
    assert_eq!(
        by("task.created"),
        Some(Value::from(f.keys.acme_all_id.clone()))
    );
    assert_eq!(
        by("task.cancelled"),
        Some(Value::from(f.keys.acme_all_id.clone()))
    );
    let all = serde_json::to_string(&events).expect("json");
    let secret = f.keys.acme_all.rsplit('_').next().expect("secret");
    assert!(!all.contains(secret), "no secret in events");
    // A revoke takes effect on the very next request (keys are not cached).
    let (status, _, _) = call(f, "GET", "/v1/tasks", Some(&f.keys.acme_read), None).await;
    assert_eq!(status, 200);
    let (id, _) = cairn::store::keys::parse_key(&f.keys.acme_read).expect("key");
    f.store
        .revoke_api_key(id, f.clock.now())
        .await
        .expect("revoke");
    let (status, _, _) = call(f, "GET", "/v1/tasks", Some(&f.keys.acme_read), None).await;
    assert_eq!(status, 401);
}

pub async fn stream_tokens(f: &Fixture) {
    let other = f.new_acme_task().await;
    let issue = format!("/v1/tasks/{}/stream-token", f.task);
    let (status, text, _) = call(f, "POST", &issue, Some(&f.keys.acme_all), None).await;
    assert_eq!(status, 201, "{text}");
    let view: Value = serde_json::from_str(&text).expect("token");
    let token = view["token"].as_str().expect("token").to_string();
    assert!(!token.contains(&f.keys.acme_all), "a token is not the key");
    let events = |task: uuid::Uuid, token: &str| format!("/v1/tasks/{task}/events?token={token}");
    let (status, text, _) = call(f, "GET", &events(f.task, &token), None, None).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("task.created"));
    let url = view["url"].as_str().expect("url");
    assert_eq!(
        call(f, "GET", url, None, None).await.0,
        200,
        "the url works as given"
    );
    // Only for its task, never on another route, never an API key in the URL.
    assert_eq!(
        call(f, "GET", &events(other, &token), None, None).await.0,
        401
    );
    let task_path = format!("/v1/tasks/{}?token={token}", f.task);
    assert_ne!(call(f, "GET", &task_path, None, None).await.0, 200);
    assert_eq!(
        call(f, "GET", &events(f.task, &f.keys.acme_all), None, None)
            .await
            .0,
        401
    );
    // Another tenant cannot get one for acme's task.
    assert_eq!(
        call(f, "POST", &issue, Some(&f.keys.beta_all), None)
            .await
            .0,
        404
    );
    // Expired after five minutes.
    f.clock.advance(chrono::Duration::seconds(301));
    assert_eq!(
        call(f, "GET", &events(f.task, &token), None, None).await.0,
        401
    );
}
