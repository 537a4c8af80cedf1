//! Plans as data: milestones with dependencies, acceptance checks and effort, steps per milestone.
//!
//! The strategic planner commits only to milestones (what must be true, and how a program can
//! tell); the tactical planner attaches steps to one milestone just before it runs. Keeping the
//! plan as typed data rather than prose lets the runtime choose ready milestones, refuse invalid
//! plans, version them and resume them. The serde shapes here are the wire format shared with the
//! planners and the simulator, so field names must not drift.
//!
//! Parsing is lenient about extra fields (models add them) but strict about the ones that matter:
//! [`Plan::from_value`] reports a missing check or effort as a [`PlanError`] the planner can act
//! on, instead of an opaque deserialisation error.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use check::Check;
use error::PlanError;
use known::KnownTools;

pub mod backing;
pub mod check;
pub mod diff;
pub mod error;
pub mod fingerprint;
pub mod known;
pub mod validate;

/// Where a milestone is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MilestoneStatus {
    #[default]
    Pending,
    Active,
    Done,
    Failed,
    Skipped,
}

/// Where a step is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    #[default]
    Pending,
    Running,
    Done,
    Failed,
}

/// One tool call the tactical planner proposed and the executor may perform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Step {
    pub id: String,
    pub tool: String,
    /// Arguments sent to the tool as `{"args": ...}`; validated against the tool's schema.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub args: Value,
    /// What the step should produce, so the monitor can tell whether it did.
    #[serde(default)]
    pub expected_output: String,
    #[serde(default)]
    pub status: StepStatus,
    /// How many times this step has been tried (L1 retries raise it).
    #[serde(default)]
    pub attempt: u32,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The tactical planner's output for one milestone: `{"steps": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StepList {
    pub steps: Vec<Step>,
}

/// One unit of the strategic plan: a state of the world a check can confirm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Milestone {
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Estimated effort; the milestone's budget share is proportional to it.
    pub effort: u32,
    /// Tools the tactical planner may use for this milestone.
    #[serde(default)]
    pub tools: Vec<String>,
    /// The stated outcome, given to the verifier and to the tactical planner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The condition that proves the milestone is done.
    pub accept: Check,
    #[serde(default)]
    pub status: MilestoneStatus,
    /// Attached only while the milestone is (or was) active.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
}

impl Milestone {
    /// Repairs what a planner writes wrong without changing what the milestone means: a tool
    /// granted twice is granted once (the 1.5B planner granted one milestone twenty tools, each
    /// name several times, and every step it then wrote matched two branches of the tactical
    /// answer schema and was refused), and its check is tidied ([`Check::tidy`]).
    pub fn tidy(&mut self) {
        let mut seen = BTreeSet::new();
        self.tools.retain(|tool| seen.insert(tool.clone()));
        self.accept.tidy();
    }
}

/// The strategic planner's output, and the body of every plan version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Plan {
    pub milestones: Vec<Milestone>,
}

impl Plan {
    /// Parses a planner's JSON output. Shape problems become [`PlanError`]s phrased for the
    /// planner (which field of which milestone), at most `max_errors` of them. The result still
    /// needs [`validate::validate`].
    pub fn from_value(value: &Value, max_errors: usize) -> Result<Plan, Vec<PlanError>> {
        let Some(items) = value.get("milestones").and_then(Value::as_array) else {
            return Err(vec![PlanError::Malformed {
                at: "plan".into(),
                message: "expected an object with a \"milestones\" array".into(),
            }]);
        };
        let mut errors = Vec::new();
        let mut milestones = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let at = item
                .get("id")
                .and_then(Value::as_str)
                .map(error::short)
                .unwrap_or_else(|| format!("milestones[{index}]"));
            let before = errors.len();
            if !item.is_object() {
                errors.push(PlanError::Malformed {
                    at: at.clone(),
                    message: "expected an object".into(),
                });
                continue;
            }
            if item.get("accept").is_none_or(Value::is_null) {
                errors.push(PlanError::MissingCheck {
                    milestone: at.clone(),
                });
            }
            if item.get("effort").is_none_or(Value::is_null) {
                errors.push(PlanError::MissingEffort {
                    milestone: at.clone(),
                });
            }
            if errors.len() > before {
                continue;
            }
            match serde_json::from_value::<Milestone>(item.clone()) {
                Ok(mut milestone) => {
                    milestone.tidy();
                    milestones.push(milestone);
                }
                Err(err) => errors.push(PlanError::Malformed {
                    at,
                    message: error::short(&err.to_string()),
                }),
            }
        }
        if errors.is_empty() {
            Ok(Plan { milestones })
        } else {
            errors.truncate(max_errors.max(1));
            Err(errors)
        }
    }

    pub fn milestone(&self, id: &str) -> Option<&Milestone> {
        self.milestones.iter().find(|m| m.id == id)
    }

    pub fn milestone_mut(&mut self, id: &str) -> Option<&mut Milestone> {
        self.milestones.iter_mut().find(|m| m.id == id)
    }

    /// Pending milestones whose dependencies are all done, in plan order. Independent ready
    /// milestones may run in parallel.
    pub fn ready(&self) -> Vec<&Milestone> {
        let done: BTreeSet<&str> = self
            .milestones
            .iter()
            .filter(|m| m.status == MilestoneStatus::Done)
            .map(|m| m.id.as_str())
            .collect();
        self.milestones
            .iter()
            .filter(|m| m.status == MilestoneStatus::Pending)
            .filter(|m| m.depends_on.iter().all(|dep| done.contains(dep.as_str())))
            .collect()
    }

    /// True when every milestone is done. Plan completion is not goal completion: the engine
    /// still runs the goal-level verifier.
    pub fn all_done(&self) -> bool {
        self.milestones
            .iter()
            .all(|m| m.status == MilestoneStatus::Done)
    }

    /// Milestone ids in an order where every milestone comes after its dependencies (Kahn's
    /// algorithm, ties broken by plan order so the order is stable). `None` when the
    /// dependencies are unknown or cyclic; [`validate::validate`] says which.
    pub fn topological_order(&self) -> Option<Vec<&str>> {
        let index: BTreeMap<&str, usize> = self
            .milestones
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id.as_str(), i))
            .collect();
        if index.len() != self.milestones.len() {
            return None;
        }
        let mut indegree = vec![0usize; self.milestones.len()];
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); self.milestones.len()];
        for (i, milestone) in self.milestones.iter().enumerate() {
            for dep in &milestone.depends_on {
                let &d = index.get(dep.as_str())?;
                indegree[i] += 1;
                dependents[d].push(i);
            }
        }
        // A BTreeSet of plan positions acts as a priority queue for the stable tie-break.
        let mut ready: BTreeSet<usize> =
            (0..indegree.len()).filter(|&i| indegree[i] == 0).collect();
        let mut order = Vec::with_capacity(self.milestones.len());
        while let Some(i) = ready.pop_first() {
            order.push(self.milestones[i].id.as_str());
            for &j in &dependents[i] {
                indegree[j] -= 1;
                if indegree[j] == 0 {
                    ready.insert(j);
                }
            }
        }
        (order.len() == self.milestones.len()).then_some(order)
    }

    /// Unfinished milestones that name a tool (allowed, or a check's runner) which is no longer
    /// registered, with those tools. A non-empty result means the plan is stale: a cheap,
    /// deterministic trigger for a `tool_unavailable` replan before any step fails.
    pub fn missing_tools(&self, known: &KnownTools) -> Vec<(String, Vec<String>)> {
        self.milestones
            .iter()
            .filter(|m| !matches!(m.status, MilestoneStatus::Done | MilestoneStatus::Skipped))
            .filter_map(|m| {
                let mut missing: Vec<String> = m
                    .tools
                    .iter()
                    .map(String::as_str)
                    .chain(m.accept.command_tools())
                    .filter(|t| !known.contains(t))
                    .map(str::to_string)
                    .collect();
                missing.sort();
                missing.dedup();
                (!missing.is_empty()).then(|| (m.id.clone(), missing))
            })
            .collect()
    }

    /// `(id, effort)` of every milestone, the input of [`super::ledger::Ledger::allocate`].
    pub fn shares(&self) -> Vec<(String, u32)> {
        self.milestones
            .iter()
            .map(|m| (m.id.clone(), m.effort))
            .collect()
    }
}

#[cfg(test)]
mod tests;
