//! `cairn eval`: the experiment matrix through the real service path.
//!
//! In one process: a store (a fresh SQLite file under the output directory, or the Postgres
//! database given), the worker pool running the real engines, the HTTP API on 127.0.0.1:0,
//! and the simulated [`World`] as the model and tool endpoints. Every (task, strategy,
//! repeat) is submitted with `POST /v1/tasks` and followed with `GET /v1/tasks/{id}` until
//! it is terminal; then the world's acceptance check decides verified success.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::report::Record;
use super::suite::{Suite, SuiteError};
use super::world::{META_KEY, World};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::domain::task::{Strategy, Task};
use crate::engine::strategies::{BaselineConfig, OneShotEngine, Ports, ReactiveEngine, V1Engine};
use crate::engine::v2::{V2Config, V2Engine};
use crate::engine::{Engine, EngineError, RunContext, RunOutcome};
use crate::store::{Store, StoreError};
use crate::worker::{PoolParams, WorkerPool};

/// What `cairn eval` was asked to do.
#[derive(Debug, Clone)]
pub struct EvalParams {
    pub suite: PathBuf,
    pub strategies: Vec<Strategy>,
    pub repeat: u32,
    pub out: PathBuf,
    /// Postgres URL; `None` uses a fresh SQLite file under `out`.
    pub database_url: Option<String>,
    pub workers: usize,
    /// Print one line per finished run.
    pub progress: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Suite(#[from] SuiteError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Io(String),
    #[error("HTTP API: {0}")]
    Api(String),
    #[error("strategy {0:?} cannot be evaluated (use one_shot, reactive, v1, v2, auto)")]
    Strategy(String),
}

/// Parses `one_shot,reactive,v1,v2`.
pub fn parse_strategies(list: &str) -> Result<Vec<Strategy>, EvalError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| {
            serde_json::from_value::<Strategy>(json!(name))
                .ok()
                .filter(|s| *s != Strategy::Direct)
                .ok_or_else(|| EvalError::Strategy(name.to_string()))
        })
        .collect()
}

/// The engines of the matrix behind one dispatcher, all talking to the same world.
pub struct MatrixEngine {
    one_shot: OneShotEngine,
    reactive: ReactiveEngine,
    v1: V1Engine,
    v2: V2Engine,
}

impl MatrixEngine {
    pub fn new(world: Arc<World>) -> Self {
        let ports = Ports {
            models: world.clone(),
            tools: world.clone(),
            config: BaselineConfig::default(),
        };
        MatrixEngine {
            one_shot: OneShotEngine::new(ports.clone()),
            reactive: ReactiveEngine::new(ports.clone()),
            v1: V1Engine::new(ports),
            v2: V2Engine::new(world.clone(), world, V2Config::default()),
        }
    }
}

#[async_trait]
impl Engine for MatrixEngine {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        match ctx.task.strategy {
            Strategy::OneShot => self.one_shot.run(ctx).await,
            Strategy::Reactive => self.reactive.run(ctx).await,
            Strategy::V1 => self.v1.run(ctx).await,
            Strategy::V2 | Strategy::Direct | Strategy::Auto => self.v2.run(ctx).await,
        }
    }
}

/// One submitted run.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Submitted {
    task: String,
    strategy: Strategy,
    repeat: u32,
    id: uuid::Uuid,
}

/// Runs the matrix and returns one record per run (the reports are written by the caller).
pub async fn run(params: &EvalParams) -> Result<(Suite, Vec<Record>), EvalError> {
    let suite = Suite::load(&params.suite)?;
    std::fs::create_dir_all(&params.out).map_err(|e| EvalError::Io(e.to_string()))?;
    let store = open_store(params).await?;
    let world = Arc::new(World::new(Arc::new(suite.clone()), store.clone()));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let pool = WorkerPool::start(PoolParams {
        store: store.clone(),
        engine: Arc::new(MatrixEngine::new(world.clone())),
        clock: clock.clone(),
        worker_id: "cairn-eval".into(),
        workers: params.workers.max(1),
        lease_ttl: Duration::from_secs(30),
        heartbeat: Duration::from_secs(5),
        poll_interval: Duration::from_millis(50),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| EvalError::Io(e.to_string()))?;
    let addr = listener
        .local_addr()
        .map_err(|e| EvalError::Io(e.to_string()))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = crate::app::AppState::new(store.clone(), clock, Config::default());
    let http = tokio::spawn(crate::app::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let base = format!("http://{addr}");
    let outcome = drive(params, &suite, &world, &store, &base).await;
    let _ = stop.send(());
    pool.shutdown(Duration::from_secs(5)).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), http).await;
    outcome.map(|records| (suite, records))
}

async fn open_store(params: &EvalParams) -> Result<Arc<dyn Store>, EvalError> {
    let store: Arc<dyn Store> = match &params.database_url {
        Some(url) => Arc::new(crate::store::postgres::PgStore::connect(url, 8).await?),
        None => {
            let path = params.out.join("eval.db");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            Arc::new(crate::store::sqlite::SqliteStore::open(&path).await?)
        }
    };
    store.migrate().await?;
    Ok(store)
}

async fn drive(
    params: &EvalParams,
    suite: &Suite,
    world: &World,
    store: &Arc<dyn Store>,
    base: &str,
) -> Result<Vec<Record>, EvalError> {
    let http = reqwest::Client::new();
    let mut submitted = Vec::new();
    for repeat in 0..params.repeat.max(1) {
        for task in &suite.tasks {
            for strategy in &params.strategies {
                let body = json!({
                    "goal": task.goal,
                    "strategy": strategy,
                    "budget": {"tokens": task.budget_tokens, "tool_calls": 60, "wall_ms": 120_000},
                    "metadata": {META_KEY: {"task": task.id, "repeat": repeat, "suite": suite.name}},
                });
                let created: Task = send(http.post(format!("{base}/v1/tasks")).json(&body)).await?;
                submitted.push(Submitted {
                    task: task.id.clone(),
                    strategy: *strategy,
                    repeat,
                    id: created.id,
                });
            }
        }
    }
    let total = submitted.len();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    let mut records: BTreeMap<usize, Record> = BTreeMap::new();
    while records.len() < total {
        if Instant::now() > deadline {
            return Err(EvalError::Api(format!(
                "{} of {total} runs still unfinished after 600 s",
                total - records.len()
            )));
        }
        for (index, run) in submitted.iter().enumerate() {
            if records.contains_key(&index) {
                continue;
            }
            let task: Task = send(http.get(format!("{base}/v1/tasks/{}", run.id))).await?;
            if !task.status.is_terminal() {
                continue;
            }
            let Some(suite_task) = suite.task(&run.task) else {
                continue;
            };
            // A planned task has no answer of its own: what it found is in its artifacts.
            let artifacts = store.list_artifacts(task.id).await?;
            let found = Value::Array(artifacts.into_iter().map(|a| a.value).collect());
            let record =
                Record::from_run(suite_task, run.strategy, run.repeat, &task, world, &found);
            if params.progress {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(
                    out,
                    "[{:>4}/{total}] {:<24} {:<9} #{} {:<16} verified={} tokens={}",
                    records.len() + 1,
                    run.task,
                    run.strategy.as_str(),
                    run.repeat,
                    task.status.as_str(),
                    record.verified,
                    record.tokens
                );
            }
            records.insert(index, record);
        }
        if records.len() < total {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(records.into_values().collect())
}

async fn send<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
) -> Result<T, EvalError> {
    let response = request
        .send()
        .await
        .map_err(|e| EvalError::Api(e.to_string()))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|e| EvalError::Api(e.to_string()))?;
    if !status.is_success() {
        return Err(EvalError::Api(format!("{status}: {body}")));
    }
    serde_json::from_value(body).map_err(|e| EvalError::Api(e.to_string()))
}

/// Writes `report.md`, `report.json` and `chart.svg` under `out`; returns the Markdown.
pub fn write_reports(
    out: &Path,
    suite: &Suite,
    params: &EvalParams,
    records: &[Record],
) -> Result<String, EvalError> {
    let report = super::report::Report::build(suite, &params.strategies, params.repeat, records);
    let io = |e: std::io::Error| EvalError::Io(e.to_string());
    let json = serde_json::to_string_pretty(&report).map_err(|e| EvalError::Io(e.to_string()))?;
    std::fs::write(out.join("report.json"), json).map_err(io)?;
    let markdown = report.markdown();
    std::fs::write(out.join("report.md"), &markdown).map_err(io)?;
    std::fs::write(out.join("chart.svg"), report.svg()).map_err(io)?;
    Ok(markdown)
}

/// `cairn eval` end to end: runs the matrix, writes the reports, prints the summary.
pub async fn evaluate(params: &EvalParams) -> Result<super::report::Report, EvalError> {
    let (suite, records) = run(params).await?;
    let report = super::report::Report::build(&suite, &params.strategies, params.repeat, &records);
    write_reports(&params.out, &suite, params, &records)?;
    if params.progress {
        println!("\n{}", report.markdown());
        println!(
            "cairn eval: reports written to {}",
            params.out.join("report.md").display()
        );
    }
    Ok(report)
}
