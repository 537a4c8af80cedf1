//! What an attempt knows of the task's sign-offs (the decisions, read once) and what it
//! waits for; the rules that fill them are [`super::approvals`].

use serde_json::Value;
use tokio::sync::OnceCell;

use crate::domain::approval::{Approval, ApprovalKind};

/// One attempt's view of the task's approvals.
#[derive(Default)]
pub struct Approvals {
    pub(super) decided: OnceCell<Vec<Approval>>,
    pub(super) waiting: std::sync::Mutex<Option<Waiting>>,
}

/// What the attempt stops for.
#[derive(Debug, Clone)]
pub(super) struct Waiting {
    pub(super) kind: ApprovalKind,
    pub(super) items: Vec<Value>,
    pub(super) digests: Vec<String>,
    /// More of the request (a plan's version numbers).
    pub(super) about: Value,
}

/// What becomes of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallGate {
    Run,
    /// A person rejected it: answered as the tool's refusal.
    Refused(String),
    /// Nobody signed it off yet: the attempt parks.
    Wait,
}

/// What becomes of the plan in force.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanGate {
    Clear,
    Wait,
    /// Sent back with changes: the comment, who wrote it, and the request.
    Revise {
        comment: String,
        by: String,
        approval: u32,
    },
    /// Turned down: the task ends.
    Rejected {
        comment: String,
        approval: u32,
    },
}
