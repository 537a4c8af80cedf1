//! The tactical planner: steps for one milestone, just before it runs.
//!
//! The prompt is concrete, and small for it (a small prompt is cheaper and more reliable): one
//! milestone, its acceptance check, its remaining budget, the artifacts of the milestones it
//! depends on and the full schemas of the tools it may use. On repair it also carries what was
//! tried and how it failed. A step list that fails validation goes back to the model with the
//! errors, a bounded number of times; a repair list whose fingerprint already failed is not
//! executed again: it is refused and asked once more without the tools that failed in the
//! milestone ([`offer::narrowed`], when another tool stays offered) or, with `explore_repeats`,
//! sampled warmer ([`Sampling::Explore`]); a repeat that cannot be asked so escalates.

mod attach;
mod input;
mod made;
mod offer;
mod proposal;
mod recut;
mod repeat;

use crate::domain::ledger::Unit;
use crate::domain::plan::fingerprint::{Fingerprint, of_steps};
use crate::domain::plan::{Milestone, Step};
use crate::domain::repair::RepairLevel;
use crate::engine::Halt;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::attempt::{Asked, Attempt};
use crate::engine::runtime::checkpoint::Failure;
use crate::engine::runtime::ports::{FailureKind, Purpose, Sampling};
use crate::engine::{prompts, schemas};
use attach::commit;
pub(super) use offer::{failing_tools, goal_names_action};
use proposal::{guesses, parse};
use repeat::{escalate_repeat, repeat_refusal};

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
    /// A re-ask after a repeated repair: the tools that failed here are not offered.
    pub(super) narrowed: bool,
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
    /// A repair proposal that repeats a failed list is refused and asked once more (without
    /// the tools that failed here, or sampled warmer) before the ladder escalates on it.
    may_reask_repeat: bool,
    /// Indices (in the proposed list) of the steps naming a value the planner was not shown.
    guessed: Vec<usize>,
    /// Whether a tool has side effects (a call after a write is not "already made").
    writes: &'a (dyn Fn(&str) -> bool + Sync),
    /// On a first list: the changes other milestones made with this milestone's tools, which an
    /// empty answer adopts ([`made`]).
    covering: &'a [made::Made],
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
    let mut narrowed = false;
    let mut repeated: Option<Fingerprint> = None;
    for reask in 0..=cx.config.max_reasks {
        let request = Request {
            milestone_id,
            ask,
            failure,
            errors: errors.as_deref(),
            narrowed,
        };
        let Some(answered) = ask_once(cx, &request, sampling).await else {
            return Ok(Planned::Unusable {
                reason: format!("milestone {milestone_id} is not in the plan"),
            });
        };
        let Answered { asked, offered, .. } = &answered;
        let writes = |tool: &str| cx.specs.get(tool).is_some_and(|spec| spec.side_effects);
        let may_be_done = !answered.covering.is_empty();
        let parsed = parse(asked, &answered.milestone, ask, may_be_done, &writes);
        let fingerprint = parsed.as_ref().ok().map(|steps| of_steps(steps));
        let guessed = parsed
            .as_ref()
            .map_or_else(|_| Vec::new(), |steps| guesses(steps, &answered.shown));
        let proposal = Proposal {
            request,
            attempt: answered.attempt,
            parsed: &parsed,
            transient: matches!(&asked.reply, Err(e) if e.kind != FailureKind::InvalidOutput),
            fingerprint: fingerprint.clone(),
            extra: &offered.extra,
            may_reask_repeat: reask < cx.config.max_reasks
                && ((cx.config.explore_repeats && sampling == Sampling::Endpoint)
                    || offered.narrowable),
            guessed,
            writes: &writes,
            covering: &answered.covering,
        };
        let (_, outcome) = cx
            .journal
            .record_prompted(&asked.prompt, |state| {
                commit(state, proposal, asked, &limits)
            })
            .await?;
        if let Some(outcome) = outcome {
            return Ok(outcome);
        }
        // The narrowed question is asked once: an unusable answer to it leaves the ladder where
        // the repeat put it.
        if let (true, Some(level), Some(fp)) = (narrowed, ask.repair_level(), repeated.take()) {
            return escalate_repeat(cx, milestone_id, level, fp, &limits).await;
        }
        errors = Some(match (parsed, fingerprint) {
            (Err(reason), _) => reason,
            // Refused as a repeat: the question once more, with the refusal stated, without the
            // tools that failed here (the schema no longer allows the call that failed), or
            // sampled warmer where nothing can be taken away.
            (Ok(_), fp) => {
                if offered.narrowable {
                    narrowed = true;
                    repeated.clone_from(&fp);
                } else {
                    sampling = Sampling::Explore;
                }
                repeat_refusal(fp, offered)
            }
        });
    }
    Ok(Planned::Unusable {
        reason: errors.unwrap_or_else(|| "no usable step list".into()),
    })
}

/// One tactical call as it was asked and answered.
struct Answered {
    milestone: Milestone,
    attempt: u32,
    offered: offer::Offer,
    /// The text of the input, less the list it may replace ([`input::shown`]).
    shown: String,
    asked: Asked,
    /// On a first list: the changes other milestones made with this milestone's tools.
    covering: Vec<made::Made>,
}

/// Asks the tactical planner `request` once; `None` when the plan has no such milestone.
async fn ask_once(cx: &Attempt, request: &Request<'_>, sampling: Sampling) -> Option<Answered> {
    let (milestone, attempt, input, offered, made) = read_question(cx, request).await?;
    let turns = input::repair_turns(request, &milestone);
    let shown = input::shown(&input);
    let covering: Vec<made::Made> = match request.ask {
        Ask::Initial => made::covering(&made, &milestone)
            .into_iter()
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    let question = Question {
        purpose: Purpose::Tactical,
        milestone: Some(request.milestone_id),
        attempt,
        prompt: &prompts::TACTICAL,
        input,
        turns,
        // An empty list: a continuation's "nothing left", or a change already made.
        schema: schemas::tactical(
            &cx.tool_schemas(&offered.tools),
            request.ask == Ask::Continue || !covering.is_empty(),
        ),
    };
    let asked = cx.ask_sampled(question, sampling).await;
    Some(Answered {
        milestone,
        attempt,
        offered,
        shown,
        asked,
        covering,
    })
}

/// What the question needs: the milestone, the call's attempt number, the input and the tools
/// offered, read under the journal's lock (no copy of the state); `None` when the plan has no
/// such milestone.
async fn read_question(
    cx: &Attempt,
    request: &Request<'_>,
) -> Option<(
    Milestone,
    u32,
    serde_json::Value,
    offer::Offer,
    Vec<made::Made>,
)> {
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
            let writes = |tool: &str| cx.specs.get(tool).is_some_and(|spec| spec.side_effects);
            let offered = offer::narrowed(
                offered,
                observations,
                request.ask,
                request.narrowed,
                &writes,
            );
            let made = made::elsewhere(state, milestone_id, &writes);
            let input = input::input(cx, request, state, &milestone, &offered.tools, &made);
            Some((milestone, attempt, input, offered, made))
        })
        .await
}
