//! The shared test helpers themselves: a per-test Postgres database is created, usable and
//! dropped; a temp SQLite path is unique.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use sqlx::Connection;

#[tokio::test]
async fn test_postgres_database_lifecycle() {
    let db = common::TestPg::create().await;
    let mut conn = sqlx::PgConnection::connect(&db.url)
        .await
        .expect("connect to the new database");
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut conn)
        .await
        .expect("query");
    assert_eq!(one, 1);
    drop(conn);
    let name = db.name.clone();
    db.drop_database().await;
    let mut admin = sqlx::PgConnection::connect(&common::pg_admin_url())
        .await
        .expect("admin");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE datname = $1")
        .bind(&name)
        .fetch_one(&mut admin)
        .await
        .expect("count");
    assert_eq!(left, 0, "the test database was dropped");
}

#[test]
fn temp_sqlite_paths_are_unique() {
    let a = common::TestSqlite::create();
    let b = common::TestSqlite::create();
    assert_ne!(a.path, b.path);
    assert!(a.dir.path().exists());
}
