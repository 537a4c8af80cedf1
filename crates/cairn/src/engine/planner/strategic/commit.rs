//! Committing one strategic answer: its charge, and the plan refused, or installed with its
//! books opened or rebalanced and the progress of running milestones carried.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::super::carry;
use crate::domain::event::kinds::{PLAN_ACCEPTED, PLAN_REFUSED};
use crate::domain::ledger::{LedgerPolicy, PerUnit};
use crate::domain::plan::fingerprint::of_plan;
use crate::domain::plan::{MilestoneStatus, Plan};
use crate::domain::repair::RepairLevel;
use crate::engine::Halt;
use crate::engine::runtime::attempt::{Asked, Attempt};
use crate::engine::runtime::checkpoint::{Phase, Record, TaskState};
use crate::engine::runtime::ledger;

/// One strategic answer, judged, as it is committed.
pub(super) struct Proposal<'a> {
    pub(super) attempt: u32,
    pub(super) checked: &'a Result<super::Amended, String>,
    /// The model's answer, when it gave one.
    pub(super) proposal: Option<Value>,
    /// A valid L3 plan refused as identical to a failed one (not counted as invalid).
    pub(super) repeated: bool,
    /// The plan version's reason (`initial`, `replan_strategy` or `new_constraint`).
    pub(super) reason: &'static str,
    /// The event that caused an L3 replan.
    pub(super) cause: Option<i64>,
    /// The milestone whose failure caused an L3 replan (re-planned, not carried).
    pub(super) replanned: Option<&'a str>,
    /// What becomes of a running milestone's unrun steps.
    pub(super) unfinished: carry::Unfinished,
}

/// Commits one strategic call: its charge, and the plan refused or installed. Returns whether
/// the plan was accepted.
pub(super) fn commit(
    state: &mut TaskState,
    cx: &Attempt,
    asked: &Asked,
    proposal: &Proposal<'_>,
) -> Result<(Record, bool), Halt> {
    let Proposal {
        attempt,
        checked,
        proposal,
        repeated,
        reason,
        cause,
        replanned,
        unfinished,
    } = proposal;
    let mut record = Record::default();
    ledger::charge(state, None, asked.spend, "strategic", &mut record)?;
    state.strategic_calls = *attempt;
    if proposal.is_some() {
        state.metrics.plans_proposed += 1;
    }
    match checked {
        Err(errors) => {
            if proposal.is_some() {
                state.metrics.plans_invalid += u32::from(!repeated);
                state.metrics.planner_failures += 1;
            }
            record.push(
                PLAN_REFUSED,
                json!({"attempt": attempt, "errors": errors, "proposal": proposal,
                       "repeated": repeated}),
            );
            Ok((record, false))
        }
        Ok(super::Amended { plan, amended }) => {
            install(
                state,
                plan.clone(),
                cx,
                (*replanned, *unfinished),
                &mut record,
            )?;
            state.ladder.plan_installed(of_plan(plan));
            let mut accepted = json!({"attempt": attempt, "version": state.plan_version + 1,
                                      "reason": reason, "milestones": plan.milestones.len()});
            if !amended.is_empty() {
                // What the engine changed in the proposal before accepting it: a check no
                // granted tool could back, a milestone granted no tool.
                accepted["amended"] = json!(amended);
            }
            record.push(PLAN_ACCEPTED, accepted);
            record.plan_version = Some((reason.to_string(), *cause));
            Ok((record, true))
        }
    }
}

/// Puts an accepted plan in place with its ledger: a first plan opens the books; a replacement
/// rebalances them (the replaced milestones return their unspent shares, and the reserve above
/// its policy share is granted to the new unfinished milestones by effort). A replacement
/// also carries the progress of milestones still running ([`carry::in_flight`]): their
/// finished steps stay done and their execution records stay as they were.
fn install(
    state: &mut TaskState,
    mut plan: Plan,
    cx: &Attempt,
    (replanned, unfinished): (Option<&str>, carry::Unfinished),
    record: &mut Record,
) -> Result<(), Halt> {
    // Not carried: the milestone that asked for this strategy, and any other whose own
    // latest repair asked for one (its request was not the first).
    let mut asked_l3: BTreeSet<String> = state
        .runs
        .iter()
        .filter(|(_, run)| run.repairs.levels.last() == Some(&Some(RepairLevel::ReplanStrategy)))
        .map(|(id, _)| id.clone())
        .collect();
    asked_l3.extend(replanned.map(str::to_string));
    let carried = match &state.plan {
        Some(old) => carry::in_flight(old, &mut plan, &asked_l3, unfinished),
        None => BTreeSet::new(),
    };
    let pending: Vec<(String, u32)> = plan
        .milestones
        .iter()
        .filter(|m| m.status != MilestoneStatus::Done)
        .map(|m| (m.id.clone(), m.effort))
        .collect();
    let policy = LedgerPolicy {
        reserve: crate::domain::ledger::Fraction::from_f64(cx.config.reserve_frac),
    };
    // The replaced version's unfinished milestones return what they hold.
    let release = ledger::unfinished(state);
    match state.ledger.as_mut() {
        None => {
            let totals = PerUnit::from(cx.task().budget);
            ledger::open(state, totals, &plan.shares(), &policy, record)?;
        }
        Some(books) => {
            let movements = books.rebalance(&release, &pending, &policy).map_err(|e| {
                Halt::Error(crate::engine::EngineError::Other(format!("ledger: {e}")))
            })?;
            ledger::persist(&movements, "replan_strategy", record);
        }
    }
    if unfinished == carry::Unfinished::Rewrite {
        // The rest of a carried list is written again, after its finished steps.
        for id in &carried {
            state.run_mut(id).needs_steps = true;
        }
    }
    for (id, _) in pending.iter().filter(|(id, _)| !carried.contains(id)) {
        let run = state.run_mut(id);
        run.needs_steps = false;
        run.pending_repair = None;
        run.next_step = 0;
        run.outcome = None;
        run.pressured = false;
    }
    state.plan = Some(plan);
    state.phase = Phase::Execute;
    Ok(())
}
