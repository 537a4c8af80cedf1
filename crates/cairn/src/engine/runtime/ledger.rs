//! The budget ledger as the engine uses it: the domain's [`Ledger`] arithmetic, and the glue
//! that turns every movement into a ledger entry and an event in the same commit.
//!
//! Why movements: the ledger of a task must be derivable from its `ledger_entries` rows alone
//! (docs/architecture.md, "Storage"; [`Ledger::replay`]), so every change is persisted as the
//! movements the domain produced, in the transaction that changes the state. Spend before the plan
//! exists (the gate, the strategic planner and its re-asks) is task overhead stored as it happens;
//! when the books open ([`Ledger::open`]) the allocation is made (the reserve's share, the rest by
//! effort: in the worked example of docs/scenarios.md a 40,000 reserve, 22,857 and 45,714 x3) and
//! the reserve pays that pre-plan spend first. After the allocation, overhead (the goal verifier,
//! L3 replans) is drawn from the reserve too. When milestones run one at a time, a charge the
//! reserve cannot cover borrows the waiting milestones' idle wall time first
//! ([`Lenders`]). Spend nothing in the budget covers is [`overdrawn`]:
//! the engine stops the task as `budget_exhausted`.

use serde_json::{Value, json};

use super::checkpoint::{Record, Spend, TaskState};
use crate::domain::event::kinds;
use crate::domain::ledger::{
    Ledger, LedgerError, LedgerMovement, LedgerPolicy, Lenders, MovementKind, PerUnit, Unit,
};
use crate::domain::plan::MilestoneStatus;
use crate::domain::task::Budget;
use crate::engine::{EngineError, Halt};
use crate::store::NewLedgerEntry;

/// The result of one charge, as the monitor reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Charged {
    /// Largest spent/allocation fraction across units after the charge.
    pub fraction: f64,
    /// The unit that could not be covered, reserve included.
    pub exhausted: Option<Unit>,
}

fn ledger_error(error: LedgerError) -> Halt {
    Halt::Error(EngineError::Other(format!("ledger: {error}")))
}

/// Turns movements into ledger entries, one each, and every run of movements of one kind into
/// one event (`ledger.<kind>`, `{source, movements: [{milestone, unit, amount}]}`): a plan's
/// allocation is one event listing every milestone and unit, not one event per movement,
/// while the entries stay one per movement, so the books replay from them alone.
pub fn persist(movements: &[LedgerMovement], source: &str, record: &mut Record) {
    for m in movements {
        record.ledger.push(NewLedgerEntry {
            milestone_id: m.milestone_id.clone(),
            kind: m.kind.as_str().to_string(),
            unit: m.unit.as_str().to_string(),
            amount: i64::try_from(m.amount).unwrap_or(i64::MAX),
        });
    }
    for run in movements.chunk_by(|a, b| a.kind == b.kind) {
        let Some(first) = run.first() else { continue };
        let listed: Vec<Value> = run
            .iter()
            .map(|m| {
                json!({"milestone": m.milestone_id, "unit": m.unit.as_str(),
                       "amount": m.amount})
            })
            .collect();
        record.push(
            kinds::ledger(first.kind),
            json!({"source": source, "movements": listed}),
        );
    }
}

/// Opens the books for a first plan: the allocation, with the pre-plan overhead already on
/// the books settled from the reserve. Only the allocation is persisted here (the pre-plan
/// charges were stored when they happened, before it, and replay the same way).
pub fn open(
    state: &mut TaskState,
    totals: PerUnit<u64>,
    shares: &[(String, u32)],
    policy: &LedgerPolicy,
    record: &mut Record,
) -> Result<(), Halt> {
    let (ledger, allocation) =
        Ledger::open(totals, &state.pre_plan_overhead, shares, policy).map_err(ledger_error)?;
    state.ledger = Some(ledger);
    persist(&allocation, "initial_plan", record);
    Ok(())
}

/// The first unit in which the task has spent more than its budget covers: before the plan,
/// pre-plan spend over the budget; after it, anything the books leave uncovered.
pub fn overdrawn(state: &TaskState, budget: Budget) -> Option<Unit> {
    if state.refused.is_some() {
        return state.refused;
    }
    match state.ledger.as_ref() {
        Some(ledger) => ledger.uncovered(),
        None => {
            let mut spent = PerUnit::default();
            for m in &state.pre_plan_overhead {
                *spent.get_mut(m.unit) += m.amount;
            }
            over_budget(budget, spent)
        }
    }
}

/// What a call charged to `milestone` (with `None`, to the task's overhead) may still spend
/// per unit (`None`: uncapped): from the books (with one milestone at a time, wall time the
/// waiting milestones could lend included), or before they open, the budget less the pre-plan
/// spend.
pub fn room(state: &TaskState, milestone: Option<&str>, budget: Budget) -> PerUnit<Option<u64>> {
    if let Some(ledger) = state.ledger.as_ref() {
        let mut room = ledger.room(milestone);
        // One milestone (or the task's overhead) at a time: the waiting ones lend it their
        // wall time ([`charge`]).
        if let Some(wall) = room.wall_ms.as_mut() {
            for lender in waiting(state, milestone.unwrap_or_default()) {
                if let Ok(account) = ledger.account(&lender, Unit::WallMs) {
                    *wall = wall.saturating_add(account.allocated.saturating_sub(account.spent));
                }
            }
        }
        return room;
    }
    let totals = PerUnit::from(budget);
    let spent = charged(state);
    let mut room = PerUnit::default();
    for unit in Unit::ALL {
        let total = *totals.get(unit);
        if total > 0 {
            *room.get_mut(unit) = Some(total.saturating_sub(*spent.get(unit)));
        }
    }
    room
}

/// Everything charged to the task, per unit: the books' figure, or before the books open the
/// pre-plan charges. `result.spend` is this, so it always equals the sum of the entries.
pub fn charged(state: &TaskState) -> Spend {
    match state.ledger.as_ref() {
        Some(ledger) => ledger.spent(),
        None => {
            let mut spent = Spend::default();
            for m in &state.pre_plan_overhead {
                *spent.get_mut(m.unit) += m.amount;
            }
            spent
        }
    }
}

/// Charges `spend` to `milestone`, or with `None` to the task's overhead, and records the
/// movements. Returns the charge for the monitor when a milestone was charged, and for overhead
/// only when the reserve could not cover it (the task is then [`overdrawn`]).
pub fn charge(
    state: &mut TaskState,
    milestone: Option<&str>,
    spend: Spend,
    source: &str,
    record: &mut Record,
) -> Result<Option<Charged>, Halt> {
    // Spend is already one figure per ledger unit.
    let usage = spend;
    let waiting = waiting(state, milestone.unwrap_or_default());
    match (milestone, state.ledger.as_mut()) {
        (Some(milestone), Some(ledger)) => {
            let outcome = match state.sequential {
                true => {
                    let lenders = Lenders {
                        unit: Unit::WallMs,
                        waiting: &waiting,
                    };
                    ledger.charge_lending(milestone, usage, lenders)
                }
                false => ledger.charge(milestone, usage),
            }
            .map_err(ledger_error)?;
            state.run_mut(milestone).spend.add(spend);
            persist(&outcome.movements, source, record);
            let fraction = Unit::ALL
                .iter()
                .map(|u| *outcome.used.get(*u))
                .fold(0.0, f64::max);
            // A call refused before it was sent ends the milestone as spend nothing covers.
            Ok(Some(Charged {
                fraction,
                exhausted: outcome.exhausted.first().map(|e| e.unit).or(state.refused),
            }))
        }
        (_, Some(ledger)) => {
            // Overhead runs while the waiting milestones wait, as a milestone does.
            let lenders = Lenders {
                unit: Unit::WallMs,
                waiting: &waiting,
            };
            let outcome = ledger
                .charge_overhead_lending(usage, lenders)
                .map_err(ledger_error)?;
            state.overhead.add(spend);
            persist(&outcome.movements, source, record);
            // Overhead has no allocation of its own: only an exhausted reserve is news.
            let exhausted = outcome.exhausted.first().map(|e| e.unit).or(state.refused);
            Ok(exhausted.map(|unit| Charged {
                fraction: 1.0,
                exhausted: Some(unit),
            }))
        }
        (_, None) => {
            // No books yet: record the spend; `open` replays it ahead of the allocation.
            state.overhead.add(spend);
            let movements: Vec<LedgerMovement> = Unit::ALL
                .iter()
                .map(|unit| LedgerMovement {
                    milestone_id: None,
                    kind: MovementKind::Charge,
                    unit: *unit,
                    amount: *usage.get(*unit),
                })
                .filter(|m| m.amount > 0)
                .collect();
            state.pre_plan_overhead.extend(movements.iter().cloned());
            persist(&movements, source, record);
            Ok(None)
        }
    }
}

/// The milestones of the plan in force waiting to start, in plan order, `charged` aside: what
/// they hold of the wall time is idle while milestones run one at a time.
fn waiting(state: &TaskState, charged: &str) -> Vec<String> {
    if !state.sequential {
        return Vec::new();
    }
    state
        .plan
        .iter()
        .flat_map(|p| p.milestones.iter())
        .filter(|m| m.status == MilestoneStatus::Pending && m.id != charged)
        .map(|m| m.id.clone())
        .collect()
}

/// Largest fraction of its allocation `milestone` has used, over the capped units.
pub fn fraction(ledger: &Ledger, milestone: &str) -> f64 {
    ledger
        .used(milestone)
        .map(|used| Unit::ALL.iter().map(|u| *used.get(*u)).fold(0.0, f64::max))
        .unwrap_or(0.0)
}

/// What is left of a milestone's allocation, per unit.
pub fn remaining(ledger: &Ledger, milestone: &str) -> Spend {
    let left = |unit: Unit| {
        ledger
            .account(milestone, unit)
            .map(|a| a.allocated.saturating_sub(a.spent))
            .unwrap_or(0)
    };
    Spend {
        tokens: left(Unit::Tokens),
        tool_calls: left(Unit::ToolCalls),
        wall_ms: left(Unit::WallMs),
        cost: left(Unit::Cost),
    }
}

/// A finished milestone's unspent allocation back to the reserve.
pub fn release(state: &mut TaskState, milestone: &str, record: &mut Record) -> Result<(), Halt> {
    if let Some(ledger) = state.ledger.as_mut() {
        let movements = ledger.return_unspent(milestone).map_err(ledger_error)?;
        persist(&movements, "milestone_passed", record);
    }
    Ok(())
}

/// Every unfinished milestone's unspent allocation back to the reserve: the plan was handed
/// over to the direct route, whose calls the reserve pays for.
pub fn release_unfinished(state: &mut TaskState, record: &mut Record) -> Result<(), Halt> {
    let unfinished = unfinished(state);
    if let Some(ledger) = state.ledger.as_mut() {
        for id in unfinished {
            let movements = ledger.return_unspent(&id).map_err(ledger_error)?;
            persist(&movements, "plan_handed_over", record);
        }
    }
    Ok(())
}

/// The ids of the plan's milestones not done, in plan order: what holds an allocation a new
/// version or a handover takes back.
pub fn unfinished(state: &TaskState) -> Vec<String> {
    state
        .plan
        .iter()
        .flat_map(|p| p.milestones.iter())
        .filter(|m| m.status != MilestoneStatus::Done)
        .map(|m| m.id.clone())
        .collect()
}

/// The first unit in which `spent` is over `budget`, if any (money only when it is capped).
pub fn over_budget(budget: Budget, spent: Spend) -> Option<Unit> {
    let totals = PerUnit::from(budget);
    Unit::ALL.into_iter().find(|unit| {
        let total = *totals.get(*unit);
        (*unit != Unit::Cost || total > 0) && *spent.get(*unit) > total
    })
}
