//! The planning engine v2: gate, two-tier planning, acceptance checks, budget ledger, monitor,
//! local repair and resume (issue 4; both seeds in `shared/seeds`).
//!
//! The flow runs in one direction and closes only through the monitor:
//!
//! ```text
//! gate --direct--> act loop (crate::engine::v2::direct) --> goal verifier --> done
//!   \--plan--> strategic (validated, re-asked) --> plan v1 + ledger allocation
//!        ready milestones in parallel (bounded) --> runner: tactical -> executor -> monitor
//!        failing -> repair ladder (L1 retry step, L2 replan milestone, L3 replan strategy)
//!   all milestones done --> goal verifier --> result with spend per unit per milestone
//! ```
//!
//! Every transition is one fenced commit through [`checkpoint::Journal`]: its event(s), its
//! ledger entries, its artifacts, a plan version when the plan changed, and the checkpoint the
//! next attempt resumes from. Models and tools are reached through [`ports`], so the engine's
//! decisions are tested with fakes as well as against the simulator.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde_json::json;
use tokio::task::JoinSet;

use super::{Engine, EngineError, Halt, RunContext, RunOutcome, StopSignal};
use crate::domain::plan::MilestoneStatus;
use crate::domain::task::TaskStatus;

pub mod direct;
pub mod executor;
pub mod gate;
pub mod monitor;
pub mod repair;
pub mod report;
pub mod runner;
pub mod strategic;
pub mod tactical;
pub mod verifier;

use crate::domain::settings::EngineSettings;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{EngineKind, Failure, Journal, Phase, TaskState};
use crate::engine::runtime::ports::{ModelPort, ToolPort};
use gate::Route;
use report::Ending;
use runner::MilestoneEnd;

/// The v2 engine: cheap to clone, shared by every worker.
#[derive(Clone)]
pub struct V2Engine {
    models: Arc<dyn ModelPort>,
    tools: Arc<dyn ToolPort>,
    config: EngineSettings,
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
        }
    }
}

#[async_trait]
impl Engine for V2Engine {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        let state = match TaskState::resume(ctx.state.as_ref(), EngineKind::V2) {
            Ok(state) => state,
            Err(error) => return Err(error),
        };
        let specs = self
            .tools
            .specs()
            .into_iter()
            .map(|spec| (spec.name.clone(), spec))
            .collect();
        let cx = Arc::new(Attempt {
            journal: Journal::new(ctx, state),
            models: self.models.clone(),
            tools: self.tools.clone(),
            config: self.config.clone(),
            specs,
            halt: AtomicBool::new(false),
        });
        Halt::settle(drive(cx).await)
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
        return crate::engine::v2::direct::run(&cx).await;
    }
    if cx.journal.read(|s| s.plan.is_none()).await
        && let strategic::Strategic::Refused { reason } = strategic::plan(&cx, None).await?
    {
        return report::finish(
            &cx,
            Ending {
                status: TaskStatus::Failed,
                verified: None,
                reason: format!("no valid plan: {reason}"),
                extra: json!({"failure": "planner"}),
            },
        )
        .await;
    }
    loop {
        if cx.journal.read(|s| s.phase).await != Phase::Verify {
            match execute(&cx).await? {
                Flow::AllDone => {}
                Flow::Stopped => return Ok(cx.stop_outcome()),
                Flow::Ended(ending) => return report::finish(&cx, ending).await,
            }
        }
        let evidence = json!({"passed": "every milestone's acceptance check passed"});
        let verdict = verifier::verify_goal(&cx, None, evidence).await?;
        match verdict.verified {
            Some(false) => {
                let failure = Failure {
                    reason: "plan_exhausted_but_goal_unmet".into(),
                    detail: verdict.reason.clone(),
                    step: None,
                    executor: false,
                    seq: Some(verdict.seq),
                };
                if replan_allowed(&cx).await {
                    match replan_strategy(&cx, &failure, None).await? {
                        Some(ending) => return report::finish(&cx, ending).await,
                        None => continue,
                    }
                }
                return report::finish(
                    &cx,
                    Ending {
                        status: TaskStatus::Failed,
                        verified: Some(false),
                        reason: format!(
                            "all milestones passed but the goal is unmet: {}",
                            verdict.reason
                        ),
                        extra: json!({}),
                    },
                )
                .await;
            }
            verified => {
                return report::finish(
                    &cx,
                    Ending {
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
                    },
                )
                .await;
            }
        }
    }
}

async fn replan_allowed(cx: &Attempt) -> bool {
    cx.journal
        .read(|s| s.strategy_replans < cx.config.max_replan_strategy)
        .await
}

/// How the milestone phase ended.
enum Flow {
    AllDone,
    Stopped,
    Ended(Ending),
}

/// Runs ready milestones (independent ones in parallel, at most `max_parallel`) until all are
/// done, one fails for good, the budget runs out, or a stop is requested.
async fn execute(cx: &Arc<Attempt>) -> Result<Flow, Halt> {
    let mut resumed: BTreeSet<String> = cx
        .journal
        .read(|s| {
            s.plan
                .iter()
                .flat_map(|p| p.milestones.iter())
                .filter(|m| m.status == MilestoneStatus::Active)
                .map(|m| m.id.clone())
                .collect()
        })
        .await;
    let mut running: BTreeSet<String> = BTreeSet::new();
    let mut set: JoinSet<(String, Result<MilestoneEnd, Halt>)> = JoinSet::new();
    let mut verdict: Option<Result<Flow, Halt>> = None;
    let mut replan: Option<(Failure, String)> = None;
    loop {
        if verdict.is_none() && replan.is_none() && !cx.stopping() {
            let ready: Vec<String> = cx
                .journal
                .read(|s| {
                    let plan = s.plan.as_ref();
                    let mut ids: Vec<String> = plan
                        .iter()
                        .flat_map(|p| p.milestones.iter())
                        .filter(|m| m.status == MilestoneStatus::Active)
                        .map(|m| m.id.clone())
                        .collect();
                    ids.extend(plan.iter().flat_map(|p| p.ready()).map(|m| m.id.clone()));
                    ids
                })
                .await;
            for id in ready {
                if running.len() >= cx.config.max_parallel || running.contains(&id) {
                    continue;
                }
                running.insert(id.clone());
                let was_active = resumed.remove(&id);
                let cx = cx.clone();
                set.spawn(async move {
                    let end = runner::run(&cx, &id, was_active).await;
                    (id, end)
                });
            }
        }
        let Some(joined) = set.join_next().await else {
            break;
        };
        let (id, end) = match joined {
            Ok(pair) => pair,
            Err(error) => {
                cx.halt.store(true, Ordering::SeqCst);
                verdict.get_or_insert(Err(Halt::Error(EngineError::Other(format!(
                    "milestone runner panicked: {error}"
                )))));
                continue;
            }
        };
        running.remove(&id);
        match end {
            Ok(MilestoneEnd::Passed) | Ok(MilestoneEnd::Stopped) => {}
            Ok(MilestoneEnd::Failed(failure)) => {
                cx.halt.store(true, Ordering::SeqCst);
                verdict.get_or_insert(Ok(Flow::Ended(Ending {
                    status: TaskStatus::Failed,
                    verified: None,
                    reason: format!("milestone {id} failed: {}", failure.detail),
                    extra: json!({"failed_milestone": id, "replan_reason": "dependency_failed"}),
                })));
            }
            Ok(MilestoneEnd::Exhausted { unit }) => {
                cx.halt.store(true, Ordering::SeqCst);
                let _ = monitor::fail(
                    cx,
                    &id,
                    "over_budget",
                    &Failure {
                        reason: "budget_pressure".into(),
                        detail: format!("the reserve cannot cover {unit}"),
                        step: None,
                        executor: false,
                        seq: None,
                    },
                )
                .await;
                verdict.get_or_insert(Ok(Flow::Ended(Ending {
                    status: TaskStatus::BudgetExhausted,
                    verified: None,
                    reason: format!("milestone {id} ran out of {unit} and the reserve is empty"),
                    extra: json!({"exhausted_milestone": id, "unit": unit}),
                })));
            }
            Ok(MilestoneEnd::ReplanStrategy(failure)) => {
                cx.halt.store(true, Ordering::SeqCst);
                if replan.is_none() {
                    replan = Some((failure, id));
                }
            }
            Err(halt) => {
                cx.halt.store(true, Ordering::SeqCst);
                verdict = Some(Err(halt));
            }
        }
        if set.is_empty() {
            if let Some(verdict) = verdict.take() {
                return verdict;
            }
            if let Some((failure, id)) = replan.take() {
                cx.halt.store(false, Ordering::SeqCst);
                if let Some(ending) = replan_strategy(cx, &failure, Some(&id)).await? {
                    return Ok(Flow::Ended(ending));
                }
                resumed.clear();
                continue;
            }
            if cx.stopping() {
                return Ok(Flow::Stopped);
            }
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
            status: TaskStatus::Failed,
            verified: None,
            reason: "no milestone can run: the plan is stuck".into(),
            extra: json!({}),
        }))
    }
}

/// L3: a new plan version that keeps finished work. `Some(ending)` when none could be made.
async fn replan_strategy(
    cx: &Attempt,
    failure: &Failure,
    milestone: Option<&str>,
) -> Result<Option<Ending>, Halt> {
    cx.journal
        .record(|state| {
            state.strategy_replans += 1;
            state.ladder.replan_strategy += 1;
            Ok((crate::engine::runtime::checkpoint::Record::default(), ()))
        })
        .await?;
    let replanned = strategic::plan(cx, Some(strategic::Replan { failure, milestone })).await?;
    match replanned {
        strategic::Strategic::Accepted => Ok(None),
        strategic::Strategic::Refused { reason } => Ok(Some(Ending {
            status: TaskStatus::Failed,
            verified: None,
            reason: format!("strategy replan refused: {reason}"),
            extra: json!({"failure": failure}),
        })),
    }
}
