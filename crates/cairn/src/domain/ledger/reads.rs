//! Ledger reads: the accounts, how much of an allocation is used, what was spent and what is
//! uncovered. Nothing here changes the books. (Budget pressure, the monitor's "80% of the
//! allocation used and the check not passing", is decided from [`Ledger::used`] by the
//! milestone runner, `engine::planner::runner::after_step`.)

use super::{Account, Ledger, LedgerError, PerUnit, Unit, UnitBook};

impl Ledger {
    /// Fraction of the allocation used, per unit (an empty allocation counts as 1 unit, so any
    /// spend against it reads as at least 100%).
    pub fn used(&self, milestone: &str) -> Result<PerUnit<f64>, LedgerError> {
        let mut used = PerUnit::default();
        self.account(milestone, Unit::Tokens)?;
        for unit in Unit::ALL
            .into_iter()
            .filter(|u| self.books.get(*u).capped())
        {
            let a = self.account(milestone, unit)?;
            *used.get_mut(unit) = a.spent as f64 / a.allocated.max(1) as f64;
        }
        Ok(used)
    }

    /// Everything charged, per unit (milestones, dropped ones included, and overhead): the
    /// task's spend as the books know it.
    pub fn spent(&self) -> PerUnit<u64> {
        let mut spent = PerUnit::default();
        for unit in Unit::ALL {
            *spent.get_mut(unit) = self.books.get(unit).spent();
        }
        spent
    }

    /// What a charge to `milestone` (with `None`, to the task's overhead) may still spend per
    /// unit before anything is uncovered: the milestone's unspent allocation plus the reserve a
    /// charge draws grants from. `None` for an uncapped unit. A call is reserved against this
    /// before it is sent (`engine::runtime::reserve`).
    pub fn room(&self, milestone: Option<&str>) -> PerUnit<Option<u64>> {
        let mut room = PerUnit::default();
        for unit in Unit::ALL {
            let book = self.books.get(unit);
            if !book.capped() {
                continue;
            }
            let own = milestone
                .and_then(|id| book.accounts.get(id))
                .map_or(0, |a| a.allocated.saturating_sub(a.spent));
            *room.get_mut(unit) = Some(own.saturating_add(book.reserve));
        }
        room
    }

    /// The first unit with spend nothing in the budget covers, if any.
    pub fn uncovered(&self) -> Option<Unit> {
        Unit::ALL
            .into_iter()
            .find(|unit| self.books.get(*unit).uncovered() > 0)
    }

    /// The milestones with an account, in id order (every milestone any plan version funded).
    pub fn milestones(&self) -> impl Iterator<Item = &str> {
        self.books.tokens.accounts.keys().map(String::as_str)
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
        self.account(milestone, Unit::Tokens)?;
        for unit in Unit::ALL {
            // An uncapped unit's account opens with its first charge.
            *spent.get_mut(unit) = self.account(milestone, unit).map_or(0, |a| a.spent);
        }
        Ok(spent)
    }
}
