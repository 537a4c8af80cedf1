//! Runs the real `cairn serve` binary as a child process, for the crash and shutdown tests.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use cairn::domain::event::Event;
use cairn::domain::task::{Budget, DEFAULT_TENANT, NewTask, Strategy, TaskId};
use cairn::store::Store;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Where a child `cairn serve` keeps its data.
#[derive(Debug, Clone, Copy)]
pub enum Db<'a> {
    Postgres(&'a str),
    /// The embedded default: no database URL, this SQLite file.
    Sqlite(&'a std::path::Path),
}

/// A running `cairn serve`; killed when dropped.
pub struct Serve {
    pub child: Child,
    pub addr: SocketAddr,
    /// Every stdout line printed before the listening line.
    pub banner: Vec<String>,
}

/// Settings that make a dead process's leases expire and get reaped within about two seconds,
/// with ten heartbeats per lease so a busy machine does not lose live ones.
pub const FAST_LEASES: &[(&str, &str)] = &[
    ("CAIRN_LEASE_TTL_MS", "2000"),
    ("CAIRN_HEARTBEAT_MS", "200"),
    ("CAIRN_REAPER_INTERVAL_MS", "200"),
    ("CAIRN_POLL_INTERVAL_MS", "200"),
    ("CAIRN_WORKERS", "2"),
];

impl Serve {
    /// Starts `cairn serve` on `db` (port 0) and waits for its listening line.
    pub async fn start(db: Db<'_>, env: &[(&str, &str)]) -> Serve {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
        command
            .arg("serve")
            .env_remove("DATABASE_URL")
            .env_remove("CAIRN_DATABASE_URL")
            .env_remove("CAIRN_CONFIG")
            .env("CAIRN_LISTEN_ADDR", "127.0.0.1:0")
            // The lifecycle tests drive leases and crashes with the scripted minimal engine.
            .env("CAIRN_TEST_MINIMAL_ENGINE", "true")
            .env("RUST_LOG", "cairn=info,warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        match db {
            Db::Postgres(url) => command.env("CAIRN_DATABASE_URL", url),
            Db::Sqlite(path) => command.env("CAIRN_SQLITE_PATH", path),
        };
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("spawn cairn serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut banner = Vec::new();
        let addr = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                if let Some(addr) = line.strip_prefix(cairn::server::LISTENING_PREFIX) {
                    return addr.trim().parse::<SocketAddr>().expect("bound address");
                }
                banner.push(line);
            }
            panic!("cairn serve exited before printing its address");
        })
        .await
        .expect("cairn serve did not start within 60s");
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Serve {
            child,
            addr,
            banner,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("child still running")
    }

    /// SIGKILL: the process gets no chance to clean up.
    pub async fn kill(mut self) {
        self.child.kill().await.expect("SIGKILL");
    }

    /// SIGTERM, then the exit code (bounded wait).
    pub async fn terminate(mut self) -> Option<i32> {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        let exit = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("cairn serve did not exit within 60s of SIGTERM")
            .expect("wait");
        exit.code()
    }
}

/// Inserts a task through the store (the same row and event `POST /v1/tasks` writes).
pub async fn submit(store: &dyn Store, steps: u64, step_ms: u64) -> TaskId {
    let new = NewTask {
        tools: None,
        id: uuid::Uuid::now_v7(),
        tenant_id: DEFAULT_TENANT.to_string(),
        goal: "survive a crash".to_string(),
        strategy: Strategy::Auto,
        budget: Budget {
            tokens: 1000,
            tool_calls: 10,
            wall_ms: 600_000,
            cost: None,
        },
        metadata: serde_json::json!({ "engine_steps": steps, "engine_step_ms": step_ms }),
        approval: Default::default(),
    };
    store
        .create_task(new, None, chrono::Utc::now())
        .await
        .expect("create task")
        .task
        .id
}

/// Submits a task over HTTP (`POST /v1/tasks`), the way a client would.
pub async fn post_task(addr: SocketAddr, steps: u64, step_ms: u64) -> TaskId {
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/tasks"))
        .json(&serde_json::json!({
            "goal": "survive a crash",
            "budget": {"tokens": 1000, "tool_calls": 10, "wall_ms": 600_000},
            "metadata": {"engine_steps": steps, "engine_step_ms": step_ms},
        }))
        .send()
        .await
        .expect("POST /v1/tasks");
    assert_eq!(response.status(), reqwest::StatusCode::ACCEPTED);
    let task: serde_json::Value = response.json().await.expect("task JSON");
    task["id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("task id")
}

/// Reads a task over HTTP (`GET /v1/tasks/{id}`).
pub async fn get_task(addr: SocketAddr, id: TaskId) -> serde_json::Value {
    let response = reqwest::get(format!("http://{addr}/v1/tasks/{id}"))
        .await
        .expect("GET /v1/tasks/{id}");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    response.json().await.expect("task JSON")
}

/// Polls the task's events until `done` holds (bounded), returning them.
pub async fn wait_events(
    store: &dyn Store,
    id: TaskId,
    what: &str,
    done: impl Fn(&[Event]) -> bool,
) -> Vec<Event> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let events = store
            .list_events(DEFAULT_TENANT, id, 0, 10_000)
            .await
            .expect("events");
        if done(&events) {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; events so far: {:?}",
            events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn count(events: &[Event], kind: &str) -> usize {
    events.iter().filter(|e| e.kind == kind).count()
}

/// A simulator serving a scenario file (tools slowed as asked), and the settings that point a
/// child `cairn serve` at it: [`FAST_LEASES`], the simulated model, and a tools file listing
/// the scenario's tools.
pub struct SimStack {
    pub sim: cairn::sim::SimServer,
    tools_file: String,
    _dir: tempfile::TempDir,
}

impl SimStack {
    /// `scenarios/<file>` with `latency_ms` on every tool `slow` names.
    pub async fn start(file: &str, slow: &[&str], latency_ms: u64) -> SimStack {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(file);
        let mut scenario = cairn::sim::Scenario::load(&path).expect("scenario");
        for tool in scenario
            .tools
            .iter_mut()
            .filter(|t| slow.contains(&t.name.as_str()))
        {
            tool.latency_ms = Some(latency_ms);
        }
        let sim = cairn::sim::SimServer::start(scenario, "127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("simulator");
        let dir = tempfile::tempdir().expect("tempdir");
        let tools_file = dir.path().join("tools.json");
        let specs: Vec<_> = sim.registry().specs().cloned().collect();
        std::fs::write(
            &tools_file,
            serde_json::json!({ "tools": specs }).to_string(),
        )
        .expect("tools file");
        SimStack {
            sim,
            tools_file: tools_file.display().to_string(),
            _dir: dir,
        }
    }

    pub fn env(&self) -> Vec<(&str, &str)> {
        let mut env: Vec<(&str, &str)> = FAST_LEASES.to_vec();
        env.extend([
            ("CAIRN_LLM_DEFAULT_BASE_URL", self.sim.base_url()),
            ("CAIRN_LLM_DEFAULT_MODEL", "cairn-sim"),
            ("CAIRN_TOOLS_FILE", self.tools_file.as_str()),
        ]);
        env
    }
}

/// `cairn keys create` for tenant `default` in the SQLite file `sqlite` before a server starts
/// on it: a store holding a key ends dev mode, so the server enforces authentication as in
/// production. Returns the key.
pub async fn create_key(sqlite: &std::path::Path, scopes: &str, name: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["keys", "create", "--tenant", "default"])
        .args(["--scopes", scopes, "--name", name])
        .env_remove("DATABASE_URL")
        .env_remove("CAIRN_DATABASE_URL")
        .env_remove("CAIRN_CONFIG")
        .env("CAIRN_SQLITE_PATH", sqlite)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run cairn keys create");
    assert!(
        output.status.success(),
        "cairn keys create failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}
