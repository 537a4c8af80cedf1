//! Strategy B: step by step, no explicit plan.
//!
//! Each round the model sees the goal, the tools and every observation so far, and names one
//! tool call or answers. It adapts to what it sees (a failed call is just another
//! observation), but nothing outside the model remembers what still has to be done, and the
//! whole history is re-sent every round, so cost grows with the length of the task.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    Call, Finish, PendingCall, Ports, Progress, context, execute, exhausted, finish, stop_outcome,
};
use crate::domain::event::kinds::STRATEGY_ROUND;
use crate::domain::task::TaskStatus;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::checkpoint::{EngineKind, Record, TaskState};
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{Purpose, Repeat};
use crate::engine::runtime::turns::{self, CallShape};
use crate::engine::{Engine, EngineError, Halt, RunContext, RunOutcome};
use crate::engine::{prompts, schemas};

pub const NAME: &str = "reactive";

#[derive(Clone)]
pub struct ReactiveEngine {
    ports: Ports,
}

impl ReactiveEngine {
    pub fn new(ports: Ports) -> Self {
        Self { ports }
    }
}

#[async_trait]
impl Engine for ReactiveEngine {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        let cx = context(&self.ports, ctx, EngineKind::Reactive)?;
        let max_rounds = self.ports.config.reactive_max_rounds;
        crate::engine::runtime::approvals::settle(&cx, run(&cx, max_rounds).await).await
    }
}

/// What the model asked for in one round.
enum Move {
    Call { tool: String, args: Value },
    Done(Value),
    Unusable(String),
}

fn parse(value: &Value) -> Move {
    if value.get("done").and_then(Value::as_bool) == Some(true) {
        return Move::Done(value.get("answer").cloned().unwrap_or(Value::Null));
    }
    match value.get("tool").and_then(Value::as_str) {
        Some(tool) => Move::Call {
            tool: tool.to_string(),
            args: value.get("args").cloned().unwrap_or_else(|| json!({})),
        },
        None => Move::Unusable(crate::engine::runtime::attempt::brief(value, 300).to_string()),
    }
}

async fn run(cx: &Attempt, max_rounds: u32) -> Result<RunOutcome, Halt> {
    let tools: Vec<String> = cx.specs.keys().cloned().collect();
    loop {
        if let Some(outcome) = stop_outcome(cx) {
            return Ok(outcome);
        }
        if let Some(outcome) = exhausted(cx, NAME).await? {
            return Ok(outcome);
        }
        let progress = cx.journal.read(Progress::load).await;
        if let Some(pending) = &progress.pending {
            // Decided by a committed round, not yet observed (a crash came between).
            run_call(cx, pending).await?;
            continue;
        }
        if let Some(answer) = progress.answer {
            let end = Finish {
                strategy: NAME,
                status: TaskStatus::Succeeded,
                reason: format!("answered after {} rounds", progress.rounds),
                answer: Some(answer),
            };
            return finish(cx, end).await;
        }
        if progress.rounds >= max_rounds {
            let end = Finish {
                strategy: NAME,
                status: TaskStatus::Failed,
                reason: format!("no answer within {max_rounds} rounds"),
                answer: None,
            };
            return finish(cx, end).await;
        }
        let round = progress.rounds + 1;
        if let Some(call) = ask_round(cx, &tools, &progress, round).await? {
            run_call(cx, &call).await?;
        }
    }
}

/// Asks the model for round `round`'s move and commits it (the charge, the move, the call it
/// decided, still to be run).
async fn ask_round(
    cx: &Attempt,
    tools: &[String],
    progress: &Progress,
    round: u32,
) -> Result<Option<PendingCall>, Halt> {
    let input = json!({"goal": cx.task().goal, "strategy": NAME,
                       "tools": cx.tool_schemas(tools)});
    let turns = turns::of_observations(&progress.observations, CallShape::Single);
    let asked = cx
        .ask(Question {
            purpose: Purpose::Tactical,
            milestone: Some(NAME),
            attempt: round,
            prompt: &prompts::REACTIVE,
            input,
            turns,
            schema: schemas::reactive(&cx.tool_schemas(tools)),
        })
        .await;
    let chosen = match &asked.reply {
        Ok(reply) => parse(&reply.value),
        Err(error) => Move::Unusable(format!("model error: {}", error.message)),
    };
    let call = match &chosen {
        Move::Call { tool, args } => Some(PendingCall {
            step: format!("r{round}"),
            tool: tool.clone(),
            args: args.clone(),
        }),
        _ => None,
    };
    cx.journal
        .record_prompted(&asked.prompt, |state| {
            let mut record = Record::default();
            ledger::charge(state, None, asked.spend, "reactive", &mut record)?;
            let mut progress = Progress::load(state);
            progress.rounds = round;
            progress.pending = call.clone();
            let summary = match &chosen {
                Move::Done(answer) => {
                    progress.answer = Some(answer.clone());
                    json!({"done": true})
                }
                Move::Call { tool, .. } => json!({"tool": tool}),
                Move::Unusable(why) => {
                    progress
                        .observations
                        .push(json!({"round": round, "unusable_reply": why}));
                    json!({"unusable": why})
                }
            };
            progress.store(state);
            record.push(
                STRATEGY_ROUND,
                json!({"strategy": NAME, "round": round, "move": summary}),
            );
            Ok((record, ()))
        })
        .await?;
    Ok(call)
}

/// Runs the round's call; its commit records the observation and clears `pending`.
async fn run_call(cx: &Attempt, call: &PendingCall) -> Result<(), Halt> {
    let call = Call {
        strategy: NAME,
        step: &call.step,
        tool: &call.tool,
        args: &call.args,
        // One call per round: an identical call of an earlier round shares its receipt.
        repeat: Repeat::default(),
        then: observed,
    };
    execute(cx, call).await?;
    Ok(())
}

fn observed(_: &mut TaskState, progress: &mut Progress, _: bool) {
    progress.pending = None;
}
