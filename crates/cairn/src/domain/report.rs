//! What a task's run reports: the spend per unit, the planner telemetry counters, and the
//! result every engine writes when a task ends ([`TaskReport`]), read back typed by the
//! HTTP statistics and the evaluation instead of by JSON pointers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::gate::Route;
use super::ledger::PerUnit;
pub use super::progress::{CurrentMilestone, Phase, Progress, SpendView};
use super::task::TaskStatus;

/// Spend per ledger unit: the one per-unit type of the ledger, the checkpoint and the reports.
pub type Spend = PerUnit<u64>;

impl PerUnit<u64> {
    pub fn add(&mut self, other: PerUnit<u64>) {
        self.tokens += other.tokens;
        self.tool_calls += other.tool_calls;
        self.wall_ms += other.wall_ms;
        self.cost += other.cost;
    }
}

impl From<Spend> for SpendView {
    fn from(spend: Spend) -> Self {
        SpendView {
            tokens: spend.tokens,
            tool_calls: spend.tool_calls,
            wall_ms: spend.wall_ms,
            cost: spend.cost,
        }
    }
}

/// The part of a task's spend booked from estimates: model calls whose endpoint reported no
/// usage, so cairn counted their tokens itself (the model client's estimate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub struct Estimated {
    pub calls: u32,
    pub tokens: u64,
    pub cost: u64,
}

impl Estimated {
    pub fn add(&mut self, spend: &Spend) {
        self.calls = self.calls.saturating_add(1);
        self.tokens = self.tokens.saturating_add(spend.tokens);
        self.cost = self.cost.saturating_add(spend.cost);
    }
}

/// Counters for planner telemetry: planner vs executor failures kept apart (a wrong plan and a
/// right plan badly carried out need different fixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Metrics {
    /// Strategic proposals received (valid or not).
    pub plans_proposed: u32,
    /// Strategic proposals refused by validation.
    pub plans_invalid: u32,
    /// Tactical proposals refused by step validation.
    pub step_lists_invalid: u32,
    pub steps_total: u32,
    pub steps_completed: u32,
    /// Steps refused by the executor contract (tool not allowed, args failing the schema).
    pub drift: u32,
    /// New plan versions after the first.
    pub replans: u32,
    /// Wrong or unusable plans: invalid proposals, milestones whose own steps all ran yet the
    /// check failed.
    pub planner_failures: u32,
    /// Correct plans carried out badly: tool errors, drift.
    pub executor_failures: u32,
    pub repairs_retry_step: u32,
    pub repairs_replan_milestone: u32,
    pub repairs_replan_strategy: u32,
}

/// A named reason a task ended without verified success, machine-readable beside the prose
/// `reason` of the report (`"cause"` in the result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Nothing could verify the goal: the verifier was unreachable or did not answer a verdict.
    Unverified,
    /// The answer states what only tools could tell (or the goal asks for a change), and no
    /// tool call succeeded behind it.
    NoEvidence,
    /// The model endpoint could not be reached.
    ModelUnreachable,
    /// The model kept answering output that does not match its schema, after bounded re-asks.
    ModelInvalidOutput,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Unverified => "unverified",
            Cause::NoEvidence => "no_evidence",
            Cause::ModelUnreachable => "model_unreachable",
            Cause::ModelInvalidOutput => "model_invalid_output",
        }
    }
}

/// The gate's part of a report: the route it took and the goal kind it saw.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct GateSummary {
    pub route: Option<Route>,
    pub features: GateKind,
}

/// The one gate feature the reports group by.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct GateKind {
    pub goal_kind: Option<String>,
}

/// The result an engine writes when a task ends (`Task.result`), as its readers see it. Fields
/// an engine does not write read as their defaults (the baselines have no gate or plan).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskReport {
    /// `v2`, `one_shot`, `reactive`, `v1` (or `minimal`, the test engine).
    pub engine: Option<String>,
    pub status: Option<TaskStatus>,
    /// Whether the goal was verified; `None` when nothing verified it.
    pub verified: Option<bool>,
    pub reason: Option<String>,
    /// A baseline's answer (v2's direct route keeps it in `extra.answer`).
    pub answer: Option<Value>,
    pub gate: Option<GateSummary>,
    pub plan_version: u64,
    /// The final plan's milestones with their spend and repairs.
    pub milestones: Vec<Value>,
    pub spend: Spend,
    pub metrics: Metrics,
    pub extra: Value,
    pub cause: Option<Cause>,
}

impl TaskReport {
    /// Reads a stored result; anything unreadable reads as an empty report.
    pub fn read(result: Option<&Value>) -> TaskReport {
        result
            .and_then(|value| serde_json::from_value(value.clone()).ok())
            .unwrap_or_default()
    }

    pub fn is_engine(&self, engine: &str) -> bool {
        self.engine.as_deref() == Some(engine)
    }

    /// The answer, wherever the engine put it.
    pub fn answer(&self) -> Option<&Value> {
        self.answer
            .as_ref()
            .filter(|a| !a.is_null())
            .or_else(|| self.extra.get("answer"))
    }

    pub fn route(&self) -> Option<Route> {
        self.gate.as_ref().and_then(|g| g.route)
    }

    pub fn goal_kind(&self) -> Option<&str> {
        self.gate
            .as_ref()
            .and_then(|g| g.features.goal_kind.as_deref())
    }

    /// Succeeded with the goal verified.
    pub fn verified_success(&self) -> bool {
        self.verified == Some(true) && self.status == Some(TaskStatus::Succeeded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_v2_result_reads_typed() {
        let result = json!({
            "engine": "v2", "status": "succeeded", "verified": true, "reason": "ok",
            "gate": {"route": "plan", "features": {"goal_kind": "rename", "est_tool_calls": 4},
                     "reasons": []},
            "plan_version": 2, "passed": ["m1"], "milestones": [{"id": "m1"}],
            "overhead": {"tokens": 5, "tool_calls": 0, "wall_ms": 1},
            "spend": {"tokens": 50, "tool_calls": 3, "wall_ms": 9},
            "metrics": {"steps_total": 3, "steps_completed": 2, "repairs_retry_step": 1},
            "extra": {"answer": "done"},
        });
        let report = TaskReport::read(Some(&result));
        assert!(report.is_engine("v2") && report.verified_success());
        assert_eq!(report.route(), Some(Route::Plan));
        assert_eq!(report.goal_kind(), Some("rename"));
        assert_eq!((report.plan_version, report.milestones.len()), (2, 1));
        assert_eq!(report.spend.tool_calls, 3);
        assert_eq!(report.metrics.repairs_retry_step, 1);
        assert_eq!(report.metrics.drift, 0);
        assert_eq!(report.answer(), Some(&json!("done")));
    }

    #[test]
    fn a_baseline_result_reads_typed() {
        let result = json!({
            "engine": "reactive", "status": "failed", "verified": null, "reason": "gave up",
            "answer": {"owner": "alice"}, "spend": {"tokens": 7, "tool_calls": 1, "wall_ms": 2},
            "overhead": {"tokens": 7, "tool_calls": 1, "wall_ms": 2},
            "metrics": {"steps_total": 1}, "rounds": 2, "lists": 0, "discarded_steps": 0,
        });
        let report = TaskReport::read(Some(&result));
        assert_eq!(report.status, Some(TaskStatus::Failed));
        assert_eq!(report.verified, None);
        assert_eq!(report.route(), None);
        assert_eq!(report.answer(), Some(&json!({"owner": "alice"})));
        assert_eq!(TaskReport::read(None), TaskReport::default());
    }
}
