//! Approvals: a person signs off a plan, or the exact calls a task is about to make, before
//! they run.
//!
//! What is approved is bound to a digest of exactly what will run: a plan request's digest
//! covers the milestones that need signing (each milestone's id, dependencies, effort, tools
//! and check), a steps request's the calls (tool, canonical arguments and which occurrence of
//! the call it is). A decision carries the digest it was made on, and one that does not match
//! what is pending is refused, so an approval given for one call never runs another. What was
//! approved stays approved across replans: after a new plan version or a rewritten step list,
//! only new or changed milestones and calls are asked again.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::plan::fingerprint::canonical_json;
use super::plan::{Milestone, MilestoneStatus, Plan};

/// The longest comment a decision may carry, in characters.
pub const MAX_COMMENT_CHARS: usize = 2_000;

/// What a task's submitter asks to sign off. The operator's policy may ask for more, never
/// for less (docs/configuration.md, `[approval]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Nothing beyond what the operator requires.
    #[default]
    None,
    /// The plan (each version's new or changed milestones), before any of it runs.
    Plan,
    /// Every side-effecting call, with its resolved arguments, before it is made.
    Steps,
}

impl ApprovalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::None => "none",
            ApprovalMode::Plan => "plan",
            ApprovalMode::Steps => "steps",
        }
    }

    pub fn parse(text: &str) -> Option<ApprovalMode> {
        [ApprovalMode::None, ApprovalMode::Plan, ApprovalMode::Steps]
            .into_iter()
            .find(|mode| mode.as_str() == text)
    }
}

/// The operator's approval policy (`[engine.approval]`): what every task must have signed off,
/// whatever its submitter asked.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalPolicy {
    /// Every planned task's plan (each version's new or changed milestones).
    pub plan: bool,
    /// Every call of a side-effecting tool, except the tools in `exempt`.
    pub side_effects: bool,
    /// Tools whose every call needs sign-off, side effects or not.
    pub tools: Vec<String>,
    /// Side-effecting tools `side_effects` leaves out (a task asking `steps` still asks).
    pub exempt: Vec<String>,
    /// How long a request waits before the task fails with a report, in milliseconds; 0 waits
    /// for ever.
    pub expire_after_ms: u64,
}

impl ApprovalPolicy {
    /// Whether `mode` (the task's) and this policy ask for plan sign-off.
    pub fn plan_needed(&self, mode: ApprovalMode) -> bool {
        self.plan || mode == ApprovalMode::Plan
    }

    /// Whether a call of `tool` needs sign-off under this policy and the task's `mode`.
    pub fn call_needed(&self, mode: ApprovalMode, tool: &str, side_effects: bool) -> bool {
        let listed = |names: &[String]| names.iter().any(|name| name == tool);
        listed(&self.tools)
            || (side_effects && mode == ApprovalMode::Steps)
            || (side_effects && self.side_effects && !listed(&self.exempt))
    }
}

/// What a request asks a person to sign off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    Plan,
    Steps,
}

impl ApprovalKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalKind::Plan => "plan",
            ApprovalKind::Steps => "steps",
        }
    }

    pub fn parse(text: &str) -> Option<ApprovalKind> {
        [ApprovalKind::Plan, ApprovalKind::Steps]
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    Pending,
    Approved,
    Rejected,
    /// A plan sent back with changes (the comment becomes a constraint for the planner).
    Revised,
    /// Nobody decided before the request's expiry: the task failed with a report.
    Expired,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Rejected => "rejected",
            ApprovalState::Revised => "revised",
            ApprovalState::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<ApprovalState> {
        [
            ApprovalState::Pending,
            ApprovalState::Approved,
            ApprovalState::Rejected,
            ApprovalState::Revised,
            ApprovalState::Expired,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
    }
}

/// A person's answer to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Approve,
    /// Do not: a call is refused (its milestone repairs with the comment as evidence); a plan
    /// ends the task.
    Reject,
    /// Plans only: plan again with the comment as a person's constraint.
    Revise,
}

impl Decision {
    /// The state a request is left in.
    pub fn state(self) -> ApprovalState {
        match self {
            Decision::Approve => ApprovalState::Approved,
            Decision::Reject => ApprovalState::Rejected,
            Decision::Revise => ApprovalState::Revised,
        }
    }
}

/// `POST /v1/tasks/{id}/approvals/{approval}`: the decision, the digest of what it was made
/// on, and an optional comment (required to revise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    pub decision: Decision,
    /// The `digest` of the pending request, as `GET /v1/tasks/{id}/approvals` showed it.
    #[schema(min_length = 64, max_length = 64)]
    pub digest: String,
    #[serde(default)]
    #[schema(max_length = 2000)]
    pub comment: Option<String>,
}

/// One request for a person's sign-off, as stored and as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Approval {
    /// Numbered per task from 1.
    pub id: u32,
    pub kind: ApprovalKind,
    pub state: ApprovalState,
    /// What a decision must name: the SHA-256 of what is asked.
    pub digest: String,
    /// What is asked: `{plan_version, milestones, diff}` for a plan, `{calls}` for steps.
    #[schema(value_type = Object)]
    pub request: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The key id of whoever decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub created_at: chrono::DateTime<chrono::Utc>,
    #[serde(default, serialize_with = "crate::domain::instant::millis_opt")]
    pub decided_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When a pending request stops the task unless someone decides (operator setting).
    #[serde(default, serialize_with = "crate::domain::instant::millis_opt")]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A lowercase hex SHA-256 of `text`.
fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The digest of a set of item digests (order does not matter).
pub fn digest_of(items: &[String]) -> String {
    let mut sorted = items.to_vec();
    sorted.sort();
    sorted.dedup();
    sha256(&canonical_json(&json!(sorted)))
}

/// The digest of one call: tool, canonical arguments, and which occurrence it is.
pub fn call_digest(tool: &str, args: &Value, repeat: &str) -> String {
    sha256(&format!(
        "call:{}:{}:{repeat}",
        tool.trim(),
        canonical_json(args)
    ))
}

/// The digest of what a milestone would do: id, dependencies, effort, tools and check (titles
/// and prose are left out: rewording a milestone changes nothing that runs).
pub fn milestone_digest(milestone: &Milestone) -> String {
    let mut deps = milestone.depends_on.clone();
    deps.sort();
    let mut tools = milestone.tools.clone();
    tools.sort();
    let accept = serde_json::to_value(&milestone.accept).unwrap_or(Value::Null);
    let item = json!([milestone.id.trim(), deps, milestone.effort, tools, accept]);
    sha256(&format!("milestone:{}", canonical_json(&item)))
}

/// The milestones of `plan` still to run whose digest is not in `approved`, with their digests.
pub fn unapproved_milestones<'p>(
    plan: &'p Plan,
    approved: &std::collections::BTreeSet<String>,
) -> Vec<(&'p Milestone, String)> {
    plan.milestones
        .iter()
        .filter(|m| m.status != MilestoneStatus::Done)
        .map(|m| (m, milestone_digest(m)))
        .filter(|(_, digest)| !approved.contains(digest))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn call_digests_ignore_key_order_and_tell_repeats_apart() {
        let a = call_digest("write", &json!({"a": 1, "b": [1, 2]}), "0");
        let b = call_digest("write", &json!({"b": [1, 2], "a": 1}), "0");
        assert_eq!(a, b);
        assert_ne!(a, call_digest("write", &json!({"a": 2, "b": [1, 2]}), "0"));
        assert_ne!(a, call_digest("write", &json!({"a": 1, "b": [1, 2]}), "1"));
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn a_set_digest_does_not_depend_on_order() {
        let (x, y) = ("x".to_string(), "y".to_string());
        assert_eq!(
            digest_of(&[x.clone(), y.clone()]),
            digest_of(&[y.clone(), x.clone()])
        );
        assert_ne!(digest_of(std::slice::from_ref(&x)), digest_of(&[x, y]));
    }

    #[test]
    fn a_task_may_ask_for_more_than_the_operator_never_less() {
        let none = ApprovalPolicy::default();
        assert!(!none.call_needed(ApprovalMode::None, "write", true));
        assert!(none.call_needed(ApprovalMode::Steps, "write", true));
        assert!(!none.call_needed(ApprovalMode::Steps, "read", false));
        assert!(none.plan_needed(ApprovalMode::Plan) && !none.plan_needed(ApprovalMode::Steps));
        let strict = ApprovalPolicy {
            plan: true,
            side_effects: true,
            tools: vec!["read_secrets".into()],
            exempt: vec!["log".into()],
            expire_after_ms: 0,
        };
        assert!(strict.plan_needed(ApprovalMode::None));
        assert!(strict.call_needed(ApprovalMode::None, "write", true));
        assert!(strict.call_needed(ApprovalMode::None, "read_secrets", false));
        assert!(!strict.call_needed(ApprovalMode::None, "log", true));
        assert!(strict.call_needed(ApprovalMode::Steps, "log", true));
    }

    #[test]
    fn names_round_trip() {
        for mode in [ApprovalMode::None, ApprovalMode::Plan, ApprovalMode::Steps] {
            assert_eq!(ApprovalMode::parse(mode.as_str()), Some(mode));
        }
        for state in [
            ApprovalState::Pending,
            ApprovalState::Approved,
            ApprovalState::Rejected,
            ApprovalState::Revised,
            ApprovalState::Expired,
        ] {
            assert_eq!(ApprovalState::parse(state.as_str()), Some(state));
        }
        assert_eq!(ApprovalKind::parse("steps"), Some(ApprovalKind::Steps));
        assert_eq!(ApprovalKind::parse("nope"), None);
    }
}
