//! Cross-field and range checks of a loaded [`Config`], one helper per group of settings.
//! The checks run in a fixed order and the first failure is returned.

use super::{Config, ConfigError, LlmEndpoint};

/// The largest per-tenant cap on running tasks: far above any fleet's workers, low enough that
/// a typo (a byte count, a timestamp) is refused rather than silently meaning "no cap".
const MAX_RUNNING_PER_TENANT: u32 = 100_000;

/// A simulated answer slower than this is a typo, not a demo.
const MAX_SIM_LATENCY_MS: u64 = 60_000;

fn invalid(name: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        name: name.to_string(),
        message,
    }
}

impl Config {
    /// Cross-field and range checks; messages name the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_engine()?;
        self.validate_workers_and_timing()?;
        self.validate_limits()?;
        self.validate_http_limits()?;
        self.validate_database_url()?;
        if let Err(errors) = self.default_budget.validate() {
            return Err(invalid(
                "default_budget (CAIRN_DEFAULT_BUDGET_*)",
                errors.join("; ").replace("budget.", "default_budget."),
            ));
        }
        self.prices
            .validate()
            .map_err(|error| invalid("prices", error.to_string()))?;
        self.spend_caps
            .resolve()
            .map_err(|error| invalid("spend_caps (CAIRN_SPEND_CAP_*)", error))?;
        if self.sim_latency_ms > MAX_SIM_LATENCY_MS {
            return Err(invalid(
                "sim_latency_ms (CAIRN_SIM_LATENCY_MS)",
                format!("must be at most {MAX_SIM_LATENCY_MS} milliseconds"),
            ));
        }
        for (purpose, endpoint) in &self.llm {
            validate_llm_endpoint(purpose, endpoint)?;
        }
        Ok(())
    }

    /// The planning engine's shares, limits and gate thresholds, then the rollout share.
    fn validate_engine(&self) -> Result<(), ConfigError> {
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
            || !(0.0..=1000.0).contains(&engine.direct_prior_weight)
        {
            return Err(invalid(
                "engine.direct_min_success / engine.direct_success_prior / engine.direct_prior_weight",
                "must be within 0..=1 (the weight 0..=1000)".into(),
            ));
        }
        if self.rollout_percent > 100 {
            return Err(invalid(
                "rollout_percent (CAIRN_ROLLOUT_PERCENT)",
                format!("must be 0..=100, got {}", self.rollout_percent),
            ));
        }
        Ok(())
    }

    /// Worker count, lease and heartbeat lengths, and the periodic intervals.
    fn validate_workers_and_timing(&self) -> Result<(), ConfigError> {
        if self.workers == 0 || self.workers > 1024 {
            return Err(invalid(
                "workers (CAIRN_WORKERS)",
                format!("must be 1..=1024, got {}", self.workers),
            ));
        }
        if self.max_running_per_tenant > MAX_RUNNING_PER_TENANT {
            return Err(invalid(
                "max_running_per_tenant (CAIRN_MAX_RUNNING_PER_TENANT)",
                format!(
                    "must be 0 (no cap) to {MAX_RUNNING_PER_TENANT}, got {}",
                    self.max_running_per_tenant
                ),
            ));
        }
        if let Some(node) = &self.node_id {
            let ok = (1..=64).contains(&node.len())
                && node
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok {
                return Err(invalid(
                    "node_id (CAIRN_NODE_ID)",
                    format!("must be 1 to 64 of A-Z a-z 0-9 - _ ., got {node:?}"),
                ));
            }
        }
        if !(1_000..=3_600_000).contains(&self.llm_timeout_ms) {
            return Err(invalid(
                "llm_timeout_ms (CAIRN_LLM_TIMEOUT_MS)",
                format!("must be 1000..=3600000, got {}", self.llm_timeout_ms),
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
        Ok(())
    }

    /// Request body, page size and connection pool bounds.
    fn validate_limits(&self) -> Result<(), ConfigError> {
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
        if self.db_commit_writers == 0 || self.db_commit_writers > 64 {
            return Err(invalid(
                "db_commit_writers (CAIRN_DB_COMMIT_WRITERS)",
                "must be 1..=64".into(),
            ));
        }
        Ok(())
    }

    /// A database URL, when set, must name Postgres.
    fn validate_database_url(&self) -> Result<(), ConfigError> {
        if let Some(url) = &self.database_url {
            let url = url.expose();
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                return Err(invalid(
                    "database_url (CAIRN_DATABASE_URL / DATABASE_URL)",
                    "must start with postgres:// or postgresql://; leave it unset for the embedded SQLite file".into(),
                ));
            }
        }
        Ok(())
    }
}

/// One `llm.<purpose>` endpoint: a known purpose, an http(s) base URL and a model name.
fn validate_llm_endpoint(purpose: &str, endpoint: &LlmEndpoint) -> Result<(), ConfigError> {
    if !matches!(
        purpose,
        "default" | "gate" | "strategic" | "tactical" | "verifier"
    ) {
        return Err(invalid(
            &format!("llm.{purpose}"),
            "unknown purpose; use default, gate, strategic, tactical or verifier".into(),
        ));
    }
    if !(endpoint.base_url.starts_with("http://") || endpoint.base_url.starts_with("https://")) {
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
    Ok(())
}
