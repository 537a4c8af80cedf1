//! `cairn approve` against a real `cairn serve` on the simulator's `approvals.json`: a task
//! submitted with `--approval steps` waits; off a terminal the command needs a decision flag
//! (exit 2, in words); `--yes` approves the call it shows, `--reject REASON` refuses the next,
//! and the task ends succeeded with the approved write made once.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use std::net::SocketAddr;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use serve_process::{Db, Serve, SimStack};
use tokio::process::Command;

async fn cairn(addr: SocketAddr, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .env("CAIRN_URL", format!("http://{addr}"))
        .env_remove("CAIRN_API_KEY")
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(60), output)
        .await
        .expect("the client ran over 60 s")
        .expect("run the client")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The task's status once it waits on request `n` (or has ended).
async fn waiting(addr: SocketAddr, id: &str, n: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let task: Value = reqwest::get(format!("http://{addr}/v1/tasks/{id}"))
            .await
            .expect("GET task")
            .json()
            .await
            .expect("json");
        let list: Value = reqwest::get(format!("http://{addr}/v1/tasks/{id}/approvals"))
            .await
            .expect("GET approvals")
            .json()
            .await
            .expect("json");
        let status = task["status"].as_str().unwrap_or_default().to_string();
        let held = list["items"].as_array().map_or(0, Vec::len);
        let ended =
            ["succeeded", "failed", "budget_exhausted", "cancelled"].contains(&status.as_str());
        if (status == "awaiting_approval" && held == n) || ended {
            return status;
        }
        assert!(Instant::now() < deadline, "never waited on request {n}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_shows_the_calls_and_sends_the_decision() {
    let sim = SimStack::start("approvals.json", &[], 0).await;
    let db = common::TestSqlite::create();
    let serve = Serve::start(Db::Sqlite(&db.path), &sim.env()).await;
    let goal = "Fetch the prices, write them in a note and publish it";
    let submitted = cairn(
        serve.addr,
        &["submit", goal, "--strategy", "v2", "--approval", "steps"],
    )
    .await;
    assert_eq!(submitted.status.code(), Some(0), "{}", text(&submitted));
    let id = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    assert_eq!(waiting(serve.addr, &id, 1).await, "awaiting_approval");

    let undecided = cairn(serve.addr, &["approve", &id]).await;
    assert_eq!(undecided.status.code(), Some(2), "{}", text(&undecided));
    assert!(text(&undecided).contains("--yes"), "{}", text(&undecided));

    let approved = cairn(serve.addr, &["approve", &id, "--yes"]).await;
    let said = text(&approved);
    assert_eq!(approved.status.code(), Some(0), "{said}");
    assert!(
        said.contains("write_note") && said.contains("13 USD"),
        "{said}"
    );
    assert!(
        said.contains("approval 1 of task") && said.contains("approved"),
        "{said}"
    );

    assert_eq!(waiting(serve.addr, &id, 2).await, "awaiting_approval");
    let rejected = cairn(serve.addr, &["approve", &id, "--reject", "publish to ops"]).await;
    assert_eq!(rejected.status.code(), Some(0), "{}", text(&rejected));
    assert!(text(&rejected).contains("ops-typo"), "{}", text(&rejected));

    assert_eq!(waiting(serve.addr, &id, 3).await, "awaiting_approval");
    let last = cairn(serve.addr, &["approve", &id, "--yes", "--json"]).await;
    assert_eq!(last.status.code(), Some(0), "{}", text(&last));
    let status = waiting(serve.addr, &id, 4).await;
    assert_eq!(status, "succeeded");
    assert_eq!(sim.sim.stats().tools["write_note"].calls, 1);
    let nothing = cairn(serve.addr, &["approve", &id]).await;
    assert_eq!(nothing.status.code(), Some(0));
    assert!(
        text(&nothing).contains("waits for no approval"),
        "{}",
        text(&nothing)
    );
    serve.terminate().await;
}
