//! The production stack of `cairn serve` minus HTTP, for benchmarks: a fresh Postgres database,
//! the migrated `PgStore`, the reaper, the worker pool and the engine `cairn serve` selects
//! (v2 for `v2` tasks), with the model and tool ports replaced by in-process fakes.
//!
//! HTTP is left out on purpose: the peers are called in-process, and `POST /v1/tasks` does
//! nothing more than [`Store::create_task`], which tasks are submitted through here.
//! Bench code may panic: a benchmark that cannot set itself up has nothing to report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::clock::{Clock, SystemClock};
use cairn::config::{Config, Secret};
use cairn::domain::settings::EngineSettings;
use cairn::domain::task::{Budget, DEFAULT_TENANT, NewTask, Strategy, TaskId};
use cairn::engine::Engine;
use cairn::engine::baselines::BaselineConfig;
use cairn::engine::dispatch::{Dispatch, Engines};
use cairn::engine::minimal::MinimalEngine;
use cairn::engine::rollout::Rollout;
use cairn::engine::runtime::ports::{ModelPort, ToolPort};
use cairn::store::Store;
use cairn::worker::{Reaper, ReaperParams, WorkerPool, process_worker_id};
use sqlx::Connection;

/// A database created for one benchmark run, dropped by [`BenchDb::drop_database`].
pub struct BenchDb {
    admin: String,
    pub name: String,
    pub url: String,
}

impl BenchDb {
    /// `CAIRN_TEST_PG_URL` (the admin database) or the local Postgres.
    pub async fn create() -> BenchDb {
        let admin = std::env::var("CAIRN_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
        let name = format!("cairn_bench_{}", uuid::Uuid::now_v7().simple());
        let mut conn = sqlx::PgConnection::connect(&admin)
            .await
            .expect("connect to Postgres (127.0.0.1:5432 or CAIRN_TEST_PG_URL)");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create the benchmark database");
        let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
        BenchDb {
            url: format!("{base}/{name}"),
            name,
            admin,
        }
    }

    pub async fn drop_database(self) {
        if let Ok(mut conn) = sqlx::PgConnection::connect(&self.admin).await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .execute(&mut conn)
            .await;
        }
    }
}

/// The configuration `cairn serve` would run with on the database at `url` and `workers`
/// workers; everything else is the default.
/// `CAIRN_DB_COMMIT_WRITERS` in the environment sets the group-commit writers.
pub fn config(url: &str, workers: usize) -> Config {
    let defaults = Config::default();
    let writers = std::env::var("CAIRN_DB_COMMIT_WRITERS")
        .ok()
        .map(|w| w.parse().expect("CAIRN_DB_COMMIT_WRITERS: a whole number"))
        .unwrap_or(defaults.db_commit_writers);
    Config {
        database_url: Some(Secret::new(url.to_string())),
        workers,
        db_commit_writers: writers,
        ..defaults
    }
}

/// A running store + reaper + pool, wired as in `cairn::server::serve_with`.
pub struct Stack {
    pub store: Arc<dyn Store>,
    pool: WorkerPool,
    reaper: Reaper,
}

impl Stack {
    pub async fn start(
        config: &Config,
        models: Arc<dyn ModelPort>,
        tools: Arc<dyn ToolPort>,
    ) -> Stack {
        // As `cairn serve` does first thing (src/main.rs): jemalloc's background threads.
        let _ = tikv_jemalloc_ctl::background_thread::write(true);
        let store = cairn::server::open_migrated(config)
            .await
            .expect("open and migrate the store");
        // BENCH_SQL: statements run on the migrated database before anything starts, to
        // measure what a schema change would buy (e.g. without a foreign key) before making it.
        if let (Ok(sql), Some(url)) = (std::env::var("BENCH_SQL"), &config.database_url) {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(url.expose())
                .await
                .expect("connect for BENCH_SQL");
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .expect("BENCH_SQL");
            eprintln!("cairn bench: ran BENCH_SQL on the migrated database");
        }
        Self::start_on(config, store, models, tools)
    }

    /// Starts reaper and pool on an already open store (a "restarted process" in the
    /// recovery phase reuses nothing but the database).
    pub fn start_on(
        config: &Config,
        store: Arc<dyn Store>,
        models: Arc<dyn ModelPort>,
        tools: Arc<dyn ToolPort>,
    ) -> Stack {
        let engines = || {
            Engines::new(
                models.clone(),
                tools.clone(),
                EngineSettings::default(),
                BaselineConfig::default(),
            )
        };
        let engine: Arc<dyn Engine> = Arc::new(
            Dispatch::new(engines(), engines(), Arc::new(Rollout::default()))
                .with_test_engine(Arc::new(MinimalEngine::default())),
        );
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let reaper = Reaper::start(ReaperParams {
            store: store.clone(),
            clock: clock.clone(),
            interval: Duration::from_millis(config.reaper_interval_ms),
            meters: cairn::meters::Meters::new(),
        });
        let pool = WorkerPool::start(cairn::wiring::pool_params(
            config,
            store.clone(),
            engine,
            clock,
            process_worker_id(),
            cairn::meters::Meters::new(),
        ));
        Stack {
            store,
            pool,
            reaper,
        }
    }

    /// The clean stop of `cairn serve`.
    pub async fn shutdown(self) {
        self.pool.shutdown(Duration::from_secs(10)).await;
        self.reaper.stop().await;
    }

    /// As if the process died: loops aborted, nothing released, leases left to expire.
    pub async fn crash(self) {
        drop(self.pool);
        self.reaper.stop().await;
    }
}

/// Submits `count` tasks with strategy `v2` (the plan route, no gate call) and a budget far
/// above what they spend, so the ledger never stops them.
pub async fn submit(store: &dyn Store, count: usize) -> Vec<TaskId> {
    let clock = SystemClock;
    let mut ids = Vec::with_capacity(count);
    for n in 0..count {
        let new = NewTask {
            tools: None,
            id: uuid::Uuid::now_v7(),
            tenant_id: DEFAULT_TENANT.to_string(),
            goal: format!("benchmark task {n}: run the planned steps in order"),
            strategy: Strategy::V2,
            budget: Budget {
                tokens: 1_000_000,
                tool_calls: 10_000,
                wall_ms: 3_600_000,
                cost: None,
            },
            metadata: serde_json::json!({}),
            approval: Default::default(),
        };
        let created = store
            .create_task(new, None, clock.now())
            .await
            .expect("create task");
        ids.push(created.task.id);
    }
    ids
}

/// Task counts by status, read straight from the table (one cheap query per poll).
pub struct Tally {
    pub terminal: i64,
    pub succeeded: i64,
    pub running: i64,
}

/// A one-connection pool for the benchmark's own reads, apart from the store's pool.
pub async fn observer(db: &BenchDb) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&db.url)
        .await
        .expect("observer connection")
}

pub async fn tally(observer: &sqlx::PgPool) -> Tally {
    let (terminal, succeeded, running): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status NOT IN ('queued', 'running')), \
                count(*) FILTER (WHERE status = 'succeeded'), \
                count(*) FILTER (WHERE status = 'running') FROM tasks",
    )
    .fetch_one(observer)
    .await
    .expect("tally tasks");
    Tally {
        terminal,
        succeeded,
        running,
    }
}

/// Polls until `done(tally)` holds, every `every`, for at most `limit`; returns when it held.
pub async fn wait_until(
    observer: &sqlx::PgPool,
    every: Duration,
    limit: Duration,
    what: &str,
    done: impl Fn(&Tally) -> bool,
) -> Instant {
    let started = Instant::now();
    loop {
        if done(&tally(observer).await) {
            return Instant::now();
        }
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(every).await;
    }
}

/// Events of one kind in the whole database.
pub async fn count_events(observer: &sqlx::PgPool, kind: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM events WHERE kind = $1")
        .bind(kind)
        .fetch_one(observer)
        .await
        .expect("count events")
}

/// The transactions that wrote this database's event rows: each row's `xmin` is the id of
/// the transaction that inserted it, so this counts write transactions exactly, in this
/// database only (every cairn transition writes at least one event).
pub async fn event_transactions(observer: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(DISTINCT xmin::text) FROM events")
        .fetch_one(observer)
        .await
        .expect("count event transactions")
}

/// The next transaction id the cluster will assign (read without taking one). Its growth over
/// a run counts every write transaction of the cluster, other databases' included.
pub async fn next_xid(observer: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
        .fetch_one(observer)
        .await
        .expect("read the next transaction id")
}

/// `url` with its host and port replaced by `relay`'s, TLS off (for [`super::wire`]).
pub fn through(url: &str, relay: std::net::SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// url");
    let (auth, path) = match rest.split_once('@') {
        Some((auth, hostpath)) => (format!("{auth}@"), hostpath),
        None => (String::new(), rest),
    };
    let path = path.split_once('/').map(|(_, p)| p).unwrap_or("");
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{scheme}://{auth}{relay}/{path}{sep}sslmode=disable")
}

/// The `host:port` of a postgres url (defaults to port 5432), resolved to an address.
pub fn upstream(url: &str) -> std::net::SocketAddr {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let hostpath = rest.rsplit_once('@').map(|(_, h)| h).unwrap_or(rest);
    let hostport = hostpath.split(['/', '?']).next().unwrap_or(hostpath);
    let hostport = if hostport.contains(':') {
        hostport.to_string()
    } else {
        format!("{hostport}:5432")
    };
    use std::net::ToSocketAddrs;
    hostport
        .to_socket_addrs()
        .expect("resolve the database host")
        .next()
        .expect("an address for the database host")
}
