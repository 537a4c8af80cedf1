//! Planner telemetry and the gate's audit, aggregated from finished tasks' typed reports
//! ([`TaskReport`]): pure functions the HTTP statistics serve and tests can call directly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::gate::Route;
use super::report::TaskReport;
use super::task::{Task, TaskStatus};

/// Planner telemetry over finished v2 tasks. Rates are `null` when nothing was counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlannerStats {
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

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// Aggregates planner telemetry over results.
pub fn planner_stats(tasks: &[Task]) -> PlannerStats {
    let mut stats = PlannerStats::default();
    let (mut proposed, mut invalid, mut milestones, mut steps, mut done) = (0, 0, 0, 0, 0);
    let (mut replans, mut drift, mut verified) = (0, 0, 0);
    for task in tasks {
        let Some(result) = &task.result else { continue };
        let report = TaskReport::read(Some(result));
        let m = report.metrics;
        stats.tasks += 1;
        if report.verified_success() {
            verified += 1;
        }
        proposed += u64::from(m.plans_proposed);
        invalid += u64::from(m.plans_invalid);
        steps += u64::from(m.steps_total);
        done += u64::from(m.steps_completed);
        drift += u64::from(m.drift);
        stats.planner_failures += u64::from(m.planner_failures);
        stats.executor_failures += u64::from(m.executor_failures);
        for (level, count) in [
            ("retry_step", m.repairs_retry_step),
            ("replan_milestone", m.repairs_replan_milestone),
            ("replan_strategy", m.repairs_replan_strategy),
        ] {
            *stats.repairs.entry(level.into()).or_default() += u64::from(count);
        }
        if report.route() == Some(Route::Plan) && report.plan_version > 0 {
            stats.planned_tasks += 1;
            milestones += report.milestones.len() as u64;
            replans += u64::from(m.replans);
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
        let report = TaskReport::read(Some(result));
        let Some(route) = report.route() else {
            continue;
        };
        stats.decisions += 1;
        let name = match route {
            Route::Direct => "direct",
            Route::Plan => "plan",
        };
        *stats.by_route.entry(name.to_string()).or_default() += 1;
        let kind = report.goal_kind().map(str::to_string);
        let routed = Routed {
            task_id: task.id,
            goal_kind: kind.clone(),
            status: task.status.as_str().to_string(),
        };
        let succeeded = task.status == TaskStatus::Succeeded;
        match route {
            Route::Direct => {
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
            Route::Plan => {
                if succeeded && report.metrics.steps_completed <= 1 {
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
