//! Strategy C: the v1 planner (one full plan up front, replanned whole).
//!
//! Ask the model for a numbered list of steps up front (each one tool call, its arguments
//! fixed when the list is written, before any result is known), execute them in order, and
//! when a step fails ask for a new full list and start again from its first step. Completed
//! steps of the old list are thrown away (counted in `discarded_steps`), and side-effecting
//! ones are performed again: the behaviour v2's local repair exists to avoid.
//!
//! A step fails when its tool reports an error or a non-zero exit code; v1 has no acceptance
//! checks, so a step that "succeeds" with the wrong result is not noticed.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Call, Finish, Ports, Progress, context, execute, exhausted, finish, stop_outcome};
use crate::domain::event::kinds::V1_LIST;
use crate::domain::task::TaskStatus;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::checkpoint::{EngineKind, Record, TaskState};
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{Purpose, Repeat};
use crate::engine::{Engine, EngineError, Halt, RunContext, RunOutcome};
use crate::engine::{prompts, schemas};

pub const NAME: &str = "v1";

#[derive(Clone)]
pub struct V1Engine {
    ports: Ports,
}

impl V1Engine {
    pub fn new(ports: Ports) -> Self {
        Self { ports }
    }
}

#[async_trait]
impl Engine for V1Engine {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        let cx = context(&self.ports, ctx, EngineKind::V1)?;
        let max_lists = self.ports.config.v1_max_replans + 1;
        crate::engine::runtime::approvals::settle(&cx, run(&cx, max_lists).await).await
    }
}

/// The repeat counter of step `index`: identical earlier steps of the same list (a new list
/// starts again at 0, so an identical step of a discarded list shares its receipt).
fn repeat_of(steps: &[Value], index: usize) -> Repeat {
    let parts: Vec<(String, String, Value)> = steps
        .iter()
        .take(index + 1)
        .enumerate()
        .map(|(i, s)| step_parts(s, i))
        .collect();
    let Some(((_, tool, args), earlier)) = parts.split_last() else {
        return Repeat::default();
    };
    Repeat::among(tool, args, earlier.iter().map(|(_, t, a)| (t.as_str(), a)))
}

fn step_parts(step: &Value, index: usize) -> (String, String, Value) {
    let id = match step.get("id") {
        Some(Value::String(id)) => id.clone(),
        Some(other) if !other.is_null() => other.to_string(),
        _ => (index + 1).to_string(),
    };
    let tool = step
        .get("tool")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let args = step.get("args").cloned().unwrap_or_else(|| json!({}));
    (id, tool, args)
}

async fn run(cx: &Attempt, max_lists: u32) -> Result<RunOutcome, Halt> {
    let tools: Vec<String> = cx.specs.keys().cloned().collect();
    loop {
        if let Some(outcome) = stop_outcome(cx) {
            return Ok(outcome);
        }
        if let Some(outcome) = exhausted(cx, NAME).await? {
            return Ok(outcome);
        }
        let progress = cx.journal.read(Progress::load).await;
        if progress.steps.is_empty() {
            if let Some(answer) = progress.answer.clone() {
                // A list with no steps but an answer: nothing to execute.
                let end = Finish {
                    strategy: NAME,
                    status: TaskStatus::Succeeded,
                    reason: "the list needed no tool call".into(),
                    answer: Some(answer),
                };
                return finish(cx, end).await;
            }
            if progress.lists >= max_lists {
                let end = Finish {
                    strategy: NAME,
                    status: TaskStatus::Failed,
                    reason: format!("step failed and {max_lists} lists were used"),
                    answer: None,
                };
                return finish(cx, end).await;
            }
            write_list(cx, &progress, &tools).await?;
            continue;
        }
        if progress.next >= progress.steps.len() {
            let answer = progress
                .observations
                .last()
                .and_then(|o| o.get("output"))
                .cloned();
            let end = Finish {
                strategy: NAME,
                status: TaskStatus::Succeeded,
                reason: format!(
                    "all {} steps of list {} ran",
                    progress.steps.len(),
                    progress.lists
                ),
                answer,
            };
            return finish(cx, end).await;
        }
        let index = progress.next;
        let (id, tool, args) = step_parts(&progress.steps[index], index);
        let step_name = format!("l{}.{}", progress.lists, id);
        let call = Call {
            strategy: NAME,
            step: &step_name,
            tool: &tool,
            args: &args,
            repeat: repeat_of(&progress.steps, index),
            then: advance,
        };
        execute(cx, call).await?;
    }
}

/// After a step of the list: on to the next, or (a failed step) global replanning, in the
/// step's own commit.
fn advance(state: &mut TaskState, progress: &mut Progress, ok: bool) {
    if ok {
        progress.next += 1;
    } else {
        // Global replanning: the whole list goes, finished steps included.
        progress.discarded_steps += u32::try_from(progress.next).unwrap_or(u32::MAX);
        progress.steps.clear();
        progress.next = 0;
        state.metrics.replans += 1;
    }
}

async fn write_list(cx: &Attempt, progress: &Progress, tools: &[String]) -> Result<(), Halt> {
    let list = progress.lists + 1;
    let input = json!({"goal": cx.task().goal, "strategy": NAME,
                       "tools": cx.tool_schemas(tools),
                       "previous_list_failed": list > 1,
                       "observations": progress.observations});
    let asked = cx
        .ask(Question {
            purpose: Purpose::Strategic,
            milestone: Some(NAME),
            attempt: list,
            prompt: &prompts::V1,
            input,
            turns: Vec::new(),
            schema: schemas::v1(&cx.tool_schemas(tools)),
        })
        .await;
    let steps: Vec<Value> = asked
        .reply
        .as_ref()
        .ok()
        .and_then(|r| r.value.get("steps"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let answer = asked
        .reply
        .as_ref()
        .ok()
        .and_then(|r| r.value.get("answer"))
        .filter(|a| !a.is_null())
        .cloned();
    let error = asked.reply.as_ref().err().map(|e| e.message.clone());
    cx.journal
        .record_prompted(&asked.prompt, |state| {
            let mut record = Record::default();
            ledger::charge(state, None, asked.spend, "v1", &mut record)?;
            state.metrics.plans_proposed += 1;
            if steps.is_empty() && answer.is_none() {
                state.metrics.plans_invalid += 1;
                state.metrics.planner_failures += 1;
            }
            let mut progress = Progress::load(state);
            progress.lists = list;
            progress.rounds += 1;
            progress.steps = steps.clone();
            progress.next = 0;
            if steps.is_empty() && answer.is_some() {
                progress.answer = answer.clone();
            } else if steps.is_empty() {
                progress
                    .observations
                    .push(json!({"list": list, "unusable_list": error.clone()}));
            }
            progress.store(state);
            record.push(
                V1_LIST,
                json!({"list": list, "steps": steps, "error": error}),
            );
            Ok((record, ()))
        })
        .await?;
    Ok(())
}
