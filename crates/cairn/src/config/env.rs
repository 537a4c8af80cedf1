//! `CAIRN_*` environment variables applied on top of the defaults and the file.

use super::{Config, ConfigError, ENV_VARS, LogFormat, Secret};
use std::path::PathBuf;

impl Config {
    pub(super) fn apply_env(
        &mut self,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
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
        self.apply_limits_env(env)?;
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
        match name {
            "CAIRN_LISTEN_ADDR" => self.listen_addr = parse(name, value, "host:port")?,
            "CAIRN_DATABASE_URL" => self.database_url = Some(Secret::new(value)),
            "CAIRN_SQLITE_PATH" => self.sqlite_path = PathBuf::from(value),
            "CAIRN_WORKERS" => self.workers = parse(name, value, "a whole number")?,
            "CAIRN_NODE_ID" => self.node_id = Some(value.trim().to_string()),
            "CAIRN_MAX_RUNNING_PER_TENANT" => {
                self.max_running_per_tenant = parse(name, value, "a whole number (0: no cap)")?
            }
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
            "CAIRN_DB_COMMIT_WRITERS" => {
                self.db_commit_writers = parse(name, value, "a whole number")?
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
            "CAIRN_SIM_LATENCY_MS" => self.sim_latency_ms = parse(name, value, "milliseconds")?,
            "CAIRN_MCP_RELIST_MIN_MS" => {
                self.mcp_relist_min_ms = parse(name, value, "milliseconds")?
            }
            "CAIRN_LLM_TIMEOUT_MS" => self.llm_timeout_ms = parse(name, value, "milliseconds")?,
            "CAIRN_READYZ_CHECK_MODELS" => {
                self.readyz_check_models = parse(name, value, "true or false")?
            }
            "CAIRN_DASHBOARD" => self.dashboard = parse(name, value, "true or false")?,
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" => {
                self.otel_capture_content = parse(name, value, "true or false")?
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
            "CAIRN_ENGINE_EXPLORE_REPEATS" => {
                self.engine.explore_repeats = parse(name, value, "true or false")?
            }
            "CAIRN_AUTH" => self.auth = parse(name, value, "auto, on or off")?,
            _ => self.set_default_budget(name, value)?,
        }
        Ok(())
    }
}

impl Config {
    /// `CAIRN_DEFAULT_BUDGET_*`: one unit of the default budget each; `CAIRN_SPEND_CAP_*`.
    fn set_default_budget(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let budget = &mut self.default_budget;
        match name {
            "CAIRN_DEFAULT_BUDGET_TOKENS" => budget.tokens = parse(name, value, "tokens")?,
            "CAIRN_DEFAULT_BUDGET_TOOL_CALLS" => {
                budget.tool_calls = parse(name, value, "a whole number")?
            }
            "CAIRN_DEFAULT_BUDGET_WALL_MS" => budget.wall_ms = parse(name, value, "milliseconds")?,
            "CAIRN_DEFAULT_BUDGET_COST" => {
                budget.cost = Some(parse(name, value, "micro-units of the currency")?)
            }
            "CAIRN_SPEND_CAP_PERIOD" => {
                self.spend_caps.period = match value.trim() {
                    "hour" => crate::domain::spend::SpendPeriod::Hour,
                    "day" => crate::domain::spend::SpendPeriod::Day,
                    "month" => crate::domain::spend::SpendPeriod::Month,
                    _ => {
                        return Err(ConfigError::Invalid {
                            name: name.to_string(),
                            message: format!("expected hour, day or month, got {value:?}"),
                        });
                    }
                }
            }
            "CAIRN_SPEND_CAP_DEFAULT" => {
                self.spend_caps.default = Some(parse(name, value, "micro-units of the currency")?)
            }
            _ => {}
        }
        Ok(())
    }
}

/// Parses the value of the variable `name` as `T`, naming `what` was expected when it is not.
pub(super) fn parse<T: std::str::FromStr>(
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
