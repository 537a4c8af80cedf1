//! The auth matrix: every route of the OpenAPI document (`cairn::http::openapi()`, so a route
//! added later is walked too, and fails without an access rule and a recipe) x {own tenant,
//! other tenant, no key, unknown key, revoked key, wrong scope}, through the real HTTP server,
//! on SQLite and on Postgres. It asserts the right 401/403/404, that another tenant's task is a
//! 404 exactly like an unknown id, and that no answer to another tenant carries a byte of
//! `acme`'s data. Then stream tokens, revocation, audit fields, dev mode and start-up refusal.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
#[path = "auth_matrix/flows.rs"]
mod flows;
#[path = "auth_matrix/support.rs"]
mod support;

use std::sync::Arc;

use cairn::clock::Clock;
use cairn::http::auth::{Access, AuthMode, access};
use cairn::http::auth_start::{AuthSetting, start_mode};
use cairn::store::Store;
use cairn::store::keys::Scope;
use serde_json::Value;
use support::{ACME_MARK, Fixture, call, operations, problem_type, recipe};

async fn sqlite() -> (Arc<dyn Store>, common::TestSqlite) {
    let (db, store) = common::sqlite_store().await;
    (store, db)
}

async fn postgres() -> (Arc<dyn Store>, common::TestPg) {
    let db = common::TestPg::create().await;
    let store = cairn::store::postgres::PgStore::connect(&db.url, 8)
        .await
        .expect("pg");
    store.migrate().await.expect("migrate");
    (Arc::new(store), db)
}

/// The task a route is called on: a fresh one for cancel and messages (so every case finds it
/// queued), a fresh waiting one for a decision, a shadow copy for the shadow comparison, else the task with history.
async fn target(f: &Fixture, method: &str, path: &str) -> uuid::Uuid {
    match (method, path) {
        ("POST", "/v1/tasks/{id}/cancel" | "/v1/tasks/{id}/messages") => f.new_acme_task().await,
        ("POST", "/v1/tasks/{id}/approvals/{approval}") => f.parked_acme_task().await,
        ("GET", "/v1/tasks/{id}/shadow") => {
            let (shadow_path, body) = recipe("POST", "/v1/tasks/{id}/shadow", f.task, ACME_MARK);
            let response = f
                .send("POST", &shadow_path, Some(&f.keys.acme_all), body)
                .await;
            assert_eq!(response.status(), 201);
            let copy: Value = response.json().await.expect("shadow");
            copy["id"].as_str().expect("id").parse().expect("uuid")
        }
        _ => f.task,
    }
}

/// The scope each route needs, written down independently of `cairn::http::auth::ACCESS`
/// (`None`: public). A route missing here fails the matrix.
const EXPECTED: &[(&str, &str, Option<Scope>)] = &[
    ("GET", "/healthz", None),
    ("GET", "/readyz", None),
    ("GET", "/openapi.json", None),
    ("POST", "/v1/tasks", Some(Scope::Submit)),
    ("GET", "/v1/tasks", Some(Scope::Read)),
    ("GET", "/v1/tasks/{id}", Some(Scope::Read)),
    ("POST", "/v1/tasks/{id}/cancel", Some(Scope::Submit)),
    ("POST", "/v1/tasks/{id}/messages", Some(Scope::Submit)),
    ("GET", "/v1/tasks/{id}/messages", Some(Scope::Read)),
    ("GET", "/v1/tasks/{id}/approvals", Some(Scope::Read)),
    (
        "POST",
        "/v1/tasks/{id}/approvals/{approval}",
        Some(Scope::Approve),
    ),
    ("POST", "/v1/tasks/{id}/shadow", Some(Scope::Submit)),
    ("GET", "/v1/tasks/{id}/shadow", Some(Scope::Read)),
    ("GET", "/v1/tasks/{id}/events", Some(Scope::Read)),
    ("POST", "/v1/tasks/{id}/stream-token", Some(Scope::Read)),
    ("GET", "/v1/tasks/{id}/plans", Some(Scope::Read)),
    ("GET", "/v1/tasks/{id}/plans/{version}", Some(Scope::Read)),
    (
        "GET",
        "/v1/tasks/{id}/plans/{version}/diff",
        Some(Scope::Read),
    ),
    ("GET", "/v1/tasks/{id}/ledger", Some(Scope::Read)),
    ("GET", "/v1/tasks/{id}/artifacts", Some(Scope::Read)),
    ("GET", "/v1/stats", Some(Scope::Read)),
    ("GET", "/v1/stats/gate", Some(Scope::Read)),
    ("GET", "/v1/rollout", Some(Scope::Admin)),
    ("PUT", "/v1/rollout", Some(Scope::Admin)),
    ("GET", "/v1/tools", Some(Scope::Admin)),
    ("POST", "/v1/tools/refresh", Some(Scope::Admin)),
    ("GET", "/metrics", Some(Scope::Admin)),
];

fn expected(method: &str, path: &str) -> Option<Scope> {
    EXPECTED
        .iter()
        .find(|(m, p, _)| *m == method && *p == path)
        .unwrap_or_else(|| panic!("{method} {path}: no expected access in tests/auth_matrix.rs"))
        .2
}

/// Each single-scope key of `acme` is refused with 403 unless its scope is the one needed
/// (an `admin` key may also decide approvals).
async fn single_scope_keys(f: &Fixture, method: &str, path: &str, scope: Scope) -> usize {
    let keys = [
        (Scope::Read, &f.keys.acme_read),
        (Scope::Submit, &f.keys.acme_submit),
        (Scope::Admin, &f.keys.acme_admin),
        (Scope::Approve, &f.keys.acme_approve),
    ];
    for (has, key) in keys {
        let task = target(f, method, path).await;
        let (concrete, body) = recipe(method, path, task, ACME_MARK);
        let (status, text, _) = call(f, method, &concrete, Some(key), body).await;
        if has == scope || (scope == Scope::Approve && has == Scope::Admin) {
            assert!(
                (200..300).contains(&status),
                "{method} {path} with {has:?}: {status} {text}"
            );
        } else {
            assert_eq!(status, 403, "{method} {path} with only {has:?}: {text}");
            assert_eq!(
                problem_type(&text),
                "/problems/forbidden",
                "{method} {path}"
            );
        }
    }
    keys.len()
}

async fn matrix(store: Arc<dyn Store>) {
    let f = Fixture::start(store).await;
    let unknown_key = format!("cairn_{}_{}", "0".repeat(16), "0".repeat(64));
    let (mut cases, mut leaks) = (0, Vec::new());
    for (method, path) in operations() {
        let rule = access(&method, &path).unwrap_or_else(|| {
            panic!("{method} {path} has no access rule in cairn::http::auth::ACCESS")
        });
        let want = expected(&method, &path);
        assert_eq!(
            rule,
            want.map_or(Access::Public, Access::Scope),
            "{method} {path}"
        );
        let task = target(&f, &method, &path).await;
        let (concrete, body) = recipe(&method, &path, task, ACME_MARK);
        let what = format!("{method} {path}");
        let Access::Scope(scope) = rule else {
            let (status, _, _) = call(&f, &method, &concrete, None, body).await;
            assert_eq!(status, 200, "{what} is public");
            cases += 1;
            continue;
        };
        for key in [
            None,
            Some(f.keys.revoked.as_str()),
            Some(unknown_key.as_str()),
        ] {
            let (status, text, headers) = call(&f, &method, &concrete, key, body.clone()).await;
            assert_eq!(status, 401, "{what} with {key:?}: {text}");
            assert_eq!(problem_type(&text), "/problems/unauthorized", "{what}");
            let challenge = headers
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok());
            assert!(
                challenge.is_some_and(|v| v.starts_with("Bearer")),
                "{what}: {challenge:?}"
            );
            assert!(!text.contains(ACME_MARK), "{what}");
            cases += 1;
        }
        cases += single_scope_keys(&f, &method, &path, scope).await;

        // Another tenant, with every scope: a task of acme does not exist for it.
        let (other_path, other_body) = recipe(&method, &path, task, "a goal of beta");
        let (status, text, _) = call(
            &f,
            &method,
            &other_path,
            Some(&f.keys.beta_all),
            other_body.clone(),
        )
        .await;
        if text.contains(ACME_MARK) || (text.contains(&task.to_string()) && status < 300) {
            leaks.push(format!("{what}: {status} {text}"));
        }
        if path.contains("{id}") {
            assert_eq!(status, 404, "{what} by another tenant: {text}");
            // Exactly what an unknown id gets.
            let unknown = uuid::Uuid::now_v7();
            let (unknown_path, _) = recipe(&method, &path, unknown, "x");
            let (unknown_status, unknown_text, _) = call(
                &f,
                &method,
                &unknown_path,
                Some(&f.keys.beta_all),
                other_body,
            )
            .await;
            assert_eq!(unknown_status, 404, "{what} unknown id");
            assert_eq!(
                text.replace(&task.to_string(), "ID"),
                unknown_text.replace(&unknown.to_string(), "ID"),
                "{what}"
            );
        } else {
            assert!(
                (200..300).contains(&status),
                "{what} by another tenant: {status} {text}"
            );
        }
        cases += 1;

        // The owner, with every scope.
        let (status, text, _) = call(&f, &method, &concrete, Some(&f.keys.acme_all), body).await;
        assert!(
            (200..300).contains(&status),
            "{what} by its tenant: {status} {text}"
        );
        cases += 1;
    }
    assert_eq!(leaks, Vec::<String>::new(), "cross-tenant reads");
    assert!(cases >= 8 * 17, "only {cases} cases ran");
    flows::cross_tenant_lists_and_stats(&f).await;
    flows::audit_and_revocation(&f).await;
    flows::stream_tokens(&f).await;
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_auth_matrix() {
    let (store, _db) = sqlite().await;
    matrix(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_auth_matrix() {
    let (store, db) = postgres().await;
    let outcome = tokio::spawn(matrix(store)).await;
    db.drop_database().await;
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}

#[test]
fn every_documented_route_has_an_access_rule_and_a_recipe() {
    let operations = operations();
    assert!(operations.len() >= 20, "{operations:?}");
    for (method, path) in operations {
        assert!(
            access(&method, &path).is_some(),
            "{method} {path} has no access rule"
        );
        let _ = recipe(&method, &path, uuid::Uuid::nil(), "g");
    }
    // The document says what the server enforces: a bearer scheme, and on every protected
    // operation its security requirement and the 401/403 problems.
    let document = serde_json::to_value(cairn::http::openapi()).expect("document");
    let schemes = &document["components"]["securitySchemes"];
    assert_eq!(schemes["bearer"]["scheme"], "bearer", "{schemes}");
    for (method, path, scope) in EXPECTED {
        let operation = &document["paths"][path][method.to_ascii_lowercase()];
        let responses = &operation["responses"];
        let security = operation["security"].as_array();
        match scope {
            Some(scope) => {
                assert!(
                    responses.get("401").is_some() && responses.get("403").is_some(),
                    "{method} {path}"
                );
                let named = security
                    .is_some_and(|s| s.iter().any(|r| r["bearer"][0] == scope_name(*scope)));
                assert!(named, "{method} {path}: {security:?}");
            }
            None => assert!(
                security.is_none() && responses.get("401").is_none(),
                "{method} {path}"
            ),
        }
    }
}

fn scope_name(scope: Scope) -> &'static str {
    scope.as_str()
}

/// Dev mode: no key in the store, every request is tenant `default`; the first key ends it
/// (after at most a second), for good.
#[tokio::test]
async fn dev_mode_lasts_until_the_first_key() {
    let (store, _db) = sqlite().await;
    let clock = Arc::new(cairn::clock::ManualClock::new(chrono::DateTime::UNIX_EPOCH));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let state = cairn::http::AppState::new(
        store.clone(),
        clock.clone(),
        cairn::config::Config::default(),
    );
    tokio::spawn(cairn::http::serve(
        listener,
        state,
        std::future::pending::<()>(),
    ));
    let client = reqwest::Client::new();
    let body = support::task_body("dev");
    let created = client
        .post(format!("{base}/v1/tasks"))
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(created.status(), 202);
    let task: Value = created.json().await.expect("task");
    assert_eq!(task["tenant_id"], "default");
    let generated = cairn::store::keys::generate_key("acme", vec![Scope::Read], None).expect("key");
    store
        .create_api_key(generated.new, clock.now())
        .await
        .expect("key");
    clock.advance(chrono::Duration::seconds(2));
    let refused = client
        .get(format!("{base}/v1/tasks"))
        .send()
        .await
        .expect("get");
    assert_eq!(refused.status(), 401);
    let allowed = client
        .get(format!("{base}/v1/tasks"))
        .bearer_auth(generated.token.expose())
        .send()
        .await
        .expect("get");
    assert_eq!(allowed.status(), 200);
    assert_eq!(
        client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .expect("get")
            .status(),
        200
    );
}

#[tokio::test]
async fn start_up_refuses_an_open_non_loopback_server() {
    let (store, _db) = sqlite().await;
    let loopback: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let public: std::net::SocketAddr = "0.0.0.0:8080".parse().unwrap();
    let mode = |setting, addr| start_mode(setting, addr, store.as_ref());
    assert_eq!(
        mode(AuthSetting::Auto, loopback).await.unwrap(),
        AuthMode::DevUntilKeys
    );
    let refused = mode(AuthSetting::Auto, public)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("CAIRN_AUTH=off") && refused.contains("cairn keys create"),
        "{refused}"
    );
    assert_eq!(mode(AuthSetting::Off, public).await.unwrap(), AuthMode::Off);
    assert_eq!(
        mode(AuthSetting::On, loopback).await.unwrap(),
        AuthMode::Required
    );
    let generated = cairn::store::keys::generate_key("acme", vec![Scope::Read], None).unwrap();
    store
        .create_api_key(generated.new, chrono::DateTime::UNIX_EPOCH)
        .await
        .unwrap();
    assert_eq!(
        mode(AuthSetting::Auto, public).await.unwrap(),
        AuthMode::Required
    );
    assert_eq!(
        mode(AuthSetting::Auto, loopback).await.unwrap(),
        AuthMode::Required
    );
}
