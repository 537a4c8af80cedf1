//! Reading a tactical answer: the step list it proposes, cut and validated, and which of its
//! steps name a value the planner was not shown.

use std::collections::BTreeSet;

use crate::domain::grounding::unshown_values;
use crate::domain::plan::error::{StepError, feedback};
use crate::domain::plan::validate::{PlanLimits, validate_steps};
use crate::domain::plan::{Milestone, Step, StepList, StepStatus};
use crate::domain::step_repeats::drop_repeated_calls;
use crate::engine::runtime::attempt::Asked;

use super::Ask;

/// Reads and validates a step list from the model's answer; `Err` is the feedback for a re-ask.
/// A continuation is the rest of a list: the calls already done are cut from it, and an empty
/// rest says the milestone's steps are done. With `may_be_done`, an empty first list says
/// another milestone made this one's change ([`super::made`]).
pub(super) fn parse(
    asked: &Asked,
    milestone: &Milestone,
    ask: Ask,
    may_be_done: bool,
    writes: &dyn Fn(&str) -> bool,
) -> Result<Vec<Step>, String> {
    let reply = asked
        .reply
        .as_ref()
        .map_err(|error| error.message.clone())?;
    let steps = serde_json::from_value::<StepList>(reply.value.clone())
        .map(|list| list.steps)
        .map_err(|error| format!("not a step list: {error}"))?;
    // Calls repeated with nothing between to change their answer are cut, not refused.
    let (mut steps, _dropped) = drop_repeated_calls(steps);
    // Two steps under one id are a slip of naming, not of planning: the 1.5B model's repair
    // was refused three times for it and the milestone went to a new strategy.
    rename_taken_ids(&mut steps, &BTreeSet::new());
    if ask == Ask::Continue {
        steps = continuation(milestone, steps, writes);
    }
    match validate_steps(&steps, milestone, &PlanLimits::default()) {
        Ok(()) => Ok(steps),
        Err(mut errors) => {
            // A tool outside the milestone's list is the executor's to refuse (and count as
            // drift), not a malformed proposal.
            // An empty continuation says the milestone's steps are done.
            let done = |e: &StepError| {
                matches!(e, StepError::Empty)
                    && (ask == Ask::Continue || (ask == Ask::Initial && may_be_done))
            };
            errors.retain(|e| !matches!(e, StepError::ToolNotAllowed { .. }) && !done(e));
            if errors.is_empty() {
                Ok(steps)
            } else {
                Err(feedback(&errors, 8))
            }
        }
    }
}

/// The rest of a list as a continuation writes it: a call identical to one the milestone
/// already made is cut (the model often writes the whole list again), unless a side effect
/// ran after it, and an id taken by a step that ran is renamed.
pub(super) fn continuation(
    milestone: &Milestone,
    steps: Vec<Step>,
    writes: &dyn Fn(&str) -> bool,
) -> Vec<Step> {
    let ran: Vec<&Step> = milestone
        .steps
        .iter()
        .filter(|s| s.status != StepStatus::Pending)
        .collect();
    let done_unchanged = |step: &Step| {
        ran.iter().enumerate().any(|(at, s)| {
            s.status == StepStatus::Done
                && s.tool == step.tool
                && s.args == step.args
                && !ran[at + 1..]
                    .iter()
                    .any(|later| later.status == StepStatus::Done && writes(&later.tool))
        })
    };
    let taken: BTreeSet<String> = ran.iter().map(|s| s.id.clone()).collect();
    let mut kept: Vec<Step> = steps.into_iter().filter(|s| !done_unchanged(s)).collect();
    rename_taken_ids(&mut kept, &taken);
    kept
}

/// Gives a step whose id is in `taken` or used by an earlier step of `steps` the first free
/// `sN`.
pub(super) fn rename_taken_ids(steps: &mut [Step], taken: &BTreeSet<String>) {
    let mut used = taken.clone();
    for step in steps.iter_mut() {
        if used.contains(&step.id) {
            let free = (1..).map(|n| format!("s{n}")).find(|id| !used.contains(id));
            step.id = free.unwrap_or_default();
        }
        used.insert(step.id.clone());
    }
}

/// The indices of the steps that name a value the planner was not shown.
pub(super) fn guesses(steps: &[Step], shown: &str) -> Vec<usize> {
    steps
        .iter()
        .enumerate()
        .filter(|(_, step)| !unshown_values(&step.args, shown).is_empty())
        .map(|(index, _)| index)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn step(id: &str, tool: &str, args: Value, status: StepStatus) -> Step {
        Step {
            id: id.into(),
            tool: tool.into(),
            args,
            expected_output: String::new(),
            status,
            attempt: 0,
        }
    }

    fn milestone(steps: Vec<Step>) -> Milestone {
        let mut m: Milestone = serde_json::from_value(json!({
            "id": "m1", "title": "Refunded", "depends_on": [], "effort": 1,
            "tools": ["list_orders", "refund_order"], "accept": {"type": "steps_succeeded"}
        }))
        .unwrap();
        m.steps = steps;
        m
    }

    fn writes(tool: &str) -> bool {
        tool == "refund_order"
    }

    #[test]
    fn a_continuation_cuts_calls_already_made_and_renames_taken_ids() {
        let listed = step(
            "s1",
            "list_orders",
            json!({"customer": "C-1"}),
            StepStatus::Done,
        );
        let m = milestone(vec![listed.clone()]);
        let rest = continuation(
            &m,
            vec![
                step(
                    "s1",
                    "list_orders",
                    json!({"customer": "C-1"}),
                    StepStatus::Pending,
                ),
                step(
                    "s1",
                    "refund_order",
                    json!({"order": "o-9"}),
                    StepStatus::Pending,
                ),
            ],
            &writes,
        );
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].tool, "refund_order");
        assert_eq!(rest[0].id, "s2", "s1 ran already");
    }

    #[test]
    fn two_steps_under_one_id_are_renamed_not_refused() {
        let mut steps = vec![
            step(
                "s1",
                "list_orders",
                json!({"customer": "C-1"}),
                StepStatus::Pending,
            ),
            step(
                "s1",
                "refund_order",
                json!({"order": "o-9"}),
                StepStatus::Pending,
            ),
            step(
                "s2",
                "refund_order",
                json!({"order": "o-8"}),
                StepStatus::Pending,
            ),
        ];
        rename_taken_ids(&mut steps, &BTreeSet::new());
        let ids: Vec<&str> = steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["s1", "s2", "s3"]);
    }

    #[test]
    fn a_read_after_a_write_is_not_cut() {
        let m = milestone(vec![
            step(
                "s1",
                "list_orders",
                json!({"customer": "C-1"}),
                StepStatus::Done,
            ),
            step(
                "s2",
                "refund_order",
                json!({"order": "o-9"}),
                StepStatus::Done,
            ),
        ]);
        let again = step(
            "s3",
            "list_orders",
            json!({"customer": "C-1"}),
            StepStatus::Pending,
        );
        let rest = continuation(&m, vec![again.clone()], &writes);
        assert_eq!(rest, vec![again]);
    }

    #[test]
    fn only_steps_naming_an_unshown_value_are_guesses() {
        let steps = [
            step(
                "s1",
                "list_orders",
                json!({"customer": "C-1"}),
                StepStatus::Pending,
            ),
            step(
                "s2",
                "refund_order",
                json!({"order": "o-9"}),
                StepStatus::Pending,
            ),
        ];
        assert_eq!(
            guesses(&steps, r#"{"goal": "refund the latest order of C-1"}"#),
            vec![1]
        );
        assert!(guesses(&steps, r#"{"goal": "refund o-9 of C-1"}"#).is_empty());
    }
}
