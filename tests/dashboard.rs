//! The web dashboard through HTTP: the page at `/` and its files at `/ui/` come from the
//! binary with their content types and a strict Content-Security-Policy, need no key even when
//! the API does (the page signs in with one and is only a client of the API), an unknown file
//! is a problem+json 404, and `dashboard = false` takes both routes away.
//! (The page's behaviour in a browser is tests/browser/dashboard.mjs.)
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod api_support;
mod common;

use std::sync::Arc;

use api_support::{Db, TestServer, assert_problem, header, test_config};
use cairn::clock::SystemClock;
use cairn::http::AppState;
use cairn::http::auth::AuthMode;

#[tokio::test]
async fn the_page_and_its_files_are_served_with_a_strict_policy() {
    let db = Db::create().await;
    let server = TestServer::start(db.store().await, test_config()).await;
    let page = server.get("/").await;
    assert_eq!(page.status(), 200);
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    let policy = header(&page, "content-security-policy");
    assert!(policy.contains("script-src 'self'"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(header(&page, "x-frame-options"), "DENY");
    let html = page.text().await.unwrap();
    assert!(html.contains("/ui/app.js"), "{html}");

    for (file, kind) in [
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/task.js", "text/javascript; charset=utf-8"),
        ("/ui/app.css", "text/css; charset=utf-8"),
    ] {
        let answer = server.get(file).await;
        assert_eq!(answer.status(), 200, "{file}");
        assert_eq!(header(&answer, "content-type"), kind, "{file}");
        assert_eq!(header(&answer, "x-content-type-options"), "nosniff");
        assert!(!answer.text().await.unwrap().is_empty(), "{file}");
    }
    assert_problem(
        server.get("/ui/secret.js").await,
        404,
        "/problems/not-found",
    )
    .await;
    assert_problem(
        server.get("/ui/..%2Fmod.rs").await,
        404,
        "/problems/not-found",
    )
    .await;
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn the_page_needs_no_key_while_the_api_does() {
    let db = Db::create().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = AppState::new(db.store().await, Arc::new(SystemClock), test_config())
        .with_auth(AuthMode::Required);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(cairn::http::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    let page = client.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let script = client
        .get(format!("{base}/ui/api.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), 200);
    let tasks = client.get(format!("{base}/v1/tasks")).send().await.unwrap();
    assert_problem(tasks, 401, "/problems/unauthorized").await;
    let _ = stop.send(());
    handle.await.unwrap().unwrap();
    db.drop().await;
}

#[tokio::test]
async fn a_server_without_the_dashboard_answers_404_at_the_root() {
    let db = Db::create().await;
    let mut config = test_config();
    config.dashboard = false;
    let server = TestServer::start(db.store().await, config).await;
    assert_problem(server.get("/").await, 404, "/problems/not-found").await;
    assert_problem(server.get("/ui/app.js").await, 404, "/problems/not-found").await;
    assert_eq!(server.get("/healthz").await.status(), 200);
    server.shutdown().await;
    db.drop().await;
}
