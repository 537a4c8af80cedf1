//! The baselines of the evaluation's strategy matrix: one_shot (A), reactive (B), v1 (C).
//!
//! They exist to be measured against v2 (D), so they run through exactly the same machinery:
//! the worker pool claims them, every model call and tool call is one fenced commit through
//! the v2 [`Journal`](crate::engine::runtime::journal::Journal) (a ledger charge, a `step.finished` or
//! `strategy.round` event, the checkpoint), models and tools are reached through the same
//! [`ports`](crate::engine::runtime::ports), and the result has the same spend and metrics fields. Only the
//! decisions differ:
//!
//! - [`one_shot`] (A): one model call, no tools; the answer is the result.
//! - [`reactive`] (B): step by step, no explicit plan: each round the model sees the
//!   observations so far and names one tool call, or answers.
//! - [`v1`] (C): a numbered list of steps written up front, executed in order; when a step
//!   fails, a new full list is asked for and execution restarts from its first step, throwing
//!   away progress (the v1 planner: one full plan, replanned whole).
//!
//! None of them has a goal verifier (that is a v2 mechanism): a baseline ends `succeeded` when
//! it believes it is done, and the evaluation's acceptance check decides whether it really was.
//!
//! Wire protocol with the model (what the simulator and a real model are asked): the purpose
//! and milestone headers say which strategy is asking, so no new purpose is needed:
//! one_shot asks `tactical` / milestone `one_shot`; reactive asks `tactical` / `reactive` with
//! the round as attempt; v1 asks `strategic` / `v1` with the list number as attempt.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::event::kinds::STEP_FINISHED;
use crate::domain::ledger::Unit;
use crate::domain::settings::EngineSettings;
use crate::domain::task::TaskStatus;
use crate::engine::runtime::attempt::{Attempt, Validators, brief};
use crate::engine::runtime::checkpoint::{EngineKind, Record, Spend, TaskState};
use crate::engine::runtime::journal::Journal;
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{ModelPort, Repeat, ToolCall, ToolPort};
use crate::engine::runtime::reserve::Overreport;
use crate::engine::{EngineError, Halt, RunContext, RunOutcome, StopSignal};

pub mod one_shot;
pub mod reactive;
pub mod v1;

pub use one_shot::OneShotEngine;
pub use reactive::ReactiveEngine;
pub use v1::V1Engine;

/// Knobs of the baselines.
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineConfig {
    /// Model rounds of the reactive loop before it gives up.
    pub reactive_max_rounds: u32,
    /// New full lists v1 may ask for after the first (its replan budget).
    pub v1_max_replans: u32,
}

impl Default for BaselineConfig {
    fn default() -> Self {
        Self {
            reactive_max_rounds: 16,
            v1_max_replans: 2,
        }
    }
}

/// What every baseline engine holds.
#[derive(Clone)]
pub struct Ports {
    pub models: Arc<dyn ModelPort>,
    pub tools: Arc<dyn ToolPort>,
    pub config: BaselineConfig,
    /// The tools' argument validators, shared by every attempt of the baselines.
    pub validators: Arc<Validators>,
    /// The operator's approval policy: a baseline's calls are signed off like v2's.
    pub approval: crate::domain::approval::ApprovalPolicy,
    /// What calls cost and what each tenant may spend: a baseline's calls are priced,
    /// reserved and capped like v2's.
    pub prices: crate::domain::price::Prices,
    pub spend_caps: crate::domain::spend::SpendCaps,
}

/// A baseline's own progress, kept in the v2 state's free slot so it resumes from the
/// checkpoint like everything else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Progress {
    /// reactive: the call the latest round asked for, committed with the round and cleared
    /// with its observation, so a crash between the two runs it on resume instead of losing it.
    pub pending: Option<PendingCall>,
    pub rounds: u32,
    pub observations: Vec<Value>,
    /// v1: the current list, the index of the next step and how many lists were asked for.
    pub steps: Vec<Value>,
    pub next: usize,
    pub lists: u32,
    /// v1: completed steps thrown away by a new list (the cost of global replanning).
    pub discarded_steps: u32,
    pub answer: Option<Value>,
}

/// A tool call a baseline decided on and has not yet recorded the observation of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub step: String,
    pub tool: String,
    pub args: Value,
}

impl Progress {
    pub fn load(state: &TaskState) -> Progress {
        state
            .direct
            .as_ref()
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    pub fn store(&self, state: &mut TaskState) {
        state.direct = serde_json::to_value(self).ok();
    }
}

/// Builds the shared run context for one attempt (the same one v2 uses), resuming `engine`'s
/// checkpoint.
pub fn context(ports: &Ports, ctx: RunContext, engine: EngineKind) -> Result<Attempt, EngineError> {
    let mut state = TaskState::resume(ctx.state.as_ref(), engine)?;
    let after_park = std::mem::take(&mut state.parked);
    let specs = ctx.offered_tools(ports.tools.specs());
    let overreport = Overreport::resumed(state.learned);
    Ok(Attempt {
        journal: Journal::new(ctx, state),
        models: ports.models.clone(),
        tools: ports.tools.clone(),
        config: EngineSettings {
            approval: ports.approval.clone(),
            prices: ports.prices.clone(),
            spend_caps: ports.spend_caps.clone(),
            ..EngineSettings::default()
        },
        specs,
        validators: ports.validators.clone(),
        halt: AtomicBool::new(false),
        approvals: Default::default(),
        after_park,
        held: Default::default(),
        overreport,
    })
}

/// The outcome to return when a stop was requested, `None` to carry on.
pub fn stop_outcome(cx: &Attempt) -> Option<RunOutcome> {
    match cx.journal.ctx().stop_requested()? {
        StopSignal::LeaseLost => Some(RunOutcome::LeaseLost),
        _ => Some(RunOutcome::Yielded),
    }
}

/// The unit the task has overspent, if any.
pub fn over_budget(cx: &Attempt, spent: Spend) -> Option<Unit> {
    ledger::over_budget(cx.task().budget, spent)
}

/// Whether a tool answer counts as a failed step: an error, or a non-zero exit code (what a
/// list-executing agent can see without a check of its own).
pub fn step_failed(error: Option<&str>, output: &Value) -> bool {
    error.is_some()
        || output
            .get("exit_code")
            .and_then(Value::as_i64)
            .is_some_and(|code| code != 0)
}

/// One executed tool call, as a baseline records it.
pub struct Executed {
    pub ok: bool,
    pub observation: Value,
}

/// One tool call of a baseline, and what its commit does to the progress besides recording
/// the observation (`then(state, progress, ok)`), so that the observation and the move past
/// the step are one commit.
pub struct Call<'a> {
    pub strategy: &'a str,
    pub step: &'a str,
    pub tool: &'a str,
    pub args: &'a Value,
    /// Earlier identical actions of the same list (see [`Repeat`]).
    pub repeat: Repeat,
    pub then: fn(&mut TaskState, &mut Progress, bool),
}

/// Calls one tool (registered tools only; anything else is executor drift, as in v2) and
/// commits the charge, the observation, the call's `then` and a `step.finished` event. The
/// call is identified by its content and `repeat` (as in v2: an identical side-effecting call
/// already performed is answered from its receipt).
pub async fn execute(cx: &Attempt, call: Call<'_>) -> Result<Executed, Halt> {
    let Call {
        strategy,
        step,
        tool,
        args,
        repeat,
        then,
    } = call;
    let known = cx.specs.contains_key(tool);
    // The call's reservation is held until its charge is recorded below.
    let (ok, output, error, spend, _hold) = if known {
        let call = ToolCall {
            task_id: cx.task().id,
            tool: tool.to_string(),
            args: args.clone(),
            repeat,
        };
        let called = cx.call_tool(call, None).await?;
        match called.reply {
            Ok(reply) => {
                let failed = step_failed(reply.error.as_deref(), &reply.output);
                let output = reply.output;
                (!failed, output, reply.error, called.spend, called.hold)
            }
            Err(error) => {
                let message = Some(error.message);
                (false, Value::Null, message, called.spend, called.hold)
            }
        }
    } else {
        let reason = format!("tool {tool:?} is not registered");
        (false, Value::Null, Some(reason), Spend::default(), None)
    };
    let observation = json!({"step": step, "tool": tool, "args": args, "ok": ok,
                             "error": error, "output": brief(&output, 2000)});
    let event = json!({"milestone": strategy, "step": step, "tool": tool, "ok": ok,
                       "error": error, "output": brief(&output, 2000)});
    cx.journal
        .record(|state| {
            let mut record = Record::default();
            ledger::charge(state, None, spend, "tool", &mut record)?;
            state.metrics.steps_total += 1;
            if ok {
                state.metrics.steps_completed += 1;
            } else if known {
                state.metrics.executor_failures += 1;
            } else {
                state.metrics.drift += 1;
                state.metrics.executor_failures += 1;
            }
            let mut progress = Progress::load(state);
            progress.observations.push(observation.clone());
            then(state, &mut progress, ok);
            progress.store(state);
            record.push(STEP_FINISHED, event);
            Ok((record, ()))
        })
        .await?;
    Ok(Executed { ok, observation })
}

/// How a baseline ends.
pub struct Finish {
    pub strategy: &'static str,
    pub status: TaskStatus,
    pub reason: String,
    pub answer: Option<Value>,
}

/// Commits the terminal status with a result shaped like v2's (spend, metrics, reason).
pub async fn finish(cx: &Attempt, end: Finish) -> Result<RunOutcome, Halt> {
    let status = end.status;
    cx.journal
        .record(|state| {
            let progress = Progress::load(state);
            let result = json!({
                "engine": end.strategy,
                "status": status.as_str(),
                "verified": Value::Null,
                "reason": end.reason,
                "answer": end.answer,
                "spend": state.overhead,
                "spend_estimated": state.estimated,
                "overhead": state.overhead,
                "metrics": state.metrics,
                "rounds": progress.rounds,
                "lists": progress.lists,
                "discarded_steps": progress.discarded_steps,
            });
            let mut record = Record::default();
            record.finish(status, result);
            Ok((record, ()))
        })
        .await?;
    Ok(RunOutcome::Finished(status))
}

/// The budget check every baseline makes before spending more.
pub async fn exhausted(cx: &Attempt, strategy: &'static str) -> Result<Option<RunOutcome>, Halt> {
    let (spent, refused) = cx.journal.read(|s| (s.overhead, s.refused)).await;
    // A call refused before it was sent (`runtime::reserve`) ends the run like spend beyond it.
    match refused.or_else(|| over_budget(cx, spent)) {
        Some(unit) => finish(
            cx,
            Finish {
                strategy,
                status: TaskStatus::BudgetExhausted,
                reason: format!("{strategy} ran out of {}", unit.as_str()),
                answer: None,
            },
        )
        .await
        .map(Some),
        None => Ok(None),
    }
}
