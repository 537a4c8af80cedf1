//! Committing a tactical answer: its charge, the ladder's verdict on it, and the step list
//! attached to its milestone or refused.

use serde_json::json;

use super::{Ask, Planned, Proposal, Request, made, offer, recut};
use crate::domain::event::kinds::{STEPS_PLANNED, STEPS_REFUSED};
use crate::domain::plan::{Step, StepStatus};
use crate::domain::repair::{ProposalVerdict, RepairLimits, rung_name};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Asked;
use crate::engine::runtime::checkpoint::{Failure, Record, TaskState};
use crate::engine::runtime::ledger;

/// A step list to attach, with what asked for it.
pub(super) struct Listed<'a> {
    pub(super) ask: Ask,
    pub(super) failure: Option<&'a Failure>,
    pub(super) steps: Vec<Step>,
    /// Indices in `steps` of the steps naming a value the planner was not shown.
    pub(super) guessed: &'a [usize],
}

/// Attaches a step list: L1 keeps the steps before the failing one and replaces the rest; a
/// continuation keeps the steps that ran; the initial list and L2 replace everything. A
/// re-planned step identical to one already performed keeps its idempotency key
/// (content-derived) and is answered from its receipt.
pub(super) fn attach(state: &mut TaskState, milestone_id: &str, listed: Listed<'_>) {
    let Listed {
        ask,
        failure,
        mut steps,
        guessed,
    } = listed;
    let next_step = state.runs.get(milestone_id).map_or(0, |run| run.next_step);
    let Some(milestone) = state
        .plan
        .as_mut()
        .and_then(|plan| plan.milestone_mut(milestone_id))
    else {
        return;
    };
    let keep = match (ask, failure.and_then(|f| f.step.as_deref())) {
        (Ask::RetryStep, Some(failed)) => milestone
            .steps
            .iter()
            .position(|s| s.id == failed)
            .unwrap_or(milestone.steps.len()),
        (Ask::Continue, _) => next_step.min(milestone.steps.len()),
        _ => 0,
    };
    let prior_attempt = milestone.steps.get(keep).map(|s| s.attempt).unwrap_or(0);
    for step in &mut steps {
        step.status = StepStatus::Pending;
        step.attempt = if ask == Ask::RetryStep {
            prior_attempt + 1
        } else {
            0
        };
    }
    milestone.steps.truncate(keep);
    milestone.steps.extend(steps);
    let run = state.run_mut(milestone_id);
    run.generation += 1;
    run.next_step = keep;
    run.needs_steps = false;
    // Answered: a later ask for this list is its continuation, not this repair again.
    run.pending_repair = None;
    run.guessed = guessed.iter().map(|i| keep + i).collect();
}

/// Commits one tactical call: its charge, the ladder's verdict on the proposal, and the steps
/// attached or refused. `Some` ends the asking.
pub(super) fn commit(
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
    // A repeat is cut to what it still asks before it is refused ([`recut`]).
    if let (Ok(steps), Some(fp), Some(level)) = (proposal.parsed, &proposal.fingerprint, level)
        && state.ladder.failed_before(milestone_id, fp)
        && let Some(cut) = recut::recut(state, milestone_id, steps, proposal.writes)
        && state.ladder.take_attempt(milestone_id, level, limits)
    {
        recut::attach(state, milestone_id, &cut);
        record.push(
            STEPS_PLANNED,
            json!({"milestone": milestone_id, "attempt": proposal.attempt, "level": level,
                   "fingerprint": cut.fingerprint.0, "steps": cut.steps,
                   "recut": {"repeated_fingerprint": fp.0, "cut_failed": cut.cut_failed,
                             "engine_check": cut.engine_check}}),
        );
        let failure = proposal.request.failure;
        record.plan_version = Some((level.as_str().to_string(), failure.and_then(|f| f.seq)));
        let outcome = match exhausted {
            Some(unit) => Planned::Exhausted { unit },
            None => Planned::Steps {
                fingerprint: cut.fingerprint.0,
            },
        };
        return Ok((record, Some(outcome)));
    }
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
        milestone_id, ask, ..
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
        (Ok(steps), Some(fp)) => Some(attached(state, proposal, steps, fp, record)),
        (Ok(_), None) => None,
    }
}

/// Attaches an accepted list and records it (`milestone.steps_planned`).
fn attached(
    state: &mut TaskState,
    proposal: &Proposal<'_>,
    steps: &[Step],
    fp: String,
    record: &mut Record,
) -> Planned {
    let Request {
        milestone_id,
        ask,
        failure,
        ..
    } = proposal.request;
    let (attempt, level) = (proposal.attempt, ask.repair_level());
    let listed = Listed {
        ask,
        failure,
        steps: steps.to_vec(),
        guessed: &proposal.guessed,
    };
    attach(state, milestone_id, listed);
    let granted = offer::grant(state, milestone_id, steps, proposal.extra);
    // An empty first list: the change another milestone made is this one's.
    let adopted = match (steps.is_empty(), ask) {
        (true, Ask::Initial) => made::adopt(state, milestone_id, proposal.covering),
        _ => Vec::new(),
    };
    let shown = if adopted.is_empty() { steps } else { &adopted };
    let mut planned = json!({"milestone": milestone_id, "attempt": attempt,
                             "level": level, "fingerprint": fp, "steps": shown});
    if !adopted.is_empty() {
        planned["adopted"] = json!(
            proposal
                .covering
                .iter()
                .map(made::Made::source)
                .collect::<Vec<_>>()
        );
    }
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
        record.plan_version = Some((level.as_str().to_string(), failure.and_then(|f| f.seq)));
    }
    Planned::Steps { fingerprint: fp }
}
