//! What the tactical planner is shown: the prompt's input for one milestone, and on a repair
//! the failed list as a conversation.

use serde_json::{Value, json};

use super::made::Made;
use super::{Ask, Request};
use crate::domain::plan::{Milestone, Step, StepStatus};
use crate::engine::runtime::attempt::{Attempt, brief};
use crate::engine::runtime::checkpoint::TaskState;
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::Turn;

/// The tactical prompt's input: one milestone, its budget left, what its dependencies found,
/// the changes other milestones made ([`super::made`]), the schemas of the tools offered
/// ([`super::offer`]) and, on repair, what failed.
pub(super) fn input(
    cx: &Attempt,
    request: &Request<'_>,
    state: &TaskState,
    milestone: &Milestone,
    offered: &[String],
    made: &[Made],
) -> Value {
    let milestone_id = request.milestone_id;
    let observations: Vec<&Value> = state
        .runs
        .get(milestone_id)
        .map(|run| run.observations.iter().rev().take(12).collect())
        .unwrap_or_default();
    let mut remaining = state
        .ledger
        .as_ref()
        .map(|l| ledger::remaining(l, milestone_id))
        .unwrap_or_default();
    // Whole seconds: a step list does not turn on milliseconds, and a prompt that changed with
    // every millisecond of latency would make two identical runs differ (and defeat a
    // server's prompt cache).
    remaining.wall_ms = remaining.wall_ms.div_ceil(1000) * 1000;
    let mut remaining = json!(remaining);
    // Money is shown only where it is capped: an uncapped figure would be noise in every prompt.
    let money_capped = state
        .ledger
        .as_ref()
        .is_some_and(|l| l.book(crate::domain::ledger::Unit::Cost).capped());
    if let (false, Some(fields)) = (money_capped, remaining.as_object_mut()) {
        fields.remove("cost");
    }
    // A continuation is shown the steps that ran, not the rest it replaces: the rest holds the
    // very values it is asked to take from the outputs instead.
    let (current_steps, next) = if request.ask == Ask::Continue {
        let ran: Vec<&Step> = milestone
            .steps
            .iter()
            .filter(|s| s.status != StepStatus::Pending)
            .collect();
        (json!(ran), Some(CONTINUE))
    } else {
        (json!(milestone.steps), None)
    };
    let mut input = json!({
        "goal": cx.task().goal,
        "milestone": {"id": milestone.id, "title": milestone.title,
                      "outcome": milestone.outcome, "accept": milestone.accept},
        "remaining_budget": remaining,
        "dependency_results": dependency_results(state, milestone),
        "tools": cx.tool_schemas(offered),
        "repair": request.ask.repair_level(),
        "failure": request.failure,
        "current_steps": current_steps,
        "observations": observations,
        "validation_errors": request.errors,
    });
    if let Some(next) = next {
        input["next"] = json!(next);
    }
    // Only where there are some: most milestones' prompts stay as they were.
    if !made.is_empty() {
        input["changes_made"] = json!(made.iter().map(Made::shown).collect::<Vec<_>>());
    }
    // Steps are written for the plan as it stands now: a constraint raised while the task ran (a
    // tool's, a person's) binds them as it binds the plan.
    if !state.ladder.constraints.is_empty() {
        input["constraints"] = json!(state.ladder.constraint_texts());
    }
    input
}

/// What a continuation is asked.
const CONTINUE: &str = "The steps in current_steps ran; their outputs are in observations. \
    Write the steps this milestone still needs, the next one first, taking values from those \
    outputs. Do not repeat a step that ran. Answer an empty list when nothing is left to do.";

/// The text of an input a planner is shown, less the step list it may be replacing: a value
/// that appears only there is the planner's own earlier guess, not something it was shown.
pub(super) fn shown(input: &Value) -> String {
    let mut input = input.clone();
    if let Some(fields) = input.as_object_mut() {
        fields.remove("current_steps");
    }
    input.to_string()
}

/// The most calls of one dependency shown, latest first kept.
const MAX_DEPENDENCY_CALLS: usize = 8;

/// What each milestone this one depends on found: its successful calls, each with the
/// arguments it was called with, its output and its artifacts, so that a value comes with the
/// call that returned it. A milestone's merged artifacts cannot say that: when it looked up
/// services A and B, its one `owner` artifact is B's, and the real 1.5B model wrote A's note to
/// B's owner. The merged artifacts stand in only where no call is on record.
fn dependency_results(state: &TaskState, milestone: &Milestone) -> serde_json::Map<String, Value> {
    let found = |dep: &String| {
        let calls: Vec<Value> = state
            .runs
            .get(dep)
            .map(|run| {
                let ok: Vec<&Value> = run
                    .observations
                    .iter()
                    .filter(|o| o.get("ok") == Some(&Value::Bool(true)))
                    .collect();
                let skip = ok.len().saturating_sub(MAX_DEPENDENCY_CALLS);
                ok.into_iter()
                    .skip(skip)
                    .map(|o| {
                        json!({"tool": o.get("tool"), "args": o.get("args"),
                               "output": o.get("output"), "artifacts": o.get("artifacts")})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let value = if calls.is_empty() {
            json!({"artifacts": state.artifacts.get(dep)?})
        } else {
            json!({"calls": calls})
        };
        Some((dep.clone(), brief(&value, 6000)))
    };
    milestone.depends_on.iter().filter_map(found).collect()
}

/// On a repair, the list that failed as the model's own earlier answer and the failure as the
/// reply to it: a small model shown its failed list only inside the input proposes it again
/// (measured on the 1.5B model: the same list at L1, L2 and L3); as a conversation it reads as
/// "you said this, it failed". Empty for a first list.
pub(super) fn repair_turns(request: &Request<'_>, milestone: &Milestone) -> Vec<Turn> {
    let Some(failure) = request.failure.filter(|_| request.ask != Ask::Initial) else {
        return Vec::new();
    };
    let tried: Vec<Value> = milestone
        .steps
        .iter()
        .map(|s| json!({"id": s.id, "tool": s.tool, "args": s.args}))
        .collect();
    vec![
        Turn::model(json!({"steps": tried})),
        Turn::engine(json!({
            "failed": failure.step,
            "error": brief(&json!(failure.detail), 1000),
            "next": "That list failed. Write a different one: change the tool or the arguments \
                     the error points at; a list identical to a failed one is not run again.",
        })),
    ]
}
