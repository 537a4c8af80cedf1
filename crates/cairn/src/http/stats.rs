//! `GET /v1/stats` and `GET /v1/stats/gate`: how the planner is doing (plan validity, replans,
//! drift, planner and executor failures apart), what the tenant spent per period, and how the
//! plan-or-act gate routes (decisions beside outcomes, so misroutes can be counted).
//!
//! Both are computed (by `crate::domain::telemetry`) from the results of the caller's tenant's
//! most recent finished tasks (at most [`WINDOW`]); a key with the `admin` scope may name
//! another tenant with `?tenant=`: every v2 result carries its metrics and its gate decision with the outcome, so
//! no extra table or cross-task event scan is needed, and the figures are exactly what the
//! task results say.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::domain::report::TaskReport;
use crate::domain::spend::SpendPeriod;
use crate::domain::task::Task;
use crate::domain::telemetry::{GateStats, PlannerStats, gate_stats, planner_stats};
use crate::engine::rollout::RolloutSplit;
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::doc_schemas::StoreFailure;
use crate::http::error::{ApiError, Problem};
use crate::http::extract::ApiQuery;
use crate::store::keys::Scope;
use crate::store::{SpendHour, TaskQuery};

/// How many recent tasks the statistics cover.
pub const WINDOW: usize = 1000;

/// Planner telemetry over recent finished v2 tasks, and the rollout split of this process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Stats {
    #[serde(flatten)]
    pub planner: PlannerStats,
    /// The v2 rollout: the share of `auto` tasks on v2 and this process's routing counts.
    pub rollout: Option<RolloutSplit>,
    /// What the tenant's tasks were charged in money, per period of its spend cap.
    pub spend: Option<SpendStats>,
}

/// How many periods `/v1/stats` shows the spend of: the current one and those before it.
pub const SPEND_PERIODS: u32 = 7;

/// A tenant's spend per period (`[spend_caps]`; a day when no cap is configured).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SpendStats {
    /// The price table's currency; amounts are micro-units of it.
    pub currency: String,
    pub period: SpendPeriod,
    /// The tenant's cap per period, `None` when it has none.
    pub cap: Option<u64>,
    /// The current period first, then the ones before it; every period, spent or not.
    pub periods: Vec<PeriodSpend>,
}

/// One period's spend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PeriodSpend {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Micro-units charged to the tenant's tasks in the period.
    pub cost: u64,
    /// The part of `cost` booked from estimates: model calls whose endpoint reported no usage.
    pub estimated: u64,
}

/// The tenant's spend over the last [`SPEND_PERIODS`] periods.
async fn spend_stats(state: &AppState, tenant: &str) -> Result<SpendStats, ApiError> {
    let caps = &state.spend_caps;
    let now = state.clock.now();
    let oldest = caps.period.start_back(now, SPEND_PERIODS - 1);
    let hours = state.store.spend(Some(tenant), oldest).await?;
    let periods = (0..SPEND_PERIODS)
        .map(|back| {
            let start = caps.period.start_back(now, back);
            let end = caps.period.end(start);
            let within = || {
                hours
                    .iter()
                    .filter(move |hour| hour.hour >= start && hour.hour < end)
            };
            PeriodSpend {
                start,
                end,
                cost: SpendHour::total(within()),
                estimated: within().fold(0u64, |sum, hour| sum.saturating_add(hour.estimated_cost)),
            }
        })
        .collect();
    // A server without a price table (an engine-less test server) charges nothing.
    let currency = state
        .pricing
        .as_deref()
        .map_or_else(String::new, |pricing| pricing.prices.currency.clone());
    Ok(SpendStats {
        currency,
        period: caps.period,
        cap: caps.cap(tenant),
        periods,
    })
}

/// Query parameters of the statistics routes.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatsQuery {
    /// Another tenant's statistics (needs the `admin` scope); the caller's own by default.
    pub tenant: Option<String>,
}

/// The tenant whose statistics are asked for: the caller's own, or any with `admin`.
fn tenant_of(principal: &Principal, query: StatsQuery) -> Result<String, ApiError> {
    match query.tenant {
        Some(tenant) if tenant != principal.tenant => {
            if !principal.has(Scope::Admin) {
                return Err(ApiError::Forbidden(
                    "another tenant's statistics need the `admin` scope".into(),
                ));
            }
            tracing::info!(key_id = %principal.key_id, tenant = %tenant, "cross-tenant statistics read");
            Ok(tenant)
        }
        _ => Ok(principal.tenant.clone()),
    }
}

/// Recent finished tasks of the tenant whose result comes from the engine v2.
async fn recent_v2_tasks(state: &AppState, tenant: &str) -> Result<Vec<Task>, ApiError> {
    let mut out = Vec::new();
    let mut before = None;
    let page = state.settings.max_page_size.max(1);
    let mut seen = 0usize;
    while seen < WINDOW {
        let query = TaskQuery {
            status: None,
            before,
            limit: page,
        };
        let tasks = state.store.list_tasks(tenant, &query).await?;
        let Some(last) = tasks.last() else { break };
        before = Some(last.id);
        seen += tasks.len();
        out.extend(tasks.into_iter().filter(|t| {
            t.status.is_terminal() && TaskReport::read(t.result.as_ref()).is_engine("v2")
        }));
    }
    Ok(out)
}

/// Planner telemetry.
#[utoipa::path(
    get,
    path = "/v1/stats",
    tag = "stats",
    params(StatsQuery),
    responses(
        (status = 200, description = "Planner telemetry over the most recent finished tasks.", body = Stats),
        (status = 400, description = "An unknown query parameter.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn get_stats(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(query): ApiQuery<StatsQuery>,
) -> Result<Json<Stats>, ApiError> {
    let tenant = tenant_of(&principal, query)?;
    Ok(Json(Stats {
        planner: planner_stats(&recent_v2_tasks(&state, &tenant).await?),
        rollout: Some(state.rollout.split()),
        spend: Some(spend_stats(&state, &tenant).await?),
    }))
}

/// The gate's decisions and their outcomes.
#[utoipa::path(
    get,
    path = "/v1/stats/gate",
    tag = "stats",
    params(StatsQuery),
    responses(
        (status = 200, description = "Gate decisions with outcomes over the most recent finished tasks.", body = GateStats),
        (status = 400, description = "An unknown query parameter.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn get_gate_stats(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(query): ApiQuery<StatsQuery>,
) -> Result<Json<GateStats>, ApiError> {
    let tenant = tenant_of(&principal, query)?;
    Ok(Json(gate_stats(&recent_v2_tasks(&state, &tenant).await?)))
}
