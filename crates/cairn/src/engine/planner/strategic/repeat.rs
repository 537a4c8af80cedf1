//! An L3 plan that repeats what failed: a plan identical to a failed one, or one that plans the
//! failed milestone again as it was (under another id). Refusing it outright made the
//! first failure final (on the real 1.5B model every strategic re-proposal after a failed
//! milestone repeated the first plan, and the task stopped); instead it is asked once more with
//! the repeat stated and without the tools that failed in that milestone and never succeeded
//! there, so the answer's schema no longer allows the call that failed. A second repeat is
//! refused.

use std::collections::BTreeSet;

use super::Replan;
use crate::domain::plan::{Milestone, MilestoneStatus, Plan};
use crate::domain::repair::ReplanReason;
use crate::engine::planner::tactical::failing_tools;
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

/// The tools `milestone` called that failed and never succeeded in it: what the re-ask does not
/// offer.
fn failed_tools(snapshot: &TaskState, milestone: &str) -> BTreeSet<String> {
    snapshot
        .runs
        .get(milestone)
        .map_or_else(BTreeSet::new, |run| {
            failing_tools(&run.observations)
                .into_iter()
                .map(str::to_string)
                .collect()
        })
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
) -> (String, BTreeSet<String>) {
    let failed = failed_milestone(snapshot, replan);
    let left = failed
        .map(|m| failed_tools(snapshot, &m.id))
        .unwrap_or_default();
    let detail = replan.map_or("", |r| r.failure.detail.as_str());
    (told(what, failed, detail, &left), left)
}
