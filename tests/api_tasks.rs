//! The task API's happy paths over a real server: submit, read, list with keyset pages,
//! cancel, idempotent submission, plan versions, health and the served OpenAPI document.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod api_support;
mod common;

use api_support::{
    Db, TestServer, all_tasks, append, assert_problem, claim, header, task_body, test_config,
};
use cairn::domain::event::{NewEvent, kinds};
use cairn::domain::task::Task;
use cairn::store::{Change, Commit, NewPlanVersion};
use serde_json::{Value, json};

#[tokio::test]
async fn submit_read_list_and_cancel() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;

    let body = json!({
        "goal": "summarise the incident report",
        "budget": {"tokens": 20_000, "tool_calls": 5, "wall_ms": 120_000},
        "strategy": "v2",
        "metadata": {"team": "ops", "ticket": 42},
    });
    let response = server.post_json("/v1/tasks", &body).await;
    assert_eq!(response.status(), 202);
    let location = header(&response, "location");
    let created: Task = response.json().await.expect("task");
    assert_eq!(location, format!("/v1/tasks/{}", created.id));
    assert_eq!(created.goal, "summarise the incident report");
    assert_eq!(created.status.as_str(), "queued");
    assert_eq!(created.strategy.as_str(), "v2");
    assert_eq!(created.budget.tokens, 20_000);
    assert_eq!(created.metadata, json!({"team": "ops", "ticket": 42}));
    assert_eq!(created.tenant_id, "default");
    assert_eq!(created.last_seq, 1, "the task.created event");

    // Defaults: strategy auto, metadata {}.
    let plain: Task = server
        .post_json("/v1/tasks", &task_body("second"))
        .await
        .json()
        .await
        .expect("task");
    assert_eq!(plain.strategy.as_str(), "auto");
    assert_eq!(plain.metadata, json!({}));

    let fetched: Task = server.get(&location).await.json().await.expect("task");
    assert_eq!(fetched, created);

    let page: Value = server.get("/v1/tasks").await.json().await.expect("page");
    let ids: Vec<&str> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|task| task["id"].as_str().expect("id"))
        .collect();
    let (first, second) = (created.id.to_string(), plain.id.to_string());
    assert_eq!(ids, [second.as_str(), first.as_str()], "newest first");
    assert_eq!(page["next_cursor"], Value::Null);

    let cancel = server
        .client
        .post(server.url(&format!("/v1/tasks/{}/cancel", created.id)))
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancel.status(), 200);
    let cancelled: Task = cancel.json().await.expect("task");
    assert_eq!(cancelled.status.as_str(), "cancelled");
    assert!(cancelled.finished_at.is_some());
    let seq_after_cancel = cancelled.last_seq;

    // A second cancel is a conflict and writes nothing.
    let again = server
        .client
        .post(server.url(&format!("/v1/tasks/{}/cancel", created.id)))
        .send()
        .await
        .expect("cancel again");
    assert_problem(again, 409, "/problems/conflict").await;
    let after: Task = server.get(&location).await.json().await.expect("task");
    assert_eq!(after.last_seq, seq_after_cancel);

    let cancelled_only: Value = server
        .get("/v1/tasks?status=cancelled")
        .await
        .json()
        .await
        .expect("page");
    assert_eq!(cancelled_only["items"].as_array().expect("items").len(), 1);
    assert_eq!(cancelled_only["items"][0]["id"], json!(first));
    let queued_only: Value = server
        .get("/v1/tasks?status=queued")
        .await
        .json()
        .await
        .expect("page");
    assert_eq!(queued_only["items"][0]["id"], json!(second));

    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn keyset_pages_cover_every_task_once() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let mut created = Vec::new();
    for n in 0..7 {
        created.push(
            server
                .create_task(&format!("goal {n}"))
                .await
                .id
                .to_string(),
        );
    }
    created.reverse(); // newest first

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/v1/tasks?limit=3&cursor={cursor}"),
            None => "/v1/tasks?limit=3".to_string(),
        };
        let page: Value = server.get(&path).await.json().await.expect("page");
        pages += 1;
        let items = page["items"].as_array().expect("items");
        assert!(items.len() <= 3);
        seen.extend(
            items
                .iter()
                .map(|t| t["id"].as_str().expect("id").to_string()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
        assert!(pages < 10, "pagination does not end");
    }
    assert_eq!(pages, 3, "7 tasks in pages of 3");
    assert_eq!(seen, created);

    // The default page size is 20, so all 7 come in one page without a cursor.
    let page: Value = server.get("/v1/tasks").await.json().await.expect("page");
    assert_eq!(page["items"].as_array().expect("items").len(), 7);
    assert_eq!(page["next_cursor"], Value::Null);
    // An exact fit has no next page either.
    let page: Value = server
        .get("/v1/tasks?limit=7")
        .await
        .json()
        .await
        .expect("page");
    assert_eq!(page["next_cursor"], Value::Null);

    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn idempotency_key_replays_and_conflicts() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let post = |body: String, key: &'static str| {
        server
            .client
            .post(server.url("/v1/tasks"))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(body)
            .send()
    };

    let first = post(
        r#"{"goal":"deploy","budget":{"tokens":5,"tool_calls":1,"wall_ms":9}}"#.into(),
        "key-1",
    )
    .await
    .expect("first");
    assert_eq!(first.status(), 202);
    let first: Task = first.json().await.expect("task");

    // Same meaning, different bytes (key order, whitespace, an explicit default): a replay.
    let replay = post(
        r#"{ "budget": {"wall_ms": 9, "tool_calls": 1, "tokens": 5}, "strategy": "auto", "goal": "deploy" }"#
            .into(),
        "key-1",
    )
    .await
    .expect("replay");
    assert_eq!(replay.status(), 200, "a replay answers 200");
    assert_eq!(
        header(&replay, "location"),
        format!("/v1/tasks/{}", first.id)
    );
    let replayed: Task = replay.json().await.expect("task");
    assert_eq!(replayed.id, first.id);
    assert_eq!(all_tasks(store.as_ref()).await.len(), 1);

    let conflict = post(
        r#"{"goal":"deploy","budget":{"tokens":6,"tool_calls":1,"wall_ms":9}}"#.into(),
        "key-1",
    )
    .await
    .expect("conflict");
    let problem = assert_problem(conflict, 409, "/problems/idempotency-conflict").await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&first.id.to_string())),
        "{problem}"
    );
    assert_eq!(all_tasks(store.as_ref()).await.len(), 1, "nothing written");

    let other = post(
        r#"{"goal":"deploy","budget":{"tokens":5,"tool_calls":1,"wall_ms":9}}"#.into(),
        "key-2",
    )
    .await
    .expect("other key");
    assert_eq!(other.status(), 202);
    let other: Task = other.json().await.expect("task");
    assert_ne!(other.id, first.id);
    assert_eq!(all_tasks(store.as_ref()).await.len(), 2);

    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn plan_versions_are_listed_and_read() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let task = server.create_task("plan me").await;
    let plans = format!("/v1/tasks/{}/plans", task.id);

    let empty: Value = server.get(&plans).await.json().await.expect("list");
    assert_eq!(empty, json!({"items": []}));
    assert_problem(
        server.get(&format!("{plans}/1")).await,
        404,
        "/problems/not-found",
    )
    .await;

    let lease = claim(store.as_ref(), &task).await;
    let plan = json!({"milestones": [{"id": "m1", "check": "artifact"}]});
    let change = Change {
        plan_version: Some(NewPlanVersion {
            version: 1,
            reason: "initial".into(),
            caused_by_seq: Some(2),
            plan: plan.clone(),
        }),
        events: vec![NewEvent::new(kinds::PLAN_VERSIONED, json!({"version": 1}))],
        ..Change::default()
    };
    let outcome = store
        .commit(&lease, change, chrono::Utc::now())
        .await
        .expect("commit");
    assert!(matches!(outcome, Commit::Applied { .. }), "{outcome:?}");
    append(
        store.as_ref(),
        &lease,
        vec![NewEvent::new(kinds::ENGINE_STEP, json!({}))],
        None,
    )
    .await;

    let list: Value = server.get(&plans).await.json().await.expect("list");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["version"], 1);
    assert_eq!(items[0]["reason"], "initial");
    assert_eq!(items[0]["plan"], plan);
    let one: Value = server
        .get(&format!("{plans}/1"))
        .await
        .json()
        .await
        .expect("version");
    assert_eq!(one, items[0]);
    let fetched: Task = server
        .get(&format!("/v1/tasks/{}", task.id))
        .await
        .json()
        .await
        .expect("task");
    assert_eq!(fetched.plan_version, Some(1));

    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn health_readiness_and_the_served_document() {
    let db = Db::create().await;
    let store = db.store().await;
    let backend = serde_json::to_value(store.backend()).expect("backend");
    let server = TestServer::start(store, test_config()).await;

    let health = server.get("/healthz").await;
    assert_eq!(health.status(), 200);
    assert_eq!(
        health.json::<Value>().await.expect("json"),
        json!({"status": "ok"})
    );

    let ready = server.get("/readyz").await;
    assert_eq!(ready.status(), 200);
    assert_eq!(
        ready.json::<Value>().await.expect("json"),
        json!({"status": "ready", "backend": backend})
    );

    let document = server.get("/openapi.json").await;
    assert_eq!(document.status(), 200);
    assert!(header(&document, "content-type").starts_with("application/json"));
    assert_eq!(
        document.text().await.expect("text"),
        cairn::http::openapi_json()
    );

    server.shutdown().await;
    db.drop().await;
}
