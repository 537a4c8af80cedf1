//! Changes the task's other milestones already made, shown to a milestone's first step list.
//!
//! Receipts keep an identical side effect from happening twice, but not the same change in
//! other words. Measured on the real 1.5B model: an L3 plan granted its first milestone every
//! writer after the read it planned failed, and that milestone shipped the order and emailed
//! the tracking number; the email milestone, shown only its dependency's calls, wrote a second
//! email with another body (no receipt matched), so the customer got two. A milestone is
//! therefore shown the side effects other milestones made (`changes_made`), and may answer an
//! empty first list when one of them is a call of its own tools: its change is made. The
//! planner decides, since two emails to one address may be the goal; the engine then adopts
//! those calls as the milestone's done steps, so its check judges what was made, and nothing
//! runs again.

use serde_json::{Value, json};

use crate::domain::plan::{Milestone, Step, StepStatus};
use crate::engine::runtime::checkpoint::TaskState;

/// The most changes shown.
const MAX_SHOWN: usize = 8;

/// One side effect another milestone made.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Made {
    pub(super) milestone: String,
    /// The observation of the call, as that milestone's run holds it.
    pub(super) observation: Value,
}

impl Made {
    fn tool(&self) -> &str {
        self.observation
            .get("tool")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// Where it was made, as `milestone.steps_planned`'s `adopted` lists it.
    pub(super) fn source(&self) -> Value {
        let o = &self.observation;
        json!({"milestone": self.milestone, "step": o.get("step"), "tool": o.get("tool")})
    }

    /// How the planner is shown it.
    pub(super) fn shown(&self) -> Value {
        let o = &self.observation;
        json!({"milestone": self.milestone, "tool": o.get("tool"), "args": o.get("args"),
               "output": o.get("output")})
    }
}

/// The successful side-effecting calls of the plan's milestones other than `milestone_id`, in
/// plan order, at most [`MAX_SHOWN`] (the latest kept).
pub(super) fn elsewhere(
    state: &TaskState,
    milestone_id: &str,
    writes: &dyn Fn(&str) -> bool,
) -> Vec<Made> {
    let mut made: Vec<Made> = state
        .plan
        .iter()
        .flat_map(|p| p.milestones.iter())
        .filter(|m| m.id != milestone_id)
        .filter_map(|m| state.runs.get(&m.id).map(|run| (m, run)))
        .flat_map(|(m, run)| {
            run.observations
                .iter()
                .filter(|o| o.get("ok") == Some(&Value::Bool(true)))
                .filter(|o| o.get("tool").and_then(Value::as_str).is_some_and(writes))
                .map(|o| Made {
                    milestone: m.id.clone(),
                    observation: o.clone(),
                })
        })
        .collect();
    let skip = made.len().saturating_sub(MAX_SHOWN);
    made.drain(..skip);
    made
}

/// The changes made by calls of `milestone`'s own tools: what an empty first list adopts.
pub(super) fn covering<'a>(made: &'a [Made], milestone: &Milestone) -> Vec<&'a Made> {
    made.iter()
        .filter(|m| milestone.tools.iter().any(|t| t == m.tool()))
        .collect()
}

/// Adopts `covering` as `milestone`'s done steps, each with its call's observation (marked
/// `adopted` with where it was made), so that the milestone's check judges the change that was
/// made. Returns the adopted steps.
pub(super) fn adopt(state: &mut TaskState, milestone_id: &str, covering: &[Made]) -> Vec<Step> {
    let steps: Vec<Step> = covering
        .iter()
        .enumerate()
        .map(|(n, made)| {
            let o = &made.observation;
            let step = o.get("step").and_then(Value::as_str).unwrap_or_default();
            Step {
                id: format!("a{}", n + 1),
                tool: made.tool().to_string(),
                args: o.get("args").cloned().unwrap_or(Value::Null),
                expected_output: format!("made by {} ({step})", made.milestone),
                status: StepStatus::Done,
                attempt: 0,
            }
        })
        .collect();
    if let Some(milestone) = state
        .plan
        .as_mut()
        .and_then(|plan| plan.milestone_mut(milestone_id))
    {
        milestone.steps.clone_from(&steps);
    }
    let run = state.run_mut(milestone_id);
    for (step, made) in steps.iter().zip(covering) {
        let mut observation = made.observation.clone();
        observation["adopted"] = json!({"milestone": made.milestone,
                                        "step": made.observation.get("step")});
        observation["step"] = json!(step.id);
        run.observations.push(observation);
    }
    run.next_step = steps.len();
    steps
}
