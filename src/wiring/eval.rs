//! `cairn eval` composed: the matrix through the real service path (store, worker pool, the one
//! engine dispatch, HTTP), with the simulated world as every strategy's model and tools.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::domain::settings::EngineSettings;
use crate::engine::baselines::BaselineConfig;
use crate::engine::dispatch::{Dispatch, Engines};
use crate::engine::rollout::Rollout;
use crate::eval::report::Report;
use crate::eval::runner::{self, EvalError, EvalParams};
use crate::eval::suite::Suite;
use crate::eval::world::World;
use crate::http::{AppState, HttpSettings};
use crate::worker::{PoolParams, WorkerPool};

/// The dispatch of an evaluation: every strategy's engine over the world. The world is its
/// own sandbox, so shadow copies (none are submitted) would run over it too; `auto` always
/// goes through the gate and v2 (rollout 100%).
pub fn matrix(world: Arc<World>) -> Dispatch {
    let engines = || {
        Engines::new(
            world.clone(),
            world.clone(),
            EngineSettings::default(),
            BaselineConfig::default(),
        )
    };
    Dispatch::new(engines(), engines(), Arc::new(Rollout::default()))
}

/// `cairn eval` end to end: runs the matrix, writes the reports, prints the summary.
pub async fn evaluate(params: &EvalParams) -> Result<Report, EvalError> {
    let suite = Suite::load(&params.suite)?;
    std::fs::create_dir_all(&params.out).map_err(|e| EvalError::Io(e.to_string()))?;
    let store = runner::open_store(params).await?;
    let world = Arc::new(World::new(Arc::new(suite.clone()), store.clone()));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let pool = WorkerPool::start(PoolParams {
        store: store.clone(),
        engine: Arc::new(matrix(world.clone())),
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
    let state = AppState::new(store.clone(), clock, HttpSettings::default());
    let http = tokio::spawn(crate::http::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let base = format!("http://{addr}");
    let outcome = runner::drive(params, &suite, &world, &store, &base).await;
    let _ = stop.send(());
    pool.shutdown(Duration::from_secs(5)).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), http).await;
    runner::conclude(params, &suite, &outcome?)
}
