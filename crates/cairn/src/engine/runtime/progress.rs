//! A task's progress (`Task.progress`), read from its checkpoint: what the HTTP layer shows
//! while the task runs.

use serde_json::Value;

use super::checkpoint::{EngineKind, Phase, TaskState};
use super::ledger::charged;
use crate::domain::plan::MilestoneStatus;
use crate::domain::progress::{CurrentMilestone, Progress};

/// The progress a stored checkpoint shows, `None` when it is no engine's state this runtime
/// knows (the test-only minimal engine's).
pub fn progress_of(state: &Value) -> Option<Progress> {
    serde_json::from_value::<TaskState>(state.clone())
        .ok()
        .map(|state| progress(&state))
}

/// How far the task has come. A baseline has no plan and no phases: it acts from the start,
/// and its spend is its overhead.
pub fn progress(state: &TaskState) -> Progress {
    let milestones = state.plan.iter().flat_map(|plan| plan.milestones.iter());
    let count = |status: MilestoneStatus| {
        let n = milestones.clone().filter(|m| m.status == status).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    let (phase, spent) = match state.engine {
        EngineKind::V2 => (state.phase, charged(state)),
        _ => (Phase::Execute, state.overhead),
    };
    Progress {
        phase,
        milestones_done: count(MilestoneStatus::Done),
        milestones_total: u32::try_from(milestones.clone().count()).unwrap_or(u32::MAX),
        current: milestones
            .filter(|m| m.status == MilestoneStatus::Active)
            .map(|m| CurrentMilestone {
                id: m.id.clone(),
                title: m.title.clone(),
            })
            .collect(),
        steps_completed: state.metrics.steps_completed,
        spent: spent.into(),
    }
}
