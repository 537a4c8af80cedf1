//! Attaching a step list to its milestone.

use crate::domain::plan::{Step, StepStatus};
use crate::engine::runtime::checkpoint::{Failure, TaskState};

use super::Ask;

/// A step list to attach, with what asked for it.
pub(super) struct Listed<'a> {
    pub(super) ask: Ask,
    pub(super) failure: Option<&'a Failure>,
    pub(super) steps: Vec<Step>,
    /// Indices in `steps` of the steps naming a value the planner was not shown.
    pub(super) guessed: &'a [usize],
}

/// Attaches a step list: L1 keeps the steps before the failing one and replaces the rest; a
/// continuation keeps the steps that ran; the initial list and L2 replace everything. A
/// re-planned step identical to one already performed keeps its idempotency key
/// (content-derived) and is answered from its receipt.
pub(super) fn attach(state: &mut TaskState, milestone_id: &str, listed: Listed<'_>) {
    let Listed {
        ask,
        failure,
        mut steps,
        guessed,
    } = listed;
    let next_step = state.runs.get(milestone_id).map_or(0, |run| run.next_step);
    let Some(milestone) = state
        .plan
        .as_mut()
        .and_then(|plan| plan.milestone_mut(milestone_id))
    else {
        return;
    };
    let keep = match (ask, failure.and_then(|f| f.step.as_deref())) {
        (Ask::RetryStep, Some(failed)) => milestone
            .steps
            .iter()
            .position(|s| s.id == failed)
            .unwrap_or(milestone.steps.len()),
        (Ask::Continue, _) => next_step.min(milestone.steps.len()),
        _ => 0,
    };
    let prior_attempt = milestone.steps.get(keep).map(|s| s.attempt).unwrap_or(0);
    for step in &mut steps {
        step.status = StepStatus::Pending;
        step.attempt = if ask == Ask::RetryStep {
            prior_attempt + 1
        } else {
            0
        };
    }
    milestone.steps.truncate(keep);
    milestone.steps.extend(steps);
    let run = state.run_mut(milestone_id);
    run.generation += 1;
    run.next_step = keep;
    run.needs_steps = false;
    // Answered: a later ask for this list is its continuation, not this repair again.
    run.pending_repair = None;
    run.guessed = guessed.iter().map(|i| keep + i).collect();
}
