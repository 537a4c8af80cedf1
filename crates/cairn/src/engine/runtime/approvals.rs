//! Approvals at the engine's doors: a call that needs a person's sign-off, and a plan version
//! whose new or changed milestones do.
//!
//! The rule is one of digests. A call is signed off by the digest of its tool, canonical
//! arguments and occurrence ([`call_digest`]), a milestone by the digest of what it would do
//! ([`milestone_digest`]); what a person approved stays approved for the rest of the task, so a
//! resumed attempt runs the approved call (answered from its receipt if it already ran), and a
//! rewritten step list or a new plan version asks only for what changed. A call or plan that
//! needs what nobody approved stops the attempt ([`Halt::Parked`]); [`settle`] then commits
//! what is staged and parks the task in one fenced write, which releases its lease: no worker
//! is held while a person thinks, and the wait is charged to no budget (wall time is measured
//! around calls, never across a wait). The decisions are read once per attempt, when first
//! needed: a decision can only come while the task waits, so none arrives during an attempt.
//!
//! A rejected call is answered as the tool refusing it, with the person's comment: the
//! milestone's repair ladder takes it from there. A plan sent back to revise raises the comment
//! as a person's constraint (a `new_constraint` replan), a rejected plan ends the task.
//! Acceptance checks are not gated: they are the operator's own verification, re-run on every
//! evaluation. Shadow copies (sandboxed tools) are never gated.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::attempt::Attempt;
use super::checkpoint::Record;
use super::ports::{Repeat, ToolCall};
use super::signoff::Waiting;
pub use super::signoff::{Approvals, CallGate, PlanGate};
use crate::domain::approval::{
    Approval, ApprovalKind, ApprovalMode, ApprovalState, call_digest, digest_of,
    unapproved_milestones,
};
use crate::domain::task::SHADOW_OF;
use crate::engine::{EngineError, Halt, RunOutcome};
use crate::store::approvals::{Park, Parked};

/// The digests a request signed off.
fn item_digests(approval: &Approval) -> impl Iterator<Item = String> + '_ {
    let items = match approval.kind {
        ApprovalKind::Plan => "milestones",
        ApprovalKind::Steps => "calls",
    };
    approval.request[items]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["digest"].as_str().map(str::to_string))
}

fn signed(decided: &[Approval], kind: ApprovalKind) -> BTreeSet<String> {
    decided
        .iter()
        .filter(|a| a.kind == kind && a.state == ApprovalState::Approved)
        .flat_map(item_digests)
        .collect()
}

impl Attempt {
    /// The task's own ask, or `None` when nothing is ever gated (a shadow copy).
    fn approval_mode(&self) -> Option<ApprovalMode> {
        let task = self.task();
        task.metadata
            .get(SHADOW_OF)
            .is_none()
            .then_some(task.approval)
    }

    /// The task's decided requests, read once per attempt.
    async fn decided(&self) -> Result<&[Approval], Halt> {
        let ctx = self.journal.ctx();
        let task = self.task();
        let decided = self
            .approvals
            .decided
            .get_or_try_init(|| ctx.store.list_approvals(&task.tenant_id, task.id))
            .await
            .map_err(|error| Halt::Error(EngineError::Store(error)))?;
        Ok(decided)
    }

    /// Whether `call` may run now; see the module docs.
    pub async fn gate_call(&self, call: &ToolCall) -> Result<CallGate, Halt> {
        let (Some(mut mode), Repeat::Nth(nth)) = (self.approval_mode(), &call.repeat) else {
            return Ok(CallGate::Run);
        };
        // A task that asked to sign off its plan but runs without one (the direct route, a
        // baseline) signs off its calls instead: what it asked for, as near as it exists.
        if mode == ApprovalMode::Plan && self.journal.read(|s| s.plan.is_none()).await {
            mode = ApprovalMode::Steps;
        }
        let side_effects = self.specs.get(&call.tool).is_some_and(|s| s.side_effects);
        if !self
            .config
            .approval
            .call_needed(mode, &call.tool, side_effects)
        {
            return Ok(CallGate::Run);
        }
        let digest = call_digest(&call.tool, &call.args, &nth.to_string());
        let decided = self.decided().await?;
        if signed(decided, ApprovalKind::Steps).contains(&digest) {
            return Ok(CallGate::Run);
        }
        let rejected = decided.iter().rev().find(|a| {
            a.kind == ApprovalKind::Steps
                && a.state == ApprovalState::Rejected
                && item_digests(a).any(|d| d == digest)
        });
        if let Some(rejected) = rejected {
            let comment = rejected.comment.as_deref().unwrap_or("no reason given");
            return Ok(CallGate::Refused(format!(
                "a person rejected this call (approval {}): {comment}",
                rejected.id
            )));
        }
        let item =
            json!({"tool": call.tool, "args": call.args, "occurrence": nth, "digest": digest});
        let mut waiting = self
            .approvals
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let waiting = waiting.get_or_insert_with(|| Waiting {
            kind: ApprovalKind::Steps,
            items: Vec::new(),
            digests: Vec::new(),
            about: json!({}),
        });
        if !waiting.digests.contains(&digest) {
            waiting.items.push(item);
            waiting.digests.push(digest);
        }
        Ok(CallGate::Wait)
    }

    /// Whether the plan in force may run: an untaken revise or reject first, then whether
    /// any milestone still to run was never signed off.
    pub async fn plan_gate(&self) -> Result<PlanGate, Halt> {
        let Some(mode) = self.approval_mode() else {
            return Ok(PlanGate::Clear);
        };
        if !self.config.approval.plan_needed(mode) {
            return Ok(PlanGate::Clear);
        }
        let taken = self.journal.read(|s| s.approvals_taken).await;
        let decided = self.decided().await?;
        let untaken = decided.iter().rev().find(|a| {
            a.kind == ApprovalKind::Plan
                && a.id > taken
                && matches!(a.state, ApprovalState::Revised | ApprovalState::Rejected)
        });
        if let Some(decision) = untaken {
            let comment = decision.comment.clone().unwrap_or_default();
            return Ok(match decision.state {
                ApprovalState::Revised => PlanGate::Revise {
                    comment,
                    by: decision.decided_by.clone().unwrap_or_default(),
                    approval: decision.id,
                },
                _ => PlanGate::Rejected {
                    comment,
                    approval: decision.id,
                },
            });
        }
        self.plan_waits().await
    }

    /// [`Attempt::plan_gate`] without the decisions to act on: after a replan within an
    /// attempt, whether its new or changed milestones wait for a sign-off.
    pub async fn plan_waits(&self) -> Result<PlanGate, Halt> {
        let needed = match self.approval_mode() {
            Some(mode) => self.config.approval.plan_needed(mode),
            None => false,
        };
        if !needed {
            return Ok(PlanGate::Clear);
        }
        let decided = self.decided().await?;
        let approved = signed(decided, ApprovalKind::Plan);
        let since = decided
            .iter()
            .filter(|a| a.kind == ApprovalKind::Plan && a.state == ApprovalState::Approved)
            .filter_map(|a| a.request["plan_version"].as_i64())
            .max();
        let (version, items) = self
            .journal
            .read(|s| {
                let items: Vec<(Value, String)> = s
                    .plan
                    .as_ref()
                    .map(|plan| unapproved_milestones(plan, &approved))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(m, digest)| {
                        let item = json!({"id": m.id, "title": m.title, "depends_on": m.depends_on,
                            "tools": m.tools, "accept": m.accept, "digest": digest});
                        (item, digest)
                    })
                    .collect();
                (s.plan_version, items)
            })
            .await;
        if items.is_empty() {
            return Ok(PlanGate::Clear);
        }
        let (items, digests) = items.into_iter().unzip();
        let mut waiting = self
            .approvals
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *waiting = Some(Waiting {
            kind: ApprovalKind::Plan,
            items,
            digests,
            about: json!({"plan_version": version, "approved_version": since}),
        });
        Ok(PlanGate::Wait)
    }

    /// Records that the engine acted on request `approval` (with the record's events).
    pub async fn take_approval<R: Send>(
        &self,
        approval: u32,
        act: impl FnOnce(&mut super::checkpoint::TaskState, &mut Record) -> R,
    ) -> Result<(crate::engine::Applied, R), Halt> {
        self.journal
            .record(|state| {
                state.approvals_taken = state.approvals_taken.max(approval);
                let mut record = Record::default();
                let out = act(state, &mut record);
                Ok((record, out))
            })
            .await
    }
}

/// How an attempt's run ends: a park commits what is staged, then parks the task on the
/// request the attempt stopped for; anything else is [`Halt::settle`]'s.
pub async fn settle(
    cx: &Attempt,
    result: Result<RunOutcome, Halt>,
) -> Result<RunOutcome, EngineError> {
    let Err(Halt::Parked) = result else {
        return Halt::settle(result);
    };
    let waiting = cx
        .approvals
        .waiting
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    let Some(waiting) = waiting else {
        return Err(EngineError::Other(
            "the run stopped for an approval it did not name".into(),
        ));
    };
    // What is staged, and that this attempt parked, commit before the task waits.
    let marked = cx
        .journal
        .record(|state| {
            state.parked = true;
            Ok((Record::default(), ()))
        })
        .await;
    if let Err(halt) = marked {
        return Halt::settle(Err(halt));
    }
    let ctx = cx.journal.ctx();
    let now = ctx.clock.now();
    let mut request = waiting.about;
    let items = match waiting.kind {
        ApprovalKind::Plan => "milestones",
        ApprovalKind::Steps => "calls",
    };
    request[items] = Value::Array(waiting.items);
    let expire_after = cx.config.approval.expire_after_ms;
    let park = Park {
        kind: waiting.kind,
        digest: digest_of(&waiting.digests),
        request,
        expires_at: (expire_after > 0)
            .then(|| i64::try_from(expire_after).ok())
            .flatten()
            .and_then(chrono::Duration::try_milliseconds)
            .and_then(|after| now.checked_add_signed(after)),
    };
    match ctx.store.park(&ctx.lease, park, now).await? {
        Parked::Waiting { approval } => {
            tracing::info!(task_id = %ctx.task.id, approval, "parked for approval");
            Ok(RunOutcome::Parked)
        }
        Parked::LeaseLost => Ok(RunOutcome::LeaseLost),
    }
}
