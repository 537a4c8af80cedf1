//! The tools a tactical call may answer with. A first list gets the milestone's grant. A repair
//! changes the question, not only its wording: on the real 1.5B model, L1 and L2 answered the
//! call that had just failed ("not found" from a distractor the plan granted, such as
//! `get_customer` for an order id), and the ladder ran out on the same call three times. So a
//! repair is also offered up to [`MAX_EXTRA`] read-only tools the milestone was not granted,
//! the most relevant to the goal and the milestone first (read-only tools are within least
//! privilege for every goal), not counting one that already failed in this milestone. The
//! grant stays offered: a "not found" may mean wrong arguments as well as a wrong tool. A tool
//! from the extras that an accepted list uses is granted to the milestone (`granted` on
//! `milestone.steps_planned`).
//!
//! A tool the milestone's failed answers name ("no such file; to recover: call locate") comes
//! first among the extras: the answer said what to use. On the 1.5B model the relevance by
//! words missed `locate` for a config read, and the repair invented a placeholder instead.
//!
//! A side-effecting tool is offered beyond the grant only when the goal itself names its action
//! (the verb its name starts with: "refund it" for `refund_order`): the submitter asked for
//! that change, so offering it stays within the task's privilege. On the 1.5B model the plan
//! granted a refund milestone `cancel_order`, a distractor; every repair was offered readers
//! only, and the refund the goal asked for could never be made.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Ask;
use crate::domain::gate::unquoted;
use crate::domain::plan::{Milestone, Step};
use crate::engine::runtime::checkpoint::TaskState;
use crate::engine::runtime::ports::ToolSpec;

/// The most read-only tools a repair is offered beyond the milestone's grant.
pub const MAX_EXTRA: usize = 3;

/// What one tactical call offers: every tool it may use, and those of them beyond the grant.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Offer {
    pub tools: Vec<String>,
    pub extra: Vec<String>,
    /// Offered tools that failed in this milestone and never succeeded there.
    pub failing: Vec<String>,
    /// A repair that repeats a failed list may be asked again without `failing` (something
    /// else stays offered).
    pub narrowable: bool,
}

/// The offer for `milestone` under `ask`. `observations` are the milestone's record
/// (`{"tool", "ok"}` per call), `specs` every registered tool, `goal` the task's goal.
pub fn offer<'a>(
    specs: impl Iterator<Item = &'a ToolSpec>,
    milestone: &Milestone,
    observations: &[Value],
    ask: Ask,
    goal: &str,
) -> Offer {
    let granted = milestone.tools.clone();
    // Tools beyond the grant come with a repair only.
    if ask.repair_level().is_none() {
        return Offer {
            tools: granted,
            ..Offer::default()
        };
    }
    let failed = failing_tools(observations);
    let mut tools = granted.clone();
    let about = words(&format!(
        "{goal} {} {}",
        milestone.title,
        milestone.outcome.as_deref().unwrap_or_default()
    ));
    let asked = words(goal);
    let named = named_by_failures(observations);
    let mut candidates: Vec<(usize, &ToolSpec)> = specs
        .filter(|s| !granted.contains(&s.name))
        .filter(|s| !s.side_effects || action(&s.name).is_some_and(|verb| asked.contains(verb)))
        .filter(|s| !failed.contains(s.name.as_str()))
        .map(|s| {
            let own = words(&format!("{} {}", s.name.replace('_', " "), s.description));
            let said = if named.contains(&s.name.to_lowercase()) {
                NAMED
            } else {
                0
            };
            (said + own.intersection(&about).count(), s)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    // Most relevant first; the registry's order among equals (the sort is stable).
    candidates.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
    let extra: Vec<String> = candidates
        .into_iter()
        .take(MAX_EXTRA)
        .map(|(_, s)| s.name.clone())
        .collect();
    tools.extend(extra.iter().cloned());
    Offer {
        tools,
        extra,
        ..Offer::default()
    }
}

/// The offer of a repair that proposed a failed list again: the tools that failed in this
/// milestone and never succeeded there are taken out (`narrow`), so the answer's schema no
/// longer allows the call that failed; the 1.5B model otherwise proposed the same "not found"
/// call at every rung. When a writer is offered and no change is made yet while a read
/// answered, the readers are taken out too: another read cannot make the change (the model
/// re-listed the orders at every rung), and what the reads answered stays in view. Without
/// `narrow`, says whether taking them out would leave anything.
pub fn narrowed(
    mut offer: Offer,
    observations: &[Value],
    ask: Ask,
    narrow: bool,
    writes: &dyn Fn(&str) -> bool,
) -> Offer {
    let failed = failing_tools(observations);
    let owed = change_still_owed(&offer.tools, observations, writes);
    offer.failing = offer
        .tools
        .iter()
        .filter(|t| failed.contains(t.as_str()) || (owed && !writes(t)))
        .cloned()
        .collect();
    let leaves_some = offer.tools.len() > offer.failing.len();
    let can = ask.repair_level().is_some() && !offer.failing.is_empty() && leaves_some;
    if narrow && can {
        let failing = offer.failing.clone();
        offer.tools.retain(|t| !failing.contains(t));
        offer.extra.retain(|t| !failing.contains(t));
    }
    offer.narrowable = can && !narrow;
    offer
}

/// Grants `milestone_id` the tools of `extra` that `steps` use; returns them. The executor then
/// allows them like the rest of the grant.
pub fn grant(
    state: &mut TaskState,
    milestone_id: &str,
    steps: &[Step],
    extra: &[String],
) -> Vec<String> {
    let used: Vec<String> = extra
        .iter()
        .filter(|t| steps.iter().any(|s| &s.tool == *t))
        .cloned()
        .collect();
    if let Some(m) = state
        .plan
        .as_mut()
        .and_then(|p| p.milestone_mut(milestone_id))
    {
        for tool in &used {
            if !m.tools.contains(tool) {
                m.tools.push(tool.clone());
            }
        }
    }
    used
}

/// Whether a writer is offered, none of the milestone's calls made a change, and a read of it
/// succeeded.
fn change_still_owed(
    offered: &[String],
    observations: &[Value],
    writes: &dyn Fn(&str) -> bool,
) -> bool {
    let ok = answered_tools(observations);
    offered.iter().any(|t| writes(t))
        && !ok.iter().any(|t| writes(t))
        && ok.iter().any(|t| !writes(t))
}

/// Tools with a call in the record whose `ok` is `ok`.
fn tools_with(observations: &[Value], ok: bool) -> BTreeSet<&str> {
    observations
        .iter()
        .filter(|o| o.get("ok").and_then(Value::as_bool) == Some(ok))
        .filter_map(|o| o.get("tool").and_then(Value::as_str))
        .collect()
}

/// Tools with a successful call in the record.
fn answered_tools(observations: &[Value]) -> BTreeSet<&str> {
    tools_with(observations, true)
}

/// Tools with a failed call in the record and no successful one (also what an L3 re-ask after a
/// repeated plan withholds).
pub(in crate::engine::planner) fn failing_tools(observations: &[Value]) -> BTreeSet<&str> {
    let answered = answered_tools(observations);
    tools_with(observations, false)
        .into_iter()
        .filter(|t| !answered.contains(t))
        .collect()
}

/// The score of a tool a failed answer names: above any count of shared words.
const NAMED: usize = 1_000;

/// Every word (tool names kept whole: `_`, `-` and `.` join) of the milestone's failed answers,
/// their errors and outputs.
fn named_by_failures(observations: &[Value]) -> BTreeSet<String> {
    let mut said = BTreeSet::new();
    for o in observations
        .iter()
        .filter(|o| o.get("ok") == Some(&Value::Bool(false)))
    {
        let text = format!(
            "{} {}",
            o.get("error").and_then(Value::as_str).unwrap_or_default(),
            o.get("output").map(Value::to_string).unwrap_or_default()
        );
        said.extend(
            text.to_lowercase()
                .split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
                .map(|w| w.trim_matches('.').to_string())
                .filter(|w| !w.is_empty()),
        );
    }
    said
}

/// The action a tool's name starts with (`refund` of `refund_order`, `page` of `page_user`).
/// Whether `goal` names the action of `tool` (`refund_order` for "... refund it"): a change the
/// submitter asked for. A verb inside quoted text is material, not an ask.
pub(in crate::engine::planner) fn goal_names_action(goal: &str, tool: &str) -> bool {
    action(tool).is_some_and(|verb| words(&unquoted(goal)).contains(verb))
}

fn action(name: &str) -> Option<&str> {
    let verb = name.rsplit('.').next()?.split(['_', '-']).next()?;
    (verb.len() >= 3).then_some(verb)
}

/// Words worth matching: lowercase, three letters or more, not a function word.
fn words(text: &str) -> BTreeSet<String> {
    const SKIP: [&str; 16] = [
        "the", "and", "for", "with", "from", "that", "this", "its", "their", "what", "which",
        "who", "get", "are", "was", "has",
    ];
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 3 && !SKIP.contains(w))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests;
