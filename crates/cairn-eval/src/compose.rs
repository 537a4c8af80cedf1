//! `cairn eval` composed: the matrix through the real service path (store, worker pool, the one
//! engine dispatch, HTTP), with the simulated world as every strategy's tools (behind the
//! receipts a deployment's tool client keeps) and, unless the run is live, its model.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::EvalError;
use crate::report::Report;
use crate::resume::RunLog;
use crate::routed::Routed;
use crate::runner::{self, EvalParams, LiveModel, Owed};
use crate::sweep::{Sweep, SweepPoint, SweepReport};
use crate::trace::{self, Tracing};
use crate::world::World;
use cairn::clock::{Clock, SystemClock};
use cairn::config::{Config, ConfigError};
use cairn::domain::settings::EngineSettings;
use cairn::engine::baselines::BaselineConfig;
use cairn::engine::dispatch::{Dispatch, Engines};
use cairn::engine::rollout::Rollout;
use cairn::engine::runtime::adapters::LlmModels;
use cairn::engine::runtime::ports::{ModelPort, ToolPort};
use cairn::engine::runtime::receipted::Receipted;
use cairn::http::{AppState, HttpSettings};
use cairn::llm::{Endpoints, LlmClient, LlmError, Purpose};
use cairn::meters::Meters;
use cairn::tools::{ReceiptStore, StoreReceipts};
use cairn::worker::{PoolParams, WorkerPool};

/// The dispatch of an evaluation: every strategy's engine over the world's `tools`. The world
/// is its own sandbox, so shadow copies (none are submitted) would run over it too; `auto`
/// always goes through the gate and v2 (rollout 100%).
pub fn matrix(
    tools: Arc<dyn ToolPort>,
    models: Arc<dyn ModelPort>,
    settings: EngineSettings,
) -> Dispatch {
    let engines = || {
        Engines::new(
            models.clone(),
            tools.clone(),
            settings.clone(),
            BaselineConfig::default(),
        )
    };
    Dispatch::new(engines(), engines(), Arc::new(Rollout::default()))
}

/// `cairn eval` end to end: runs the matrix, writes the reports, prints the summary.
pub async fn evaluate(params: &EvalParams) -> Result<Report, EvalError> {
    let suite = runner::load_suite(params)?;
    std::fs::create_dir_all(&params.out).map_err(EvalError::io(params.out.display()))?;
    let store = runner::open_store(params).await?;
    let receipted = runner::tool_receipts(params)?;
    let (log, done) = RunLog::open(
        &params.out,
        &runner::runs_meta(params, &suite, receipted),
        params.resume,
    )?;
    let world = World::new(Arc::new(suite.clone()), store.clone());
    let Models {
        world,
        models,
        traced,
    } = models_of(params, world)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // The world's tools behind the receipts a deployment's tool client keeps: an identical
    // side-effecting call (a repair or replan re-listing a done write) is performed once.
    // Runs recorded before that go on without them.
    let tools: Arc<dyn ToolPort> = if receipted {
        let receipts: Arc<dyn ReceiptStore> = Arc::new(StoreReceipts(store.clone()));
        Arc::new(Receipted::new(world.clone(), receipts, clock.clone()))
    } else {
        world.clone()
    };
    let pool = WorkerPool::start(PoolParams {
        store: store.clone(),
        engine: Arc::new(matrix(tools, models, params.engine_settings())),
        clock: clock.clone(),
        worker_id: "cairn-eval".into(),
        workers: params.workers.max(1),
        max_running_per_tenant: None,
        lease_ttl: Duration::from_secs(30),
        heartbeat: Duration::from_secs(5),
        poll_interval: Duration::from_millis(50),
        meters: Meters::new(),
        spend_caps: Default::default(),
    });
    let api = Api::serve(AppState::new(store.clone(), clock, runner_settings())).await?;
    let owed = Owed {
        done: &done,
        log: &log,
    };
    let outcome = crate::drive::drive(params, &suite, &world, &store, &api.base, owed).await;
    let _ = api.stop.send(());
    pool.shutdown(Duration::from_secs(5)).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), api.http).await;
    if traced.is_some() {
        trace::conclude(&params.out).map_err(EvalError::io("the live trace"))?;
    }
    let records = runner::in_matrix_order(params, &suite, done, outcome?);
    runner::conclude(params, &suite, &records)
}

/// The model every run asks, and the world it plays in.
struct Models {
    world: Arc<World>,
    models: Arc<dyn ModelPort>,
    /// The live model's judge, when the run is live.
    traced: Option<Arc<Tracing>>,
}

/// The world as the model of a simulated run; a live run's model (for every purpose or the
/// routed ones) behind the judge of every real answer against the ground truth (trace.jsonl,
/// slips.md).
fn models_of(params: &EvalParams, world: World) -> Result<Models, EvalError> {
    let Some(live) = &params.live else {
        let world = Arc::new(world);
        return Ok(Models {
            world: world.clone(),
            models: world,
            traced: None,
        });
    };
    let world = Arc::new(world.with_described_tools());
    let traced = Tracing::new(live.models.clone(), world.clone())
        .logged(&params.out, params.resume)
        .map_err(EvalError::io("the live trace"))?;
    let traced = Arc::new(traced);
    let models: Arc<dyn ModelPort> = match &live.live_for {
        Some(purposes) => Arc::new(Routed {
            live: traced.clone(),
            world: world.clone(),
            live_for: purposes.clone(),
        }),
        None => traced.clone(),
    };
    Ok(Models {
        world,
        models,
        traced: Some(traced),
    })
}

/// The HTTP settings of the evaluation's own API: the only client is the runner, which polls
/// every run ten times a second, so no client limit applies.
fn runner_settings() -> HttpSettings {
    HttpSettings {
        limits: cairn::http::HttpLimits::without_client_limits(),
        ..HttpSettings::default()
    }
}

/// The API the runner submits to, on a free local port until `stop` is sent.
struct Api {
    base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    http: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Api {
    async fn serve(state: AppState) -> Result<Api, EvalError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(EvalError::io("the evaluation's API port"))?;
        let addr = listener
            .local_addr()
            .map_err(EvalError::io("the evaluation's API port"))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let http = tokio::spawn(cairn::http::serve(listener, state, async move {
            let _ = stopped.await;
        }));
        Ok(Api {
            base: format!("http://{addr}"),
            stop,
            http,
        })
    }
}

/// `cairn eval --sweep PARAM=V1,V2,..`: the whole evaluation once per value (each under
/// `out/PARAM-VALUE/`), then `sweep.md`, `sweep.json` and `sweep.svg` under `out`.
pub async fn sweep(params: &EvalParams, sweep: &Sweep) -> Result<SweepReport, EvalError> {
    std::fs::create_dir_all(&params.out).map_err(EvalError::io(params.out.display()))?;
    let mut points = Vec::new();
    let mut suite_name = String::new();
    for value in &sweep.values {
        let mut at = params.clone();
        at.out = params.out.join(format!("{}-{value}", sweep.param.as_str()));
        at.overrides.push((sweep.param, *value));
        at.progress = false;
        let report = evaluate(&at).await?;
        if params.progress {
            println!(
                "cairn eval: {} = {value}: {}",
                sweep.param.as_str(),
                at.out.join("report.md").display()
            );
        }
        suite_name = report.suite.clone();
        points.push(SweepPoint::of(*value, &report));
    }
    let report = SweepReport {
        suite: suite_name,
        param: sweep.param,
        simulated: params.live.is_none(),
        points,
    };
    let json = serde_json::to_string_pretty(&report).map_err(EvalError::json("sweep.json"))?;
    for (name, text) in [
        ("sweep.json", json),
        ("sweep.md", report.markdown()),
        ("sweep.svg", report.svg()),
    ] {
        let path = params.out.join(name);
        std::fs::write(&path, text).map_err(EvalError::io(path.display()))?;
    }
    if params.progress {
        println!("\n{}", report.markdown());
    }
    Ok(report)
}

/// Why `cairn eval --live` cannot start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error(
        "--live needs a model: set CAIRN_LLM_DEFAULT_BASE_URL and CAIRN_LLM_DEFAULT_MODEL (or \
         [llm.default] in the file given with --config); scripts/run-local.sh shows a local one"
    )]
    NoModel,
    #[error(transparent)]
    Client(#[from] LlmError),
}

/// The model of `cairn eval --live`: the configured endpoints (`CAIRN_LLM_*`, or the config
/// file), each run given `run_wall_ms` of wall-clock budget, and the configured engine
/// settings (`CAIRN_ENGINE_*`: e.g. `CAIRN_ENGINE_MAX_PARALLEL=1` for a model that serves one
/// call at a time).
pub fn live_model(config_file: Option<&Path>, run_wall_ms: u64) -> Result<LiveModel, LiveError> {
    let config = Config::from_process_env(config_file)?;
    let endpoints = Endpoints::from_config(&config.llm)
        .map_err(|_| LiveError::NoModel)?
        .ok_or(LiveError::NoModel)?;
    let mut models: Vec<String> = Purpose::ALL
        .into_iter()
        .filter_map(|p| endpoints.get(p).map(|e| e.model.clone()))
        .collect();
    models.dedup();
    let model = if models.len() == 1 {
        models.concat()
    } else {
        Purpose::ALL
            .into_iter()
            .filter_map(|p| {
                endpoints
                    .get(p)
                    .map(|e| format!("{}={}", p.as_str(), e.model))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let client = LlmClient::new(endpoints, cairn::wiring::clients::retry_policy(&config))?;
    Ok(LiveModel {
        models: Arc::new(LlmModels::new(client)),
        model,
        run_wall_ms,
        engine: config.engine,
        live_for: None,
    })
}
