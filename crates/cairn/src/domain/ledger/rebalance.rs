//! Re-funding the open milestones of a new plan version (an L3 replan).

use super::ops::{movement, split};
use super::{Ledger, LedgerError, LedgerMovement, LedgerPolicy, MovementKind, Unit};

impl Ledger {
    /// Re-funds the open milestones of an L3 plan version: every milestone in `release` (the old
    /// version's unfinished ones) returns its unspent allocation, then the reserve less its own
    /// policy share is split by effort over `shares` (new accounts are opened with a zero
    /// allocation, then granted).
    pub fn rebalance(
        &mut self,
        release: &[String],
        shares: &[(String, u32)],
        policy: &LedgerPolicy,
    ) -> Result<Vec<LedgerMovement>, LedgerError> {
        self.atomically(|l| l.rebalance_inner(release, shares, policy))
    }

    fn rebalance_inner(
        &mut self,
        release: &[String],
        shares: &[(String, u32)],
        policy: &LedgerPolicy,
    ) -> Result<Vec<LedgerMovement>, LedgerError> {
        if shares.iter().any(|(_, effort)| *effort == 0) {
            let (id, _) = shares
                .iter()
                .find(|(_, e)| *e == 0)
                .cloned()
                .unwrap_or_default();
            return Err(LedgerError::ZeroEffort(id));
        }
        let mut movements = Vec::new();
        for id in release {
            movements.extend(self.return_unspent(id)?);
        }
        for unit in Unit::ALL {
            if !self.books.get(unit).capped() {
                continue;
            }
            let mut batch = Vec::new();
            for (id, _) in shares {
                if !self.books.get(unit).accounts.contains_key(id) {
                    batch.push(movement(Some(id.clone()), MovementKind::Allocate, unit, 0));
                }
            }
            let reserve = self.books.get(unit).reserve;
            let pool = reserve - policy.reserve.of(reserve);
            batch.extend(
                split(pool, shares)
                    .into_iter()
                    .filter(|(_, amount)| *amount > 0)
                    .map(|(id, amount)| movement(Some(id), MovementKind::Grant, unit, amount)),
            );
            self.apply_all(&batch)?;
            movements.extend(batch);
        }
        Ok(movements)
    }
}
