//! An L3 plan that repeats what failed: a plan identical to a failed one, or one that plans the
//! failed milestone again as it was (under another id). Refusing it outright made the
//! first failure final (on the real 1.5B model every strategic re-proposal after a failed
//! milestone repeated the first plan, and the task stopped); instead it is asked once more with
//! the repeat stated and without the tools that failed in that milestone and never succeeded
//! there, so the answer's schema no longer allows the call that failed. A second repeat is
//! refused.
//!
//! Two failures are not the tool's fault, and its tool is offered still: an answer that asked
//! for the call again ("gone; look it up again", "call it again"), and a change the goal names
//! (`add_to_team` for "... add that user to team data", whose "not found" named the team the
//! model had invented). Withholding them made the loss final on the real 1.5B model: the
//! re-ask offered a distractor in the pull request's place. A failed milestone whose tool asked
//! for its call again is not a repeat when planned again as it was: that is what the answer
//! asked, and its run keeps the outputs the new attempt needs.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Replan;
use crate::domain::plan::{Milestone, MilestoneStatus, Plan};
use crate::domain::repair::ReplanReason;
use crate::engine::planner::follow_up::{UNREACHED, asks_again};
use crate::engine::planner::tactical::{failing_tools, goal_names_action};
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::TaskState;

/// The failed milestone as the current plan holds it, when `replan` is a failure's L3 (a
/// person's constraint replans a milestone that did not fail).
pub(super) fn failed_milestone<'a>(
    snapshot: &'a TaskState,
    replan: Option<&Replan<'_>>,
) -> Option<&'a Milestone> {
    let replan = replan.filter(|r| r.failure.reason != ReplanReason::NewConstraint)?;
    snapshot.plan.as_ref()?.milestone(replan.milestone?)
}

/// The unfinished milestone of `plan` that plans `failed` again: the same title, outcome, tools
/// and check under any id. One that keeps the tools and the check but says another thing (a
/// rename "in the config and the start script" after the config alone failed its tests) asks
/// its steps a different question, and runs.
pub(super) fn repeats<'a>(plan: &'a Plan, failed: &Milestone) -> Option<&'a Milestone> {
    let tools = |m: &Milestone| m.tools.iter().cloned().collect::<BTreeSet<_>>();
    plan.milestones.iter().find(|m| {
        m.status != MilestoneStatus::Done
            && tools(m) == tools(failed)
            && m.accept == failed.accept
            && m.outcome == failed.outcome
            && m.title == failed.title
    })
}

/// The tools `milestone` called that failed and never succeeded in it, less those that are
/// still wanted ([`asked_again`], a change `goal` names): what the re-ask does not offer.
fn failed_tools(
    snapshot: &TaskState,
    milestone: &str,
    wanted: &dyn Fn(&str) -> bool,
) -> BTreeSet<String> {
    let again = asked_again_in(snapshot, milestone);
    snapshot
        .runs
        .get(milestone)
        .map_or_else(BTreeSet::new, |run| {
            failing_tools(&run.observations)
                .into_iter()
                .filter(|t| !again.contains(*t) && !wanted(t))
                .map(str::to_string)
                .collect()
        })
}

/// Whether `tool` makes a change the goal names: never withheld from a re-ask.
pub(super) fn wanted(cx: &Attempt, tool: &str) -> bool {
    cx.specs.get(tool).is_some_and(|spec| spec.side_effects)
        && goal_names_action(&cx.task().goal, tool)
}

/// The failed milestone's tools whose failed answer asked for the call again and that have not
/// succeeded there: planning the milestone again is what that answer asked, not a repeat.
pub(super) fn asked_again(snapshot: &TaskState, replan: Option<&Replan<'_>>) -> BTreeSet<String> {
    failed_milestone(snapshot, replan)
        .map(|m| asked_again_in(snapshot, &m.id))
        .unwrap_or_default()
}

fn asked_again_in(snapshot: &TaskState, milestone: &str) -> BTreeSet<String> {
    let Some(run) = snapshot.runs.get(milestone) else {
        return BTreeSet::new();
    };
    let failing = failing_tools(&run.observations);
    run.observations
        .iter()
        .filter(|o| o.get("ok") == Some(&Value::Bool(false)) && o.get(UNREACHED).is_none())
        .filter(|o| asks_again(o))
        .filter_map(|o| o.get("tool").and_then(Value::as_str))
        .filter(|t| failing.contains(t))
        .map(str::to_string)
        .collect()
}

/// What the re-ask is told: what repeats, how it failed, and what is no longer offered.
fn told(
    what: &str,
    failed: Option<&Milestone>,
    detail: &str,
    withheld: &BTreeSet<String>,
) -> String {
    let mut said = format!("{what}; it is not run again: plan another way to reach the goal");
    if let Some(failed) = failed {
        said.push_str(&format!(
            ". Milestone {} ({}) with tools [{}] failed: {}",
            failed.id,
            failed.title,
            failed.tools.join(", "),
            detail
        ));
    }
    if !withheld.is_empty() {
        let names: Vec<&str> = withheld.iter().map(String::as_str).collect();
        said.push_str(&format!(
            ". Not offered now (failed there, never succeeded): {}",
            names.join(", ")
        ));
    }
    said
}

/// The permitted tools less those `withheld` after a repeat.
pub(super) fn offered(permitted: &[String], withheld: Option<&BTreeSet<String>>) -> Vec<String> {
    permitted
        .iter()
        .filter(|t| !withheld.is_some_and(|w| w.contains(*t)))
        .cloned()
        .collect()
}

/// What a first repeat is told (the repeat, the failed milestone and how it failed) and the
/// tools the re-ask does not offer.
pub(super) fn retry(
    snapshot: &TaskState,
    replan: Option<&Replan<'_>>,
    what: &str,
    wanted: &dyn Fn(&str) -> bool,
) -> (String, BTreeSet<String>) {
    let failed = failed_milestone(snapshot, replan);
    let left = failed
        .map(|m| failed_tools(snapshot, &m.id, wanted))
        .unwrap_or_default();
    let detail = replan.map_or("", |r| r.failure.detail.as_str());
    (told(what, failed, detail, &left), left)
}
