//! A failed step a repair replaced is followed up before its milestone is checked.
//!
//! A repair may answer a failed step with a recovery call alone: live on the 1.5B model a read
//! failed with "no such file ...; to recover: call locate ..., then read_file again", the repair
//! wrote `locate` only, it succeeded, and the milestone passed on it (`steps_succeeded` judges
//! the list that ran) without the value the read was for; the next milestone then wrote the
//! placeholder "deploy_key_id" where the key id belonged. So when a milestone's list has run
//! and a granted tool whose own answer failed asking for its call again ("... then read_file
//! again", "look it up again") is neither in that list nor succeeded since, the rest is asked
//! for once more with the outputs in view (a continuation), the tool named; an empty answer
//! says the milestone is done, and it is checked as before. Each tool is followed up once per
//! milestone; never a dead end ("not found"), a transient fault or a tool gone, and never after
//! a list that made a change.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::domain::plan::{Milestone, StepStatus};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Record, TaskState};

/// Marks an observation of a call the tool never answered itself (a transient fault, a tool
/// gone): an unavailable tool is not asked for again.
pub const UNREACHED: &str = "unreached";

/// The key of the engine's note to its planner in a milestone's observations: not evidence
/// for the goal verifier.
pub const NOTE: &str = "note";

/// Stages the follow-up when one is due; `true` when the milestone's rest is to be asked for.
pub async fn ask_if_due(cx: &Attempt, milestone_id: &str) -> Result<bool, Halt> {
    let writes = |tool: &str| cx.specs.get(tool).is_some_and(|spec| spec.side_effects);
    let (_, due) = cx
        .journal
        .stage(|state| {
            let tools = due(state, milestone_id, &writes);
            if tools.is_empty() {
                return Ok((Record::default(), false));
            }
            let names: Vec<&str> = tools.iter().map(String::as_str).collect();
            let run = state.run_mut(milestone_id);
            run.followed_up.extend(tools.iter().cloned());
            run.needs_steps = true;
            run.observations.push(json!({
                NOTE: format!(
                    "{} failed earlier in this milestone and has not run since; if the \
                     milestone still needs it, write it with values from the outputs above",
                    names.join(", ")
                )
            }));
            Ok((Record::default(), true))
        })
        .await?;
    Ok(due)
}

/// The tools the milestone is granted that failed in it, are not in its current list, have not
/// succeeded since their last failure, and were not followed up yet; none after a change.
fn due(state: &TaskState, milestone_id: &str, writes: &dyn Fn(&str) -> bool) -> BTreeSet<String> {
    let Some(run) = state.runs.get(milestone_id) else {
        return BTreeSet::new();
    };
    let Some(milestone) = state.plan.as_ref().and_then(|p| p.milestone(milestone_id)) else {
        return BTreeSet::new();
    };
    // A list that made a change has done the milestone's work: a read that failed before it
    // is not asked for again (live, a "not found" listing was followed up after the copy the
    // goal asked for had been made, and the model listed again and lost the task).
    if wrote(milestone, writes) {
        return BTreeSet::new();
    }
    let listed: BTreeSet<&str> = milestone.steps.iter().map(|s| s.tool.as_str()).collect();
    // Only a tool the milestone is granted now: one a new strategy took away is not its to redo.
    let granted: BTreeSet<&str> = milestone.tools.iter().map(String::as_str).collect();
    let mut open: BTreeSet<String> = BTreeSet::new();
    for observation in &run.observations {
        let Some(tool) = observation.get("tool").and_then(Value::as_str) else {
            continue;
        };
        match observation.get("ok") {
            Some(Value::Bool(false))
                if observation.get(UNREACHED).is_none() && asks_again(observation) =>
            {
                open.insert(tool.to_string());
            }
            Some(Value::Bool(true)) => {
                open.remove(tool);
            }
            _ => {}
        }
    }
    open.into_iter()
        .filter(|tool| granted.contains(tool.as_str()) && !listed.contains(tool.as_str()))
        .filter(|tool| !run.followed_up.contains(tool))
        .collect()
}

/// Whether a side-effecting call of the list that ran succeeded.
fn wrote(milestone: &Milestone, writes: &dyn Fn(&str) -> bool) -> bool {
    milestone
        .steps
        .iter()
        .any(|s| s.status == StepStatus::Done && writes(&s.tool))
}

/// Whether a failed answer asks for its call again ("... then read_file again", "look it up
/// again", "retry"): the call is still wanted once something else is done. A dead end ("not
/// found: nothing matches") is not: live, following one up had the model call the distractor
/// that answered it again.
pub(in crate::engine::planner) fn asks_again(observation: &Value) -> bool {
    let error = observation
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_lowercase();
    error
        .split(|c: char| !c.is_alphanumeric())
        .any(|word| matches!(word, "again" | "retry"))
}
