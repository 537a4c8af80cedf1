//! Ledger reads: the accounts, how much of an allocation is used, and the monitor's repair
//! predicate. Nothing here changes the books.

use super::{Account, Ledger, LedgerError, LedgerPolicy, PerUnit, Unit, UnitBook};

impl Ledger {
    /// Fraction of the allocation used, per unit (an empty allocation counts as 1 unit, so any
    /// spend against it reads as at least 100%).
    pub fn used(&self, milestone: &str) -> Result<PerUnit<f64>, LedgerError> {
        let mut used = PerUnit::default();
        for unit in Unit::ALL {
            let a = self.account(milestone, unit)?;
            *used.get_mut(unit) = a.spent as f64 / a.allocated.max(1) as f64;
        }
        Ok(used)
    }

    /// The monitor's predicate: the milestone's check is not passing and some unit has used at
    /// least `policy.repair_at` of its allocation, so repair starts instead of more tries.
    pub fn should_start_repair(
        &self,
        milestone: &str,
        check_passing: bool,
        policy: &LedgerPolicy,
    ) -> Result<bool, LedgerError> {
        if check_passing {
            return Ok(false);
        }
        for unit in Unit::ALL {
            let a = self.account(milestone, unit)?;
            if a.spent > 0 && policy.repair_at.reached(a.spent, a.allocated) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub fn book(&self, unit: Unit) -> &UnitBook {
        self.books.get(unit)
    }

    pub fn account(&self, milestone: &str, unit: Unit) -> Result<&Account, LedgerError> {
        self.books
            .get(unit)
            .accounts
            .get(milestone)
            .ok_or_else(|| LedgerError::UnknownMilestone(milestone.into()))
    }

    /// Spend per unit of one milestone, for the task's report.
    pub fn spent_by(&self, milestone: &str) -> Result<PerUnit<u64>, LedgerError> {
        let mut spent = PerUnit::default();
        for unit in Unit::ALL {
            *spent.get_mut(unit) = self.account(milestone, unit)?.spent;
        }
        Ok(spent)
    }
}
