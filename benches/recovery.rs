//! Memory per active task and recovery time after a crash, on Postgres (docs/benchmarks.md,
//! "Memory and recovery").
//!
//! A crash must be a real one: killing engines inside this process would leave their spawned
//! tasks and heartbeats alive. So this binary re-runs itself as a child process (the "crashed
//! `cairn serve`": PgStore, reaper, worker pool, v2 engine, zero-latency fake model) whose
//! tool calls never return, which pins every claimed task mid-step:
//!
//! 1. memory: the child's RSS once its pool is up (baseline), then with ACTIVE tasks each
//!    claimed, planned and inside its first tool call; the difference over ACTIVE is the
//!    memory one active task costs;
//! 2. recovery: the child is killed with SIGKILL; a fresh stack starts at once on the same
//!    database (what a supervisor restarting `cairn serve` does). Measured: crash -> every
//!    task requeued by the reaper (bounded below by the lease TTL, which this run sets short)
//!    and crash -> every task succeeded, with exactly STEPS steps each (the interrupted step
//!    was never committed, so it is redone once and only once).
//!
//! usage: `cargo bench --bench recovery -- [ACTIVE] [STEPS]` or env `ACTIVE`, `STEPS`
//! (defaults 200 8). Prints one line; asserts the work, never the speed.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::config::Config;
use support::fakes::{Hold, NoopTools, Shape, ZeroModel};
use support::stack::{self, BenchDb, Stack};
use tokio::io::{AsyncBufReadExt, BufReader};

const CHILD_DB: &str = "CAIRN_BENCH_CHILD_DB";
/// Short so the reaper notices the crash quickly; heartbeats at a third of it, as by default.
const LEASE_TTL_MS: u64 = 3_000;
const HEARTBEAT_MS: u64 = 1_000;
const REAPER_MS: u64 = 100;

fn number(index: usize, env: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let text = args
        .get(index)
        .cloned()
        .or_else(|| std::env::var(env).ok())
        .unwrap_or_else(|| default.to_string());
    match text.parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => panic!("{env} must be a positive integer, got {text:?}"),
    }
}

fn bench_config(url: &str, workers: usize) -> Config {
    Config {
        lease_ttl_ms: LEASE_TTL_MS,
        heartbeat_ms: HEARTBEAT_MS,
        reaper_interval_ms: REAPER_MS,
        ..stack::config(url, workers)
    }
}

fn model(steps: usize) -> Arc<ZeroModel> {
    Arc::new(ZeroModel {
        shape: Shape::OneMilestone,
        steps,
    })
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The child: a stack whose tools hold every call forever; says `ready` and waits to be killed.
async fn child(url: String, active: usize, steps: usize) {
    let (hold, _release) = Hold::new();
    let tools = Arc::new(NoopTools { hold: Some(hold) });
    let _stack = Stack::start(&bench_config(&url, active), model(steps), tools).await;
    println!("ready");
    std::future::pending::<()>().await;
}

#[tokio::main]
async fn main() {
    let active = number(0, "ACTIVE", 200);
    let steps = number(1, "STEPS", 8);
    if let Ok(url) = std::env::var(CHILD_DB) {
        return child(url, active, steps).await;
    }
    let db = BenchDb::create().await;
    let config = bench_config(&db.url, active);
    let store = cairn::server::open_migrated(&config)
        .await
        .expect("open and migrate the store");
    let observer = stack::observer(&db).await;

    let exe = std::env::current_exe().expect("own executable");
    let mut process = tokio::process::Command::new(exe)
        .env(CHILD_DB, &db.url)
        .env("ACTIVE", active.to_string())
        .env("STEPS", steps.to_string())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the child stack");
    let pid = process.id().expect("child pid");
    let stdout = process.stdout.take().expect("child stdout");
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
    assert!(
        matches!(ready, Ok(Ok(Some(ref line))) if line == "ready"),
        "child stack started: {ready:?}"
    );
    let baseline = rss_kib(pid);

    stack::submit(store.as_ref(), active).await;
    // Planned means the next thing each task does is its first tool call, which never returns.
    let started = Instant::now();
    while stack::count_events(&observer, "milestone.steps_planned").await < active as i64 {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "every task reached its first step"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let loaded = rss_kib(pid);

    process.start_kill().expect("SIGKILL the child");
    let _ = process.wait().await;
    let crashed = Instant::now();
    let restarted = Stack::start_on(
        &config,
        store.clone(),
        model(steps),
        Arc::new(NoopTools { hold: None }),
    );
    let all = active as i64;
    let mut requeued_at = None;
    let done_at = loop {
        if requeued_at.is_none()
            && stack::count_events(&observer, "task.lease_expired").await >= all
        {
            requeued_at = Some(Instant::now());
        }
        if stack::tally(&observer).await.terminal == all {
            break Instant::now();
        }
        assert!(
            crashed.elapsed() < Duration::from_secs(600),
            "every task finished after the crash"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let requeued_at = requeued_at.unwrap_or(done_at);

    assert_eq!(
        stack::tally(&observer).await.succeeded,
        all,
        "every task succeeded"
    );
    assert_eq!(
        stack::count_events(&observer, "step.finished").await,
        all * steps as i64,
        "each step committed exactly once"
    );

    println!(
        "cairn-recovery active={active} steps={steps} rss_idle_mib={:.1} rss_loaded_mib={:.1} \
         kib_per_active_task={:.1} lease_ttl_s={:.1} requeue_s={:.3} recovery_s={:.3}",
        baseline as f64 / 1024.0,
        loaded as f64 / 1024.0,
        loaded.saturating_sub(baseline) as f64 / active as f64,
        LEASE_TTL_MS as f64 / 1000.0,
        requeued_at.duration_since(crashed).as_secs_f64(),
        done_at.duration_since(crashed).as_secs_f64(),
    );

    restarted.shutdown().await;
    observer.close().await;
    db.drop_database().await;
}
