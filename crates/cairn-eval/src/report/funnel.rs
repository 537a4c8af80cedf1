//! Where a run was lost, and what its repairs yielded (docs/evaluation.md, "Funnel"): read from
//! the run's events and plan versions, and from what the world recorded of its tool calls, so
//! that it can be computed over hand-written event lists.
//!
//! The stages, in order: a plan accepted, the first plan granting every tool the ground truth
//! uses, the first tool call right, a value carried from one step into a later one, every
//! milestone of the final plan passing its check, and the world's verdict (kept on the record).
//! A stage is `None` where it does not apply, so the counts read "reached / applicable".

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::suite::{SuiteTask, fact_refs};
use crate::world::TaskWorld;
use cairn::domain::event::Event;
use cairn::domain::event::kinds::{
    MONITOR_DECIDED, PLAN_ACCEPTED, PLAN_DECLINED, PLAN_REFUSED, STEPS_PLANNED, STEPS_REFUSED,
    V1_LIST,
};
use cairn::store::PlanVersionRecord;

/// The funnel's stages of one run, each `None` where it does not apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Funnel {
    /// A plan was accepted (v2 and auto routed to the planner: `plan.accepted`; v1: a list
    /// with at least one step, where the task has steps or v1 wrote one).
    pub plan_accepted: Option<bool>,
    /// The first accepted plan grants every tool the task's ground-truth steps use (v1: its
    /// first list calls them).
    pub tools_granted: Option<bool>,
    /// The first tool call was right: a valid performance of a ground-truth step, or the call
    /// the injected fault answered in its place.
    pub first_call_right: Option<bool>,
    /// A step using a fact an earlier step revealed was performed validly.
    pub value_carried: Option<bool>,
    /// Every milestone of the final plan passed its acceptance check (planned runs).
    pub checks_passed: Option<bool>,
}

/// What a planned run's repairs yielded: the step lists (L1, L2) and plans (L3) the model
/// proposed as repairs, those not refused as repeating a failed proposal, and those of them
/// followed by their milestone passing (an L3 plan: by every milestone of the final plan
/// passing, when it is the final plan). A malformed proposal, refused by validation, is not
/// counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairYield {
    pub repairs_proposed: u32,
    pub repairs_different: u32,
    pub repairs_then_passed: u32,
}

impl RepairYield {
    pub fn add(&mut self, other: RepairYield) {
        self.repairs_proposed += other.repairs_proposed;
        self.repairs_different += other.repairs_different;
        self.repairs_then_passed += other.repairs_then_passed;
    }
}

/// What the funnel of one run is read from.
pub struct Evidence<'a> {
    pub task: &'a SuiteTask,
    /// The strategy's wire name (`v2`, `auto`, ...).
    pub strategy: &'a str,
    /// The gate's route (`direct`, `plan`), where a gate decided.
    pub gate: Option<&'a str>,
    /// The run's events, in order.
    pub events: &'a [Event],
    pub plans: &'a [PlanVersionRecord],
    pub world: &'a TaskWorld,
}

/// How a run came to a plan, if it could.
#[derive(Clone, Copy, PartialEq)]
enum Planning {
    /// one_shot, reactive, a direct route, a declined plan: nothing to accept.
    None,
    /// v1: a full list of steps.
    List,
    /// The planning engine: milestones with checks.
    Milestones,
}

impl Evidence<'_> {
    fn of_kind<'e>(&'e self, kind: &'e str) -> impl Iterator<Item = &'e Event> + 'e {
        self.events.iter().filter(move |e| e.kind == kind)
    }

    fn planning(&self) -> Planning {
        // An `auto` run the rollout sent to v1 writes v1's lists.
        if self.strategy == "v1" || self.of_kind(V1_LIST).next().is_some() {
            return Planning::List;
        }
        let direct = self.gate == Some("direct") || self.of_kind(PLAN_DECLINED).next().is_some();
        match self.strategy {
            "v2" | "auto" if !direct => Planning::Milestones,
            _ => Planning::None,
        }
    }

    /// The tools the first plan grants (v1: the tools its first list with steps calls);
    /// `None` when there was no such plan.
    fn first_tools(&self, planning: Planning) -> Option<BTreeSet<String>> {
        let names = |items: &Value, field: &str| -> BTreeSet<String> {
            let named = |item: &Value| match &item[field] {
                Value::Array(tools) => tools.iter().filter_map(tool_name).collect(),
                other => tool_name(other).into_iter().collect::<Vec<_>>(),
            };
            items
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(named)
                .collect()
        };
        match planning {
            Planning::None => None,
            Planning::List => self
                .of_kind(V1_LIST)
                .map(|e| &e.data["steps"])
                .find(|steps| steps.as_array().is_some_and(|s| !s.is_empty()))
                .map(|steps| names(steps, "tool")),
            Planning::Milestones => {
                let first = self.plans.iter().min_by_key(|p| p.version)?;
                Some(names(&first.plan["milestones"], "tools"))
            }
        }
    }

    /// Whether every milestone of the final plan (the latest plan version) passed its check:
    /// the last verdict on it is `passed`.
    fn final_checks_passed(&self) -> bool {
        let Some(last) = self.plans.iter().max_by_key(|p| p.version) else {
            return false;
        };
        let ids: Vec<&str> = last.plan["milestones"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["id"].as_str())
            .collect();
        !ids.is_empty()
            && ids
                .iter()
                .all(|id| last_verdict(self.events, id) == Some("passed"))
    }
}

fn tool_name(value: &Value) -> Option<String> {
    value.as_str().map(str::to_string)
}

/// The last monitor verdict on `milestone`.
fn last_verdict<'e>(events: &'e [Event], milestone: &str) -> Option<&'e str> {
    events
        .iter()
        .rev()
        .filter(|e| e.kind == MONITOR_DECIDED && e.data["milestone"] == milestone)
        .find_map(|e| e.data["decision"].as_str())
}

/// The steps whose arguments use a fact an earlier step reveals: where a value must be
/// carried from one result into a later call.
pub fn dependent_steps(task: &SuiteTask) -> Vec<&str> {
    let mut revealed: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for step in &task.steps {
        let mut uses = step.args.values().flat_map(|v| fact_refs(v));
        if uses.any(|fact| revealed.contains(fact.as_str())) {
            out.push(step.id.as_str());
        }
        revealed.extend(step.reveals.keys().map(String::as_str));
    }
    out
}

impl Funnel {
    pub fn of(evidence: &Evidence<'_>) -> Funnel {
        let planning = evidence.planning();
        let first = evidence.first_tools(planning);
        let plan_accepted = match planning {
            Planning::None => None,
            // A question v1 answered without a list of steps needed none.
            Planning::List if first.is_none() && evidence.task.steps.is_empty() => None,
            Planning::List => Some(first.is_some()),
            Planning::Milestones => Some(evidence.of_kind(PLAN_ACCEPTED).next().is_some()),
        };
        let accepted = plan_accepted == Some(true);
        let steps = &evidence.task.steps;
        let tools_granted = (accepted && !steps.is_empty()).then(|| {
            let granted = first.unwrap_or_default();
            steps.iter().all(|s| granted.contains(&s.tool))
        });
        let first_call_right =
            (!steps.is_empty()).then(|| evidence.world.first_call_right == Some(true));
        let dependent = dependent_steps(evidence.task);
        let performed = |id: &str| evidence.world.performed.get(id).copied().unwrap_or(0) > 0;
        let value_carried =
            (!dependent.is_empty()).then(|| dependent.iter().any(|id| performed(id)));
        let checks_passed =
            (accepted && planning == Planning::Milestones).then(|| evidence.final_checks_passed());
        Funnel {
            plan_accepted,
            tools_granted,
            first_call_right,
            value_carried,
            checks_passed,
        }
    }
}

/// Whether `milestone` passed after the event at `index`, before its next repair proposal or
/// a new plan.
fn passed_after(events: &[Event], index: usize, milestone: &Value) -> bool {
    for e in events.iter().skip(index + 1) {
        let mine = e.data["milestone"] == *milestone;
        match e.kind.as_str() {
            PLAN_ACCEPTED => return false,
            MONITOR_DECIDED if mine && e.data["decision"] == "passed" => return true,
            STEPS_PLANNED | STEPS_REFUSED if mine && !e.data["level"].is_null() => return false,
            _ => {}
        }
    }
    false
}

impl RepairYield {
    /// The repair yield of a run's events; `checks_passed`: whether the final plan's milestones
    /// all passed (what an L3 plan that stayed the final one is credited with).
    pub fn of(events: &[Event], checks_passed: bool) -> RepairYield {
        let mut y = RepairYield::default();
        let last_plan = events.iter().rposition(|e| e.kind == PLAN_ACCEPTED);
        for (index, e) in events.iter().enumerate() {
            let data = &e.data;
            let (proposed, different, passed) = match e.kind.as_str() {
                STEPS_PLANNED if !data["level"].is_null() => {
                    (true, true, passed_after(events, index, &data["milestone"]))
                }
                STEPS_REFUSED if data.get("repeated_fingerprint").is_some() => (true, false, false),
                PLAN_ACCEPTED if data["reason"] == "replan_strategy" => {
                    (true, true, checks_passed && last_plan == Some(index))
                }
                PLAN_REFUSED if data["repeated"] == true => (true, false, false),
                _ => (false, false, false),
            };
            y.repairs_proposed += u32::from(proposed);
            y.repairs_different += u32::from(different);
            y.repairs_then_passed += u32::from(passed);
        }
        y
    }
}
