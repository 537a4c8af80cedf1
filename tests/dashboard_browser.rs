//! The web dashboard in a real browser: `cairn serve` (the real engines on the built-in
//! simulator, authentication on) and tests/browser/dashboard.mjs driving Debian's chromium
//! through playwright-core. It signs in with a key (a wrong one is refused in words), submits a
//! goal through the form and follows it live to its end, submits one whose calls wait for a
//! sign-off and approves each request on the task page, opens a task and waits for the
//! milestone graph, the timeline, the ledger chart, the artifacts and the plan versions, and
//! checks that the key never reaches storage, a cookie or a URL; any script error or CSP
//! violation fails it. Screenshots go to target/tmp/dashboard (to docs/img with
//! `CAIRN_SCREENSHOTS=docs/img`).
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serve_process::{Db, Serve};

/// The whole browser run, sign-in and a live task included, takes under a minute.
const WALL_LIMIT: Duration = Duration::from_secs(240);

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Fails with what to run when chromium or playwright-core is missing (never a silent skip).
fn browser_installed() {
    let playwright = manifest_dir().join("tests/browser/node_modules/playwright-core");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        playwright.is_dir() && Path::new(&chromium).is_file(),
        "the browser test needs {} and {chromium}: run scripts/install-browser.sh \
         (scripts/test.sh does)",
        playwright.display()
    );
}

#[tokio::test]
#[ignore = "needs chromium and playwright-core (scripts/install-browser.sh); scripts/test.sh runs it"]
async fn the_dashboard_follows_a_task_in_a_browser() {
    browser_installed();
    let db = common::TestSqlite::create();
    let key = serve_process::create_key(&db.path, "read,submit,approve", "dashboard").await;
    let serve = Serve::start(
        Db::Sqlite(&db.path),
        &[
            ("CAIRN_TEST_MINIMAL_ENGINE", "false"),
            // Slow enough that the page sees the task running, fast enough for a test.
            ("CAIRN_SIM_LATENCY_MS", "150"),
            ("RUST_LOG", "error"),
        ],
    )
    .await;
    let shots = std::env::var("CAIRN_SCREENSHOTS")
        .map(|dir| manifest_dir().join(dir))
        .unwrap_or_else(|_| manifest_dir().join("target/tmp/dashboard"));
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let child = tokio::process::Command::new("node")
        .arg(manifest_dir().join("tests/browser/dashboard.mjs"))
        .env("CAIRN_URL", format!("http://{}", serve.addr))
        .env("CAIRN_KEY", &key)
        .env("CAIRN_LIVE", "1")
        .env("CAIRN_APPROVE", "1")
        .env("SCREENSHOTS", &shots)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node tests/browser/dashboard.mjs");
    let output = tokio::time::timeout(WALL_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the browser test ran longer than {WALL_LIMIT:?}"))
        .expect("browser test output");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "the browser test failed:\n{said}");
    assert!(
        said.contains("the task succeeded"),
        "no task was approved on its page:\n{said}"
    );
    println!("{said}");
    for shot in ["dashboard-tasks.png", "dashboard-task.png"] {
        let size = std::fs::metadata(shots.join(shot)).map_or(0, |m| m.len());
        assert!(
            size > 10_000,
            "{shot} is missing or blank ({size} bytes)\n{said}"
        );
    }
    drop(serve);
}
