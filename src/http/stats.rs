//! `GET /v1/stats` and `GET /v1/stats/gate`: how the planner is doing (second seed's planner
//! telemetry) and how the plan-or-act gate routes (first seed).
//!
//! Both are computed from the results of the tenant's most recent finished tasks (at most
//! [`WINDOW`]): every v2 result carries its metrics and its gate decision with the outcome, so
//! no extra table or cross-task event scan is needed, and the figures are exactly what the
//! task results say.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::domain::task::{DEFAULT_TENANT, Task};
use crate::http::AppState;
use crate::http::error::ApiError;
use crate::store::TaskQuery;

/// How many recent tasks the statistics cover.
pub const WINDOW: usize = 1000;

/// Planner telemetry over recent finished v2 tasks. Rates are `null` when nothing was counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Stats {
    /// Finished tasks the engine v2 ran (planned or direct).
    pub tasks: u64,
    pub planned_tasks: u64,
    /// Valid strategic proposals / all proposals.
    pub plan_validity_rate: Option<f64>,
    /// Milestones per planned task (final plan).
    pub average_plan_length: Option<f64>,
    /// Steps that completed / steps executed.
    pub step_completion_rate: Option<f64>,
    /// Plan versions after the first, per planned task.
    pub replan_frequency: Option<f64>,
    /// Steps refused by the executor contract / steps proposed for execution.
    pub drift_rate: Option<f64>,
    /// Tasks that succeeded with the goal verified / finished tasks.
    pub verified_success: Option<f64>,
    /// Wrong plans (invalid proposals, checks failing after steps ran as planned).
    pub planner_failures: u64,
    /// Plans carried out badly (tool errors, drift).
    pub executor_failures: u64,
    /// Repairs by level.
    pub repairs: BTreeMap<String, u64>,
    /// The v2 rollout: the share of `auto` tasks on v2 and this process's routing counts.
    pub rollout: Option<crate::engine::rollout::RolloutSplit>,
}

/// One routed task, for the gate's audit lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Routed {
    pub task_id: uuid::Uuid,
    pub goal_kind: Option<String>,
    pub status: String,
}

/// The gate's decisions linked to their outcomes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GateStats {
    pub decisions: u64,
    /// Decisions by route (`direct`, `plan`).
    pub by_route: BTreeMap<String, u64>,
    /// Direct-routed tasks that did not succeed: candidates for planning.
    pub direct_failed: Vec<Routed>,
    /// Planned tasks that finished after at most one completed step: a wasted plan.
    pub planned_one_step: Vec<Routed>,
    /// Success rate of direct-routed tasks per goal kind.
    pub direct_success_by_kind: BTreeMap<String, f64>,
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
            t.status.is_terminal()
                && t.result.as_ref().and_then(|r| r.get("engine")) == Some(&Value::from("v2"))
        }));
    }
    Ok(out)
}

fn metric(result: &Value, name: &str) -> u64 {
    result
        .pointer(&format!("/metrics/{name}"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

fn route(result: &Value) -> Option<&str> {
    result.pointer("/gate/route").and_then(Value::as_str)
}

/// Aggregates planner telemetry over results.
pub fn planner_stats(tasks: &[Task]) -> Stats {
    let mut stats = Stats::default();
    let (mut proposed, mut invalid, mut milestones, mut steps, mut done) = (0, 0, 0, 0, 0);
    let (mut replans, mut drift, mut verified) = (0, 0, 0);
    for task in tasks {
        let Some(result) = &task.result else { continue };
        stats.tasks += 1;
        if result.get("verified") == Some(&Value::Bool(true))
            && result.get("status") == Some(&Value::from("succeeded"))
        {
            verified += 1;
        }
        proposed += metric(result, "plans_proposed");
        invalid += metric(result, "plans_invalid");
        steps += metric(result, "steps_total");
        done += metric(result, "steps_completed");
        drift += metric(result, "drift");
        stats.planner_failures += metric(result, "planner_failures");
        stats.executor_failures += metric(result, "executor_failures");
        for level in ["retry_step", "replan_milestone", "replan_strategy"] {
            *stats.repairs.entry(level.into()).or_default() +=
                metric(result, &format!("repairs_{level}"));
        }
        if route(result) == Some("plan")
            && result.get("plan_version").and_then(Value::as_u64) > Some(0)
        {
            stats.planned_tasks += 1;
            milestones += result
                .get("milestones")
                .and_then(Value::as_array)
                .map_or(0, |m| m.len() as u64);
            replans += metric(result, "replans");
        }
    }
    stats.plan_validity_rate = ratio(proposed - invalid.min(proposed), proposed);
    stats.average_plan_length = ratio(milestones, stats.planned_tasks);
    stats.step_completion_rate = ratio(done, steps);
    stats.replan_frequency = ratio(replans, stats.planned_tasks);
    stats.drift_rate = ratio(drift, steps + drift);
    stats.verified_success = ratio(verified, stats.tasks);
    stats
}

/// Aggregates the gate's decisions and outcomes over results.
pub fn gate_stats(tasks: &[Task]) -> GateStats {
    let mut stats = GateStats::default();
    let mut direct: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for task in tasks {
        let Some(result) = &task.result else { continue };
        let Some(route) = route(result) else { continue };
        stats.decisions += 1;
        *stats.by_route.entry(route.to_string()).or_default() += 1;
        let kind = result
            .pointer("/gate/features/goal_kind")
            .and_then(Value::as_str)
            .map(str::to_string);
        let routed = Routed {
            task_id: task.id,
            goal_kind: kind.clone(),
            status: task.status.as_str().to_string(),
        };
        let succeeded = task.status == crate::domain::task::TaskStatus::Succeeded;
        match route {
            "direct" => {
                let counts = direct
                    .entry(kind.unwrap_or_else(|| "unknown".into()))
                    .or_default();
                counts.1 += 1;
                if succeeded {
                    counts.0 += 1;
                } else {
                    stats.direct_failed.push(routed);
                }
            }
            _ => {
                if succeeded && metric(result, "steps_completed") <= 1 {
                    stats.planned_one_step.push(routed);
                }
            }
        }
    }
    stats.direct_success_by_kind = direct
        .into_iter()
        .filter_map(|(kind, (ok, all))| ratio(ok, all).map(|r| (kind, r)))
        .collect();
    stats
}

/// Planner telemetry.
#[utoipa::path(
    get,
    path = "/v1/stats",
    tag = "stats",
    responses((status = 200, description = "Planner telemetry over the most recent finished tasks.", body = Stats))
)]
pub async fn get_stats(State(state): State<AppState>) -> Result<Json<Stats>, ApiError> {
    let mut stats = planner_stats(&recent_v2_tasks(&state).await?);
    stats.rollout = Some(state.rollout.split());
    Ok(Json(stats))
}

/// The gate's decisions and their outcomes.
#[utoipa::path(
    get,
    path = "/v1/stats/gate",
    tag = "stats",
    responses((status = 200, description = "Gate decisions with outcomes over the most recent finished tasks.", body = GateStats))
)]
pub async fn get_gate_stats(State(state): State<AppState>) -> Result<Json<GateStats>, ApiError> {
    Ok(Json(gate_stats(&recent_v2_tasks(&state).await?)))
}
