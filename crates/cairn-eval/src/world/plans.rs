//! Rule 10: v2's plans, and a plan's slips. Off unless the suite's `[world.slips]` sets
//! `plan_tool_miss` or `plan_accept_miss` (docs/evaluation.md, "Plans").
//!
//! The planner writes one milestone per phase of the task, in the order its facts require,
//! each granted the tools the call offers. Two slips, measured on the real local model's plans
//! (`scripts/live-plans.py`), make it fallible where the real one is:
//!
//! - **a tool missed**: each tool some step of the task uses is granted to no milestone with
//!   probability `plan_tool_miss`, drawn once per task and tool (a model at temperature 0
//!   writes the same plan again when asked again, so a replan misses it too). A milestone's
//!   tactical call is offered only its milestone's tools and can name only those, so a step
//!   of that tool cannot be taken: the call names an offered tool instead (`Mind::unoffered`);
//! - **an unreachable check**: each milestone's acceptance check names, with probability
//!   `plan_accept_miss`, an artifact no tool produces instead of its last step's (a real
//!   planner names artifacts it has not seen), so the check fails however the steps went.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::mind::Mind;
use crate::slip_rates::Answer;
use crate::suite::TaskStep;

impl Mind<'_> {
    fn phases(&self) -> Vec<(String, Vec<&TaskStep>)> {
        let mut phases: Vec<(String, Vec<&TaskStep>)> = Vec::new();
        for step in &self.task.steps {
            match phases.iter_mut().find(|(p, _)| p == step.phase()) {
                Some((_, steps)) => steps.push(step),
                None => phases.push((step.phase().to_string(), vec![step])),
            }
        }
        phases
    }

    /// v2's strategic answer: one milestone per phase, each checked by its last receipt; for
    /// a goal no step serves, no milestone, or (rule 9) one for an invented call.
    pub(super) fn plan(&self, tools: &[String]) -> Value {
        let phases = self.phases();
        if phases.is_empty()
            && let Some(call) = self.invented(&[], tools, Answer::List)
        {
            let name = match call["tool"].as_str() {
                Some(tool) if self.shown_artifact(tool) => json!(tool),
                _ => call["id"].clone(),
            };
            return json!({"milestones": [{"id": "m1", "title": "answer found",
                "depends_on": [], "effort": 1, "tools": [call["tool"]], "outcome": "the answer",
                "accept": {"type": "artifact", "name": name, "non_empty": true}}]});
        }
        let granted: Vec<&String> = tools.iter().filter(|t| !self.misses_tool(t)).collect();
        let phase_of = |step: &str| {
            self.task
                .steps
                .iter()
                .find(|s| s.id == step)
                .map(|s| s.phase().to_string())
        };
        let milestones: Vec<Value> = phases
            .iter()
            .map(|(phase, steps)| {
                // What must happen first, as the goal and the facts say it: the milestones
                // holding each step's prerequisites.
                let deps: BTreeSet<String> = steps
                    .iter()
                    .flat_map(|s| self.task.prerequisites(s))
                    .filter_map(|p| phase_of(&p))
                    .filter(|p| p != phase)
                    .collect();
                let last = steps.last().map(|s| s.id.clone()).unwrap_or_default();
                let checked = self.checked(phase, steps, &granted);
                json!({"id": phase, "title": format!("carry out {phase}"),
                       "depends_on": deps, "effort": steps.len(), "tools": granted,
                       "outcome": format!("receipt done:{last}"),
                       "accept": {"type": "artifact", "name": checked, "non_empty": true}})
            })
            .collect();
        json!({ "milestones": milestones })
    }

    /// The artifact the milestone of `phase` is checked by: its last step's (by the step's
    /// id, or by its tool's name where the input shows the tools' declared artifacts); with
    /// rule 10's miss, one its steps do not produce (another granted tool's declared one, or
    /// a name no tool declares).
    fn checked(&self, phase: &str, steps: &[&TaskStep], granted: &[&String]) -> String {
        let last = steps.last().copied();
        if !self.misses_accept(phase) {
            return match last {
                Some(step) if self.shown_artifact(&step.tool) => step.tool.clone(),
                Some(step) => step.id.clone(),
                None => String::new(),
            };
        }
        granted
            .iter()
            .find(|t| self.shown_artifact(t) && !steps.iter().any(|s| s.tool == ***t))
            .map(|t| t.to_string())
            .unwrap_or_else(|| format!("{phase}-result"))
    }

    /// Whether the call's input shows `tool` declaring its artifact (`[world]
    /// declare_artifacts`: one named after the tool).
    fn shown_artifact(&self, tool: &str) -> bool {
        self.context
            .contains(&format!("\"artifacts\":[\"{tool}\"]"))
    }

    /// Rule 10: whether the plan grants `tool`, one some step uses, to no milestone.
    fn misses_tool(&self, tool: &str) -> bool {
        self.slips.plan_tool_miss > 0.0
            && self.task.steps.iter().any(|s| s.tool == tool)
            && self.draw(&format!("plan-tool-{tool}"), 0) < self.slips.plan_tool_miss
    }

    /// Rule 10: whether the milestone of `phase` is checked by an artifact no tool produces.
    fn misses_accept(&self, phase: &str) -> bool {
        self.slips.plan_accept_miss > 0.0
            && self.draw(&format!("plan-accept-{phase}"), 0) < self.slips.plan_accept_miss
    }

    /// Whether a call offering `tools` can name `step`'s tool.
    pub(super) fn offers(tools: &[String], step: &TaskStep) -> bool {
        tools.contains(&step.tool)
    }
}
