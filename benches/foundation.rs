//! Foundation benchmark (the figures of docs/benchmarks.md, "Service foundation"), on Postgres,
//! against a real `cairn serve` process: POST -> 202 latency (one client, then 32 at once), event
//! rows written per second, SSE delivery latency (commit -> client,
//! live events only: those committed after the stream was requested) and idle RSS. Run with
//! `cargo bench --bench foundation` (Postgres at 127.0.0.1:5432, or `CAIRN_TEST_PG_URL`).
//! Prints one line of figures; asserts nothing about speed. `BENCH_WORKERS=N` runs the server
//! with N workers instead of 8; `BENCH_TAIL=1` prints the 32-client posts over 15 ms (which post
//! of its client each was) and the slowest twelve.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use futures_util::StreamExt;
use serde_json::{Value, json};
use sqlx::Connection;
use std::process::Stdio;
use std::time::{Duration, Instant};

const POSTS: usize = 500;
const BURST_TASKS: usize = 200;
const BURST_STEPS: u64 = 8;
const SSE_TASKS: usize = 50;
/// Clients posting at once, and the posts each sends, for the POST latency under load.
const CLIENTS: usize = 32;
const POSTS_PER_CLIENT: usize = 16;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

async fn post_task(http: &reqwest::Client, base: &str, steps: u64, step_ms: u64) -> Value {
    let body = json!({
        "goal": "benchmark task",
        "budget": {"tokens": 1000, "tool_calls": 10, "wall_ms": 600000},
        "metadata": {"engine_steps": steps, "engine_step_ms": step_ms},
    });
    let response = http
        .post(format!("{base}/v1/tasks"))
        .json(&body)
        .send()
        .await
        .expect("POST /v1/tasks");
    assert_eq!(response.status().as_u16(), 202, "POST answered 202");
    response.json().await.expect("task JSON")
}

/// POST -> 202 latency of every post of `CLIENTS` clients posting at once, sorted; waits
/// until every task they created has ended.
async fn concurrent_posts(base: &str) -> Vec<f64> {
    let ready = std::sync::Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let clients = (0..CLIENTS).map(|_| {
        let base = base.to_string();
        let ready = ready.clone();
        tokio::spawn(async move {
            // A client of its own: its own connection, as 32 separate callers would have. Its
            // set-up (the client's TLS roots, the TCP connection) is not timed: each one
            // connects first, and all start posting together.
            let http = reqwest::Client::new();
            http.get(format!("{base}/healthz"))
                .send()
                .await
                .expect("healthz");
            ready.wait().await;
            let mut timed = Vec::with_capacity(POSTS_PER_CLIENT);
            for i in 0..POSTS_PER_CLIENT {
                let t0 = Instant::now();
                let task = post_task(&http, &base, 1, 0).await;
                if std::env::var_os("BENCH_TAIL").is_some()
                    && t0.elapsed() > Duration::from_millis(15)
                {
                    eprintln!("slow post: a client's post #{i} took {:?}", t0.elapsed());
                }
                timed.push((
                    t0.elapsed().as_secs_f64() * 1000.0,
                    task["id"].as_str().expect("id").to_string(),
                ));
            }
            // The client is dropped after every client has finished: dropping one frees its
            // TLS roots (~190k allocations), which would hold up the others' last posts on
            // this process's two runtime threads.
            (timed, http)
        })
    });
    let mut latencies = Vec::with_capacity(CLIENTS * POSTS_PER_CLIENT);
    let http = reqwest::Client::new();
    let mut finished = Vec::with_capacity(CLIENTS);
    for client in futures_util::future::join_all(clients).await {
        let (timed, client) = client.expect("client task");
        finished.push(client);
        for (ms, id) in timed {
            latencies.push(ms);
            wait_terminal(&http, base, &id).await;
        }
    }
    latencies.sort_by(f64::total_cmp);
    latencies
}

async fn wait_terminal(http: &reqwest::Client, base: &str, id: &str) {
    loop {
        let task: Value = http
            .get(format!("{base}/v1/tasks/{id}"))
            .send()
            .await
            .expect("GET task")
            .json()
            .await
            .expect("task JSON");
        let status = task["status"].as_str().unwrap_or_default();
        if !matches!(status, "queued" | "running") {
            assert_eq!(status, "succeeded");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main]
async fn main() {
    let admin = std::env::var("CAIRN_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let db = format!("cairn_bench_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::PgConnection::connect(&admin).await.expect("Postgres");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}")))
        .execute(&mut conn)
        .await
        .expect("create db");
    let base_url = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    let db_url = format!("{base_url}/{db}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("serve")
        .env("CAIRN_DATABASE_URL", &db_url)
        .env("CAIRN_LISTEN_ADDR", format!("127.0.0.1:{port}"))
        .env(
            "CAIRN_WORKERS",
            std::env::var("BENCH_WORKERS").unwrap_or_else(|_| "8".into()),
        )
        .env("CAIRN_TEST_MINIMAL_ENGINE", "true")
        // One client measuring throughput: its own rate limit would be the figure.
        .env("CAIRN_HTTP_RATE_PER_S", "0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start cairn serve");
    let pid = child.id().expect("pid");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let started = Instant::now();
    while http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .map(|r| r.status().is_success())
        .ok()
        != Some(true)
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "cairn became ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_rss_mib = rss_kib(pid) as f64 / 1024.0;

    // POST -> 202 latency, one request at a time.
    let mut post_ms = Vec::with_capacity(POSTS);
    let mut ids = Vec::new();
    for _ in 0..POSTS {
        let t0 = Instant::now();
        let task = post_task(&http, &base, 1, 0).await;
        post_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        ids.push(task["id"].as_str().expect("id").to_string());
    }
    for id in &ids {
        wait_terminal(&http, &base, id).await;
    }
    post_ms.sort_by(f64::total_cmp);
    let post32_ms = concurrent_posts(&base).await;
    if std::env::var_os("BENCH_TAIL").is_some() {
        eprintln!(
            "post{CLIENTS} slowest: {:?}",
            &post32_ms[post32_ms.len().saturating_sub(12)..]
        );
    }

    // Event rows per second: a burst of multi-step tasks run by the pool.
    let count_events = || async {
        let mut c = sqlx::PgConnection::connect(&db_url)
            .await
            .expect("bench db");
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
            .fetch_one(&mut c)
            .await
            .expect("count");
        n
    };
    let before = count_events().await;
    let t0 = Instant::now();
    let mut burst = Vec::new();
    for _ in 0..BURST_TASKS {
        burst.push(
            post_task(&http, &base, BURST_STEPS, 0).await["id"]
                .as_str()
                .expect("id")
                .to_string(),
        );
    }
    for id in &burst {
        wait_terminal(&http, &base, id).await;
    }
    let burst_s = t0.elapsed().as_secs_f64();
    let events_per_s = (count_events().await - before) as f64 / burst_s;

    // SSE delivery latency: event created_at (stamped at commit) -> client receipt.
    let mut sse_ms = Vec::new();
    for _ in 0..SSE_TASKS {
        let task = post_task(&http, &base, 5, 20).await;
        let id = task["id"].as_str().expect("id");
        // Events committed before the stream was asked for are replayed, not delivered live;
        // counting them would add the request's own set-up time to the latency.
        let asked_at = chrono::Utc::now();
        let response = http
            .get(format!("{base}/v1/tasks/{id}/events"))
            .header(
                "Last-Event-ID",
                task["last_seq"].as_i64().unwrap_or(1).to_string(),
            )
            .send()
            .await
            .expect("SSE");
        let mut stream = response.bytes_stream();
        let mut buffer = String::new();
        'stream: while let Some(chunk) = stream.next().await {
            let received = chrono::Utc::now();
            buffer.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data:")) else {
                    continue;
                };
                let event: Value = serde_json::from_str(data.trim()).expect("event JSON");
                let created: chrono::DateTime<chrono::Utc> =
                    serde_json::from_value(event["created_at"].clone()).expect("created_at");
                if created >= asked_at {
                    sse_ms
                        .push((received - created).num_microseconds().unwrap_or(0) as f64 / 1000.0);
                }
                if event["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("task.") && k != "task.claimed")
                {
                    break 'stream;
                }
            }
        }
    }
    sse_ms.sort_by(f64::total_cmp);

    println!(
        "cairn-foundation backend=postgres posts={POSTS} post_p50_ms={:.2} post_p99_ms={:.2} \
         post{CLIENTS}_p50_ms={:.2} post{CLIENTS}_p99_ms={:.2} events_per_s={events_per_s:.0} (burst {BURST_TASKS}x{BURST_STEPS} steps in {burst_s:.2}s) \
         sse_p50_ms={:.2} sse_p99_ms={:.2} (n={}) idle_rss_mib={idle_rss_mib:.1}",
        percentile(&post_ms, 50.0),
        percentile(&post_ms, 99.0),
        percentile(&post32_ms, 50.0),
        percentile(&post32_ms, 99.0),
        percentile(&sse_ms, 50.0),
        percentile(&sse_ms, 99.0),
        sse_ms.len(),
    );

    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await;
}
