//! The command-line client against a real `cairn serve` (embedded SQLite, the real engine on
//! the built-in simulator): a followed goal ends with its milestones and exit 0, a cancelled
//! one with exit 4, a follow survives a server restart without repeating an event, usage
//! errors exit 2 in words, and the one-shot commands answer what the API holds.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod serve_process;

use std::net::SocketAddr;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use serve_process::{Db, FAST_LEASES, Serve};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const GOAL: &str = "Look up who owns service A";
const BUDGET: &str = "tokens=200000,tool_calls=50,wall_ms=600000";
/// The goal submitted and followed on v2, so a milestone is planned.
const FOLLOW: [&str; 7] = [
    "submit",
    GOAL,
    "--budget",
    BUDGET,
    "--strategy",
    "v2",
    "--follow",
];
/// The real engines on the built-in simulator, not the scripted lifecycle engine.
const REAL_ENGINE: (&str, &str) = ("CAIRN_TEST_MINIMAL_ENGINE", "false");
/// Slows every simulated model and tool call, so a task is still running when it is cancelled
/// or its server killed.
const SLOW_SIM: (&str, &str) = ("CAIRN_SIM_LATENCY_MS", "300");

fn client(url: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .env("CAIRN_URL", url)
        .env_remove("CAIRN_API_KEY")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn run(addr: SocketAddr, args: &[&str]) -> Output {
    let output = client(&format!("http://{addr}")).args(args).output();
    tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .expect("the client ran over 120 s")
        .expect("run the client")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn both(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The seq of each event line (`#SEQ KIND ...`), asserting none comes twice or out of order.
fn event_seqs(lines: &[String]) -> Vec<i64> {
    let seqs: Vec<i64> = lines
        .iter()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|rest| rest.split(' ').next().unwrap().parse::<i64>().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|pair| pair[0] < pair[1]),
        "event lines repeated or out of order: {lines:#?}"
    );
    seqs
}

fn spawn_follow(url: &str) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = client(url)
        .args(FOLLOW)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the client");
    let stdout = child.stdout.take().expect("piped stdout");
    (child, BufReader::new(stdout).lines())
}

/// Reads lines into `seen` until one satisfies `done` (bounded).
async fn read_until(
    lines: &mut Lines<BufReader<ChildStdout>>,
    seen: &mut Vec<String>,
    done: impl Fn(&str) -> bool,
) {
    let reading = async {
        while let Some(line) = lines.next_line().await.expect("read the client") {
            seen.push(line.clone());
            if done(&line) {
                return true;
            }
        }
        false
    };
    let found = tokio::time::timeout(Duration::from_secs(120), reading)
        .await
        .expect("the awaited line did not come within 120 s");
    assert!(found, "the client's output ended first: {seen:#?}");
}

async fn wait_exit(child: &mut Child) -> Option<i32> {
    tokio::time::timeout(Duration::from_secs(120), child.wait())
        .await
        .expect("the client did not exit within 120 s")
        .expect("wait for the client")
        .code()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_followed_goal_shows_its_milestones_and_ends_succeeded() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let serve = Serve::start(Db::Sqlite(&db), &[REAL_ENGINE]).await;
    let output = run(serve.addr, &FOLLOW).await;
    assert_eq!(output.status.code(), Some(0), "{}", both(&output));
    let lines: Vec<String> = stdout(&output).lines().map(str::to_string).collect();
    let id = lines[0]
        .strip_prefix("task ")
        .expect("the id line")
        .to_string();
    assert!(!event_seqs(&lines).is_empty());
    let has = |needle: &str| lines.iter().any(|line| line.contains(needle));
    assert!(has("plan.accepted"), "{lines:#?}");
    assert!(has("  milestone m1 ["), "{lines:#?}");
    assert!(has("milestone.started m1"), "{lines:#?}");
    assert!(has("  ledger tokens: spent"), "{lines:#?}");
    assert!(has("task.succeeded"), "{lines:#?}");
    assert!(
        lines.last().unwrap().starts_with("result: succeeded"),
        "{lines:#?}"
    );
    the_one_shot_commands_answer_what_the_api_holds(serve.addr, &id).await;
    serve.terminate().await;
}

async fn the_one_shot_commands_answer_what_the_api_holds(addr: SocketAddr, id: &str) {
    let tools = run(addr, &["tools", "--json"]).await;
    assert_eq!(tools.status.code(), Some(0), "{}", both(&tools));
    let list: Value = serde_json::from_str(&stdout(&tools)).unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"lookup") && names.contains(&"write_note"),
        "{names:?}"
    );

    let listed = run(addr, &["tasks", "list", "--status", "succeeded", "--json"]).await;
    assert_eq!(listed.status.code(), Some(0), "{}", both(&listed));
    let page: Value = serde_json::from_str(&stdout(&listed)).unwrap();
    assert_eq!(page["items"][0]["id"], id, "{page:#}");

    let shown = run(addr, &["tasks", "show", id]).await;
    assert_eq!(shown.status.code(), Some(0), "{}", both(&shown));
    assert!(
        stdout(&shown).contains("status    succeeded"),
        "{}",
        both(&shown)
    );

    let events = run(addr, &["tasks", "events", id]).await;
    assert_eq!(events.status.code(), Some(0), "{}", both(&events));
    let lines: Vec<String> = stdout(&events).lines().map(str::to_string).collect();
    assert_eq!(event_seqs(&lines)[0], 1, "{lines:#?}");
    assert!(
        lines.last().unwrap().contains("task.succeeded"),
        "{lines:#?}"
    );

    // An ended task cannot be cancelled: the server's 409, in words, and exit 5.
    let cancel = run(addr, &["tasks", "cancel", id]).await;
    assert_eq!(cancel.status.code(), Some(5), "{}", both(&cancel));
    let stderr = String::from_utf8_lossy(&cancel.stderr);
    assert!(stderr.contains("409"), "{stderr}");
    assert!(!stderr.contains("Problem {"), "{stderr}");
    // Nor steered.
    let steer = run(addr, &["tasks", "steer", id, "use the EU region"]).await;
    assert_eq!(steer.status.code(), Some(5), "{}", both(&steer));
    let stderr = String::from_utf8_lossy(&steer.stderr);
    assert!(stderr.contains("already ended"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_task_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let serve = Serve::start(Db::Sqlite(&db), &[REAL_ENGINE, SLOW_SIM]).await;
    let url = format!("http://{}", serve.addr);
    let (mut child, mut lines) = spawn_follow(&url);
    let mut seen = Vec::new();
    read_until(&mut lines, &mut seen, |line| line.starts_with("task ")).await;
    let id = seen[0].strip_prefix("task ").unwrap().to_string();
    let steer = run(serve.addr, &["tasks", "steer", &id, "use the EU region"]).await;
    assert_eq!(steer.status.code(), Some(0), "{}", both(&steer));
    assert!(
        stdout(&steer).starts_with("message 1 sent to task"),
        "{}",
        both(&steer)
    );
    let cancel = run(serve.addr, &["tasks", "cancel", &id]).await;
    assert_eq!(cancel.status.code(), Some(0), "{}", both(&cancel));
    assert_eq!(stdout(&cancel).trim(), format!("task {id} cancelled"));
    read_until(&mut lines, &mut seen, |line| line.starts_with("result: ")).await;
    assert_eq!(wait_exit(&mut child).await, Some(4), "{seen:#?}");
    assert!(
        seen.iter().any(|line| line.contains("task.cancelled")),
        "{seen:#?}"
    );
    assert!(
        seen.last().unwrap().starts_with("result: cancelled"),
        "{seen:#?}"
    );
    serve.terminate().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follow_survives_a_server_restart_without_repeating_an_event() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut env: Vec<(&str, &str)> = FAST_LEASES.to_vec();
    env.extend([
        REAL_ENGINE,
        SLOW_SIM,
        ("CAIRN_LISTEN_ADDR", listen.as_str()),
    ]);
    let serve = Serve::start(Db::Sqlite(&db), &env).await;
    let (mut child, mut lines) = spawn_follow(&format!("http://{listen}"));
    let mut seen = Vec::new();
    read_until(&mut lines, &mut seen, |line| {
        line.starts_with('#') && line.contains(" milestone.")
    })
    .await;
    serve.kill().await;
    let restarted = Serve::start(Db::Sqlite(&db), &env).await;
    read_until(&mut lines, &mut seen, |line| line.starts_with("result: ")).await;
    assert_eq!(wait_exit(&mut child).await, Some(0), "{seen:#?}");
    event_seqs(&seen);
    assert!(
        seen.last().unwrap().starts_with("result: succeeded"),
        "{seen:#?}"
    );
    restarted.terminate().await;
}

#[tokio::test]
async fn usage_errors_exit_2_in_plain_words() {
    // Nothing listens here: a usage error is found before the server is asked.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    for (args, words) in [
        (
            vec!["submit", GOAL, "--budget", "dollars=5"],
            "not a budget unit",
        ),
        (
            vec!["submit", GOAL, "--budget", "tokens=many"],
            "whole number",
        ),
        (vec!["submit", GOAL, "--strategy", "fast"], "not a strategy"),
        (
            vec!["tasks", "list", "--status", "done"],
            "not a task status",
        ),
        (vec!["tasks", "frobnicate"], "frobnicate"),
    ] {
        let output = run(addr, &args).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", both(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(words), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // A server that is not there is exit 5, said in words.
    let output = run(
        addr,
        &["tasks", "show", "0190aaaa-0000-7000-8000-000000000000"],
    )
    .await;
    assert_eq!(output.status.code(), Some(5), "{}", both(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot reach the cairn server"), "{stderr}");
}
