//! Typed configuration: defaults < optional TOML file < `CAIRN_*` environment variables.
//!
//! A bad value is refused with the name of the variable (or file key) that carried it. Secrets
//! are held in [`Secret`], whose `Debug`, `Display` and `Serialize` never show the value.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use crate::llm::LlmEndpoint;
pub use crate::secret::Secret;

mod env;
mod limits;
pub mod prices;
mod sections;
pub mod spend;
mod validate;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    ParseFile { path: PathBuf, message: String },
    #[error("invalid value for {name}: {message}")]
    Invalid { name: String, message: String },
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The full configuration of `cairn serve` (and of the other subcommands that need a store).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the HTTP API listens on.
    pub listen_addr: SocketAddr,
    /// `postgres://...` to run on Postgres; `None` runs on the embedded SQLite file.
    pub database_url: Option<Secret>,
    /// The SQLite file used when no `database_url` is set.
    pub sqlite_path: PathBuf,
    /// Worker loops per process.
    pub workers: usize,
    /// This process's node identity, the prefix of its worker ids. A restarted process with the
    /// same node id requeues the tasks its dead predecessor held at once, instead of after
    /// their leases expire. Default: the host name and a hash of the data location.
    pub node_id: Option<String>,
    /// At most this many tasks of one tenant run at once, across every replica on the database
    /// (`CAIRN_MAX_RUNNING_PER_TENANT`); 0 means no cap. Enforced when a worker claims: a task
    /// of a tenant at its cap stays `queued` while workers run other tenants' tasks.
    pub max_running_per_tenant: u32,
    /// Lease length; a worker that stops heartbeating loses its task after this long.
    pub lease_ttl_ms: u64,
    /// Heartbeat period; well under `lease_ttl_ms`.
    pub heartbeat_ms: u64,
    /// How often the reaper requeues expired leases.
    pub reaper_interval_ms: u64,
    /// Idle workers poll this often even without a wake-up hint.
    pub poll_interval_ms: u64,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Keep-alive comment period on SSE streams.
    pub sse_keepalive_ms: u64,
    /// Largest page size for list endpoints.
    pub max_page_size: i64,
    /// How long shutdown waits for in-flight work to reach a durable point.
    pub shutdown_grace_ms: u64,
    /// Postgres connection pool size.
    pub db_max_connections: u32,
    /// How long a request waits for a pooled Postgres connection before it fails (503).
    pub db_acquire_timeout_ms: u64,
    /// Postgres group-commit writers: each applies the queued commits of its share of the
    /// tasks as one statement (see `store::postgres`).
    pub db_commit_writers: usize,
    /// The HTTP server's timeouts and connection, rate and stream limits (`[http]`).
    pub http: crate::http::HttpLimits,
    /// The budget of a task submitted without one (`[default_budget]`, `CAIRN_DEFAULT_BUDGET_*`);
    /// a submitted budget that leaves a unit out takes this one's.
    #[serde(deserialize_with = "crate::domain::task::budget_over_default")]
    pub default_budget: crate::domain::task::Budget,
    pub log_format: LogFormat,
    /// Tool registry file (TOML); none means no tools beyond the simulator's.
    pub tools_file: Option<PathBuf>,
    /// Share of `auto` tasks that run on v2 (the rest on v1), 0..=100; see the engine's rollout module.
    pub rollout_percent: u8,
    /// The `cairn eval` report.json a rollout increase is checked against.
    pub eval_report: Option<PathBuf>,
    /// Test-only: tasks carrying the minimal engine's tuning metadata (`engine_steps`) run on
    /// that scripted engine, so lifecycle tests can drive leases and crashes through the real
    /// binary cheaply. Off by default; never set it in production. Clients cannot reach it.
    pub test_minimal_engine: bool,
    /// `/readyz` also probes every configured model endpoint (`GET {base_url}/v1/models`, 2 s
    /// timeout) and answers 503 naming the purposes whose endpoint did not answer. Off by
    /// default; no effect when no model is configured (the simulator runs in-process).
    pub readyz_check_models: bool,
    /// Serve the web dashboard at `/` (`CAIRN_DASHBOARD`); its API calls are as authorised as
    /// any other client's.
    pub dashboard: bool,
    /// Put each model call's messages and answer on its trace span (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`); off by default, since prompts carry task data
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`, as the GenAI instrumentations name it).
    pub otel_capture_content: bool,
    /// With no model configured, every answer and tool call of the built-in simulator takes this
    /// long (`CAIRN_SIM_LATENCY_MS`, default 0): a demo where a task can be watched and
    /// cancelled while it runs.
    pub sim_latency_ms: u64,
    /// The shortest time between two listings of one MCP server's tools when its cache hint
    /// is shorter (`CAIRN_MCP_RELIST_MIN_MS`, default 30 s): a server that says "do not cache"
    /// is not asked every second.
    pub mcp_relist_min_ms: u64,
    /// How long one model call may take before it is retried (`CAIRN_LLM_TIMEOUT_MS`). A local
    /// model on a CPU writes a plan in minutes, a hosted one in seconds.
    pub llm_timeout_ms: u64,
    /// The planning engine's settings: reserve share, repair threshold and limits, parallel
    /// milestones per task, the gate's direct-route thresholds.
    pub engine: crate::domain::settings::EngineSettings,
    /// Model endpoints by purpose: `gate`, `strategic`, `tactical`, `verifier`. Missing purposes
    /// use `default`; with no endpoint at all, cairn runs against its built-in simulator.
    pub llm: BTreeMap<String, LlmEndpoint>,
    /// What model tokens and tool calls cost (`[prices]`): money as a budget unit.
    pub prices: prices::PriceTable,
    /// How much each tenant may spend per period (`[spend_caps]`); absent, no tenant is capped.
    pub spend_caps: spend::SpendCapTable,
    /// API key authentication (`CAIRN_AUTH`): `auto` (keys once the store holds one; until then
    /// dev mode on a loopback address, refusal to start on any other), `on`, or `off`.
    pub auth: crate::http::auth_start::AuthSetting,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen_addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: None,
            sqlite_path: PathBuf::from("cairn.db"),
            workers: 4,
            node_id: None,
            max_running_per_tenant: 0,
            lease_ttl_ms: 30_000,
            heartbeat_ms: 10_000,
            reaper_interval_ms: 5_000,
            poll_interval_ms: 1_000,
            max_body_bytes: 1024 * 1024,
            sse_keepalive_ms: 15_000,
            max_page_size: 100,
            shutdown_grace_ms: 10_000,
            db_max_connections: 16,
            db_acquire_timeout_ms: 2_000,
            db_commit_writers: crate::store::postgres::DEFAULT_COMMIT_WRITERS,
            http: crate::http::HttpLimits::default(),
            default_budget: crate::domain::task::Budget::DEFAULT,
            log_format: LogFormat::Text,
            tools_file: None,
            rollout_percent: 100,
            eval_report: None,
            test_minimal_engine: false,
            readyz_check_models: false,
            dashboard: true,
            otel_capture_content: false,
            sim_latency_ms: 0,
            mcp_relist_min_ms: 30_000,
            llm_timeout_ms: 120_000,
            engine: crate::domain::settings::EngineSettings::default(),
            llm: BTreeMap::new(),
            prices: prices::PriceTable::default(),
            spend_caps: spend::SpendCapTable::default(),
            auth: crate::http::auth_start::AuthSetting::Auto,
        }
    }
}

/// Environment variables read on top of the file, each mapped to one field.
pub const ENV_VARS: &[(&str, &str)] = &[
    ("CAIRN_LISTEN_ADDR", "listen_addr"),
    ("CAIRN_DATABASE_URL", "database_url"),
    ("CAIRN_SQLITE_PATH", "sqlite_path"),
    ("CAIRN_WORKERS", "workers"),
    ("CAIRN_NODE_ID", "node_id"),
    ("CAIRN_MAX_RUNNING_PER_TENANT", "max_running_per_tenant"),
    ("CAIRN_LEASE_TTL_MS", "lease_ttl_ms"),
    ("CAIRN_HEARTBEAT_MS", "heartbeat_ms"),
    ("CAIRN_REAPER_INTERVAL_MS", "reaper_interval_ms"),
    ("CAIRN_POLL_INTERVAL_MS", "poll_interval_ms"),
    ("CAIRN_MAX_BODY_BYTES", "max_body_bytes"),
    ("CAIRN_SSE_KEEPALIVE_MS", "sse_keepalive_ms"),
    ("CAIRN_MAX_PAGE_SIZE", "max_page_size"),
    ("CAIRN_SHUTDOWN_GRACE_MS", "shutdown_grace_ms"),
    ("CAIRN_DB_MAX_CONNECTIONS", "db_max_connections"),
    ("CAIRN_LOG_FORMAT", "log_format"),
    ("CAIRN_TOOLS_FILE", "tools_file"),
    ("CAIRN_ROLLOUT_PERCENT", "rollout_percent"),
    ("CAIRN_EVAL_REPORT", "eval_report"),
    ("CAIRN_TEST_MINIMAL_ENGINE", "test_minimal_engine"),
    ("CAIRN_READYZ_CHECK_MODELS", "readyz_check_models"),
    ("CAIRN_DASHBOARD", "dashboard"),
    (
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "otel_capture_content",
    ),
    ("CAIRN_SIM_LATENCY_MS", "sim_latency_ms"),
    ("CAIRN_MCP_RELIST_MIN_MS", "mcp_relist_min_ms"),
    ("CAIRN_LLM_TIMEOUT_MS", "llm_timeout_ms"),
    ("CAIRN_ENGINE_RESERVE_FRAC", "engine.reserve_frac"),
    ("CAIRN_ENGINE_REPAIR_AT", "engine.pressure_frac"),
    ("CAIRN_ENGINE_MAX_PARALLEL", "engine.max_parallel"),
    ("CAIRN_ENGINE_EXPLORE_REPEATS", "engine.explore_repeats"),
    ("CAIRN_DB_ACQUIRE_TIMEOUT_MS", "db_acquire_timeout_ms"),
    ("CAIRN_DB_COMMIT_WRITERS", "db_commit_writers"),
    ("CAIRN_AUTH", "auth"),
    ("CAIRN_DEFAULT_BUDGET_TOKENS", "default_budget.tokens"),
    (
        "CAIRN_DEFAULT_BUDGET_TOOL_CALLS",
        "default_budget.tool_calls",
    ),
    ("CAIRN_DEFAULT_BUDGET_WALL_MS", "default_budget.wall_ms"),
    ("CAIRN_DEFAULT_BUDGET_COST", "default_budget.cost"),
    ("CAIRN_SPEND_CAP_PERIOD", "spend_caps.period"),
    ("CAIRN_SPEND_CAP_DEFAULT", "spend_caps.default"),
];

pub use limits::HTTP_ENV_VARS;

impl Config {
    /// Loads defaults, then `file` (if any), then the environment given by `env`.
    /// `env` is a lookup so tests need not touch the process environment.
    pub fn load(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut config = match file {
            Some(path) => Self::from_file(path)?,
            None => Config::default(),
        };
        config.apply_env(&env)?;
        config.validate()?;
        Ok(config)
    }

    /// Loads from the real process environment (`CAIRN_CONFIG` names the file if `file` is None).
    pub fn from_process_env(file: Option<&Path>) -> Result<Config, ConfigError> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let from_env = env("CAIRN_CONFIG").map(PathBuf::from);
        let file = file.map(Path::to_path_buf).or(from_env);
        Self::load(file.as_deref(), env)
    }

    fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|error| ConfigError::ParseFile {
            path: path.to_path_buf(),
            message: error.message().to_string(),
        })
    }
}

#[cfg(test)]
mod tests;
