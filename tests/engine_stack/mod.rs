//! The whole in-process stack for engine tests through the HTTP API: a simulator serving a
//! scenario file, the v2 engine over the real LLM and tool clients pointed at it, a worker
//! pool, and `cairn::http::serve` on 127.0.0.1:0, all over one fresh store.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn::clock::{Clock, SystemClock};
use cairn::config::Config;
use cairn::domain::price::{ModelPrices, Prices, Pricing, PurposeModels, TokenPrice};
use cairn::domain::settings::EngineSettings;
use cairn::engine::planner::V2Engine;
use cairn::engine::runtime::adapters::{ClientTools, LlmModels};
use cairn::http::AppState;
use cairn::llm::{Endpoints, LlmClient, RetryPolicy};
use cairn::meters::Meters;
use cairn::sim::SimServer;
use cairn::store::Store;
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;
use cairn::tools::{StoreReceipts, ToolClient};
use cairn::wiring::metered::{MeteredModels, MeteredTools};
use cairn::worker::WorkerPool;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::common::{TestPg, TestSqlite};

pub mod proxy;

/// The database under a stack: a temp SQLite file, or a fresh Postgres database.
pub enum Db {
    Sqlite(TestSqlite),
    Postgres(TestPg),
}

/// A route to the simulator's model endpoint: given its base URL, the base URL to use.
pub type Via = Box<
    dyn FnOnce(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send>>
        + Send,
>;

/// Bounds every wait; only a failing test reaches it.
pub const WAIT: Duration = Duration::from_secs(60);

/// How a stack is set up beyond its scenario file.
pub struct Setup {
    /// A fresh Postgres database instead of a temp SQLite file.
    pub postgres: bool,
    /// The engine's settings; their `spend_caps` are the pool's and the API's too.
    pub settings: EngineSettings,
    /// The model calls' route ([`Stack::start_via`]).
    pub via: Option<Via>,
    pub clock: Arc<dyn Clock>,
    /// 0: no cap.
    pub max_running_per_tenant: u32,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            postgres: false,
            settings: EngineSettings::default(),
            via: None,
            clock: Arc::new(SystemClock),
            max_running_per_tenant: 0,
        }
    }
}

pub struct Stack {
    pub base: String,
    pub client: reqwest::Client,
    pub store: Arc<dyn Store>,
    pub sim: SimServer,
    pool: Option<WorkerPool>,
    stop: Option<oneshot::Sender<()>>,
    db: Option<Db>,
}

impl Stack {
    /// Starts everything for the scenario file `scenarios/<file>` on a temp SQLite file.
    pub async fn start(scenario: &str) -> Stack {
        Self::start_with(scenario, EngineSettings::default()).await
    }

    /// [`Stack::start`] with the engine's settings.
    pub async fn start_with(scenario: &str, settings: EngineSettings) -> Stack {
        let db = TestSqlite::create();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db.path).await.expect("sqlite"));
        Self::start_on(scenario, Db::Sqlite(db), store, settings).await
    }

    /// The same stack on a fresh Postgres database.
    pub async fn start_pg(scenario: &str) -> Stack {
        let db = TestPg::create().await;
        let store: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 8).await.expect("pg"));
        Self::start_on(scenario, Db::Postgres(db), store, EngineSettings::default()).await
    }

    /// The stack with the engine's model calls sent through `via` (a test's proxy, started
    /// with the simulator's base URL and answering with its own), on SQLite or Postgres.
    pub async fn start_via(
        scenario: &str,
        postgres: bool,
        settings: EngineSettings,
        via: Via,
    ) -> Stack {
        let setup = Setup {
            postgres,
            settings,
            via: Some(via),
            ..Setup::default()
        };
        Self::start_setup(scenario, setup).await
    }

    /// The stack as `setup` says.
    pub async fn start_setup(scenario: &str, setup: Setup) -> Stack {
        let (db, store): (Db, Arc<dyn Store>) = match setup.postgres {
            true => {
                let db = TestPg::create().await;
                let store = Arc::new(PgStore::connect(&db.url, 8).await.expect("pg"));
                (Db::Postgres(db), store)
            }
            false => {
                let db = TestSqlite::create();
                let store = Arc::new(SqliteStore::open(&db.path).await.expect("sqlite"));
                (Db::Sqlite(db), store)
            }
        };
        Self::start_routed(scenario, db, store, setup).await
    }

    async fn start_on(
        scenario: &str,
        db: Db,
        store: Arc<dyn Store>,
        settings: EngineSettings,
    ) -> Stack {
        let setup = Setup {
            settings,
            ..Setup::default()
        };
        Self::start_routed(scenario, db, store, setup).await
    }

    async fn start_routed(scenario: &str, db: Db, store: Arc<dyn Store>, setup: Setup) -> Stack {
        let Setup {
            settings,
            via,
            clock,
            max_running_per_tenant,
            ..
        } = setup;
        store.migrate().await.expect("migrate");
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(scenario);
        let sim = SimServer::start_file(&path, 0).await.expect("simulator");
        let mut endpoint = sim.llm_endpoint();
        if let Some(via) = via {
            endpoint.base_url = via(endpoint.base_url).await;
        }
        let llm = LlmClient::new(Endpoints::uniform(endpoint), RetryPolicy::default())
            .expect("llm client");
        let tools = ToolClient::new(
            sim.registry(),
            Some(Arc::new(StoreReceipts(store.clone()))),
            clock.clone(),
        );
        // What a money cap is checked against, as `cairn serve` resolves it: every purpose on
        // the simulator's model.
        let model = Some(sim.llm_endpoint().model);
        let pricing = Pricing {
            prices: settings.prices.clone(),
            models: PurposeModels {
                gate: model.clone(),
                strategic: model.clone(),
                tactical: model.clone(),
                verifier: model,
            },
        };
        // Every call counted, as `cairn serve` counts them, for the metrics test.
        let meters = Meters::new();
        let spend_caps = settings.spend_caps.clone();
        let engine = Arc::new(V2Engine::new(
            Arc::new(MeteredModels {
                inner: Arc::new(LlmModels::new(llm)),
                meters: meters.clone(),
            }),
            Arc::new(MeteredTools {
                inner: Arc::new(ClientTools::new(tools)),
                meters: meters.clone(),
            }),
            settings,
        ));
        let config = Config {
            poll_interval_ms: 100,
            workers: 2,
            max_running_per_tenant,
            ..Config::default()
        };
        let mut params = cairn::wiring::pool_params(
            &config,
            store.clone(),
            engine,
            clock.clone(),
            "engine-test".into(),
            meters.clone(),
        );
        params.spend_caps = spend_caps.clone();
        let pool = WorkerPool::start(params);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (stop, stopped) = oneshot::channel::<()>();
        let state = AppState::new(store.clone(), clock, config)
            .with_tools(sim.registry())
            .with_meters(meters)
            .with_pricing(pricing)
            .with_spend_caps(spend_caps);
        tokio::spawn(cairn::http::serve(listener, state, async move {
            let _ = stopped.await;
        }));
        Stack {
            base,
            client: reqwest::Client::new(),
            store,
            sim,
            pool: Some(pool),
            stop: Some(stop),
            db: Some(db),
        }
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header("accept", "application/json")
            .send()
            .await
            .expect("GET");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Submits a task and returns its id.
    pub async fn submit(&self, goal: &str, strategy: &str, tokens: u64) -> String {
        let response = self
            .client
            .post(format!("{}/v1/tasks", self.base))
            .json(&json!({"goal": goal, "strategy": strategy,
                          "budget": {"tokens": tokens, "tool_calls": 100, "wall_ms": 600_000}}))
            .send()
            .await
            .expect("POST /v1/tasks");
        assert_eq!(response.status().as_u16(), 202, "task accepted");
        let body: Value = response.json().await.expect("task json");
        body["id"].as_str().expect("task id").to_string()
    }

    /// Posts `body` to `/v1/tasks`: the status and the answer.
    pub async fn post_task(&self, body: &Value) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}/v1/tasks", self.base))
            .json(body)
            .send()
            .await
            .expect("POST /v1/tasks");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Polls the task until it is terminal.
    pub async fn finished(&self, id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let (_, task) = self.get(&format!("/v1/tasks/{id}")).await;
            if matches!(
                task["status"].as_str(),
                Some("succeeded" | "failed" | "budget_exhausted" | "cancelled")
            ) {
                return task;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {id} never ended: {task:#}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The data of a task's events of one kind, in order.
    pub async fn events_of(&self, id: &str, kind: &str) -> Vec<Value> {
        self.events(id)
            .await
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["data"].clone())
            .collect()
    }

    /// Every event of a task, through the API's JSON pages.
    /// Calls the simulator's tool `tool` answered (0 when never called).
    pub fn tool_calls(&self, tool: &str) -> u64 {
        self.sim.stats().tools.get(tool).map_or(0, |t| t.calls)
    }

    pub async fn events(&self, id: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let (status, page) = self
                .get(&format!("/v1/tasks/{id}/events?after={after}"))
                .await;
            assert_eq!(status, 200, "{page}");
            let items = page["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                return out;
            }
            after = items
                .last()
                .and_then(|e| e["seq"].as_i64())
                .unwrap_or(after);
            out.extend(items);
        }
    }

    /// The Postgres database's URL, for a look at the rows (none on SQLite).
    pub fn pg_url(&self) -> Option<&str> {
        match &self.db {
            Some(Db::Postgres(db)) => Some(&db.url),
            _ => None,
        }
    }

    pub async fn stop(mut self) {
        if let Some(pool) = self.pool.take() {
            pool.shutdown(Duration::from_secs(5)).await;
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(Db::Postgres(db)) = self.db.take() {
            drop(self.store);
            db.drop_database().await;
        }
    }
}

/// The reasons of a task's plan versions, in order, from `GET /v1/tasks/{id}/plans`.
pub fn plan_reasons(plans: &Value) -> Vec<String> {
    plans["items"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| v["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The price table of the money tests: 1 micro-unit per prompt token, 4 per answer token, 100
/// per tool call.
pub const PRICE: TokenPrice = TokenPrice {
    input: 1_000_000,
    output: 4_000_000,
};
pub const TOOL_PRICE: u64 = 100;

pub fn priced() -> EngineSettings {
    // The scenario's tools and the two every simulator serves besides.
    let tools = ["search", "edit_file", "run", "lookup", "write_note"]
        .into_iter()
        .map(|t| (t.to_string(), TOOL_PRICE))
        .collect();
    EngineSettings {
        prices: Prices {
            currency: "USD".into(),
            models: ModelPrices {
                gate: Some(PRICE),
                strategic: Some(PRICE),
                tactical: Some(PRICE),
                verifier: Some(PRICE),
            },
            tools,
        },
        ..EngineSettings::default()
    }
}
