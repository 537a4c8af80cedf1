//! A repair that proposes a list which already failed, read for what it still asks.
//!
//! On the real 1.5B model a repair rewrites the whole list it was shown: the calls that
//! succeeded, and the call that failed, again. Refusing that as a repeated fingerprint made the
//! first failure final (a leader pod found, then an invented second `find_pod` that was "not
//! found", proposed again at every rung). So before it is refused, the proposal is cut: a call
//! identical to one that failed in this milestone is not sent again, a call the milestone already
//! made is kept as done. What is left is a new list when it differs from every failed one: the
//! done steps, then anything new.
//!
//! When nothing is new and every step of the milestone succeeded, it was the check that failed,
//! and the step planner, asked what was missing, wrote the same correct list. Where a model's
//! verdict (a `verifier` leaf) is part of that check, the check is as suspect as the steps (live,
//! the 1.5B check verifier failed a right upload at every rung, "no `receipt` field", beside
//! the receipt). The milestone is then judged once with its verifier leaves replaced by what
//! the engine can stand behind (`steps_succeeded`: no step failed, one returned something, a
//! change it set out to make was made; and the artifacts its tools declare), which is recorded;
//! its programmatic leaves stay, and the goal verifier still judges the whole answer. A failed
//! command or a declared artifact never produced is a fact, not a suspect check: the repeat
//! stands.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::domain::plan::check::Check;
use crate::domain::plan::fingerprint::{Fingerprint, of_steps};
use crate::domain::plan::{Step, StepStatus};
use crate::engine::runtime::checkpoint::TaskState;

/// A repeated proposal, cut to what it still asks.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Recut {
    /// The milestone's done steps, then the calls not tried before (pending).
    pub(super) steps: Vec<Step>,
    /// How many leading steps are done (the next step to run).
    pub(super) done: usize,
    pub(super) fingerprint: Fingerprint,
    /// The proposed calls not sent again because they failed here.
    pub(super) cut_failed: Vec<Value>,
    /// Nothing was new on steps that all succeeded: judge by the engine's check.
    pub(super) engine_check: bool,
}

/// Cuts `proposed` (a repair's list whose fingerprint already failed in `milestone_id`); `None`
/// when nothing new is left to run or judge, and the repeat stands.
pub(super) fn recut(
    state: &TaskState,
    milestone_id: &str,
    proposed: &[Step],
    writes: &dyn Fn(&str) -> bool,
) -> Option<Recut> {
    let milestone = state.plan.as_ref()?.milestone(milestone_id)?;
    let run = state.runs.get(milestone_id)?;
    let failed_calls: Vec<(&str, &Value)> = run
        .observations
        .iter()
        .filter(|o| o.get("ok") == Some(&Value::Bool(false)))
        .filter_map(|o| Some((o.get("tool")?.as_str()?, o.get("args")?)))
        .collect();
    let failed_here = |step: &Step| {
        failed_calls
            .iter()
            .any(|(tool, args)| *tool == step.tool && **args == step.args)
    };
    let done: Vec<Step> = milestone
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Done)
        .cloned()
        .collect();
    let rest = super::proposal::continuation(milestone, proposed.to_vec(), writes);
    let cut_failed: Vec<Value> = rest
        .iter()
        .filter(|s| failed_here(s))
        .map(|s| json!({"tool": s.tool, "args": s.args}))
        .collect();
    let mut fresh: Vec<Step> = rest.into_iter().filter(|s| !failed_here(s)).collect();
    super::proposal::rename_taken_ids(&mut fresh, &taken(&milestone.steps));
    let mut steps = done.clone();
    steps.extend(fresh.iter().cloned().map(|mut s| {
        s.status = StepStatus::Pending;
        s.attempt = 0;
        s
    }));
    if steps.is_empty() {
        return None;
    }
    let fingerprint = of_steps(&steps);
    let all_succeeded =
        !milestone.steps.is_empty() && milestone.steps.iter().all(|s| s.status == StepStatus::Done);
    // Only a model's verdict is suspect: a command's exit code or an artifact a tool declares
    // and did not produce is a fact the repair must change.
    let judged_by_a_model = milestone
        .accept
        .leaves()
        .iter()
        .any(|leaf| matches!(leaf, Check::Verifier { .. }));
    let engine_check = fresh.is_empty() && all_succeeded && judged_by_a_model;
    let repeated = state.ladder.failed_before(milestone_id, &fingerprint);
    match (repeated, engine_check) {
        // Judged once by the engine's check; after that the repeat stands.
        (_, true) if run.engine_check => None,
        (true, false) => None,
        _ => Some(Recut {
            done: done.len(),
            steps,
            fingerprint,
            cut_failed,
            engine_check,
        }),
    }
}

fn taken(steps: &[Step]) -> BTreeSet<String> {
    steps.iter().map(|s| s.id.clone()).collect()
}

/// Puts a cut list in place: the done steps stay done, the rest runs from the first new one.
pub(super) fn attach(state: &mut TaskState, milestone_id: &str, recut: &Recut) {
    if let Some(milestone) = state
        .plan
        .as_mut()
        .and_then(|plan| plan.milestone_mut(milestone_id))
    {
        milestone.steps = recut.steps.clone();
    }
    let run = state.run_mut(milestone_id);
    run.generation += 1;
    run.next_step = recut.done;
    run.needs_steps = false;
    run.pending_repair = None;
    run.guessed.clear();
    run.engine_check |= recut.engine_check;
}
