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

mod sections;

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
    /// The planning engine's settings: reserve share, repair threshold and limits, parallel
    /// milestones per task, the gate's direct-route thresholds.
    pub engine: crate::domain::settings::EngineSettings,
    /// Model endpoints by purpose: `gate`, `strategic`, `tactical`, `verifier`. Missing purposes
    /// use `default`; with no endpoint at all, cairn runs against its built-in simulator.
    pub llm: BTreeMap<String, LlmEndpoint>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen_addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: None,
            sqlite_path: PathBuf::from("cairn.db"),
            workers: 4,
            lease_ttl_ms: 30_000,
            heartbeat_ms: 10_000,
            reaper_interval_ms: 5_000,
            poll_interval_ms: 1_000,
            max_body_bytes: 1024 * 1024,
            sse_keepalive_ms: 15_000,
            max_page_size: 100,
            shutdown_grace_ms: 10_000,
            db_max_connections: 16,
            log_format: LogFormat::Text,
            tools_file: None,
            rollout_percent: 100,
            eval_report: None,
            test_minimal_engine: false,
            engine: crate::domain::settings::EngineSettings::default(),
            llm: BTreeMap::new(),
        }
    }
}

/// Environment variables read on top of the file, each mapped to one field.
pub const ENV_VARS: &[(&str, &str)] = &[
    ("CAIRN_LISTEN_ADDR", "listen_addr"),
    ("CAIRN_DATABASE_URL", "database_url"),
    ("CAIRN_SQLITE_PATH", "sqlite_path"),
    ("CAIRN_WORKERS", "workers"),
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
    ("CAIRN_ENGINE_RESERVE_FRAC", "engine.reserve_frac"),
    ("CAIRN_ENGINE_REPAIR_AT", "engine.pressure_frac"),
    ("CAIRN_ENGINE_MAX_PARALLEL", "engine.max_parallel"),
];

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

    fn apply_env(&mut self, env: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        // DATABASE_URL is the common convention; CAIRN_DATABASE_URL wins when both are set.
        if let Some(url) = env("DATABASE_URL") {
            self.database_url = Some(Secret::new(url));
        }
        for (name, _) in ENV_VARS {
            let Some(value) = env(name) else { continue };
            self.set_from_env(name, &value)?;
        }
        for purpose in ["DEFAULT", "GATE", "STRATEGIC", "TACTICAL", "VERIFIER"] {
            self.apply_llm_env(purpose, env)?;
        }
        Ok(())
    }

    fn apply_llm_env(
        &mut self,
        purpose: &str,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let base_url = env(&format!("CAIRN_LLM_{purpose}_BASE_URL"));
        let model = env(&format!("CAIRN_LLM_{purpose}_MODEL"));
        let api_key = env(&format!("CAIRN_LLM_{purpose}_API_KEY"));
        if base_url.is_none() && model.is_none() && api_key.is_none() {
            return Ok(());
        }
        let key = purpose.to_ascii_lowercase();
        let endpoint = self.llm.entry(key).or_default();
        if let Some(base_url) = base_url {
            endpoint.base_url = base_url;
        }
        if let Some(model) = model {
            endpoint.model = model;
        }
        if let Some(api_key) = api_key {
            endpoint.api_key = Secret::new(api_key);
        }
        Ok(())
    }

    fn set_from_env(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        fn parse<T: std::str::FromStr>(
            name: &str,
            value: &str,
            what: &str,
        ) -> Result<T, ConfigError>
        where
            T::Err: std::fmt::Display,
        {
            value
                .trim()
                .parse::<T>()
                .map_err(|error| ConfigError::Invalid {
                    name: name.to_string(),
                    message: format!("expected {what}, got {value:?} ({error})"),
                })
        }
        match name {
            "CAIRN_LISTEN_ADDR" => self.listen_addr = parse(name, value, "host:port")?,
            "CAIRN_DATABASE_URL" => self.database_url = Some(Secret::new(value)),
            "CAIRN_SQLITE_PATH" => self.sqlite_path = PathBuf::from(value),
            "CAIRN_WORKERS" => self.workers = parse(name, value, "a whole number")?,
            "CAIRN_LEASE_TTL_MS" => self.lease_ttl_ms = parse(name, value, "milliseconds")?,
            "CAIRN_HEARTBEAT_MS" => self.heartbeat_ms = parse(name, value, "milliseconds")?,
            "CAIRN_REAPER_INTERVAL_MS" => {
                self.reaper_interval_ms = parse(name, value, "milliseconds")?
            }
            "CAIRN_POLL_INTERVAL_MS" => self.poll_interval_ms = parse(name, value, "milliseconds")?,
            "CAIRN_MAX_BODY_BYTES" => self.max_body_bytes = parse(name, value, "bytes")?,
            "CAIRN_SSE_KEEPALIVE_MS" => self.sse_keepalive_ms = parse(name, value, "milliseconds")?,
            "CAIRN_MAX_PAGE_SIZE" => self.max_page_size = parse(name, value, "a whole number")?,
            "CAIRN_SHUTDOWN_GRACE_MS" => {
                self.shutdown_grace_ms = parse(name, value, "milliseconds")?
            }
            "CAIRN_DB_MAX_CONNECTIONS" => {
                self.db_max_connections = parse(name, value, "a whole number")?
            }
            "CAIRN_LOG_FORMAT" => {
                self.log_format = match value.trim() {
                    "text" => LogFormat::Text,
                    "json" => LogFormat::Json,
                    other => {
                        return Err(ConfigError::Invalid {
                            name: name.to_string(),
                            message: format!("expected \"text\" or \"json\", got {other:?}"),
                        });
                    }
                }
            }
            "CAIRN_TOOLS_FILE" => self.tools_file = Some(PathBuf::from(value)),
            "CAIRN_ROLLOUT_PERCENT" => {
                self.rollout_percent = parse(name, value, "a percentage 0..=100")?
            }
            "CAIRN_EVAL_REPORT" => self.eval_report = Some(PathBuf::from(value)),
            "CAIRN_TEST_MINIMAL_ENGINE" => {
                self.test_minimal_engine = parse(name, value, "true or false")?
            }
            "CAIRN_ENGINE_RESERVE_FRAC" => {
                self.engine.reserve_frac = parse(name, value, "a fraction 0..0.9")?
            }
            "CAIRN_ENGINE_REPAIR_AT" => {
                self.engine.pressure_frac = parse(name, value, "a fraction in (0, 1]")?
            }
            "CAIRN_ENGINE_MAX_PARALLEL" => {
                self.engine.max_parallel = parse(name, value, "a whole number")?
            }
            _ => {}
        }
        Ok(())
    }

    /// Cross-field and range checks; messages name the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |name: &str, message: String| ConfigError::Invalid {
            name: name.to_string(),
            message,
        };
        let engine = &self.engine;
        if !(0.0..=0.9).contains(&engine.reserve_frac) {
            return Err(invalid(
                "engine.reserve_frac (CAIRN_ENGINE_RESERVE_FRAC)",
                format!("must be within 0..=0.9, got {}", engine.reserve_frac),
            ));
        }
        if !(engine.pressure_frac > 0.0 && engine.pressure_frac <= 1.0) {
            return Err(invalid(
                "engine.pressure_frac (CAIRN_ENGINE_REPAIR_AT)",
                format!("must be within (0, 1], got {}", engine.pressure_frac),
            ));
        }
        if engine.max_parallel == 0 || engine.max_parallel > 64 {
            return Err(invalid(
                "engine.max_parallel (CAIRN_ENGINE_MAX_PARALLEL)",
                format!("must be 1..=64, got {}", engine.max_parallel),
            ));
        }
        if !(0.0..=1.0).contains(&engine.direct_min_success)
            || !(0.0..=1.0).contains(&engine.direct_success_prior)
        {
            return Err(invalid(
                "engine.direct_min_success / engine.direct_success_prior",
                "must be within 0..=1".into(),
            ));
        }
        if self.rollout_percent > 100 {
            return Err(invalid(
                "rollout_percent (CAIRN_ROLLOUT_PERCENT)",
                format!("must be 0..=100, got {}", self.rollout_percent),
            ));
        }
        if self.workers == 0 || self.workers > 1024 {
            return Err(invalid(
                "workers (CAIRN_WORKERS)",
                format!("must be 1..=1024, got {}", self.workers),
            ));
        }
        if self.lease_ttl_ms < 100 {
            return Err(invalid(
                "lease_ttl_ms (CAIRN_LEASE_TTL_MS)",
                "must be at least 100".into(),
            ));
        }
        if self.heartbeat_ms == 0 || self.heartbeat_ms >= self.lease_ttl_ms {
            return Err(invalid(
                "heartbeat_ms (CAIRN_HEARTBEAT_MS)",
                format!(
                    "must be positive and below lease_ttl_ms ({})",
                    self.lease_ttl_ms
                ),
            ));
        }
        for (name, value) in [
            (
                "reaper_interval_ms (CAIRN_REAPER_INTERVAL_MS)",
                self.reaper_interval_ms,
            ),
            (
                "poll_interval_ms (CAIRN_POLL_INTERVAL_MS)",
                self.poll_interval_ms,
            ),
            (
                "sse_keepalive_ms (CAIRN_SSE_KEEPALIVE_MS)",
                self.sse_keepalive_ms,
            ),
        ] {
            if value == 0 {
                return Err(invalid(name, "must be positive".into()));
            }
        }
        if self.max_body_bytes < 256 {
            return Err(invalid(
                "max_body_bytes (CAIRN_MAX_BODY_BYTES)",
                "must be at least 256".into(),
            ));
        }
        if self.max_page_size < 1 || self.max_page_size > 10_000 {
            return Err(invalid(
                "max_page_size (CAIRN_MAX_PAGE_SIZE)",
                "must be 1..=10000".into(),
            ));
        }
        if self.db_max_connections == 0 {
            return Err(invalid(
                "db_max_connections (CAIRN_DB_MAX_CONNECTIONS)",
                "must be positive".into(),
            ));
        }
        if let Some(url) = &self.database_url {
            let url = url.expose();
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                return Err(invalid(
                    "database_url (CAIRN_DATABASE_URL / DATABASE_URL)",
                    "must start with postgres:// or postgresql://; leave it unset for the embedded SQLite file".into(),
                ));
            }
        }
        for (purpose, endpoint) in &self.llm {
            if !matches!(
                purpose.as_str(),
                "default" | "gate" | "strategic" | "tactical" | "verifier"
            ) {
                return Err(invalid(
                    &format!("llm.{purpose}"),
                    "unknown purpose; use default, gate, strategic, tactical or verifier".into(),
                ));
            }
            if !(endpoint.base_url.starts_with("http://")
                || endpoint.base_url.starts_with("https://"))
            {
                return Err(invalid(
                    &format!(
                        "llm.{purpose}.base_url (CAIRN_LLM_{}_BASE_URL)",
                        purpose.to_ascii_uppercase()
                    ),
                    "must be an http:// or https:// URL".into(),
                ));
            }
            if endpoint.model.trim().is_empty() {
                return Err(invalid(
                    &format!(
                        "llm.{purpose}.model (CAIRN_LLM_{}_MODEL)",
                        purpose.to_ascii_uppercase()
                    ),
                    "must not be empty".into(),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn defaults_are_valid() {
        let config = Config::load(None, env(&[])).expect("defaults");
        assert_eq!(config, Config::default());
    }

    #[test]
    fn env_overrides_and_bad_values_name_the_variable() {
        let config = Config::load(None, env(&[("CAIRN_WORKERS", "7")])).expect("valid");
        assert_eq!(config.workers, 7);
        let error = Config::load(None, env(&[("CAIRN_WORKERS", "many")])).unwrap_err();
        assert!(error.to_string().contains("CAIRN_WORKERS"), "{error}");
        let error = Config::load(None, env(&[("CAIRN_DATABASE_URL", "mysql://x")])).unwrap_err();
        assert!(error.to_string().contains("CAIRN_DATABASE_URL"), "{error}");
    }

    #[test]
    fn cairn_database_url_wins_over_database_url() {
        let config = Config::load(
            None,
            env(&[
                ("DATABASE_URL", "postgres://a/x"),
                ("CAIRN_DATABASE_URL", "postgres://b/y"),
            ]),
        )
        .expect("valid");
        assert_eq!(
            config.database_url.as_ref().map(Secret::expose),
            Some("postgres://b/y")
        );
    }

    #[test]
    fn secrets_never_print() {
        let config = Config::load(
            None,
            env(&[
                ("CAIRN_LLM_DEFAULT_BASE_URL", "http://127.0.0.1:1"),
                ("CAIRN_LLM_DEFAULT_MODEL", "m"),
                ("CAIRN_LLM_DEFAULT_API_KEY", "sk-very-secret"),
                ("CAIRN_DATABASE_URL", "postgres://user:hunter2@h/db"),
            ]),
        )
        .expect("valid");
        let debug = format!("{config:?}");
        let json = serde_json::to_string(&config).expect("serializes");
        for shown in [debug, json] {
            assert!(
                !shown.contains("sk-very-secret") && !shown.contains("hunter2"),
                "{shown}"
            );
        }
    }

    #[test]
    fn engine_settings_from_file_and_env_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cairn.toml");
        std::fs::write(&path, "[engine]\nmax_parallel = 2\nmax_retry_step = 1\n").expect("write");
        let config =
            Config::load(Some(&path), env(&[("CAIRN_ENGINE_REPAIR_AT", "0.75")])).expect("valid");
        assert_eq!(
            (
                config.engine.max_parallel,
                config.engine.max_retry_step,
                config.engine.pressure_frac
            ),
            (2, 1, 0.75)
        );
        let error = Config::load(None, env(&[("CAIRN_ENGINE_RESERVE_FRAC", "1.5")])).unwrap_err();
        assert!(
            error.to_string().contains("CAIRN_ENGINE_RESERVE_FRAC"),
            "{error}"
        );
        std::fs::write(&path, "[engine]\nmax_paralel = 2\n").expect("write");
        let error = Config::load(Some(&path), env(&[])).unwrap_err();
        assert!(error.to_string().contains("max_paralel"), "{error}");
    }

    #[test]
    fn file_then_env() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cairn.toml");
        std::fs::write(
            &path,
            "workers = 3\nlease_ttl_ms = 5000\nheartbeat_ms = 1000\n",
        )
        .expect("write");
        let config = Config::load(Some(&path), env(&[("CAIRN_WORKERS", "5")])).expect("valid");
        assert_eq!((config.workers, config.lease_ttl_ms), (5, 5000));
        std::fs::write(&path, "wokers = 3\n").expect("write");
        let error = Config::load(Some(&path), env(&[])).unwrap_err();
        assert!(error.to_string().contains("wokers"), "{error}");
    }
}
