//! Checks the engine can stand behind, and milestones it can run.
//!
//! A planner names artifacts in its checks; when a milestone's tools declare none (as MCP
//! tools and most HTTP tools do), nothing says what they will name their results, and a check
//! on a name of the planner's choosing fails however right the steps were (measured live on
//! the 1.5B model: 16 runs of the fair suite had every step right and failed on a check naming
//! `user_id`, `service` or `owner_info`, which no tool produces). So before a plan runs, every
//! `artifact` or `schema` leaf that no granted tool declares, on a milestone granted a tool
//! that declares nothing, becomes `steps_succeeded`: the steps ran without failing and one
//! returned something. A leaf on declared artifacts stays; one that names an artifact none of
//! its fully-declared tools produces is still refused ([`super::validate`]), with the names
//! they do produce.
//!
//! A milestone granted no tool can run no step: its outcome (a summary, a "report") is the
//! goal's answer, which the goal-level verifier judges. Instead of refusing the whole plan for
//! it (the planner re-proposed such a milestone three times running), it is folded away: its
//! dependents depend on what it depended on. A plan whose every unfinished milestone is tool-less
//! is left as it is, for validation to refuse.
//!
//! Each change is returned as an [`Amendment`], recorded with the accepted plan.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::check::{Check, is_empty};
use super::known::KnownTools;
use super::{MilestoneStatus, Plan, Step, StepStatus};

/// One change the engine made to a proposed plan before accepting it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Amendment {
    /// A check leaf no granted tool could back became `steps_succeeded`.
    CheckBacked { milestone: String, replaced: Check },
    /// A milestone granted no tool was folded into its dependents.
    Folded { milestone: String, title: String },
    /// A dependency naming a tool, not a milestone, became a tool of the milestone.
    DependencyTool { milestone: String, tool: String },
}

/// Makes every milestone's check one its tools can back, and folds tool-less unfinished
/// milestones away. `finished` names the milestones an L3 replan re-proposes that its current
/// version finished: their checks are amended by the same rule, so a re-proposal as first
/// written matches the amended version kept (carry-over holds them to it), but only the
/// unfinished ones' changes are listed.
pub fn amend(plan: &mut Plan, tools: &KnownTools, finished: &BTreeSet<String>) -> Vec<Amendment> {
    let open =
        |m: &super::Milestone| m.status != MilestoneStatus::Done && !finished.contains(&m.id);
    let mut amendments = tools_named_as_dependencies(plan, tools, &open);
    amendments.extend(fold_toolless(plan, &open));
    for m in &mut plan.milestones {
        if m.tools.is_empty() || !tools.declares_nothing(&m.tools) {
            continue;
        }
        let backed = |name: &str| tools.declares(name, &m.tools);
        let replaced = back(&mut m.accept, &backed);
        if open(m) {
            amendments.extend(replaced.into_iter().map(|replaced| Amendment::CheckBacked {
                milestone: m.id.clone(),
                replaced,
            }));
        }
    }
    amendments
}

/// Replaces the leaves of `check` that name an artifact `backed` does not vouch for; returns
/// them. Inside `all`, `steps_succeeded` is kept once.
fn back(check: &mut Check, backed: &dyn Fn(&str) -> bool) -> Vec<Check> {
    let unbacked = match &*check {
        Check::Artifact { name, .. } | Check::Schema { artifact: name, .. } => !backed(name),
        _ => false,
    };
    if unbacked {
        return vec![std::mem::replace(check, Check::StepsSucceeded)];
    }
    let Check::All { checks } = check else {
        return Vec::new();
    };
    let replaced: Vec<Check> = checks.iter_mut().flat_map(|c| back(c, backed)).collect();
    let mut seen = false;
    checks.retain(|c| match c {
        Check::StepsSucceeded => !std::mem::replace(&mut seen, true),
        _ => true,
    });
    let only = match checks.as_slice() {
        [only] => Some(only.clone()),
        _ => None,
    };
    if let Some(only) = only {
        *check = only;
    }
    replaced
}

/// Removes unfinished milestones granted no tool, unless every unfinished one is; a removed
/// milestone's dependents inherit its dependencies.
/// A dependency that names a registered tool and no milestone is the tool the milestone needs
/// (measured live on the 1.5B model: every strategic answer for a paging task wrote
/// `depends_on: ["get_oncall"]`, and validation refused each plan). It moves to the milestone's
/// tools; a name that is neither stays, for validation to refuse.
fn tools_named_as_dependencies(
    plan: &mut Plan,
    tools: &KnownTools,
    open: &dyn Fn(&super::Milestone) -> bool,
) -> Vec<Amendment> {
    let ids: BTreeSet<String> = plan.milestones.iter().map(|m| m.id.clone()).collect();
    let mut amendments = Vec::new();
    for m in plan.milestones.iter_mut().filter(|m| open(m)) {
        let (named, kept): (Vec<String>, Vec<String>) = m
            .depends_on
            .drain(..)
            .partition(|dep| !ids.contains(dep) && tools.contains(dep));
        m.depends_on = kept;
        for tool in named {
            if !m.tools.contains(&tool) {
                m.tools.push(tool.clone());
            }
            amendments.push(Amendment::DependencyTool {
                milestone: m.id.clone(),
                tool,
            });
        }
    }
    amendments
}

fn fold_toolless(plan: &mut Plan, open: &dyn Fn(&super::Milestone) -> bool) -> Vec<Amendment> {
    let toolless: Vec<(String, String, Vec<String>)> = plan
        .milestones
        .iter()
        .filter(|m| open(m) && m.tools.is_empty())
        .map(|m| (m.id.clone(), m.title.clone(), m.depends_on.clone()))
        .collect();
    let runnable = plan.milestones.iter().filter(|m| open(m)).count() - toolless.len();
    if toolless.is_empty() || runnable == 0 {
        return Vec::new();
    }
    let folded: BTreeSet<&str> = toolless.iter().map(|(id, _, _)| id.as_str()).collect();
    plan.milestones.retain(|m| !folded.contains(m.id.as_str()));
    for m in &mut plan.milestones {
        // Transitively: a chain of tool-less milestones passes its dependencies on.
        let mut deps: Vec<String> = Vec::new();
        let mut queue: Vec<String> = m.depends_on.clone();
        let mut visited = BTreeSet::new();
        while let Some(dep) = queue.pop() {
            if !visited.insert(dep.clone()) {
                continue;
            }
            match toolless.iter().find(|(id, _, _)| *id == dep) {
                Some((_, _, inherited)) => queue.extend(inherited.iter().cloned()),
                None if !deps.contains(&dep) => deps.push(dep),
                None => {}
            }
        }
        // Its own dependencies in their order, inherited ones after.
        deps.sort_by_key(|d| {
            m.depends_on
                .iter()
                .position(|x| x == d)
                .unwrap_or(usize::MAX)
        });
        m.depends_on = deps;
    }
    toolless
        .into_iter()
        .map(|(milestone, title, _)| Amendment::Folded { milestone, title })
        .collect()
}

/// Set on the observation of a write that was not sent again because an identical call was in
/// flight when its answer was lost: it may have happened.
pub const OUTCOME_UNKNOWN: &str = "outcome_unknown";

/// Whether a milestone's steps succeeded: none of `steps` failed, one is done, the latest
/// observation (`{"step", "tool", "ok", "output", "artifacts"}`) of every done step reports no
/// trouble in its output ([`reported_trouble`]), one returned a non-empty output or artifacts,
/// and, when the milestone set out to make a change (`writers`: the side-effecting tools its
/// steps called or call), one of them succeeded: a change is not made by reads alone
/// (measured live on the 1.5B model: a repair replaced a failed `cancel_order` by a
/// `list_orders` that succeeded, and the goal verifier then believed the order refunded). A
/// write whose outcome is unknown (its answer lost, and not sent again) counts once a read
/// after it succeeded: whether it happened is for the checks and the verifier to judge from
/// what that read returned. `Err` says what is missing, for the repair that follows.
pub fn steps_succeeded(
    steps: &[Step],
    observations: &[Value],
    writers: &[&str],
) -> Result<(), String> {
    let failed: Vec<&str> = steps
        .iter()
        .filter(|s| s.status == StepStatus::Failed)
        .map(|s| s.id.as_str())
        .collect();
    if !failed.is_empty() {
        return Err(format!("step(s) {} failed", failed.join(", ")));
    }
    let done: BTreeSet<&str> = steps
        .iter()
        .filter(|s| s.status == StepStatus::Done)
        .map(|s| s.id.as_str())
        .collect();
    if done.is_empty() {
        return Err("no step has succeeded yet".into());
    }
    // Step ids repeat across a milestone's lists (a repair's `s1`): the latest answer counts.
    let mut latest: BTreeMap<&str, &Value> = BTreeMap::new();
    for o in observations
        .iter()
        .filter(|o| o.get("ok") == Some(&Value::Bool(true)))
    {
        if let Some(id) = o
            .get("step")
            .and_then(Value::as_str)
            .filter(|id| done.contains(id))
        {
            latest.insert(id, o);
        }
    }
    for (id, o) in &latest {
        if let Some(trouble) = o.get("output").and_then(reported_trouble) {
            return Err(format!(
                "step {id} answered, but its output reports {trouble}"
            ));
        }
    }
    let writer = |o: &Value| {
        o.get("tool")
            .and_then(Value::as_str)
            .is_some_and(|tool| writers.contains(&tool))
    };
    let unknown = observations
        .iter()
        .rposition(|o| writer(o) && o.get(OUTCOME_UNKNOWN) == Some(&Value::Bool(true)));
    let read_after = unknown.is_some_and(|at| {
        observations[at + 1..]
            .iter()
            .any(|o| o.get("ok") == Some(&Value::Bool(true)) && !writer(o))
    });
    let wrote = latest.values().any(|o| writer(o)) || read_after;
    if !writers.is_empty() && !wrote {
        return Err(format!(
            "no change was made: no call of {} succeeded",
            writers.join(", ")
        ));
    }
    let answered = latest.values().any(|o| {
        ["output", "artifacts"]
            .iter()
            .any(|key| o.get(*key).is_some_and(|v| !is_empty(v)))
    });
    if answered {
        Ok(())
    } else {
        Err("the steps succeeded but none returned any output".into())
    }
}

/// Fields by which an answer that arrived says, in its body, that it is not the result asked
/// for, as HTTP APIs do: `{"ok": false}`, a `status` of `error`, a page with more to come.
const FALSE_MEANS_TROUBLE: [&str; 4] = ["ok", "success", "valid", "complete"];
const TRUE_MEANS_TROUBLE: [&str; 2] = ["has_more", "truncated"];
const TROUBLED_STATUS: [&str; 8] = [
    "error",
    "failed",
    "failure",
    "moved",
    "partial",
    "invalid",
    "incomplete",
    "not_found",
];

/// What an output object reports against itself, if anything: a flag above, a troubled
/// `status`, a `next_page` to fetch, or a `remedy` it states (the tool saying which call would
/// do). Never read from text: an answer that merely mentions an error is an answer.
pub fn reported_trouble(output: &Value) -> Option<String> {
    let fields = output.as_object()?;
    let flag = |name: &str, bad: bool| fields.get(name).and_then(Value::as_bool) == Some(bad);
    let mut said: Vec<String> = Vec::new();
    said.extend(
        FALSE_MEANS_TROUBLE
            .iter()
            .filter(|name| flag(name, false))
            .map(|name| format!("{name}: false")),
    );
    said.extend(
        TRUE_MEANS_TROUBLE
            .iter()
            .filter(|name| flag(name, true))
            .map(|name| format!("{name}: true")),
    );
    if let Some(status) = fields.get("status").and_then(Value::as_str)
        && TROUBLED_STATUS.contains(&status.to_lowercase().as_str())
    {
        said.push(format!("status: {status}"));
    }
    for name in ["next_page", "remedy"] {
        if let Some(value) = fields.get(name).filter(|v| !is_empty(v)) {
            said.push(format!(
                "{name}: {}",
                super::error::short(&value.to_string())
            ));
        }
    }
    (!said.is_empty()).then(|| said.join(", "))
}

#[cfg(test)]
mod tests;
