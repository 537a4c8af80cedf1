//! A plan's sign-off, before any of it runs: after the first plan, after every replan, and
//! when a resumed attempt finds a person's decision (`runtime::approvals`). A plan sent back to
//! revise raises the person's comment as a constraint and plans again (reason
//! `new_constraint`, using up none of the ladder's strategy replans); its new or changed
//! milestones then wait for a sign-off of their own. A rejected plan ends the task.

use serde_json::json;

use super::report::Ending;
use super::schedule::{self, ReplanCause};
use crate::domain::repair::{Constraint, ConstraintSource};
use crate::domain::task::TaskStatus;
use crate::engine::Halt;
use crate::engine::runtime::approvals::PlanGate;
use crate::engine::runtime::attempt::Attempt;

/// `Ok(None)` when the plan in force may run, an ending when a person rejected it, and
/// [`Halt::Parked`] when its new or changed milestones wait for a sign-off.
pub async fn before_running(cx: &Attempt) -> Result<Option<Ending>, Halt> {
    loop {
        match cx.plan_gate().await? {
            PlanGate::Clear => return Ok(None),
            PlanGate::Wait => return Err(Halt::Parked),
            PlanGate::Rejected { comment, approval } => {
                cx.take_approval(approval, |_, _| ()).await?;
                return Ok(Some(Ending {
                    cause: None,
                    status: TaskStatus::Failed,
                    verified: None,
                    reason: format!("a person rejected the plan: {comment}"),
                    extra: json!({"failure": "plan_rejected", "approval": approval}),
                }));
            }
            PlanGate::Revise {
                comment,
                by,
                approval,
            } => {
                let constraint = Constraint {
                    text: comment,
                    source: ConstraintSource::Person { author: by },
                };
                let (applied, failure) = cx
                    .take_approval(approval, |state, record| {
                        super::repair::raise_constraint(state, constraint, record)
                    })
                    .await?;
                // A comment the plan already knew asks for nothing new: the plan in force
                // waits for its sign-off again.
                if let Some(failure) = failure {
                    let failure = failure.at(applied.first_seq);
                    let cause = ReplanCause::Steered;
                    // A direct route is taken where the milestones would run next.
                    if let schedule::Replanned::Ended(ending) =
                        schedule::replan_strategy(cx, &failure, None, cause).await?
                    {
                        return Ok(Some(ending));
                    }
                }
            }
        }
    }
}
