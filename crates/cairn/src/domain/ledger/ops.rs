//! Ledger operations. Each computes its movements and passes them through [`Ledger::apply`],
//! the one place the books change, so live state and replayed state cannot diverge.

use super::{
    Account, BudgetExhausted, ChargeOutcome, Ledger, LedgerError, LedgerMovement, LedgerPolicy,
    MovementKind, PerUnit, Unit, UnitBook,
};

fn inconsistent(what: String) -> LedgerError {
    LedgerError::Inconsistent(what)
}

impl Ledger {
    /// Opens the books: per unit, the reserve share of the total, then each milestone's share
    /// of the rest by effort, rounded down. Returns the ledger and its `allocate` movements
    /// (reserve first, then milestones in the given order, per unit).
    pub fn allocate(
        totals: PerUnit<u64>,
        shares: &[(String, u32)],
        policy: &LedgerPolicy,
    ) -> Result<(Ledger, Vec<LedgerMovement>), LedgerError> {
        Ledger::open(totals, &[], shares, policy)
    }

    /// Opens the books after task-level spend that came before the plan (the gate, strategic calls
    /// and their re-asks; `pre_plan` holds those `charge` movements, already stored). The
    /// allocation is [`Ledger::allocate`]'s, and the reserve it funds settles the pre-plan spend
    /// first (see [`Ledger::apply`]), so that spend is drawn from the reserve and the milestones'
    /// shares are those of a plain allocation (the worked example's, docs/scenarios.md). Only
    /// pre-plan spend beyond the reserve's share enlarges the reserve's allocation (taken from the
    /// pool before the split); spend beyond the whole budget stays uncovered
    /// ([`Ledger::uncovered`]). Returns the ledger with `pre_plan` and the allocation applied, and
    /// the allocation's movements.
    pub fn open(
        totals: PerUnit<u64>,
        pre_plan: &[LedgerMovement],
        shares: &[(String, u32)],
        policy: &LedgerPolicy,
    ) -> Result<(Ledger, Vec<LedgerMovement>), LedgerError> {
        if shares.is_empty() {
            return Err(LedgerError::NoMilestones);
        }
        let mut seen = std::collections::BTreeSet::new();
        for (id, effort) in shares {
            if !seen.insert(id.as_str()) {
                return Err(LedgerError::DuplicateMilestone(id.clone()));
            }
            if *effort == 0 {
                return Err(LedgerError::ZeroEffort(id.clone()));
            }
        }
        if let Some(m) = pre_plan
            .iter()
            .find(|m| m.kind != MovementKind::Charge || m.milestone_id.is_some())
        {
            return Err(inconsistent(format!(
                "pre-plan {} of {} is not task-level spend",
                m.kind.as_str(),
                m.milestone_id.as_deref().unwrap_or("(task)")
            )));
        }
        let mut ledger = Ledger::with_totals(totals);
        ledger.apply_all(pre_plan)?;
        let mut movements = Vec::new();
        for unit in Unit::ALL {
            let total = *totals.get(unit);
            if total == 0 {
                // Uncapped (money without a cap): counted, never allocated.
                continue;
            }
            let owed = ledger.books.get(unit).owed().min(total);
            let reserve = policy.reserve.of(total).max(owed);
            movements.push(movement(None, MovementKind::Allocate, unit, reserve));
            movements.extend(
                split(total - reserve, shares)
                    .into_iter()
                    .map(|(id, amount)| movement(Some(id), MovementKind::Allocate, unit, amount)),
            );
        }
        ledger.apply_all(&movements)?;
        Ok((ledger, movements))
    }

    /// Rebuilds a ledger from the task's totals and its stored movements, in order.
    pub fn replay(
        totals: PerUnit<u64>,
        movements: &[LedgerMovement],
    ) -> Result<Ledger, LedgerError> {
        let mut ledger = Ledger::with_totals(totals);
        ledger.apply_all(movements)?;
        Ok(ledger)
    }

    fn with_totals(totals: PerUnit<u64>) -> Ledger {
        let mut ledger = Ledger::default();
        for unit in Unit::ALL {
            let book = ledger.books.get_mut(unit);
            book.total = *totals.get(unit);
            book.unallocated = book.total;
        }
        ledger
    }

    pub(super) fn apply_all(&mut self, movements: &[LedgerMovement]) -> Result<(), LedgerError> {
        movements.iter().try_for_each(|m| self.apply(m))
    }

    /// Applies one movement; refuses any that would break conservation or draw more than is
    /// there. The books are unchanged when it returns an error.
    pub fn apply(&mut self, m: &LedgerMovement) -> Result<(), LedgerError> {
        let book = self.books.get_mut(m.unit);
        let amount = m.amount;
        let short = |what: &str, have: u64| {
            inconsistent(format!(
                "{} {} of {amount} {} exceeds {what} {have}",
                m.kind.as_str(),
                m.milestone_id.as_deref().unwrap_or("(task)"),
                m.unit.as_str()
            ))
        };
        match (m.kind, m.milestone_id.as_deref()) {
            (MovementKind::Allocate, target) => {
                book.unallocated = book
                    .unallocated
                    .checked_sub(amount)
                    .ok_or_else(|| short("unallocated", book.unallocated))?;
                match target {
                    None => {
                        book.reserve += amount;
                        book.initial_reserve += amount;
                        book.settle_overhead();
                    }
                    Some(id) => {
                        book.accounts.entry(id.to_string()).or_default().allocated += amount
                    }
                }
            }
            (MovementKind::Charge, None) => {
                let drawn = amount.min(book.reserve);
                book.reserve -= drawn;
                book.overhead_drawn += drawn;
                book.overhead_spent = add(book.overhead_spent, amount)?;
            }
            (MovementKind::Charge, Some(id)) => {
                let account = match book.capped() {
                    true => account_mut(book, id)?,
                    // An uncapped unit allocates nothing, so its accounts open with a charge.
                    false => book.accounts.entry(id.to_string()).or_default(),
                };
                account.spent = add(account.spent, amount)?;
            }
            (MovementKind::Grant, Some(id)) => {
                if amount > book.reserve {
                    return Err(short("reserve", book.reserve));
                }
                let account = account_mut(book, id)?;
                account.allocated += amount;
                account.granted += amount;
                book.reserve -= amount;
            }
            (MovementKind::Return, Some(id)) => {
                let account = account_mut(book, id)?;
                let unspent = account.allocated.saturating_sub(account.spent);
                if amount > unspent {
                    return Err(short("unspent", unspent));
                }
                account.allocated -= amount;
                account.returned += amount;
                book.reserve += amount;
                book.settle_overhead();
            }
            (MovementKind::Grant | MovementKind::Return, None) => {
                return Err(inconsistent(format!(
                    "{} needs a milestone",
                    m.kind.as_str()
                )));
            }
        }
        Ok(())
    }

    pub(super) fn charge_inner(
        &mut self,
        milestone: &str,
        usage: PerUnit<u64>,
    ) -> Result<ChargeOutcome, LedgerError> {
        self.account(milestone, Unit::Tokens)?;
        let mut movements = Vec::new();
        let mut exhausted = Vec::new();
        for unit in Unit::ALL {
            let amount = *usage.get(unit);
            if amount == 0 {
                continue;
            }
            let book = self.books.get(unit);
            if !book.capped() {
                let m = movement(Some(milestone.into()), MovementKind::Charge, unit, amount);
                self.apply(&m)?;
                movements.push(m);
                continue;
            }
            let account = self.account(milestone, unit)?;
            let after = add(account.spent, amount)?;
            let deficit = after.saturating_sub(account.allocated);
            let grant = deficit.min(book.reserve);
            let mut batch = Vec::new();
            if grant > 0 {
                batch.push(movement(
                    Some(milestone.into()),
                    MovementKind::Grant,
                    unit,
                    grant,
                ));
            }
            batch.push(movement(
                Some(milestone.into()),
                MovementKind::Charge,
                unit,
                amount,
            ));
            self.apply_all(&batch)?;
            movements.extend(batch);
            let overrun = self.account(milestone, unit)?.overrun();
            if overrun > 0 {
                exhausted.push(BudgetExhausted {
                    milestone_id: Some(milestone.into()),
                    unit,
                    overrun,
                });
            }
        }
        Ok(ChargeOutcome {
            movements,
            used: self.used(milestone)?,
            exhausted,
        })
    }

    pub(super) fn charge_overhead_inner(
        &mut self,
        usage: PerUnit<u64>,
    ) -> Result<ChargeOutcome, LedgerError> {
        let mut movements = Vec::new();
        let mut exhausted = Vec::new();
        for unit in Unit::ALL {
            let amount = *usage.get(unit);
            if amount == 0 {
                continue;
            }
            let book = self.books.get(unit);
            let uncovered = match book.capped() {
                true => amount.saturating_sub(book.reserve),
                false => 0,
            };
            let m = movement(None, MovementKind::Charge, unit, amount);
            self.apply(&m)?;
            movements.push(m);
            if uncovered > 0 {
                exhausted.push(BudgetExhausted {
                    milestone_id: None,
                    unit,
                    overrun: uncovered,
                });
            }
        }
        Ok(ChargeOutcome {
            movements,
            used: PerUnit::default(),
            exhausted,
        })
    }

    fn return_unspent_inner(
        &mut self,
        milestone: &str,
    ) -> Result<Vec<LedgerMovement>, LedgerError> {
        let mut movements = Vec::new();
        for unit in Unit::ALL {
            if !self.books.get(unit).capped() {
                continue;
            }
            let account = self.account(milestone, unit)?;
            let unspent = account.allocated.saturating_sub(account.spent);
            if unspent > 0 {
                let m = movement(Some(milestone.into()), MovementKind::Return, unit, unspent);
                self.apply(&m)?;
                movements.push(m);
            }
        }
        Ok(movements)
    }

    /// Records spend against `milestone`. A unit that would go over its allocation first draws
    /// a grant of the deficit (at most the reserve); what the reserve cannot cover is reported
    /// as [`BudgetExhausted`]. The spend is recorded either way: it has happened. On error the
    /// books are unchanged (as for every operation below).
    pub fn charge(
        &mut self,
        milestone: &str,
        usage: PerUnit<u64>,
    ) -> Result<ChargeOutcome, LedgerError> {
        self.atomically(|l| l.charge_inner(milestone, usage))
    }

    /// Records task-level spend (gate, planners, goal verifier) against the reserve.
    pub fn charge_overhead(&mut self, usage: PerUnit<u64>) -> Result<ChargeOutcome, LedgerError> {
        self.atomically(|l| l.charge_overhead_inner(usage))
    }

    /// Moves a passed milestone's unspent allocation back to the reserve. Returning twice is
    /// harmless: the second call finds nothing unspent and emits nothing.
    pub fn return_unspent(&mut self, milestone: &str) -> Result<Vec<LedgerMovement>, LedgerError> {
        self.atomically(|l| l.return_unspent_inner(milestone))
    }

    /// Runs an operation that applies several movements; if any fails, none stays applied, so
    /// the live books never hold movements the caller was not given to persist.
    pub(super) fn atomically<T>(
        &mut self,
        op: impl FnOnce(&mut Ledger) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        let snapshot = self.clone();
        op(self).inspect_err(|_| *self = snapshot)
    }
}

fn account_mut<'a>(book: &'a mut UnitBook, id: &str) -> Result<&'a mut Account, LedgerError> {
    book.accounts
        .get_mut(id)
        .ok_or_else(|| LedgerError::UnknownMilestone(id.into()))
}

fn add(a: u64, b: u64) -> Result<u64, LedgerError> {
    a.checked_add(b)
        .ok_or_else(|| inconsistent("amount overflows".into()))
}

pub(super) fn movement(
    milestone_id: Option<String>,
    kind: MovementKind,
    unit: Unit,
    amount: u64,
) -> LedgerMovement {
    LedgerMovement {
        milestone_id,
        kind,
        unit,
        amount,
    }
}

/// `floor(pool * effort / sum(efforts))` per milestone, in the given order.
pub(super) fn split(pool: u64, shares: &[(String, u32)]) -> Vec<(String, u64)> {
    let sum: u128 = shares.iter().map(|(_, e)| u128::from(*e)).sum();
    shares
        .iter()
        .map(|(id, effort)| {
            let amount = (u128::from(pool) * u128::from(*effort))
                .checked_div(sum)
                .unwrap_or(0);
            // amount <= pool because effort <= sum, so it fits in u64.
            (id.clone(), amount as u64)
        })
        .collect()
}
