//! Every bad input answers a 4xx `application/problem+json` with a stable `type`, and writes
//! nothing: after each rejected request the store holds exactly what it held before.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

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
    bad_submissions(Db::create().await).await;
}

/// Also on Postgres whatever the default backend: its text and jsonb refuse NUL, so this is
/// where a missing check would surface as a 500.
#[tokio::test]
async fn bad_submissions_are_problems_and_write_nothing_on_postgres() {
    bad_submissions(Db::Postgres(common::TestPg::create().await)).await;
}

async fn bad_submissions(db: Db) {
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
        ("negative budget", r#"{"goal": "g", "budget": {"tokens": -1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("fractional budget", r#"{"goal": "g", "budget": {"tokens": 1.5, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("budget beyond u64", r#"{"goal": "g", "budget": {"tokens": 1e30, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("zero budget", r#"{"goal": "g", "budget": {"tokens": 0, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("absurd budget", r#"{"goal": "g", "budget": {"tokens": 99999999999999, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("unknown strategy", r#"{"goal": "g", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}, "strategy": "yolo"}"#.into(), json_type, 422, "/problems/validation"),
        ("empty goal", r#"{"goal": "", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("blank goal", r#"{"goal": "  \n\t ", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("invisible goal", r#"{"goal": "\u200b\u200b \ufeff", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("NUL in goal", r#"{"goal": "a\u0000b", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}"#.into(), json_type, 422, "/problems/validation"),
        ("oversized goal", json!({"goal": "g".repeat(33 * 1024), "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}}).to_string(), json_type, 422, "/problems/validation"),
        ("NUL in metadata", r#"{"goal": "g", "budget": {"tokens": 1, "tool_calls": 1, "wall_ms": 1}, "metadata": {"k\u0000": "v"}}"#.into(), json_type, 422, "/problems/validation"),
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
        // `/` is the dashboard (tests/dashboard.rs); an unknown path beside it is not.
        ("/nothing".into(), 404, "/problems/not-found"),
        ("/ui/nothing.js".into(), 404, "/problems/not-found"),
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

    // Reads fail the same way: a 5xx problem that says nothing of the database. Which one
    // depends on whether the read finds a pooled connection the drop killed (500 internal)
    // or has to open one to a database that is gone (503 unavailable, as `/readyz` says);
    // the hint sender's periodic look for peers may have used and lost the pooled one.
    let response = server
        .get(&format!("/v1/tasks/{}", uuid::Uuid::now_v7()))
        .await;
    let (status, kind) = match response.status().as_u16() {
        503 => (503, "/problems/unavailable"),
        _ => (500, "/problems/internal"),
    };
    let problem = assert_problem(response, status, kind).await;
    assert!(!problem.to_string().contains(&name), "{problem}");
    server.shutdown().await;
}

mod fuzz {
    //! Arbitrary bodies, in-process through the router: never a 5xx, every refusal a problem,
    //! and a refusal never writes.

    use super::*;
    use axum::body::Body;
    use proptest::prelude::*;
    use tower::ServiceExt;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z_]{0,8}", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    /// A valid body with one field replaced, removed or added, or something else entirely.
    fn body() -> impl Strategy<Value = Vec<u8>> {
        let field = prop_oneof![
            Just("goal"),
            Just("budget"),
            Just("strategy"),
            Just("metadata"),
            Just("extra")
        ];
        let unit = prop_oneof![Just("tokens"), Just("tool_calls"), Just("wall_ms")];
        prop_oneof![
            (field, json_value()).prop_map(|(field, value)| {
                let mut body = task_body("fuzz");
                body[field] = value;
                body.to_string().into_bytes()
            }),
            (unit, json_value()).prop_map(|(unit, value)| {
                let mut body = task_body("fuzz");
                body["budget"][unit] = value;
                body.to_string().into_bytes()
            }),
            json_value().prop_map(|value| value.to_string().into_bytes()),
            prop::collection::vec(any::<u8>(), 0..64),
        ]
    }

    /// Postgres matters most here: its text and jsonb refuse NUL, which must stay a 4xx.
    #[test]
    fn arbitrary_bodies_never_fail_on_the_server_side_sqlite() {
        fuzz(Db::Sqlite(common::TestSqlite::create()));
    }

    #[test]
    fn arbitrary_bodies_never_fail_on_the_server_side_postgres() {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        fuzz(Db::Postgres(runtime.block_on(common::TestPg::create())));
    }

    fn fuzz(db: Db) {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let store = runtime.block_on(db.store());
        let state = cairn::http::AppState::new(
            store.clone(),
            std::sync::Arc::new(cairn::clock::SystemClock),
            test_config(),
        );
        let router = cairn::http::router(state);
        let config = ProptestConfig {
            cases: 200,
            failure_persistence: None,
            ..ProptestConfig::default()
        };
        proptest!(config, |(body in body())| {
            let (status, content_type, count_before, count_after) = runtime.block_on(async {
                let before = all_tasks(store.as_ref()).await.len();
                let request = axum::http::Request::post("/v1/tasks")
                    .header("content-type", "application/json")
                    .body(Body::from(body.clone()))
                    .expect("request");
                let response = router.clone().oneshot(request).await.expect("infallible");
                let content_type = response
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let after = all_tasks(store.as_ref()).await.len();
                (response.status().as_u16(), content_type, before, after)
            });
            let shown = String::from_utf8_lossy(&body);
            prop_assert!(status < 500, "{status} for {shown}");
            if status >= 400 {
                prop_assert!(content_type.starts_with("application/problem+json"), "{shown}");
                prop_assert_eq!(count_after, count_before, "refused but written: {}", shown);
            } else {
                prop_assert_eq!(status, 202, "{}", shown);
                prop_assert_eq!(count_after, count_before + 1);
            }
        });
        runtime.block_on(db.drop());
    }
}
