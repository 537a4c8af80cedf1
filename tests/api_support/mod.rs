//! Shared by the API tests: a real `cairn::http::serve` on 127.0.0.1:0 over a fresh store, a
//! reqwest client, an SSE frame reader, problem assertions and fenced event appends.
//!
//! The store is a temp-file SQLite by default; `CAIRN_API_TEST_BACKEND=postgres` runs the same
//! tests on a fresh Postgres database instead.
#![allow(dead_code)]

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use cairn::clock::SystemClock;
use cairn::config::Config;
use cairn::domain::event::NewEvent;
use cairn::domain::task::{DEFAULT_TENANT, Lease, Task, TaskStatus};
use cairn::http::AppState;
use cairn::store::ClaimParams;
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;
use cairn::store::{Change, Commit, Store, TaskQuery};
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::common::{TestPg, TestSqlite};

/// Bounds every wait in these tests; only a failing test ever reaches it.
pub const WAIT: Duration = Duration::from_secs(15);

/// The database behind a test, kept alive (and dropped) with it.
pub enum Db {
    Sqlite(TestSqlite),
    Postgres(TestPg),
}

impl Db {
    pub async fn create() -> Db {
        match std::env::var("CAIRN_API_TEST_BACKEND").as_deref() {
            Ok("postgres") => Db::Postgres(TestPg::create().await),
            _ => Db::Sqlite(TestSqlite::create()),
        }
    }

    /// A new, migrated store on this database (call twice on Postgres for two replicas).
    pub async fn store(&self) -> Arc<dyn Store> {
        let store: Arc<dyn Store> = match self {
            Db::Sqlite(db) => Arc::new(SqliteStore::open(&db.path).await.expect("open sqlite")),
            Db::Postgres(db) => Arc::new(PgStore::connect(&db.url, 8).await.expect("connect pg")),
        };
        store.migrate().await.expect("migrate");
        store
    }

    pub async fn drop(self) {
        if let Db::Postgres(db) = self {
            db.drop_database().await;
        }
    }
}

/// A config for tests: a small body limit (so 413 is cheap to provoke), quick polls.
pub fn test_config() -> Config {
    Config {
        max_body_bytes: 64 * 1024,
        poll_interval_ms: 200,
        max_page_size: 50,
        ..Config::default()
    }
}

/// `cairn::http::serve` on an ephemeral port.
pub struct TestServer {
    pub base: String,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<std::io::Result<()>>,
}

impl TestServer {
    pub async fn start(store: Arc<dyn Store>, config: Config) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = AppState::new(store, Arc::new(SystemClock), config);
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(cairn::http::serve(listener, state, async move {
            let _ = stopped.await;
        }));
        TestServer {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
            stop: Some(stop),
            handle,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.expect("GET")
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("POST")
    }

    /// Creates a task through the API and returns it.
    pub async fn create_task(&self, goal: &str) -> Task {
        let response = self.post_json("/v1/tasks", &task_body(goal)).await;
        assert_eq!(response.status(), 202, "create {goal}");
        response.json().await.expect("task JSON")
    }

    /// Opens the SSE stream of a task with optional extra headers.
    pub async fn events(&self, path: &str, last_event_id: Option<&str>) -> SseReader {
        let mut request = self
            .client
            .get(self.url(path))
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.expect("open stream");
        assert_eq!(response.status(), 200, "stream {path}");
        let content_type = header(&response, "content-type");
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        SseReader::new(response)
    }

    /// Graceful shutdown; fails if the server does not stop in time.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(WAIT, self.handle)
            .await
            .expect("server stopped in time")
            .expect("server task")
            .expect("serve");
    }
}

/// A valid submission.
pub fn task_body(goal: &str) -> Value {
    json!({
        "goal": goal,
        "budget": {"tokens": 10_000, "tool_calls": 20, "wall_ms": 60_000},
    })
}

pub fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// Asserts a problem response: status, media type, stable `type`, and a non-empty detail.
pub async fn assert_problem(response: reqwest::Response, status: u16, kind: &str) -> Value {
    let actual = response.status().as_u16();
    let content_type = header(&response, "content-type");
    let nosniff = header(&response, "x-content-type-options");
    let body = response.text().await.expect("body");
    assert_eq!(actual, status, "status; body: {body}");
    assert_eq!(
        nosniff, "nosniff",
        "every answer carries X-Content-Type-Options"
    );
    assert!(
        content_type.starts_with("application/problem+json"),
        "content-type {content_type:?}; body: {body}"
    );
    let problem: Value = serde_json::from_str(&body).expect("problem JSON");
    assert_eq!(problem["type"], kind, "{problem}");
    assert_eq!(problem["status"], status, "{problem}");
    assert!(
        problem["title"].as_str().is_some_and(|t| !t.is_empty()),
        "{problem}"
    );
    assert!(
        problem["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{problem}"
    );
    problem
}

/// Every task of the default tenant.
pub async fn all_tasks(store: &dyn Store) -> Vec<Task> {
    let query = TaskQuery {
        status: None,
        before: None,
        limit: 10_000,
    };
    store
        .list_tasks(DEFAULT_TENANT, &query)
        .await
        .expect("list tasks")
}

/// Claims the (only queued) task as a worker would.
pub async fn claim(store: &dyn Store, task: &Task) -> Lease {
    let claimed = store
        .claim(ClaimParams::new(
            "api-test-worker",
            chrono::Utc::now(),
            chrono::Duration::seconds(60),
        ))
        .await
        .expect("claim")
        .expect("a queued task");
    assert_eq!(claimed.task.id, task.id, "claimed another task");
    claimed.lease
}

/// Appends events through a fenced commit, optionally with a new status; returns the last seq.
pub async fn append(
    store: &dyn Store,
    lease: &Lease,
    events: Vec<NewEvent>,
    status: Option<TaskStatus>,
) -> i64 {
    let change = Change {
        status,
        events,
        ..Change::default()
    };
    match store
        .commit(lease, change, chrono::Utc::now())
        .await
        .expect("commit")
    {
        Commit::Applied { last_seq, .. } => last_seq,
        Commit::LeaseLost => panic!("lease lost"),
    }
}

/// One SSE frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Event {
        id: String,
        event: String,
        data: Value,
    },
    Comment(String),
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Reads frames off a `text/event-stream` response.
pub struct SseReader {
    stream: ByteStream,
    buffer: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> SseReader {
        SseReader {
            stream: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }

    /// The next frame, or `None` when the server ended the stream. Panics after [`WAIT`].
    pub async fn next_frame(&mut self) -> Option<Frame> {
        tokio::time::timeout(WAIT, self.read_frame())
            .await
            .expect("an SSE frame (or the end of the stream) in time")
    }

    /// The next event frame, skipping keep-alive comments.
    pub async fn next_event(&mut self) -> Option<(String, String, Value)> {
        loop {
            match self.next_frame().await? {
                Frame::Event { id, event, data } => return Some((id, event, data)),
                Frame::Comment(_) => {}
            }
        }
    }

    async fn read_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                return Some(parse_frame(&raw));
            }
            match self.stream.next().await {
                Some(Ok(chunk)) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Some(Err(error)) => panic!("stream error: {error}"),
                None => {
                    assert!(
                        self.buffer.trim().is_empty(),
                        "stream ended mid-frame: {:?}",
                        self.buffer
                    );
                    return None;
                }
            }
        }
    }
}

fn parse_frame(raw: &str) -> Frame {
    let (mut id, mut event, mut data, mut comment) = (None, None, String::new(), None);
    for line in raw.lines().filter(|line| !line.is_empty()) {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "" => comment = Some(value.to_string()),
            "id" => id = Some(value.to_string()),
            "event" => event = Some(value.to_string()),
            "data" => data.push_str(value),
            other => panic!("unexpected SSE field {other:?} in {raw:?}"),
        }
    }
    match (id, event, comment) {
        (Some(id), Some(event), _) => Frame::Event {
            id,
            event,
            data: serde_json::from_str(&data).expect("data is JSON"),
        },
        (None, None, Some(comment)) => Frame::Comment(comment),
        _ => panic!("malformed SSE frame {raw:?}"),
    }
}
