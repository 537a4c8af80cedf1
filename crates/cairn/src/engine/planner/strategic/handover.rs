//! A failed plan for a goal that needed none, handed over to the direct route.
//!
//! A goal whose features expect no tool call, no change and no several targets (a knowledge
//! question, a date to reformat) still gets a tool plan when the planner writes one: its first
//! answer is trusted, and the forced `v2` route plans every goal. When a milestone of such a
//! plan fails up to L3 with nothing passed, a new strategy asks the same planner the same
//! question without the tools that failed: measured on the real 1.5B model, "the capital of
//! Australia" was looked up with `get_service` at every rung, and once the tool was withheld
//! no plan was valid and the task failed on a question it could answer. The direct route is
//! the rung that can end in an answer: the act loop, which may still call a permitted tool,
//! and ends in the goal verifier. The handover is `plan.declined` with `handed_over`, and the
//! unfinished milestones' allocations go back to the reserve that pays for the loop.
//!
//! "Needs no plan" is the heuristic's word, as for a declined first plan. Before handing over,
//! the gate model is asked once too (a forced route never asked it), as an `auto` decision
//! asks it. When it agrees that no tool call is needed, the loop's answer is judged as the
//! gate's direct route judges a knowledge question's. When it expects a call, or gave no usable
//! answer, the plan's word stands: the answer needs a successful call behind it
//! (`direct::needs_evidence`), or it is returned, not claimed (`model_agrees` on the event). The
//! handover itself does not wait on the model: live, the 1.5B gate model expected a call to
//! "Extract the order id from: \"Order #A-7731 ...\"", and an answer returned unclaimed is
//! still more than a failed plan's none. The heuristic alone counts only the verbs it knows:
//! it found no read in "What is the status of ticket OPS-412?", which the loop then answered
//! by invention.

use serde_json::json;

use super::{Replan, nothing_to_plan};
use crate::domain::event::kinds::PLAN_DECLINED;
use crate::domain::plan::MilestoneStatus;
use crate::domain::repair::ReplanReason;
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Phase, Record};
use crate::engine::runtime::ledger;

/// Hands the task to the direct route when `replan` is an L3 for a failed milestone of a goal
/// that needs no plan and no milestone has passed. Returns whether it did.
pub(super) async fn hand_over(cx: &Attempt, replan: Option<&Replan<'_>>) -> Result<bool, Halt> {
    let Some(failed) = replan
        .filter(|r| r.failure.reason != ReplanReason::NewConstraint)
        .and_then(|r| r.milestone)
    else {
        return Ok(false);
    };
    let passed = cx
        .journal
        .read(|s| {
            s.plan.as_ref().is_some_and(|p| {
                p.milestones
                    .iter()
                    .any(|m| m.status == MilestoneStatus::Done)
            })
        })
        .await;
    // What passed is the plan's to carry: the act loop would not be shown it.
    if passed {
        return Ok(false);
    }
    let Some(why) = nothing_to_plan(cx).await else {
        return Ok(false);
    };
    // The gate model too, as an `auto` decision asks it. It does not decide the handover: the
    // loop's answer is returned either way. It decides how the answer is judged.
    crate::engine::planner::gate::consult(cx).await?;
    let model_agrees = crate::engine::planner::gate::model_agrees(cx).await;
    let reason = format!("milestone {failed} failed and {why}: the direct route answers it");
    cx.journal
        .record(|state| {
            let mut record = Record::default();
            ledger::release_unfinished(state, &mut record)?;
            state.phase = Phase::Direct;
            record.push(
                PLAN_DECLINED,
                json!({"attempt": state.strategic_calls, "reason": reason,
                       "handed_over": true, "failed_milestone": failed,
                       "model_agrees": model_agrees}),
            );
            Ok((record, ()))
        })
        .await?;
    Ok(true)
}
