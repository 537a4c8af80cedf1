//! `cairn keys` as an operator runs it, against the real binary: create prints the key once and
//! alone on stdout, list never shows a secret, revoke ends it, usage errors are one clear line
//! (exit 2) and never a panic; and `cairn serve` refuses an open non-loopback address.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::process::Output;
use std::time::Duration;

async fn cairn(args: &[&str], sqlite: &str, env: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .args(args)
        .env_remove("CAIRN_CONFIG")
        .env_remove("DATABASE_URL")
        .env_remove("CAIRN_DATABASE_URL")
        .env_remove("CAIRN_AUTH")
        .env("CAIRN_SQLITE_PATH", sqlite);
    for (name, value) in env {
        command.env(name, value);
    }
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("cairn exits on its own")
        .expect("run cairn")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn keys_are_created_listed_and_revoked() {
    let db = common::TestSqlite::create();
    let sqlite = db.path.display().to_string();
    let args = [
        "keys",
        "create",
        "--tenant",
        "acme",
        "--scopes",
        "submit,read",
        "--name",
        "ci",
    ];
    let created = cairn(&args, &sqlite, &[]).await;
    assert!(created.status.success(), "{}", text(&created.stderr));
    let stdout = text(&created.stdout);
    let key = stdout.trim();
    assert_eq!(
        stdout.lines().count(),
        1,
        "only the key on stdout: {stdout:?}"
    );
    let (id, secret) = cairn::store::keys::parse_key(key).expect("a cairn key");
    assert!(text(&created.stderr).contains(id));

    let listed = cairn(&["keys", "list"], &sqlite, &[]).await;
    assert!(listed.status.success());
    let table = text(&listed.stdout);
    let row = table
        .lines()
        .find(|line| line.starts_with(id))
        .expect("row");
    let columns: Vec<&str> = row.split('\t').collect();
    assert_eq!(columns[1..4], ["acme", "read,submit", "ci"], "{row}");
    assert_eq!(columns[5], "-", "not revoked");
    assert!(!table.contains(secret), "the secret is never listed");

    // Bootstrap: with a key in the store, --if-no-keys creates none.
    let again = [
        "keys",
        "create",
        "--tenant",
        "x",
        "--scopes",
        "admin",
        "--if-no-keys",
    ];
    let skipped = cairn(&again, &sqlite, &[]).await;
    assert!(skipped.status.success());
    assert!(text(&skipped.stdout).is_empty());

    let revoked = cairn(&["keys", "revoke", id], &sqlite, &[]).await;
    assert!(revoked.status.success(), "{}", text(&revoked.stderr));
    let listed = text(&cairn(&["keys", "list"], &sqlite, &[]).await.stdout);
    let row = listed
        .lines()
        .find(|line| line.starts_with(id))
        .expect("row");
    assert_ne!(row.split('\t').nth(5), Some("-"), "{row}");

    let unknown = cairn(&["keys", "revoke", "nope"], &sqlite, &[]).await;
    assert_eq!(unknown.status.code(), Some(1));
    let stderr = text(&unknown.stderr);
    assert!(
        stderr.contains("no key with id") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[tokio::test]
async fn bad_key_requests_are_one_clear_line() {
    let db = common::TestSqlite::create();
    let sqlite = db.path.display().to_string();
    for (args, expect) in [
        (
            vec!["--tenant", "acme", "--scopes", "root"],
            "unknown scope",
        ),
        (
            vec!["--tenant", "acme", "--scopes", ""],
            "at least one scope",
        ),
        (
            vec!["--tenant", "a b", "--scopes", "read"],
            "tenant must be",
        ),
    ] {
        let mut all = vec!["keys", "create"];
        all.extend(args);
        let output = cairn(&all, &sqlite, &[]).await;
        assert_eq!(output.status.code(), Some(2), "{all:?}");
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains(expect) && !stderr.contains("panicked"),
            "{stderr}"
        );
        assert!(output.stdout.is_empty());
    }
    assert!(!db.path.exists(), "a refused request touches no store");
}

#[tokio::test]
async fn serve_refuses_a_non_loopback_address_without_a_key() {
    let db = common::TestSqlite::create();
    let sqlite = db.path.display().to_string();
    let output = cairn(&["serve"], &sqlite, &[("CAIRN_LISTEN_ADDR", "0.0.0.0:0")]).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|line| line.starts_with("cairn: ") && line.contains("CAIRN_AUTH=off")),
        "{stderr}"
    );
    assert!(
        !text(&output.stdout).contains("listening"),
        "it never serves"
    );
}
