//! One run's record: what the report counts of a (task, strategy, repeat), built from the
//! finished task, the world's state and the run's events and plan versions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::funnel::{Evidence, Funnel, RepairYield};
use crate::suite::SuiteTask;
use crate::world::World;
use cairn::domain::event::Event;
use cairn::domain::gate::Route;
use cairn::domain::report::{Metrics, TaskReport};
use cairn::domain::task::{Strategy, Task, TaskStatus};
use cairn::store::PlanVersionRecord;

/// One (task, strategy, repeat) run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub task: String,
    pub category: String,
    pub fault: Option<String>,
    pub strategy: String,
    pub repeat: u32,
    pub status: String,
    /// What the strategy claimed: the run ended `succeeded`.
    #[serde(default)]
    pub claimed: bool,
    /// The suite's acceptance check, read from the simulated world's state.
    pub verified: bool,
    pub tokens: u64,
    pub tool_calls: u64,
    pub model_calls: u32,
    pub wall_ms: u64,
    pub repairs: BTreeMap<String, u64>,
    /// v2/auto: the gate's route (`direct` or `plan`).
    pub gate: Option<String>,
    pub fault_fired: bool,
    /// Whether the run was verified although the injected fault fired.
    pub recovered: Option<bool>,
    pub repeated_side_effects: u32,
    /// Calls the world refused because a prerequisite step had not happened yet.
    #[serde(default)]
    pub misordered: u32,
    /// Ground-truth steps performed (each counted once), and performances of them again:
    /// work a replan threw away and did over (reads as well as writes).
    #[serde(default)]
    pub steps_performed: u32,
    #[serde(default)]
    pub steps_redone: u32,
    /// Where the run was lost (docs/evaluation.md, "Funnel"); every stage `None` in a log
    /// recorded before the funnel was.
    #[serde(default)]
    pub funnel: Funnel,
    /// What the run's repairs yielded (planned runs).
    #[serde(default)]
    pub repair_yield: RepairYield,
}

/// What a run's record is built from.
#[derive(Clone, Copy)]
pub struct RunInputs<'a> {
    pub task: &'a SuiteTask,
    pub strategy: Strategy,
    pub repeat: u32,
    /// The finished task.
    pub run: &'a Task,
    pub world: &'a World,
    /// What the run left as artifacts, read as its answer when it gave none.
    pub found: &'a Value,
    /// The run's events, in order, and its plan versions.
    pub events: &'a [Event],
    pub plans: &'a [PlanVersionRecord],
}

/// The repairs per level, by the level's name.
fn repairs(metrics: &Metrics) -> BTreeMap<String, u64> {
    [
        ("retry_step", metrics.repairs_retry_step),
        ("replan_milestone", metrics.repairs_replan_milestone),
        ("replan_strategy", metrics.repairs_replan_strategy),
    ]
    .into_iter()
    .map(|(level, count)| (level.to_string(), u64::from(count)))
    .collect()
}

fn wall_ms(run: &Task) -> u64 {
    match (run.started_at, run.finished_at) {
        (Some(start), Some(end)) => u64::try_from((end - start).num_milliseconds()).unwrap_or(0),
        _ => 0,
    }
}

impl Record {
    pub fn from_run(inputs: &RunInputs<'_>) -> Record {
        let RunInputs {
            task,
            strategy,
            repeat,
            run,
            world,
            found,
            events,
            plans,
        } = *inputs;
        let report = TaskReport::read(run.result.as_ref());
        let claimed = run.status == TaskStatus::Succeeded;
        let answer = report
            .answer()
            .filter(|a| !a.is_null())
            .or(Some(found).filter(|_| claimed));
        let verified = world.accept(task, run.id, answer);
        let state = world.task_world(run.id);
        let gate = report.route().map(|route| {
            match route {
                Route::Direct => "direct",
                Route::Plan => "plan",
            }
            .to_string()
        });
        let funnel = Funnel::of(&Evidence {
            task,
            strategy: strategy.as_str(),
            gate: gate.as_deref(),
            events,
            plans,
            world: &state,
        });
        let repair_yield = RepairYield::of(events, funnel.checks_passed == Some(true));
        let fault_fired = state.fault_hits > 0;
        Record {
            task: task.id.clone(),
            category: task.category.as_str().into(),
            fault: task.fault.as_ref().map(|f| f.kind.as_str().to_string()),
            strategy: strategy.as_str().into(),
            repeat,
            status: run.status.as_str().into(),
            claimed,
            verified,
            tokens: report.spend.tokens,
            tool_calls: report.spend.tool_calls,
            model_calls: state.model_calls,
            wall_ms: wall_ms(run),
            repairs: repairs(&report.metrics),
            gate,
            fault_fired,
            recovered: fault_fired.then_some(verified),
            repeated_side_effects: state.repeated_side_effects,
            misordered: state.misordered,
            steps_performed: state.performed.values().filter(|n| **n > 0).count() as u32,
            steps_redone: state.performed.values().map(|n| n.saturating_sub(1)).sum(),
            funnel,
            repair_yield,
        }
    }

    /// Whether the run replanned (L2 or L3): where completed work can be kept or lost.
    pub fn replanned(&self) -> bool {
        ["replan_milestone", "replan_strategy"]
            .iter()
            .any(|level| self.repairs.get(*level).copied().unwrap_or(0) > 0)
    }
}
