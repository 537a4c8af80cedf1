//! The direct path: a short act loop with no plan, for goals the gate judged simple.
//!
//! Planning has a cost (a model call at least, and more ways to go wrong): for a question one tool
//! call answers, a plan is overhead. The loop asks the `tactical` model (milestone `direct`) for
//! either steps to run or `{"done": true, "answer": ...}`, executes steps one at a time under the
//! same executor contract as planned steps (registered tools, arguments valid against their
//! schemas), stops after a few tool calls, and ends in the goal-level check: the verifier judges
//! the answer. Its spend is task overhead (there are no milestones) and is bounded by the task's
//! budget.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::contract::check_contract;
use super::report::{self, Ending};
use super::verifier;
use crate::domain::event::kinds;
use crate::domain::event::kinds::{EXECUTOR_DRIFT, STEP_FINISHED};
use crate::domain::plan::{Step, StepList};
use crate::domain::report::Cause;
use crate::domain::task::TaskStatus;
use crate::engine::Halt;
use crate::engine::RunOutcome;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::attempt::{Asked, Attempt, brief};
use crate::engine::runtime::checkpoint::{Record, TaskState};
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{FailureKind, Purpose, Repeat, ToolCall, Turn, model_cause};
use crate::engine::runtime::turns::{self, CallShape};
use crate::engine::{prompts, schemas};

/// The milestone id the direct path uses in model headers, keys and events.
pub const DIRECT: &str = "direct";

/// The act loop's checkpoint (inside the v2 state).
///
/// A round's steps are part of the round's commit (`pending`, with `next` the first not yet
/// executed), and each step's observation commits with `next` moved past it: a crash between
/// the two resumes at the step it interrupted, never skipping an observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
struct DirectState {
    rounds: u32,
    tool_calls: u32,
    observations: Vec<Value>,
    answer: Option<Value>,
    /// The latest round's steps, the index of the next one to run, and the tools that round
    /// offered (what its steps may use).
    pending: Vec<Step>,
    next: usize,
    offered: Vec<String>,
}

impl DirectState {
    fn next_step(&self) -> Option<&Step> {
        self.pending.get(self.next)
    }
}

fn load(value: Option<&Value>) -> DirectState {
    value
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// Runs the act loop to a terminal status.
pub async fn run(cx: &Attempt) -> Result<RunOutcome, Halt> {
    // Least privilege (`super::permit`): a goal that asks for no change calls no writer.
    let all_tools: Vec<String> = super::permit::permitted(cx).await;
    loop {
        let snapshot = cx.journal.snapshot().await;
        let direct = load(snapshot.direct.as_ref());
        // After a plan was handed over (`strategic::handover`), its books pay for the loop.
        let over = match snapshot.ledger {
            Some(_) => ledger::overdrawn(&snapshot, cx.task().budget),
            None => ledger::over_budget(cx.task().budget, snapshot.overhead),
        };
        if let Some(unit) = over {
            return report::finish(
                cx,
                Ending {
                    cause: None,
                    status: TaskStatus::BudgetExhausted,
                    verified: None,
                    reason: format!("the direct path ran out of {}", unit.as_str()),
                    extra: json!({"observations": direct.observations}),
                },
            )
            .await;
        }
        if cx.stopping() {
            return Ok(match cx.journal.ctx().stop_requested() {
                Some(super::StopSignal::LeaseLost) => RunOutcome::LeaseLost,
                _ => RunOutcome::Yielded,
            });
        }
        // The act loop has no plan to replace: a person's constraint joins its input.
        super::steering::take(cx).await?;
        if let Some(step) = direct.next_step() {
            if direct.tool_calls >= cx.config.direct_max_tool_calls {
                skip_pending(cx).await?;
            } else {
                execute(cx, &direct, step).await?;
            }
            continue;
        }
        if direct.answer.is_some() || direct.rounds >= cx.config.direct_max_rounds {
            return conclude(cx, direct).await;
        }
        // Out of tool calls, or at the last round: the model is asked for its answer only, so
        // the loop ends with what the observations support rather than with no answer.
        let last = direct.tool_calls >= cx.config.direct_max_tool_calls
            || direct.rounds + 1 >= cx.config.direct_max_rounds;
        let tools: &[String] = if last { &[] } else { &all_tools };
        round(cx, &direct, tools).await?;
    }
}

/// Drops the rest of a round's steps once the loop is out of tool calls.
async fn skip_pending(cx: &Attempt) -> Result<(), Halt> {
    cx.journal
        .record(|state| {
            let mut direct = load(state.direct.as_ref());
            direct.next = direct.pending.len();
            state.direct = serde_json::to_value(&direct).ok();
            Ok((Record::default(), ()))
        })
        .await?;
    Ok(())
}

/// One model round: asks for steps or an answer and commits the reply. Returns the steps to run.
async fn round(cx: &Attempt, direct: &DirectState, all_tools: &[String]) -> Result<(), Halt> {
    let round = direct.rounds + 1;
    // The goal and the tools first, then the calls so far as a conversation, then where the
    // loop stands: the earlier messages stay the same from round to round (a server's prompt
    // cache keeps them).
    let mut input = json!({"goal": cx.task().goal, "tools": cx.tool_schemas(all_tools)});
    let raised = cx
        .journal
        .read(|s| json!(s.ladder.constraint_texts()))
        .await;
    if raised.as_array().is_some_and(|r| !r.is_empty()) {
        input["constraints"] = raised;
    }
    let mut turns = turns::of_observations(&direct.observations, CallShape::Steps);
    turns.push(Turn::engine(json!({
        "tool_calls_left": cx.config.direct_max_tool_calls.saturating_sub(direct.tool_calls),
        "answer_now": all_tools.is_empty()})));
    let asked = cx
        .ask(Question {
            purpose: Purpose::Tactical,
            milestone: Some(DIRECT),
            attempt: round,
            prompt: &prompts::DIRECT,
            input,
            turns,
            schema: schemas::direct(&cx.tool_schemas(all_tools)),
        })
        .await;
    let reply = asked.reply.as_ref().map(|r| r.value.clone());
    let steps: Vec<Step> = reply
        .as_ref()
        .ok()
        .and_then(|v| serde_json::from_value::<StepList>(v.clone()).ok())
        .map(|l| l.steps)
        .unwrap_or_default();
    let answer = reply
        .as_ref()
        .ok()
        .filter(|v| v.get("done").and_then(Value::as_bool) == Some(true))
        .map(|v| v.get("answer").cloned().unwrap_or(Value::Null));
    cx.journal
        .record_prompted(&asked.prompt, |state| {
            let reply = Round {
                round,
                asked: &asked,
                steps: &steps,
                offered: all_tools,
                answer: answer.as_ref(),
            };
            record_round(state, &reply)
        })
        .await?;
    Ok(())
}

/// One round's reply, as it is committed.
struct Round<'a> {
    round: u32,
    asked: &'a Asked,
    steps: &'a [Step],
    offered: &'a [String],
    answer: Option<&'a Value>,
}

/// Commits a round: its charge, the steps it asks for (the intent, before any is run), the
/// answer or what was unusable about the reply, and a `direct.round` event.
fn record_round(state: &mut TaskState, reply: &Round<'_>) -> Result<(Record, ()), Halt> {
    let Round {
        round,
        asked,
        steps,
        offered,
        answer,
    } = *reply;
    let mut record = Record::default();
    ledger::charge(state, None, asked.spend, "tactical", &mut record)?;
    let mut direct = load(state.direct.as_ref());
    direct.rounds = round;
    direct.pending = steps.to_vec();
    direct.next = 0;
    direct.offered = offered.to_vec();
    match (&asked.reply, answer) {
        (_, Some(answer)) => direct.answer = Some(answer.clone()),
        (Err(error), _) => direct
            .observations
            .push(json!({"round": round, "model_error": error.message, "kind": error.kind})),
        (Ok(reply), None) if steps.is_empty() => direct
            .observations
            .push(json!({"round": round, "unusable_reply": brief(&reply.value, 500)})),
        _ => {}
    }
    record.push(
        kinds::DIRECT_ROUND,
        json!({"round": round, "steps": steps, "done": answer.is_some()}),
    );
    state.direct = serde_json::to_value(&direct).ok();
    Ok((record, ()))
}

/// One step of the act loop: the executor contract, the call, the charge, one commit that
/// also moves the round's `next` past the step.
async fn execute(cx: &Attempt, direct: &DirectState, step: &Step) -> Result<(), Halt> {
    let index = direct.next;
    if let Err(reason) = check_contract(cx, &direct.offered, step) {
        cx.journal
            .record(|state| {
                state.metrics.drift += 1;
                state.metrics.executor_failures += 1;
                let mut direct = load(state.direct.as_ref());
                direct
                    .observations
                    .push(json!({"step": step.id, "refused": reason}));
                direct.next = index + 1;
                state.direct = serde_json::to_value(&direct).ok();
                let record = Record::event(
                    EXECUTOR_DRIFT,
                    json!({"milestone": DIRECT, "step": step.id, "tool": step.tool, "reason": reason}),
                );
                Ok((record, ()))
            })
            .await?;
        return Ok(());
    }
    // Identified by content: only an identical earlier step of this round's list is a
    // deliberate repeat; an identical call of an earlier round shares its receipt.
    let earlier = direct.pending[..index.min(direct.pending.len())]
        .iter()
        .map(|s| (s.tool.as_str(), &s.args));
    let repeat = Repeat::among(&step.tool, &step.args, earlier);
    let call = ToolCall {
        task_id: cx.task().id,
        tool: step.tool.clone(),
        args: step.args.clone(),
        repeat,
    };
    // The call commits what is staged first; its reservation is held until its charge is.
    let called = cx.call_tool(call, None).await?;
    let (ok, output, error) = match called.reply {
        Ok(reply) => (reply.error.is_none(), reply.output, reply.error),
        Err(error) => (false, Value::Null, Some(error.message)),
    };
    cx.journal
        .record(|state| {
            let mut record = Record::default();
            ledger::charge(state, None, called.spend, "tool", &mut record)?;
            state.metrics.steps_total += 1;
            if ok {
                state.metrics.steps_completed += 1;
            } else {
                state.metrics.executor_failures += 1;
            }
            let mut direct = load(state.direct.as_ref());
            direct.tool_calls += 1;
            direct.next = index + 1;
            direct.observations.push(json!({"step": step.id, "tool": step.tool, "args": step.args,
                                             "ok": ok, "error": error, "output": brief(&output, 2000)}));
            state.direct = serde_json::to_value(&direct).ok();
            record.push(
                STEP_FINISHED,
                json!({"milestone": DIRECT, "step": step.id, "tool": step.tool, "ok": ok,
                       "error": error, "output": brief(&output, 2000)}),
            );
            Ok((record, ()))
        })
        .await?;
    Ok(())
}

/// The goal-level check of the direct path: programmatic evidence first, then the verifier.
///
/// - No answer: the task failed; when every round's model call failed, the cause is named
///   (`model_unreachable`, `model_invalid_output`).
/// - An answer to a goal that needs tools (the gate's features: a tool call or a write), with
///   no successful tool call behind it: not verified (`no_evidence`), and the verifier is not
///   asked, since a claim is not evidence.
/// - Otherwise the verifier sees the answer with the tool outputs; when it cannot give a
///   verdict the task is not verified (`unverified`), never `succeeded` with no verdict.
async fn conclude(cx: &Attempt, direct: DirectState) -> Result<RunOutcome, Halt> {
    let extra = json!({"answer": direct.answer, "tool_calls": direct.tool_calls});
    let ending = match &direct.answer {
        None => Ending {
            status: TaskStatus::Failed,
            verified: None,
            reason: unanswered_reason(&direct),
            extra,
            cause: direct_model_cause(&direct),
        },
        Some(_) if needs_evidence(cx).await && successful_calls(&direct) == 0 => Ending {
            status: TaskStatus::Failed,
            verified: Some(false),
            reason: "no evidence: the goal needs a tool call, and the answer has no successful \
                     tool call (no receipt) behind it"
                .into(),
            extra,
            cause: Some(Cause::NoEvidence),
        },
        Some(_) => {
            let evidence = json!({"answer": direct.answer, "tool_outputs": direct.observations});
            let verdict = verifier::verify_goal(cx, Some(DIRECT), evidence).await?;
            let (status, cause) = match verdict.verified {
                Some(true) => (TaskStatus::Succeeded, None),
                Some(false) => (TaskStatus::Failed, None),
                None => (TaskStatus::Failed, Some(Cause::Unverified)),
            };
            Ending {
                status,
                verified: verdict.verified,
                reason: match verdict.verified {
                    None => format!("unverified: {}", verdict.reason),
                    Some(_) => verdict.reason,
                },
                extra,
                cause,
            }
        }
    };
    report::finish(cx, ending).await
}

/// Whether the answer needs a successful tool call behind it: the goal needs tools (by the
/// gate's features, the model's included once asked), or a plan handed over to this loop said
/// so and the gate model was not heard (`strategic::handover`; measured live: a handed-over
/// "What is the status of ticket OPS-412?" answered "open", invented). When the gate model
/// agreed there was nothing to plan, the answer is judged as a direct knowledge answer is.
async fn needs_evidence(cx: &Attempt) -> bool {
    match cx.journal.read(|s| s.plan.is_some()).await {
        true => !super::gate::model_agrees(cx).await,
        false => super::gate::needs_tools(cx).await,
    }
}

fn successful_calls(direct: &DirectState) -> usize {
    direct
        .observations
        .iter()
        .filter(|o| o.get("tool").is_some() && o.get("ok") == Some(&Value::Bool(true)))
        .count()
}

/// The model failure that kept the loop from answering, when every round failed alike.
fn direct_model_cause(direct: &DirectState) -> Option<Cause> {
    let kinds: Vec<Option<FailureKind>> = direct
        .observations
        .iter()
        .filter(|o| o.get("round").is_some())
        .map(|o| {
            o.get("kind")
                .and_then(|k| serde_json::from_value::<FailureKind>(k.clone()).ok())
        })
        .collect();
    // Every round must have failed: a round that answered leaves no `round` observation.
    if kinds.len() < direct.rounds as usize {
        return None;
    }
    model_cause(&kinds)
}

fn unanswered_reason(direct: &DirectState) -> String {
    let last_error = direct
        .observations
        .iter()
        .rev()
        .find_map(|o| o.get("model_error").and_then(Value::as_str));
    match (direct_model_cause(direct), last_error) {
        (Some(cause), Some(error)) => format!("{}: {error}", cause.as_str()),
        _ => "the direct path gave no answer within its tool-call bound".into(),
    }
}
