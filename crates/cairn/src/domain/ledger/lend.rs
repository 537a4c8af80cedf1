//! Lending one unit between milestones that run one at a time.
//!
//! Wall-clock time is spent whether a milestone runs or waits. When milestones run one at a time
//! (`max_parallel` 1, as on a one-slot local model server), a waiting sibling's wall-time
//! allocation sits idle while another milestone runs, and a milestone whose one call was slow
//! would be stopped over budget while the task still had time: measured live on the 1.5B model,
//! a tactical call that took 314 s (two tasks sharing two cores) spent its milestone's
//! allocation and the reserve, and the task ended `budget_exhausted` with two milestones'
//! time unspent. A charge the reserve cannot cover therefore first has the waiting milestones
//! return what they hold of the unit to the reserve (`return` movements, the last in plan order
//! first, only as much as the deficit needs), and the reserve grants the deficit as for any
//! charge. The books stay conserved and replay from the movements like every other change; a
//! waiting milestone that lent is funded again, when it runs, from the reserve and the returns
//! of the milestones that passed before it.

use super::{ChargeOutcome, Ledger, LedgerError, LedgerMovement, MovementKind, PerUnit, Unit};

/// Who may lend: the `waiting` milestones (in plan order), of `unit` only.
#[derive(Debug, Clone, Copy)]
pub struct Lenders<'a> {
    pub unit: Unit,
    pub waiting: &'a [String],
}

impl Ledger {
    /// [`Ledger::charge`], with the waiting milestones lending `lenders.unit` first where the
    /// reserve alone cannot cover the charge. Their `return` movements come first in the outcome.
    pub fn charge_lending(
        &mut self,
        milestone: &str,
        usage: PerUnit<u64>,
        lenders: Lenders<'_>,
    ) -> Result<ChargeOutcome, LedgerError> {
        self.atomically(|l| {
            let lent = l.lend(milestone, *usage.get(lenders.unit), lenders)?;
            let mut outcome = l.charge_inner(milestone, usage)?;
            outcome.movements.splice(0..0, lent);
            Ok(outcome)
        })
    }

    /// [`Ledger::charge_overhead`], with the waiting milestones lending `lenders.unit` first where
    /// the reserve alone cannot cover the charge: task overhead (an L3 replan, the goal
    /// verifier) runs while they wait as a milestone does. Measured live on the 1.5B model, an
    /// L3 re-ask was cut at the reserve's last 72 s while the waiting milestones held 540 s.
    pub fn charge_overhead_lending(
        &mut self,
        usage: PerUnit<u64>,
        lenders: Lenders<'_>,
    ) -> Result<ChargeOutcome, LedgerError> {
        self.atomically(|l| {
            let unit = lenders.unit;
            let need = usage.get(unit).saturating_sub(l.book(unit).reserve);
            let lent = l.lend_need(None, need, lenders)?;
            let mut outcome = l.charge_overhead_inner(usage)?;
            outcome.movements.splice(0..0, lent);
            Ok(outcome)
        })
    }

    fn lend(
        &mut self,
        milestone: &str,
        amount: u64,
        lenders: Lenders<'_>,
    ) -> Result<Vec<LedgerMovement>, LedgerError> {
        let unit = lenders.unit;
        let account = self.account(milestone, unit)?;
        let deficit = account
            .spent
            .saturating_add(amount)
            .saturating_sub(account.allocated);
        let need = deficit.saturating_sub(self.book(unit).reserve);
        self.lend_need(Some(milestone), need, lenders)
    }

    /// Has the waiting milestones (not `borrower`) return up to `need` of the unit to the
    /// reserve, the last in plan order first.
    fn lend_need(
        &mut self,
        borrower: Option<&str>,
        mut need: u64,
        lenders: Lenders<'_>,
    ) -> Result<Vec<LedgerMovement>, LedgerError> {
        let unit = lenders.unit;
        let mut movements = Vec::new();
        for id in lenders.waiting.iter().rev() {
            if need == 0 {
                break;
            }
            let Ok(lender) = self.account(id, unit) else {
                continue;
            };
            let lent = lender.allocated.saturating_sub(lender.spent).min(need);
            if Some(id.as_str()) == borrower || lent == 0 {
                continue;
            }
            let m = LedgerMovement {
                milestone_id: Some(id.clone()),
                kind: MovementKind::Return,
                unit,
                amount: lent,
            };
            self.apply(&m)?;
            movements.push(m);
            need -= lent;
        }
        Ok(movements)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ledger::LedgerPolicy;

    fn wall(ms: u64) -> PerUnit<u64> {
        PerUnit {
            tokens: 0,
            tool_calls: 0,
            wall_ms: ms,
            cost: 0,
        }
    }

    const TOTALS: PerUnit<u64> = PerUnit {
        tokens: 1_000,
        tool_calls: 10,
        wall_ms: 10_000,
        cost: 0,
    };

    /// 10,000 ms: a 2,000 reserve, then 2,666 for each of three milestones; with the
    /// allocation's movements.
    fn books() -> (Ledger, Vec<LedgerMovement>) {
        let shares: Vec<(String, u32)> = ["m1", "m2", "m3"]
            .iter()
            .map(|id| (id.to_string(), 1))
            .collect();
        Ledger::allocate(TOTALS, &shares, &LedgerPolicy::default()).expect("allocate")
    }

    fn waiting() -> Vec<String> {
        vec!["m2".into(), "m3".into()]
    }

    #[test]
    fn a_slow_charge_borrows_what_the_reserve_lacks_from_the_last_waiting_milestone() {
        let (mut ledger, allocation) = books();
        let lenders = Lenders {
            unit: Unit::WallMs,
            waiting: &waiting(),
        };
        // 5,666 against 2,666: a 3,000 deficit, 2,000 from the reserve, 1,000 lent by m3.
        let outcome = ledger
            .charge_lending("m1", wall(5_666), lenders)
            .expect("charge");
        assert!(outcome.exhausted.is_empty(), "{outcome:?}");
        let kinds: Vec<(MovementKind, Option<&str>, u64)> = outcome
            .movements
            .iter()
            .map(|m| (m.kind, m.milestone_id.as_deref(), m.amount))
            .collect();
        assert_eq!(
            kinds,
            [
                (MovementKind::Return, Some("m3"), 1_000),
                (MovementKind::Grant, Some("m1"), 3_000),
                (MovementKind::Charge, Some("m1"), 5_666),
            ]
        );
        assert_eq!(
            ledger.account("m3", Unit::WallMs).expect("m3").allocated,
            1_666
        );
        assert_eq!(
            ledger.account("m2", Unit::WallMs).expect("m2").allocated,
            2_666
        );
        assert!(ledger.book(Unit::WallMs).conserved());
        // The same movements replayed give the same books.
        let replayed =
            Ledger::replay(TOTALS, &[allocation, outcome.movements].concat()).expect("replay");
        assert_eq!(replayed, ledger);
    }

    #[test]
    fn only_the_lent_unit_is_lent_and_what_nobody_holds_is_still_exhausted() {
        let (mut ledger, _) = books();
        let lenders = Lenders {
            unit: Unit::WallMs,
            waiting: &waiting(),
        };
        let tokens = PerUnit {
            tokens: 1_000,
            tool_calls: 0,
            wall_ms: 0,
            cost: 0,
        };
        let outcome = ledger
            .charge_lending("m1", tokens, lenders)
            .expect("charge");
        assert!(
            outcome
                .movements
                .iter()
                .all(|m| m.kind != MovementKind::Return)
        );
        assert_eq!(outcome.exhausted.len(), 1, "tokens are never lent");
        // More wall time than the whole task has: everything lent, still exhausted.
        let outcome = ledger
            .charge_lending("m1", wall(20_000), lenders)
            .expect("charge");
        assert_eq!(outcome.exhausted.len(), 1);
        assert_eq!(ledger.account("m2", Unit::WallMs).expect("m2").allocated, 0);
        assert_eq!(ledger.account("m3", Unit::WallMs).expect("m3").allocated, 0);
        assert!(ledger.book(Unit::WallMs).conserved());
    }

    #[test]
    fn overhead_the_reserve_cannot_cover_borrows_from_the_waiting_milestones() {
        let (mut ledger, _) = books();
        let lenders = Lenders {
            unit: Unit::WallMs,
            waiting: &waiting(),
        };
        // 3,500 of overhead against a 2,000 reserve: 1,500 lent by m3, nothing uncovered.
        let outcome = ledger
            .charge_overhead_lending(wall(3_500), lenders)
            .expect("charge");
        assert!(outcome.exhausted.is_empty(), "{outcome:?}");
        let kinds: Vec<(MovementKind, Option<&str>, u64)> = outcome
            .movements
            .iter()
            .map(|m| (m.kind, m.milestone_id.as_deref(), m.amount))
            .collect();
        assert_eq!(
            kinds,
            [
                (MovementKind::Return, Some("m3"), 1_500),
                (MovementKind::Charge, None, 3_500),
            ]
        );
        assert!(ledger.book(Unit::WallMs).conserved());
        // With no one waiting, the same charge leaves 1,500 uncovered.
        let (mut alone, _) = books();
        let none = Lenders {
            unit: Unit::WallMs,
            waiting: &[],
        };
        let outcome = alone
            .charge_overhead_lending(wall(3_500), none)
            .expect("charge");
        assert_eq!(outcome.exhausted.len(), 1, "{outcome:?}");
    }
}
