//! The milestone phase: ready milestones run in parallel (independent ones at once, at most
//! `max_parallel`), each through its [`runner`]; the first outcome that ends the task (a
//! failure for good, an empty reserve) stops the others at their next durable point, and an
//! L3 request waits until every runner has stopped, then re-plans the strategy (keeping
//! finished work: passed milestones, and the finished steps of a sibling still running, which
//! the new version resumes from its next step, see [`super::carry`]) and schedules the new
//! milestones.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use tokio::task::JoinSet;
use tracing::Instrument;

use super::monitor;
use super::report::Ending;
use super::runner::{self, MilestoneEnd};
use super::strategic;
use super::verifier;
use crate::domain::ledger::Unit;
use crate::domain::plan::MilestoneStatus;
use crate::domain::repair::ReplanReason;
use crate::domain::task::TaskStatus;
use crate::engine::runtime::approvals::PlanGate;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Failure, MilestoneOutcome, Phase, Record, TaskState};
use crate::engine::{EngineError, Halt};

/// How the milestone phase ended.
pub enum Flow {
    AllDone,
    Stopped,
    Ended(Ending),
    /// An L3 handed the goal to the direct route ([`strategic::Strategic::NothingToPlan`]).
    Direct,
}

/// What an L3 replan made.
pub enum Replanned {
    /// A new plan version: its new milestones run next.
    Plan,
    /// No plan: the goal goes to the direct route.
    Direct,
    /// No valid plan: how the task ends.
    Ended(Ending),
}

/// The runners in flight and what their ends decided so far.
struct Schedule {
    /// Milestones that were active when this attempt began (their runners re-check first).
    resumed: BTreeSet<String>,
    running: BTreeSet<String>,
    set: JoinSet<(String, Result<MilestoneEnd, Halt>)>,
    /// The first outcome that ends the phase.
    verdict: Option<Result<Flow, Halt>>,
    /// The first L3 request, with the milestone that made it.
    replan: Option<Replan>,
}

/// An L3 request: a failure the ladder sent up, or a person's constraint.
struct Replan {
    failure: Failure,
    milestone: String,
    cause: ReplanCause,
}

/// Runs ready milestones (independent ones in parallel, at most `max_parallel`) until all are
/// done, one fails for good, the budget runs out, or a stop is requested.
pub async fn execute(cx: &Arc<Attempt>) -> Result<Flow, Halt> {
    if cx.journal.read(|s| s.phase).await == Phase::Direct {
        return Ok(Flow::Direct);
    }
    let mut schedule = Schedule {
        resumed: cx.journal.read(active_in).await.into_iter().collect(),
        running: BTreeSet::new(),
        set: JoinSet::new(),
        verdict: None,
        replan: None,
    };
    loop {
        if schedule.verdict.is_none() && schedule.replan.is_none() && !cx.stopping() {
            schedule.spawn_ready(cx).await;
        }
        let Some(joined) = schedule.set.join_next().await else {
            break;
        };
        let (id, end) = match joined {
            Ok(pair) => pair,
            Err(error) => {
                cx.halt.store(true, Ordering::SeqCst);
                schedule
                    .verdict
                    .get_or_insert(Err(Halt::Error(EngineError::Other(format!(
                        "milestone runner panicked: {error}"
                    )))));
                continue;
            }
        };
        schedule.running.remove(&id);
        schedule.ended(cx, id, end).await;
        if schedule.set.is_empty()
            && let Some(flow) = schedule.drained(cx).await?
        {
            return Ok(flow);
        }
    }
    if cx.stopping() {
        return Ok(Flow::Stopped);
    }
    let all_done = cx
        .journal
        .read(|s| s.plan.as_ref().is_some_and(|p| p.all_done()))
        .await;
    if all_done {
        Ok(Flow::AllDone)
    } else {
        Ok(Flow::Ended(Ending {
            cause: None,
            status: TaskStatus::Failed,
            verified: None,
            reason: "no milestone can run: the plan is stuck".into(),
            extra: json!({}),
        }))
    }
}

/// The ids of the plan's active milestones, in plan order.
fn active_in(state: &TaskState) -> Vec<String> {
    state
        .plan
        .iter()
        .flat_map(|p| p.milestones.iter())
        .filter(|m| m.status == MilestoneStatus::Active)
        .map(|m| m.id.clone())
        .collect()
}

impl Schedule {
    /// Starts a runner for every active or ready milestone not running yet, up to the bound.
    async fn spawn_ready(&mut self, cx: &Arc<Attempt>) {
        let ready: Vec<String> = cx
            .journal
            .read(|s| {
                let mut ids = active_in(s);
                ids.extend(s.plan.iter().flat_map(|p| p.ready()).map(|m| m.id.clone()));
                ids
            })
            .await;
        for id in ready {
            if self.running.len() >= cx.config.max_parallel || self.running.contains(&id) {
                continue;
            }
            self.running.insert(id.clone());
            let was_active = self.resumed.remove(&id);
            let cx = cx.clone();
            // In the task's span, so a milestone's calls belong to the task's trace.
            self.set.spawn(
                async move {
                    let end = runner::run(&cx, &id, was_active).await;
                    (id, end)
                }
                .in_current_span(),
            );
        }
    }

    /// Takes one runner's end: anything but a pass or a stop halts the other runners.
    async fn ended(&mut self, cx: &Attempt, id: String, end: Result<MilestoneEnd, Halt>) {
        match end {
            Ok(MilestoneEnd::Passed) | Ok(MilestoneEnd::Stopped) => {}
            Ok(MilestoneEnd::Failed(failure)) => {
                cx.halt.store(true, Ordering::SeqCst);
                self.verdict.get_or_insert(Ok(Flow::Ended(Ending {
                    cause: None,
                    status: TaskStatus::Failed,
                    verified: None,
                    reason: format!("milestone {id} failed: {}", failure.detail),
                    extra: json!({"failed_milestone": id, "replan_reason": failure.reason}),
                })));
            }
            Ok(MilestoneEnd::Exhausted { unit }) => {
                cx.halt.store(true, Ordering::SeqCst);
                let ending = exhausted(cx, &id, unit).await;
                self.verdict.get_or_insert(Ok(Flow::Ended(ending)));
            }
            Ok(MilestoneEnd::ReplanStrategy(failure)) => {
                self.replan(cx, failure, id, ReplanCause::Ladder)
            }
            Ok(MilestoneEnd::Steered(failure)) => {
                self.replan(cx, failure, id, ReplanCause::Steered)
            }
            Err(halt) => {
                cx.halt.store(true, Ordering::SeqCst);
                self.verdict = Some(Err(halt));
            }
        }
    }

    /// Keeps the first L3 request and stops the other runners for it.
    fn replan(&mut self, cx: &Attempt, failure: Failure, milestone: String, cause: ReplanCause) {
        cx.halt.store(true, Ordering::SeqCst);
        self.replan.get_or_insert(Replan {
            failure,
            milestone,
            cause,
        });
    }

    /// Once no runner is left: the verdict, else an L3 replan (`None`: schedule the new plan),
    /// else a stop. `None` carries on.
    async fn drained(&mut self, cx: &Arc<Attempt>) -> Result<Option<Flow>, Halt> {
        if let Some(verdict) = self.verdict.take() {
            let failed = match &verdict {
                Ok(Flow::Ended(ending)) if ending.status == TaskStatus::Failed => ending
                    .extra
                    .get("failed_milestone")
                    .and_then(serde_json::Value::as_str)
                    .map(|id| (id.to_string(), ending.reason.clone())),
                _ => None,
            };
            if let Some((id, reason)) = failed
                && let Some(ending) = met_early(cx, &id, &reason).await?
            {
                return Ok(Some(Flow::Ended(ending)));
            }
            return verdict.map(Some);
        }
        if let Some(replan) = self.replan.take() {
            cx.halt.store(false, Ordering::SeqCst);
            let (failure, id) = (&replan.failure, replan.milestone.as_str());
            let ladder = replan.cause == ReplanCause::Ladder;
            // A person asked for a change: what ran so far is not the answer they want.
            if ladder && let Some(ending) = met_early(cx, id, &failure.detail).await? {
                return Ok(Some(Flow::Ended(ending)));
            }
            // The milestone that took a person's message did not fail: it is carried like any
            // other running milestone, not re-planned.
            let failed = ladder.then_some(id);
            match replan_strategy(cx, failure, failed, replan.cause).await? {
                Replanned::Plan => {}
                Replanned::Direct => return Ok(Some(Flow::Direct)),
                Replanned::Ended(ending) => return Ok(Some(Flow::Ended(ending))),
            }
            // The new version's new or changed milestones may wait for a person's sign-off.
            if cx.plan_waits().await? != PlanGate::Clear {
                return Err(Halt::Parked);
            }
            self.resumed.clear();
            return Ok(None);
        }
        if cx.stopping() {
            return Ok(Some(Flow::Stopped));
        }
        Ok(None)
    }
}

/// Before a milestone's failure ends a read-only goal's task or asks for a new strategy, when
/// some milestone passed: a question may already be answered by what ran (measured live on the
/// 1.5B model: a question its first lookup had answered failed on a second milestone the
/// planner added, on a tool with nothing to add). The goal verifier judges it from the tool
/// outputs, with the same programmatic target rule as at the end of a plan; a pass ends the
/// task verified, anything else goes on as before. A goal that changes the world is never
/// ended early: its unfinished milestone may be the change.
async fn met_early(cx: &Attempt, failed: &str, why: &str) -> Result<Option<Ending>, Halt> {
    if super::gate::goal_features(cx).await.touches_writes {
        return Ok(None);
    }
    let passed: Vec<String> = cx
        .journal
        .read(|s| {
            s.plan
                .iter()
                .flat_map(|p| p.milestones.iter())
                .filter(|m| m.status == MilestoneStatus::Done)
                .map(|m| m.id.clone())
                .collect()
        })
        .await;
    if passed.is_empty() {
        return Ok(None);
    }
    let said = json!({"passed": passed, "failed": {"milestone": failed, "reason": why}});
    let evidence = verifier::evidence(cx, said).await;
    let verdict = verifier::verify_goal(cx, None, evidence).await?;
    if verdict.verified != Some(true) {
        return Ok(None);
    }
    Ok(Some(Ending {
        cause: None,
        status: TaskStatus::Succeeded,
        verified: Some(true),
        reason: format!(
            "goal verified before milestone {failed} could pass: {}",
            verdict.reason
        ),
        extra: json!({"unfinished_milestone": failed}),
    }))
}

/// A milestone the ledger could not cover: it ends `over_budget`, and so does the task.
async fn exhausted(cx: &Attempt, id: &str, unit: Unit) -> Ending {
    let _ = monitor::fail(
        cx,
        id,
        MilestoneOutcome::OverBudget,
        &Failure::of_plan(
            ReplanReason::BudgetPressure,
            format!("the reserve cannot cover {}", unit.as_str()),
        ),
    )
    .await;
    Ending {
        cause: None,
        status: TaskStatus::BudgetExhausted,
        verified: None,
        reason: format!(
            "milestone {id} ran out of {} and the reserve is empty",
            unit.as_str()
        ),
        extra: json!({"exhausted_milestone": id, "unit": unit}),
    }
}

/// Who asks for a new strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplanCause {
    /// The repair ladder (or the goal verifier): it uses up one of `max_replan_strategy`.
    Ladder,
    /// A person's message: the ladder's L3 stays available (the messages a task takes bound
    /// these).
    Steered,
}

/// L3: a new plan version that keeps finished work, or the direct route for a goal that
/// needs no plan.
pub async fn replan_strategy(
    cx: &Attempt,
    failure: &Failure,
    milestone: Option<&str>,
    cause: ReplanCause,
) -> Result<Replanned, Halt> {
    cx.journal
        .record(|state| {
            if cause == ReplanCause::Steered {
                state.ladder.begin_steering();
                return Ok((Record::default(), ()));
            }
            state.strategy_replans += 1;
            // The replaced plan failed, unless a new constraint (not the plan) asked for it.
            let replaced = (failure.reason != ReplanReason::NewConstraint)
                .then(|| state.ladder.installed_plan.clone())
                .flatten();
            state.ladder.begin_replan_strategy(replaced);
            Ok((Record::default(), ()))
        })
        .await?;
    let replanned = strategic::plan(cx, Some(strategic::Replan { failure, milestone })).await?;
    match replanned {
        strategic::Strategic::Accepted => Ok(Replanned::Plan),
        strategic::Strategic::NothingToPlan => Ok(Replanned::Direct),
        strategic::Strategic::Refused { reason, cause } => Ok(Replanned::Ended(Ending {
            cause,
            status: TaskStatus::Failed,
            verified: None,
            reason: format!("strategy replan refused: {reason}"),
            extra: json!({"failure": failure}),
        })),
    }
}
