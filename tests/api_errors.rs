//! Every bad input answers a 4xx `application/problem+json` with a stable `type`, and writes
//! nothing: after each rejected request the store holds exactly what it held before.

mod api_support;
mod common;

use api_support::{Db, TestServer, all_tasks, assert_problem, task_body, test_config};
use cairn::domain::task::Task;
use cairn::store::Store;
use serde_json::{Value, json};

/// Task count and the event `seq` of every task: together they show whether anything was written.
async fn snapshot(store: &dyn Store) -> Vec<(uuid::Uuid, i64)> {
    let mut tasks: Vec<(uuid::Uuid, i64)> = all_tasks(store)
        .await
        .into_iter()
        .map(|task| (task.id, task.last_seq))
        .collect();
    tasks.sort();
    tasks
}

async fn post_raw(
    server: &TestServer,
    body: impl Into<reqwest::Body>,
    content_type: Option<&str>,
) -> reqwest::Response {
    let mut request = server.client.post(server.url("/v1/tasks")).body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    request.send().await.expect("POST")
}

#[tokio::test]
async fn bad_submissions_are_problems_and_write_nothing() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let existing = server.create_task("already here").await;
    let before = snapshot(store.as_ref()).await;
    let json_type = Some("application/json");

    let cases: Vec<(&str, String, Option<&str>, u16, &str)> = vec![
        ("malformed JSON", r#"{"goal": "x", "budget": "#.into(), json_type, 400, "/problems/invalid-json"),
        ("not JSON at all", "goal=x".into(), json_type, 400, "/problems/invalid-json"),
        ("empty body", String::new(), json_type, 400, "/problems/invalid-json"),
        ("trailing garbage", format!("{} x", task_body("g")), json_type, 400, "/problems/invalid-json"),
        ("goal of the wrong type", r#"{"goal": 5, "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("budget unit of the wrong type", r#"{"goal": "g", "budget": {"tokens": "many", "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("a JSON array", "[]".into(), json_type, 422, "/problems/validation"),
        ("unknown top-level field", r#"{"goal": "g", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}, "priority": 1}"#.into(), json_type, 422, "/problems/validation"),
        ("unknown budget field", r#"{"goal": "g", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1, "dollars": 3}}"#.into(), json_type, 422, "/problems/validation"),
        ("missing budget", r#"{"goal": "g"}"#.into(), json_type, 422, "/problems/validation"),
        ("missing budget unit", r#"{"goal": "g", "budget": {"tokens": 1, "tool_calls": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("negative budget", r#"{"goal": "g", "budget": {"tokens": -1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("fractional budget", r#"{"goal": "g", "budget": {"tokens": 1.5, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("budget beyond u64", r#"{"goal": "g", "budget": {"tokens": 1e30, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("zero budget", r#"{"goal": "g", "budget": {"tokens": 0, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("absurd budget", r#"{"goal": "g", "budget": {"tokens": 99999999999999, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("unknown strategy", r#"{"goal": "g", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}, "strategy": "yolo"}"#.into(), json_type, 422, "/problems/validation"),
        ("empty goal", r#"{"goal": "", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("blank goal", r#"{"goal": "  \n\t ", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("NUL in goal", r#"{"goal": "a\u0000b", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("oversized goal", json!({"goal": "g".repeat(33 * 1024), "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}).to_string(), json_type, 422, "/problems/validation"),
        ("metadata not an object", r#"{"goal": "g", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}, "metadata": [1]}"#.into(), json_type, 422, "/problems/validation"),
        ("oversized metadata", json!({"goal": "g", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}, "metadata": {"k": "v".repeat(17 * 1024)}}).to_string(), json_type, 422, "/problems/validation"),
        ("no content type", task_body("g").to_string(), None, 415, "/problems/unsupported-media-type"),
        ("text content type", task_body("g").to_string(), Some("text/plain"), 415, "/problems/unsupported-media-type"),
        ("body over the limit", json!({"goal": "g".repeat(80 * 1024), "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}).to_string(), json_type, 413, "/problems/payload-too-large"),
    ];
    for (name, body, content_type, status, kind) in cases {
        let response = post_raw(&server, body, content_type).await;
        let actual = response.status();
        let problem = assert_problem(response, status, kind).await;
        assert_eq!(
            snapshot(store.as_ref()).await,
            before,
            "{name} ({actual}) wrote something: {problem}"
        );
    }

    // Several problems at once are all listed.
    let response = server
        .post_json(
            "/v1/tasks",
            &json!({"goal": " ", "budget": {"tokens": 0, "tool_calls": 2_000_000, "wall_ms": 1}}),
        )
        .await;
    let problem = assert_problem(response, 422, "/problems/validation").await;
    assert_eq!(
        problem["errors"].as_array().map(Vec::len),
        Some(3),
        "{problem}"
    );

    assert_eq!(snapshot(store.as_ref()).await, before);
    assert_eq!(all_tasks(store.as_ref()).await[0].id, existing.id);
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn bad_idempotency_keys_are_refused_and_do_not_burn_the_key() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let post = |key: String, body: Value| {
        server
            .client
            .post(server.url("/v1/tasks"))
            .header("idempotency-key", key)
            .json(&body)
            .send()
    };
    for key in ["k".repeat(256), "has space".into(), String::new()] {
        let response = post(key.clone(), task_body("g")).await.expect("post");
        assert_problem(response, 400, "/problems/invalid-parameter").await;
    }
    let repeated = server
        .client
        .post(server.url("/v1/tasks"))
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .json(&task_body("g"))
        .send()
        .await
        .expect("post");
    assert_problem(repeated, 400, "/problems/invalid-parameter").await;

    // A request rejected for its body does not reserve its key.
    let rejected = post("key-x".into(), json!({"goal": ""}))
        .await
        .expect("post");
    assert_problem(rejected, 422, "/problems/validation").await;
    assert!(all_tasks(store.as_ref()).await.is_empty());
    let accepted = post("key-x".into(), task_body("g")).await.expect("post");
    assert_eq!(accepted.status(), 202);

    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn bad_paths_queries_and_headers() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let task: Task = server.create_task("target").await;
    let unknown = uuid::Uuid::now_v7();
    let before = snapshot(store.as_ref()).await;

    let gets: Vec<(String, u16, &str)> = vec![
        // Ids that are not UUIDs, on every resource.
        (
            "/v1/tasks/not-a-uuid".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks/not-a-uuid/events".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks/not-a-uuid/plans".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks/not-a-uuid/plans/1".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks/%FF%FE".into(),
            400,
            "/problems/invalid-parameter",
        ),
        // Unknown ids.
        (format!("/v1/tasks/{unknown}"), 404, "/problems/not-found"),
        (
            format!("/v1/tasks/{unknown}/events"),
            404,
            "/problems/not-found",
        ),
        (
            format!("/v1/tasks/{unknown}/plans"),
            404,
            "/problems/not-found",
        ),
        (
            format!("/v1/tasks/{unknown}/plans/1"),
            404,
            "/problems/not-found",
        ),
        // Plan versions.
        (
            format!("/v1/tasks/{}/plans/abc", task.id),
            400,
            "/problems/invalid-parameter",
        ),
        (
            format!("/v1/tasks/{}/plans/0", task.id),
            400,
            "/problems/invalid-parameter",
        ),
        (
            format!("/v1/tasks/{}/plans/-1", task.id),
            400,
            "/problems/invalid-parameter",
        ),
        (
            format!("/v1/tasks/{}/plans/99999999999", task.id),
            400,
            "/problems/invalid-parameter",
        ),
        // List parameters.
        (
            "/v1/tasks?limit=0".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks?limit=51".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks?limit=-5".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks?limit=ten".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks?status=sleeping".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks?stauts=queued".into(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            "/v1/tasks?cursor=garbage".into(),
            400,
            "/problems/invalid-cursor",
        ),
        (
            format!("/v1/tasks?cursor={}", task.id),
            400,
            "/problems/invalid-cursor",
        ),
        (
            "/v1/tasks?cursor=c1.zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz".into(),
            400,
            "/problems/invalid-cursor",
        ),
        // Event resume points.
        (
            format!("/v1/tasks/{}/events?after=x", task.id),
            400,
            "/problems/invalid-last-event-id",
        ),
        (
            format!("/v1/tasks/{}/events?after=-1", task.id),
            400,
            "/problems/invalid-last-event-id",
        ),
        (
            format!("/v1/tasks/{}/events?limit=0", task.id),
            400,
            "/problems/invalid-parameter",
        ),
        // Routes that do not exist.
        ("/v1/nothing".into(), 404, "/problems/not-found"),
        ("/".into(), 404, "/problems/not-found"),
    ];
    for (path, status, kind) in gets {
        let response = server.get(&path).await;
        let problem = assert_problem(response, status, kind).await;
        assert!(problem["detail"].is_string(), "{path}: {problem}");
    }
    for bad in ["abc", "-1", "1.5", ""] {
        let response = server
            .client
            .get(server.url(&format!("/v1/tasks/{}/events", task.id)))
            .header("last-event-id", bad)
            .send()
            .await
            .expect("get");
        assert_problem(response, 400, "/problems/invalid-last-event-id").await;
    }

    // Wrong methods on known routes.
    for (method, path) in [
        (reqwest::Method::DELETE, "/v1/tasks".to_string()),
        (reqwest::Method::PUT, format!("/v1/tasks/{}", task.id)),
        (
            reqwest::Method::GET,
            format!("/v1/tasks/{}/cancel", task.id),
        ),
        (reqwest::Method::POST, "/healthz".to_string()),
    ] {
        let response = server
            .client
            .request(method.clone(), server.url(&path))
            .send()
            .await
            .expect("request");
        let allow = api_support::header(&response, "allow");
        assert!(!allow.is_empty(), "{method} {path}: 405 without Allow");
        assert_problem(response, 405, "/problems/method-not-allowed").await;
    }

    // Cancel with a bad or unknown id.
    for (path, status, kind) in [
        (
            "/v1/tasks/xyz/cancel".to_string(),
            400,
            "/problems/invalid-parameter",
        ),
        (
            format!("/v1/tasks/{unknown}/cancel"),
            404,
            "/problems/not-found",
        ),
    ] {
        let response = server
            .client
            .post(server.url(&path))
            .send()
            .await
            .expect("cancel");
        assert_problem(response, status, kind).await;
    }

    assert_eq!(snapshot(store.as_ref()).await, before, "nothing written");
    server.shutdown().await;
    db.drop().await;
}

/// A store that cannot reach its database: `/readyz` is a 503 problem that names the backend
/// and leaks nothing of the cause.
#[tokio::test]
async fn readyz_is_503_when_postgres_is_gone() {
    let db = common::TestPg::create().await;
    let store = std::sync::Arc::new(
        cairn::store::postgres::PgStore::connect(&db.url, 2)
            .await
            .expect("connect"),
    );
    store.migrate().await.expect("migrate");
    let server = TestServer::start(store, test_config()).await;
    assert_eq!(server.get("/readyz").await.status(), 200);
    let name = db.name.clone();
    db.drop_database().await;

    let response = server.get("/readyz").await;
    let problem = assert_problem(response, 503, "/problems/unavailable").await;
    let text = problem.to_string();
    assert!(text.contains("postgres"), "{text}");
    assert!(
        !text.contains(&name) && !text.contains("127.0.0.1"),
        "{text}"
    );

    // Reads fail the same way: a 5xx problem that says nothing of the database.
    let response = server
        .get(&format!("/v1/tasks/{}", uuid::Uuid::now_v7()))
        .await;
    let problem = assert_problem(response, 500, "/problems/internal").await;
    assert!(!problem.to_string().contains(&name), "{problem}");
    server.shutdown().await;
}
