//! The planning engine v2: gate, two-tier planning, acceptance checks, budget ledger, monitor,
//! local repair and resume (docs/architecture.md, "The engine").
//!
//! The flow runs in one direction and closes only through the monitor:
//!
//! ```text
//! gate --direct--> act loop (crate::engine::planner::direct) --> goal verifier --> done
//!   \--plan--> strategic (validated, re-asked) --> plan v1 + ledger allocation
//!        ready milestones in parallel (bounded) --> runner: tactical -> executor -> monitor
//!        failing -> repair ladder (L1 retry step, L2 replan milestone, L3 replan strategy)
//!   all milestones done --> goal verifier --> result with spend per unit per milestone
//! ```
//!
//! Every transition is committed, fenced, through
//! [`Journal`](crate::engine::runtime::journal::Journal): its event(s), its ledger entries,
//! its artifacts, a plan version when the plan changed, and the checkpoint the next attempt
//! resumes from. The transitions nothing external follows (the gate decision, the accepted
//! plan, a milestone's start, a read-only step's result, a check's decision, the verifier's
//! verdict) are staged and share the next commit; every tool call (`Attempt::call_tool`) and
//! every yield is preceded by a flush. Models and tools are reached through
//! [`ports`](crate::engine::runtime::ports), so the engine's decisions are tested with fakes as
//! well as against the simulator.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use async_trait::async_trait;
use serde_json::json;

use super::{Engine, EngineError, Halt, RunContext, RunOutcome, StopSignal};
use crate::domain::repair::ReplanReason;
use crate::domain::task::TaskStatus;

pub mod carry;
pub mod contract;
pub mod direct;
pub mod executor;
pub mod follow_up;
pub mod gate;
pub mod monitor;
pub mod permit;
pub mod repair;
pub mod report;
pub mod runner;
pub mod schedule;
pub mod signoff;
pub mod steering;
pub mod strategic;
pub mod tactical;
pub mod verifier;

use crate::domain::report::Cause;
use crate::domain::settings::EngineSettings;
use crate::engine::runtime::attempt::{Attempt, Validators};
use crate::engine::runtime::checkpoint::{EngineKind, Failure, Phase, TaskState};
use crate::engine::runtime::journal::Journal;
use crate::engine::runtime::ports::{ModelPort, ToolPort};
use crate::engine::runtime::reserve::Overreport;
use gate::Route;
use report::Ending;
use schedule::Flow;

/// The v2 engine: cheap to clone, shared by every worker.
#[derive(Clone)]
pub struct V2Engine {
    models: Arc<dyn ModelPort>,
    tools: Arc<dyn ToolPort>,
    config: EngineSettings,
    validators: Arc<Validators>,
}

impl V2Engine {
    pub fn new(
        models: Arc<dyn ModelPort>,
        tools: Arc<dyn ToolPort>,
        config: EngineSettings,
    ) -> Self {
        Self {
            models,
            tools,
            config,
            validators: Arc::default(),
        }
    }
}

#[async_trait]
impl Engine for V2Engine {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        let mut state = match TaskState::resume(ctx.state.as_ref(), EngineKind::V2) {
            Ok(state) => state,
            Err(error) => return Err(error),
        };
        // How this attempt schedules milestones, whatever an earlier attempt's did.
        state.sequential = self.config.max_parallel <= 1;
        let after_park = std::mem::take(&mut state.parked);
        let specs = ctx.offered_tools(self.tools.specs());
        let overreport = Overreport::resumed(state.learned);
        let cx = Arc::new(Attempt {
            journal: Journal::new(ctx, state),
            models: self.models.clone(),
            tools: self.tools.clone(),
            config: self.config.clone(),
            specs,
            validators: self.validators.clone(),
            halt: AtomicBool::new(false),
            approvals: Default::default(),
            after_park,
            held: Default::default(),
            overreport,
        });
        let driven = drive(cx.clone()).await;
        // A yielding run hands the task back with every transition it made committed.
        let driven = match driven {
            Ok(RunOutcome::Yielded) => cx.journal.flush().await.map(|()| RunOutcome::Yielded),
            other => other,
        };
        crate::engine::runtime::approvals::settle(&cx, driven).await
    }
}

async fn drive(cx: Arc<Attempt>) -> Result<RunOutcome, Halt> {
    let phase = cx.journal.read(|s| s.phase).await;
    let route = match phase {
        Phase::Gate => gate::decide(&cx).await?,
        Phase::Direct => Route::Direct,
        _ => Route::Plan,
    };
    if cx.stopping() {
        return Ok(cx.stop_outcome());
    }
    if route == Route::Direct {
        return crate::engine::planner::direct::run(&cx).await;
    }
    if let Some(ending) = report::overdrawn(&cx).await {
        return report::finish(&cx, ending).await;
    }
    let planned = match cx.journal.read(|s| s.plan.is_none()).await {
        true => {
            // A message sent while the task waited is known to its first plan: no replan.
            steering::take(&cx).await?;
            Some(strategic::plan(&cx, None).await?)
        }
        false => None,
    };
    if planned == Some(strategic::Strategic::NothingToPlan) {
        return crate::engine::planner::direct::run(&cx).await;
    }
    if let Some(strategic::Strategic::Refused { reason, cause }) = planned {
        return report::finish(
            &cx,
            Ending {
                cause,
                status: TaskStatus::Failed,
                verified: None,
                reason: format!("no valid plan: {reason}"),
                extra: json!({"failure": "planner"}),
            },
        )
        .await;
    }
    loop {
        // Overhead the reserve could not cover (planning, an L3 replan, the verifier) stops it.
        if let Some(ending) = report::overdrawn(&cx).await {
            return report::finish(&cx, ending).await;
        }
        if cx.journal.read(|s| s.phase).await != Phase::Verify {
            // A plan that needs a person's sign-off waits for it before any of it runs.
            if let Some(ending) = signoff::before_running(&cx).await? {
                return report::finish(&cx, ending).await;
            }
            match schedule::execute(&cx).await? {
                Flow::AllDone => {}
                Flow::Stopped => return Ok(cx.stop_outcome()),
                Flow::Ended(ending) => return report::finish(&cx, ending).await,
                Flow::Direct => return crate::engine::planner::direct::run(&cx).await,
            }
        }
        if let Some(ending) = verify(&cx).await? {
            return report::finish(&cx, ending).await;
        }
    }
}

/// The goal-level check once every milestone passed: how the task ends, or `None` after an
/// L3 replan (the new milestones run next).
async fn verify(cx: &Attempt) -> Result<Option<Ending>, Halt> {
    // The verifier sees what the tools answered, never only the planner's own claims.
    let evidence = verifier::evidence(cx, json!("every milestone's acceptance check passed")).await;
    let verdict = verifier::verify_goal(cx, None, evidence).await?;
    let verified = verdict.verified;
    if verified == Some(false) {
        let failure = Failure::of_plan(
            ReplanReason::PlanExhaustedButGoalUnmet,
            verdict.reason.clone(),
        )
        .at(verdict.seq);
        if replan_allowed(cx).await {
            let cause = schedule::ReplanCause::Ladder;
            // A direct route is taken where the milestones would run next.
            return match schedule::replan_strategy(cx, &failure, None, cause).await? {
                schedule::Replanned::Ended(ending) => Ok(Some(ending)),
                schedule::Replanned::Plan | schedule::Replanned::Direct => Ok(None),
            };
        }
        return Ok(Some(Ending {
            cause: None,
            status: TaskStatus::Failed,
            verified: Some(false),
            reason: format!(
                "all milestones passed but the goal is unmet: {}",
                verdict.reason
            ),
            extra: json!({}),
        }));
    }
    if verified.is_none() {
        // No verdict (verifier unreachable or unusable): not verified, never a success.
        return Ok(Some(Ending {
            cause: Some(Cause::Unverified),
            status: TaskStatus::Failed,
            verified: None,
            reason: format!(
                "unverified: all milestones passed but no verifier verdict: {}",
                verdict.reason
            ),
            extra: json!({}),
        }));
    }
    Ok(Some(Ending {
        cause: None,
        status: TaskStatus::Succeeded,
        verified,
        reason: if verified == Some(true) {
            format!("goal verified: {}", verdict.reason)
        } else {
            format!(
                "all milestones passed; goal not verified: {}",
                verdict.reason
            )
        },
        extra: json!({}),
    }))
}

async fn replan_allowed(cx: &Attempt) -> bool {
    cx.journal
        .read(|s| s.strategy_replans < cx.config.max_replan_strategy)
        .await
}
