//! The strategic planner: milestones with checks and effort, validated before anything runs.
//!
//! The prompt is short and stable (a small prompt is cheaper and more reliable; the schemas go to
//! the tactical prompt): the goal, the tool families (names and descriptions, not schemas), the
//! constraints, and the output shape. Its answer is parsed and validated
//! ([`crate::domain::plan::validate`]); an invalid plan goes back to the model with the errors, at
//! most `max_reasks` times, and is never executed. Version 1 is written with reason `initial`
//! together with the ledger's allocation. An L3 replan gets the current plan, the finished
//! milestones, the milestones in progress and the evidence, and must keep every finished milestone
//! ([`crate::domain::plan::validate::carry_over`]); a milestone in progress that it keeps
//! unchanged carries its finished steps ([`super::carry`]).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::domain::event::kinds::PLAN_DECLINED;
use crate::domain::plan::backing::{Amendment, amend};
use crate::domain::plan::error::{PlanError, feedback};
use crate::domain::plan::fingerprint::{Fingerprint, of_plan};
use crate::domain::plan::known::KnownTools;
use crate::domain::plan::validate::{carry_over, validate};
use crate::domain::plan::{MilestoneStatus, Plan, StepStatus};
use crate::domain::repair::{ProposalVerdict, ReplanReason};
use crate::domain::report::Cause;
use crate::engine::Halt;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::attempt::{Asked, Attempt};
use crate::engine::runtime::checkpoint::{Failure, Phase, Record, TaskState};
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{FailureKind, model_cause};
use crate::engine::runtime::ports::{Purpose, ToolSpec};
use crate::engine::{prompts, schemas};

mod commit;
mod handover;
mod repeat;

use commit::{Proposal, commit};

/// A plan that passed validation, with what the engine changed in it first.
#[derive(Debug, Clone)]
struct Amended {
    plan: Plan,
    amended: Vec<Amendment>,
}

/// How strategic planning ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Strategic {
    /// A valid plan is stored (as a new plan version).
    Accepted,
    /// The first answer had no milestone, or an L3 replan found the failed plan was for a goal
    /// that needs none ([`handover`]), and the goal names no change and no several targets:
    /// nothing to plan; the task continues on the direct route (`plan.declined`).
    NothingToPlan,
    /// Every proposal was invalid or the planner was unreachable; nothing was executed.
    Refused {
        reason: String,
        /// Set when every attempt failed alike at the model (unreachable, invalid output).
        cause: Option<Cause>,
    },
}

/// A tool as the planner is shown it; the artifacts it declares, when it declares any (the
/// names its milestone's checks may use).
fn family(tool: &ToolSpec) -> Value {
    let mut shown = json!({"name": tool.name, "description": tool.description,
                           "side_effects": tool.side_effects});
    if !tool.artifacts.is_empty() {
        shown["artifacts"] = json!(tool.artifacts);
    }
    shown
}

/// An L3 replan's inputs.
pub struct Replan<'a> {
    pub failure: &'a Failure,
    pub milestone: Option<&'a str>,
}

/// Asks for a plan (or, with `replan`, a new version of the current one) until one validates.
pub async fn plan(cx: &Attempt, replan: Option<Replan<'_>>) -> Result<Strategic, Halt> {
    if handover::hand_over(cx, replan.as_ref()).await? {
        return Ok(Strategic::NothingToPlan);
    }
    // Least privilege (`super::permit`): a goal that asks for no change plans no writer.
    let permitted = super::permit::permitted(cx).await;
    let mut errors: Option<String> = None;
    let mut failures: Vec<Option<FailureKind>> = Vec::new();
    // After a repeat: the failed milestone's tools that never succeeded there, not offered.
    let mut withheld: Option<BTreeSet<String>> = None;
    for _ in 0..=cx.config.max_reasks {
        let offered = repeat::offered(&permitted, withheld.as_ref());
        let specs = cx.tool_schemas(&offered);
        let known = KnownTools::new(offered.iter().cloned())
            .with_artifacts(specs.iter().map(|t| (t.name.clone(), t.artifacts.clone())));
        let families: Vec<Value> = specs.iter().map(|t| family(t)).collect();
        let snapshot = cx.journal.snapshot().await;
        if ledger::overdrawn(&snapshot, cx.task().budget).is_some() {
            break; // no re-ask the budget cannot pay for; the task ends budget_exhausted
        }
        let attempt = snapshot.strategic_calls + 1;
        let input = input(cx, &families, &snapshot, replan.as_ref(), errors.as_deref());
        let asked = ask(cx, attempt, input, &specs).await;
        failures.push(asked.reply.as_ref().err().map(|e| e.kind));
        let first = replan.is_none() && snapshot.plan.is_none();
        let declined = first && no_milestones(&asked);
        let declined_for = match declined {
            true => nothing_to_plan(cx).await,
            false => None,
        };
        if let Some(reason) = declined_for {
            decline(cx, &asked, attempt, reason).await?;
            return Ok(Strategic::NothingToPlan);
        }
        let (mut checked, repeated) = judge(&asked, &known, replan.as_ref(), &snapshot, declined);
        // A first repeat is told what failed and what is no longer offered (and recorded so).
        let retry = repeated
            .as_ref()
            .filter(|_| withheld.is_none())
            .map(|what| {
                repeat::retry(&snapshot, replan.as_ref(), what, &|t| repeat::wanted(cx, t))
            });
        if let Some((told, _)) = &retry {
            checked = Err(told.clone());
        }
        let answer = Answer {
            asked: &asked,
            attempt,
            checked: &checked,
            repeated: repeated.is_some(),
            version: snapshot.plan_version,
        };
        if stage(cx, answer, replan.as_ref()).await? {
            return Ok(Strategic::Accepted);
        }
        // Asked once more with the repeat stated; a second repeat is final.
        match (repeated, retry) {
            (_, Some((told, left))) => {
                errors = Some(told);
                withheld = Some(left);
                continue;
            }
            (Some(what), None) => {
                return Ok(Strategic::Refused {
                    reason: what,
                    cause: None,
                });
            }
            (None, None) => {}
        }
        errors = checked.err();
    }
    Ok(refused(&failures, errors))
}

/// How planning ends when no answer was a valid plan: the last errors, and the model's cause
/// when every attempt failed alike there.
fn refused(failures: &[Option<FailureKind>], errors: Option<String>) -> Strategic {
    let cause = model_cause(failures);
    let reason = errors.unwrap_or_else(|| "no valid plan".into());
    Strategic::Refused {
        reason: match cause {
            Some(cause) => format!("{}: {reason}", cause.as_str()),
            None => reason,
        },
        cause,
    }
}

/// One strategic question: the input, and the schema over the tools offered.
async fn ask(cx: &Attempt, attempt: u32, input: Value, specs: &[&ToolSpec]) -> Asked {
    cx.ask(Question {
        purpose: Purpose::Strategic,
        milestone: None,
        attempt,
        prompt: &prompts::STRATEGIC,
        input,
        turns: Vec::new(),
        schema: schemas::strategic(specs),
    })
    .await
}

/// One strategic answer, judged.
struct Answer<'a> {
    asked: &'a Asked,
    attempt: u32,
    checked: &'a Result<Amended, String>,
    repeated: bool,
    /// The plan version in force when it was asked.
    version: i32,
}

/// Stages the answer's commit: the plan refused, or installed (the first milestone's tactical
/// steps commit it with its start). Returns whether it was accepted.
async fn stage(
    cx: &Attempt,
    answer: Answer<'_>,
    replan: Option<&Replan<'_>>,
) -> Result<bool, Halt> {
    let asked = answer.asked;
    let proposal = Proposal {
        attempt: answer.attempt,
        checked: answer.checked,
        proposal: asked.reply.as_ref().ok().map(|r| r.value.clone()),
        repeated: answer.repeated,
        reason: version_reason(replan, answer.version),
        cause: replan.and_then(|r| r.failure.seq),
        replanned: replan.and_then(|r| r.milestone),
        unfinished: unfinished(replan),
    };
    let accepted = cx
        .journal
        .stage_prompted(&asked.prompt, |state| commit(state, cx, asked, &proposal))
        .await?
        .1;
    Ok(accepted)
}

/// What becomes of a running milestone's unrun steps: written again when a new constraint
/// asked for the version (they were written without it), else run as written.
fn unfinished(replan: Option<&Replan<'_>>) -> super::carry::Unfinished {
    match replan {
        Some(r) if r.failure.reason == ReplanReason::NewConstraint => {
            super::carry::Unfinished::Rewrite
        }
        _ => super::carry::Unfinished::Keep,
    }
}

/// The reason a new plan version is written with.
fn version_reason(replan: Option<&Replan<'_>>, version: i32) -> &'static str {
    match (replan, version) {
        (None, 0) => "initial",
        // A new constraint (a tool's or a person's) is not a failure of the plan.
        (Some(replan), _) if replan.failure.reason == ReplanReason::NewConstraint => {
            "new_constraint"
        }
        _ => "replan_strategy",
    }
}

/// Commits a declined first plan: the goal needs no plan and goes to the direct path.
async fn decline(cx: &Attempt, asked: &Asked, attempt: u32, reason: String) -> Result<(), Halt> {
    cx.journal
        .record_prompted(&asked.prompt, |state| {
            let mut record = Record::default();
            ledger::charge(state, None, asked.spend, "strategic", &mut record)?;
            state.strategic_calls = attempt;
            state.phase = Phase::Direct;
            record.push(PLAN_DECLINED, json!({"attempt": attempt, "reason": reason}));
            Ok((record, ()))
        })
        .await
        .map(|_| ())
}

/// The answer checked as a plan, and what it repeats of what failed ([`repeat`]): an L3 plan
/// identical to one that failed, or planning the failed milestone again as it was, is not run;
/// nothing is above L3.
fn judge(
    asked: &Asked,
    known: &KnownTools,
    replan: Option<&Replan<'_>>,
    snapshot: &TaskState,
    declined: bool,
) -> (Result<Amended, String>, Option<String>) {
    let checked = match check(asked, known, replan, snapshot) {
        Err(_) if declined => Err(NEEDS_A_PLAN.to_string()),
        other => other,
    };
    let Ok(amended) = checked.as_ref() else {
        return (checked, None);
    };
    let fp: Fingerprint = of_plan(&amended.plan);
    let failed = repeat::failed_milestone(snapshot, replan);
    // Asked for again by its failed answer: planning it again is no repeat.
    let repeated = if !repeat::asked_again(snapshot, replan).is_empty() {
        None
    } else if replan.is_some() && snapshot.ladder.propose_plan(&fp) == ProposalVerdict::GiveUp {
        Some(format!("the plan repeats a failed plan (fingerprint {fp})"))
    } else {
        failed.and_then(|f| {
            repeat::repeats(&amended.plan, f).map(|m| {
                format!(
                    "milestone {} plans the failed milestone {} again (the same title, outcome, tools and check)",
                    m.id, f.id
                )
            })
        })
    };
    match repeated {
        Some(what) => (Err(what.clone()), Some(what)),
        None => (checked, None),
    }
}

/// What an empty first plan is told when the goal does need one.
const NEEDS_A_PLAN: &str = "the plan has no milestones, but the goal needs a tool call, names a \
     change or several targets: plan at least one milestone";

/// Whether the answer is a well-formed plan with no milestone: the planner's way to say the
/// goal needs no tool.
fn no_milestones(asked: &Asked) -> bool {
    asked
        .reply
        .as_ref()
        .ok()
        .and_then(|reply| reply.value.get("milestones"))
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
}

/// Why an empty first plan may stand: the gate's features (or, on a forced route, the
/// deterministic heuristic) expect no tool call, no change and no several targets, so going
/// direct cannot bypass the rule that such goals are planned, and the direct route's
/// no-evidence rule agrees. `None` when the goal needs a plan after all.
async fn nothing_to_plan(cx: &Attempt) -> Option<String> {
    let features = super::gate::goal_features(cx).await;
    (features.targets <= 1 && !super::gate::expects_tools(&features)).then(|| {
        "the planner wrote no milestone and the goal's features expect no tool call, no \
         change and no several targets"
            .to_string()
    })
}

/// The strategic prompt's input; an L3 replan adds the current plan, what is finished and the
/// evidence of the failure.
fn input(
    cx: &Attempt,
    families: &[Value],
    snapshot: &TaskState,
    replan: Option<&Replan<'_>>,
    errors: Option<&str>,
) -> Value {
    let budget = cx.task().budget;
    let mut input = json!({
        "goal": cx.task().goal,
        "tools": families,
        "constraints": {"budget": budget, "raised": snapshot.ladder.constraints},
        "validation_errors": errors,
    });
    if let (Some(r), Some(current)) = (replan, &snapshot.plan) {
        input["replan"] = json!({
            "current_plan": current,
            "completed": current.milestones.iter()
                .filter(|m| m.status == MilestoneStatus::Done)
                .map(|m| json!({"id": m.id, "artifacts": snapshot.artifacts.get(&m.id)
                    .map(|a| a.keys().collect::<Vec<_>>())}))
                .collect::<Vec<_>>(),
            "in_progress": current.milestones.iter()
                .filter(|m| m.status == MilestoneStatus::Active && Some(m.id.as_str()) != r.milestone)
                .map(|m| json!({"id": m.id, "steps_done": m.steps.iter()
                    .filter(|s| s.status == StepStatus::Done).count()}))
                .collect::<Vec<_>>(),
            "failed_milestone": r.milestone,
            "evidence": r.failure,
            "rule": "keep every completed milestone unchanged (same id, title and accept); a milestone in progress kept unchanged (same id, title, accept, tools, depends_on) keeps its finished steps; plan only the remaining path",
        });
    }
    input
}

/// Parses, amends ([`amend`]) and validates the model's plan (a replan must carry the finished
/// milestones over); `Err` is the feedback for a re-ask.
fn check(
    asked: &Asked,
    known: &KnownTools,
    replan: Option<&Replan<'_>>,
    snapshot: &TaskState,
) -> Result<Amended, String> {
    let reply = asked
        .reply
        .as_ref()
        .map_err(|error| error.message.clone())?;
    let current = snapshot.plan.as_ref().filter(|_| replan.is_some());
    let finished: BTreeSet<String> = current
        .iter()
        .flat_map(|p| p.milestones.iter())
        .filter(|m| m.status == MilestoneStatus::Done)
        .map(|m| m.id.clone())
        .collect();
    let mut plan = Plan::from_value(&reply.value, 8).map_err(|errors| feedback(&errors, 8))?;
    let amended = amend(&mut plan, known, &finished);
    validate(&plan, known)
        .and_then(|()| match current {
            Some(current) => carry_over(current, &plan),
            None => Ok(plan),
        })
        .map(|plan| Amended { plan, amended })
        .map_err(|errors: Vec<PlanError>| feedback(&errors, 8))
}
