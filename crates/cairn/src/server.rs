//! The `cairn serve` lifecycle, as a library function so `main` stays a thin CLI.
//!
//! Start-up: open the store the config names (Postgres, or the embedded SQLite file whose path
//! is printed), apply migrations, bind the listener (port 0 works; the bound address is
//! printed as `cairn: listening on http://ADDR`, which scripts and tests parse), then start the
//! reaper (its first pass resumes tasks of a crashed process), the worker pool and HTTP.
//!
//! Shutdown, when the `shutdown` future resolves (SIGINT/SIGTERM in the binary): stop claiming,
//! let in-flight engines reach a durable point within `shutdown_grace_ms`, release their leases,
//! stop the reaper, then stop HTTP. HTTP goes last so clients still see the `task.released`
//! events; live SSE streams are ended by the HTTP layer's own shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::meters::Meters;
use crate::store::{self, Backend, Store, StoreError};
use crate::wiring::Wired;
use crate::worker::{Reaper, ReaperParams, WorkerPool, claim_node};

/// Prefix of the line that announces the bound address.
pub const LISTENING_PREFIX: &str = "cairn: listening on http://";

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP server failed: {0}")]
    Http(std::io::Error),
    /// The engine could not be built from the configuration (a model endpoint, a tools file).
    #[error("cannot start the engine: {0}")]
    Engine(#[from] crate::wiring::WiringError),
    /// Serving would expose the API without authentication (see `crate::http::auth`).
    #[error(transparent)]
    Auth(#[from] crate::http::auth_start::AuthStartError),
}

/// Opens and migrates the configured store; what `cairn migrate` does and `serve` starts with.
pub async fn open_migrated(config: &Config) -> Result<Arc<dyn Store>, ServeError> {
    let store = store::open(&config.store()).await?;
    store.migrate().await?;
    if store.backend() == Backend::Sqlite {
        println!(
            "cairn: embedded SQLite database at {}",
            display_path(&config.sqlite_path).display()
        );
    }
    Ok(store)
}

/// Runs `cairn serve` until `shutdown` resolves, then stops cleanly (see the module docs).
/// Tasks run on the engines of [`crate::wiring::engine`] (one dispatch for every strategy).
pub async fn serve(
    config: Config,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let rollout = Arc::new(crate::engine::rollout::Rollout::new(
        config.rollout_percent,
        config.eval_report.clone(),
    ));
    let shared = rollout.clone();
    let planning = move |config: &Config, store: Arc<dyn Store>, meters: &Meters| {
        crate::wiring::engine(config, store, shared, meters).map_err(ServeError::Engine)
    };
    serve_with(config, planning, shutdown, rollout).await
}

/// [`serve`] with the engine built by `make_engine` once the store is open (an engine may read
/// history, such as gate statistics, from it). This is where the planning engine plugs in.
pub async fn serve_with(
    config: Config,
    make_engine: impl FnOnce(&Config, Arc<dyn Store>, &Meters) -> Result<Wired, ServeError>,
    shutdown: impl Future<Output = ()> + Send,
    rollout: Arc<crate::engine::rollout::Rollout>,
) -> Result<(), ServeError> {
    let store = open_migrated(&config).await?;
    let auth = crate::http::auth_start::start_mode(config.auth, config.listen_addr, store.as_ref())
        .await?;
    // This server's figures for `GET /metrics`: one registry, shared by all that records.
    let meters = Meters::new();
    let Wired {
        engine,
        tools,
        pricing,
    } = make_engine(&config, store.clone(), &meters)?;
    // MCP servers list their tools before the first request; one that is down is reported
    // (`GET /v1/tools`) and asked again in the background.
    tools.start().await;
    let models = crate::wiring::clients::model_probe(&config).map_err(ServeError::Engine)?;
    let listener = TcpListener::bind(config.listen_addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: config.listen_addr,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: config.listen_addr,
        source,
    })?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let node = crate::worker::node_id(config.node_id.as_deref(), &data_location(&config));
    // Held until this function returns: the proof that no other live process is this node.
    let (_node_lock, node) = claim_node(store.as_ref(), clock.as_ref(), &node).await?;
    let worker_id = crate::worker::worker_id(&node);

    let reaper = Reaper::start(ReaperParams {
        store: store.clone(),
        clock: clock.clone(),
        interval: Duration::from_millis(config.reaper_interval_ms),
        meters: meters.clone(),
    });
    let pool = WorkerPool::start(crate::wiring::pool_params(
        &config,
        store.clone(),
        engine,
        clock.clone(),
        worker_id.clone(),
        meters.clone(),
    ));
    let state = crate::http::AppState::new(store.clone(), clock, &config)
        .with_meters(meters)
        .with_tools(tools)
        .with_rollout(rollout)
        .with_auth(auth)
        .with_pricing(pricing)
        .with_spend_caps(config.spend_caps.resolve().unwrap_or_default());
    let state = match models {
        Some(probe) => state.with_model_probe(probe),
        None => state,
    };
    let http = Http::start(listener, state);
    println!("{LISTENING_PREFIX}{addr}");
    tracing::info!(%addr, %worker_id, backend = ?store.backend(), "cairn serving");

    shutdown.await;
    tracing::info!("shutting down: no new claims; waiting for in-flight tasks");
    let grace = Duration::from_millis(config.shutdown_grace_ms);
    let report = pool.shutdown(grace).await;
    reaper.stop().await;
    http.stop().await?;
    tracing::info!(drained = report.drained, "cairn stopped");
    Ok(())
}

/// What the default node id is derived from: where the data lives (the database URL without
/// its credentials, or the SQLite file's absolute path).
fn data_location(config: &Config) -> String {
    match &config.database_url {
        Some(url) => match reqwest::Url::parse(url.expose()) {
            Ok(mut url) => {
                let _ = url.set_password(None);
                let _ = url.set_username("");
                url.to_string()
            }
            Err(_) => "postgres".into(),
        },
        None => std::fs::canonicalize(&config.sqlite_path)
            .unwrap_or_else(|_| config.sqlite_path.clone())
            .display()
            .to_string(),
    }
}

/// The HTTP server task and the switch that stops it.
struct Http {
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Http {
    fn start(listener: TcpListener, state: crate::http::AppState) -> Http {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(crate::http::serve(listener, state, async move {
            let _ = stopped.await;
        }));
        Http { stop, handle }
    }

    /// Graceful, but bounded: a request that never finishes must not keep the process alive.
    async fn stop(self) -> Result<(), ServeError> {
        let _ = self.stop.send(());
        let mut handle = self.handle;
        match tokio::time::timeout(Duration::from_secs(5), &mut handle).await {
            Ok(Ok(result)) => result.map_err(ServeError::Http),
            Ok(Err(join)) => Err(ServeError::Http(std::io::Error::other(join.to_string()))),
            Err(_) => {
                tracing::warn!("HTTP connections still open after 5s; closing them");
                handle.abort();
                Ok(())
            }
        }
    }
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is *called* (inside a
/// runtime), not when it is first polled, so a signal sent right after start-up is never lost
/// to the default action (which would kill the process without releasing anything).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                }
                (Ok(mut only), Err(error)) | (Err(error), Ok(mut only)) => {
                    tracing::warn!(%error, "cannot listen for one of SIGINT/SIGTERM");
                    only.recv().await;
                }
                (Err(error), Err(_)) => {
                    tracing::error!(%error, "cannot listen for signals; stop cairn with SIGKILL");
                    std::future::pending::<()>().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The absolute path where possible, so the printed location is unambiguous.
fn display_path(path: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
