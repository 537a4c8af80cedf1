//! `GET /v1/stats` and `GET /v1/stats/gate`: how the planner is doing (second seed's planner
//! telemetry) and how the plan-or-act gate routes (first seed).
//!
//! Both are computed (by `crate::domain::telemetry`) from the results of the tenant's most recent finished tasks (at most
//! [`WINDOW`]): every v2 result carries its metrics and its gate decision with the outcome, so
//! no extra table or cross-task event scan is needed, and the figures are exactly what the
//! task results say.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::report::TaskReport;
use crate::domain::task::{DEFAULT_TENANT, Task};
use crate::domain::telemetry::{GateStats, PlannerStats, gate_stats, planner_stats};
use crate::engine::rollout::RolloutSplit;
use crate::http::AppState;
use crate::http::doc_schemas::StoreFailure;
use crate::http::error::ApiError;
use crate::store::TaskQuery;

/// How many recent tasks the statistics cover.
pub const WINDOW: usize = 1000;

/// Planner telemetry over recent finished v2 tasks, and the rollout split of this process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Stats {
    #[serde(flatten)]
    pub planner: PlannerStats,
    /// The v2 rollout: the share of `auto` tasks on v2 and this process's routing counts.
    pub rollout: Option<RolloutSplit>,
}

/// Recent finished tasks of the tenant whose result comes from the engine v2.
async fn recent_v2_tasks(state: &AppState) -> Result<Vec<Task>, ApiError> {
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
        let tasks = state.store.list_tasks(DEFAULT_TENANT, &query).await?;
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
    responses((status = 200, description = "Planner telemetry over the most recent finished tasks.", body = Stats), StoreFailure)
)]
pub async fn get_stats(State(state): State<AppState>) -> Result<Json<Stats>, ApiError> {
    Ok(Json(Stats {
        planner: planner_stats(&recent_v2_tasks(&state).await?),
        rollout: Some(state.rollout.split()),
    }))
}

/// The gate's decisions and their outcomes.
#[utoipa::path(
    get,
    path = "/v1/stats/gate",
    tag = "stats",
    responses((status = 200, description = "Gate decisions with outcomes over the most recent finished tasks.", body = GateStats), StoreFailure)
)]
pub async fn get_gate_stats(State(state): State<AppState>) -> Result<Json<GateStats>, ApiError> {
    Ok(Json(gate_stats(&recent_v2_tasks(&state).await?)))
}
