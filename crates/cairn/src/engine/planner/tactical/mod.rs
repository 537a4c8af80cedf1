//! The tactical planner: steps for one milestone, just before it runs.
//!
//! The prompt is concrete, and small for it (a small prompt is cheaper and more reliable): one
//! milestone, its acceptance check, its remaining budget, the artifacts of the milestones it
//! depends on and the full schemas of the tools it may use. On repair it also carries what was
//! tried and how it failed. A step list that fails validation goes back to the model with the
//! errors, a bounded number of times; a repair list whose fingerprint already failed is not
//! executed again: the ladder escalates instead, or, with `explore_repeats`, it is first refused
//! and asked once more, sampled warmer ([`Sampling::Explore`]), and a second repeat escalates.

mod attach;
mod input;
mod offer;
mod proposal;

use serde_json::json;

use crate::domain::event::kinds::{STEPS_PLANNED, STEPS_REFUSED};
use crate::domain::ledger::Unit;
use crate::domain::plan::fingerprint::{Fingerprint, of_steps};
use crate::domain::plan::{Milestone, Step};
use crate::domain::repair::{ProposalVerdict, RepairLevel, RepairLimits, rung_name};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::attempt::{Asked, Attempt};
use crate::engine::runtime::checkpoint::{Failure, Record, TaskState};
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{FailureKind, Purpose, Sampling};
use crate::engine::{prompts, schemas};
use attach::{Listed, attach};
use proposal::{guesses, parse};

/// Which kind of step list is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// The milestone's first step list.
    Initial,
    /// L1: a corrected version of the failing step (and what follows it).
    RetryStep,
    /// L2: a new step list for the whole milestone.
    ReplanMilestone,
    /// The rest of the current list, written again with the outputs of the steps that ran: the
    /// next step names a value its writer was not shown ([`crate::domain::grounding`]).
    Continue,
}

impl Ask {
    /// The ask for a milestone's pending repair (`None`, or an L3, asks for a first list), or
    /// the continuation of a list that has steps already.
    pub fn of(pending_repair: Option<RepairLevel>, has_steps: bool) -> Ask {
        match pending_repair {
            Some(RepairLevel::RetryStep) => Ask::RetryStep,
            Some(RepairLevel::ReplanMilestone) => Ask::ReplanMilestone,
            None if has_steps => Ask::Continue,
            _ => Ask::Initial,
        }
    }

    /// The repair level this ask answers, `None` for a first list or a continuation.
    pub fn repair_level(self) -> Option<RepairLevel> {
        match self {
            Ask::Initial | Ask::Continue => None,
            Ask::RetryStep => Some(RepairLevel::RetryStep),
            Ask::ReplanMilestone => Some(RepairLevel::ReplanMilestone),
        }
    }
}

/// What the tactical tier produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    /// A new step list is attached to the milestone.
    Steps {
        fingerprint: String,
    },
    /// The proposal repeats one already tried: escalate to `to` (`None`: give up) instead of
    /// executing it.
    Repeated {
        fingerprint: String,
        to: Option<RepairLevel>,
    },
    /// Every proposal, re-asks included, was invalid or unusable.
    Unusable {
        reason: String,
    },
    Exhausted {
        unit: Unit,
    },
}

/// One request to the tactical planner.
#[derive(Clone, Copy)]
pub(super) struct Request<'a> {
    pub(super) milestone_id: &'a str,
    pub(super) ask: Ask,
    pub(super) failure: Option<&'a Failure>,
    /// The validation errors of the previous proposal, on a re-ask.
    pub(super) errors: Option<&'a str>,
}

/// The model's answer to one request, judged, as it is committed.
struct Proposal<'a> {
    request: Request<'a>,
    attempt: u32,
    parsed: &'a Result<Vec<Step>, String>,
    /// The model could not be reached (not counted as the planner's failure).
    transient: bool,
    fingerprint: Option<Fingerprint>,
    /// Tools offered beyond the milestone's grant ([`offer`]): granted when a list uses them.
    extra: &'a [String],
    /// A repair proposal that repeats a failed list is refused and asked once more, sampled
    /// warmer, before the ladder escalates on it.
    may_reask_repeat: bool,
    /// Indices (in the proposed list) of the steps naming a value the planner was not shown.
    guessed: Vec<usize>,
}

/// Asks for steps for `milestone_id` and attaches them (one commit per model call).
pub async fn plan_steps(
    cx: &Attempt,
    milestone_id: &str,
    ask: Ask,
    failure: Option<&Failure>,
) -> Result<Planned, Halt> {
    let limits = super::repair::limits(&cx.config);
    let mut errors: Option<String> = None;
    let mut sampling = Sampling::Endpoint;
    for reask in 0..=cx.config.max_reasks {
        let request = Request {
            milestone_id,
            ask,
            failure,
            errors: errors.as_deref(),
        };
        let Some((milestone, attempt, input, offered)) = read_question(cx, &request).await else {
            return Ok(Planned::Unusable {
                reason: format!("milestone {milestone_id} is not in the plan"),
            });
        };
        let turns = input::repair_turns(&request, &milestone);
        let shown = input::shown(&input);
        let question = Question {
            purpose: Purpose::Tactical,
            milestone: Some(milestone_id),
            attempt,
            prompt: &prompts::TACTICAL,
            input,
            turns,
            schema: schemas::tactical(&cx.tool_schemas(&offered.tools), ask == Ask::Continue),
        };
        let asked = cx.ask_sampled(question, sampling).await;
        let writes = |tool: &str| cx.specs.get(tool).is_some_and(|spec| spec.side_effects);
        let parsed = parse(&asked, &milestone, ask, &writes);
        let fingerprint = parsed.as_ref().ok().map(|steps| of_steps(steps));
        let guessed = parsed
            .as_ref()
            .map_or_else(|_| Vec::new(), |steps| guesses(steps, &shown));
        let proposal = Proposal {
            request,
            attempt,
            parsed: &parsed,
            transient: matches!(&asked.reply, Err(e) if e.kind != FailureKind::InvalidOutput),
            fingerprint: fingerprint.clone(),
            extra: &offered.extra,
            may_reask_repeat: cx.config.explore_repeats
                && sampling == Sampling::Endpoint
                && reask < cx.config.max_reasks,
            guessed,
        };
        let (_, outcome) = cx
            .journal
            .record_prompted(&asked.prompt, |state| {
                commit(state, proposal, &asked, &limits)
            })
            .await?;
        if let Some(outcome) = outcome {
            return Ok(outcome);
        }
        errors = match (parsed, fingerprint) {
            (Err(reason), _) => Some(reason),
            // Refused as a repeat: the same question once more, with the refusal stated.
            (Ok(_), fp) => {
                sampling = Sampling::Explore;
                Some(format!(
                    "this step list repeats one that already failed (fingerprint {}); it is \
                     not run again: write a different list",
                    fp.map(|f| f.0).unwrap_or_default()
                ))
            }
        };
    }
    Ok(Planned::Unusable {
        reason: errors.unwrap_or_else(|| "no usable step list".into()),
    })
}

/// What the question needs: the milestone, the call's attempt number, the input and the tools
/// offered, read under the journal's lock (no copy of the state); `None` when the plan has no
/// such milestone.
async fn read_question(
    cx: &Attempt,
    request: &Request<'_>,
) -> Option<(Milestone, u32, serde_json::Value, offer::Offer)> {
    let milestone_id = request.milestone_id;
    cx.journal
        .read(|state| {
            let milestone = state
                .plan
                .as_ref()
                .and_then(|plan| plan.milestone(milestone_id))?
                .clone();
            let attempt = state
                .runs
                .get(milestone_id)
                .map_or(0, |run| run.tactical_calls)
                + 1;
            let observations = state
                .runs
                .get(milestone_id)
                .map_or(&[][..], |run| &run.observations);
            let offered = offer::offer(
                cx.specs.values(),
                &milestone,
                observations,
                request.ask,
                &cx.task().goal,
            );
            let input = input::input(cx, request, state, &milestone, &offered.tools);
            Some((milestone, attempt, input, offered))
        })
        .await
}

/// Commits one tactical call: its charge, the ladder's verdict on the proposal, and the steps
/// attached or refused. `Some` ends the asking.
fn commit(
    state: &mut TaskState,
    proposal: Proposal<'_>,
    asked: &Asked,
    limits: &RepairLimits,
) -> Result<(Record, Option<Planned>), Halt> {
    let milestone_id = proposal.request.milestone_id;
    let mut record = Record::default();
    let charged = ledger::charge(
        state,
        Some(milestone_id),
        asked.spend,
        "tactical",
        &mut record,
    )?;
    let exhausted = charged.and_then(|c| c.exhausted);
    state.run_mut(milestone_id).tactical_calls = proposal.attempt;
    let level = proposal.request.ask.repair_level();
    if let (Some(fp), Some(level), true) = (&proposal.fingerprint, level, proposal.may_reask_repeat)
        && state.ladder.failed_before(milestone_id, fp)
    {
        record.push(
            STEPS_REFUSED,
            json!({"milestone": milestone_id, "attempt": proposal.attempt,
                   "repeated_fingerprint": fp.0, "level": level, "reask": true}),
        );
        let outcome = exhausted.map(|unit| Planned::Exhausted { unit });
        return Ok((record, outcome));
    }
    // The ladder judges a repair proposal: new ones are executed, failed ones escalate.
    let verdict = match (&proposal.fingerprint, level) {
        (Some(fp), Some(level)) => state
            .ladder
            .propose(milestone_id, level, fp.clone(), limits),
        _ => ProposalVerdict::Accept,
    };
    let outcome = settle(state, &proposal, verdict, &mut record);
    let outcome = match exhausted {
        Some(unit) => Some(Planned::Exhausted { unit }),
        None => outcome,
    };
    Ok((record, outcome))
}

/// What the verdict on a proposal means: refused (re-ask), repeated (escalate) or attached.
fn settle(
    state: &mut TaskState,
    proposal: &Proposal<'_>,
    verdict: ProposalVerdict,
    record: &mut Record,
) -> Option<Planned> {
    let Request {
        milestone_id,
        ask,
        failure,
        ..
    } = proposal.request;
    let attempt = proposal.attempt;
    let level = ask.repair_level();
    match (proposal.parsed, proposal.fingerprint.clone().map(|f| f.0)) {
        (Err(reason), _) => {
            if !proposal.transient {
                state.metrics.step_lists_invalid += 1;
                state.metrics.planner_failures += 1;
            }
            record.push(
                STEPS_REFUSED,
                json!({"milestone": milestone_id, "attempt": attempt, "errors": reason}),
            );
            None
        }
        (Ok(_), Some(fp)) if verdict != ProposalVerdict::Accept => {
            let to = match verdict {
                ProposalVerdict::Escalate { to } => Some(to),
                _ => None,
            };
            record.push(
                STEPS_REFUSED,
                json!({"milestone": milestone_id, "attempt": attempt,
                       "repeated_fingerprint": fp, "level": level,
                       "escalate_to": rung_name(to)}),
            );
            Some(Planned::Repeated {
                fingerprint: fp,
                to,
            })
        }
        (Ok(steps), Some(fp)) => {
            let listed = Listed {
                ask,
                failure,
                steps: steps.clone(),
                guessed: &proposal.guessed,
            };
            attach(state, milestone_id, listed);
            let granted = offer::grant(state, milestone_id, steps, proposal.extra);
            let mut planned = json!({"milestone": milestone_id, "attempt": attempt,
                                     "level": level, "fingerprint": fp, "steps": steps});
            if !granted.is_empty() {
                planned["granted"] = json!(granted);
            }
            if ask == Ask::Continue {
                planned["continued"] = json!(true);
            }
            if !proposal.guessed.is_empty() {
                // The steps that wait for the outputs before them (shown again, then run).
                let ids: Vec<&str> = proposal
                    .guessed
                    .iter()
                    .filter_map(|&i| steps.get(i).map(|s| s.id.as_str()))
                    .collect();
                planned["unshown_values_in"] = json!(ids);
            }
            record.push(STEPS_PLANNED, planned);
            if let Some(level) = level {
                record.plan_version =
                    Some((level.as_str().to_string(), failure.and_then(|f| f.seq)));
            }
            Some(Planned::Steps { fingerprint: fp })
        }
        (Ok(_), None) => None,
    }
}
